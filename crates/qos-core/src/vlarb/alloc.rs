//! WRR weights of one output link from the real-time connections admitted through it
//! (Yum et al. §3.3, §4.1): what a router (or an HCA port) recomputes when a probe is
//! accepted, a release passes, or a connection's final data packet goes by.
//!
//! For real-time lane v, `R_v = Σ r_i` over the connections i admitted on v; its share is
//! `ρ_v = R_v / B_r` and its weight `W_v = ρ_v · F` (rounded as [`super::wrr::weights`]
//! does: the paper's F = 6 example gives (2, 4) for both (100, 200) and (101, 200)).
//! `B_r` is either the sum of the reservations on the link ([`RtShare::Reserved`]: every
//! weight changes at every setup) or the bandwidth configured for real-time traffic
//! ([`RtShare::Fixed`]: only the lane of the connection changes — "if B_r is fixed").
//!
//! The frame is small, `F = k·N` with N the lanes configured for real-time traffic
//! (k = 4 and 11 lanes give the paper's 44), in which case every weight is recomputed at
//! each setup; or the largest IBA allows, 255×64, where with a fixed `B_r` only the
//! connection's lane is updated. [`Update::recomputed`] counts the weights computed, the
//! complexity the paper weighs against the truncation error of a small frame.
//!
//! The two-level IBA table of the link ([`LinkWeights::arbitration`]): the real-time
//! lanes in the high-priority table with their weights, the best-effort lanes in the
//! low-priority table with weight 1 each (WRR degenerates to round-robin for best
//! effort), and the Limit of High Priority from the summed peak rates of the admitted
//! connections, `L = B / (B − B_p)` kept as a fraction, or 255 when `B_p ≥ B`
//! ([`super::iba::limit_of_high_priority`]). VL15 is outside both tables: control
//! traffic always goes first ([`super::AnyVlArbiter`]).

use serde::{Deserialize, Serialize};

use super::iba::{limit_of_high_priority, Limit};
use super::wrr::{self, Entry, Frame, Pointer};
use super::{VlArbConfig, VlArbError, CONTROL_VL, MAX_VLS};
use crate::units::Bandwidth;

/// What `B_r`, the bandwidth real-time shares are taken of, is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RtShare {
    /// The sum of the reservations on the link: `ρ_v = R_v / Σ R_j`.
    Reserved,
    /// A bandwidth allocated to real-time traffic on the link, independent of the
    /// connections admitted.
    Fixed(Bandwidth),
}

/// How a link's Limit of High Priority is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitRule {
    /// The paper's: L = B/(B − B_p) from the admitted connections' peak rates, 255
    /// when B_p ≥ B.
    #[default]
    Peak,
    /// No limit: high priority always goes first (to measure what the limit costs
    /// real-time traffic).
    None,
}

/// How a link's real-time weights are computed: the §3.3 variant and the lanes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightPolicy {
    /// Small (`k·N`), large (255×64) or a given frame.
    pub frame: Frame,
    /// Fast or slow pointer in both tables.
    pub pointer: Pointer,
    /// What `B_r` is.
    pub share: RtShare,
    /// Lanes for real-time traffic (N = their number).
    pub rt_lanes: Vec<u8>,
    /// Lanes for best-effort traffic (the low-priority table).
    pub be_lanes: Vec<u8>,
    /// B, the link's bandwidth.
    pub link: Bandwidth,
    /// How the Limit of High Priority is set.
    pub limit: LimitRule,
}

/// Why a policy or an update is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeightError {
    /// A lane beyond VL14, or VL15 (control traffic has no weight).
    #[error("lane {0} cannot carry weighted traffic (VL0-VL14)")]
    Lane(u8),
    /// A lane listed twice, or in both classes.
    #[error("lane {0} is listed twice")]
    DuplicateLane(u8),
    /// A connection on a lane not configured for real-time traffic.
    #[error("lane {0} is not a real-time lane of this link")]
    NotRealTime(u8),
    /// A link of zero bandwidth, or a fixed `B_r` of zero.
    #[error("link and real-time bandwidths must be above zero")]
    ZeroBandwidth,
    /// Releasing more than was admitted on a lane.
    #[error("release of {released} on lane {lane} exceeds its {reserved} reserved")]
    Underflow {
        /// The lane.
        lane: u8,
        /// What was released, bytes/s.
        released: u64,
        /// What was reserved, bytes/s.
        reserved: u64,
    },
    /// The table could not be built.
    #[error(transparent)]
    Table(#[from] VlArbError),
}

/// What an admission or a release changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Update {
    /// Weights computed (one per lane visited).
    pub recomputed: u32,
    /// Whether any weight or the limit changed (the arbiter must be reloaded).
    pub changed: bool,
}

/// The weights of one output link.
#[derive(Debug, Clone)]
pub struct LinkWeights {
    policy: WeightPolicy,
    /// R_v per lane, bytes/s.
    reserved: [u64; MAX_VLS],
    /// Admitted connections per lane.
    connections: [u32; MAX_VLS],
    /// B_p, bytes/s.
    peak: u64,
    /// W_v per lane.
    weights: [u32; MAX_VLS],
    limit: Limit,
}

impl LinkWeights {
    /// A link with nothing admitted (all weights zero, limit for `B_p = 0`).
    pub fn new(policy: WeightPolicy) -> Result<Self, WeightError> {
        let mut seen = 0u32;
        for &v in policy.rt_lanes.iter().chain(&policy.be_lanes) {
            if v as usize >= CONTROL_VL {
                return Err(WeightError::Lane(v));
            }
            if seen & (1 << v) != 0 {
                return Err(WeightError::DuplicateLane(v));
            }
            seen |= 1 << v;
        }
        if policy.link.is_zero() || policy.share == RtShare::Fixed(Bandwidth::ZERO) {
            return Err(WeightError::ZeroBandwidth);
        }
        if policy.frame.flits(policy.rt_lanes.len()) == 0 {
            return Err(VlArbError::EmptyFrame.into());
        }
        let limit = match policy.limit {
            LimitRule::Peak => limit_of_high_priority(policy.link.bytes_per_sec(), 0),
            LimitRule::None => Limit::NONE,
        };
        Ok(LinkWeights {
            policy,
            reserved: [0; MAX_VLS],
            connections: [0; MAX_VLS],
            peak: 0,
            weights: [0; MAX_VLS],
            limit,
        })
    }

    /// The policy.
    pub fn policy(&self) -> &WeightPolicy {
        &self.policy
    }

    /// F in flits.
    pub fn frame(&self) -> u32 {
        self.policy.frame.flits(self.policy.rt_lanes.len())
    }

    /// W_v of every lane (0 for lanes with nothing admitted and non-real-time lanes).
    pub fn weights(&self) -> &[u32; MAX_VLS] {
        &self.weights
    }

    /// R_v of a lane.
    pub fn reserved(&self, lane: u8) -> Bandwidth {
        Bandwidth::from_bytes_per_sec(self.reserved.get(lane as usize).copied().unwrap_or(0))
    }

    /// Σ R_v over the link.
    pub fn reserved_total(&self) -> Bandwidth {
        Bandwidth::from_bytes_per_sec(self.reserved.iter().sum())
    }

    /// B_p, the summed peak rates of the admitted connections.
    pub fn peak(&self) -> Bandwidth {
        Bandwidth::from_bytes_per_sec(self.peak)
    }

    /// Connections admitted on a lane.
    pub fn connections(&self, lane: u8) -> u32 {
        self.connections.get(lane as usize).copied().unwrap_or(0)
    }

    /// The Limit of High Priority.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// A connection of average rate `avg` and peak rate `peak` admitted on `lane`.
    pub fn admit(
        &mut self,
        lane: u8,
        avg: Bandwidth,
        peak: Bandwidth,
    ) -> Result<Update, WeightError> {
        self.check_lane(lane)?;
        let l = lane as usize;
        self.reserved[l] = self.reserved[l].saturating_add(avg.bytes_per_sec());
        self.connections[l] += 1;
        self.peak = self.peak.saturating_add(peak.bytes_per_sec());
        Ok(self.recompute(lane))
    }

    /// A connection admitted with `avg` and `peak` on `lane` released.
    pub fn release(
        &mut self,
        lane: u8,
        avg: Bandwidth,
        peak: Bandwidth,
    ) -> Result<Update, WeightError> {
        self.check_lane(lane)?;
        let l = lane as usize;
        let a = avg.bytes_per_sec();
        if a > self.reserved[l] || self.connections[l] == 0 {
            return Err(WeightError::Underflow {
                lane,
                released: a,
                reserved: self.reserved[l],
            });
        }
        self.reserved[l] -= a;
        self.connections[l] -= 1;
        self.peak = self.peak.saturating_sub(peak.bytes_per_sec());
        Ok(self.recompute(lane))
    }

    fn check_lane(&self, lane: u8) -> Result<(), WeightError> {
        if self.policy.rt_lanes.contains(&lane) {
            Ok(())
        } else {
            Err(WeightError::NotRealTime(lane))
        }
    }

    /// Recomputes after lane `lane` changed: every lane, or only `lane` when the frame
    /// is large and `B_r` fixed.
    fn recompute(&mut self, lane: u8) -> Update {
        let f = self.frame() as u128;
        let before = (self.weights, self.limit);
        let mut recomputed = 0;
        let only_one = matches!(self.policy.frame, Frame::Large)
            && matches!(self.policy.share, RtShare::Fixed(_));
        let b_r: u128 = match self.policy.share {
            RtShare::Reserved => self.reserved.iter().map(|&r| r as u128).sum(),
            RtShare::Fixed(b) => b.bytes_per_sec() as u128,
        };
        for &v in &self.policy.rt_lanes {
            if only_one && v != lane {
                continue;
            }
            recomputed += 1;
            let r = self.reserved[v as usize] as u128;
            self.weights[v as usize] = if r == 0 || b_r == 0 {
                0
            } else {
                // Rounded to the nearest flit, at least one for a lane with a reservation.
                let w = (2 * r * f + b_r) / (2 * b_r);
                (w.min(u32::MAX as u128) as u32).max(1)
            };
        }
        if self.policy.limit == LimitRule::Peak {
            self.limit = limit_of_high_priority(self.policy.link.bytes_per_sec(), self.peak);
        }
        Update {
            recomputed,
            changed: (self.weights, self.limit) != before,
        }
    }

    /// The IBA two-level arbitration of the link now: real-time lanes with a weight in
    /// the high-priority table, best-effort lanes round-robin in the low-priority one,
    /// the Limit of High Priority.
    pub fn arbitration(&self) -> Result<VlArbConfig, WeightError> {
        let (lanes, w): (Vec<u8>, Vec<u32>) = self
            .policy
            .rt_lanes
            .iter()
            .map(|&v| (v, self.weights[v as usize]))
            .filter(|&(_, w)| w > 0)
            .unzip();
        let high = wrr::table_from_weights(&lanes, &w)?;
        let low = self
            .policy
            .be_lanes
            .iter()
            .map(|&vl| Entry { vl, weight: 1 })
            .collect();
        Ok(VlArbConfig::Iba {
            high,
            low,
            limit: 255,
            pointer: self.policy.pointer,
            exact_limit: Some(self.limit),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vlarb::{VlArbiter, VlMask};

    fn bw(b: u64) -> Bandwidth {
        Bandwidth::from_bytes_per_sec(b)
    }

    fn policy(frame: Frame, share: RtShare, rt: usize) -> WeightPolicy {
        WeightPolicy {
            frame,
            pointer: Pointer::Fast,
            share,
            rt_lanes: (0..rt as u8).collect(),
            be_lanes: (rt as u8..15).collect(),
            link: bw(1000),
            limit: LimitRule::Peak,
        }
    }

    #[test]
    fn admitted_connections_give_the_papers_weights() {
        // §3.3: R = 100 and 200 on two lanes: F = 3 gives 1, 2; F = 300 gives 100, 200.
        for (f, want) in [(3, [1, 2]), (300, [100, 200])] {
            let mut w = LinkWeights::new(policy(Frame::Fixed(f), RtShare::Reserved, 2)).unwrap();
            w.admit(0, bw(100), bw(100)).unwrap();
            w.admit(1, bw(200), bw(200)).unwrap();
            assert_eq!(w.weights()[..2], want, "F = {f}");
        }
        // F = 6: (100, 200) and (101, 200) both give (2, 4) — the truncation error.
        for r1 in [100, 101] {
            let mut w = LinkWeights::new(policy(Frame::Fixed(6), RtShare::Reserved, 2)).unwrap();
            w.admit(0, bw(r1), bw(r1)).unwrap();
            w.admit(1, bw(200), bw(200)).unwrap();
            assert_eq!(w.weights()[..2], [2, 4], "R1 = {r1}");
        }
    }

    #[test]
    fn two_connections_on_one_lane_add_up() {
        let mut w = LinkWeights::new(policy(Frame::Fixed(3), RtShare::Reserved, 2)).unwrap();
        w.admit(0, bw(50), bw(60)).unwrap();
        w.admit(0, bw(50), bw(60)).unwrap();
        w.admit(1, bw(200), bw(200)).unwrap();
        assert_eq!(w.weights()[..2], [1, 2]);
        assert_eq!(w.connections(0), 2);
        assert_eq!(w.reserved(0), bw(100));
        assert_eq!(w.peak(), bw(320));
    }

    #[test]
    fn small_frame_is_44_for_eleven_lanes_and_recomputes_every_weight() {
        let mut w = LinkWeights::new(policy(Frame::Small { k: 4 }, RtShare::Reserved, 11)).unwrap();
        assert_eq!(w.frame(), 44);
        w.admit(0, bw(100), bw(100)).unwrap();
        let u = w.admit(3, bw(300), bw(300)).unwrap();
        assert_eq!(u.recomputed, 11);
        assert!(u.changed);
        assert_eq!((w.weights()[0], w.weights()[3]), (11, 33));
    }

    #[test]
    fn large_frame_with_fixed_real_time_bandwidth_updates_only_the_connections_lane() {
        let b_r = RtShare::Fixed(bw(800));
        let mut w = LinkWeights::new(policy(Frame::Large, b_r, 11)).unwrap();
        assert_eq!(w.frame(), 255 * 64);
        w.admit(0, bw(100), bw(100)).unwrap();
        let before = *w.weights();
        let u = w.admit(5, bw(200), bw(200)).unwrap();
        assert_eq!(u.recomputed, 1);
        assert_eq!(w.weights()[0], before[0]);
        // W_v = R_v / B_r · F: 100/800 · 16320 = 2040 and 200/800 · 16320 = 4080.
        assert_eq!((w.weights()[0], w.weights()[5]), (2040, 4080));
        // The incremental update equals recomputing from scratch.
        let mut fresh = LinkWeights::new(policy(Frame::Large, b_r, 11)).unwrap();
        fresh.admit(5, bw(200), bw(200)).unwrap();
        fresh.admit(0, bw(100), bw(100)).unwrap();
        assert_eq!(fresh.weights(), w.weights());
    }

    #[test]
    fn large_frame_with_reserved_share_recomputes_every_weight() {
        let mut w = LinkWeights::new(policy(Frame::Large, RtShare::Reserved, 11)).unwrap();
        w.admit(0, bw(100), bw(100)).unwrap();
        assert_eq!(w.weights()[0], 16320);
        let u = w.admit(1, bw(300), bw(300)).unwrap();
        assert_eq!(u.recomputed, 11);
        assert_eq!((w.weights()[0], w.weights()[1]), (4080, 12240));
    }

    #[test]
    fn release_restores_the_previous_weights_and_limit() {
        let mut w = LinkWeights::new(policy(Frame::Small { k: 4 }, RtShare::Reserved, 11)).unwrap();
        w.admit(0, bw(100), bw(300)).unwrap();
        let (weights, limit) = (*w.weights(), w.limit());
        w.admit(2, bw(250), bw(400)).unwrap();
        assert_ne!(*w.weights(), weights);
        w.release(2, bw(250), bw(400)).unwrap();
        assert_eq!((*w.weights(), w.limit()), (weights, limit));
        w.release(0, bw(100), bw(300)).unwrap();
        assert_eq!(*w.weights(), [0; MAX_VLS]);
        assert_eq!(
            w.release(0, bw(1), bw(1)),
            Err(WeightError::Underflow {
                lane: 0,
                released: 1,
                reserved: 0
            })
        );
    }

    #[test]
    fn limit_follows_the_summed_peak_rates() {
        let mut w = LinkWeights::new(policy(Frame::Small { k: 4 }, RtShare::Reserved, 11)).unwrap();
        // B_p = 0: L = B / B = 1.
        assert_eq!(w.limit().value(), 1.0);
        // B_p = 800 of 1000: L = 5.
        w.admit(0, bw(400), bw(500)).unwrap();
        w.admit(1, bw(200), bw(300)).unwrap();
        assert_eq!(w.limit().value(), 5.0);
        // B_p = 150 of 1000: L = 1000/850, not rounded down to 1.
        let mut f = LinkWeights::new(policy(Frame::Small { k: 4 }, RtShare::Reserved, 11)).unwrap();
        f.admit(0, bw(100), bw(150)).unwrap();
        assert_eq!(f.limit(), Limit { of: 1000, low: 850 });
        // B_p ≥ B: L = 255.
        w.admit(2, bw(100), bw(200)).unwrap();
        assert_eq!(w.limit().value(), 255.0);
    }

    #[test]
    fn lanes_are_checked() {
        let mut p = policy(Frame::Small { k: 4 }, RtShare::Reserved, 11);
        p.be_lanes.push(15);
        assert_eq!(LinkWeights::new(p).unwrap_err(), WeightError::Lane(15));
        let mut p = policy(Frame::Small { k: 4 }, RtShare::Reserved, 11);
        p.be_lanes.push(3);
        assert_eq!(
            LinkWeights::new(p).unwrap_err(),
            WeightError::DuplicateLane(3)
        );
        let mut w = LinkWeights::new(policy(Frame::Small { k: 4 }, RtShare::Reserved, 11)).unwrap();
        assert_eq!(w.admit(12, bw(1), bw(1)), Err(WeightError::NotRealTime(12)));
        let p = policy(Frame::Large, RtShare::Fixed(Bandwidth::ZERO), 11);
        assert_eq!(LinkWeights::new(p).unwrap_err(), WeightError::ZeroBandwidth);
    }

    /// Flits per lane when every lane in `eligible` is backlogged.
    fn saturate(cfg: &VlArbConfig, eligible: VlMask, n: usize) -> [u64; MAX_VLS] {
        let mut a = cfg.build().unwrap();
        let mut c = [0; MAX_VLS];
        for _ in 0..n {
            let v = a.pick(eligible, |_| 0).unwrap();
            a.sent(v);
            c[v] += 1;
        }
        c
    }

    #[test]
    fn the_links_arbitration_serves_real_time_by_weight_and_best_effort_by_limit() {
        for (frame, pointer) in [
            (Frame::Small { k: 4 }, Pointer::Fast),
            (Frame::Small { k: 4 }, Pointer::Slow),
            (Frame::Large, Pointer::Fast),
            (Frame::Large, Pointer::Slow),
        ] {
            let mut p = policy(frame, RtShare::Reserved, 11);
            p.pointer = pointer;
            let mut w = LinkWeights::new(p).unwrap();
            // 200 and 400 of 1000 reserved, peaks 300 + 500 = 800: L = 5.
            w.admit(0, bw(200), bw(300)).unwrap();
            w.admit(1, bw(400), bw(500)).unwrap();
            let cfg = w.arbitration().unwrap();
            let VlArbConfig::Iba {
                exact_limit, low, ..
            } = &cfg
            else {
                panic!("not IBA: {cfg:?}");
            };
            assert_eq!(exact_limit.map(|l| l.value()), Some(5.0));
            assert_eq!(low.len(), 4);
            // Lanes 0, 1 (real time) and 11 (best effort) backlogged: best effort
            // gets 1/L, the real-time lanes split the rest by their weights (1 : 2,
            // or 15 : 29 with F = 44: the truncation of a small frame).
            let n = 60_000;
            let c = saturate(&cfg, 0b11 | 1 << 11, n);
            let share = |v: usize| c[v] as f64 / n as f64;
            assert!(
                (share(11) - 0.2).abs() < 0.01,
                "{frame:?} {pointer:?}: {c:?}"
            );
            let want = w.weights()[1] as f64 / w.weights()[0] as f64;
            assert!(
                (share(1) / share(0) / want - 1.0).abs() < 0.01,
                "{frame:?} {pointer:?}: {c:?}"
            );
        }
    }
}
