//! Bit searches the arbiters share (a leaf: it imports nothing of `vlarb`).

/// The first set bit of `mask` (not 0) at or after bit `start`, cyclically over 64
/// bits; a `start` of 64 or more starts at bit 0. A rotation, not a branch on whether a
/// bit at or after `start` is set (that branch follows the traffic and mispredicts).
#[inline]
pub fn first_set_from(mask: u64, start: u32) -> usize {
    debug_assert_ne!(mask, 0);
    let start = if start >= 64 { 0 } else { start };
    let d = mask.rotate_right(start).trailing_zeros();
    ((start + d) % 64) as usize
}
