//! A blocking rtnetlink socket for the kernel backend: one request at a time,
//! acknowledged or dumped, over `netlink-sys`, with messages built and parsed by
//! `netlink-packet-route` — the kernel is never driven by running `tc` and reading what
//! it prints.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// How long one request may wait for the kernel's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// A failed netlink exchange: the kernel's errno for the request, or a socket error.
#[derive(Debug, thiserror::Error)]
pub enum NlError {
    /// The kernel refused the request with this errno (positive).
    #[error("{}", io::Error::from_raw_os_error(*.0))]
    Kernel(i32),
    /// The socket failed, or the answer could not be read.
    #[error("netlink: {0}")]
    Io(#[from] io::Error),
    /// An answer that does not decode.
    #[error("netlink: undecodable answer: {0}")]
    Decode(String),
}

impl NlError {
    /// The kernel's errno, if the kernel refused the request.
    pub fn errno(&self) -> Option<i32> {
        match self {
            NlError::Kernel(e) => Some(*e),
            NlError::Io(e) => e.raw_os_error(),
            NlError::Decode(_) => None,
        }
    }
}

/// An interface as the kernel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Name.
    pub name: String,
    /// MTU in bytes.
    pub mtu: u32,
}

/// A route-netlink socket speaking to the kernel of the calling thread's network
/// namespace.
pub struct Rtnl {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Rtnl {
    /// Opens the socket (any user may; changing traffic control needs CAP_NET_ADMIN).
    pub fn open() -> Result<Rtnl, NlError> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        let tv = libc::timeval {
            tv_sec: ANSWER_TIMEOUT.as_secs() as libc::time_t,
            tv_usec: 0,
        };
        // SAFETY: setsockopt reads `tv` (a valid timeval) for its size; the fd is open.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error().into());
        }
        Ok(Rtnl {
            sock,
            seq: 0,
            buf: vec![0; 1 << 16],
        })
    }

    fn send(&mut self, msg: RouteNetlinkMessage, flags: u16) -> Result<u32, NlError> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        packet.finalize();
        let mut out = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut out);
        self.sock.send(&out, 0)?;
        Ok(self.seq)
    }

    /// Reads datagrams until `seq` is answered: the ACK (or error) of a request, or the
    /// end of a dump. Every message of a dump is handed to `each`.
    fn answers(
        &mut self,
        seq: u32,
        mut each: impl FnMut(RouteNetlinkMessage),
    ) -> Result<(), NlError> {
        loop {
            let n = match self.sock.recv(&mut &mut self.buf[..], 0) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(NlError::Io(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the kernel did not answer in 5 s",
                    )))
                }
                Err(e) => return Err(e.into()),
            };
            let mut off = 0;
            while off < n {
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[off..n])
                    .map_err(|e| NlError::Decode(e.to_string()))?;
                let len = msg.header.length as usize;
                if len == 0 {
                    return Err(NlError::Decode("zero-length message".into()));
                }
                off += (len + 3) & !3;
                if msg.header.sequence_number != seq {
                    continue; // an answer to an earlier request that timed out
                }
                match msg.payload {
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(()),
                            Some(code) => Err(NlError::Kernel(code.get().abs())),
                        }
                    }
                    NetlinkPayload::Done(_) => return Ok(()),
                    NetlinkPayload::InnerMessage(m) => each(m),
                    _ => {}
                }
            }
        }
    }

    /// Sends a request that changes something and waits for the kernel's ACK.
    pub fn request(&mut self, msg: RouteNetlinkMessage, flags: u16) -> Result<(), NlError> {
        let seq = self.send(msg, NLM_F_ACK | flags)?;
        self.answers(seq, |_| {})
    }

    /// Sends a dump request and returns every message of the dump.
    pub fn dump(&mut self, msg: RouteNetlinkMessage) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        let seq = self.send(msg, NLM_F_DUMP)?;
        let mut out = Vec::new();
        self.answers(seq, |m| out.push(m))?;
        Ok(out)
    }

    /// The interface called `name`, or `None` if this namespace has none.
    pub fn link(&mut self, name: &str) -> Result<Option<Link>, NlError> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        let seq = self.send(RouteNetlinkMessage::GetLink(msg), NLM_F_ACK)?;
        let mut found = None;
        match self.answers(seq, |m| {
            if let RouteNetlinkMessage::NewLink(l) = m {
                found = Some(l);
            }
        }) {
            Ok(()) => {}
            Err(NlError::Kernel(libc::ENODEV)) => return Ok(None),
            Err(e) => return Err(e),
        }
        Ok(found.map(|l| {
            let mut link = Link {
                index: l.header.index,
                name: name.to_string(),
                mtu: 1500,
            };
            for a in l.attributes {
                match a {
                    LinkAttribute::Mtu(m) => link.mtu = m,
                    LinkAttribute::IfName(n) => link.name = n,
                    _ => {}
                }
            }
            link
        }))
    }
}
