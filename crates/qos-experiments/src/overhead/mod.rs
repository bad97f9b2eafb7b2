//! Rate-control overhead on real traffic (thesis §5.2, Fig 5.1 and 5.2: "less than
//! 1 %"): the same agent data planes — same threads, sockets and ports — with the
//! rate-control scheduler and with it off (GM's rotation), switched between short
//! blocks of traffic. Ping-pong round trips and streaming bandwidth over message sizes.
//!
//! Method (so that 1 % can be resolved on a noisy shared machine):
//! - Systematic bias removed: one agent pair for both modes (no placement difference),
//!   blocks in ABBA quads (on off off on, then off on on off, …) interleaved over sizes,
//!   so linear drift in the machine's load cancels within every quad.
//! - Paired statistics: every figure compares a quad's on blocks with the same quad's
//!   off blocks (latency: the ratio of their median round trips; bandwidth: of their
//!   bandwidths; CPU: the difference per message), and the median over quads is the
//!   figure — drift between quads cannot enter. The round trips shown are pooled
//!   medians per size and mode (thousands of round trips); the ratio of those pooled
//!   medians is kept as a cross-check (`latency_overhead_pooled_pct`): with an agent
//!   that spins before sleeping the round trips are bimodal (caught in the spin or
//!   not), and a pooled median then jumps between the modes.
//! - Uncertainty: a seeded bootstrap over quads (a quad is resampled whole, keeping its
//!   on and off blocks together) gives a 95 % percentile interval for every ratio, and
//!   for the figures averaged over sizes (each resample averages the sizes' values).
//! - The agents' own processor time per message (thread CPU clocks of the data-plane
//!   threads, both ends), which wake-up latency and other load do not disturb: what
//!   rate control adds to the firmware's work.

pub mod bench;

use anyhow::Context;
use qos_core::sched::SchedulerKind;
use qos_runtime::dataplane::harness::Harness;
use serde::Serialize;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::traffic::{quantile, PingPong};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    pub sizes: Vec<usize>,
    /// ABBA quads per size (four blocks each).
    pub quads: usize,
    /// Round trips per block.
    pub round_trips: usize,
    /// Bytes per block's bandwidth figure (messages = bytes / size, 20 ..= 1000).
    pub pump_bytes: usize,
    /// Bootstrap resamples for the confidence intervals.
    pub resamples: usize,
    /// Seed of the bootstrap (the same data and seed give the same intervals).
    pub seed: u64,
    /// The scheduler of "rate control off": GM rotation (the thesis's baseline) or
    /// another one without rate control.
    pub off: SchedulerKind,
}

/// One block of traffic in one mode.
#[derive(Debug, Clone, Default)]
pub struct Block {
    pub on: bool,
    /// Every round trip, µs.
    pub rtt_us: Vec<f64>,
    /// Streaming bandwidth, MB/s.
    pub bw_mb_s: f64,
    /// Agent CPU (both ends) per message during the round trips, ns.
    pub cpu_rtt_ns: f64,
    /// Agent CPU (both ends) per message while streaming, ns.
    pub cpu_bw_ns: f64,
}

/// Four blocks in ABBA order.
pub type Quad = [Block; 4];

/// A figure with its 95 % bootstrap interval.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

/// One message size.
#[derive(Debug, Clone, Serialize)]
pub struct SizePoint {
    pub size: usize,
    /// Pooled median round trip, µs.
    pub rtt_on_us: f64,
    pub rtt_off_us: f64,
    /// 100·(r − 1), r the median over quads of each quad's on/off ratio of median
    /// round trips.
    pub latency_overhead_pct: Estimate,
    /// Median of the blocks' bandwidths, MB/s.
    pub bw_on_mb_s: f64,
    pub bw_off_mb_s: f64,
    /// 100·(1 − r), r the median over quads of each quad's on/off bandwidth ratio.
    pub bandwidth_loss_pct: Estimate,
    /// Agent CPU per message (both ends, median of blocks) in the ping-pong, ns.
    pub cpu_rtt_on_ns: f64,
    pub cpu_rtt_off_ns: f64,
    /// On − off, ns per message (median over quads of each quad's difference), and as %
    /// of the one-way time (half the pooled median round trip off).
    pub cpu_rtt_delta_ns: Estimate,
    pub cpu_rtt_delta_pct: Estimate,
    /// The same while streaming; % of the time per message (size / bandwidth off).
    pub cpu_bw_on_ns: f64,
    pub cpu_bw_off_ns: f64,
    pub cpu_bw_delta_ns: Estimate,
    pub cpu_bw_delta_pct: Estimate,
    /// Cross-check: 100·(on/off − 1) of the pooled median round trips.
    pub latency_overhead_pooled_pct: Estimate,
    /// Round trips pooled per mode.
    pub round_trips_per_mode: usize,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Overhead {
    pub quads: usize,
    pub round_trips_per_block: usize,
    pub resamples: usize,
    pub seed: u64,
    /// The "off" scheduler.
    pub off: SchedulerKind,
    pub points: Vec<SizePoint>,
    /// The thesis's figures: averaged over sizes, with bootstrap intervals.
    pub latency_overhead_avg_pct: Estimate,
    pub bandwidth_loss_avg_pct: Estimate,
    /// The largest per-size bandwidth loss (point value).
    pub bandwidth_loss_worst_pct: f64,
    /// Agent CPU added per message, averaged over sizes: ns, and % of the message's time.
    pub cpu_rtt_delta_avg_ns: Estimate,
    pub cpu_rtt_delta_avg_pct: Estimate,
    pub cpu_bw_delta_avg_ns: Estimate,
    pub cpu_bw_delta_avg_pct: Estimate,
    /// The pooled latency figure averaged over sizes.
    pub latency_overhead_pooled_avg_pct: Estimate,
}

/// Whether block `b` (0..4) of quad `q` runs with rate control on: on off off on, then
/// off on on off.
pub fn abba_on(q: usize, b: usize) -> bool {
    (b == 0 || b == 3) == q.is_multiple_of(2)
}

/// Sum of every data-plane thread's CPU time, ns.
fn cpu_ns(h: &Harness) -> u64 {
    h.agent_cpu_ns().iter().sum()
}

/// Measures with `pp`, a ping-pong between two of `h`'s data planes, switching `h`'s
/// scheduler between rate control and GM rotation. `progress(done, total)` is called
/// after every quad of every size; `stop()` aborts. Leaves rate control on.
pub fn measure(
    h: &Harness,
    pp: &mut PingPong,
    plan: &Plan,
    progress: &mut dyn FnMut(usize, usize),
    stop: &dyn Fn() -> bool,
) -> anyhow::Result<Overhead> {
    let n = plan.sizes.len();
    let mut quads: Vec<Vec<Quad>> = vec![Vec::new(); n];
    let total = plan.quads * n;
    // Warm-up: every size once in both modes, not recorded.
    for on in [true, false] {
        switch(h, on, plan.off)?;
        for &size in &plan.sizes {
            pp.round_trips_us(size, 3)?;
            pp.bandwidth(size, 20)?;
        }
    }
    for q in 0..plan.quads {
        for (k, &size) in plan.sizes.iter().enumerate() {
            if stop() {
                let _ = switch(h, true, plan.off);
                anyhow::bail!("interrupted");
            }
            let count = (plan.pump_bytes / size.max(1)).clamp(20, 1000);
            let mut quad = Quad::default();
            for (b, block) in quad.iter_mut().enumerate() {
                let on = abba_on(q, b);
                let side = if on { "on" } else { "off" };
                let cx = || format!("{size} B, rate control {side}, quad {q}");
                switch(h, on, plan.off).with_context(cx)?;
                // The first round trip after a switch is not part of the block.
                pp.round_trips_us(size, 1).with_context(cx)?;
                let c0 = cpu_ns(h);
                let rtt = pp.round_trips_us(size, plan.round_trips).with_context(cx)?;
                let c1 = cpu_ns(h);
                let bw = pp.bandwidth(size, count).with_context(cx)? / 1e6;
                let c2 = cpu_ns(h);
                *block = Block {
                    on,
                    cpu_rtt_ns: c1.saturating_sub(c0) as f64 / (2 * rtt.len()).max(1) as f64,
                    cpu_bw_ns: c2.saturating_sub(c1) as f64 / count as f64,
                    rtt_us: rtt,
                    bw_mb_s: bw,
                };
            }
            quads[k].push(quad);
            progress(q * n + k + 1, total);
        }
    }
    switch(h, true, plan.off)?;
    let mut r = analyse(
        &plan.sizes,
        &quads,
        plan.resamples,
        plan.seed,
        plan.round_trips,
    );
    r.off = plan.off;
    Ok(r)
}

fn switch(h: &Harness, on: bool, off: SchedulerKind) -> anyhow::Result<()> {
    let kind = if on { SchedulerKind::RateControl } else { off };
    h.set_scheduler(kind)?;
    Ok(())
}

/// Per-size statistics of a set of quads: pooled medians per mode (index 0 off, 1 on)
/// and the paired figures (medians over quads of each quad's on/off comparison, where
/// ABBA order cancels linear drift).
#[derive(Debug, Clone, Copy, Default)]
struct Stat {
    rtt: [f64; 2],
    bw: [f64; 2],
    cpu_rtt: [f64; 2],
    cpu_bw: [f64; 2],
    rtt_ratio: f64,
    bw_ratio: f64,
    cpu_rtt_delta: f64,
    cpu_bw_delta: f64,
}

/// One quad's own on/off comparison.
#[derive(Debug, Clone, Copy)]
struct Paired {
    /// Median round trip on / off within the quad.
    rtt_ratio: f64,
    /// Bandwidth of the two on blocks over the two off blocks.
    bw_ratio: f64,
    /// Mean agent CPU per message, on − off, ns.
    cpu_rtt_delta: f64,
    cpu_bw_delta: f64,
}

fn paired(q: &Quad) -> Paired {
    let mode = |on: bool| q.iter().filter(move |b| b.on == on);
    let mut r = [Vec::new(), Vec::new()];
    let (mut bw, mut cr, mut cb) = ([0.0; 2], [0.0; 2], [0.0; 2]);
    for m in [0, 1] {
        for b in mode(m == 1) {
            r[m].extend_from_slice(&b.rtt_us);
            bw[m] += b.bw_mb_s;
            cr[m] += b.cpu_rtt_ns / 2.0;
            cb[m] += b.cpu_bw_ns / 2.0;
        }
    }
    let off = fast_median(&mut r[0]).max(1e-12);
    Paired {
        rtt_ratio: fast_median(&mut r[1]) / off,
        bw_ratio: bw[1] / bw[0].max(1e-12),
        cpu_rtt_delta: cr[1] - cr[0],
        cpu_bw_delta: cb[1] - cb[0],
    }
}

/// Number of derived figures per size (see [`derived`]).
const FIGURES: usize = 7;

/// The derived figures of one size: latency % (pooled medians), loss %, cpu Δ ns and
/// % of the one-way time (ping-pong), cpu Δ ns and % of the time per message
/// (streaming), latency % (paired).
fn derived(s: &Stat, size: usize) -> [f64; FIGURES] {
    let (on, off) = (1, 0);
    let one_way_ns = s.rtt[off] * 1e3 / 2.0;
    let per_msg_ns = size as f64 / s.bw[off].max(1e-12) * 1e3;
    [
        100.0 * (s.rtt[on] / s.rtt[off].max(1e-12) - 1.0),
        100.0 * (1.0 - s.bw_ratio),
        s.cpu_rtt_delta,
        100.0 * s.cpu_rtt_delta / one_way_ns.max(1e-12),
        s.cpu_bw_delta,
        100.0 * s.cpu_bw_delta / per_msg_ns.max(1e-12),
        100.0 * (s.rtt_ratio - 1.0),
    ]
}

/// Statistics of the quads `pick` selects (indices, repetition allowed); `pairs[i]` is
/// quad i's own comparison. `pool` is scratch space.
fn stat(quads: &[Quad], pairs: &[Paired], pick: &[usize], pool: &mut [Vec<f64>; 6]) -> Stat {
    let [rtt, bw, cpu_rtt, cpu_bw, a, b] = pool;
    let mut s = Stat::default();
    for m in [0usize, 1] {
        let on = m == 1;
        for v in [&mut *rtt, &mut *bw, &mut *cpu_rtt, &mut *cpu_bw] {
            v.clear();
        }
        for &i in pick {
            for b in quads[i].iter().filter(|b| b.on == on) {
                rtt.extend_from_slice(&b.rtt_us);
                bw.push(b.bw_mb_s);
                cpu_rtt.push(b.cpu_rtt_ns);
                cpu_bw.push(b.cpu_bw_ns);
            }
        }
        s.rtt[m] = fast_median(rtt);
        s.bw[m] = fast_median(bw);
        s.cpu_rtt[m] = fast_median(cpu_rtt);
        s.cpu_bw[m] = fast_median(cpu_bw);
    }
    let mut med = |f: &dyn Fn(&Paired) -> f64| {
        a.clear();
        a.extend(pick.iter().map(|&i| f(&pairs[i])));
        fast_median(a)
    };
    s.rtt_ratio = med(&|p| p.rtt_ratio);
    s.bw_ratio = med(&|p| p.bw_ratio);
    s.cpu_rtt_delta = med(&|p| p.cpu_rtt_delta);
    s.cpu_bw_delta = med(&|p| p.cpu_bw_delta);
    b.clear();
    s
}

/// Median by selection (reorders `v`); 0 when empty.
fn fast_median(v: &mut [f64]) -> f64 {
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    let (_, &mut hi, _) = v.select_nth_unstable_by(n / 2, |a, b| a.total_cmp(b));
    if n % 2 == 1 {
        return hi;
    }
    let lo = v[..n / 2].iter().copied().fold(f64::MIN, f64::max);
    (lo + hi) / 2.0
}

fn interval(value: f64, reps: &mut [f64]) -> Estimate {
    if reps.is_empty() {
        return Estimate {
            value,
            lo: value,
            hi: value,
        };
    }
    Estimate {
        value,
        lo: quantile(reps, 0.025),
        hi: quantile(reps, 0.975),
    }
}

/// Figures and 95 % bootstrap intervals from measured quads (`quads[size][quad]`).
pub fn analyse(
    sizes: &[usize],
    quads: &[Vec<Quad>],
    resamples: usize,
    seed: u64,
    round_trips: usize,
) -> Overhead {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut pool: [Vec<f64>; 6] = Default::default();
    // reps[figure][size][resample]
    let mut reps = vec![vec![Vec::with_capacity(resamples); sizes.len()]; FIGURES];
    let mut values = Vec::new();
    for (k, &size) in sizes.iter().enumerate() {
        let qs = &quads[k];
        let pairs: Vec<Paired> = qs.iter().map(paired).collect();
        let all: Vec<usize> = (0..qs.len()).collect();
        let s = stat(qs, &pairs, &all, &mut pool);
        values.push((s, derived(&s, size)));
        let mut pick = vec![0; qs.len()];
        for _ in 0..resamples {
            for p in pick.iter_mut() {
                *p = rng.gen_range(0..qs.len());
            }
            let d = derived(&stat(qs, &pairs, &pick, &mut pool), size);
            for (f, x) in d.into_iter().enumerate() {
                reps[f][k].push(x);
            }
        }
    }
    let mut points = Vec::new();
    for (k, &size) in sizes.iter().enumerate() {
        let (s, d) = values[k];
        let e = |f: usize| interval(d[f], &mut reps[f][k].clone());
        points.push(SizePoint {
            size,
            rtt_on_us: s.rtt[1],
            rtt_off_us: s.rtt[0],
            latency_overhead_pct: e(6),
            bw_on_mb_s: s.bw[1],
            bw_off_mb_s: s.bw[0],
            bandwidth_loss_pct: e(1),
            cpu_rtt_on_ns: s.cpu_rtt[1],
            cpu_rtt_off_ns: s.cpu_rtt[0],
            cpu_rtt_delta_ns: e(2),
            cpu_rtt_delta_pct: e(3),
            cpu_bw_on_ns: s.cpu_bw[1],
            cpu_bw_off_ns: s.cpu_bw[0],
            cpu_bw_delta_ns: e(4),
            cpu_bw_delta_pct: e(5),
            latency_overhead_pooled_pct: e(0),
            round_trips_per_mode: quads[k]
                .iter()
                .flatten()
                .filter(|b| b.on)
                .map(|b| b.rtt_us.len())
                .sum(),
        });
    }
    // Averages over sizes: the point values' mean; each resample's sizes averaged.
    let n = sizes.len().max(1) as f64;
    let avg = |f: usize| -> Estimate {
        let value = values.iter().map(|(_, d)| d[f]).sum::<f64>() / n;
        let mut r: Vec<f64> = (0..resamples)
            .map(|i| reps[f].iter().map(|v| v[i]).sum::<f64>() / n)
            .collect();
        if sizes.is_empty() {
            r.clear();
        }
        interval(value, &mut r)
    };
    let worst = points
        .iter()
        .map(|p| p.bandwidth_loss_pct.value)
        .fold(f64::MIN, f64::max);
    Overhead {
        quads: quads.iter().map(Vec::len).max().unwrap_or(0),
        round_trips_per_block: round_trips,
        resamples,
        seed,
        off: SchedulerKind::Gm,
        latency_overhead_avg_pct: avg(6),
        bandwidth_loss_avg_pct: avg(1),
        bandwidth_loss_worst_pct: if points.is_empty() { 0.0 } else { worst },
        cpu_rtt_delta_avg_ns: avg(2),
        cpu_rtt_delta_avg_pct: avg(3),
        cpu_bw_delta_avg_ns: avg(4),
        cpu_bw_delta_avg_pct: avg(5),
        latency_overhead_pooled_avg_pct: avg(0),
        points,
    }
}

/// Message sizes of the thesis's Fig 5.1/5.2, 4 B ..= 64 KiB.
pub const SIZES: &[usize] = &[
    4, 16, 64, 256, 1024, 2048, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152, 65536,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthetic quads: off round trips around `base` µs with ±15 % noise, one sample
    /// in 20 a wake-up outlier (×3), load drifting by 40 % over the run; on = off ×
    /// `lat`; bandwidth ±5 %, on = off × `bw`; agent CPU on = off + `cpu` ns (±100 ns).
    fn synthetic(quads: usize, per_block: usize, lat: f64, bw: f64, cpu: f64) -> Vec<Quad> {
        synthetic_seeded(7, quads, per_block, lat, bw, cpu)
    }

    fn synthetic_seeded(
        seed: u64,
        quads: usize,
        per_block: usize,
        lat: f64,
        bw: f64,
        cpu: f64,
    ) -> Vec<Quad> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut u = move || rng.gen::<f64>();
        (0..quads)
            .map(|q| {
                let mut quad = Quad::default();
                for (b, block) in quad.iter_mut().enumerate() {
                    let on = abba_on(q, b);
                    let drift = 1.0 + 0.4 * (q * 4 + b) as f64 / (quads * 4) as f64;
                    let f = if on { lat } else { 1.0 };
                    block.on = on;
                    block.rtt_us = (0..per_block)
                        .map(|_| {
                            let out = if u() < 0.05 { 3.0 } else { 1.0 };
                            50.0 * drift * f * out * (0.85 + 0.3 * u())
                        })
                        .collect();
                    block.bw_mb_s = 800.0 / drift * if on { bw } else { 1.0 } * (0.95 + 0.1 * u());
                    block.cpu_rtt_ns = 4000.0 + if on { cpu } else { 0.0 } + 200.0 * u();
                    block.cpu_bw_ns = 3000.0 + if on { cpu } else { 0.0 } + 200.0 * u();
                }
                quad
            })
            .collect()
    }

    #[test]
    fn abba_quads_hold_two_blocks_of_each_mode_and_alternate_their_order() {
        for q in 0..4 {
            let on = (0..4).filter(|&b| abba_on(q, b)).count();
            assert_eq!(on, 2);
            assert_eq!(abba_on(q, 0), abba_on(q, 3));
            assert_ne!(abba_on(q, 0), abba_on(q, 1));
            assert_ne!(abba_on(q, 0), abba_on(q + 1, 0));
        }
    }

    /// How many of `n` synthetic runs (seeds 1..=n) give an interval that holds `truth`.
    fn coverage(n: u64, mut run: impl FnMut(u64) -> Estimate, truth: f64) -> u64 {
        (1..=n)
            .filter(|&seed| {
                let e = run(seed);
                e.lo <= truth && truth <= e.hi
            })
            .count() as u64
    }

    #[test]
    fn a_two_percent_latency_and_one_percent_bandwidth_effect_is_resolved_despite_noise() {
        // 95 % intervals: over 10 independent runs the true effect lies inside in at
        // least 8, and the latency effect is never mistaken for none.
        let runs: Vec<Overhead> = (1..=10)
            .map(|seed| {
                let q = vec![synthetic_seeded(seed, 100, 25, 1.02, 0.99, 30.0)];
                analyse(&[1024], &q, 200, seed, 25)
            })
            .collect();
        let at = |f: &dyn Fn(&SizePoint) -> Estimate, truth: f64| {
            coverage(10, |seed| f(&runs[seed as usize - 1].points[0]), truth)
        };
        assert!(at(&|p| p.latency_overhead_pct, 2.0) >= 8);
        assert!(at(&|p| p.bandwidth_loss_pct, 1.0) >= 8);
        assert!(at(&|p| p.cpu_rtt_delta_ns, 30.0) >= 8);
        for r in &runs {
            let p = &r.points[0];
            assert!(
                p.latency_overhead_pct.lo > 0.5,
                "{:?}",
                p.latency_overhead_pct
            );
            assert!(
                p.latency_overhead_pct.hi < 3.5,
                "{:?}",
                p.latency_overhead_pct
            );
            assert!(p.bandwidth_loss_pct.hi - p.bandwidth_loss_pct.lo < 3.0);
            // CPU Δ as % of the one-way time (half the off round trip).
            let pct = 100.0 * p.cpu_rtt_delta_ns.value / (p.rtt_off_us * 1e3 / 2.0);
            assert!((p.cpu_rtt_delta_pct.value - pct).abs() < 1e-9);
            assert_eq!(p.round_trips_per_mode, 100 * 2 * 25);
        }
    }

    #[test]
    fn no_effect_gives_intervals_around_zero() {
        let sizes = [64, 4096];
        let runs: Vec<Overhead> = (1..=10)
            .map(|seed| {
                let q = vec![
                    synthetic_seeded(seed, 80, 20, 1.0, 1.0, 0.0),
                    synthetic_seeded(seed + 100, 80, 20, 1.0, 1.0, 0.0),
                ];
                analyse(&sizes, &q, 200, seed, 20)
            })
            .collect();
        for f in [
            (|r: &Overhead| r.latency_overhead_avg_pct) as fn(&Overhead) -> Estimate,
            |r| r.bandwidth_loss_avg_pct,
            |r| r.cpu_rtt_delta_avg_ns,
            |r| r.cpu_bw_delta_avg_ns,
        ] {
            let covered = coverage(10, |seed| f(&runs[seed as usize - 1]), 0.0);
            assert!(covered >= 8, "{covered} of 10 intervals hold 0");
        }
        let r = &runs[0];
        let avg =
            (r.points[0].latency_overhead_pct.value + r.points[1].latency_overhead_pct.value) / 2.0;
        assert!((r.latency_overhead_avg_pct.value - avg).abs() < 1e-9);
    }

    #[test]
    fn the_bootstrap_is_reproducible_from_its_seed() {
        let q = vec![synthetic(30, 10, 1.01, 1.0, 5.0)];
        let a = analyse(&[256], &q, 200, 42, 10);
        let b = analyse(&[256], &q, 200, 42, 10);
        let c = analyse(&[256], &q, 200, 43, 10);
        assert_eq!(a.latency_overhead_avg_pct, b.latency_overhead_avg_pct);
        assert_ne!(a.latency_overhead_avg_pct, c.latency_overhead_avg_pct);
        assert_eq!(
            a.latency_overhead_avg_pct.value,
            c.latency_overhead_avg_pct.value
        );
    }

    #[test]
    fn selection_median_matches_the_sorted_median() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for n in [1usize, 2, 3, 10, 11, 100] {
            let v: Vec<f64> = (0..n).map(|_| rng.gen_range(0..1000) as f64).collect();
            let mut a = v.clone();
            let mut b = v.clone();
            assert_eq!(fast_median(&mut a), quantile(&mut b, 0.5), "{v:?}");
        }
        assert_eq!(fast_median(&mut []), 0.0);
    }
}
