//! Packet sources of the flit network (Yum §6.2, BookSim's injection processes):
//! Bernoulli, Poisson or on/off (bursty) arrivals per node and class, of one packet
//! length or a weighted mix of lengths, with uniform, transpose,
//! bit-complement, bit-reverse, shuffle, tornado, neighbor, hotspot, diagonal,
//! asymmetric, taper64, background or random-permutation destinations (BookSim2's
//! patterns of the same names), and constant-bit-rate streams.
//!
//! Sources sit in a min-heap keyed by their next arrival cycle, so a cycle costs only
//! the arrivals it has: a Bernoulli source draws its geometric gap once per packet
//! instead of a coin per cycle, and an on/off source the cycles to its next event
//! (turning on, turning off, a packet) once per event.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::config::{FlitConfig, Pattern, Process};

/// What one source emits.
#[derive(Debug, Clone)]
pub enum Kind {
    /// Random arrivals of a class at one node.
    Random {
        /// Packets per cycle.
        rate: f64,
        /// Bernoulli or Poisson.
        process: Process,
        /// For Poisson: the exact (fractional) time of the next arrival.
        next_exact: f64,
        /// For on/off: whether the node is in a burst.
        on: bool,
    },
    /// A CBR stream.
    Stream {
        /// Destination node.
        dst: u32,
        /// Cycles between packets.
        period: u64,
        /// Stream index (per-flow statistics).
        index: u32,
    },
}

/// One source.
#[derive(Debug, Clone)]
pub struct Source {
    /// Node it injects at.
    pub node: u32,
    /// Class index.
    pub class: u8,
    /// Arrival law.
    pub kind: Kind,
}

/// A new packet to inject.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    /// Source node.
    pub src: u32,
    /// Destination node.
    pub dst: u32,
    /// Class index.
    pub class: u8,
    /// Stream index, or `u32::MAX` for random traffic.
    pub stream: u32,
    /// Length in flits.
    pub len: u32,
}

/// All sources and their schedule.
#[derive(Debug, Clone)]
pub struct Traffic {
    sources: Vec<Source>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    patterns: Vec<Pattern>,
    /// Per class: under `randperm`, each node's destination (BookSim2's permutation for
    /// the seed), else empty.
    perms: Vec<Vec<u32>>,
    /// Per class: its one packet length, or its mix as (length, cumulative weight).
    lengths: Vec<Lengths>,
    nodes: u32,
    /// Digits of a node number for the digit permutations (tornado, neighbor): the
    /// mesh's or torus's k and n, else a square of side √nodes.
    radix: (u32, u32),
    /// Side of the square node grid that transpose swaps coordinates on (√nodes).
    side: u32,
}

/// A class's packet lengths.
#[derive(Debug, Clone)]
enum Lengths {
    One(u32),
    /// (length, cumulative weight), and the total weight.
    Mix(Vec<(u32, u32)>, u32),
}

impl Lengths {
    fn of(c: &super::config::ClassConfig) -> Lengths {
        match c.packet_mix.as_slice() {
            [] => Lengths::One(c.packet_flits),
            [one] => Lengths::One(one.flits),
            mix => {
                let mut total = 0;
                let cum = mix
                    .iter()
                    .map(|p| {
                        total += p.weight;
                        (p.flits, total)
                    })
                    .collect();
                Lengths::Mix(cum, total)
            }
        }
    }

    /// A packet's length: one uniform draw over the total weight for a mix (none for
    /// one length).
    fn draw(&self, rng: &mut ChaCha8Rng) -> u32 {
        match self {
            Lengths::One(n) => *n,
            Lengths::Mix(cum, total) => {
                let x = rng.gen_range(0..*total);
                cum.iter().find(|&&(_, c)| x < c).map_or(cum[0].0, |p| p.0)
            }
        }
    }
}

/// The cycle (≥ `from`) of an on/off source's next packet, its state `on` at the
/// start of cycle `from` updated to the state at that packet. BookSim2's rule each
/// cycle: an off node turns on with probability `alpha`, an on node turns off with
/// probability `beta`, and then a node that is on injects with probability `r1`. The
/// cycles between events are drawn as geometric gaps: while off, the next turn-on;
/// while on, the next cycle with an event (off with probability beta, else a packet
/// with probability (1 − beta) · r1), then which event it is.
fn on_off_next(
    rng: &mut ChaCha8Rng,
    from: u64,
    on: &mut bool,
    alpha: f64,
    beta: f64,
    r1: f64,
) -> u64 {
    let mut t = from;
    loop {
        if !*on {
            t += geometric(rng, alpha) - 1;
            *on = true;
            // The cycle it turns on, the node is on when it tests for a packet.
            if rng.gen::<f64>() < r1 {
                return t;
            }
            t += 1;
        }
        let p = beta + (1.0 - beta) * r1;
        t += geometric(rng, p) - 1;
        if rng.gen::<f64>() * p < beta {
            *on = false;
            t += 1;
        } else {
            return t;
        }
    }
}

/// Cycles until the next Bernoulli success (≥ 1), or from cycle 0 when `first`.
fn geometric(rng: &mut ChaCha8Rng, p: f64) -> u64 {
    if p >= 1.0 {
        return 1;
    }
    let u: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
    1 + (u.ln() / (1.0 - p).ln()).floor().min(1e15) as u64
}

fn exponential(rng: &mut ChaCha8Rng, rate: f64) -> f64 {
    let u: f64 = 1.0 - rng.gen::<f64>();
    -u.ln() / rate
}

impl Traffic {
    /// Sources of `cfg` with their first arrivals drawn from `rng`.
    pub fn new(cfg: &FlitConfig, rng: &mut ChaCha8Rng) -> Traffic {
        let nodes = cfg.nodes();
        let mut sources = Vec::new();
        let mut heap = BinaryHeap::new();
        for (ci, c) in cfg.classes.iter().enumerate() {
            if c.rate <= 0.0 {
                continue;
            }
            for node in 0..nodes {
                let mut on = false;
                let (first, next_exact) = match c.process {
                    Process::Bernoulli => (geometric(rng, c.rate) - 1, 0.0),
                    Process::Poisson => {
                        let t = exponential(rng, c.rate);
                        (t.floor() as u64, t)
                    }
                    Process::OnOff { alpha, beta } => {
                        let r1 = c.process.peak(c.rate);
                        (on_off_next(rng, 0, &mut on, alpha, beta, r1), 0.0)
                    }
                };
                heap.push(Reverse((first, sources.len() as u32)));
                sources.push(Source {
                    node,
                    class: ci as u8,
                    kind: Kind::Random {
                        rate: c.rate,
                        process: c.process,
                        next_exact,
                        on,
                    },
                });
            }
        }
        for (si, s) in cfg.streams.iter().enumerate() {
            let class = cfg
                .classes
                .iter()
                .position(|c| c.name == s.class)
                .unwrap_or(0);
            heap.push(Reverse((s.start, sources.len() as u32)));
            sources.push(Source {
                node: s.src,
                class: class as u8,
                kind: Kind::Stream {
                    dst: s.dst,
                    period: s.period,
                    index: si as u32,
                },
            });
        }
        Traffic {
            sources,
            heap,
            patterns: cfg.classes.iter().map(|c| c.pattern.clone()).collect(),
            perms: cfg
                .classes
                .iter()
                .map(|c| match c.pattern {
                    Pattern::Randperm { seed } => {
                        super::ran_array::booksim2_permutation(nodes, seed)
                    }
                    _ => Vec::new(),
                })
                .collect(),
            lengths: cfg.classes.iter().map(Lengths::of).collect(),
            nodes,
            radix: cfg
                .topology
                .digits()
                .unwrap_or(((nodes as f64).sqrt() as u32, 2)),
            side: (nodes as f64).sqrt() as u32,
        }
    }

    /// The earliest cycle with an arrival.
    pub fn next_time(&self) -> Option<u64> {
        self.heap.peek().map(|r| r.0 .0)
    }

    /// Calls `emit` for every arrival at cycle `now` (sources due earlier are treated
    /// as due now).
    pub fn arrivals(&mut self, now: u64, rng: &mut ChaCha8Rng, mut emit: impl FnMut(Arrival)) {
        while let Some(&Reverse((t, si))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            let nodes = self.nodes;
            let shape = Shape {
                side: self.side,
                radix: self.radix,
            };
            let s = &mut self.sources[si as usize];
            let lengths = &self.lengths[s.class as usize];
            let (dst, stream, len, next) = match &mut s.kind {
                Kind::Random {
                    rate,
                    process,
                    next_exact,
                    on,
                } => {
                    let dst = destination(
                        &self.patterns[s.class as usize],
                        s.node,
                        nodes,
                        shape,
                        &self.perms[s.class as usize],
                        rng,
                    );
                    let len = lengths.draw(rng);
                    let next = match *process {
                        Process::Bernoulli => t + geometric(rng, *rate),
                        Process::Poisson => {
                            *next_exact += exponential(rng, *rate);
                            (next_exact.floor() as u64).max(t)
                        }
                        Process::OnOff { alpha, beta } => {
                            let r1 = process.peak(*rate);
                            on_off_next(rng, t + 1, on, alpha, beta, r1)
                        }
                    };
                    (dst, u32::MAX, len, next)
                }
                Kind::Stream { dst, period, index } => {
                    (*dst, *index, lengths.draw(rng), t + *period)
                }
            };
            emit(Arrival {
                src: s.node,
                dst,
                class: s.class,
                stream,
                len,
            });
            self.heap.push(Reverse((next, si)));
        }
    }
}

/// The node numbering the permutations read.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// Side of the square transpose works on.
    side: u32,
    /// (k, n): n digits base k.
    radix: (u32, u32),
}

/// A destination for a packet from `src` under `pattern`.
/// (`perm`: the class's permutation under `randperm`.)
fn destination(
    pattern: &Pattern,
    src: u32,
    nodes: u32,
    shape: Shape,
    perm: &[u32],
    rng: &mut ChaCha8Rng,
) -> u32 {
    let side = shape.side;
    match pattern {
        Pattern::Uniform => rng.gen_range(0..nodes),
        Pattern::UniformOthers => {
            let d = rng.gen_range(0..nodes - 1);
            if d >= src {
                d + 1
            } else {
                d
            }
        }
        Pattern::Transpose => (src % side) * side + src / side,
        Pattern::Tornado | Pattern::Neighbor => {
            // A digit permutation: every coordinate moved by the same offset.
            let (k, n) = shape.radix;
            let by = if *pattern == Pattern::Tornado {
                k.div_ceil(2) - 1
            } else {
                1
            };
            let (mut rest, mut out, mut place) = (src, 0, 1);
            for _ in 0..n {
                out += (rest % k + by) % k * place;
                rest /= k;
                place *= k;
            }
            out
        }
        Pattern::BitComplement => !src & (nodes - 1),
        Pattern::BitReverse => {
            let bits = nodes.trailing_zeros();
            if bits == 0 {
                0
            } else {
                src.reverse_bits() >> (32 - bits)
            }
        }
        Pattern::Shuffle => {
            let s = src << 1;
            (s & (nodes - 1)) | u32::from(s & nodes != 0)
        }
        Pattern::Hotspot {
            nodes: hot,
            fraction,
            weights,
        } => {
            if rng.gen::<f64>() >= *fraction {
                rng.gen_range(0..nodes)
            } else if weights.is_empty() {
                hot[rng.gen_range(0..hot.len())]
            } else {
                // (Validated: one weight per node, each at least 1, the sum in a u32.)
                let total: u32 = weights.iter().sum();
                let mut draw = rng.gen_range(0..total);
                let mut at = 0;
                while draw >= weights[at] {
                    draw -= weights[at];
                    at += 1;
                }
                hot[at]
            }
        }
        Pattern::Diagonal => {
            if rng.gen_range(0..3) == 0 {
                (src + 1) % nodes
            } else {
                src
            }
        }
        Pattern::Asymmetric => {
            let half = nodes / 2;
            src % half + if rng.gen_range(0..2) == 1 { half } else { 0 }
        }
        Pattern::Taper64 => {
            if rng.gen_range(0..2) == 1 {
                let a = rng.gen_range(0..3);
                let b = rng.gen_range(0..3);
                (64 + src + 8 * a + b - 9) % 64
            } else {
                rng.gen_range(0..nodes)
            }
        }
        Pattern::Randperm { .. } => perm[src as usize],
        Pattern::Background { excluded } => loop {
            // (Validated: some node is not excluded.)
            let d = rng.gen_range(0..nodes);
            if !excluded.contains(&d) {
                break d;
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::flit::config::{PacketSize, TopologySpec};

    /// Tornado and neighbor are BookSim2's digit permutations: digit by digit (base k,
    /// least significant first), d -> (d + (k + 1) / 2 - 1) mod k and d -> (d + 1) mod k.
    #[test]
    // BookSim2's own expression, `(k + 1) / 2 - 1`, kept as written.
    #[allow(clippy::manual_div_ceil)]
    fn tornado_and_neighbor_move_every_digit_as_booksim2() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for (k, dims) in [
            (2u32, 2u32),
            (4, 2),
            (5, 2),
            (7, 2),
            (8, 2),
            (3, 3),
            (4, 3),
            (5, 1),
            (2, 5),
        ] {
            let n = k.pow(dims);
            let shape = Shape {
                side: (n as f64).sqrt() as u32,
                radix: (k, dims),
            };
            for src in 0..n {
                let digits = |add: u32| {
                    let (mut off, mut out) = (1, 0);
                    for _ in 0..dims {
                        out += off * ((src / off % k + add) % k);
                        off *= k;
                    }
                    out
                };
                let t = destination(&Pattern::Tornado, src, n, shape, &[], &mut rng);
                assert_eq!(
                    t,
                    digits((k + 1) / 2 - 1),
                    "tornado k {k} n {dims} src {src}"
                );
                let nb = destination(&Pattern::Neighbor, src, n, shape, &[], &mut rng);
                assert_eq!(nb, digits(1), "neighbor k {k} n {dims} src {src}");
            }
        }
    }

    /// 64 Bernoulli sources at 0.012 packets per cycle emit 0.012 per node-cycle over a
    /// million cycles (768,000 expected; one standard deviation is 0.11 %).
    #[test]
    fn bernoulli_sources_emit_their_rate() {
        let cfg = FlitConfig::booksim2(TopologySpec::mesh(8), 0.012);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut t = Traffic::new(&cfg, &mut rng);
        let cycles = 1_000_000u64;
        let mut n = 0u64;
        for now in 0..cycles {
            t.arrivals(now, &mut rng, |_| n += 1);
        }
        let ratio = n as f64 / (0.012 * 64.0 * cycles as f64);
        assert!(
            (ratio - 1.0).abs() < 0.005,
            "{n} arrivals: {ratio} of the rate"
        );
    }

    /// Per-node counts of packets in windows of `w` cycles, and the lengths of runs of
    /// consecutive cycles with a packet, from `cycles` cycles of node 0 of `cfg`.
    fn node0_counts(cfg: &FlitConfig, cycles: u64, w: u64, seed: u64) -> (Vec<f64>, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut t = Traffic::new(cfg, &mut rng);
        let mut counts = vec![0.0; (cycles / w) as usize];
        let mut hits = Vec::new();
        for now in 0..cycles {
            t.arrivals(now, &mut rng, |a| {
                if a.src == 0 {
                    counts[(now / w) as usize] += 1.0;
                    hits.push(now);
                }
            });
        }
        let pairs = hits.windows(2).filter(|h| h[1] == h[0] + 1).count();
        (counts, pairs as f64 / hits.len().max(1) as f64)
    }

    /// BookSim2's `OnOffInjectionProcess::test`, written out cycle by cycle (its own
    /// order of draws: the state's step, then the packet's coin) as an independent
    /// reference for the event-skipping sources.
    fn on_off_reference(cycles: u64, w: u64, rate: f64, alpha: f64, beta: f64) -> (Vec<f64>, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        let r1 = rate * (alpha + beta) / alpha;
        let mut on = false;
        let mut counts = vec![0.0; (cycles / w) as usize];
        let (mut hits, mut pairs, mut last) = (0u64, 0u64, u64::MAX);
        for now in 0..cycles {
            on = if on {
                rng.gen::<f64>() >= beta
            } else {
                rng.gen::<f64>() < alpha
            };
            if on && rng.gen::<f64>() < r1 {
                counts[(now / w) as usize] += 1.0;
                hits += 1;
                if last.wrapping_add(1) == now {
                    pairs += 1;
                }
                last = now;
            }
        }
        (counts, pairs as f64 / hits.max(1) as f64)
    }

    fn mean_var(x: &[f64]) -> (f64, f64) {
        let m = x.iter().sum::<f64>() / x.len() as f64;
        (
            m,
            x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / x.len() as f64,
        )
    }

    /// On/off sources against BookSim2's per-cycle rule: the same long-run rate, the
    /// same burstiness (variance of packets per 200-cycle window over its mean, and the
    /// share of packets sent the cycle after another), where a Bernoulli source at the
    /// same rate has neither.
    #[test]
    fn on_off_sources_match_booksim2s_per_cycle_rule() {
        let (rate, alpha, beta) = (0.05, 0.02, 0.08);
        let mut cfg = FlitConfig::booksim2(TopologySpec::mesh(4), rate);
        cfg.classes[0].process = Process::OnOff { alpha, beta };
        let (cycles, w) = (2_000_000, 200);
        let (ours, ours_next) = node0_counts(&cfg, cycles, w, 7);
        let (theirs, theirs_next) = on_off_reference(cycles, w, rate, alpha, beta);
        let ((m1, v1), (m2, v2)) = (mean_var(&ours), mean_var(&theirs));
        let expect = rate * w as f64;
        assert!(
            (m1 / expect - 1.0).abs() < 0.03,
            "rate {m1} per window, {expect} asked"
        );
        assert!(
            (m2 / expect - 1.0).abs() < 0.03,
            "reference {m2} per window"
        );
        let (d1, d2) = (v1 / m1, v2 / m2);
        assert!((d1 / d2 - 1.0).abs() < 0.1, "dispersion {d1} against {d2}");
        // r1 = 0.25 in a burst: a quarter of packets follow one the cycle before
        // (a little less: the burst may end in between).
        assert!(
            (ours_next - theirs_next).abs() < 0.01,
            "{ours_next} vs {theirs_next}"
        );
        cfg.classes[0].process = Process::Bernoulli;
        let (bern, bern_next) = node0_counts(&cfg, cycles, w, 7);
        let (m3, v3) = mean_var(&bern);
        assert!(
            v3 / m3 < 1.1 && d1 > 3.0,
            "Bernoulli {} vs on/off {d1}",
            v3 / m3
        );
        assert!(
            bern_next < 0.06 && ours_next > 0.2,
            "{bern_next} vs {ours_next}"
        );
    }

    /// A class's packet mix: each length as often as its weight says, and the
    /// lengths of a class without a mix untouched (no draw: the same arrivals as
    /// before mixes existed).
    #[test]
    fn packet_mixes_draw_lengths_by_weight() {
        let mut cfg = FlitConfig::booksim2(TopologySpec::mesh(4), 0.05);
        let mut plain = Vec::new();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut t = Traffic::new(&cfg, &mut rng);
        for now in 0..20_000 {
            t.arrivals(now, &mut rng, |a| plain.push((a.src, a.dst, a.len)));
        }
        assert!(plain.iter().all(|a| a.2 == 40));
        cfg.classes[0].packet_mix = vec![
            PacketSize::new(1, 6),
            PacketSize::new(5, 3),
            PacketSize::new(20, 1),
        ];
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut t = Traffic::new(&cfg, &mut rng);
        let mut n = [0u64; 3];
        for now in 0..200_000 {
            t.arrivals(now, &mut rng, |a| match a.len {
                1 => n[0] += 1,
                5 => n[1] += 1,
                20 => n[2] += 1,
                l => panic!("length {l}"),
            });
        }
        let all = (n[0] + n[1] + n[2]) as f64;
        for (i, w) in [0.6, 0.3, 0.1].iter().enumerate() {
            assert!((n[i] as f64 / all - w).abs() < 0.01, "{n:?}");
        }
        assert!((cfg.classes[0].mean_flits() - 4.1).abs() < 1e-12);
    }

    /// The shares of 60,000 destinations drawn from `src` of 64 nodes under `pattern`.
    fn shares(pattern: &Pattern, src: u32) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let shape = Shape {
            side: 8,
            radix: (8, 2),
        };
        let draws = 60_000;
        let mut count = vec![0u32; 64];
        for _ in 0..draws {
            count[destination(pattern, src, 64, shape, &[], &mut rng) as usize] += 1;
        }
        count.iter().map(|&c| c as f64 / draws as f64).collect()
    }

    /// Each node's share against its expected one, within 0.01 (a share of 1/2 drawn
    /// 60,000 times has a standard deviation of 0.002).
    fn assert_shares(name: &str, got: &[f64], want: impl Fn(usize) -> f64) {
        for (d, g) in got.iter().enumerate() {
            assert!(
                (g - want(d)).abs() < 0.01,
                "{name}: node {d} got {g:.4}, want {:.4}",
                want(d)
            );
        }
    }

    /// BookSim2's diagonal, asymmetric, taper64, background and weighted hotspot
    /// destinations, by their shares. BookSim2's `RandomInt(max)` draws from 0 to max
    /// inclusive, so diagonal's `RandomInt(2) == 0` is one in three, not one in two, and
    /// taper64's offsets `RandomInt(2) - 1` are −1, 0 and +1.
    #[test]
    fn booksim2s_random_patterns_send_their_shares() {
        let third = |to: usize, me: usize| {
            move |d: usize| match d {
                _ if d == to => 1.0 / 3.0,
                _ if d == me => 2.0 / 3.0,
                _ => 0.0,
            }
        };
        assert_shares("diagonal 5", &shares(&Pattern::Diagonal, 5), third(6, 5));
        assert_shares("diagonal 63", &shares(&Pattern::Diagonal, 63), third(0, 63));
        assert_shares("asymmetric 40", &shares(&Pattern::Asymmetric, 40), |d| {
            if d == 8 || d == 40 {
                0.5
            } else {
                0.0
            }
        });
        // From node 0: half to the nine nodes 0 + 8a + b, a and b in -1..1 (mod 64:
        // 55, 56, 57, 63, 0, 1, 7, 8, 9), half uniform over the 64.
        let near = [55, 56, 57, 63, 0, 1, 7, 8, 9];
        assert_shares("taper64 0", &shares(&Pattern::Taper64, 0), |d| {
            1.0 / 128.0 + if near.contains(&d) { 1.0 / 18.0 } else { 0.0 }
        });
        let excluded = vec![0, 9, 18, 27, 36, 45, 54, 63];
        let bg = Pattern::Background {
            excluded: excluded.clone(),
        };
        assert_shares("background", &shares(&bg, 3), |d| {
            if excluded.contains(&(d as u32)) {
                0.0
            } else {
                1.0 / 56.0
            }
        });
        let hot = Pattern::Hotspot {
            nodes: vec![0, 27, 36, 63],
            fraction: 1.0,
            weights: vec![1, 1, 2, 4],
        };
        assert_shares("hotspot", &shares(&hot, 12), |d| match d {
            0 | 27 => 0.125,
            36 => 0.25,
            63 => 0.5,
            _ => 0.0,
        });
    }
}
