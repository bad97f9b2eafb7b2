//! An in-memory network for deterministic engine tests: links that deliver datagrams
//! after a fixed one-way delay on a clock the test advances, a log of every datagram put
//! on the wire (time, ends, kind, sequence), and a drop rule the test chooses. Nothing
//! here reads a clock or touches a socket, so a test's outcome depends on its inputs only.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

use qos_core::units::{Duration, Time};

use crate::transport::link::Link;
use crate::transport::wire::Repr;

/// What a datagram was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Data { conn: u32, seq: u32 },
    Ack,
    Probe,
    Other,
}

/// One datagram put on the wire.
#[derive(Debug, Clone)]
pub struct Sent {
    pub at: Time,
    pub from: SocketAddr,
    pub to: SocketAddr,
    pub kind: Kind,
    /// Transmissions of this (from, connection, sequence) before this one.
    pub copy: u32,
    pub dropped: bool,
    pub bytes: Rc<[u8]>,
}

type DropRule = Box<dyn FnMut(&Sent) -> bool>;

struct Net {
    now: Time,
    delay: Duration,
    queues: HashMap<SocketAddr, VecDeque<(Time, Vec<u8>, SocketAddr)>>,
    log: Vec<Sent>,
    copies: HashMap<(SocketAddr, u32, u32), u32>,
    drop: DropRule,
}

/// The network: shared by its links and the test.
#[derive(Clone)]
pub struct MemNet(Rc<RefCell<Net>>);

impl MemNet {
    /// A network delivering every datagram `delay` after it was sent.
    pub fn new(delay: Duration) -> MemNet {
        MemNet(Rc::new(RefCell::new(Net {
            now: Time::ZERO,
            delay,
            queues: HashMap::new(),
            log: Vec::new(),
            copies: HashMap::new(),
            drop: Box::new(|_| false),
        })))
    }

    /// A link at `addr` (any address: nothing is bound).
    pub fn link(&self, addr: &str) -> MemLink {
        let addr: SocketAddr = addr.parse().expect("an address");
        self.0.borrow_mut().queues.entry(addr).or_default();
        MemLink {
            net: self.clone(),
            addr,
        }
    }

    /// Datagrams sent from now on are dropped when `rule` says so.
    pub fn set_drop(&self, rule: impl FnMut(&Sent) -> bool + 'static) {
        self.0.borrow_mut().drop = Box::new(rule);
    }

    pub fn set_now(&self, now: Time) {
        self.0.borrow_mut().now = now;
    }

    /// Everything sent so far.
    pub fn log(&self) -> Vec<Sent> {
        self.0.borrow().log.clone()
    }

    /// Forgets what is queued for `addr` (a host that lost its memory).
    pub fn flush(&self, addr: &str) {
        let addr: SocketAddr = addr.parse().expect("an address");
        if let Some(q) = self.0.borrow_mut().queues.get_mut(&addr) {
            q.clear();
        }
    }

    /// Queues a raw datagram for `to` as if `from` had sent it now.
    pub fn inject(&self, from: SocketAddr, to: SocketAddr, bytes: Vec<u8>) {
        let mut n = self.0.borrow_mut();
        let at = n.now + n.delay;
        n.queues.entry(to).or_default().push_back((at, bytes, from));
    }
}

/// One host's end of a [`MemNet`].
pub struct MemLink {
    net: MemNet,
    addr: SocketAddr,
}

fn kind(bytes: &[u8]) -> Kind {
    match Repr::parse_bytes(bytes) {
        Ok(Repr::Data { ids, seq, .. }) => Kind::Data {
            conn: ids.conn,
            seq,
        },
        Ok(Repr::Ack { .. }) => Kind::Ack,
        Ok(Repr::Probe { .. }) => Kind::Probe,
        _ => Kind::Other,
    }
}

impl Link for MemLink {
    fn send_to(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<()> {
        let mut n = self.net.0.borrow_mut();
        let k = kind(buf);
        let copy = match k {
            Kind::Data { conn, seq } => {
                let c = n.copies.entry((self.addr, conn, seq)).or_insert(0);
                *c += 1;
                *c - 1
            }
            _ => 0,
        };
        let mut s = Sent {
            at: n.now,
            from: self.addr,
            to,
            kind: k,
            copy,
            dropped: false,
            bytes: buf.into(),
        };
        s.dropped = (n.drop)(&s);
        let dropped = s.dropped;
        n.log.push(s);
        if !dropped {
            let at = n.now + n.delay;
            n.queues
                .entry(to)
                .or_default()
                .push_back((at, buf.to_vec(), self.addr));
        }
        Ok(())
    }

    fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        let mut n = self.net.0.borrow_mut();
        let now = n.now;
        let q = n.queues.entry(self.addr).or_default();
        match q.front() {
            Some((at, _, _)) if *at <= now => {
                let (_, b, from) = q.pop_front().expect("front exists");
                buf[..b.len()].copy_from_slice(&b);
                Ok(Some((b.len(), from)))
            }
            _ => Ok(None),
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }
}
