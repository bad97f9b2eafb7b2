//! The records the routers of the flit network keep (Yum §3.1): a flit in a VC ring,
//! an input VC with its wormhole and credit state, a global port, and the run's
//! counters. Flat, `Copy` and indexed by number, so that a flit hop touches two VC
//! records and two port records ([`super::router`] moves the flits).

use super::config::{Delays, PriorityRule, MAX_PRIORITY_CLASSES};
use super::packet::NO_LANE;
use super::topology::NO_PORT;

/// No VC.
pub(super) const NO_VC: u32 = u32::MAX;
/// Feeder flag: the feeding VC sleeps until a credit comes back.
pub(super) const STARVED: u32 = 1 << 31;
/// No feeder.
const NO_FEEDER: u32 = STARVED - 1;

/// A cycle number inside the router core (runs are limited to 2^31 cycles).
pub(super) type Cycle = u32;
/// No evaluation pending.
pub(super) const NEVER: Cycle = Cycle::MAX;

/// One flit in a VC ring: the flit word and the cycle it becomes ready.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Slot {
    pub word: u32,
    pub ready: Cycle,
}

/// One input VC: its wormhole state, and the credit state its upstream sender keeps
/// for it — kept here so that a flit hop touches two records only, the VC it leaves
/// and the VC it enters.
///
/// Credits are not counted but derived: the sender holds `buffer − len − in flight`
/// credits, where the credits in flight are the flits popped in the last `credit`
/// cycles (credits return in order after a fixed delay). Pops are at most one per
/// cycle, so a 64-bit history of pop cycles answers without a loop or a ring.
#[derive(Debug, Clone, Copy)]
pub(super) struct InVc {
    /// Bit i set: a flit left this VC at cycle `pop_at − i`.
    pub pops: u64,
    /// Cycle of the history's bit 0.
    pub pop_at: Cycle,
    /// Ready cycle of the front flit.
    pub front_ready: Cycle,
    /// The front flit's word. The front flit lives here, not in the ring: most flits
    /// find their VC empty and leave it empty, so they never touch the ring.
    pub front: u32,
    /// Pending evaluation cycle, or `NEVER`.
    pub sched: Cycle,
    /// Upstream input VC holding the lane into this VC, or `NO_FEEDER` (an HCA, or
    /// none yet); with `STARVED` set while it sleeps waiting for a credit from here.
    pub feeder: u32,
    /// Flits held (the front one and those in the ring), and the ring position of the
    /// second one (positions modulo the ring size).
    pub len: u16,
    pub head: u16,
    /// Output port (local) and output lane held, or `NO_PORT` / `NO_LANE`.
    pub out: u8,
    pub ovl: u8,
    /// The separable VC allocator's input arbiter: its pointer over the router's
    /// output lanes (output port × lanes + lane).
    pub va_rr: u16,
    /// Cycle from which the packet holding an output lane may request the crossbar.
    pub sa_ready: Cycle,
}

impl InVc {
    pub fn new() -> InVc {
        InVc {
            pops: 0,
            pop_at: 0,
            front_ready: 0,
            front: 0,
            sched: NEVER,
            feeder: NO_FEEDER,
            head: 0,
            len: 0,
            out: NO_PORT,
            ovl: NO_LANE,
            va_rr: 0,
            sa_ready: 0,
        }
    }

    /// Cycles of history whose pops still have their credit in flight at `t`
    /// (pops in `(t − delay, t]`): at most `delay`.
    #[inline]
    pub(super) fn flight_window(&self, t: Cycle, delay: Cycle) -> u32 {
        (self.pop_at + delay).saturating_sub(t)
    }

    /// The history bits of the credits in flight back to the sender at `t`.
    #[inline]
    pub(super) fn in_flight(&self, t: Cycle, delay: Cycle) -> u64 {
        let w = self.flight_window(t, delay);
        let mask = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
        self.pops & mask
    }

    /// Records a pop at `now`.
    #[inline]
    pub(super) fn record_pop(&mut self, now: Cycle) {
        let sh = now - self.pop_at;
        self.pops = if sh >= 64 { 0 } else { self.pops << sh } | 1;
        self.pop_at = now;
    }
}

/// State of one global port (input side and output side of the same port number).
///
/// 32 bytes, aligned to 32: two ports to a cache line and none across two. On a large
/// network each flit hop finds the records of its ports out of the caches, so every
/// line a record spans is a miss; what a hop does not touch (the port's router, the
/// ejection-credit records, the list of headers asleep on the output) is kept apart.
#[derive(Debug, Clone, Copy)]
#[repr(align(32))]
pub(super) struct Port {
    /// Input VCs holding flits.
    pub nonempty: u32,
    /// Input VCs eligible for the crossbar.
    pub elig: u32,
    /// Input VCs asleep until a lane of their output frees.
    pub vwait: u32,
    /// Output lanes held by a packet.
    pub busy: u32,
    /// Next output lane VL allocation tries first.
    pub va_next: u8,
    /// Round-robin pointers of the input and output arbiters (fast path): over lanes,
    /// except that the separable allocator's output arbiter goes over input ports.
    pub in_rr: u8,
    pub out_rr: u8,
    /// The separable allocator's input arbiter: its pointer over output ports.
    pub in_port_rr: u8,
    /// Port number within its router.
    pub local: u8,
    /// The second crossbar input's lane and port pointers with `input_speedup = 2` (the
    /// odd lanes; the first input's are `in_rr` and `in_port_rr`).
    pub x_in_rr: u8,
    pub x_port_rr: u8,
    /// Cycles this output port's router link takes beyond the delays' router wire
    /// (links of different lengths, [`super::topology::Fabric::latency`]), for its flits
    /// and its credits alike.
    pub wire: u8,
    /// First input VC at the far end of this output port, or `NO_VC` for an HCA.
    pub down_vc: u32,
    /// Flits sent on this output since the start (utilisation: difference between
    /// the start and the end of the measurement window).
    pub sent: u32,
}

/// The routers' settings for a run, fixed when the network is built: one `Copy` value
/// that every view of a cycle ([`super::router::Hot`]) carries, on one thread or on
/// several.
/// A packet's priority as the routers' arbiters read it (`router.priority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Prio {
    /// No packet outranks another.
    None,
    /// Each class's priority, by class.
    Class([u8; MAX_PRIORITY_CLASSES]),
    /// The older packet first.
    Age,
}

impl Prio {
    /// The rule for `rule` over the classes' priorities `class_prio`.
    pub fn new(rule: PriorityRule, class_prio: impl Iterator<Item = u8>) -> Prio {
        match rule {
            PriorityRule::None => Prio::None,
            PriorityRule::Age => Prio::Age,
            PriorityRule::Class => {
                let mut t = [0u8; MAX_PRIORITY_CLASSES];
                for (slot, p) in t.iter_mut().zip(class_prio) {
                    *slot = p;
                }
                Prio::Class(t)
            }
        }
    }

    /// The priority of a packet of class `class` created at cycle `created`: the larger
    /// wins.
    #[inline(always)]
    pub fn of(self, class: u8, created: u64) -> u64 {
        match self {
            Prio::None => 0,
            Prio::Class(t) => t[class as usize % MAX_PRIORITY_CLASSES] as u64,
            Prio::Age => u64::MAX - created,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Params {
    /// Lane slots per port (a power of two) and its log2.
    pub lanes: usize,
    pub lshift: u32,
    /// Flit buffer per VC (the credits a sender starts with); also the slots of each
    /// VC's ring (not rounded up to a power of two: at 64×64 the rings are most of the
    /// network's memory).
    pub cap: u32,
    pub d: Delays,
    /// Delays the router core adds up: crossbar grant to the far end of a router link
    /// and of a host link, then the extra cycles before a header / body flit is ready
    /// there, a credit's trip back to a router, to an HCA and from an HCA's ejection
    /// buffer, VL allocation.
    pub hop: Cycle,
    pub hop_host: Cycle,
    pub head_extra: Cycle,
    pub body_extra: Cycle,
    /// BookSim2's routing stage for a header that reaches the front of its VC behind
    /// a tail: it routes from then (`route` under BookSim2's allocators, else 0).
    pub front_route: Cycle,
    pub credit_delay: Cycle,
    /// Router links of different lengths ([`super::topology::Fabric::latency`]): each
    /// adds its latency beyond the delays' router link (`Port::wire`) to its flits' and
    /// its credits' trips.
    pub link_extra: bool,
    pub host_credit: Cycle,
    pub eject_credit: Cycle,
    pub vl_alloc: Cycle,
    /// Crossbar allocation: one of BookSim2's allocators (their requests and VC
    /// allocation stage) instead of the input and output VL arbiters.
    pub separable: bool,
    /// That allocator is BookSim2's iSLIP (`Allocator::Islip`), not separable
    /// input-first.
    pub islip: bool,
    /// Crossbar inputs per input port (1 or 2), iSLIP's iterations, and the lanes in
    /// use (BookSim2's `num_vcs`, for the lane pointers of a port with two inputs).
    pub speedup: u8,
    pub iters: u8,
    pub nvl: u8,
    /// iSLIP, or BookSim2's separable allocator with two crossbar inputs per port: the
    /// general allocation (`step_router_general`).
    pub general: bool,
    /// BookSim2's packet priorities (`router.priority`) under its allocators: the VC
    /// an input asks an output with is its highest-priority one (any allocator), and
    /// the separable input-first arbiters rank requests by priority (iSLIP's ignore
    /// it).
    pub prio: Prio,
    /// BookSim2's `wait_for_tail_credit`: a lane is free for a new packet once the
    /// credit of the last one's tail is back.
    pub wait_tail: bool,
    /// BookSim2's `hold_switch_for_packet`: a granted connection is kept for the
    /// packet's next flits (`Hot::hold`).
    pub hold: bool,
    /// BookSim2's routing stage of two cycles or more (`routing_delay` >= 2 under its
    /// allocators): a router routes its headers in batches, one batch at a time
    /// (`Hot::route_batch`); `entry_route` is the routing a header's readiness
    /// includes when it enters a router (`route`, or 0 when batched).
    pub route_fifo: bool,
    pub entry_route: Cycle,
    /// A crossbar input per lane: no input VL arbitration.
    pub full: bool,
    /// Torus lanes follow BookSim2's rule (half chosen on entering a dimension).
    pub on_entry: bool,
    /// A mesh under BookSim2's `xy_yx`: a packet's route bit picks its dimension order
    /// and its half of the lanes between routers.
    pub xy_yx: bool,
    /// Under `adaptive_xy_yx`: the first router picks the order by its credits in use.
    pub adaptive_order: bool,
    /// When `adaptive_xy_yx`'s credits in use are read, as BookSim2 reads them: as of
    /// the flits sent up to cycle `now − .0` and the credits back by `now − .1`. At the
    /// first router's VC allocation (`now`), BookSim2's routing stage a cycle before,
    /// after that cycle's credits came in: (2, 1); as the head is injected under
    /// [`Params::lookahead_order`], before the cycle's credits and sends: (1, 1); (0,
    /// 0) under other delays.
    pub read_lag: (Cycle, Cycle),
    /// Under `adaptive_xy_yx` with BookSim2's delays, `routing_delay = 0` and its
    /// terminal: the order is chosen as the head is injected
    /// ([`super::router::Hot::order_by_lookahead`]), not at the first router.
    pub lookahead_order: bool,
    /// A mesh or torus under BookSim2's `valiant` or `romm`: a packet goes in
    /// dimension order to its intermediate node (`Packets::route`), then to its
    /// destination; the route word's [`super::packet::VIA_DONE`] bit, set at the
    /// intermediate node, picks its part of the lanes.
    pub two_phase: bool,
    /// Under `romm` (else `valiant`): the intermediate node in the minimal quadrant.
    pub romm: bool,
    /// A flatfly's two-phase routings: phase one ends at the intermediate node's
    /// router (routers serve several nodes), not at the node, and the lanes split on
    /// every router link.
    pub via_router: bool,
    /// A flatfly's `valiant`: phase one ends at the destination's router too.
    pub via_ends_at_dest: bool,
    /// A flatfly's `ugal`: the first router chooses between the minimal route and the
    /// one through the drawn intermediate router ([`super::router::Hot`]'s
    /// `ugal_choice`).
    pub ugal: bool,
    /// A flatfly's routers per side and nodes per router side (k, xr); (0, 0) else.
    pub flatfly: (u32, u32),
    /// Headers of one cycle take free lanes oldest packet first
    /// ([`super::config::LaneOrder::Oldest`]).
    pub oldest_first: bool,
    /// Timing wheel slots minus one (a power of two minus one).
    pub wmask: Cycle,
    /// Input / output arbiters are plain round-robin (fast path on `Port` pointers).
    pub in_rr: bool,
    pub out_rr: bool,
    /// Output VL buffers ([`OutBufs`]) between the crossbar and the link.
    pub out_buf: bool,
    /// Prefetch hints for the records of the routers a cycle steps next
    /// ([`super::prefetch`]): on when the records outgrow the caches
    /// ([`super::engine::Network::set_prefetch`]).
    pub look_ahead: bool,
}

impl Params {
    /// Ring slots per VC (the flits behind a VC's front one: at most `cap`).
    #[inline(always)]
    pub fn ring(&self) -> u16 {
        self.cap as u16
    }
}

/// Most lane slots per port (lane sets are 32-bit masks).
pub(super) const MAX_LANES: usize = 32;

/// The crossbar requests inside one router. Sized for the most ports a router has (64,
/// checked when the network is built) and the most lane slots, so that an index masked
/// to its array's size needs no bounds check (the masks never change a valid index).
#[derive(Debug, Clone)]
pub(super) struct Requests {
    /// BookSim2's separable allocator: per output port the input ports asking for it,
    /// and per input port the lane it asks with and the output lane that lane holds.
    pub ins: [u64; 64],
    pub src: [u16; 64],
    /// Under packet priorities, per input port the priority it asks with.
    pub pri: [u64; 64],
    /// The general allocation (iSLIP, two crossbar inputs per port): per crossbar input
    /// the output ports granting it, and its eligible lanes when it asked.
    pub grants: [u64; 64],
    pub elig: [u32; 64],
    /// The VL arbiters: per output port the output lanes asked for, and per output lane
    /// (port × lanes + lane) the input port × lanes + lane asking for it.
    pub lanes: [u32; 64],
    pub lane_src: [u16; 64 * MAX_LANES],
}

impl Default for Requests {
    fn default() -> Requests {
        Requests {
            ins: [0; 64],
            src: [0; 64],
            pri: [0; 64],
            grants: [0; 64],
            elig: [0; 64],
            lanes: [0; 64],
            lane_src: [0; 64 * MAX_LANES],
        }
    }
}

/// Counters and the current cycle, carried in and out of a [`Hot`] view.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Tally {
    /// Measured packets not yet delivered.
    pub outstanding: u64,
    /// Flits DMA'd into HCA buffers or in routers.
    pub in_network: u64,
    /// Flits sent by HCAs into routers.
    pub moved: u64,
    /// Flits sent through router crossbars.
    pub flit_hops: u64,
    /// Evaluations in the timing wheel.
    pub wheel_len: usize,
    /// The cycle being run (checks that evaluations stay within the wheel).
    pub now_hint: Cycle,
}

/// The routers' output VL buffers (Yum §3.1, stage 5: "buffering of flits flowing out
/// of the crossbar", Table 1's output VL buffer of 1,280 bits = 10 flits), when
/// `router.output_buffer` is set: per output port and lane a FIFO of flits that crossed
/// the crossbar, from which the link's VL arbiter sends one flit per cycle. Empty (and
/// untouched) without output buffers. The cycle's phases work on a view ([`Ob`]).
#[derive(Debug, Clone, Default)]
pub(super) struct OutBufs {
    /// Flits per buffer, and lane slots per port (the buffers of a port are
    /// consecutive).
    pub cap: u32,
    pub lanes: usize,
    /// Per buffer (global port × lanes + lane): `cap` slots, and its front's slot and
    /// length.
    pub slot: Vec<Slot>,
    pub head: Vec<u8>,
    pub len: Vec<u8>,
    /// Per buffer: the input VC asleep until the buffer frees a slot, or `NO_VC`.
    pub waiter: Vec<u32>,
    /// Per global port: lanes whose buffer holds a flit, and the link's round-robin
    /// pointer (plain round-robin output arbitration).
    pub mask: Vec<u32>,
    pub link_rr: Vec<u8>,
    /// Global ports whose buffers hold a flit, and whether each is listed.
    pub ports: Vec<u32>,
    pub listed: Vec<bool>,
}

impl OutBufs {
    /// Buffers of `cap` flits for `ports` global ports of `lanes` lanes.
    pub fn new(cap: u32, ports: usize, lanes: usize) -> OutBufs {
        let n = if cap == 0 { 0 } else { ports * lanes };
        let p = if cap == 0 { 0 } else { ports };
        OutBufs {
            cap,
            lanes,
            slot: vec![Slot::default(); n * cap as usize],
            head: vec![0; n],
            len: vec![0; n],
            waiter: vec![NO_VC; n],
            mask: vec![0; p],
            link_rr: vec![0; p],
            ports: Vec::with_capacity(p),
            listed: vec![false; p],
        }
    }

    /// The view of the whole network's buffers.
    pub fn view(&mut self) -> Ob<'_> {
        Ob {
            cap: self.cap,
            lanes: self.lanes,
            slot: &mut self.slot,
            head: &mut self.head,
            len: &mut self.len,
            waiter: &mut self.waiter,
            mask: &mut self.mask,
            link_rr: &mut self.link_rr,
            listed: &mut self.listed,
            ports: &mut self.ports,
        }
    }
}

/// The output buffers as local slices for one phase of a cycle (as [`OutBufs`]); on
/// threads, a partition's view lists the ports it fills in a list of its own.
pub(super) struct Ob<'a> {
    pub cap: u32,
    pub lanes: usize,
    pub slot: &'a mut [Slot],
    pub head: &'a mut [u8],
    pub len: &'a mut [u8],
    pub waiter: &'a mut [u32],
    pub mask: &'a mut [u32],
    pub link_rr: &'a mut [u8],
    pub listed: &'a mut [bool],
    pub ports: &'a mut Vec<u32>,
}

impl Ob<'_> {
    /// Whether buffer `i` has room for another flit.
    #[inline]
    pub fn room(&self, i: usize) -> bool {
        (self.len[i] as u32) < self.cap
    }

    /// Appends flit `word`, ready for the link at `ready`, to buffer `i` of port `g`.
    pub fn push(&mut self, g: usize, i: usize, word: u32, ready: Cycle) {
        let cap = self.cap as usize;
        debug_assert!(
            self.room(i),
            "an output buffer holds more flits than its size"
        );
        let at = (self.head[i] as usize + self.len[i] as usize) % cap;
        self.slot[i * cap + at] = Slot { word, ready };
        self.len[i] += 1;
        self.mask[g] |= 1 << (i & (self.lanes - 1));
        if !self.listed[g] {
            self.listed[g] = true;
            self.ports.push(g as u32);
        }
    }

    /// The front flit of buffer `i` (which holds one).
    #[inline]
    pub fn front(&self, i: usize) -> Slot {
        self.slot[i * self.cap as usize + self.head[i] as usize]
    }

    /// Removes the front flit of buffer `i` of port `g`.
    pub fn pop(&mut self, g: usize, i: usize) -> Slot {
        let s = self.front(i);
        let h = self.head[i] as u32 + 1;
        self.head[i] = if h == self.cap { 0 } else { h as u8 };
        self.len[i] -= 1;
        if self.len[i] == 0 {
            self.mask[g] &= !(1 << (i & (self.lanes - 1)));
        }
        s
    }
}

/// What a partition of a parallel run leaves for the serial phase of the cycle: the
/// effects of its routers on input VCs of other partitions, and its deliveries.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    /// Evaluations of other partitions' VCs: (input VC, cycle).
    pub sched: Vec<(u32, Cycle)>,
    /// Flits written into other partitions' VCs: (input VC, flit word, ready cycle).
    pub push: Vec<(u32, u32, Cycle)>,
    /// Flits that reached their HCA: (flit word, arrival cycle).
    pub deliver: Vec<(u32, u64)>,
}

// A port record fills half a cache line exactly (see [`Port`]).
const _: () = assert!(std::mem::size_of::<Port>() == 32 && std::mem::align_of::<Port>() == 32);
