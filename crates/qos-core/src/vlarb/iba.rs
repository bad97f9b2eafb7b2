//! IBA two-level VL arbitration (Yum et al. §3.3): a high-priority and a low-priority
//! weighted round-robin table, and the Limit of High Priority that keeps low-priority
//! lanes moving.
//!
//! The limit L guarantees low-priority traffic the bandwidth B_b = B / L: while a
//! low-priority flit waits, high priority may send at most L − 1 flits in a row before
//! low priority sends one, so high priority is held to (L − 1)/L of the link. L = 255
//! means no limit (IBA). With L = B/(B − B_p) ([`limit_of_high_priority`]) high priority
//! keeps its summed peak rate B_p and best effort gets the rest.

use super::wrr::Wrr;
use super::{VlArbiter, VlMask};

/// L = B / (B − B_p), truncated, or 255 (no limit) when B_p ≥ B or the quotient does not
/// fit. `link` is B and `peak_sum` is B_p in any common unit.
pub fn limit_of_high_priority(link: u64, peak_sum: u64) -> u8 {
    if peak_sum >= link {
        return 255;
    }
    let l = link / (link - peak_sum);
    l.clamp(1, 255) as u8
}

/// The two-level arbiter.
#[derive(Debug, Clone)]
pub struct TwoLevel {
    high: Wrr,
    low: Wrr,
    limit: u8,
    /// High-priority flits sent in a row while low priority waited.
    run: u32,
    /// Whether the last pick came from the high table, and low was then waiting.
    picked_high: bool,
    low_waiting: bool,
}

impl TwoLevel {
    /// Arbiter over `high` and `low` with Limit of High Priority `limit` (255 = none;
    /// 0 is treated as 1).
    pub fn new(high: Wrr, low: Wrr, limit: u8) -> Self {
        TwoLevel {
            high,
            low,
            limit: limit.max(1),
            run: 0,
            picked_high: false,
            low_waiting: false,
        }
    }
}

impl VlArbiter for TwoLevel {
    fn pick<A: Fn(usize) -> u64>(&mut self, eligible: VlMask, age: A) -> Option<usize> {
        let hi = eligible & self.high.served();
        let lo = eligible & self.low.served();
        self.low_waiting = lo != 0;
        let high_allowed =
            self.limit == 255 || !self.low_waiting || self.run + 1 < self.limit as u32;
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
            self.run = if self.low_waiting { self.run + 1 } else { 0 };
        } else {
            self.low.sent(vl);
            self.run = 0;
        }
    }
}
