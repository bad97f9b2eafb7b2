//! What sets the control programs' θ against each other in Nagar's Figs 3–4 and 6: the
//! same load points rerun with one factor of the model switched at a time, and the
//! ratios shown for each. A factor that leaves a ratio where it is does not cause it.
//!
//! - SVIA against PVIA and QoSVIA (§4.1: SVIA "slightly higher θ (around 10 % in many
//!   cases)"): the receiving NICs (every channel to a receiver of its own, so no two
//!   messages meet at a receiver), and the LANai's operation costs of SVIA's sequence
//!   (none at all, or PVIA's).
//! - QoSVIA against PVIA (§4.1: "the latter is a little better", "fewer packets
//!   incurring jitters"; §4.2: "QoS VIA able to sustain the highest load"): QoSVIA's
//!   own costs, time-stamping and mid-queue insertion (Table 1 fits), set to nothing,
//!   so that what is left is its VirtualClock order alone; and its ordered completions
//!   (the model's rule) off. With a `[knee]`, QoSVIA's whole sweep is rerun and its
//!   knee read as the scenario reads it.

use qos_core::stream_metrics::Jitter;
use qos_core::units::Duration;
use qos_sim::myrinet::nic::via::ViaCalibration;

use super::channels::{point_with, replication_with, Sweep};
use super::model::Options;
use super::scenario::{Defaults, FactorsDef, Scenario, Variant};
use crate::report::{Cell, Table};

/// A switched factor.
pub struct Factor {
    /// What is switched.
    pub label: &'static str,
    /// The change to the VIA constants (None: none).
    pub change: Option<fn(&mut ViaCalibration)>,
    /// The program whose constants the change touches.
    pub changes: Option<Variant>,
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

/// QoSVIA's own costs (time-stamping, insertion into the ordered queues) are nothing:
/// its LANai does PVIA's work per message, in VirtualClock order.
fn qosvia_free(c: &mut ViaCalibration) {
    c.qosvia.timestamp = Duration::ZERO;
    c.qosvia.insert = Duration::ZERO;
    c.qosvia.scan = Duration::ZERO;
}

/// QoSVIA's LCP takes finished host DMA requests as they finish.
fn qosvia_fcfs_completions(c: &mut ViaCalibration) {
    c.qosvia.ordered_completions = false;
}

/// Both: what is left of QoSVIA is PVIA with its HDMA and NSDMA queues in stamp order.
fn qosvia_order_only(c: &mut ViaCalibration) {
    qosvia_free(c);
    qosvia_fcfs_completions(c);
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

/// SVIA's factors, "as modelled" first.
pub const FACTORS: [Factor; 4] = [
    Factor {
        label: "as modelled",
        change: None,
        changes: None,
        spread: false,
    },
    Factor {
        label: "one receiver per channel (no receive-side collisions)",
        change: None,
        changes: None,
        spread: true,
    },
    Factor {
        label: "SVIA's operations cost nothing (its sequence waits on DMA and the wire only)",
        change: Some(svia_free),
        changes: Some(Variant::Svia),
        spread: false,
    },
    Factor {
        label: "SVIA's sequence with PVIA's operation costs",
        change: Some(svia_pvia_costs),
        changes: Some(Variant::Svia),
        spread: false,
    },
];

/// QoSVIA's factors, "as modelled" first.
pub const QOS_FACTORS: [Factor; 4] = [
    Factor {
        label: "as modelled",
        change: None,
        changes: None,
        spread: false,
    },
    Factor {
        label:
            "QoSVIA's time-stamping and insertion cost nothing (PVIA's work in VirtualClock order)",
        change: Some(qosvia_free),
        changes: Some(Variant::Qosvia),
        spread: false,
    },
    Factor {
        label: "QoSVIA takes finished DMA requests as they finish (no ordered completions)",
        change: Some(qosvia_fcfs_completions),
        changes: Some(Variant::Qosvia),
        spread: false,
    },
    Factor {
        label: "both: PVIA with its DMA queues in stamp order",
        change: Some(qosvia_order_only),
        changes: Some(Variant::Qosvia),
        spread: false,
    },
];

/// Per class, the jitter at point `i` under `v` with factor `f`, pooled over the
/// scenario's replications as the sweep pools it; and the events simulated.
fn pooled(s: &Scenario, v: Variant, i: usize, f: &Factor, opt: Options) -> (Vec<Jitter>, u64) {
    let reps = s.replications.unwrap_or(Defaults::REPLICATIONS).max(1);
    let mut out = vec![Jitter::default(); s.class.len()];
    let mut events = 0;
    let tweak = |c: &mut ViaCalibration| {
        if let (Some(change), true) = (f.change, f.changes == Some(v)) {
            change(c);
        }
    };
    for r in 0..reps {
        let (js, _, _, o) = replication_with(s, v, i, None, opt, r, &tweak, f.spread);
        events += o.events;
        for (acc, j) in out.iter_mut().zip(&js) {
            acc.negotiated = j.negotiated;
            acc.merge(j);
        }
    }
    (out, events)
}

/// Per class (θ, fraction with jitter) of `v` at `load` under `f`: from the sweep when
/// the factor leaves `v` as it ran, else rerun.
fn classes(
    s: &Scenario,
    sweeps: &[Sweep],
    v: Variant,
    load: f64,
    f: &Factor,
    opt: Options,
    events: &mut u64,
) -> Option<Vec<(f64, f64)>> {
    let i = s.point(load)?;
    let unchanged = !f.spread && f.changes != Some(v);
    let from_sweep = sweeps
        .iter()
        .find(|w| w.variant == v)
        .and_then(|w| w.points.iter().find(|p| (p.load - load).abs() < 0.01))
        .map(|p| p.classes.iter().map(|c| (c.0, c.1)).collect());
    match from_sweep {
        Some(x) if unchanged => Some(x),
        _ => {
            let (js, e) = pooled(s, v, i, f, opt);
            *events += e;
            Some(
                js.iter()
                    .map(|j| (j.fraction(), j.jittered_fraction()))
                    .collect(),
            )
        }
    }
}

/// The table of SVIA's θ over PVIA's and QoSVIA's, one row per factor, one column per
/// load; the unchanged runs are taken from the sweeps where they hold the point.
pub fn table(s: &Scenario, def: &FactorsDef, sweeps: &[Sweep], opt: Options) -> (Table, u64) {
    let loads = def.loads.get_ref();
    let qos = s.variants().contains(&Variant::Qosvia);
    let mut t = Table::new(
        format!("{}-factors", s.name),
        format!(
            "{}: θ of the {} class, SVIA over PVIA{}, with one model factor switched",
            s.figure,
            def.class.get_ref(),
            if qos { " and over QoSVIA" } else { "" }
        ),
        std::iter::once("factor".to_string())
            .chain(loads.iter().map(|l| format!("SVIA/PVIA at {l} MB/s")))
            .chain(
                loads
                    .iter()
                    .filter(|_| qos)
                    .map(|l| format!("SVIA/QoSVIA at {l} MB/s")),
            )
            .chain(loads.iter().map(|l| format!("SVIA θ at {l} MB/s")))
            .chain(loads.iter().map(|l| format!("PVIA θ at {l} MB/s"))),
    );
    let Some(c) = s.class.iter().position(|k| &k.name == def.class.get_ref()) else {
        return (t, 0);
    };
    let mut events = 0;
    for f in &FACTORS {
        let mut theta = |v: Variant| -> Vec<f64> {
            loads
                .iter()
                .map(|&l| {
                    classes(s, sweeps, v, l, f, opt, &mut events).map_or(f64::NAN, |x| x[c].0)
                })
                .collect()
        };
        let svia = theta(Variant::Svia);
        let pvia = theta(Variant::Pvia);
        let qosvia = if qos {
            theta(Variant::Qosvia)
        } else {
            Vec::new()
        };
        let ratio = |b: &[f64]| -> Vec<Cell> {
            svia.iter()
                .zip(b)
                .map(|(a, b)| Cell::fixed(a / b, 2))
                .collect()
        };
        t.push(
            std::iter::once(Cell::from(f.label))
                .chain(ratio(&pvia))
                .chain(ratio(&qosvia))
                .chain(svia.iter().map(|x| Cell::fixed(*x, 4)))
                .chain(pvia.iter().map(|x| Cell::fixed(*x, 4)))
                .collect::<Vec<_>>(),
        );
    }
    (t, events)
}

/// The table of QoSVIA against PVIA, one row per QoSVIA factor: θ of the factors' class
/// and the fraction of messages with jitter of every class, QoSVIA over PVIA, at each
/// load; with a `[knee]`, both knees (QoSVIA's from its whole sweep rerun).
pub fn qos_table(s: &Scenario, def: &FactorsDef, sweeps: &[Sweep], opt: Options) -> (Table, u64) {
    let loads = def.loads.get_ref();
    let knee = s.knee.as_ref().and_then(|k| {
        Some((
            s.class.iter().position(|c| &c.name == k.class.get_ref())?,
            k,
        ))
    });
    let mut header = vec!["factor".to_string()];
    for l in loads {
        header.push(format!("θ {} QoSVIA/PVIA at {l} MB/s", def.class.get_ref()));
        for k in &s.class {
            header.push(format!("jittered {} QoSVIA/PVIA at {l} MB/s", k.name));
        }
    }
    if knee.is_some() {
        header.push("knee QoSVIA (MB/s)".into());
        header.push("knee PVIA (MB/s)".into());
    }
    let mut t = Table::new(
        format!("{}-qos-factors", s.name),
        format!(
            "{}: QoSVIA over PVIA with one of QoSVIA's model factors switched",
            s.figure
        ),
        header,
    );
    let Some(c) = s.class.iter().position(|k| &k.name == def.class.get_ref()) else {
        return (t, 0);
    };
    let mut events = 0;
    let sweep_of = |v: Variant| sweeps.iter().find(|w| w.variant == v);
    for f in &QOS_FACTORS {
        let mut row = vec![Cell::from(f.label)];
        for &l in loads {
            let q = classes(s, sweeps, Variant::Qosvia, l, f, opt, &mut events);
            let p = classes(s, sweeps, Variant::Pvia, l, f, opt, &mut events);
            let (Some(q), Some(p)) = (q, p) else {
                row.extend((0..=s.class.len()).map(|_| Cell::Empty));
                continue;
            };
            row.push(Cell::fixed(q[c].0 / p[c].0, 2));
            row.extend(q.iter().zip(&p).map(|(a, b)| Cell::fixed(a.1 / b.1, 3)));
        }
        if let Some((kc, k)) = knee {
            let qk = if f.change.is_none() {
                sweep_of(Variant::Qosvia).and_then(|w| w.knee(kc, k.theta))
            } else {
                let tweak = |cal: &mut ViaCalibration| {
                    if let Some(change) = f.change {
                        change(cal);
                    }
                };
                let points = sweep_of(Variant::Qosvia)
                    .map(|w| w.points.iter().map(|p| p.load).collect::<Vec<_>>())
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|l| s.point(l))
                    .map(|i| {
                        let (p, e) = point_with(s, Variant::Qosvia, i, None, opt, &tweak, false);
                        events += e;
                        p
                    })
                    .collect();
                Sweep {
                    variant: Variant::Qosvia,
                    capacity: None,
                    points,
                }
                .knee(kc, k.theta)
            };
            let pk = sweep_of(Variant::Pvia).and_then(|w| w.knee(kc, k.theta));
            row.push(Cell::fixed(qk.unwrap_or(f64::INFINITY), 1));
            row.push(Cell::fixed(pk.unwrap_or(f64::INFINITY), 1));
        }
        t.push(row);
    }
    (t, events)
}
