//! Extension points of the flit network for the policies of Yum et al. §4–5: packet
//! kinds with a small payload, a hook on header flits at routing, a hook on every
//! delivery, an HCA injection gate, and a periodic hook.
//! The fabric knows nothing of admission, queue pairs or power: a policy implements
//! [`Hooks`] (and, for the HCA, [`InjectionGate`]) and drives a run with
//! [`super::Network::run_hooked`].
//!
//! - **Packet kinds** ([`Kind`]): data, probe, ACK, NACK, release, and the final data
//!   packet of a connection (which releases as it passes). Each packet carries two
//!   payload words, `tag` (the connection, or the driver's own message number) and
//!   `aux` (a bandwidth class, the rejecting router…). Data packets of the benchmark
//!   never reach a hook: the data path costs one comparison per header.
//! - **Header hook** ([`Hooks::header`]): a router that routes the header of a
//!   non-data packet (or a final data packet) asks the policy, once per router, what
//!   to do: pass it on, turn it around towards its source as another kind (a probe
//!   becomes an ACK or a NACK), or absorb it (a release that reached the router before
//!   the rejecting one). The policy may reload the router's output arbiters (new WRR
//!   weights). Turning around and absorbing apply to one-flit packets on fabrics with
//!   routing tables (crossbar, mesh, torus); a longer packet is passed on.
//! - **Deliveries** ([`Hooks::delivered`]) and **injections** ([`Hooks::injected`]):
//!   a packet's tail reached its HCA; a packet's tail left its source HCA.
//! - **Posting** ([`Hooks::cycle`] with a [`Poster`]): the policy hands packets to the
//!   HCAs itself ([`Poster::post`]) — the workload of a Yum run comes from the policy,
//!   not from the fabric's traffic classes.
//! - **Periodic hook** ([`Hooks::period`], [`Hooks::periodic`]): every N cycles, for
//!   samplers and power budgets.
//! - **Injection gate** ([`InjectionGate`]): which queued packet the HCA's DMA takes
//!   next, one packet at a time. Without one, the HCA serves its per-class send queues
//!   by priority (the built-in path of the benchmark); the IBA QP scheduler, and later
//!   credit-based congestion control and peak power control, are gates.

use qos_core::vlarb::AnyVlArbiter;

use super::error::FlitError;
use super::governor::Governor;
use super::topology::Fabric;

/// What a packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Data.
    Data = 0,
    /// A connection's probe (§4.1).
    Probe = 1,
    /// A probe's acceptance, back to the source.
    Ack = 2,
    /// A probe's refusal, back to the source.
    Nack = 3,
    /// A release after a refusal.
    Release = 4,
    /// A connection's final data packet: releases its reservations as it passes.
    Final = 5,
}

impl Kind {
    /// From its stored byte.
    pub fn from_u8(b: u8) -> Kind {
        match b {
            1 => Kind::Probe,
            2 => Kind::Ack,
            3 => Kind::Nack,
            4 => Kind::Release,
            5 => Kind::Final,
            _ => Kind::Data,
        }
    }
}

/// A header as the hook sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The packet's kind.
    pub kind: Kind,
    /// Source node.
    pub src: u32,
    /// Destination node.
    pub dst: u32,
    /// Traffic class index.
    pub class: u8,
    /// Payload word: the connection or the driver's message number.
    pub tag: u32,
    /// Payload word: kind-specific.
    pub aux: u32,
}

/// Where a header is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// The router.
    pub router: u32,
    /// Its input port the header arrived on (local number).
    pub in_port: u8,
    /// Its output port the header is routed to (local number).
    pub out_port: u8,
    /// The node that output port leads to, when it leads to an HCA.
    pub to_node: Option<u32>,
    /// The node the input port comes from, when it comes from an HCA.
    pub from_node: Option<u32>,
    /// The cycle.
    pub now: u64,
}

/// What the router does with a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Route it on as it is.
    Pass,
    /// Send it back to its source as `kind` with payload word `aux` (its destination
    /// becomes its source, its source this router's output node or its old destination).
    TurnAround {
        /// The new kind.
        kind: Kind,
        /// The new `aux`.
        aux: u32,
    },
    /// Consume it here.
    Absorb,
}

/// A router's output arbiters, for the header hook to reload.
pub struct Outputs<'a> {
    pub(super) arb: &'a mut [AnyVlArbiter],
    pub(super) base: usize,
    pub(super) ports: usize,
}

impl Outputs<'_> {
    /// Replaces the VL arbiter of local output `port` (ignored for a port the router
    /// does not have).
    pub fn set(&mut self, port: u8, arbiter: AnyVlArbiter) {
        if (port as usize) < self.ports {
            self.arb[self.base + port as usize] = arbiter;
        }
    }
}

/// A delivered (or injected) packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// Its slot, as [`Poster::post`] returned it (free again after delivery).
    pub slot: u32,
    /// Kind.
    pub kind: Kind,
    /// Source node.
    pub src: u32,
    /// Destination node.
    pub dst: u32,
    /// Class index.
    pub class: u8,
    /// Payload words.
    pub tag: u32,
    /// Payload word.
    pub aux: u32,
    /// Length in flits.
    pub len: u32,
    /// Cycle it was posted.
    pub created: u64,
    /// Cycle its header left its HCA.
    pub injected: u64,
    /// Cycle of the event (tail at the destination, or tail leaving the source).
    pub at: u64,
}

/// A packet a policy hands to an HCA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Post {
    /// Source node.
    pub src: u32,
    /// Destination node.
    pub dst: u32,
    /// Traffic class index (its HCA send queue, and its lanes).
    pub class: u8,
    /// Its lane (one of its class's).
    pub vl: u8,
    /// Length in flits (at least one).
    pub len: u32,
    /// Kind.
    pub kind: Kind,
    /// Payload.
    pub tag: u32,
    /// Payload.
    pub aux: u32,
}

/// What a [`Poster`] reaches of the running network: the engine's network implements
/// it, so the policies' interface here does not name the engine (which drives them).
/// A policy's hooks are generic over it ([`Hooks::cycle`], [`Hooks::periodic`]) and the
/// engine instantiates them with its network: every call through a [`Poster`] is a
/// direct call the compiler can inline (a congestion control reads the lanes and
/// buffers of every channel every cycle), not a call through a table.
pub trait Net {
    /// [`Poster::post`].
    fn post(&mut self, p: Post) -> Result<u32, FlitError>;
    /// [`Poster::set_hca_arbiter`].
    fn set_hca_arbiter(&mut self, node: u32, a: AnyVlArbiter);
    /// [`Poster::set_output_arbiter`].
    fn set_output_arbiter(&mut self, router: u32, port: u8, a: AnyVlArbiter);
    /// [`Poster::fabric`].
    fn fabric(&self) -> &Fabric;
    /// [`Poster::lanes_held`].
    fn lanes_held(&self, g: u32) -> u32;
    /// [`Poster::downstream_flits`].
    fn downstream_flits(&self, g: u32, lane: u8) -> u32;
    /// [`Poster::input_flits`].
    fn input_flits(&self, g: u32, lane: u8) -> u32;
    /// [`Poster::flit_counts`].
    fn flit_counts(&self) -> (u64, u64);
    /// [`Poster::governor`].
    fn governor(&mut self) -> Option<&mut Governor>;
    /// [`Poster::vc_buffer`].
    fn vc_buffer(&self) -> u32;
    /// [`Poster::hca_flits`].
    fn hca_flits(&self, node: u32, lane: u8) -> (u32, u32);
    /// Sets the tie-break key of the packet in `slot` (trace replays).
    #[cfg(test)]
    fn set_tie(&mut self, slot: u32, tie: u8);
    /// Sets the up-port draw of the packet in `slot` on a fat tree (trace replays;
    /// [`super::topology::FatTree::route`]).
    #[cfg(test)]
    fn set_up_ports(&mut self, slot: u32, draw: u32);
}

/// What a policy may do between cycles: post packets, reload arbiters.
pub struct Poster<'a, N: Net> {
    pub(super) net: &'a mut N,
}

impl<N: Net> Poster<'_, N> {
    /// Hands packet `p` to its source HCA now; returns its slot number.
    #[inline]
    pub fn post(&mut self, p: Post) -> Result<u32, FlitError> {
        self.net.post(p)
    }

    /// Replaces the VL arbiter of HCA `node`'s port.
    #[inline]
    pub fn set_hca_arbiter(&mut self, node: u32, a: AnyVlArbiter) {
        self.net.set_hca_arbiter(node, a)
    }

    /// Replaces the VL arbiter of output `port` (local) of `router`.
    #[inline]
    pub fn set_output_arbiter(&mut self, router: u32, port: u8, a: AnyVlArbiter) {
        self.net.set_output_arbiter(router, port, a)
    }

    /// The fabric.
    #[inline]
    pub fn fabric(&self) -> &Fabric {
        self.net.fabric()
    }

    /// Lanes of global output port `g` held by a packet (a bit per lane; 0 for a port
    /// the fabric does not have). Read-only, for congestion controls.
    #[inline]
    pub fn lanes_held(&self, g: u32) -> u32 {
        self.net.lanes_held(g)
    }

    /// Flits in the input VC of `lane` at the far end of global output port `g` (0
    /// when it leads to an HCA, which takes flits at once, or nowhere).
    #[inline]
    pub fn downstream_flits(&self, g: u32, lane: u8) -> u32 {
        self.net.downstream_flits(g, lane)
    }

    /// Flits in input VC `lane` of global input port `g`.
    #[inline]
    pub fn input_flits(&self, g: u32, lane: u8) -> u32 {
        self.net.input_flits(g, lane)
    }

    /// Flits the HCAs have sent into routers, and flits the routers have sent through
    /// their crossbars, since the start (for the energy model).
    #[inline]
    pub fn flit_counts(&self) -> (u64, u64) {
        self.net.flit_counts()
    }

    /// The routers' caps ([`Governor`]), when the run has them.
    #[inline]
    pub fn governor(&mut self) -> Option<&mut Governor> {
        self.net.governor()
    }

    /// Flits a router's VL buffer holds.
    #[inline]
    pub fn vc_buffer(&self) -> u32 {
        self.net.vc_buffer()
    }

    /// Flits in HCA `node`'s buffer of `lane`, and its size.
    #[inline]
    pub fn hca_flits(&self, node: u32, lane: u8) -> (u32, u32) {
        self.net.hca_flits(node, lane)
    }
}

/// A policy driving a run. The engine calls [`Hooks::cycle`] and [`Hooks::periodic`] on
/// the policy's own type (they are generic over the network, hence `Self: Sized`); the
/// routers call the others through `dyn Hooks`.
pub trait Hooks {
    /// A router routes the header of a non-data or final packet (once per router).
    fn header(&mut self, _h: &Header, _at: &Place, _out: &mut Outputs<'_>) -> Verdict {
        Verdict::Pass
    }
    /// A packet's tail reached its destination HCA.
    fn delivered(&mut self, _d: &Delivered) {}
    /// A packet's tail left its source HCA.
    fn injected(&mut self, _d: &Delivered) {}
    /// Called before the HCAs and routers of every cycle (post packets due now).
    fn cycle<N: Net>(&mut self, _now: u64, _net: &mut Poster<'_, N>) -> Result<(), FlitError>
    where
        Self: Sized,
    {
        Ok(())
    }
    /// The next cycle at or after `now` at which [`Hooks::cycle`] has something to
    /// do (the engine skips idle cycles up to it); `None` when nothing is left.
    fn next_time(&self, _now: u64) -> Option<u64> {
        None
    }
    /// Cycles between calls of [`Hooks::periodic`] (0: never).
    fn period(&self) -> u64 {
        0
    }
    /// Every [`Hooks::period`] cycles, from cycle 0.
    fn periodic<N: Net>(&mut self, _now: u64, _net: &mut Poster<'_, N>)
    where
        Self: Sized,
    {
    }
}

/// The hooks of a run no policy drives (the fabric's own traffic classes).
pub(super) struct NoHooks;

impl Hooks for NoHooks {}

/// Decides which packet an HCA's DMA takes next.
pub trait InjectionGate {
    /// Packet `pkt` of class `class` was posted at `node`.
    fn enqueue(&mut self, node: usize, class: usize, pkt: u32, lane: u8, now: u64);
    /// The next packet for the DMA of `node`, if one may go now; `room(lane)` says
    /// whether the HCA's buffer of a lane has room for a flit.
    fn pick(&mut self, node: usize, room: &dyn Fn(u8) -> bool, now: u64) -> Option<u32>;
    /// The DMA moved the last flit of `pkt` into the HCA.
    fn dma_done(&mut self, _node: usize, _pkt: u32, _now: u64) {}
}
