//! The interface every VL arbiter implements ([`VlArbiter`]), its error and the lane
//! limits. A leaf, so the arbiters (IBA tables, WRR) use it without importing the module
//! that chooses between them.

/// Most virtual lanes a port may have (IBA: VL0–VL14 data, VL15 management).
pub const MAX_VLS: usize = 16;

/// The management lane, reserved for control traffic at the highest priority.
pub const CONTROL_VL: usize = 15;

/// Bit v set: lane v is eligible.
pub type VlMask = u32;

/// Why an arbitration configuration is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VlArbError {
    /// A table entry names a lane beyond VL15.
    #[error("virtual lane {0} out of range (VL0-VL15)")]
    LaneOutOfRange(usize),
    /// An IBA table holds at most 64 entries.
    #[error("VL arbitration table has {0} entries; IBA allows at most 64")]
    TableTooLarge(usize),
    /// Weights cannot be computed from nothing.
    #[error("no reserved bandwidth to compute WRR weights from")]
    NoReservations,
    /// A frame of zero flits.
    #[error("WRR frame must be at least one flit")]
    EmptyFrame,
}

/// A per-flit virtual-lane arbiter.
pub trait VlArbiter {
    /// Chooses a lane among `eligible` (non-zero). `age(v)` is when lane v's head flit
    /// arrived (only [`super::Fcfs`] reads it). Returns `None` when the policy serves none of
    /// the eligible lanes (a lane in no table).
    fn pick<A: Fn(usize) -> u64>(&mut self, eligible: VlMask, age: A) -> Option<usize>;
    /// Lane `vl`, as returned by the last [`VlArbiter::pick`], sent one flit.
    fn sent(&mut self, vl: usize);
}
