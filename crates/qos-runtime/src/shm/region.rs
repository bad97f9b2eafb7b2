//! A port's shared-memory region (GM's DMAable memory and its queues, thesis §4.1): one
//! memfd holding a control block, the send and receive descriptor rings, the completion
//! ring and the message buffer area; plus the eventfd doorbells and SCM_RIGHTS passing.
//!
//! Layout (every part 64-byte aligned):
//! `[control 4 KiB][send ring][recv ring][completion ring][buffers]`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ring::{ring_bytes, Ring};

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

/// Control block at the start of the region.
#[repr(C)]
struct Control {
    magic: u64,
    /// Set by the agent before it sleeps; the application rings the agent's bell then.
    agent_sleeping: AtomicU32,
    /// Set by the application while it blocks on the completion queue.
    app_waiting: AtomicU32,
}

/// A mapped region (either side).
pub struct Region {
    base: *mut u8,
    len: usize,
    pub layout: Layout,
    fd: OwnedFd,
}

// SAFETY: the mapping is shared memory accessed through rings (atomics) and byte copies
// into/out of the buffer area, whose ownership the descriptor protocol hands back and forth.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made in `map`.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Region {
    /// Agent side: creates a new sealed-size memfd of `layout` and maps it.
    pub fn create(layout: Layout) -> io::Result<Arc<Region>> {
        layout
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: plain syscalls with valid arguments; fd ownership taken at once.
        let fd = unsafe {
            let fd = cvt(libc::memfd_create(
                c"clusterqos-port".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            ))?;
            OwnedFd::from_raw_fd(fd)
        };
        // SAFETY: fd is a fresh memfd.
        unsafe {
            cvt(libc::ftruncate(
                fd.as_raw_fd(),
                layout.total() as libc::off_t,
            ))?;
            // The application must not shrink it under the agent (SIGBUS otherwise).
            cvt(libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
            ))?;
        }
        let r = Region::map(fd, layout)?;
        r.control().magic = REGION_MAGIC;
        Ok(Arc::new(r))
    }

    /// Application side: maps a memfd received from the agent.
    pub fn map(fd: OwnedFd, layout: Layout) -> io::Result<Region> {
        layout
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let len = layout.total();
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and out-pointer.
        cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
        if (st.st_size as usize) < len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "shared region smaller than its layout",
            ));
        }
        // SAFETY: mapping a regular memfd of at least len bytes.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Region {
            base: p as *mut u8,
            len,
            layout,
            fd,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    #[allow(clippy::mut_from_ref)]
    fn control(&self) -> &mut Control {
        // SAFETY: the control block is at offset 0, 4 KiB, page aligned.
        unsafe { &mut *(self.base as *mut Control) }
    }

    pub fn magic_ok(&self) -> bool {
        self.control().magic == REGION_MAGIC
    }

    pub fn agent_sleeping(&self) -> &AtomicU32 {
        &self.control().agent_sleeping
    }
    pub fn app_waiting(&self) -> &AtomicU32 {
        &self.control().app_waiting
    }

    /// The send descriptor ring (application produces, agent consumes).
    pub fn send_ring(&self) -> Ring<SendDesc> {
        // SAFETY: inside the mapping per the layout, 64-aligned.
        unsafe { Ring::from_raw(self.base.add(self.layout.send_at()), self.layout.send_slots) }
    }
    /// The receive-buffer ring (application produces, agent consumes).
    pub fn recv_ring(&self) -> Ring<RecvDesc> {
        // SAFETY: as above.
        unsafe { Ring::from_raw(self.base.add(self.layout.recv_at()), self.layout.recv_slots) }
    }
    /// The completion ring (agent produces, application consumes).
    pub fn completion_ring(&self) -> Ring<CompletionDesc> {
        // SAFETY: as above.
        unsafe {
            Ring::from_raw(
                self.base.add(self.layout.completion_at()),
                self.layout.completion_slots,
            )
        }
    }

    /// Checks that `offset..offset+len` lies in the buffer area.
    pub fn check_span(&self, offset: u64, len: u64) -> bool {
        offset
            .checked_add(len)
            .is_some_and(|end| end <= self.layout.buffer_bytes)
    }

    /// Raw pointer to a checked span of the buffer area.
    pub fn span_ptr(&self, offset: u64) -> *mut u8 {
        // SAFETY: callers check the span first.
        unsafe { self.base.add(self.layout.buffers_at() + offset as usize) }
    }

    /// Copies bytes into the buffer area (application side helper).
    pub fn write(&self, offset: u64, data: &[u8]) -> bool {
        if !self.check_span(offset, data.len() as u64) {
            return false;
        }
        // SAFETY: span checked; the buffer is owned by the writer under the protocol.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.span_ptr(offset), data.len()) };
        true
    }

    /// Copies bytes out of the buffer area.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> bool {
        if !self.check_span(offset, out.len() as u64) {
            return false;
        }
        // SAFETY: as above.
        unsafe {
            std::ptr::copy_nonoverlapping(self.span_ptr(offset), out.as_mut_ptr(), out.len())
        };
        true
    }
}

/// An eventfd doorbell.
#[derive(Debug)]
pub struct Doorbell(OwnedFd);

impl Doorbell {
    pub fn new() -> io::Result<Doorbell> {
        // SAFETY: plain syscall; ownership taken at once.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: fresh fd.
        Ok(Doorbell(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    pub fn from_fd(fd: OwnedFd) -> Doorbell {
        Doorbell(fd)
    }
    pub fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to an eventfd.
        unsafe {
            libc::write(
                self.0.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }
    /// Clears pending rings (non-blocking).
    pub fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes from a non-blocking eventfd.
        unsafe {
            libc::read(
                self.0.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
    }
    pub fn raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
    pub fn try_clone(&self) -> io::Result<Doorbell> {
        Ok(Doorbell(self.0.try_clone()?))
    }
}

/// Tells the sleeping side (if it sleeps) that work is waiting.
pub fn notify(flag: &AtomicU32, bell: &Doorbell) {
    std::sync::atomic::fence(Ordering::SeqCst);
    if flag.load(Ordering::SeqCst) != 0 {
        bell.ring();
    }
}
