//! What limits each Table 2 value (Nagar §4.1, ping-bulk), measured so that a miss can
//! be traced to its cause: the operation costs the model takes from Table 1, or the
//! structure of the control program.
//!
//! For each program and size:
//! - **Work per message** in a one-way stream of the same messages: LANai time in
//!   operations on the sending and on the receiving NIC, host DMA occupancy on each, and
//!   wire time. With every operation overlapped perfectly, no schedule of these costs
//!   moves a message faster than the busiest of them (the *cost bound*). SVIA does a
//!   whole send sequence before the next (§3.1), so its bound is the stream's own time
//!   per message.
//! - **Event detection free**: the same program with the polling check costing
//!   nothing, the ideal of §3.2 ("without any overheads for event detection") — what the
//!   polling loop's own LANai time adds.
//! - **Refits** (PVIA): the costs refitted to Table 1 with the check fixed at other
//!   values — whether the miss depends on how the fit split Table 1's intervals
//!   between checks and handlers.
//! - **QoSVIA's own factors**: its time-stamping and insertion costs (Table 1 fits) set
//!   to nothing, and its completions taken as they finish (the model's ordered
//!   completions off) — what sets QoSVIA against PVIA.

use qos_core::units::{Bytes, Duration};
use qos_sim::myrinet::nic::via::ViaCalibration;
use qos_sim::myrinet::Workload;
use serde::Serialize;

use super::fit::{self, Column};
use super::scenario::Variant;

/// Check costs the PVIA refits hold fixed, µs (the shipped fit has 0.75).
pub const REFIT_CHECKS_US: [f64; 3] = [0.1, 0.25, 1.0];

/// Messages of the one-way stream that measures the work per message.
const STREAM: u64 = 256;

/// What one message costs each resource, µs (one-way stream).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Work {
    /// LANai time in operations, sending NIC.
    pub tx_lanai: f64,
    /// Host DMA occupancy, sending NIC.
    pub tx_hdma: f64,
    /// LANai time in operations, receiving NIC.
    pub rx_lanai: f64,
    /// Host DMA occupancy, receiving NIC.
    pub rx_hdma: f64,
    /// Time on the wire.
    pub wire: f64,
    /// The stream's elapsed time per message.
    pub elapsed: f64,
}

impl Work {
    /// The busiest resource's time per message: no schedule of these costs is faster
    /// (for SVIA, whose sequences do not overlap, the stream's own time).
    pub fn bound(&self, variant: Variant) -> f64 {
        if variant == Variant::Svia {
            return self.elapsed;
        }
        [
            self.tx_lanai,
            self.tx_hdma,
            self.rx_lanai,
            self.rx_hdma,
            self.wire,
        ]
        .into_iter()
        .fold(0.0, f64::max)
    }

    /// Which resource the bound is.
    pub fn limit(&self, variant: Variant) -> &'static str {
        if variant == Variant::Svia {
            return "the send sequence (§3.1)";
        }
        let b = self.bound(variant);
        if b == self.tx_hdma || b == self.rx_hdma {
            "the host DMA"
        } else if b == self.wire {
            "the wire"
        } else {
            "the LANai"
        }
    }
}

/// Measures [`Work`] for `variant` at `size`.
pub fn work(variant: Variant, via: ViaCalibration, size: Bytes, seed: u64) -> Work {
    let f = qos_sim::myrinet::FlowSpec {
        name: "stream".into(),
        src: qos_core::topology::NodeId(0),
        dst: qos_core::topology::NodeId(1),
        message: size,
        rate: qos_sim::myrinet::Rate::Idt(Duration::ZERO),
        workload: Workload::Pump { messages: STREAM },
        api: qos_sim::myrinet::Api::Gm,
        start: qos_core::units::Time::ZERO,
        stop: None,
    };
    let o = fit::run(variant, via, f, seed);
    let m = STREAM as f64;
    let us = |d: Duration| d.as_us_f64() / m;
    let (tx, rx) = (o.busy[0], o.busy[1]);
    // The calibration's network: 160 MB/s links and a 16-byte header.
    let (cal, _) = super::model::calibration(variant);
    let wire = (size.get() + cal.network.header.get()) as f64
        / cal.network.link.bytes_per_sec() as f64
        * 1e6;
    Work {
        tx_lanai: us(tx.processor),
        tx_hdma: us(tx.host_dma),
        rx_lanai: us(rx.processor),
        rx_hdma: us(rx.host_dma),
        wire,
        elapsed: o.end_us / m,
    }
}

/// One Table 2 cell taken apart.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Program.
    pub variant: Variant,
    /// Message size.
    pub size: Bytes,
    /// The paper's value, µs (None: not printed).
    pub paper: Option<f64>,
    /// The model's, µs, and its best window.
    pub model: f64,
    pub window: u32,
    /// Work per message.
    pub work: Work,
    /// The model with free event detection, µs.
    pub detection_free: f64,
    /// PVIA: the model refitted at each of [`REFIT_CHECKS_US`], µs.
    pub refits: Vec<f64>,
    /// QoSVIA: the model with its time-stamping and insertion free, and with its
    /// completions first come first served, µs.
    pub qos_free: Option<f64>,
    pub qos_fcfs_completions: Option<f64>,
}

/// Why a Table 2 value misses, from the measurements of its [`Cell`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// Within the bar.
    Holds,
    /// Below the cost bound by more than the bar: no schedule of Table 1's costs (for
    /// SVIA: no sequential program with Table 1's sequence) reaches it.
    Costs,
    /// The costs allow it (within the bar) but the program's structure does not: the
    /// polling loop's checks when the model without their LANai time is at or below
    /// the bar's upper edge, else the rest of the structure.
    Polling,
    /// See [`Cause::Polling`].
    Structure,
}

impl Cell {
    /// The cause of a miss (the bar is 10 %).
    pub fn cause(&self) -> Cause {
        let Some(p) = self.paper else {
            return Cause::Holds;
        };
        let within = |x: f64| (x / p - 1.0).abs() <= 0.1;
        if within(self.model) {
            Cause::Holds
        } else if p * 1.1 < self.work.bound(self.variant) {
            Cause::Costs
        } else if self.detection_free <= p * 1.1 {
            Cause::Polling
        } else {
            Cause::Structure
        }
    }
}

/// Takes Table 2 apart for `variant` at `sizes` (published values `paper`, windows
/// and messages as the ping-bulk scenario runs them). `refit_iterations`: round trips
/// per ping-pong of each PVIA refit (0: no refits).
pub fn cells(
    variant: Variant,
    sizes: &[Bytes],
    paper: &[Option<f64>],
    windows: &[u32],
    messages: u64,
    refit_iterations: u64,
    seed: u64,
) -> Result<Vec<Cell>, crate::Error> {
    let (_, via) = super::model::calibration(variant);
    let mut free = via;
    free.pvia.poll = Duration::ZERO;
    free.svia.poll = Duration::ZERO;
    let refits: Vec<ViaCalibration> = if variant == Variant::Pvia && refit_iterations > 0 {
        let column = Column::table_1(Variant::Pvia)?;
        REFIT_CHECKS_US
            .iter()
            .map(|&c| {
                let poll = Duration::from_ps((c * 1e6).round() as u64);
                fit::refit_pvia(via, poll, &column, refit_iterations).0
            })
            .collect()
    } else {
        Vec::new()
    };
    let qos = variant == Variant::Qosvia;
    let mut qos_free = via;
    qos_free.qosvia.timestamp = Duration::ZERO;
    qos_free.qosvia.insert = Duration::ZERO;
    qos_free.qosvia.scan = Duration::ZERO;
    let mut qos_fcfs = via;
    qos_fcfs.qosvia.ordered_completions = false;
    Ok(sizes
        .iter()
        .enumerate()
        .map(|(k, &size)| {
            let (model, window) = fit::ping_bulk(variant, via, size, windows, messages, seed);
            let (detection_free, _) = fit::ping_bulk(variant, free, size, windows, messages, seed);
            let qos_run = |c: ViaCalibration| {
                qos.then(|| fit::ping_bulk(variant, c, size, windows, messages, seed).0)
            };
            Cell {
                variant,
                size,
                paper: paper.get(k).copied().flatten(),
                model,
                window,
                work: work(variant, via, size, seed),
                detection_free,
                refits: refits
                    .iter()
                    .map(|r| fit::ping_bulk(variant, *r, size, windows, messages, seed).0)
                    .collect(),
                qos_free: qos_run(qos_free),
                qos_fcfs_completions: qos_run(qos_fcfs),
            }
        })
        .collect())
}

impl Cause {
    /// How the report names it.
    pub fn label(self) -> &'static str {
        match self {
            Cause::Holds => "holds",
            Cause::Costs => "costs: below what Table 1's times allow",
            Cause::Polling => "structure: the polling loop's checks",
            Cause::Structure => "structure",
        }
    }
}

/// The report's table of `cells`: one number per column (µs per message), the
/// limiting resource and the cause as words.
pub fn table(cells: &[Cell]) -> crate::report::Table {
    use crate::report::Cell as C;
    let mut header: Vec<String> = [
        "program",
        "size (bytes)",
        "paper",
        "model",
        "cost bound",
        "bound is",
        "LANai tx",
        "LANai rx",
        "host DMA tx",
        "host DMA rx",
        "model, event detection free",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    header.extend(
        REFIT_CHECKS_US
            .iter()
            .map(|c| format!("refit, check {c} us")),
    );
    header.push("QoSVIA, stamping and insertion free".into());
    header.push("QoSVIA, completions as they finish".into());
    header.push("cause".into());
    let mut t = crate::report::Table::new(
        "table-2-limits",
        "Table 2: what limits each value (µs per message; work per message measured in a \
         one-way stream of the same messages)",
        header,
    );
    for c in cells {
        let f = |x: f64| C::from(x).with_digits(1);
        let mut row = vec![
            C::from(c.variant.name()),
            C::fixed(c.size.get() as f64, 0),
            C::maybe(c.paper).with_digits(1),
            f(c.model),
            f(c.work.bound(c.variant)),
            C::from(c.work.limit(c.variant)),
            f(c.work.tx_lanai),
            f(c.work.rx_lanai),
            f(c.work.tx_hdma),
            f(c.work.rx_hdma),
            f(c.detection_free),
        ];
        row.extend(
            (0..REFIT_CHECKS_US.len()).map(|k| C::maybe(c.refits.get(k).copied()).with_digits(1)),
        );
        row.push(C::maybe(c.qos_free).with_digits(1));
        row.push(C::maybe(c.qos_fcfs_completions).with_digits(1));
        row.push(C::from(c.cause().label()));
        t.push(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svia_and_pvia_at_16_kb_miss_by_table_1s_costs_pvia_at_4_b_by_its_polling() {
        let w = [64];
        let svia = cells(Variant::Svia, &[Bytes::new(4)], &[Some(8.0)], &w, 128, 0, 1).unwrap();
        // A sequential program cannot beat its own send sequence (~15 µs per message).
        assert_eq!(svia[0].cause(), Cause::Costs, "{:?}", svia[0]);
        let sizes = [Bytes::new(4), Bytes::kib(16)];
        let pvia = cells(
            Variant::Pvia,
            &sizes,
            &[Some(26.0), Some(86.0)],
            &w,
            128,
            0,
            1,
        )
        .unwrap();
        // 4 B: the handlers fitted to Table 1 take ~23 µs of LANai per message, so the
        // costs allow 26; the polling loop's checks add ~8.
        assert!(
            pvia[0].work.bound(Variant::Pvia) < 26.0,
            "{:?}",
            pvia[0].work
        );
        assert_eq!(pvia[0].cause(), Cause::Polling, "{:?}", pvia[0]);
        // 16 KB: the host DMA alone needs ~136 µs per message.
        assert!(pvia[1].work.tx_hdma > 130.0, "{:?}", pvia[1].work);
        assert_eq!(pvia[1].cause(), Cause::Costs);
    }

    #[test]
    fn a_refit_with_cheaper_checks_keeps_pvias_ping_bulk_where_it_was() {
        // However Table 1's intervals are split between checks and handlers, the
        // polling program spends as much LANai time per message under load.
        let column = Column::table_1(Variant::Pvia).unwrap();
        let (_, via) = super::super::model::calibration(Variant::Pvia);
        let (refit, fit) = fit::refit_pvia(via, Duration::from_ns(250), &column, 10);
        assert!(fit.misses <= 4, "{fit:?}");
        assert_ne!(refit.pvia.doorbell, via.pvia.doorbell);
        let (lat, _) = fit::ping_bulk(Variant::Pvia, refit, Bytes::new(4), &[64], 128, 1);
        assert!(lat > 30.0, "{lat}");
    }
}
