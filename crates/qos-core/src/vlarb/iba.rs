//! IBA two-level VL arbitration (Yum et al. §3.3): a high-priority and a low-priority
//! weighted round-robin table, and the Limit of High Priority that keeps low-priority
//! lanes moving.
//!
//! The paper defines the limit L by the bandwidth it guarantees low priority,
//! B_b = B / L, and sets L = B/(B − B_p) so that B = B_p + B_b: high priority keeps its
//! summed peak rate B_p and best effort gets exactly the rest. L is a fraction in
//! general (B_p = 0.1·B gives L = 1.11…), so the arbiter keeps a credit counter
//! ([`Limit`]): every flit the port sends while a low-priority flit waits earns low
//! priority 1/L of a flit; once it has earned a whole one, low priority sends. With both
//! classes backlogged low priority gets exactly 1/L of the flits over time, high
//! priority (L − 1)/L = B_p/B. For B_p ≥ B the paper assigns L = 255, which by its own
//! B_b = B/L leaves best effort 1/255 of the link ("we can prevent starvation of lower
//! priority messages by assuring a minimum forwarding bandwidth").
//!
//! A hand-written table (`limit = n` in a topology file) keeps IBA's integer encoding:
//! high priority sends at most n − 1 flits in a row while low priority waits (low gets
//! 1/n, the same rule for whole n), and 255 means no limit.

use serde::{Deserialize, Serialize};

use super::arbiter::{VlArbiter, VlMask};
use super::wrr::Wrr;

/// A Limit of High Priority L = `of` / `low`: while a low-priority flit waits, low
/// priority is owed `low`/`of` of a flit for every flit the port sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// The numerator of L (B).
    pub of: u64,
    /// The denominator of L (B − B_p); zero means no limit.
    pub low: u64,
}

impl Limit {
    /// No limit: high priority always goes first.
    pub const NONE: Limit = Limit { of: 1, low: 0 };

    /// IBA's integer encoding: 255 is no limit, n (0 read as 1) gives low priority
    /// one flit in n.
    pub fn from_iba(limit: u8) -> Limit {
        match limit {
            255 => Limit::NONE,
            n => Limit {
                of: n.max(1) as u64,
                low: 1,
            },
        }
    }

    /// L as a number (infinite for no limit).
    pub fn value(&self) -> f64 {
        if self.low == 0 {
            f64::INFINITY
        } else {
            self.of as f64 / self.low as f64
        }
    }

    /// The share of the link low priority keeps with both classes backlogged, 1/L.
    pub fn low_share(&self) -> f64 {
        if self.low == 0 || self.of == 0 {
            0.0
        } else {
            (self.low as f64 / self.of as f64).min(1.0)
        }
    }
}

/// The paper's L for a link of bandwidth `link` (B) whose admitted connections peak at
/// `peak_sum` (B_p) in total, in any common unit: B/(B − B_p) exactly, or 255 when
/// B_p ≥ B (low priority then keeps 1/255 of the link).
pub fn limit_of_high_priority(link: u64, peak_sum: u64) -> Limit {
    if peak_sum >= link {
        return Limit { of: 255, low: 1 };
    }
    Limit {
        of: link,
        low: link - peak_sum,
    }
}

/// The two-level arbiter.
#[derive(Debug, Clone)]
pub struct TwoLevel {
    high: Wrr,
    low: Wrr,
    limit: Limit,
    /// Low priority's earned flits, in units of 1/`limit.of` flit.
    credit: u64,
    /// Whether the last pick came from the high table, and low was then waiting.
    picked_high: bool,
    low_waiting: bool,
}

impl TwoLevel {
    /// Arbiter over `high` and `low` with IBA's integer Limit of High Priority `limit`
    /// (255 = none; 0 is treated as 1).
    pub fn new(high: Wrr, low: Wrr, limit: u8) -> Self {
        Self::with_limit(high, low, Limit::from_iba(limit))
    }

    /// Arbiter over `high` and `low` with Limit of High Priority `limit`.
    pub fn with_limit(high: Wrr, low: Wrr, limit: Limit) -> Self {
        TwoLevel {
            high,
            low,
            limit: if limit.of == 0 {
                Limit { of: 1, low: 1 }
            } else {
                limit
            },
            credit: 0,
            picked_high: false,
            low_waiting: false,
        }
    }

    /// The limit.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// Whether low priority has earned the next flit.
    #[inline]
    fn low_owed(&self) -> bool {
        self.limit.low != 0 && self.credit + self.limit.low >= self.limit.of
    }
}

impl VlArbiter for TwoLevel {
    fn pick<A: Fn(usize) -> u64>(&mut self, eligible: VlMask, age: A) -> Option<usize> {
        let hi = eligible & self.high.served();
        let lo = eligible & self.low.served();
        self.low_waiting = lo != 0;
        let high_allowed = !self.low_waiting || !self.low_owed();
        if hi != 0 && high_allowed {
            if let Some(v) = self.high.pick(hi, &age) {
                self.picked_high = true;
                return Some(v);
            }
        }
        self.picked_high = false;
        self.low.pick(lo, &age)
    }

    fn sent(&mut self, vl: usize) {
        if self.picked_high {
            self.high.sent(vl);
            // Earned only while low priority waits: an idle class banks nothing.
            self.credit = if self.low_waiting {
                self.credit + self.limit.low
            } else {
                0
            };
        } else {
            self.low.sent(vl);
            self.credit = (self.credit + self.limit.low).saturating_sub(self.limit.of);
        }
    }
}
