//! Packets in flight in the flit network (Yum §3.1–3.2) and the flit word that names
//! them: the records the engine creates, the HCAs inject and the routers move. Kept
//! apart so that the engine, the HCAs and the routers all import it and none of them
//! imports another's internals the other way round.

use super::error::FlitError;
use super::hooks::{Delivered, Kind};

/// Header flit bit of a flit word.
pub(super) const HEAD: u32 = 1 << 31;
/// Tail flit bit of a flit word.
pub(super) const TAIL: u32 = 1 << 30;
/// Packet index bits of a flit word.
pub(super) const PKT: u32 = TAIL - 1;
/// A packet's route word under two-phase routing (`valiant`, `romm`): its
/// intermediate node, with this bit set once it has passed it.
pub(super) const VIA_DONE: u32 = 1 << 31;
/// No lane held.
pub(super) const NO_LANE: u8 = u8::MAX;

/// Packets in flight, indexed by slot; slots are reused through a free list.
#[derive(Debug, Default)]
pub(super) struct Packets {
    pub dst: Vec<u32>,
    pub src: Vec<u32>,
    pub class: Vec<u8>,
    pub vl: Vec<u8>,
    pub len: Vec<u32>,
    pub created: Vec<u64>,
    pub injected: Vec<u64>,
    pub stream: Vec<u32>,
    pub measured: Vec<bool>,
    /// Source-routed fabrics: offset of the packet's route (a mesh or torus under
    /// `valiant` or `romm` routing: its intermediate node, and [`VIA_DONE`]); and hops
    /// taken so far.
    pub route: Vec<u32>,
    pub hop: Vec<u16>,
    /// Torus tie bits (`topology::TIE_X`, `TIE_Y`): the way to go half-way round.
    pub tie: Vec<u8>,
    /// Kind ([`super::hooks::Kind`] as a byte; 0 = data) and payload words.
    pub kind: Vec<u8>,
    pub tag: Vec<u32>,
    pub aux: Vec<u32>,
    free: Vec<u32>,
}

impl Packets {
    /// A free slot (a new one if none is free).
    pub fn alloc(&mut self) -> Result<u32, FlitError> {
        if let Some(i) = self.free.pop() {
            return Ok(i);
        }
        let i = self.dst.len() as u32;
        if i >= PKT {
            return Err(FlitError::TooManyPackets);
        }
        self.dst.push(0);
        self.src.push(0);
        self.class.push(0);
        self.vl.push(0);
        self.len.push(0);
        self.created.push(0);
        self.injected.push(0);
        self.stream.push(u32::MAX);
        self.measured.push(false);
        self.route.push(0);
        self.hop.push(0);
        self.tie.push(0);
        self.kind.push(0);
        self.tag.push(0);
        self.aux.push(0);
        Ok(i)
    }

    /// Slot `i` as a policy's hooks hear of it, at cycle `at` (its tail leaving the HCA,
    /// or its delivery).
    pub fn event(&self, i: u32, at: u64) -> Delivered {
        let p = i as usize;
        Delivered {
            slot: i,
            kind: Kind::from_u8(self.kind[p]),
            src: self.src[p],
            dst: self.dst[p],
            class: self.class[p],
            tag: self.tag[p],
            aux: self.aux[p],
            len: self.len[p],
            created: self.created[p],
            injected: self.injected[p],
            at,
        }
    }

    /// Returns slot `i` to the free list.
    pub fn release(&mut self, i: u32) {
        self.free.push(i);
    }
}
