//! Packet sources of the flit network (Yum §6.2, BookSim's injection processes):
//! Bernoulli or Poisson arrivals per node and class with uniform, transpose,
//! bit-complement, bit-reverse, shuffle or hotspot destinations (BookSim2's
//! patterns of the same names), and constant-bit-rate streams.
//!
//! Sources sit in a min-heap keyed by their next arrival cycle, so a cycle costs only
//! the arrivals it has: a Bernoulli source draws its geometric gap once per packet
//! instead of a coin per cycle.

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
}

/// All sources and their schedule.
#[derive(Debug, Clone)]
pub struct Traffic {
    sources: Vec<Source>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    patterns: Vec<Pattern>,
    nodes: u32,
    /// Digits of a node number for the digit permutations (tornado, neighbor): the
    /// mesh's or torus's k and n, else a square of side √nodes.
    radix: (u32, u32),
    /// Side of the square node grid that transpose swaps coordinates on (√nodes).
    side: u32,
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
                let (first, next_exact) = match c.process {
                    Process::Bernoulli => (geometric(rng, c.rate) - 1, 0.0),
                    Process::Poisson => {
                        let t = exponential(rng, c.rate);
                        (t.floor() as u64, t)
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
            let (dst, stream, next) = match &mut s.kind {
                Kind::Random {
                    rate,
                    process,
                    next_exact,
                } => {
                    let dst =
                        destination(&self.patterns[s.class as usize], s.node, nodes, shape, rng);
                    let next = match process {
                        Process::Bernoulli => t + geometric(rng, *rate),
                        Process::Poisson => {
                            *next_exact += exponential(rng, *rate);
                            (next_exact.floor() as u64).max(t)
                        }
                    };
                    (dst, u32::MAX, next)
                }
                Kind::Stream { dst, period, index } => (*dst, *index, t + *period),
            };
            emit(Arrival {
                src: s.node,
                dst,
                class: s.class,
                stream,
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
fn destination(pattern: &Pattern, src: u32, nodes: u32, shape: Shape, rng: &mut ChaCha8Rng) -> u32 {
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
        } => {
            if rng.gen::<f64>() < *fraction {
                hot[rng.gen_range(0..hot.len())]
            } else {
                rng.gen_range(0..nodes)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::flit::config::TopologySpec;

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
                let t = destination(&Pattern::Tornado, src, n, shape, &mut rng);
                assert_eq!(
                    t,
                    digits((k + 1) / 2 - 1),
                    "tornado k {k} n {dims} src {src}"
                );
                let nb = destination(&Pattern::Neighbor, src, n, shape, &mut rng);
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
}
