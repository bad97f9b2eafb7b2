//! Prefetch hints for the routers' records (Yum §3.1 state, laid out by
//! [`super::engine`]): on a large network the records a cycle touches are spread over
//! more memory than the caches hold, and each router step would wait for its records
//! one miss at a time. [`super::router::Hot`] asks for the records of the routers it
//! will step next while it steps the current one, so the misses overlap.
//!
//! A hint changes no value and no result: only when the bytes arrive.

/// Asks the CPU to bring `slice[i]` into its caches; nothing if `i` is out of range.
#[inline(always)]
pub(super) fn ahead<T>(slice: &[T], i: usize) {
    if let Some(x) = slice.get(i) {
        hint(x);
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn hint<T>(x: &T) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: PREFETCHT0 is a hint: it never faults, reads nothing into the program
    // and writes nothing; the address is that of a live element besides.
    unsafe { _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>()) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn hint<T>(_x: &T) {}
