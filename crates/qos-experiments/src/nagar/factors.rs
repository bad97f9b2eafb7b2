//! What sets SVIA's θ against PVIA's in Nagar's Figs 3–4 (§4.1: SVIA "slightly higher
//! θ (around 10 % in many cases)"): the same load points rerun with one factor of the
//! model switched at a time — the receiving NICs (every channel to a receiver of its
//! own, so no two messages meet at a receiver), and the LANai's operation costs of
//! SVIA's sequence (none at all, or PVIA's) — and the ratio of the two programs' θ
//! shown for each. A factor that leaves the ratio where it is does not cause it.

use qos_core::stream_metrics::Jitter;
use qos_core::units::Duration;
use qos_sim::myrinet::nic::via::ViaCalibration;

use super::channels::{replication_with, Sweep};
use super::scenario::{Defaults, FactorsDef, Scenario, Variant};
use super::Options;
use crate::report::{Cell, Table};

/// A switched factor.
pub struct Factor {
    /// What is switched.
    pub label: &'static str,
    /// The change to SVIA's constants (None: none).
    pub svia: Option<fn(&mut ViaCalibration)>,
    /// Every channel to a receiver of its own.
    pub spread: bool,
}

/// SVIA's LANai operations take no time: its sequence only waits on the host DMA
/// engine and the wire.
fn svia_free(c: &mut ViaCalibration) {
    let rx = c.svia.rx_latency;
    let poll = c.svia.poll;
    c.svia = zero_costs();
    c.svia.rx_latency = rx;
    c.svia.poll = poll;
}

/// SVIA's sequence with PVIA's (2–3 times larger) operation costs.
fn svia_pvia_costs(c: &mut ViaCalibration) {
    let rx = c.svia.rx_latency;
    let poll = c.svia.poll;
    c.svia = c.pvia;
    c.svia.rx_latency = rx;
    c.svia.poll = poll;
}

fn zero_costs() -> qos_sim::myrinet::nic::via::LcpCosts {
    let z = Duration::ZERO;
    qos_sim::myrinet::nic::via::LcpCosts {
        poll: z,
        doorbell: z,
        data_prog: z,
        per_page: z,
        nsdma_start: z,
        status_prog: z,
        status_done: z,
        recv: z,
        rx_latency: z,
    }
}

/// The factors, "as modelled" first.
pub const FACTORS: [Factor; 4] = [
    Factor {
        label: "as modelled",
        svia: None,
        spread: false,
    },
    Factor {
        label: "one receiver per channel (no receive-side collisions)",
        svia: None,
        spread: true,
    },
    Factor {
        label: "SVIA's operations cost nothing (its sequence waits on DMA and the wire only)",
        svia: Some(svia_free),
        spread: false,
    },
    Factor {
        label: "SVIA's sequence with PVIA's operation costs",
        svia: Some(svia_pvia_costs),
        spread: false,
    },
];

/// θ of class `c` at point `i` under `v`, pooled over the scenario's replications as
/// the sweep pools it; and the events simulated.
fn pooled(s: &Scenario, v: Variant, i: usize, c: usize, f: &Factor, opt: Options) -> (f64, u64) {
    let reps = s.replications.unwrap_or(Defaults::REPLICATIONS).max(1);
    let mut j = Jitter::default();
    let mut events = 0;
    for r in 0..reps {
        let tweak = |c: &mut ViaCalibration| {
            if let Some(change) = f.svia {
                change(c);
            }
        };
        let (js, _, _, o) = replication_with(s, v, i, None, opt, r, &tweak, f.spread);
        events += o.events;
        j.negotiated = js[c].negotiated;
        j.merge(&js[c]);
    }
    (j.fraction(), events)
}

/// The table of SVIA/PVIA θ ratios, one row per factor, one column per load; the
/// unchanged runs are taken from the sweeps where they hold the point.
pub fn table(s: &Scenario, def: &FactorsDef, sweeps: &[Sweep], opt: Options) -> (Table, u64) {
    let loads = def.loads.get_ref();
    let mut t = Table::new(
        format!("{}-factors", s.name),
        format!(
            "{}: θ of the {} class, SVIA over PVIA, with one model factor switched",
            s.figure,
            def.class.get_ref()
        ),
        std::iter::once("factor".to_string())
            .chain(loads.iter().map(|l| format!("SVIA/PVIA at {l} MB/s")))
            .chain(loads.iter().map(|l| format!("SVIA θ at {l} MB/s")))
            .chain(loads.iter().map(|l| format!("PVIA θ at {l} MB/s"))),
    );
    let Some(c) = s.class.iter().position(|k| &k.name == def.class.get_ref()) else {
        return (t, 0);
    };
    let mut events = 0;
    let from_sweep = |v: Variant, load: f64| {
        sweeps
            .iter()
            .find(|w| w.variant == v)
            .and_then(|w| w.points.iter().find(|p| (p.load - load).abs() < 0.01))
            .map(|p| p.classes[c].0)
    };
    for f in &FACTORS {
        let mut svia = Vec::new();
        let mut pvia = Vec::new();
        for &load in loads {
            let Some(i) = s.point(load) else {
                continue;
            };
            let mut theta = |v: Variant, changes: bool| match from_sweep(v, load) {
                Some(x) if !changes => x,
                _ => {
                    let (x, e) = pooled(s, v, i, c, f, opt);
                    events += e;
                    x
                }
            };
            // The cost factors change SVIA only; spreading the receivers changes both.
            svia.push(theta(Variant::Svia, f.svia.is_some() || f.spread));
            pvia.push(theta(Variant::Pvia, f.spread));
        }
        let ratios = svia.iter().zip(&pvia).map(|(a, b)| a / b);
        t.push(
            std::iter::once(Cell::from(f.label))
                .chain(ratios.map(|r| Cell::fixed(r, 2)))
                .chain(svia.iter().map(|x| Cell::fixed(*x, 4)))
                .chain(pvia.iter().map(|x| Cell::fixed(*x, 4)))
                .collect::<Vec<_>>(),
        );
    }
    (t, events)
}
