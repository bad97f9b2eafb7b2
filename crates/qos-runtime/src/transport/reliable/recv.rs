//! The receiving side: a flow's connection identity ([`RecvConn`]: which connection is
//! current, which are retired, whether a packet's sender starts afresh or talks to a
//! receiver instance that is gone) and its in-order reassembly window ([`RecvFlow`]).

use std::collections::{BTreeMap, VecDeque};

use super::seq::seq_lt;
use crate::transport::wire::{AckInfo, ConnIds};

/// What a receiver does with a packet, given the connection it names (see
/// [`RecvConn::classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnVerdict {
    /// The current connection: process it.
    Current,
    /// A new connection from a sender that starts afresh: drop the flow's receive state,
    /// start the new connection, process it.
    New,
    /// A retired connection's straggler: drop it.
    Stale,
    /// A connection this receiver instance does not know, mid-stream (the sender has
    /// heard from another receiver instance): answer with a reset.
    Refuse,
}

/// Receiver-side identity of a flow's connection: the current connection id, this
/// receiver's id for it, and the last few retired connection ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvConn {
    pub conn: u32,
    pub rid: u32,
    retired: [u32; 4],
}

impl RecvConn {
    /// State for connection `conn` with receiver id `rid`.
    pub fn new(conn: u32, rid: u32) -> Self {
        RecvConn {
            conn,
            rid,
            retired: [0; 4],
        }
    }

    /// Whether a flow with no receive state should create it for a packet with `ids`
    /// (only for a sender that has not heard from any receiver yet).
    pub fn may_start(ids: ConnIds) -> bool {
        ids.rid == 0
    }

    /// What to do with a packet naming `ids`.
    pub fn classify(&self, ids: ConnIds) -> ConnVerdict {
        if ids.conn == self.conn {
            if ids.rid == 0 || ids.rid == self.rid {
                ConnVerdict::Current
            } else {
                ConnVerdict::Refuse
            }
        } else if self.retired.contains(&ids.conn) {
            ConnVerdict::Stale
        } else if ids.rid == 0 {
            ConnVerdict::New
        } else {
            ConnVerdict::Refuse
        }
    }

    /// Switches to connection `conn` with receiver id `rid`, retiring the current one.
    pub fn switch(&mut self, conn: u32, rid: u32) {
        self.retired.rotate_right(1);
        self.retired[0] = self.conn;
        self.conn = conn;
        self.rid = rid;
    }

    /// The ids this receiver's acknowledgements carry.
    pub fn ids(&self) -> ConnIds {
        ConnIds {
            conn: self.conn,
            rid: self.rid,
        }
    }
}

/// What the receiver did with a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Stored (in order or not).
    Stored,
    /// Already received: a duplicate, dropped.
    Duplicate,
    /// Beyond the advertised window: dropped (a compliant sender never does this).
    OutsideWindow,
}

/// Receiver side of one flow.
#[derive(Debug)]
pub struct RecvFlow<P> {
    capacity: u32,
    expected: u32,
    ready: VecDeque<P>,
    ooo: BTreeMap<u32, P>,
    ack_pending: bool,
    advertised: u32,
}

impl<P> RecvFlow<P> {
    /// A receiver that holds at most `capacity` packets of this flow.
    pub fn new(capacity: u32) -> Self {
        let capacity = capacity.max(1);
        RecvFlow {
            capacity,
            expected: 0,
            ready: VecDeque::new(),
            ooo: BTreeMap::new(),
            ack_pending: false,
            advertised: capacity,
        }
    }

    /// First sequence number the sender may not send.
    pub fn window(&self) -> u32 {
        self.taken().wrapping_add(self.capacity)
    }

    /// Packets held (in order awaiting the upper layer, and out of order).
    pub fn held(&self) -> usize {
        self.ready.len() + self.ooo.len()
    }

    /// Forgets every packet held and starts the sequence space again at zero (a new
    /// connection); the packets held are passed to `discard`.
    pub fn restart(&mut self, mut discard: impl FnMut(P)) {
        for p in self.ready.drain(..) {
            discard(p);
        }
        for (_, p) in std::mem::take(&mut self.ooo) {
            discard(p);
        }
        self.expected = 0;
        self.ack_pending = false;
        self.advertised = self.capacity;
    }

    /// Takes a data packet.
    pub fn on_data(&mut self, seq: u32, packet: P) -> Accepted {
        self.ack_pending = true;
        if seq_lt(seq, self.expected) {
            return Accepted::Duplicate;
        }
        if !seq_lt(seq, self.window()) {
            return Accepted::OutsideWindow;
        }
        if seq != self.expected {
            if self.ooo.contains_key(&seq) {
                return Accepted::Duplicate;
            }
            self.ooo.insert(seq, packet);
            return Accepted::Stored;
        }
        self.ready.push_back(packet);
        self.expected = self.expected.wrapping_add(1);
        while let Some(p) = self.ooo.remove(&self.expected) {
            self.ready.push_back(p);
            self.expected = self.expected.wrapping_add(1);
        }
        Accepted::Stored
    }

    /// A probe arrived: answer with an ack.
    pub fn on_probe(&mut self) {
        self.ack_pending = true;
    }

    /// The next in-order packet, if the upper layer can take it.
    pub fn front(&self) -> Option<&P> {
        self.ready.front()
    }

    /// Hands the next in-order packet to the upper layer (opening the window by one).
    pub fn pop(&mut self) -> Option<P> {
        let p = self.ready.pop_front()?;
        // Announce a reopened window without waiting for more data once half of it is free.
        if self.window().wrapping_sub(self.advertised) >= self.capacity.div_ceil(2)
            || self.ready.is_empty()
        {
            self.ack_pending = true;
        }
        Some(p)
    }

    /// First sequence the upper layer has not taken.
    pub fn taken(&self) -> u32 {
        self.expected.wrapping_sub(self.ready.len() as u32)
    }

    /// Asks for an acknowledgement at the next [`RecvFlow::take_ack`] (the upper layer
    /// finished a message: its sender may complete it).
    pub fn ack_soon(&mut self) {
        self.ack_pending = true;
    }

    /// The acknowledgement to send, if one is owed.
    pub fn take_ack(&mut self) -> Option<AckInfo> {
        if !self.ack_pending {
            return None;
        }
        self.ack_pending = false;
        let mut sack = 0u64;
        for &s in self.ooo.keys() {
            let d = s.wrapping_sub(self.expected);
            if (1..=64).contains(&d) {
                sack |= 1u64 << (d - 1);
            }
        }
        self.advertised = self.window();
        Some(AckInfo {
            cum: self.expected,
            window: self.advertised,
            sack,
            delivered: self.taken(),
        })
    }
}
