//! Rate-control overhead on real traffic (thesis §5.2, Fig 5.1 and 5.2): the same agent
//! data plane with the rate-control scheduler and with it off (GM's rotation), ping-pong
//! round trips and streaming bandwidth over message sizes. The two are measured in
//! interleaved rounds (on/off order alternating), so that drift in the machine's load
//! falls on both alike; every figure is a median over rounds with its quartiles.

use anyhow::Context;
use serde::Serialize;

use super::traffic::{median, quantile, PingPong};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    pub sizes: Vec<usize>,
    pub rounds: usize,
    /// Ping-pongs per round trip figure (their median is the round's figure).
    pub iterations: usize,
    /// Bytes per bandwidth figure (message count = bytes / size, 20 ..= 2000).
    pub pump_bytes: usize,
}

/// Median and quartiles.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Spread {
    pub median: f64,
    pub p25: f64,
    pub p75: f64,
}

impl Spread {
    pub fn of(v: &[f64]) -> Spread {
        let mut v = v.to_vec();
        Spread {
            median: median(&mut v),
            p25: quantile(&mut v, 0.25),
            p75: quantile(&mut v, 0.75),
        }
    }
}

/// One message size.
#[derive(Debug, Clone, Serialize)]
pub struct SizePoint {
    pub size: usize,
    /// Round trip, µs.
    pub rtt_on_us: Spread,
    pub rtt_off_us: Spread,
    /// Bandwidth, MB/s.
    pub bw_on_mb_s: Spread,
    pub bw_off_mb_s: Spread,
    /// Per round: 100·(on − off)/off of the round trip.
    pub latency_overhead_pct: Spread,
    /// Per round: 100·(off − on)/off of the bandwidth.
    pub bandwidth_loss_pct: Spread,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Overhead {
    pub rounds: usize,
    pub points: Vec<SizePoint>,
    /// The thesis's figure: latency overhead averaged over sizes, each size's overhead
    /// being its median over rounds (robust to a round that lost the CPU).
    pub latency_overhead_avg_pct: f64,
    /// The same for the bandwidth loss.
    pub bandwidth_loss_avg_pct: f64,
    /// The largest per-size median bandwidth loss.
    pub bandwidth_loss_worst_pct: f64,
    /// Round-to-round spread: per round, the overhead averaged over sizes.
    pub latency_overhead_rounds_pct: Spread,
    pub bandwidth_loss_rounds_pct: Spread,
}

/// Measures `on` (rate control) against `off` (GM rotation). `progress(done, total)` is
/// called after every step; `stop()` aborts.
pub fn measure(
    on: &mut PingPong,
    off: &mut PingPong,
    plan: &Plan,
    progress: &mut dyn FnMut(usize, usize),
    stop: &dyn Fn() -> bool,
) -> anyhow::Result<Overhead> {
    let n = plan.sizes.len();
    // [size][round]
    let mut rtt = [vec![Vec::new(); n], vec![Vec::new(); n]];
    let mut bw = [vec![Vec::new(); n], vec![Vec::new(); n]];
    let total = plan.rounds * n;
    for r in 0..plan.rounds {
        for (k, &size) in plan.sizes.iter().enumerate() {
            if stop() {
                anyhow::bail!("interrupted");
            }
            let count = (plan.pump_bytes / size.max(1)).clamp(20, 2000);
            let order = if (r + k) % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let pp = if which == 0 { &mut *on } else { &mut *off };
                let side = if which == 0 { "on" } else { "off" };
                rtt[which][k].push(pp.round_trip_us(size, plan.iterations).with_context(|| {
                    format!("round trip of {size} B, rate control {side}, round {r}")
                })?);
                bw[which][k].push(
                    pp.bandwidth(size, count).with_context(|| {
                        format!("{count} messages of {size} B, rate control {side}, round {r}")
                    })? / 1e6,
                );
            }
            progress(r * n + k + 1, total);
        }
    }
    let mut points = Vec::new();
    let mut lat_rounds = vec![0.0; plan.rounds];
    let mut loss_rounds = vec![0.0; plan.rounds];
    for (k, &size) in plan.sizes.iter().enumerate() {
        let lat: Vec<f64> = (0..plan.rounds)
            .map(|r| 100.0 * (rtt[0][k][r] - rtt[1][k][r]) / rtt[1][k][r].max(1e-9))
            .collect();
        let loss: Vec<f64> = (0..plan.rounds)
            .map(|r| 100.0 * (bw[1][k][r] - bw[0][k][r]) / bw[1][k][r].max(1e-9))
            .collect();
        for r in 0..plan.rounds {
            lat_rounds[r] += lat[r] / n as f64;
            loss_rounds[r] += loss[r] / n as f64;
        }
        points.push(SizePoint {
            size,
            rtt_on_us: Spread::of(&rtt[0][k]),
            rtt_off_us: Spread::of(&rtt[1][k]),
            bw_on_mb_s: Spread::of(&bw[0][k]),
            bw_off_mb_s: Spread::of(&bw[1][k]),
            latency_overhead_pct: Spread::of(&lat),
            bandwidth_loss_pct: Spread::of(&loss),
        });
    }
    let worst = points
        .iter()
        .map(|p| p.bandwidth_loss_pct.median)
        .fold(f64::MIN, f64::max);
    let mean = |f: &dyn Fn(&SizePoint) -> f64| {
        points.iter().map(f).sum::<f64>() / points.len().max(1) as f64
    };
    Ok(Overhead {
        rounds: plan.rounds,
        latency_overhead_avg_pct: mean(&|p| p.latency_overhead_pct.median),
        bandwidth_loss_avg_pct: mean(&|p| p.bandwidth_loss_pct.median),
        bandwidth_loss_worst_pct: if points.is_empty() { 0.0 } else { worst },
        latency_overhead_rounds_pct: Spread::of(&lat_rounds),
        bandwidth_loss_rounds_pct: Spread::of(&loss_rounds),
        points,
    })
}

/// Message sizes of the thesis's Fig 5.1/5.2, 4 B ..= 64 KiB.
pub const SIZES: &[usize] = &[
    4, 16, 64, 256, 1024, 2048, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152, 65536,
];
