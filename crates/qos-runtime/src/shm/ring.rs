//! Lock-free single-producer / single-consumer rings in shared memory: GM's send and
//! receive descriptor queues and its event (completion) queue (thesis §4.1), shared by
//! an application and its agent without a system call per descriptor.
//!
//! Each ring is a header with the producer's `tail` and the consumer's `head` on
//! separate cache lines, then `cap` fixed-size slots. The producer writes a slot, then
//! publishes it with a release store of `tail`; the consumer reads after an acquire load.
//! The other side may be hostile: indices read from shared memory are checked, and a
//! ring whose indices make no sense reports [`RingError::Corrupt`] instead of reading
//! out of bounds.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes of a ring's header: the producer's `tail` (a u32 at 0) and the consumer's
/// `head` (a u32 at 64), each on its own cache line.
pub const HEADER_BYTES: usize = 128;
const HEAD_AT: usize = 64;

/// Bytes a ring of `cap` slots of `T` takes.
pub const fn ring_bytes<T>(cap: u32) -> usize {
    HEADER_BYTES + cap as usize * std::mem::size_of::<T>()
}

/// Plain data a ring may carry: slots are read from memory the other side wrote, so any
/// bytes there must make a valid value.
///
/// # Safety
/// Implement only for `Copy` types for which every bit pattern of their size is a valid
/// value (integers, arrays of them, `repr(C)` structs of those with explicit padding).
pub unsafe trait Plain: Copy {}

// SAFETY: every bit pattern is a valid u64.
unsafe impl Plain for u64 {}

/// The other side broke the ring's invariants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ring indices corrupt (head {head}, tail {tail}, capacity {cap})")]
pub struct RingError {
    pub head: u32,
    pub tail: u32,
    pub cap: u32,
}

/// One end's view of a ring at a fixed place in a mapping, carrying [`Plain`] slots.
pub struct Ring<T> {
    base: *mut u8,
    slots: *mut T,
    cap: u32,
    _t: PhantomData<T>,
}

// SAFETY: the ring only touches shared memory through atomics and volatile copies; the
// single-producer/single-consumer discipline is kept by the callers (one owner per end).
// Only the two index words are ever borrowed (as atomics); the padding and the slots,
// which the other side may write at any time, never are.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Plain> Ring<T> {
    /// A view over `ring_bytes::<T>(cap)` bytes at `base`, which must be 64-byte aligned
    /// and stay mapped while the ring is used.
    ///
    /// # Safety
    /// `base` must point to at least `ring_bytes::<T>(cap)` writable bytes, 64-aligned,
    /// that outlive the returned value.
    pub unsafe fn from_raw(base: *mut u8, cap: u32) -> Self {
        Ring {
            base,
            // SAFETY: inside the caller's allocation (from_raw's contract).
            slots: unsafe { base.add(HEADER_BYTES) } as *mut T,
            cap,
            _t: PhantomData,
        }
    }

    fn tail(&self) -> &AtomicU32 {
        // SAFETY: from_raw's contract: `base` is 64-aligned, mapped while the ring lives;
        // an atomic may be changed by the other side behind a shared reference.
        unsafe { &*(self.base as *const AtomicU32) }
    }

    fn head(&self) -> &AtomicU32 {
        // SAFETY: as for `tail`, 64 bytes further.
        unsafe { &*(self.base.add(HEAD_AT) as *const AtomicU32) }
    }

    /// Entries waiting (consumer's view).
    pub fn len(&self) -> Result<u32, RingError> {
        let (head, tail) = (
            self.head().load(Ordering::Relaxed),
            self.tail().load(Ordering::Acquire),
        );
        let n = tail.wrapping_sub(head);
        if n > self.cap {
            return Err(RingError {
                head,
                tail,
                cap: self.cap,
            });
        }
        Ok(n)
    }

    pub fn is_empty(&self) -> bool {
        self.len().map_or(true, |n| n == 0)
    }

    /// Producer: appends `v`; false when full.
    pub fn push(&self, v: T) -> Result<bool, RingError> {
        let tail = self.tail().load(Ordering::Relaxed);
        let head = self.head().load(Ordering::Acquire);
        let used = tail.wrapping_sub(head);
        if used > self.cap {
            return Err(RingError {
                head,
                tail,
                cap: self.cap,
            });
        }
        if used == self.cap {
            return Ok(false);
        }
        // SAFETY: index < cap; slot memory is ours until tail is published.
        unsafe { std::ptr::write_volatile(self.slots.add((tail % self.cap) as usize), v) };
        self.tail().store(tail.wrapping_add(1), Ordering::Release);
        Ok(true)
    }

    /// Consumer: takes the oldest entry.
    pub fn pop(&self) -> Result<Option<T>, RingError> {
        let head = self.head().load(Ordering::Relaxed);
        let tail = self.tail().load(Ordering::Acquire);
        let n = tail.wrapping_sub(head);
        if n > self.cap {
            return Err(RingError {
                head,
                tail,
                cap: self.cap,
            });
        }
        if n == 0 {
            return Ok(None);
        }
        // SAFETY: index < cap; the producer published this slot before tail.
        let v = unsafe { std::ptr::read_volatile(self.slots.add((head % self.cap) as usize)) };
        self.head().store(head.wrapping_add(1), Ordering::Release);
        Ok(Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Mem([u8; 4096]);

    #[test]
    fn ring_is_fifo_and_reports_full() {
        let mut m = Box::new(Mem([0; 4096]));
        // SAFETY: 4096 aligned bytes, enough for 4 u64 slots.
        let r: Ring<u64> = unsafe { Ring::from_raw(m.0.as_mut_ptr(), 4) };
        for i in 0..4 {
            assert!(r.push(i).unwrap());
        }
        assert!(!r.push(9).unwrap());
        for i in 0..4 {
            assert_eq!(r.pop().unwrap(), Some(i));
        }
        assert_eq!(r.pop().unwrap(), None);
    }

    #[test]
    fn corrupt_indices_are_reported_not_followed() {
        let mut m = Box::new(Mem([0; 4096]));
        // Hostile producer sets tail far beyond head.
        m.0[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        // SAFETY: as above.
        let r: Ring<u64> = unsafe { Ring::from_raw(m.0.as_mut_ptr(), 4) };
        assert!(r.pop().is_err());
    }

    #[test]
    fn producer_and_consumer_threads_pass_a_million_items_in_order() {
        let m = Box::leak(Box::new(Mem([0; 4096])));
        let base = m.0.as_mut_ptr() as usize;
        // SAFETY: leaked aligned memory lives forever.
        let p: Ring<u64> = unsafe { Ring::from_raw(base as *mut u8, 16) };
        let c: Ring<u64> = unsafe { Ring::from_raw(base as *mut u8, 16) };
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < 1_000_000u64 {
                if p.push(i).unwrap() {
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut want = 0;
        while want < 1_000_000u64 {
            if let Some(v) = c.pop().unwrap() {
                assert_eq!(v, want);
                want += 1;
            }
        }
        t.join().unwrap();
    }
}
