//! A port's shared-memory region (GM's DMAable memory and its queues, thesis §4.1): one
//! memfd holding a control block, the send and receive descriptor rings, the completion
//! ring and the message buffer area; plus the eventfd doorbells and SCM_RIGHTS passing.
//!
//! Layout (every part 64-byte aligned):
//! `[control 4 KiB][send ring][recv ring][completion ring][buffers]`.
//!
//! The other side of a region may be hostile: shared fields are
//! atomics behind shared references, bounds are checked inside every accessor, and
//! message bytes are copied, never borrowed (see [`Region`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use rustix::{event, fs, mm};
use serde::{Deserialize, Serialize};

use super::ring::{ring_bytes, Plain, Ring};

/// Magic at the start of a region.
pub const REGION_MAGIC: u64 = 0x636c_7573_7465_7271; // "clusterq"

/// A send descriptor: "send `len` bytes at `offset` to (`dst_node`, `dst_port`)".
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendDesc {
    pub offset: u64,
    pub len: u32,
    pub dst_node: u32,
    pub cookie: u64,
    pub dst_port: u16,
    pub priority: u8,
    pub _pad: [u8; 5],
}

/// A receive-buffer posting.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvDesc {
    pub offset: u64,
    pub capacity: u32,
    pub _pad: u32,
    pub cookie: u64,
}

// SAFETY: repr(C) structs of integers and byte arrays with explicit padding fields:
// every bit pattern is a valid value.
unsafe impl Plain for SendDesc {}
// SAFETY: as above.
unsafe impl Plain for RecvDesc {}
// SAFETY: as above.
unsafe impl Plain for CompletionDesc {}

/// Completion kinds.
pub const CQ_SENT: u32 = 1;
pub const CQ_RECEIVED: u32 = 2;
/// A send failed; `len` says why (`ERR_*`), `src_node` names the destination node for
/// the peer errors.
pub const CQ_ERROR: u32 = 3;

/// Why a send failed (the `len` of a [`CQ_ERROR`] completion): the descriptor was
/// refused (buffer outside the area, unknown node).
pub const ERR_BAD_DESCRIPTOR: u32 = 0;
/// The destination's agent restarted before acknowledging the whole message: it may or
/// may not have been delivered.
pub const ERR_PEER_RESTARTED: u32 = 1;
/// The destination's agent did not answer for the give-up time.
pub const ERR_PEER_UNREACHABLE: u32 = 2;

/// An entry of the completion (event) queue.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompletionDesc {
    pub kind: u32,
    pub len: u32,
    pub cookie: u64,
    pub src_node: u32,
    pub src_port: u16,
    pub priority: u8,
    pub _pad: u8,
}

/// Sizes of a port's region, agreed at open time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub send_slots: u32,
    pub recv_slots: u32,
    pub completion_slots: u32,
    pub buffer_bytes: u64,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            send_slots: 256,
            recv_slots: 256,
            completion_slots: 1024,
            buffer_bytes: 16 << 20,
        }
    }
}

const CONTROL: usize = 4096;

fn align64(n: usize) -> usize {
    n.div_ceil(64) * 64
}

impl Layout {
    pub fn send_at(&self) -> usize {
        CONTROL
    }
    pub fn recv_at(&self) -> usize {
        self.send_at() + align64(ring_bytes::<SendDesc>(self.send_slots))
    }
    pub fn completion_at(&self) -> usize {
        self.recv_at() + align64(ring_bytes::<RecvDesc>(self.recv_slots))
    }
    pub fn buffers_at(&self) -> usize {
        align64(self.completion_at() + ring_bytes::<CompletionDesc>(self.completion_slots))
            .next_multiple_of(4096)
    }
    pub fn total(&self) -> usize {
        self.buffers_at() + self.buffer_bytes as usize
    }
    /// Bounds that keep a region sane (and its size below 4 GiB).
    pub fn validate(&self) -> Result<(), String> {
        let ok = |n: u32| (1..=65_536).contains(&n);
        if !ok(self.send_slots) || !ok(self.recv_slots) || !ok(self.completion_slots) {
            return Err("ring sizes must be 1..=65536 slots".into());
        }
        if self.buffer_bytes == 0 || self.buffer_bytes > (1 << 32) {
            return Err("buffer area must be 1 B ..= 4 GiB".into());
        }
        Ok(())
    }
}

/// Control block at the start of the region. Every field is an atomic: the other side
/// (perhaps hostile) writes them while we hold a shared reference, which atomics allow.
#[repr(C)]
struct Control {
    magic: AtomicU64,
    /// Set by the agent before it sleeps; the application rings the agent's bell then.
    agent_sleeping: AtomicU32,
    /// Set by the application while it blocks on the completion queue.
    app_waiting: AtomicU32,
}

/// A mapped region (either side).
///
/// Soundness: the mapping is shared with another process that may write any byte of it
/// at any time. So nothing here hands out a Rust reference to shared memory except to
/// atomics (the control block, ring indices); descriptors are copied in and out with
/// volatile accesses (`ring`), and message bytes only through [`Region::read`],
/// [`Region::write`] and [`Span`], which check bounds and copy through raw pointers — a
/// racing writer can change the bytes copied, never memory safety.
pub struct Region {
    base: *mut u8,
    len: usize,
    pub layout: Layout,
    fd: OwnedFd,
}

// SAFETY: the mapping is shared memory accessed only through atomics and raw copies (see
// above); `base` stays valid until drop.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made in `map`, unmapped once.
        let _ = unsafe { mm::munmap(self.base.cast(), self.len) };
    }
}

fn invalid(e: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

impl Region {
    /// Agent side: creates a new sealed-size memfd of `layout` and maps it.
    pub fn create(layout: Layout) -> io::Result<Arc<Region>> {
        layout.validate().map_err(invalid)?;
        let fd = fs::memfd_create(
            "clusterqos-port",
            fs::MemfdFlags::CLOEXEC | fs::MemfdFlags::ALLOW_SEALING,
        )?;
        fs::ftruncate(&fd, layout.total() as u64)?;
        // The application must not shrink it under the agent (SIGBUS otherwise).
        fs::fcntl_add_seals(
            &fd,
            fs::SealFlags::SHRINK | fs::SealFlags::GROW | fs::SealFlags::SEAL,
        )?;
        let r = Region::map(fd, layout)?;
        r.control().magic.store(REGION_MAGIC, Ordering::Release);
        Ok(Arc::new(r))
    }

    /// Application side: maps a memfd received from the agent.
    pub fn map(fd: OwnedFd, layout: Layout) -> io::Result<Region> {
        layout.validate().map_err(invalid)?;
        let len = layout.total();
        if (fs::fstat(&fd)?.st_size as u64) < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "shared region smaller than its layout",
            ));
        }
        // SAFETY: a new shared mapping of `len` bytes of a memfd at least that long,
        // placed by the kernel (null hint): no existing memory is affected.
        let p = unsafe {
            mm::mmap(
                std::ptr::null_mut(),
                len,
                mm::ProtFlags::READ | mm::ProtFlags::WRITE,
                mm::MapFlags::SHARED,
                &fd,
                0,
            )
        }?;
        Ok(Region {
            base: p.cast(),
            len,
            layout,
            fd,
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn control(&self) -> &Control {
        // SAFETY: the control block is at offset 0 of the mapping (page aligned, 4 KiB,
        // larger than `Control`), lives as long as `self`, and holds only atomics, whose
        // concurrent modification through a shared reference is allowed.
        unsafe { &*(self.base as *const Control) }
    }

    pub fn magic_ok(&self) -> bool {
        self.control().magic.load(Ordering::Acquire) == REGION_MAGIC
    }

    pub fn agent_sleeping(&self) -> &AtomicU32 {
        &self.control().agent_sleeping
    }
    pub fn app_waiting(&self) -> &AtomicU32 {
        &self.control().app_waiting
    }

    /// A ring at `at` with `cap` slots, inside the mapping per the validated layout.
    fn ring<T: Plain>(&self, at: usize, cap: u32) -> Ring<T> {
        debug_assert!(at + ring_bytes::<T>(cap) <= self.len);
        // SAFETY: the layout (validated in `map`) places `ring_bytes::<T>(cap)` bytes at
        // `at`, 64-aligned, inside the mapping, which outlives the ring: rings are only
        // used while the region is (the callers hold it).
        unsafe { Ring::from_raw(self.base.add(at), cap) }
    }

    /// The send descriptor ring (application produces, agent consumes).
    pub fn send_ring(&self) -> Ring<SendDesc> {
        self.ring(self.layout.send_at(), self.layout.send_slots)
    }
    /// The receive-buffer ring (application produces, agent consumes).
    pub fn recv_ring(&self) -> Ring<RecvDesc> {
        self.ring(self.layout.recv_at(), self.layout.recv_slots)
    }
    /// The completion ring (agent produces, application consumes).
    pub fn completion_ring(&self) -> Ring<CompletionDesc> {
        self.ring(self.layout.completion_at(), self.layout.completion_slots)
    }

    /// Checks that `offset..offset+len` lies in the buffer area.
    pub fn check_span(&self, offset: u64, len: u64) -> bool {
        offset
            .checked_add(len)
            .is_some_and(|end| end <= self.layout.buffer_bytes)
    }

    /// Address of byte `offset` of the buffer area; `offset + n` must pass `check_span`.
    fn at(&self, offset: u64) -> *mut u8 {
        // SAFETY: callers checked the span, so the result is inside the mapping.
        unsafe { self.base.add(self.layout.buffers_at() + offset as usize) }
    }

    /// Copies `data` into the buffer area at `offset`; false (nothing copied) when the
    /// span is outside it.
    pub fn write(&self, offset: u64, data: &[u8]) -> bool {
        if !self.check_span(offset, data.len() as u64) {
            return false;
        }
        // SAFETY: span checked; `data` is private memory, so the two cannot overlap; the
        // shared side is written through a raw pointer, never borrowed.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.at(offset), data.len()) };
        true
    }

    /// Copies the buffer area at `offset` into `out`; false (nothing copied) when the
    /// span is outside it.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> bool {
        if !self.check_span(offset, out.len() as u64) {
            return false;
        }
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(self.at(offset), out.as_mut_ptr(), out.len()) };
        true
    }

    /// A checked span of the buffer area (`None` when outside it), which keeps the
    /// region mapped while it lives.
    pub fn span(self: &Arc<Self>, offset: u64, len: u64) -> Option<Span> {
        self.check_span(offset, len).then(|| Span {
            region: self.clone(),
            offset,
            len: len as usize,
        })
    }
}

/// A part of a region's buffer area, bounds-checked when made ([`Region::span`]): a
/// message handed to the agent, or a receive buffer. Its bytes are only copied, never
/// borrowed.
#[derive(Clone)]
pub struct Span {
    region: Arc<Region>,
    offset: u64,
    len: usize,
}

impl Span {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Copies bytes `at..at + out.len()` of the span into `out`; false when outside.
    pub fn read(&self, at: usize, out: &mut [u8]) -> bool {
        at.checked_add(out.len()).is_some_and(|e| e <= self.len)
            && self.region.read(self.offset + at as u64, out)
    }
    /// Copies `data` into the span at `at`; false when outside.
    pub fn write(&self, at: usize, data: &[u8]) -> bool {
        at.checked_add(data.len()).is_some_and(|e| e <= self.len)
            && self.region.write(self.offset + at as u64, data)
    }
    /// Bytes `at..at + len` of the span for a system call to read (the kernel copies
    /// them); `None` when outside. Valid while this span (and so the mapping) lives.
    pub fn raw(&self, at: usize, len: usize) -> Option<(*const u8, usize)> {
        at.checked_add(len)
            .is_some_and(|e| e <= self.len)
            .then(|| (self.region.at(self.offset + at as u64) as *const u8, len))
    }
}

/// An eventfd doorbell.
#[derive(Debug)]
pub struct Doorbell(OwnedFd);

impl Doorbell {
    pub fn new() -> io::Result<Doorbell> {
        Ok(Doorbell(event::eventfd(
            0,
            event::EventfdFlags::CLOEXEC | event::EventfdFlags::NONBLOCK,
        )?))
    }
    pub fn from_fd(fd: OwnedFd) -> Doorbell {
        Doorbell(fd)
    }
    pub fn ring(&self) {
        // A full counter (2^64 − 2 rings unread) only means the bell is already ringing.
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }
    /// Clears pending rings (non-blocking).
    pub fn clear(&self) {
        let mut v = [0u8; 8];
        let _ = rustix::io::read(&self.0, &mut v);
    }
    pub fn raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
    pub fn try_clone(&self) -> io::Result<Doorbell> {
        Ok(Doorbell(self.0.try_clone()?))
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Tells the sleeping side (if it sleeps) that work is waiting.
pub fn notify(flag: &AtomicU32, bell: &Doorbell) {
    std::sync::atomic::fence(Ordering::SeqCst);
    if flag.load(Ordering::SeqCst) != 0 {
        bell.ring();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Layout {
        Layout {
            send_slots: 4,
            recv_slots: 4,
            completion_slots: 4,
            buffer_bytes: 4096,
        }
    }

    #[test]
    fn spans_outside_the_buffer_area_are_refused_and_copies_stay_inside_them() {
        let r = Region::create(small()).unwrap();
        assert!(r.span(4092, 8).is_none(), "past the end");
        assert!(r.span(u64::MAX - 2, 4).is_none(), "offset + len overflows");
        assert!(!r.write(4095, b"ab") && !r.read(u64::MAX, &mut [0u8; 1]));
        let s = r.span(100, 10).unwrap();
        assert!(s.write(0, b"0123456789"));
        assert!(
            !s.write(5, b"0123456789"),
            "past the span, though inside the area"
        );
        assert!(s.raw(8, 3).is_none() && s.raw(usize::MAX, 2).is_none());
        let mut out = [0u8; 4];
        assert!(s.read(6, &mut out));
        assert_eq!(&out, b"6789");
        // The bytes around the span are untouched.
        let mut around = [1u8; 2];
        assert!(r.read(99, &mut around[..1]) && r.read(110, &mut around[1..]));
        assert_eq!(around, [0, 0]);
    }

    #[test]
    fn two_mappings_of_one_region_see_each_others_flags_and_bytes() {
        let agent = Region::create(small()).unwrap();
        let app = Region::map(agent.fd().try_clone_to_owned().unwrap(), small()).unwrap();
        assert!(app.magic_ok());
        app.agent_sleeping().store(0, Ordering::SeqCst);
        agent.agent_sleeping().store(1, Ordering::SeqCst);
        assert_eq!(app.agent_sleeping().load(Ordering::SeqCst), 1);
        assert!(app.write(0, b"hello"));
        let mut b = [0u8; 5];
        assert!(agent.span(0, 5).unwrap().read(0, &mut b));
        assert_eq!(&b, b"hello");
        assert!(app.send_ring().push(SendDesc::default()).unwrap());
        assert_eq!(agent.send_ring().pop().unwrap(), Some(SendDesc::default()));
    }

    #[test]
    fn a_mapping_larger_than_its_memfd_is_refused() {
        let r = Region::create(small()).unwrap();
        let bigger = Layout {
            buffer_bytes: 1 << 20,
            ..small()
        };
        let e = Region::map(r.fd().try_clone_to_owned().unwrap(), bigger).err();
        assert!(e.is_some_and(|e| e.to_string().contains("smaller than its layout")));
    }
}
