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

/// Ring header, two cache lines.
#[repr(C, align(64))]
pub struct RingHeader {
    tail: AtomicU32,
    _pad0: [u8; 60],
    head: AtomicU32,
    _pad1: [u8; 60],
}

/// Bytes a ring of `cap` slots of `T` takes.
pub const fn ring_bytes<T>(cap: u32) -> usize {
    std::mem::size_of::<RingHeader>() + cap as usize * std::mem::size_of::<T>()
}

/// The other side broke the ring's invariants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ring indices corrupt (head {head}, tail {tail}, capacity {cap})")]
pub struct RingError {
    pub head: u32,
    pub tail: u32,
    pub cap: u32,
}

/// One end's view of a ring at a fixed place in a mapping. `T` must be plain data
/// (`Copy`, any bit pattern valid), which every descriptor type here is.
pub struct Ring<T> {
    hdr: *const RingHeader,
    slots: *mut T,
    cap: u32,
    _t: PhantomData<T>,
}

// SAFETY: the ring only touches shared memory through atomics and volatile copies; the
// single-producer/single-consumer discipline is kept by the callers (one owner per end).
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// A view over `ring_bytes::<T>(cap)` bytes at `base`, which must be 64-byte aligned
    /// and stay mapped while the ring is used.
    ///
    /// # Safety
    /// `base` must point to at least `ring_bytes::<T>(cap)` writable bytes, 64-aligned,
    /// that outlive the returned value.
    pub unsafe fn from_raw(base: *mut u8, cap: u32) -> Self {
        Ring {
            hdr: base as *const RingHeader,
            slots: base.add(std::mem::size_of::<RingHeader>()) as *mut T,
            cap,
            _t: PhantomData,
        }
    }

    fn hdr(&self) -> &RingHeader {
        // SAFETY: from_raw's contract.
        unsafe { &*self.hdr }
    }

    /// Entries waiting (consumer's view).
    pub fn len(&self) -> Result<u32, RingError> {
        let h = self.hdr();
        let (head, tail) = (
            h.head.load(Ordering::Relaxed),
            h.tail.load(Ordering::Acquire),
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
        let h = self.hdr();
        let tail = h.tail.load(Ordering::Relaxed);
        let head = h.head.load(Ordering::Acquire);
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
        h.tail.store(tail.wrapping_add(1), Ordering::Release);
        Ok(true)
    }

    /// Consumer: takes the oldest entry.
    pub fn pop(&self) -> Result<Option<T>, RingError> {
        let h = self.hdr();
        let head = h.head.load(Ordering::Relaxed);
        let tail = h.tail.load(Ordering::Acquire);
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
        h.head.store(head.wrapping_add(1), Ordering::Release);
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
