//! Congestion control at the HCAs of a Yum run: the paper's
//! credit-based congestion control (§4.2) with its CQ configurations (§4.3), and the
//! two baselines of §7.2 (ALO and Self-Tuned: their configuration here, their gate in
//! the HCA module).
//!
//! **Credits** ([`Credits`]). A CQE is a credit: a consumer hands a message to its HCA
//! (posts the WQE) only while it holds one, and the credit comes back when the WQE
//! completes (`hca.completion`: the packet left the HCA, or — the reliable-service
//! variant of footnote 3 — the receiver's ACK came back). Each real-time connection
//! starts with `C_i = b_i / B · M` credits (its solicited bandwidth over the link's,
//! times the HCA buffer in packets; at least one); best effort with `C_b`
//! (`congestion.best_effort`), which the paper asks to keep within `M − ΣC_i`. Without
//! a credit a best-effort consumer waits (its message is posted as soon as a credit of
//! its CQ comes back, in order); a real-time consumer drops the attempt — counted —
//! and tries the same message again `congestion.retry` later.
//!
//! **CQ configurations** (§4.3) of the best-effort credits: one global CQ per HCA; a
//! separate CQ per destination; or four, one per quadrant of the mesh around the
//! source ([`quadrant`]). The `C_b` credits are split evenly over an HCA's CQs, so that
//! an HCA never holds more than `C_b` best-effort messages whatever the configuration
//! (the paper does not say how many credits a separate CQ starts with).
//!
//! Beyond the paper, `kind = "source_rate"` puts Gulati's source rate control in
//! place of credits ([`super::source_rate`]).

use std::collections::VecDeque;

use qos_core::units::{Bandwidth, Duration};
use serde::{Deserialize, Serialize};

use super::error::ConfigError;
use qos_core::besteffort::Policy;

/// How the best-effort credits of an HCA are kept (§4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CqLayout {
    /// One CQ per HCA.
    #[default]
    Global,
    /// One CQ per destination node.
    Separate,
    /// Four CQs per HCA, one per quadrant around the source (meshes only).
    Quad,
}

/// The Self-Tuned scheme's parameters (Thottethodi, Lebeck and Mukherjee, HPCA 2001,
/// the paper's [17]); the defaults are what this model assumes of that paper.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelfTunedSpec {
    /// Cycles between two tunings of the threshold (default 96).
    #[serde(default = "default_tuning")]
    pub tuning_period: u64,
    /// Cycles the side band takes to gather the count of full buffers and spread it
    /// to every node (default: the mesh's diameter, 2·(k − 1), plus one).
    #[serde(default)]
    pub gather_delay: Option<u64>,
    /// Threshold raise after a tuning period whose throughput did not drop, a
    /// fraction of all VL buffers of the network (default 0.01).
    #[serde(default = "default_up")]
    pub increase: f64,
    /// Threshold cut after a period whose throughput dropped, a fraction of all
    /// buffers (default 0.04).
    #[serde(default = "default_down")]
    pub decrease: f64,
    /// A drop is a period's throughput below this fraction of the previous one's
    /// (default 0.75).
    #[serde(default = "default_drop")]
    pub drop: f64,
    /// Starting threshold, a fraction of all buffers (default 0.01).
    #[serde(default = "default_up")]
    pub initial: f64,
}

fn default_tuning() -> u64 {
    96
}
fn default_up() -> f64 {
    0.01
}
fn default_down() -> f64 {
    0.04
}
fn default_drop() -> f64 {
    0.75
}

impl Default for SelfTunedSpec {
    fn default() -> Self {
        SelfTunedSpec {
            tuning_period: default_tuning(),
            gather_delay: None,
            increase: default_up(),
            decrease: default_down(),
            drop: default_drop(),
            initial: default_up(),
        }
    }
}

/// Congestion control at the HCAs (§4.2, §7.2).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CongestionSpec {
    /// No congestion control: only the HCA's buffer and send queues hold consumers
    /// back.
    #[default]
    None,
    /// Credit-based congestion control (§4.2) with CQ layout `cq` (§4.3).
    Credits {
        /// C_b: best-effort credits per HCA, split over its CQs.
        best_effort: u32,
        /// The CQ layout (default global).
        #[serde(default)]
        cq: CqLayout,
        /// M: the HCA buffer in packets (default: `hca.vl_buffer` × 16 lanes ÷
        /// `workload.packet_flits`).
        #[serde(default)]
        buffer_packets: Option<u32>,
        /// How long a real-time consumer without a credit waits before it tries the
        /// same message again (default 3.2 µs, a 40-flit packet's time on the link).
        #[serde(default = "default_retry")]
        retry: Duration,
    },
    /// At-Least-One (§7.2, [16]): a data packet enters the HCA's buffer only if a lane
    /// is free on the HCA's buffer and on every useful output of the local router, or
    /// if some output of the local router has all its lanes free.
    Alo,
    /// Self-Tuned (§7.2, [17]): the global count of full VL buffers (routers and HCAs,
    /// gathered on a side band) against a threshold tuned by hill climbing on the
    /// delivered throughput.
    SelfTuned(SelfTunedSpec),
    /// Gulati's source rate control (thesis §3.2–3.3; beyond the paper):
    /// every (source, destination) best-effort flow gets a rate its path's links can
    /// carry, and the HCA dispatches its packets no closer than its IDT
    /// ([`super::source_rate`]).
    SourceRate(SourceRateSpec),
}

fn default_retry() -> Duration {
    Duration::from_ps(3_200_000)
}

/// Lanes of an IBA port.
pub const PORT_LANES: u32 = 16;

impl CongestionSpec {
    /// Checks the values; `nodes` HCAs, `mesh` when the topology is one, `hca_flits`
    /// per HCA lane buffer, `packet_flits` per packet.
    pub fn validate(
        &self,
        nodes: u32,
        mesh: bool,
        hca_flits: u32,
        packet_flits: u32,
    ) -> Result<(), ConfigError> {
        let bad = |path: &str, m: String| {
            Err(ConfigError {
                path: path.into(),
                message: m,
            })
        };
        match *self {
            CongestionSpec::Credits {
                best_effort,
                cq,
                buffer_packets,
                retry,
            } => {
                let m = buffer_packets.unwrap_or(buffer_of(hca_flits, packet_flits));
                if m == 0 {
                    return bad(
                        "congestion.buffer_packets",
                        "the HCA buffer holds at least one packet".into(),
                    );
                }
                if cq == CqLayout::Quad && !mesh {
                    return bad(
                        "congestion.cq",
                        "quad CQs split destinations by mesh quadrant: the topology must be a mesh"
                            .into(),
                    );
                }
                let cqs = cq_count(cq, nodes);
                if best_effort < cqs || best_effort > m {
                    return bad(
                        "congestion.best_effort",
                        format!(
                            "C_b is at least one credit per CQ ({cqs}) and at most the HCA buffer M = {m} packets"
                        ),
                    );
                }
                if retry.is_zero() {
                    return bad("congestion.retry", "must be above zero".into());
                }
            }
            CongestionSpec::SelfTuned(s) => {
                if s.tuning_period == 0 || s.tuning_period > 1_000_000 {
                    return bad("congestion.tuning_period", "1 to 1000000 cycles".into());
                }
                if s.gather_delay.is_some_and(|g| g > 1_000_000) {
                    return bad("congestion.gather_delay", "at most 1000000 cycles".into());
                }
                for (k, v) in [
                    ("increase", s.increase),
                    ("decrease", s.decrease),
                    ("drop", s.drop),
                    ("initial", s.initial),
                ] {
                    if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                        return bad(
                            &format!("congestion.{k}"),
                            "a fraction above 0 and at most 1".into(),
                        );
                    }
                }
            }
            CongestionSpec::SourceRate(s) => s.validate()?,
            CongestionSpec::None | CongestionSpec::Alo => {}
        }
        Ok(())
    }
}

/// M: an HCA's buffer (16 lanes of `hca_flits`) in packets of `packet_flits`.
pub fn buffer_of(hca_flits: u32, packet_flits: u32) -> u32 {
    ((hca_flits as u64 * PORT_LANES as u64) / packet_flits.max(1) as u64).min(u32::MAX as u64)
        as u32
}

/// CQs of an HCA in layout `cq` among `nodes` nodes.
pub fn cq_count(cq: CqLayout, nodes: u32) -> u32 {
    match cq {
        CqLayout::Global => 1,
        CqLayout::Separate => nodes.saturating_sub(1).max(1),
        CqLayout::Quad => 4,
    }
}

/// The quadrant (0–3) of `dst` around `src` in a `k`×`k` mesh (node = y·k + x):
/// 0 east (dx > 0, dy ≥ 0), 1 north (dx ≤ 0, dy > 0), 2 west (dx < 0, dy ≤ 0),
/// 3 south (dx ≥ 0, dy < 0) — the four quarter-planes turned into one another by a
/// quarter turn, so that every other node lies in exactly one and each holds the same
/// number of destinations from a central node. Minimal routes to a quadrant's nodes
/// use only its two directions.
pub fn quadrant(k: u32, src: u32, dst: u32) -> u8 {
    let (sx, sy) = ((src % k) as i64, (src / k) as i64);
    let (dx, dy) = ((dst % k) as i64 - sx, (dst / k) as i64 - sy);
    if dx > 0 && dy >= 0 {
        0
    } else if dx <= 0 && dy > 0 {
        1
    } else if dx < 0 && dy <= 0 {
        2
    } else {
        3
    }
}

/// Who holds a credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// Real-time connection `c`.
    Conn(u32),
    /// Best-effort CQ `cq` of node `node`.
    Cq {
        /// The HCA.
        node: u32,
        /// Its CQ.
        cq: u32,
    },
}

/// A credit came back that was never handed out (a bug, reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("credit returned to {0:?} beyond its initial credits")]
pub struct CreditError(pub Holder);

/// The credits of every HCA, and the best-effort messages waiting for one.
#[derive(Debug, Clone)]
pub struct Credits<T> {
    layout: CqLayout,
    /// Mesh side, for quad CQs.
    k: u32,
    cqs: u32,
    rt_init: Vec<u32>,
    rt: Vec<u32>,
    be_init: Vec<u32>,
    be: Vec<u32>,
    waiting: Vec<VecDeque<T>>,
    /// Real-time attempts refused for want of a credit.
    pub rt_refusals: u64,
    /// Best-effort messages that waited for a credit.
    pub be_waits: u64,
}

impl<T> Credits<T> {
    /// Credits for `nodes` HCAs with `c_b` best-effort credits each in layout `layout`
    /// (`k`: the mesh side, for quad CQs), and real-time connections of solicited
    /// bandwidths `conns` on links of bandwidth `link` from a buffer of `m` packets.
    pub fn new(
        nodes: u32,
        layout: CqLayout,
        k: u32,
        c_b: u32,
        m: u32,
        link: Bandwidth,
        conns: &[Bandwidth],
    ) -> Credits<T> {
        let cqs = cq_count(layout, nodes);
        let be_init: Vec<u32> = (0..nodes * cqs)
            .map(|i| c_b / cqs + u32::from(i % cqs < c_b % cqs))
            .collect();
        let rt_init: Vec<u32> = conns.iter().map(|&b| initial(b, link, m)).collect();
        Credits {
            layout,
            k,
            cqs,
            rt: rt_init.clone(),
            rt_init,
            be: be_init.clone(),
            be_init,
            waiting: (0..nodes * cqs).map(|_| VecDeque::new()).collect(),
            rt_refusals: 0,
            be_waits: 0,
        }
    }

    /// The CQ of a best-effort message from `src` to `dst`.
    pub fn cq_of(&self, src: u32, dst: u32) -> Holder {
        let cq = match self.layout {
            CqLayout::Global => 0,
            // Destinations other than the source, numbered in order.
            CqLayout::Separate => {
                if dst > src {
                    dst - 1
                } else {
                    dst
                }
            }
            CqLayout::Quad => quadrant(self.k, src, dst) as u32,
        };
        Holder::Cq { node: src, cq }
    }

    fn slot(&mut self, h: Holder) -> (&mut u32, u32) {
        match h {
            Holder::Conn(c) => (&mut self.rt[c as usize], self.rt_init[c as usize]),
            Holder::Cq { node, cq } => {
                let i = (node * self.cqs + cq) as usize;
                (&mut self.be[i], self.be_init[i])
            }
        }
    }

    /// Takes a credit of `h` if it has one.
    pub fn take(&mut self, h: Holder) -> bool {
        let (v, _) = self.slot(h);
        if *v > 0 {
            *v -= 1;
            true
        } else {
            false
        }
    }

    /// Credits `h` holds now.
    pub fn available(&mut self, h: Holder) -> u32 {
        *self.slot(h).0
    }

    /// Credits `h` started with.
    pub fn initial(&mut self, h: Holder) -> u32 {
        self.slot(h).1
    }

    /// A credit of `h` comes back (a CQE): the oldest best-effort message waiting on
    /// that CQ takes it at once and is returned, to be posted; otherwise the credit is
    /// kept.
    pub fn give(&mut self, h: Holder) -> Result<Option<T>, CreditError> {
        if let Holder::Cq { node, cq } = h {
            let i = (node * self.cqs + cq) as usize;
            if let Some(m) = self.waiting[i].pop_front() {
                return Ok(Some(m));
            }
        }
        let (v, init) = self.slot(h);
        if *v >= init {
            return Err(CreditError(h));
        }
        *v += 1;
        Ok(None)
    }

    /// Best-effort message `m` waits on CQ `h` for a credit.
    pub fn wait(&mut self, h: Holder, m: T) {
        if let Holder::Cq { node, cq } = h {
            self.be_waits += 1;
            self.waiting[(node * self.cqs + cq) as usize].push_back(m);
        }
    }

    /// Messages waiting for a credit, all CQs.
    pub fn waiting(&self) -> usize {
        self.waiting.iter().map(|q| q.len()).sum()
    }
}

/// C_i = b_i / B · M, at least one credit.
pub fn initial(b: Bandwidth, link: Bandwidth, m: u32) -> u32 {
    let r = b.bytes_per_sec() as f64 / link.bytes_per_sec().max(1) as f64;
    ((r * m as f64).floor() as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mbit(x: u64) -> Bandwidth {
        Bandwidth::from_bits_per_sec(x * 1_000_000)
    }

    #[test]
    fn real_time_credits_are_proportional_to_the_solicited_bandwidth() {
        // 160 Mbit/s of a 1.6 Gbit/s link, M = 640: 64 credits; a tiny stream gets one.
        assert_eq!(initial(mbit(160), mbit(1600), 640), 64);
        assert_eq!(initial(mbit(4), mbit(1600), 640), 1);
        assert_eq!(initial(mbit(1600), mbit(1600), 640), 640);
        assert_eq!(buffer_of(1600, 40), 640);
    }

    #[test]
    fn credits_are_taken_returned_and_never_exceed_the_initial_count() {
        let mut c: Credits<u32> = Credits::new(
            2,
            CqLayout::Global,
            0,
            3,
            640,
            mbit(1600),
            &[mbit(2), mbit(320)],
        );
        assert_eq!(c.initial(Holder::Conn(1)), 128);
        let be = c.cq_of(1, 0);
        assert_eq!(be, Holder::Cq { node: 1, cq: 0 });
        for _ in 0..3 {
            assert!(c.take(be));
        }
        assert!(!c.take(be));
        // Another node's CQ is its own.
        assert!(c.take(c.cq_of(0, 1)));
        // Two messages wait; a returning credit goes to the oldest, then the next.
        c.wait(be, 10);
        c.wait(be, 11);
        assert_eq!(c.waiting(), 2);
        assert_eq!(c.give(be), Ok(Some(10)));
        assert_eq!(c.give(be), Ok(Some(11)));
        assert_eq!(c.available(be), 0);
        for _ in 0..3 {
            assert_eq!(c.give(be), Ok(None));
        }
        assert_eq!(c.available(be), 3);
        assert_eq!(c.give(be), Err(CreditError(be)));
        // A connection with one credit: the second attempt is refused until it returns.
        let rt = Holder::Conn(0);
        assert!(c.take(rt));
        assert!(!c.take(rt));
        assert_eq!(c.give(rt), Ok(None));
        assert!(c.take(rt));
    }

    #[test]
    fn separate_cqs_split_the_best_effort_credits_per_destination() {
        let mut c: Credits<()> = Credits::new(4, CqLayout::Separate, 0, 7, 640, mbit(1600), &[]);
        // Node 2's CQs: destinations 0, 1, 3 → CQs 0, 1, 2 with 3, 2, 2 credits.
        let cqs: Vec<Holder> = [0, 1, 3].iter().map(|&d| c.cq_of(2, d)).collect();
        assert_eq!(
            cqs,
            vec![
                Holder::Cq { node: 2, cq: 0 },
                Holder::Cq { node: 2, cq: 1 },
                Holder::Cq { node: 2, cq: 2 }
            ]
        );
        let n: Vec<u32> = cqs.iter().map(|&h| c.initial(h)).collect();
        assert_eq!(n, vec![3, 2, 2]);
        assert_eq!(n.iter().sum::<u32>(), 7);
        // Exhausting one destination's credits leaves the others'.
        while c.take(cqs[1]) {}
        assert!(c.take(cqs[2]));
    }

    #[test]
    fn quadrants_partition_the_other_nodes_by_direction() {
        let k = 4;
        // Node 5 is (1, 1).
        assert_eq!(quadrant(k, 5, 6), 0); // (2,1): east
        assert_eq!(quadrant(k, 5, 10), 0); // (2,2): north-east
        assert_eq!(quadrant(k, 5, 9), 1); // (1,2): north
        assert_eq!(quadrant(k, 5, 8), 1); // (0,2): north-west
        assert_eq!(quadrant(k, 5, 4), 2); // (0,1): west
        assert_eq!(quadrant(k, 5, 0), 2); // (0,0): south-west
        assert_eq!(quadrant(k, 5, 1), 3); // (1,0): south
        assert_eq!(quadrant(k, 5, 2), 3); // (2,0): south-east
                                          // In a 5×5 mesh the centre sees six nodes in each quadrant.
        let mut n = [0; 4];
        for d in 0..25 {
            if d != 12 {
                n[quadrant(5, 12, d) as usize] += 1;
            }
        }
        assert_eq!(n, [6, 6, 6, 6]);
        // Quad CQs follow the quadrant.
        let c: Credits<()> = Credits::new(16, CqLayout::Quad, 4, 8, 640, mbit(1600), &[]);
        assert_eq!(c.cq_of(5, 9), Holder::Cq { node: 5, cq: 1 });
        assert_eq!(c.cq_of(5, 2), Holder::Cq { node: 5, cq: 3 });
    }

    #[test]
    fn bad_values_name_their_key() {
        let cr = |best_effort, cq| CongestionSpec::Credits {
            best_effort,
            cq,
            buffer_packets: None,
            retry: default_retry(),
        };
        assert!(cr(200, CqLayout::Global)
            .validate(16, true, 1600, 40)
            .is_ok());
        let e = cr(700, CqLayout::Global)
            .validate(16, true, 1600, 40)
            .unwrap_err();
        assert_eq!(e.path, "congestion.best_effort");
        assert!(e.message.contains("M = 640"), "{e}");
        let e = cr(10, CqLayout::Separate)
            .validate(16, true, 1600, 40)
            .unwrap_err();
        assert_eq!(e.path, "congestion.best_effort");
        let e = cr(200, CqLayout::Quad)
            .validate(8, false, 1600, 40)
            .unwrap_err();
        assert_eq!(e.path, "congestion.cq");
        let e = CongestionSpec::SelfTuned(SelfTunedSpec {
            drop: 1.5,
            ..Default::default()
        })
        .validate(16, true, 1600, 40)
        .unwrap_err();
        assert_eq!(e.path, "congestion.drop");
    }
}

/// The parameters of `congestion = { kind = "source_rate", .. }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRateSpec {
    /// Fraction of every link the manager may allocate (default 1.0: the thesis
    /// admits up to a resource's capacity and keeps no headroom).
    #[serde(default = "default_utilisation")]
    pub utilisation: f64,
    /// How best-effort flows share the surplus: `"max-min"` (default) or `"thesis"`.
    #[serde(default = "default_share")]
    pub share: Policy,
    /// Packets an idle flow may send back to back (default 1: the thesis's
    /// `NDT = max(NDT, now)`).
    #[serde(default = "default_burst")]
    pub burst: u32,
}

fn default_utilisation() -> f64 {
    1.0
}
fn default_share() -> Policy {
    Policy::MaxMin
}
fn default_burst() -> u32 {
    1
}

impl Default for SourceRateSpec {
    fn default() -> Self {
        SourceRateSpec {
            utilisation: default_utilisation(),
            share: default_share(),
            burst: default_burst(),
        }
    }
}

/// The largest `burst`.
pub const MAX_BURST: u32 = 1_000_000;

impl SourceRateSpec {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.utilisation.is_finite() && self.utilisation > 0.0 && self.utilisation <= 1.0) {
            return Err(ConfigError {
                path: "congestion.utilisation".into(),
                message: "a fraction of the link above 0 and at most 1".into(),
            });
        }
        if self.burst == 0 || self.burst > MAX_BURST {
            return Err(ConfigError {
                path: "congestion.burst".into(),
                message: format!("1 to {MAX_BURST} packets"),
            });
        }
        Ok(())
    }
}
