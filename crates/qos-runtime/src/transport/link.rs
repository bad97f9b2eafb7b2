//! The datagram device under the transport, and middleware around it (modelled on
//! smoltcp's `phy` layer): [`UdpLink`] is the real one; [`FaultInjector`] wraps any
//! [`Link`] and drops, duplicates or reorders a seeded fraction of outgoing packets so
//! tests can prove the transport loses, duplicates and reorders no message.

use std::io;
use std::marker::PhantomData;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Bytes in memory another process shares and may write at any time (a port's buffer
/// area): never borrowed as a Rust slice, only copied — by the kernel (`sendmsg`) or by
/// [`SharedBytes::copy_into`].
#[derive(Debug, Clone, Copy)]
pub struct SharedBytes<'a> {
    ptr: *const u8,
    len: usize,
    _mapping: PhantomData<&'a ()>,
}

impl<'a> SharedBytes<'a> {
    /// # Safety
    /// `ptr..ptr + len` must be mapped and readable for `'a`.
    pub unsafe fn new(ptr: *const u8, len: usize) -> Self {
        SharedBytes {
            ptr,
            len,
            _mapping: PhantomData,
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The first byte, for code that reads the bytes without a Rust borrow (the
    /// kernel, a C library); readable for `len` bytes while `self` lives.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }
    /// Appends a copy of the bytes to `out`.
    pub fn copy_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.len);
        let at = out.len();
        // SAFETY: `new`'s contract makes the source readable; the destination is the
        // vector's reserved spare capacity, private memory, so they cannot overlap; the
        // length is set once the bytes are written.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr().add(at), self.len);
            out.set_len(at + self.len);
        }
    }
}

/// A datagram's body.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    /// The agent's own memory.
    Local(&'a [u8]),
    /// Shared memory (see [`SharedBytes`]).
    Shared(SharedBytes<'a>),
}

impl Body<'_> {
    pub fn len(&self) -> usize {
        match self {
            Body::Local(b) => b.len(),
            Body::Shared(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Appends a copy of the bytes to `out`.
    pub fn copy_into(&self, out: &mut Vec<u8>) {
        match self {
            Body::Local(b) => out.extend_from_slice(b),
            Body::Shared(s) => s.copy_into(out),
        }
    }
}

/// A datagram device.
pub trait Link {
    /// Sends one datagram. `Err(WouldBlock)` means "no room now, try later".
    fn send_to(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<()>;
    /// Sends one datagram made of a header and a body (gathered without copying where
    /// the device can).
    fn send2(&mut self, head: &[u8], body: Body<'_>, to: SocketAddr) -> io::Result<()> {
        self.send3(head, body, &[], to)
    }
    /// Sends one datagram made of a header, a body and a trailer (gathered without
    /// copying where the device can).
    fn send3(
        &mut self,
        head: &[u8],
        body: Body<'_>,
        tail: &[u8],
        to: SocketAddr,
    ) -> io::Result<()> {
        let mut v = Vec::with_capacity(head.len() + body.len() + tail.len());
        v.extend_from_slice(head);
        body.copy_into(&mut v);
        v.extend_from_slice(tail);
        self.send_to(&v, to)
    }
    /// Receives one datagram if one is waiting.
    fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>>;
    /// Descriptor to wait on for readability, if the device has one.
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    /// Local address.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// A non-blocking UDP socket with large kernel buffers.
#[derive(Debug)]
pub struct UdpLink {
    socket: UdpSocket,
}

impl UdpLink {
    /// Binds a UDP socket at `addr` (port 0 picks one).
    pub fn bind(addr: SocketAddr, buffer_bytes: usize) -> io::Result<Self> {
        UdpLink::from_socket(UdpSocket::bind(addr)?, buffer_bytes)
    }

    /// Takes a socket already bound (so a caller that picked port 0 keeps it: no window
    /// between learning a free port and binding it in which another process takes it).
    pub fn from_socket(socket: UdpSocket, buffer_bytes: usize) -> io::Result<Self> {
        use rustix::net::sockopt;
        socket.set_nonblocking(true)?;
        // The *_FORCE variants work as root past the sysctl limits; fall back otherwise
        // (the kernel then caps the size: best effort either way).
        if sockopt::set_socket_recv_buffer_size_force(&socket, buffer_bytes).is_err() {
            let _ = sockopt::set_socket_recv_buffer_size(&socket, buffer_bytes);
        }
        if sockopt::set_socket_send_buffer_size_force(&socket, buffer_bytes).is_err() {
            let _ = sockopt::set_socket_send_buffer_size(&socket, buffer_bytes);
        }
        Ok(UdpLink { socket })
    }
}

impl Link for UdpLink {
    fn send_to(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<()> {
        self.socket.send_to(buf, to).map(|_| ())
    }
    fn send2(&mut self, head: &[u8], body: Body<'_>, to: SocketAddr) -> io::Result<()> {
        self.send3(head, body, &[], to)
    }
    fn send3(
        &mut self,
        head: &[u8],
        body: Body<'_>,
        tail: &[u8],
        to: SocketAddr,
    ) -> io::Result<()> {
        let (addr, alen) = sockaddr(to);
        // Raw iovecs (not rustix's IoSlice, which needs a slice): a shared body is read by
        // the kernel without Rust ever borrowing it.
        let (body_ptr, body_len) = match body {
            Body::Local(b) => (b.as_ptr(), b.len()),
            Body::Shared(s) => (s.ptr, s.len),
        };
        let mut iov = [
            libc::iovec {
                iov_base: head.as_ptr() as *mut libc::c_void,
                iov_len: head.len(),
            },
            libc::iovec {
                iov_base: body_ptr as *mut libc::c_void,
                iov_len: body_len,
            },
            libc::iovec {
                iov_base: tail.as_ptr() as *mut libc::c_void,
                iov_len: tail.len(),
            },
        ];
        // SAFETY: msghdr is zero-initialised, then pointed at the stack address, the
        // header and trailer slices and a body readable for the call (a slice, or
        // `SharedBytes`, whose constructor's contract makes it so); sendmsg only reads
        // them.
        let r = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = &addr as *const libc::sockaddr_storage as *mut libc::c_void;
            msg.msg_namelen = alen;
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = iov.len() as _;
            libc::sendmsg(self.socket.as_raw_fd(), &msg, 0)
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
    fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        match self.socket.recv_from(buf) {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.socket.as_fd())
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }
}

fn sockaddr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; zero is a valid bit pattern.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            (
                ss,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            (
                ss,
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    }
}

/// Fractions of outgoing packets to mistreat (each in 0..=1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    pub drop: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub seed: u64,
}

impl Faults {
    /// Parses `drop=0.05,dup=0.02,reorder=0.1,seed=7` (any subset).
    pub fn parse(text: &str) -> Result<Faults, String> {
        let mut f = Faults::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not key=value"))?;
            if k == "seed" {
                f.seed = v
                    .parse()
                    .map_err(|_| format!("seed `{v}` is not an integer"))?;
                continue;
            }
            let x: f64 = v.parse().map_err(|_| format!("`{v}` is not a number"))?;
            if !(0.0..=1.0).contains(&x) {
                return Err(format!("{k}={v} is outside 0..=1"));
            }
            match k {
                "drop" => f.drop = x,
                "dup" | "duplicate" => f.duplicate = x,
                "reorder" => f.reorder = x,
                _ => return Err(format!("unknown fault `{k}` (drop, dup, reorder, seed)")),
            }
        }
        Ok(f)
    }

    pub fn is_none(&self) -> bool {
        self.drop == 0.0 && self.duplicate == 0.0 && self.reorder == 0.0
    }
}

/// Counts of what the injector did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub passed: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

/// Middleware that mistreats outgoing packets of an inner link, deterministically for a seed.
/// A reordered packet is held back and sent after the next packet.
#[derive(Debug)]
pub struct FaultInjector<L> {
    inner: L,
    faults: Faults,
    rng: ChaCha8Rng,
    held: Option<(Vec<u8>, SocketAddr)>,
    pub stats: FaultStats,
}

impl<L: Link> FaultInjector<L> {
    pub fn new(inner: L, faults: Faults) -> Self {
        FaultInjector {
            inner,
            rng: ChaCha8Rng::seed_from_u64(faults.seed),
            faults,
            held: None,
            stats: FaultStats::default(),
        }
    }

    pub fn inner(&self) -> &L {
        &self.inner
    }
}

impl<L: Link> Link for FaultInjector<L> {
    fn send_to(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<()> {
        let r: f64 = self.rng.gen();
        if r < self.faults.drop {
            self.stats.dropped += 1;
            return Ok(());
        }
        if r < self.faults.drop + self.faults.reorder && self.held.is_none() {
            self.stats.reordered += 1;
            self.held = Some((buf.to_vec(), to));
            return Ok(());
        }
        self.inner.send_to(buf, to)?;
        self.stats.passed += 1;
        if r < self.faults.drop + self.faults.reorder + self.faults.duplicate {
            self.stats.duplicated += 1;
            let _ = self.inner.send_to(buf, to);
        }
        if let Some((b, a)) = self.held.take() {
            let _ = self.inner.send_to(&b, a);
        }
        Ok(())
    }
    fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        self.inner.recv_from(buf)
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.fd()
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// Either a plain link or one behind a fault injector (chosen from configuration).
#[derive(Debug)]
pub enum AnyLink {
    Udp(UdpLink),
    Faulty(Box<FaultInjector<UdpLink>>),
}

impl AnyLink {
    pub fn udp(addr: SocketAddr, buffer_bytes: usize, faults: Faults) -> io::Result<AnyLink> {
        Ok(AnyLink::over(UdpLink::bind(addr, buffer_bytes)?, faults))
    }

    /// A link on a socket already bound, behind a fault injector if `faults` says so.
    pub fn over(l: UdpLink, faults: Faults) -> AnyLink {
        if faults.is_none() {
            AnyLink::Udp(l)
        } else {
            AnyLink::Faulty(Box::new(FaultInjector::new(l, faults)))
        }
    }
}

impl Link for AnyLink {
    fn send_to(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<()> {
        match self {
            AnyLink::Udp(l) => l.send_to(buf, to),
            AnyLink::Faulty(l) => l.send_to(buf, to),
        }
    }
    fn send2(&mut self, head: &[u8], body: Body<'_>, to: SocketAddr) -> io::Result<()> {
        match self {
            AnyLink::Udp(l) => l.send2(head, body, to),
            AnyLink::Faulty(l) => l.send2(head, body, to),
        }
    }
    fn send3(
        &mut self,
        head: &[u8],
        body: Body<'_>,
        tail: &[u8],
        to: SocketAddr,
    ) -> io::Result<()> {
        match self {
            AnyLink::Udp(l) => l.send3(head, body, tail, to),
            AnyLink::Faulty(l) => l.send3(head, body, tail, to),
        }
    }
    fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        match self {
            AnyLink::Udp(l) => l.recv_from(buf),
            AnyLink::Faulty(l) => l.recv_from(buf),
        }
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            AnyLink::Udp(l) => l.fd(),
            AnyLink::Faulty(l) => l.fd(),
        }
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            AnyLink::Udp(l) => l.local_addr(),
            AnyLink::Faulty(l) => l.local_addr(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_spec_parses_and_rejects_out_of_range() {
        let f = Faults::parse("drop=0.1, dup=0.05,reorder=0.2,seed=9").unwrap();
        assert_eq!(
            (f.drop, f.duplicate, f.reorder, f.seed),
            (0.1, 0.05, 0.2, 9)
        );
        assert!(Faults::parse("drop=2").is_err());
        assert!(Faults::parse("jitter=0.1").is_err());
    }

    #[test]
    fn injector_is_deterministic_for_a_seed_and_hits_each_fault() {
        let run = || {
            let a = UdpLink::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
            let b = UdpLink::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
            let to = b.local_addr().unwrap();
            let mut f = FaultInjector::new(
                a,
                Faults {
                    drop: 0.2,
                    duplicate: 0.2,
                    reorder: 0.2,
                    seed: 3,
                },
            );
            for i in 0..200u8 {
                f.send_to(&[i], to).unwrap();
            }
            f.stats
        };
        let s = run();
        assert_eq!(s, run());
        assert!(
            s.dropped > 10 && s.duplicated > 10 && s.reordered > 10,
            "{s:?}"
        );
    }
}
