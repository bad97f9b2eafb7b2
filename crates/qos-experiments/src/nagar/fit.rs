//! The calibration of the VIA model against Nagar et al.'s Table 1, as code: the
//! ping-pong and ping-bulk measurements the model makes, and a coordinate-descent refit
//! of a control program's LANai operation costs to its Table 1 column with some costs
//! held fixed. `via/calibration.toml` holds the result for the shipped constants; the
//! refit is what lets a reproduction ask whether a miss elsewhere depends on how the
//! fit split Table 1's intervals (e.g. between polling checks and handlers).

use qos_core::units::{Bytes, Duration};
use qos_sim::myrinet::nic::via::{LcpCosts, Stage, ViaCalibration};
use qos_sim::myrinet::{Cluster, FlowSpec, Outcome, Workload};
use serde::Serialize;

use super::model::setup_with;
use super::model::{flow, UNTIL};
use super::scenario::Variant;

/// Runs one flow between two hosts under `variant` with the constants `via`.
pub fn run(variant: Variant, via: ViaCalibration, f: FlowSpec, seed: u64) -> Outcome {
    match Cluster::new(setup_with(
        variant,
        via,
        2,
        vec![f],
        Duration::ZERO,
        UNTIL,
        seed,
    )) {
        Ok(c) => c.run(),
        Err(e) => panic!("a two-host run always builds: {e}"),
    }
}

/// Table 1's measurement: a ping-pong of `iterations` round trips. Returns the mean
/// completion time of every stage (send side on the pinging NIC, receive side on the
/// other; None where no message went through it) and the 1-way latency, µs.
pub fn ping_pong(
    variant: Variant,
    via: ViaCalibration,
    size: Bytes,
    iterations: u64,
    seed: u64,
) -> ([Option<f64>; 13], f64) {
    let o = run(
        variant,
        via,
        flow(size, Workload::PingPong { iterations }),
        seed,
    );
    let (ping, pong) = (
        o.stages.first().cloned().flatten(),
        o.stages.get(1).cloned().flatten(),
    );
    let mut stages = [None; 13];
    for (i, st) in Stage::ALL.into_iter().enumerate() {
        let side = if st <= Stage::SendStatusDone {
            &ping
        } else {
            &pong
        };
        stages[i] = side.as_ref().and_then(|x| x.mean_us(st));
    }
    (stages, o.flows[0].latency_us.unwrap_or(f64::NAN))
}

/// Table 2's measurement at one size: the lowest average 1-way latency (µs) over
/// `windows`, `messages` each way per run, and the window that gave it.
pub fn ping_bulk(
    variant: Variant,
    via: ViaCalibration,
    size: Bytes,
    windows: &[u32],
    messages: u64,
    seed: u64,
) -> (f64, u32) {
    let mut best = (f64::INFINITY, 0);
    for &w in windows {
        let w = w.max(1);
        let rounds = (messages / u64::from(w)).max(1);
        let o = run(
            variant,
            via,
            flow(size, Workload::PingBulk { window: w, rounds }),
            seed,
        );
        let lat = o.flows[0].latency_us.unwrap_or(f64::INFINITY);
        if lat < best.0 {
            best = (lat, w);
        }
    }
    best
}

/// A program's Table 1 column: per size, the published value of each stage (in
/// [`Stage::ALL`] order; None where the paper's cell is zero or absent) and of the
/// 1-way latency.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Message sizes.
    pub sizes: Vec<Bytes>,
    /// `stages[k][i]`: size k, stage i.
    pub stages: Vec<[Option<f64>; 13]>,
    /// The 1-way latency per size.
    pub one_way: Vec<Option<f64>>,
}

impl Column {
    /// `variant`'s column of the shipped `table-1` scenario.
    pub fn table_1(variant: Variant) -> Result<Column, crate::Error> {
        let s = super::scenario::builtin(Some("table-1"))?
            .into_iter()
            .next()
            .ok_or_else(|| crate::Error::Unknown {
                name: "table-1".into(),
                known: "table-1".into(),
            })?;
        let n = s.sizes.len();
        let mut c = Column {
            sizes: s.sizes.clone(),
            stages: vec![[None; 13]; n],
            one_way: vec![None; n],
        };
        for r in s.row.iter().filter(|r| r.firmware == variant) {
            let values = r.published.get_ref();
            let nonzero = |k: usize| values.get(k).copied().filter(|v| *v > 0.0);
            let metric = r.metric.get_ref().as_str();
            for k in 0..n {
                if metric == "one-way" {
                    c.one_way[k] = nonzero(k);
                } else if let Some(st) = Stage::parse(metric) {
                    c.stages[k][st as usize] = nonzero(k);
                }
            }
        }
        Ok(c)
    }
}

/// How well a calibration meets a Table 1 column.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fit {
    /// Σ over the column's non-zero cells of ((model − paper) / paper)².
    pub error: f64,
    /// Non-zero cells.
    pub cells: usize,
    /// Cells off by more than 10 %.
    pub misses: usize,
}

/// The model's fit to `column` under `variant` with constants `via` (ping-pongs of
/// `iterations` round trips).
pub fn fit_of(variant: Variant, via: ViaCalibration, column: &Column, iterations: u64) -> Fit {
    let mut f = Fit {
        error: 0.0,
        cells: 0,
        misses: 0,
    };
    for (k, &size) in column.sizes.iter().enumerate() {
        let (stages, one_way) = ping_pong(variant, via, size, iterations, 1);
        let pairs = column.stages[k]
            .iter()
            .zip(stages)
            .map(|(p, m)| (*p, m))
            .chain(std::iter::once((column.one_way[k], Some(one_way))));
        for (p, m) in pairs {
            let (Some(p), Some(m)) = (p, m) else {
                continue;
            };
            let d = (m - p) / p;
            f.error += d * d;
            f.cells += 1;
            if d.abs() > 0.1 {
                f.misses += 1;
            }
        }
    }
    f
}

/// The LANai costs of a program that a refit may move: every [`LcpCosts`] field
/// but `poll`, which the caller fixes.
const FREE: usize = 8;

fn cost(c: &LcpCosts, i: usize) -> Duration {
    [
        c.doorbell,
        c.data_prog,
        c.per_page,
        c.nsdma_start,
        c.status_prog,
        c.status_done,
        c.recv,
        c.rx_latency,
    ][i]
}

fn set_cost(c: &mut LcpCosts, i: usize, d: Duration) {
    match i {
        0 => c.doorbell = d,
        1 => c.data_prog = d,
        2 => c.per_page = d,
        3 => c.nsdma_start = d,
        4 => c.status_prog = d,
        5 => c.status_done = d,
        6 => c.recv = d,
        _ => c.rx_latency = d,
    }
}

/// Refits PVIA's LANai operation costs to its Table 1 column with the polling check
/// fixed at `poll`: coordinate descent from `via`'s costs, steps of 2 µs halved down to
/// 1/16 µs, each step kept when it lowers [`Fit::error`]. Returns the constants and
/// their fit.
pub fn refit_pvia(
    via: ViaCalibration,
    poll: Duration,
    column: &Column,
    iterations: u64,
) -> (ViaCalibration, Fit) {
    let mut via = via;
    via.pvia.poll = poll;
    let mut best = fit_of(Variant::Pvia, via, column, iterations);
    let mut step = Duration::from_us(2);
    while step >= Duration::from_ns(62) {
        let mut improved = true;
        while improved {
            improved = false;
            for i in 0..FREE {
                for up in [true, false] {
                    let cur = cost(&via.pvia, i);
                    let next = if up {
                        cur + step
                    } else if cur >= step {
                        cur - step
                    } else {
                        continue;
                    };
                    let mut c = via;
                    set_cost(&mut c.pvia, i, next);
                    let f = fit_of(Variant::Pvia, c, column, iterations);
                    if f.error < best.error - 1e-12 {
                        best = f;
                        via = c;
                        improved = true;
                    }
                }
            }
        }
        step = Duration::from_ps(step.as_ps() / 2);
    }
    (via, best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pvia_column_has_every_non_zero_cell_of_table_1() {
        let c = Column::table_1(Variant::Pvia).unwrap();
        assert_eq!(c.sizes.len(), 4);
        // 13 stages, of which the two receive-descriptor ones are zero (pre-posted).
        let cells: usize = c.stages.iter().map(|s| s.iter().flatten().count()).sum();
        assert_eq!(cells, 11 * 4);
        assert_eq!(
            c.one_way,
            vec![Some(69.0), Some(90.0), Some(153.0), Some(423.0)]
        );
    }
}
