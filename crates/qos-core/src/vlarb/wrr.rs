//! Weighted round-robin over one VL arbitration table (Yum et al. §3.3).
//!
//! A table is a list of (VL, weight) entries, weight 0–255 flits; a pointer circulates
//! it. With a *fast-moving pointer* an entry sends one flit and the pointer moves on;
//! with a *slow-moving pointer* an entry, once it has the turn, sends up to its weight
//! contiguously. Each entry may send its weight once per *frame*; when no eligible
//! entry has weight left the frame restarts, so the arbiter is work-conserving and,
//! under saturation, lane v gets exactly W_v / Σ W of the flits.
//!
//! Weights come from reserved bandwidths by [`weights`]: ρ_v = R_v / Σ R_j and
//! W_v = ρ_v · F, rounded to the nearest flit (at least one for a lane with a
//! reservation). Rounding is the truncation the paper's worked example shows: with
//! F = 6, R = (101, 200) gives (2, 4) — plain flooring would give (2, 3). The frame is
//! small, F = k·N for N real-time lanes ([`Frame::Small`]), or the largest IBA allows,
//! 255×64 ([`Frame::Large`]); [`table`] splits a weight over 255 into several entries.

use serde::{Deserialize, Serialize};

use super::arbiter::{VlArbError, VlArbiter, VlMask, MAX_VLS};

/// Most entries in an IBA VL arbitration table.
pub const MAX_ENTRIES: usize = 64;
/// Largest weight of one entry.
pub const MAX_WEIGHT: u32 = 255;
/// The largest frame IBA allows: 64 entries of weight 255.
pub const LARGE_FRAME: u32 = MAX_WEIGHT * MAX_ENTRIES as u32;

/// One table entry: a lane and its weight in flits per frame (0 = skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Virtual lane, 0–15.
    pub vl: u8,
    /// Flits per frame, 0–255.
    pub weight: u8,
}

/// How the pointer moves (§3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pointer {
    /// One flit per turn, then the next entry.
    #[default]
    Fast,
    /// Up to weight flits per turn.
    Slow,
}

/// Frame size F used to turn bandwidth shares into weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Frame {
    /// F = k·N, N the number of lanes with a reservation.
    Small {
        /// The small constant k (the paper uses 4: F = 44 for 11 lanes).
        k: u32,
    },
    /// F = 255×64, the largest IBA table.
    Large,
    /// A given F.
    Fixed(u32),
}

impl Frame {
    /// The frame in flits for `lanes` reserved lanes.
    pub fn flits(self, lanes: usize) -> u32 {
        match self {
            Frame::Small { k } => k.saturating_mul(lanes as u32),
            Frame::Large => LARGE_FRAME,
            Frame::Fixed(f) => f,
        }
    }
}

/// W_v = ρ_v · F for each reserved bandwidth `r[v]` (any unit), rounded to nearest and
/// at least 1 where `r[v] > 0`; lanes with no reservation get 0.
pub fn weights(r: &[u64], frame: u32) -> Result<Vec<u32>, VlArbError> {
    if frame == 0 {
        return Err(VlArbError::EmptyFrame);
    }
    let total: u128 = r.iter().map(|&x| x as u128).sum();
    if total == 0 {
        return Err(VlArbError::NoReservations);
    }
    Ok(r.iter()
        .map(|&x| {
            if x == 0 {
                0
            } else {
                let w = (2 * x as u128 * frame as u128 + total) / (2 * total);
                (w as u32).max(1)
            }
        })
        .collect())
}

/// A table for lanes `vls` with reserved bandwidths `r` in frame `frame`: weights by
/// [`weights`], then [`table_from_weights`].
pub fn table(vls: &[u8], r: &[u64], frame: Frame) -> Result<Vec<Entry>, VlArbError> {
    let lanes = r.iter().filter(|&&x| x > 0).count();
    table_from_weights(vls, &weights(r, frame.flits(lanes))?)
}

/// A table for lanes `vls` with weights `w` (flits per frame): each weight split into
/// entries of at most 255, lanes interleaved entry by entry so that large weights do
/// not form one long burst. When the entries do not fit in 64 (each lane's last entry
/// is partly empty) the weights are scaled down, by 1/64 of the frame at a time, until
/// they do — the truncation a large frame suffers when it is packed into one table.
pub fn table_from_weights(vls: &[u8], w: &[u32]) -> Result<Vec<Entry>, VlArbError> {
    let entries = |w: &[u32]| -> usize { w.iter().map(|&x| x.div_ceil(MAX_WEIGHT) as usize).sum() };
    let mut left = w.to_vec();
    if entries(&left) > MAX_ENTRIES {
        let r: Vec<u64> = w.iter().map(|&x| x as u64).collect();
        let mut f: u32 = w.iter().sum();
        left = loop {
            let s = weights(&r, f)?;
            if entries(&s) <= MAX_ENTRIES || f <= 1 {
                break s;
            }
            f -= (f / 64).max(1);
        };
    }
    let mut out = Vec::new();
    while left.iter().any(|&x| x > 0) {
        for (i, l) in left.iter_mut().enumerate() {
            if *l > 0 {
                let take = (*l).min(MAX_WEIGHT);
                out.push(Entry {
                    vl: vls[i],
                    weight: take as u8,
                });
                *l -= take;
            }
        }
    }
    if out.len() > MAX_ENTRIES {
        return Err(VlArbError::TableTooLarge(out.len()));
    }
    Ok(out)
}

/// Weighted round-robin over one table.
///
/// The pointer's search for the next entry with weight left on an eligible lane is a
/// few bit operations on two masks of the (at most 64) entries, not a walk of the
/// table: this search runs for every flit a port sends.
#[derive(Debug, Clone)]
pub struct Wrr {
    entries: Vec<Entry>,
    remaining: Vec<u32>,
    pointer: Pointer,
    ptr: usize,
    /// Lanes with a non-zero entry.
    served: VlMask,
    /// Entry chosen by the last pick.
    picked: usize,
    /// Per lane, its entries (bit `e` for entry `e`); boxed, so that an arbiter (one
    /// per port, in flat arrays) stays small.
    of_lane: Box<[u64; MAX_VLS]>,
    /// Entries with weight left in the current frame (`remaining[e] > 0`).
    left: u64,
}

impl Wrr {
    /// A table (at most 64 entries, lanes 0–15) with its pointer mode.
    pub fn new(entries: Vec<Entry>, pointer: Pointer) -> Result<Self, VlArbError> {
        if entries.len() > MAX_ENTRIES {
            return Err(VlArbError::TableTooLarge(entries.len()));
        }
        let mut served = 0;
        for e in &entries {
            if e.vl as usize >= MAX_VLS {
                return Err(VlArbError::LaneOutOfRange(e.vl as usize));
            }
            if e.weight > 0 {
                served |= 1 << e.vl;
            }
        }
        let remaining = entries.iter().map(|e| e.weight as u32).collect();
        let mut of_lane = Box::new([0u64; MAX_VLS]);
        let mut left = 0u64;
        for (i, e) in entries.iter().enumerate() {
            of_lane[e.vl as usize] |= 1 << i;
            if e.weight > 0 {
                left |= 1 << i;
            }
        }
        Ok(Wrr {
            entries,
            remaining,
            pointer,
            ptr: 0,
            served,
            picked: usize::MAX,
            of_lane,
            left,
        })
    }

    /// Lanes this table serves.
    pub fn served(&self) -> VlMask {
        self.served
    }

    /// The entries.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The first entry from the pointer on, cyclically, with weight left whose lane is
    /// eligible.
    #[inline]
    fn scan(&self, eligible: VlMask) -> Option<usize> {
        let mut lanes = eligible & self.served;
        let mut wanted = 0u64;
        while lanes != 0 {
            wanted |= self.of_lane[lanes.trailing_zeros() as usize];
            lanes &= lanes - 1;
        }
        let candidates = wanted & self.left;
        if candidates == 0 {
            return None;
        }
        // The entries at or after the pointer first, then from 0.
        Some(super::bits::first_set_from(candidates, self.ptr as u32))
    }
}

impl VlArbiter for Wrr {
    fn pick<A: Fn(usize) -> u64>(&mut self, eligible: VlMask, _age: A) -> Option<usize> {
        if eligible & self.served == 0 {
            return None;
        }
        let e = match self.scan(eligible) {
            Some(e) => e,
            None => {
                // Every eligible lane spent its weight: a new frame. An entry whose lane
                // was briefly ineligible (a header waiting for its output lane) keeps
                // what it had left, up to one frame, so backlogged lanes get their
                // weight exactly.
                self.left = 0;
                for (i, (r, e)) in self.remaining.iter_mut().zip(&self.entries).enumerate() {
                    let w = e.weight as u32;
                    *r = (*r + w).min(2 * w);
                    if *r > 0 {
                        self.left |= 1 << i;
                    }
                }
                self.scan(eligible)?
            }
        };
        self.picked = e;
        Some(self.entries[e].vl as usize)
    }

    fn sent(&mut self, vl: usize) {
        let e = self.picked;
        if e >= self.entries.len() || self.entries[e].vl as usize != vl {
            return;
        }
        self.remaining[e] -= 1;
        if self.remaining[e] == 0 {
            self.left &= !(1 << e);
        }
        let n = self.entries.len();
        self.ptr = match self.pointer {
            Pointer::Fast => (e + 1) % n,
            Pointer::Slow if self.remaining[e] > 0 => e,
            Pointer::Slow => (e + 1) % n,
        };
    }
}
