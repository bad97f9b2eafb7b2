//! The flit network's large arrays (Yum §3.1 state: VC records, flit rings, port
//! records) on transparent huge pages where the kernel offers them on request
//! (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`, or `always`).
//!
//! On a 64×64 mesh those arrays hold about 10 MB, some 2,400 pages of 4 KB: more than
//! the CPU's translation buffers cover, so a flit hop pays for page walks on top of its
//! cache misses. On 2 MB pages seven entries cover them. Only the speed changes.

/// `n` copies of `x`, in memory advised for huge pages before it is first written
/// (advised afterwards, pages already backed by 4 KB frames would stay so until the
/// kernel's background collapse gets to them).
pub(super) fn filled<T: Clone>(n: usize, x: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise(&v);
    v.resize(n, x);
    v
}

/// Size of a huge page on x86-64 and most aarch64 kernels.
#[cfg(target_os = "linux")]
const HUGE: usize = 2 << 20;

#[cfg(target_os = "linux")]
fn advise<T>(v: &Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    let start = v.as_ptr() as usize;
    // The whole huge pages inside the buffer; smaller buffers are left alone.
    let lo = start.next_multiple_of(HUGE);
    let hi = (start + bytes) / HUGE * HUGE;
    if hi > lo {
        // SAFETY: madvise(MADV_HUGEPAGE) only tells the kernel how to back pages of a
        // range this process owns (inside `v`'s allocation); it reads and writes no
        // memory, and on failure (no huge pages here) nothing changes.
        unsafe {
            libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise<T>(_v: &Vec<T>) {}
