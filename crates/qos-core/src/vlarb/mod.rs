//! Virtual-lane (VL) arbitration for one output of a wormhole router or host channel
//! adapter (Yum et al. §3.3): which of the C virtual lanes sends the next flit.
//!
//! One small trait, [`VlArbiter`], and one enum, [`AnyVlArbiter`], built from
//! configuration ([`VlArbConfig`]):
//! - [`Fcfs`] — the lane whose head flit has waited longest (best-effort baseline, §3.1).
//! - [`RoundRobin`] — lanes in turn, one flit each (best-effort baseline, §3.1).
//! - [`wrr::Wrr`] — one VL arbitration table of (VL, weight) entries served by weighted
//!   round-robin, with a fast-moving pointer (one flit per turn) or a slow-moving pointer
//!   (weight flits per turn) — §3.3's four variants are this plus a small (F = k·N) or
//!   large (255×64) frame, see [`wrr::Frame`].
//! - [`iba::TwoLevel`] — the IBA two-level scheme: a high- and a low-priority table with
//!   the Limit of High Priority L = B/(B − B_p) kept exactly (a fraction), or 255 when
//!   B_p ≥ B ([`iba::limit_of_high_priority`]).
//!
//! - [`alloc::LinkWeights`] — the weights and limit of one output link computed from the
//!   real-time connections admitted through it (§3.3, §4.1), turned into the
//!   [`VlArbConfig::Iba`] tables above.
//!
//! Management lane VL15 always wins when it has a flit, whatever the policy (IBA reserves
//! it for control traffic at the highest priority).
//!
//! Arbiters work per flit on a bit mask of eligible lanes (bit v = lane v has a flit that
//! may go now), so the flit-level simulator can call them every cycle without allocating.
//! [`VlArbiter::pick`] chooses; [`VlArbiter::sent`] commits, so a pick that loses a later
//! stage (e.g. crossbar output arbitration) leaves the arbiter unchanged.

use serde::{Deserialize, Serialize};

pub mod alloc;
pub mod arbiter;
pub mod bits;
pub mod iba;
pub mod wrr;

pub use arbiter::{VlArbError, VlArbiter, VlMask, CONTROL_VL, MAX_VLS};
pub use bits::first_set_from;

#[cfg(test)]
mod tests;

/// First come, first served across lanes: the oldest head flit goes first (ties to the
/// lower lane).
#[derive(Debug, Clone, Default)]
pub struct Fcfs;

impl VlArbiter for Fcfs {
    fn pick<A: Fn(usize) -> u64>(&mut self, eligible: VlMask, age: A) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        let mut m = eligible;
        while m != 0 {
            let v = m.trailing_zeros() as usize;
            m &= m - 1;
            let a = age(v);
            match best {
                Some((b, _)) if b <= a => {}
                _ => best = Some((a, v)),
            }
        }
        best.map(|(_, v)| v)
    }
    fn sent(&mut self, _vl: usize) {}
}

/// Round-robin across lanes, one flit per turn: the lane after the last one that sent
/// goes first.
#[derive(Debug, Clone, Default)]
pub struct RoundRobin {
    next: u32,
}

impl RoundRobin {
    /// The first eligible lane at or after `start`, cyclically.
    #[inline]
    pub fn first_from(eligible: VlMask, start: u32) -> Option<usize> {
        if eligible == 0 {
            return None;
        }
        // A rotation, not a branch on whether a lane at or after `start` is eligible:
        // that follows the traffic, and a mispredicted branch costs more.
        let start = start % 32;
        let d = eligible.rotate_right(start).trailing_zeros();
        Some(((start + d) % 32) as usize)
    }
}

impl VlArbiter for RoundRobin {
    #[inline]
    fn pick<A: Fn(usize) -> u64>(&mut self, eligible: VlMask, _age: A) -> Option<usize> {
        Self::first_from(eligible, self.next)
    }
    #[inline]
    fn sent(&mut self, vl: usize) {
        self.next = (vl as u32 + 1) % MAX_VLS as u32;
    }
}

/// Which arbiter, as written in a scenario or topology file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum VlArbConfig {
    /// First come, first served.
    Fcfs,
    /// Round-robin, one flit per lane per turn.
    #[default]
    RoundRobin,
    /// One weighted round-robin table (§3.3).
    Wrr {
        /// The table: lanes and weights (0–255).
        table: Vec<wrr::Entry>,
        /// Fast (one flit per turn) or slow (weight flits per turn) pointer.
        #[serde(default)]
        pointer: wrr::Pointer,
    },
    /// IBA two-level arbitration: high- and low-priority tables and the limit.
    Iba {
        /// High-priority table.
        high: Vec<wrr::Entry>,
        /// Low-priority table.
        low: Vec<wrr::Entry>,
        /// Limit of High Priority in IBA's integer encoding (255 = unlimited).
        limit: u8,
        /// Fast or slow pointer in both tables.
        #[serde(default)]
        pointer: wrr::Pointer,
        /// The limit as a fraction L = of/low (the paper's B/(B − B_p)); when given it
        /// replaces `limit`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exact_limit: Option<iba::Limit>,
    },
}

impl VlArbConfig {
    /// Checks the configuration and builds the arbiter.
    pub fn build(&self) -> Result<AnyVlArbiter, VlArbError> {
        Ok(match self {
            VlArbConfig::Fcfs => AnyVlArbiter::Fcfs(Fcfs),
            VlArbConfig::RoundRobin => AnyVlArbiter::RoundRobin(RoundRobin::default()),
            VlArbConfig::Wrr { table, pointer } => {
                AnyVlArbiter::Wrr(wrr::Wrr::new(table.clone(), *pointer)?)
            }
            VlArbConfig::Iba {
                high,
                low,
                limit,
                pointer,
                exact_limit,
            } => AnyVlArbiter::Iba(iba::TwoLevel::with_limit(
                wrr::Wrr::new(high.clone(), *pointer)?,
                wrr::Wrr::new(low.clone(), *pointer)?,
                exact_limit.unwrap_or(iba::Limit::from_iba(*limit)),
            )),
        })
    }
}

/// Any arbiter, chosen from configuration. VL15 wins whenever it is eligible.
#[derive(Debug, Clone)]
pub enum AnyVlArbiter {
    /// See [`Fcfs`].
    Fcfs(Fcfs),
    /// See [`RoundRobin`].
    RoundRobin(RoundRobin),
    /// See [`wrr::Wrr`].
    Wrr(wrr::Wrr),
    /// See [`iba::TwoLevel`].
    Iba(iba::TwoLevel),
}

impl VlArbiter for AnyVlArbiter {
    #[inline]
    fn pick<A: Fn(usize) -> u64>(&mut self, eligible: VlMask, age: A) -> Option<usize> {
        if eligible & (1 << CONTROL_VL) != 0 {
            return Some(CONTROL_VL);
        }
        match self {
            AnyVlArbiter::Fcfs(a) => a.pick(eligible, age),
            AnyVlArbiter::RoundRobin(a) => a.pick(eligible, age),
            AnyVlArbiter::Wrr(a) => a.pick(eligible, age),
            AnyVlArbiter::Iba(a) => a.pick(eligible, age),
        }
    }
    #[inline]
    fn sent(&mut self, vl: usize) {
        if vl == CONTROL_VL {
            return;
        }
        match self {
            AnyVlArbiter::Fcfs(a) => a.sent(vl),
            AnyVlArbiter::RoundRobin(a) => a.sent(vl),
            AnyVlArbiter::Wrr(a) => a.sent(vl),
            AnyVlArbiter::Iba(a) => a.sent(vl),
        }
    }
}
