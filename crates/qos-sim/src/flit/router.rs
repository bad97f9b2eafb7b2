//! The routers of the flit network (Yum §3.1, Fig 1): input-buffered wormhole routers
//! with virtual lanes and credit flow control, driven by wake-ups so that a cycle costs
//! only the lanes that can move.
//!
//! Every input VC is in one of four states: empty; *scheduled* (an evaluation is due at
//! a known cycle: its front flit becomes ready, its VL allocation completes, or a
//! credit comes back — kept in a timing wheel); *asleep* (a header waiting for a free
//! lane of its output, woken when a tail leaves that output; or a packet with no credit
//! and none on the way, woken when the downstream buffer frees a slot); or *eligible*
//! (front flit ready, output lane held, credit available). Eligibility is sticky until
//! the VC sends, since only the VC itself spends its output lane's credits. Each cycle
//! every router with an eligible lane runs its crossbar allocation — the input and
//! output VL arbiters (one lane per input port, one request per output port), or
//! BookSim2's separable input-first allocator — and moves the winners; nothing else is
//! looked at.
//!
//! Timing. A flit granted the crossbar at cycle `s` is written into the downstream ring
//! at once with ready time `s + switch_alloc + crossbar + link + sync (+ route if it is
//! a header)`; the slot was already reserved by the credit, so writing early is safe,
//! and since every delay into another router is at least one cycle, routers can be
//! stepped in any order with the same result. A header at the front of its VC at its
//! ready time is routed and tries VL allocation; on success it may request the crossbar
//! `vl_alloc` cycles later. A popped flit's credit reaches an upstream router `credit`
//! cycles later, an upstream HCA `host_credit` cycles later. Zero-load packet latency
//! is [`Delays::zero_load`].

use qos_core::vlarb::{AnyVlArbiter, RoundRobin, VlArbiter, CONTROL_VL};

use super::hooks::{Header, Hooks, Kind, Outputs, Place, Verdict};
use super::packet::{Packets, HEAD, NO_LANE, PKT, TAIL, VIA_DONE};
pub(super) use super::records::{
    Cycle, InVc, Ob, OutBufs, Outbox, Params, Port, Prio, Requests, Slot, Tally, NO_VC,
};
use super::records::{MAX_LANES, NEVER, STARVED};
use super::stats::Collector;
use super::topology::{Fabric, Link, NO_PORT, ROUTE_YX};

/// Index mask of [`Requests::lane_src`].
const LANE_SRC: usize = 64 * MAX_LANES - 1;

/// Mask bit of the management lane VL15, which always wins arbitration.
const CONTROL_BIT: u32 = 1 << CONTROL_VL;

/// The routers' constants and arrays as local slices, for one phase of a cycle.
///
/// The cycle's hot loops run on this view rather than on the network's own struct:
/// a slice held in a local keeps its pointer and length in registers, while a `Vec`
/// field behind `&mut self` is reloaded after every store the compiler cannot prove
/// unrelated to it (measured: about a seventh of the instructions of a run).
pub(super) struct Hot<'a> {
    /// The run's settings.
    pub k: Params,
    pub window: (u64, u64),
    pub fab: &'a Fabric,
    pub vc: &'a mut [InVc],
    pub slot: &'a mut [Slot],
    pub port: &'a mut [Port],
    /// Per input VC the next sleeper, then per global port its list head (at
    /// `vc.len() + g`).
    pub wait_next: &'a mut [u32],
    pub sink: &'a [u32],
    pub rports: &'a mut [u64],
    pub listed: &'a mut [bool],
    pub arb_list: &'a mut Vec<u32>,
    pub spare_list: &'a mut Vec<u32>,
    pub wheel: &'a mut [Vec<u32>],
    pub reqs: &'a mut Requests,
    pub va_list: &'a mut Vec<u32>,
    pub va_allowed: &'a mut Vec<u32>,
    pub va_claim: &'a mut [u32],
    pub va_touched: &'a mut Vec<u32>,
    pub va_out_rr: &'a mut [u16],
    /// Output lanes waiting for their tail's credit (`wait_for_tail_credit`).
    pub tail_out: &'a mut [u32],
    /// BookSim2's batched routing stage (`route_fifo`): per input VC the cycle its
    /// header is routed, per router its latest batch.
    pub route_done: &'a mut [Cycle],
    pub route_batch: &'a mut [(Cycle, Cycle)],
    /// Held crossbar connections (`hold_switch_for_packet`): per crossbar input the
    /// cycle it holds for and `output << 8 | lane`.
    pub hold: &'a mut [(Cycle, u16)],
    /// Output VL buffers (empty without).
    pub ob: Ob<'a>,
    pub in_arb: &'a mut [AnyVlArbiter],
    pub out_arb: &'a mut [AnyVlArbiter],
    pub class_mask: &'a [u32],
    pub class_lo: &'a [u32],
    pub class_hi: &'a [u32],
    pub class_keep: &'a [bool],
    pub pk: &'a mut Packets,
    pub stats: &'a mut Collector,
    pub tally: Tally,
    /// Per-router caps (PowerHerd), when set.
    pub gov: Option<&'a mut super::governor::Governor>,
    /// Per global output port, a keep-lane packet's lane for each injection lane.
    pub lane_map: Option<&'a [[u8; 16]]>,
    /// The policy driving a hooked run ([`super::Network::run_hooked`]).
    pub hooks: Option<&'a mut dyn Hooks>,
    /// Input VCs this view owns, `own_lo .. own_lo + own_len` (all of them unless the
    /// run is partitioned over threads): only their records and wheel entries are
    /// written directly.
    pub own_lo: usize,
    pub own_len: usize,
    /// Headers that need a lane of their output take it after the cycle's other
    /// evaluations, oldest packet first, in an order that does not depend on
    /// scheduling ([`Hot::allocate_heads`]): set under Yum's VL arbiters without a
    /// policy, so that a run gives the same result with and without threads.
    pub heads_in_order: bool,
    /// The headers of this cycle's evaluations waiting for their lane, as sort keys.
    pub heads: &'a mut Vec<u128>,
    /// A partition of a run on threads: the wheel the serial phase schedules into,
    /// whose due entries of this partition's VCs it evaluates too.
    pub shared_wheel: Option<&'a [Vec<u32>]>,
    /// A partition of a run on threads: its effects on other partitions' VCs and its
    /// deliveries, applied by the serial phase of the cycle.
    pub outbox: Option<&'a mut Outbox>,
}

impl Hot<'_> {
    /// Evaluates input VC `ivc` at cycle `t` (or earlier if already due then).
    #[inline]
    pub(super) fn schedule(&mut self, ivc: usize, t: Cycle) {
        if !self.owns(ivc) {
            return self.defer_schedule(ivc, t);
        }
        let v = &mut self.vc[ivc];
        if v.sched <= t {
            return;
        }
        debug_assert!(t.wrapping_sub(self.tally.now_hint) <= self.k.wmask);
        v.sched = t;
        self.wheel[(t & self.k.wmask) as usize].push(ivc as u32);
        self.tally.wheel_len += 1;
    }

    /// Whether this view owns input VC `ivc`.
    #[inline(always)]
    pub(super) fn owns(&self, ivc: usize) -> bool {
        ivc.wrapping_sub(self.own_lo) < self.own_len
    }

    /// An evaluation of another partition's VC, left for the serial phase.
    #[cold]
    fn defer_schedule(&mut self, ivc: usize, t: Cycle) {
        let ob = self
            .outbox
            .as_deref_mut()
            .expect("a partition has an outbox");
        ob.sched.push((ivc as u32, t));
    }

    /// Runs the evaluations due at `now`.
    pub(super) fn wake(&mut self, now: Cycle) {
        self.tally.now_hint = now;
        let slot = (now & self.k.wmask) as usize;
        let shared = self.shared_wheel.map_or(&[][..], |w| &w[slot][..]);
        if self.wheel[slot].is_empty() && shared.is_empty() {
            return;
        }
        let mut due = std::mem::take(&mut self.wheel[slot]);
        self.tally.wheel_len -= due.len();
        for &ivc in shared {
            if self.owns(ivc as usize) {
                due.push(ivc);
            }
        }
        for &ivc in &due {
            let ivc = ivc as usize;
            if self.vc[ivc].sched == now {
                self.vc[ivc].sched = NEVER;
                self.evaluate(ivc, now);
            }
        }
        due.clear();
        self.wheel[slot] = due;
        if !self.heads.is_empty() {
            self.allocate_heads(now);
        }
    }

    /// Drops every pending evaluation (only when the network holds no flit).
    pub(super) fn clear_wheel(&mut self) {
        if self.tally.wheel_len == 0 {
            return;
        }
        for due in self.wheel.iter_mut() {
            for &ivc in due.iter() {
                self.vc[ivc as usize].sched = NEVER;
            }
            due.clear();
        }
        self.tally.wheel_len = 0;
    }

    /// Decides what input VC `ivc` waits for, or makes it eligible.
    #[inline]
    fn evaluate(&mut self, ivc: usize, now: Cycle) {
        let lanes = self.k.lanes;
        let g = ivc >> self.k.lshift;
        let lane = ivc & (lanes - 1);
        let bit = 1u32 << lane;
        let pg = &self.port[g];
        if pg.elig & bit != 0 || pg.nonempty & bit == 0 {
            return;
        }
        let (r, local) = (self.fab.port_router[g] as usize, pg.local as usize);
        // Fields, not a copy of the record: on threads, the upstream partition may
        // write its `feeder` meanwhile.
        let v = &self.vc[ivc];
        let (front_ready, v_ovl, v_sa, v_out) = (v.front_ready, v.ovl, v.sa_ready, v.out);
        if front_ready > now {
            self.schedule(ivc, front_ready);
            return;
        }
        if v_ovl == NO_LANE {
            if self.heads_in_order {
                // Lanes are taken after every other evaluation of the cycle
                // (`allocate_heads`): the oldest packet first, ties over the router's
                // input VCs from one drawn from the cycle and the router.
                let first = (g - local) * lanes;
                let n = self.fab.ports[r] as usize * lanes;
                let turn = (ivc - first + n - head_start(r, now, n)) % n;
                let pkt = (self.vc[ivc].front & PKT) as usize;
                let age = if self.k.oldest_first {
                    self.pk.created[pkt] as u128
                } else {
                    0
                };
                self.heads
                    .push((r as u128) << 96 | age << 64 | (turn as u128) << 32 | ivc as u128);
                return;
            }
            return self.take_lane(ivc, r, g, lane, now);
        }
        if v_sa > now {
            self.schedule(ivc, v_sa);
            return;
        }
        self.credit_or_wait(
            ivc,
            r,
            g,
            lane,
            g - local + v_out as usize,
            v_ovl as usize,
            now,
        );
    }

    /// The headers of this cycle that need a lane of their output, router by router
    /// and, within a router, the oldest packet (by creation cycle) first; packets as
    /// old go over the router's input VCs in turn from one drawn from the cycle and the
    /// router ([`head_start`]: a hash, not `now mod n`, which would alias with periodic
    /// traffic). So which of two headers arriving together takes a lane depends
    /// neither on the order they were scheduled in nor, on threads, on the
    /// partitioning. Only headers of one router compete for its output lanes; every
    /// other evaluation touches its own VC's state, so the rest of the cycle's order
    /// does not matter. (The rule is an assumption of the model, measured against
    /// others in docs/flit-network.md, "Headers arriving together".)
    fn allocate_heads(&mut self, now: Cycle) {
        let mut heads = std::mem::take(self.heads);
        heads.sort_unstable();
        for &h in &heads {
            let ivc = (h & 0xffff_ffff) as usize;
            let (r, g) = ((h >> 96) as usize, ivc >> self.k.lshift);
            self.take_lane(ivc, r, g, ivc & (self.k.lanes - 1), now);
        }
        heads.clear();
        *self.heads = heads;
    }

    /// Routes the header at the front of input VC `ivc` (lane `lane` of global port
    /// `g` of router `r`), allocates it a lane and, once its allocation is complete,
    /// checks its credit.
    #[inline]
    fn take_lane(&mut self, ivc: usize, r: usize, g: usize, lane: usize, now: Cycle) {
        let Some((gout, ovl)) = self.allocate_lane(r, g, lane, now) else {
            return;
        };
        let sa = now + self.k.vl_alloc;
        self.vc[ivc].sa_ready = sa;
        if sa > now {
            self.schedule(ivc, sa);
            return;
        }
        self.credit_or_wait(ivc, r, g, lane, gout, ovl, now);
    }

    /// Makes input VC `ivc`, holding lane `ovl` of output `gout`, eligible if a credit
    /// is in hand; otherwise it waits for one. (Always inlined: once in every
    /// evaluation, where a call costs what the check does.)
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn credit_or_wait(
        &mut self,
        ivc: usize,
        r: usize,
        g: usize,
        lane: usize,
        gout: usize,
        ovl: usize,
        now: Cycle,
    ) {
        if self.k.out_buf {
            return self.room_or_wait(ivc, r, g, lane, gout, ovl);
        }
        let (down_vc, sink) = (self.port[gout].down_vc, self.sink[gout]);
        let ok = if down_vc != NO_VC {
            self.has_credit(ivc, down_vc as usize + ovl, now, self.credit_over(gout))
        } else {
            sink == NO_VC || self.has_credit(ivc, sink as usize + ovl, now, self.k.eject_credit)
        };
        if ok {
            self.make_eligible(r, g, lane);
        }
    }

    /// [`Hot::credit_or_wait`] with output buffers: room in the output lane's buffer is
    /// the credit (the link's credits are the buffer's to spend).
    #[cold]
    fn room_or_wait(
        &mut self,
        ivc: usize,
        r: usize,
        g: usize,
        lane: usize,
        gout: usize,
        ovl: usize,
    ) {
        let b = gout * self.k.lanes + ovl;
        if self.ob.room(b) {
            self.make_eligible(r, g, lane);
        } else {
            self.ob.waiter[b] = ivc as u32;
        }
    }

    /// Where packet `pkt` is routed to in dimension order, and its tie bits there: its
    /// destination, or under two-phase routing its intermediate node until it has
    /// passed it (a torus's phase two then on the tie bits above phase one's).
    #[inline]
    fn target(&self, pkt: usize) -> (u32, u8) {
        let tie = self.pk.tie[pkt];
        if !self.k.two_phase {
            return (self.pk.dst[pkt], tie);
        }
        let via = self.pk.route[pkt];
        if via & VIA_DONE == 0 {
            (via, tie)
        } else {
            (self.pk.dst[pkt], tie >> self.fab.grid.map_or(0, |g| g.n))
        }
    }

    /// Under two-phase routing, where packet `pkt`'s current phase started (its source,
    /// or its intermediate node) and whether it is phase two.
    #[inline]
    fn phase_start(&self, pkt: usize) -> (u32, bool) {
        let via = self.pk.route[pkt];
        if via & VIA_DONE == 0 {
            (self.pk.src[pkt], false)
        } else {
            (via & !VIA_DONE, true)
        }
    }

    /// The output port at router `r` of packet `pkt` on a fabric whose routes are
    /// computed (not source routes): towards its current target.
    #[inline]
    fn computed_port(&self, r: usize, pkt: usize) -> u8 {
        if self.fab.fat_tree.is_some() {
            return self.fat_tree_port(r, pkt);
        }
        let (to, tie) = self.target(pkt);
        self.fab.next_port(r as u32, to, tie)
    }

    /// A fat tree's output port at router `r` for packet `pkt` towards its destination
    /// (up through the port its draw gives for the router's level). Out of line, so that
    /// the header routing of the other topologies, inlined into the routers' loops,
    /// keeps its code.
    #[cold]
    #[inline(never)]
    fn fat_tree_port(&self, r: usize, pkt: usize) -> u8 {
        let t = self.fab.fat_tree.as_ref().expect("a fat tree");
        t.route(r as u32, self.pk.dst[pkt], self.pk.route[pkt])
    }

    /// Routes the header at the front of input VC (`g`, `lane`) of router `r` and
    /// allocates it a lane of its output; on failure the VC sleeps until a tail leaves
    /// that output.
    fn allocate_lane(
        &mut self,
        r: usize,
        g: usize,
        lane: usize,
        now: Cycle,
    ) -> Option<(usize, usize)> {
        let lanes = self.k.lanes;
        let ivc = g * lanes + lane;
        if self.k.route_fifo && self.route_done[ivc] > now {
            self.route_batched(r, ivc, now);
            return None;
        }
        let base = g - self.port[g].local as usize;
        let pkt = (self.vc[ivc].front & PKT) as usize;
        let fab = self.fab;
        if self.k.xy_yx && fab.dim[g] != NO_PORT {
            // BookSim2's `xy_yx_mesh` past the first router: the order follows the lane
            // the packet came in on, descending from the class's lane ⌊n/2⌋ up (with
            // an odd count the middle lane is in both orders' ranges, so a packet that
            // took it going X first goes Y first from the next router on).
            let cls = self.pk.class[pkt] as usize;
            let m = self.class_mask[cls];
            let rank = (m & ((1u32 << lane) - 1)).count_ones();
            let yx = rank >= m.count_ones() / 2;
            self.pk.tie[pkt] = (self.pk.tie[pkt] & !ROUTE_YX) | if yx { ROUTE_YX } else { 0 };
        } else if self.k.adaptive_order
            && !self.k.lookahead_order
            && self.vc[ivc].out == NO_PORT
            && fab.node_router(self.pk.dst[pkt]) != r as u32
        {
            // BookSim2's `adaptive_xy_yx_mesh` at the first router (once per packet).
            self.adaptive_choice(r as u32, pkt, now);
        }
        if self.k.ugal
            && !self.k.lookahead_order
            && fab.dim[g] == NO_PORT
            && self.vc[ivc].out == NO_PORT
            && self.pk.route[pkt] & VIA_DONE == 0
        {
            // BookSim2's `ugal_flatfly_onchip` at the first router.
            self.ugal_choice(r as u32, pkt, now);
        }
        if self.k.two_phase && self.pk.route[pkt] & VIA_DONE == 0 {
            // BookSim2's `valiant_*` and `romm_mesh`: at its intermediate node (its
            // first router, if that is the one) a packet turns to its destination;
            // `valiant_flatfly` at the intermediate node's router, or at the
            // destination's.
            let via = self.pk.route[pkt];
            let turn = if self.k.via_router {
                fab.node_router(via) == r as u32
                    || (self.k.via_ends_at_dest && fab.node_router(self.pk.dst[pkt]) == r as u32)
            } else {
                via == r as u32
            };
            if turn {
                self.pk.route[pkt] |= VIA_DONE;
            }
        }
        let mut op = match &fab.source {
            None => self.computed_port(r, pkt),
            Some(sr) => sr.hops[(self.pk.route[pkt] + self.pk.hop[pkt] as u32) as usize],
        } as usize;
        // The output a sleeping header is listed on (routing is fixed per packet).
        let listed_on = self.vc[ivc].out;
        // A policy's packet, routed here for the first time: ask the header hook.
        if listed_on == NO_PORT && self.pk.kind[pkt] != Kind::Data as u8 && self.hooks.is_some() {
            match self.header_hook(r, ivc, op, pkt, now) {
                Verdict::Pass => {}
                Verdict::TurnAround { .. } => op = self.computed_port(r, pkt) as usize,
                Verdict::Absorb => {
                    self.absorb(ivc, now);
                    return None;
                }
            }
        }
        let gout = base + op;
        self.vc[ivc].out = op as u8;
        let cls = self.pk.class[pkt] as usize;
        let mut pending_at = None;
        if self.k.wait_tail && self.tail_out[gout] & self.class_mask[cls] != 0 {
            pending_at = self.tail_credits_back(gout, self.class_mask[cls], now);
        }
        let mut allowed = self.class_mask[cls] & !self.port[gout].busy;
        if self.class_keep[cls] {
            let sl = self.pk.vl[pkt];
            let vl = self.lane_map.map_or(sl, |m| m[gout][sl as usize & 15]);
            allowed &= 1 << vl;
        }
        if fab.dateline && fab.dim[gout] != NO_PORT {
            let hi = if self.k.on_entry {
                // BookSim2: the upper half if the packet entered this dimension above
                // its destination (in dimension order, a dimension is entered at the
                // source's coordinate in it; under `valiant`, at the coordinate of the
                // phase's start, towards the phase's end).
                let (s, d) = if self.k.two_phase {
                    (self.phase_start(pkt).0, self.target(pkt).0)
                } else {
                    (self.pk.src[pkt], self.pk.dst[pkt])
                };
                fab.grid.is_some_and(|g| {
                    let dim = fab.dim[gout] as u32;
                    g.coord(s, dim) > g.coord(d, dim)
                })
            } else {
                let upper =
                    self.class_hi[cls] & (1 << lane) != 0 && self.class_lo[cls] & (1 << lane) == 0;
                fab.wrap[gout] || (fab.dim[gout] == fab.dim[g] && upper)
            };
            let half = if hi {
                self.class_hi[cls]
            } else {
                self.class_lo[cls]
            };
            allowed &= if !self.k.two_phase {
                half
            } else if r as u32 == self.pk.dst[pkt] {
                // BookSim2's `valiant_torus`: not split at the destination's router.
                self.class_mask[cls]
            } else {
                phase_lanes(self.class_mask[cls], half, self.phase_start(pkt).1)
            };
        }
        if fab.dim[gout] != NO_PORT && !fab.dateline {
            // A mesh's split lanes between routers (any lane into the host): BookSim2's
            // `xy_yx_mesh`, each order on its range (overlapping in the middle lane of
            // an odd count); its `valiant_mesh` and `romm_mesh`, each phase on its
            // range, except at the destination's router, where they are not split
            // (even for a packet that passes its destination before its intermediate
            // node).
            let upper = if self.k.xy_yx {
                Some(self.pk.tie[pkt] & ROUTE_YX != 0)
            } else if self.k.two_phase && (self.k.via_router || r as u32 != self.pk.dst[pkt]) {
                Some(self.phase_start(pkt).1)
            } else {
                None
            };
            if let Some(upper) = upper {
                allowed &= if upper {
                    self.class_hi[cls]
                } else {
                    self.class_lo[cls]
                };
            }
        }
        let Some(ovl) = RoundRobin::first_from(allowed, self.port[gout].va_next as u32) else {
            if let Some(at) = pending_at {
                // A lane's tail credit is on its way back: ask again when it arrives.
                self.schedule(ivc, at);
                return None;
            }
            let bit = 1u32 << lane;
            if self.port[g].vwait & bit == 0 {
                self.port[g].vwait |= bit;
                let head = self.vc.len() + gout;
                self.wait_next[ivc] = self.wait_next[head];
                self.wait_next[head] = ivc as u32;
            } else if listed_on as usize != op {
                // Still listed on another output (a previous packet's): poll until
                // that list is woken.
                self.schedule(ivc, now + 1);
            }
            return None;
        };
        if self.k.separable {
            // BookSim2's VC allocator decides once every request of the cycle is in.
            self.va_list.push(ivc as u32);
            self.va_allowed.push(allowed);
            return None;
        }
        self.grant_lane(ivc, gout, ovl);
        Some((gout, ovl))
    }

    /// Asks the hook about the header of packet `pkt` at the front of input VC `ivc` of
    /// router `r`, routed to local output `op`; applies a turn-around to the packet. A
    /// turn-around or an absorption of a packet longer than one flit, or a turn-around
    /// on a source-routed fabric, is passed on instead.
    #[cold]
    fn header_hook(&mut self, r: usize, ivc: usize, op: usize, pkt: usize, now: Cycle) -> Verdict {
        let g = ivc >> self.k.lshift;
        let fab = self.fab;
        let base = fab.port_base[r] as usize;
        let node = |l: Link| match l {
            Link::Hca(n) => Some(n),
            _ => None,
        };
        let h = Header {
            kind: Kind::from_u8(self.pk.kind[pkt]),
            src: self.pk.src[pkt],
            dst: self.pk.dst[pkt],
            class: self.pk.class[pkt],
            tag: self.pk.tag[pkt],
            aux: self.pk.aux[pkt],
        };
        let at = Place {
            router: r as u32,
            in_port: self.port[g].local,
            out_port: op as u8,
            to_node: node(fab.link[base + op]),
            from_node: node(fab.from[g]),
            now: now as u64,
        };
        let mut out = Outputs {
            arb: self.out_arb,
            base,
            ports: fab.ports[r] as usize,
        };
        let Some(hooks) = self.hooks.as_deref_mut() else {
            return Verdict::Pass;
        };
        let v = hooks.header(&h, &at, &mut out);
        let single = self.vc[ivc].front & TAIL != 0;
        match v {
            Verdict::TurnAround { kind, aux } if single && fab.source.is_none() => {
                self.pk.kind[pkt] = kind as u8;
                self.pk.aux[pkt] = aux;
                self.pk.dst[pkt] = h.src;
                self.pk.src[pkt] = at.to_node.unwrap_or(h.dst);
                v
            }
            Verdict::Absorb if single => v,
            _ => Verdict::Pass,
        }
    }

    /// Consumes the one-flit packet at the front of input VC `ivc` at this router.
    #[cold]
    fn absorb(&mut self, ivc: usize, now: Cycle) {
        let lanes = self.k.lanes;
        let (g, lane) = (ivc >> self.k.lshift, ivc & (lanes - 1));
        let v = &mut self.vc[ivc];
        let word = v.front;
        v.len -= 1;
        let more = v.len > 0;
        if more {
            let next = self.slot[ivc * self.k.cap as usize + v.head as usize];
            v.front = next.word;
            v.front_ready = next.ready;
            v.head = wrap(v.head + 1, self.k.ring());
        }
        let next_ready = v.front_ready.max(now + 1);
        v.record_pop(now);
        v.ovl = NO_LANE;
        v.out = NO_PORT;
        if self.k.route_fifo {
            self.route_done[ivc] = NEVER;
        }
        let feeder = v.feeder;
        if feeder & STARVED != 0 {
            self.vc[ivc].feeder = feeder & !STARVED;
            self.schedule((feeder & !STARVED) as usize, now + self.credit_into(g));
        }
        if !more {
            self.port[g].nonempty &= !(1 << lane);
        }
        self.tally.in_network -= 1;
        self.tally.moved += 1;
        let pkt = (word & PKT) as usize;
        let cls = self.pk.class[pkt] as usize;
        self.stats.flight_flits[cls] = self.stats.flight_flits[cls].saturating_sub(1);
        self.stats.flight_created[cls] =
            self.stats.flight_created[cls].saturating_sub(self.pk.created[pkt]);
        if self.pk.measured[pkt] {
            self.tally.outstanding -= 1;
        }
        self.pk.release(pkt as u32);
        if more {
            self.schedule(ivc, next_ready);
        }
    }

    /// Gives output lane `ovl` of global port `gout` to the header in input VC `ivc`.
    #[inline]
    pub(super) fn grant_lane(&mut self, ivc: usize, gout: usize, ovl: usize) {
        let po = &mut self.port[gout];
        po.busy |= 1 << ovl;
        po.va_next = ovl as u8 + 1;
        let dvc = po.down_vc;
        if dvc != NO_VC {
            self.vc[dvc as usize + ovl].feeder = ivc as u32;
        }
        self.vc[ivc].ovl = ovl as u8;
        if self.fab.source.is_some() {
            let pkt = (self.vc[ivc].front & PKT) as usize;
            self.pk.hop[pkt] += 1;
        }
    }

    /// Whether input VC `ivc` may send into input VC `dvc` downstream now, credits
    /// taking `delay` cycles to come back; if not, schedules it for the next returning
    /// credit or puts it to sleep.
    #[inline(always)]
    fn has_credit(&mut self, ivc: usize, dvc: usize, now: Cycle, delay: Cycle) -> bool {
        if self.credit_after(dvc, now, delay) {
            return true;
        }
        let d = &self.vc[dvc];
        let flying = d.in_flight(now, delay);
        if flying != 0 {
            // The oldest credit in flight arrives first.
            let oldest = 63 - flying.leading_zeros();
            let at = (d.pop_at - oldest + delay).max(now + 1);
            self.schedule(ivc, at);
        } else {
            // Asleep until the downstream VC frees a slot (`ivc` is its feeder).
            debug_assert_eq!(d.feeder, ivc as u32);
            self.vc[dvc].feeder |= STARVED;
        }
        false
    }

    #[inline]
    fn make_eligible(&mut self, r: usize, g: usize, lane: usize) {
        let pg = &mut self.port[g];
        pg.elig |= 1 << lane;
        self.rports[r] |= 1 << pg.local;
        if !self.listed[r] {
            self.listed[r] = true;
            self.arb_list.push(r as u32);
        }
    }

    /// BookSim2's `GetUsedCredit`: the credits of output port `gout` in use at `now`,
    /// over all its lanes (flits sent downstream and not yet credited back).
    fn used_credits(&self, gout: usize, now: Cycle) -> u32 {
        let dvc = self.port[gout].down_vc;
        if dvc == NO_VC {
            return 0;
        }
        let (sent_lag, credit_lag) = self.k.read_lag;
        let trip = self.credit_over(gout) + credit_lag;
        let first = dvc as usize;
        (first..first + self.k.lanes)
            .map(|ivc| {
                let v = &self.vc[ivc];
                let used = v.len as u32 + v.in_flight(now, trip).count_ones();
                used - self.sent_since(ivc, gout, (now + 1).saturating_sub(sent_lag))
            })
            .sum()
    }

    /// BookSim2's lookahead routing under `adaptive_xy_yx` with `routing_delay = 0`: its
    /// terminal routes the first router as it injects the head, so packet `pkt`'s order
    /// is chosen now, as its head leaves for input port `g`, from that router's
    /// credits in use as the cycle starts ([`Params::read_lag`]); the drawn bit if as
    /// many both ways, none at its destination's router.
    #[cold]
    pub(super) fn order_by_lookahead(&mut self, g: usize, pkt: usize, now: Cycle) {
        let fab = self.fab;
        let r = fab.port_router[g];
        if self.k.ugal {
            return self.ugal_choice(r, pkt, now);
        }
        if fab.node_router(self.pk.dst[pkt]) != r {
            self.adaptive_choice(r, pkt, now);
        }
    }

    /// `adaptive_xy_yx`'s choice for packet `pkt` at its first router `r`: the order
    /// whose output has fewer credits in use; the drawn bit if as many.
    fn adaptive_choice(&mut self, r: u32, pkt: usize, now: Cycle) {
        let fab = self.fab;
        let d = self.pk.dst[pkt];
        let base = fab.port_base[r as usize] as usize;
        let xy = self.used_credits(base + fab.next_port(r, d, 0) as usize, now);
        let yx = self.used_credits(base + fab.next_port(r, d, ROUTE_YX) as usize, now);
        if xy != yx {
            let t = self.pk.tie[pkt] & !ROUTE_YX;
            self.pk.tie[pkt] = t | if xy > yx { ROUTE_YX } else { 0 };
        }
    }

    /// BookSim2's `ugal_flatfly_onchip` at packet `pkt`'s first router `r`: minimal
    /// (phase two from here, [`VIA_DONE`]) when its destination is on `r`, when the
    /// drawn intermediate router is `r`, or when the minimal output's credits in use
    /// times the minimal hops are at most those of the output towards the intermediate
    /// router times the hops through it, plus 2; else through the intermediate router.
    /// The credits are read when BookSim2 reads them ([`Params::read_lag`]).
    fn ugal_choice(&mut self, r: u32, pkt: usize, now: Cycle) {
        let fab = self.fab;
        let d = self.pk.dst[pkt];
        let to = fab.node_router(d);
        let via = self.pk.route[pkt] & !VIA_DONE;
        let im = fab.node_router(via);
        let minimal = to == r || im == r || {
            let k = self.k.flatfly.0;
            let hops = |a: u32, b: u32| (a % k != b % k) as u32 + (a / k != b / k) as u32;
            let base = fab.port_base[r as usize] as usize;
            let q_min = self.used_credits(base + fab.next_port(r, d, 0) as usize, now);
            let q_non = self.used_credits(base + fab.next_port(r, via, 0) as usize, now);
            hops(r, to) * q_min <= (hops(r, im) + hops(im, to)) * q_non + 2
        };
        if minimal {
            self.pk.route[pkt] |= VIA_DONE;
        }
    }

    /// Flits of input VC `ivc` (the far end of output `gout`) sent at cycle `since` or
    /// later; `since > now` counts none. Each flit's send cycle is its ready cycle less
    /// the hop's delays; one flit a cycle crosses an output, so only the two newest can
    /// be that recent.
    fn sent_since(&self, ivc: usize, gout: usize, since: Cycle) -> u32 {
        let v = &self.vc[ivc];
        let ring = self.k.ring();
        let mut n = 0;
        for i in (0..v.len).rev().take(2) {
            let (word, ready) = if i == 0 {
                (v.front, v.front_ready)
            } else {
                let s = self.slot[ivc * self.k.cap as usize + wrap(v.head + i - 1, ring) as usize];
                (s.word, s.ready)
            };
            let extra = if word & HEAD != 0 {
                self.k.head_extra
            } else {
                self.k.body_extra
            };
            if ready >= since + self.k.hop + self.link_extra(gout) + extra {
                n += 1;
            }
        }
        n
    }

    /// Cycles output port `gout`'s router link takes beyond the delays' router wire
    /// (links of different lengths, [`super::topology::Fabric::latency`]).
    #[inline(always)]
    fn link_extra(&self, gout: usize) -> Cycle {
        self.port[gout].wire as Cycle
    }

    /// A credit's trip back to the router sending over output port `gout`.
    #[inline(always)]
    fn credit_over(&self, gout: usize) -> Cycle {
        self.k.credit_delay + self.link_extra(gout)
    }

    /// A credit's trip back from input port `gin` to the router feeding it.
    #[inline]
    fn credit_into(&self, gin: usize) -> Cycle {
        if self.k.link_extra {
            if let Link::Router(up) = self.fab.from[gin] {
                return self.credit_over(up as usize);
            }
        }
        self.k.credit_delay
    }

    /// Whether the upstream router sending into input VC `ivc` has a credit at `now`.
    #[inline]
    pub(super) fn credit_available(&self, ivc: usize, now: Cycle) -> bool {
        self.credit_after(ivc, now, self.credit_into(ivc >> self.k.lshift))
    }

    /// Whether the HCA sending into input VC `ivc` has a credit at `now`.
    #[inline]
    pub(super) fn host_credit_available(&self, ivc: usize, now: Cycle) -> bool {
        self.credit_after(ivc, now, self.k.host_credit)
    }

    /// Whether an HCA may start a packet on input VC `ivc` at `now`: a credit in hand,
    /// and under `wait_for_tail_credit` every credit of the last packet back.
    #[inline]
    pub(super) fn host_lane_free(&self, ivc: usize, now: Cycle) -> bool {
        if self.k.wait_tail {
            let v = &self.vc[ivc];
            return v.len == 0 && v.in_flight(now, self.k.host_credit) == 0;
        }
        self.host_credit_available(ivc, now)
    }

    /// Whether a sender whose credits take `delay` cycles to come back from input VC
    /// `ivc` has one at `now`.
    #[inline]
    fn credit_after(&self, ivc: usize, now: Cycle, delay: Cycle) -> bool {
        let v = &self.vc[ivc];
        // At most one pop per cycle: a short window settles it without counting bits.
        if v.len as u32 + v.flight_window(now, delay) < self.k.cap {
            return true;
        }
        v.len as u32 + v.in_flight(now, delay).count_ones() < self.k.cap
    }

    /// Writes flit `word` into input VC `ivc`, ready at `ready`, spending a credit.
    #[inline(always)]
    pub(super) fn push_flit(&mut self, ivc: usize, word: u32, ready: Cycle) {
        if !self.owns(ivc) {
            let ob = self
                .outbox
                .as_deref_mut()
                .expect("a partition has an outbox");
            ob.push.push((ivc as u32, word, ready));
            return;
        }
        let v = &mut self.vc[ivc];
        let first = v.len == 0;
        if first {
            v.front_ready = ready;
            v.front = word;
        } else {
            let at = wrap(v.head + v.len - 1, self.k.ring());
            debug_assert!(
                v.len <= self.k.ring(),
                "a VC holds more flits than its buffer"
            );
            self.slot[ivc * self.k.cap as usize + at as usize] = Slot { word, ready };
        }
        v.len += 1;
        if first {
            self.port[ivc >> self.k.lshift].nonempty |= 1 << (ivc & (self.k.lanes - 1));
            self.schedule(ivc, ready);
        }
    }

    /// The routers of `cur` under BookSim2's allocators without a governor. Apart from
    /// `step_routers`: with a third loop there (the priorities'), the compiled code of
    /// the reference router's loop took 0.7 % more instructions (callgrind, `bench
    /// network --preset reference`).
    #[inline(never)]
    fn sweep_booksim2(&mut self, cur: Vec<u32>, now: Cycle) {
        if self.k.general {
            self.sweep(cur, now, Self::step_router_general);
        } else if self.k.prio != Prio::None {
            self.sweep(cur, now, Self::step_router_prio);
        } else {
            self.sweep(cur, now, Self::step_router_separable);
        }
    }

    /// One cycle of every router with an eligible lane.
    pub(super) fn step_routers(&mut self, now: Cycle) {
        let mut cur = std::mem::take(self.arb_list);
        *self.arb_list = std::mem::take(self.spare_list);
        if self.k.separable && self.gov.is_none() {
            // BookSim2's allocator without a governor (the common case): the loop
            // without the per-router tests.
            self.sweep_booksim2(cur, now);
            return;
        }
        if self.gov.is_none()
            && !self.k.separable
            && !self.k.full
            && self.k.in_rr
            && self.k.out_rr
            && !self.k.out_buf
        {
            // Round-robin VL arbiters without a governor (the reference router): the
            // same, on `step_router_rr`.
            self.sweep(cur, now, Self::step_router_rr);
            return;
        }
        for &r in &cur {
            let r = r as usize;
            if let Some(g) = self.gov.as_deref_mut() {
                // A router at its cap moves nothing this cycle and stays listed.
                if !g.may(r, g.transit + g.from_hca) {
                    g.held[r] += 1;
                    self.arb_list.push(r as u32);
                    continue;
                }
            }
            if self.k.general {
                self.step_router_general(r, now);
            } else if self.k.separable && self.k.prio != Prio::None {
                self.step_router_prio(r, now);
            } else if self.k.separable {
                self.step_router_separable(r, now);
            } else {
                self.step_router(r, now);
            }
            if self.rports[r] != 0 {
                self.arb_list.push(r as u32);
            } else {
                self.listed[r] = false;
            }
        }
        cur.clear();
        *self.spare_list = cur;
    }

    /// Steps every router of `cur` with `step` and keeps listed those with an eligible
    /// lane left: the loop of [`Hot::step_routers`] without a governor, one copy per
    /// step function (monomorphised, so the step is inlined as before).
    #[inline(always)]
    fn sweep(&mut self, mut cur: Vec<u32>, now: Cycle, step: impl Fn(&mut Self, usize, Cycle)) {
        for i in 0..cur.len() {
            if self.k.look_ahead {
                self.look_ahead(&cur, i);
            }
            let r = cur[i] as usize;
            step(self, r, now);
            if self.rports[r] != 0 {
                self.arb_list.push(r as u32);
            } else {
                self.listed[r] = false;
            }
        }
        cur.clear();
        *self.spare_list = cur;
    }

    /// Prefetch hints for the routers that follow `cur[i]` in the sweep, one stage per
    /// router so that each stage reads only what the one before asked for: the port
    /// mask and port records of `cur[i + 2]`, the input VC records of the eligible
    /// lanes of `cur[i + 1]` (see [`super::prefetch`]). Hints only: what the routers
    /// stepped in between change makes a hint useless, never wrong.
    #[inline(always)]
    fn look_ahead(&self, cur: &[u32], i: usize) {
        use super::prefetch::ahead;
        if let Some(&r) = cur.get(i + 2) {
            let r = r as usize;
            ahead(self.rports, r);
            let base = self.fab.port_base[r] as usize;
            for g in base..base + self.fab.ports[r] as usize {
                ahead(self.port, g);
            }
        }
        if let Some(&r) = cur.get(i + 1) {
            let base = self.fab.port_base[r as usize] as usize;
            let mut pm = self.rports[r as usize];
            while pm != 0 {
                let g = base + pm.trailing_zeros() as usize;
                pm &= pm - 1;
                let elig = self.port[g].elig;
                ahead(
                    self.vc,
                    (g << self.k.lshift) + elig.trailing_zeros() as usize,
                );
            }
        }
    }

    /// [`Hot::step_router`] for plain round-robin input and output arbiters, one
    /// crossbar input per port and no governor: the same choices, on local slices and
    /// without the per-port tests of the configuration.
    #[inline(always)]
    fn step_router_rr(&mut self, r: usize, now: Cycle) {
        let (lanes, lshift) = (self.k.lanes, self.k.lshift);
        let base = self.fab.port_base[r] as usize;
        let mut want: u64 = 0;
        let mut pm = self.rports[r];
        let (port, vc) = (&*self.port, &*self.vc);
        let reqs = &mut *self.reqs;
        while pm != 0 {
            let p = pm.trailing_zeros() as usize;
            pm &= pm - 1;
            let g = base + p;
            let pg = &port[g];
            let elig = pg.elig;
            let lane = if elig & CONTROL_BIT != 0 {
                CONTROL_VL
            } else {
                RoundRobin::first_from(elig, pg.in_rr as u32).unwrap_or(0)
            };
            let v = &vc[(g << lshift) + lane];
            let (op, ovl) = (v.out as usize, v.ovl as usize);
            reqs.lanes[op & 63] |= 1 << ovl;
            reqs.lane_src[(op * lanes + ovl) & LANE_SRC] = (p * lanes + lane) as u16;
            want |= 1 << op;
        }
        while want != 0 {
            let op = want.trailing_zeros() as usize;
            want &= want - 1;
            let gout = base + op;
            let m = std::mem::take(&mut self.reqs.lanes[op & 63]);
            let ovl = if m & CONTROL_BIT != 0 {
                CONTROL_VL
            } else {
                let l = RoundRobin::first_from(m, self.port[gout].out_rr as u32).unwrap_or(0);
                self.port[gout].out_rr = (l + 1) as u8;
                l
            };
            let s = self.reqs.lane_src[(op * lanes + ovl) & LANE_SRC] as usize;
            let (p, lane) = (s >> lshift, s & (lanes - 1));
            self.port[base + p].in_rr = (lane + 1) as u8;
            self.forward(r, base + p, lane, gout, ovl, now);
        }
    }

    /// One cycle of router `r`: each input port's VL arbiter picks one eligible lane
    /// (stage 4 input scheduler), each output port's VL arbiter picks one of the lanes
    /// requesting it (stage 5 link multiplexer) — with one request per output VL
    /// (wormhole) this is exactly VL arbitration of the link — and the winners move.
    #[inline]
    fn step_router(&mut self, r: usize, now: Cycle) {
        let lanes = self.k.lanes;
        let base = self.fab.port_base[r] as usize;
        let mut want: u64 = 0;
        let mut pm = self.rports[r];
        while pm != 0 {
            let p = pm.trailing_zeros() as usize;
            pm &= pm - 1;
            let g = base + p;
            let pg = &self.port[g];
            let elig = pg.elig;
            if self.k.full {
                // A crossbar input per lane: every eligible lane requests its output.
                let mut m = elig;
                while m != 0 {
                    let lane = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let v = &self.vc[g * lanes + lane];
                    let (op, ovl) = (v.out as usize, v.ovl as usize);
                    self.reqs.lanes[op & 63] |= 1 << ovl;
                    self.reqs.lane_src[(op * lanes + ovl) & LANE_SRC] = (p * lanes + lane) as u16;
                    want |= 1 << op;
                }
                continue;
            }
            let lane = if elig & CONTROL_BIT != 0 {
                CONTROL_VL
            } else if self.k.in_rr {
                RoundRobin::first_from(elig, pg.in_rr as u32).unwrap_or(0)
            } else {
                let vcs = &*self.vc;
                let age = |l: usize| vcs[g * lanes + l].front_ready as u64;
                let Some(lane) = self.in_arb[g].pick(elig, age) else {
                    continue;
                };
                lane
            };
            let v = &self.vc[g * lanes + lane];
            let (op, ovl) = (v.out as usize, v.ovl as usize);
            self.reqs.lanes[op & 63] |= 1 << ovl;
            self.reqs.lane_src[(op * lanes + ovl) & LANE_SRC] = (p * lanes + lane) as u16;
            want |= 1 << op;
        }
        while want != 0 {
            let op = want.trailing_zeros() as usize;
            want &= want - 1;
            let gout = base + op;
            let reqs = std::mem::take(&mut self.reqs.lanes[op & 63]);
            if self.k.out_buf {
                self.cross_to_buffers(r, base, op, reqs, now);
                continue;
            }
            if let Some(g) = self.gov.as_deref_mut() {
                // The cap is checked for the dearest flit, before an arbiter moves.
                if !g.may(r, g.transit + g.from_hca) {
                    g.held[r] += 1;
                    continue;
                }
            }
            let ovl = if reqs & CONTROL_BIT != 0 {
                CONTROL_VL
            } else if self.k.out_rr {
                let l = RoundRobin::first_from(reqs, self.port[gout].out_rr as u32).unwrap_or(0);
                self.port[gout].out_rr = (l + 1) as u8;
                l
            } else {
                let (vcs, src) = (&*self.vc, &self.reqs.lane_src);
                let age = |l: usize| {
                    vcs[base * lanes + src[(op * lanes + l) & LANE_SRC] as usize].front_ready as u64
                };
                let Some(ovl) = self.out_arb[gout].pick(reqs, age) else {
                    continue;
                };
                self.out_arb[gout].sent(ovl);
                ovl
            };
            let s = self.reqs.lane_src[(op * lanes + ovl) & LANE_SRC] as usize;
            let (p, lane) = (s >> self.k.lshift, s & (lanes - 1));
            self.input_sent(base + p, lane);
            self.forward(r, base + p, lane, gout, ovl, now);
        }
    }

    /// With output buffers: every lane of router `r` requesting output `op` (lanes
    /// `reqs`) crosses into its output lane's buffer, the crossbar's outputs being per
    /// output lane (an assumption: the paper names no arbiter at the crossbar's outputs,
    /// only the input ports' scheduler and the link's VL arbiter; docs/yum.md "Output
    /// VL buffers"). Room in the buffer was each lane's credit.
    #[cold]
    fn cross_to_buffers(&mut self, r: usize, base: usize, op: usize, reqs: u32, now: Cycle) {
        let lanes = self.k.lanes;
        let mut m = reqs;
        while m != 0 {
            let ovl = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(g) = self.gov.as_deref_mut() {
                if !g.may(r, g.transit + g.from_hca) {
                    g.held[r] += 1;
                    continue;
                }
            }
            let s = self.reqs.lane_src[(op * lanes + ovl) & LANE_SRC] as usize;
            let (p, lane) = (s >> self.k.lshift, s & (lanes - 1));
            self.input_sent(base + p, lane);
            self.forward_buffered(r, base + p, lane, base + op, ovl, now);
        }
    }

    /// Input port `g`'s scheduler (stage 4) sent `lane` through the crossbar: its
    /// pointer moves (nothing to move with a crossbar input per lane).
    #[inline]
    fn input_sent(&mut self, g: usize, lane: usize) {
        if self.k.full {
        } else if self.k.in_rr {
            self.port[g].in_rr = (lane + 1) as u8;
        } else {
            self.in_arb[g].sent(lane);
        }
    }

    /// Moves the front flit of input VC (`gin`, `lane`) through the crossbar to output
    /// port `gout`, lane `ovl`, and decides when the VC may go next. Never inlined: its
    /// body is [`Hot::cross`], which would then be inlined into every allocator loop
    /// (measured: the BookSim2-equivalent bench 15 % slower with it inlined into the
    /// separable allocator, although it executed 2 % fewer instructions).
    #[inline(never)]
    pub(super) fn forward(
        &mut self,
        r: usize,
        gin: usize,
        lane: usize,
        gout: usize,
        ovl: usize,
        now: Cycle,
    ) {
        self.cross::<false>(r, gin, lane, gout, ovl, now)
    }

    /// [`Hot::forward`] into the output lane's buffer (output VL buffers).
    #[inline(never)]
    fn forward_buffered(
        &mut self,
        r: usize,
        gin: usize,
        lane: usize,
        gout: usize,
        ovl: usize,
        now: Cycle,
    ) {
        self.cross::<true>(r, gin, lane, gout, ovl, now)
    }

    /// [`Hot::forward`], onto the link (`BUF` false) or into an output buffer: one body,
    /// each copy compiled without the other's branches.
    #[inline(always)]
    fn cross<const BUF: bool>(
        &mut self,
        r: usize,
        gin: usize,
        lane: usize,
        gout: usize,
        ovl: usize,
        now: Cycle,
    ) {
        let lanes = self.k.lanes;
        let ivc = gin * lanes + lane;
        let bit = 1u32 << lane;
        // Local slices up to the first call: their pointers and lengths stay in
        // registers across the stores.
        let (vcs, ports, slots) = (&mut *self.vc, &mut *self.port, &*self.slot);
        let v = &mut vcs[ivc];
        let word = v.front;
        v.len -= 1;
        let more = v.len > 0;
        if more {
            let next = slots[ivc * self.k.cap as usize + v.head as usize];
            v.front = next.word;
            v.front_ready = next.ready;
            v.head = wrap(v.head + 1, self.k.ring());
        }
        let next_ready = v.front_ready.max(now + 1);
        // The freed slot's credit travels back to the upstream sender.
        v.record_pop(now);
        let feeder = v.feeder;
        v.feeder = feeder & !STARVED;
        // Masks rather than branches: whether the VC empties and whether the port has
        // another eligible lane follow the traffic, and a mispredicted branch costs
        // more than the two operations.
        ports[gin].nonempty &= !(bit & (more as u32).wrapping_sub(1));
        let po = &mut ports[gout];
        let dvc = po.down_vc;
        // (With output buffers the link counts its flits at `step_links`.)
        po.sent += !BUF as u32;
        self.tally.flit_hops += 1;
        if feeder & STARVED != 0 {
            // Wake the upstream VC asleep waiting for this credit.
            self.schedule((feeder & !STARVED) as usize, now + self.credit_into(gin));
        }
        if let Some(g) = self.gov.as_deref_mut() {
            g.spent[r] += g.cost(gin);
        }
        let sink = if dvc != NO_VC { NO_VC } else { self.sink[gout] };
        if BUF {
            let b = gout * lanes + ovl;
            self.ob.push(
                gout,
                b,
                word,
                now + self.k.d.switch_alloc + self.k.d.crossbar,
            );
        } else {
            self.emit(gout, ovl, word, now, 0);
        }
        // Whether the lane stays eligible for next cycle (its port's masks are then
        // left as they are).
        let mut again = false;
        if word & TAIL != 0 {
            if self.k.route_fifo {
                self.route_done[ivc] = NEVER;
            }
            if self.k.wait_tail {
                self.tail_left(ivc, gin, gout, ovl, now);
            } else {
                self.release_lane(ivc, gout, ovl, now);
            }
            if more {
                // The next packet's header routes from now (BookSim2's routing stage).
                let ready = next_ready.max(now + 1 + self.k.front_route);
                self.vc[ivc].front_ready = ready;
                self.schedule(ivc, ready);
            }
        } else if more {
            // The next flit of the same packet: eligible again next cycle if it is
            // ready by then and a credit is in hand then (this VC alone spends the
            // credits of the lane it holds, so collecting next cycle's now is safe).
            // (On threads, another partition's VC may be popped meanwhile: its credit
            // is then left to the evaluation next cycle, which reaches the same state.)
            let credit = if BUF {
                self.ob.room(gout * lanes + ovl)
            } else if dvc != NO_VC {
                self.owns(dvc as usize)
                    && self.credit_after(dvc as usize + ovl, now + 1, self.credit_over(gout))
            } else {
                sink == NO_VC
                    || self.credit_after(sink as usize + ovl, now + 1, self.k.eject_credit)
            };
            if next_ready == now + 1 && credit {
                again = true;
            } else if BUF && next_ready == now + 1 {
                // Ready but the output buffer full: asleep until the link frees a slot.
                self.ob.waiter[gout * lanes + ovl] = ivc as u32;
            } else if next_ready == now + 1 && dvc != NO_VC && self.owns(dvc as usize) {
                // Ready but no credit next cycle: wait now for the credit, as the
                // evaluation next cycle would. (A pop of the downstream VC later in this
                // cycle finds this VC asleep and wakes it when its credit arrives, the
                // cycle that evaluation would have found it.)
                self.has_credit(ivc, dvc as usize + ovl, now + 1, self.credit_over(gout));
            } else {
                self.schedule(ivc, next_ready);
            }
        }
        if !again {
            let pg = &mut self.port[gin];
            pg.elig &= !bit;
            self.rports[r] &= !(((pg.elig == 0) as u64) << pg.local);
        }
    }

    /// The tail in input VC `ivc` left through output lane `ovl` of `gout` at `now`:
    /// the lane is free, and the headers asleep on that output try again next cycle.
    /// BookSim2's `wait_for_tail_credit`: the tail in input VC `ivc` of port `gin` left
    /// through output lane `ovl` of `gout` at `now`. The input VC is done with the lane,
    /// which stays held until its tail's credit is back: the headers asleep on `gout`
    /// are woken when the tail leaves the buffer downstream (an HCA takes it on
    /// arrival, so then), and the lane is freed by the first look after its credit.
    #[cold]
    #[inline(never)]
    fn tail_left(&mut self, ivc: usize, gin: usize, gout: usize, ovl: usize, now: Cycle) {
        self.vc[ivc].ovl = NO_LANE;
        self.vc[ivc].out = NO_PORT;
        self.tail_out[gout] |= 1 << ovl;
        if self.port[gout].down_vc == NO_VC {
            let sink = self.sink[gout];
            let at = if sink == NO_VC {
                now + 1
            } else {
                self.vc[sink as usize + ovl].pop_at + self.k.eject_credit
            };
            self.wake_waiters(gout, at);
        }
        // This VC's own upstream lane: its tail credit starts back now.
        if let Link::Router(up) = self.fab.from[gin] {
            let up = up as usize;
            let lanes = self.k.lanes;
            if self.tail_out[up] & (1 << (ivc & (lanes - 1))) != 0 {
                self.wake_waiters(up, now + self.credit_over(up));
            }
        }
    }

    /// BookSim2's routing stage of `route` >= 2 cycles: a router routes its headers in
    /// batches, one batch at a time (`IQRouter::_RouteEvaluate` starts the headers
    /// waiting only when none is being routed). A header of input VC `ivc` that comes
    /// to be routed at `now` joins the batch starting now or later, or starts one after
    /// the batch in progress; it asks for a lane the cycle after its batch ends.
    #[cold]
    #[inline(never)]
    fn route_batched(&mut self, r: usize, ivc: usize, now: Cycle) {
        let done = self.route_done[ivc];
        if done != NEVER {
            self.schedule(ivc, done);
            return;
        }
        let rd = self.k.d.route;
        let (first, last) = self.route_batch[r];
        let start = if now > last {
            self.route_batch[r] = (now, now + rd - 1);
            now
        } else if now <= first {
            first
        } else {
            self.route_batch[r] = (last + 1, last + rd);
            last + 1
        };
        self.route_done[ivc] = start + rd;
        self.schedule(ivc, start + rd);
    }

    /// Frees the lanes of output `gout` in `mask` whose tail credit is back at `now`;
    /// returns the cycle the next of them will be, if its tail has left downstream.
    #[cold]
    #[inline(never)]
    fn tail_credits_back(&mut self, gout: usize, mask: u32, now: Cycle) -> Option<Cycle> {
        let dvc = self.port[gout].down_vc;
        let (first, delay) = if dvc != NO_VC {
            (dvc, self.credit_over(gout))
        } else {
            (self.sink[gout], self.k.eject_credit)
        };
        let mut next: Option<Cycle> = None;
        let mut m = self.tail_out[gout] & mask;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            let at = if first == NO_VC {
                now
            } else {
                let v = &self.vc[first as usize + l];
                if v.len != 0 {
                    continue;
                }
                if v.in_flight(now, delay) == 0 {
                    now
                } else {
                    v.pop_at + delay
                }
            };
            if at <= now {
                self.tail_out[gout] &= !(1 << l);
                self.port[gout].busy &= !(1 << l);
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        next
    }

    /// Wakes the headers asleep on output `gout` at `at`.
    fn wake_waiters(&mut self, gout: usize, at: Cycle) {
        let lanes = self.k.lanes;
        let mut w = std::mem::replace(&mut self.wait_next[self.vc.len() + gout], NO_VC);
        while w != NO_VC {
            let wv = w as usize;
            w = std::mem::replace(&mut self.wait_next[wv], NO_VC);
            self.port[wv >> self.k.lshift].vwait &= !(1 << (wv & (lanes - 1)));
            self.schedule(wv, at);
        }
    }

    /// (Once per packet and hop: kept out of [`Hot::forward`]'s straight line.)
    #[cold]
    #[inline(never)]
    fn release_lane(&mut self, ivc: usize, gout: usize, ovl: usize, now: Cycle) {
        self.vc[ivc].ovl = NO_LANE;
        self.vc[ivc].out = NO_PORT;
        self.port[gout].busy &= !(1 << ovl);
        self.wake_waiters(gout, now + 1);
    }

    /// Sends flit `word` over output port `gout` into lane `ovl` at the far end: the
    /// crossbar granted it at `now - crossed` (`crossed`: the cycles it then spent in
    /// the crossbar's stages and an output buffer, already counted).
    #[inline(always)]
    fn emit(&mut self, gout: usize, ovl: usize, word: u32, now: Cycle, crossed: Cycle) {
        let dvc = self.port[gout].down_vc;
        if dvc != NO_VC {
            let ready = now + self.k.hop + self.link_extra(gout) - crossed
                + if word & HEAD != 0 {
                    self.k.head_extra
                } else {
                    self.k.body_extra
                };
            self.push_flit(dvc as usize + ovl, word, ready);
        } else {
            self.tally.in_network -= 1;
            let at = now + self.k.hop_host - crossed;
            let sink = self.sink[gout];
            if sink != NO_VC {
                // The HCA takes the flit on arrival; its credit starts back then.
                self.vc[sink as usize + ovl].record_pop(at);
            }
            match self.outbox.as_deref_mut() {
                Some(ob) => ob.deliver.push((word, at as u64)),
                None => self.deliver(word, at as u64),
            }
        }
    }

    /// Stage 5 with output buffers: on every output port with a buffered flit, the
    /// link's VL arbiter (`router.output_arbitration`) chooses one of the lanes whose
    /// front flit is ready and has a credit downstream, and sends it. A freed slot
    /// wakes the input VC waiting for it, which may cross the crossbar next cycle.
    pub(super) fn step_links(&mut self, now: Cycle) {
        if self.ob.ports.is_empty() {
            return;
        }
        let mut list = std::mem::take(self.ob.ports);
        let mut kept = 0;
        for i in 0..list.len() {
            let g = list[i] as usize;
            self.link_send(g, now);
            if self.ob.mask[g] != 0 {
                list[kept] = g as u32;
                kept += 1;
            } else {
                self.ob.listed[g] = false;
            }
        }
        list.truncate(kept);
        // (Only the crossbar fills buffers: nothing was listed meanwhile.)
        debug_assert!(self.ob.ports.is_empty());
        *self.ob.ports = list;
    }

    /// One link cycle of output port `gout` (see [`Hot::step_links`]).
    fn link_send(&mut self, gout: usize, now: Cycle) {
        let lanes = self.k.lanes;
        let (dvc, sink) = (self.port[gout].down_vc, self.sink[gout]);
        let mut m = self.ob.mask[gout];
        let mut reqs = 0u32;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.ob.front(gout * lanes + l).ready > now {
                continue;
            }
            let credit = if dvc != NO_VC {
                self.credit_available(dvc as usize + l, now)
            } else {
                sink == NO_VC || self.credit_after(sink as usize + l, now, self.k.eject_credit)
            };
            if credit {
                reqs |= 1 << l;
            }
        }
        if reqs == 0 {
            return;
        }
        let ovl = if reqs & CONTROL_BIT != 0 {
            CONTROL_VL
        } else if self.k.out_rr {
            let l = RoundRobin::first_from(reqs, self.ob.link_rr[gout] as u32).unwrap_or(0);
            self.ob.link_rr[gout] = (l + 1) as u8;
            l
        } else {
            let ob = &self.ob;
            let age = |l: usize| ob.front(gout * lanes + l).ready as u64;
            let Some(ovl) = self.out_arb[gout].pick(reqs, age) else {
                return;
            };
            self.out_arb[gout].sent(ovl);
            ovl
        };
        let b = gout * lanes + ovl;
        let word = self.ob.pop(gout, b).word;
        self.port[gout].sent += 1;
        let w = std::mem::replace(&mut self.ob.waiter[b], NO_VC);
        if w != NO_VC {
            self.schedule(w as usize, now + 1);
        }
        // The link's part of the hop starts now: the crossbar's stages are behind it
        // (and any wait in the buffer on top of them).
        let crossed = self.k.d.switch_alloc + self.k.d.crossbar;
        self.emit(gout, ovl, word, now, crossed);
    }

    /// A flit reached its HCA at `at`.
    pub(super) fn deliver(&mut self, word: u32, at: u64) {
        let pkt = (word & PKT) as usize;
        let cls = self.pk.class[pkt] as usize;
        let stream = self.pk.stream[pkt];
        let created = self.pk.created[pkt];
        self.stats.flight_flits[cls] -= 1;
        self.stats.flight_created[cls] -= created;
        if at < self.window.1 {
            self.stats.recent_acc[cls] += 1;
            if at >= self.window.0 {
                self.stats.accepted[cls] += 1;
                if stream != u32::MAX {
                    self.stats.flow_acc[stream as usize] += 1;
                }
            }
        }
        if word & TAIL != 0 {
            let measured = self.pk.measured[pkt];
            if measured || at < self.window.0 {
                self.stats.recent_lat[cls] += at - created;
                self.stats.recent_n[cls] += 1;
                if !measured {
                    let lat = (at - created).min(u32::MAX as u64) as u32;
                    self.stats.recent_samples[cls].push(lat);
                }
            }
            if measured {
                let lat = (at - created).min(u32::MAX as u64) as u32;
                self.stats.lat[cls].push(lat);
                self.stats.net_lat_sum[cls] += at - self.pk.injected[pkt];
                if stream != u32::MAX {
                    self.stats.flow_lat[stream as usize].push(lat);
                }
                self.tally.outstanding -= 1;
            }
            if let Some(h) = self.hooks.as_deref_mut() {
                h.delivered(&self.pk.event(pkt as u32, at));
            }
            self.pk.release(pkt as u32);
        }
    }
}

/// The input VC (of `n`) of router `r` whose header goes first at cycle `now` among
/// packets as old arriving together: a hash of both, the same on every thread.
#[inline]
fn head_start(r: usize, now: Cycle, n: usize) -> usize {
    let h = (u64::from(now) << 32 | r as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((h >> 32) % n as u64) as usize
}

/// `i` (below twice `ring`) as a position in a ring of `ring` slots.
#[inline(always)]
fn wrap(i: u16, ring: u16) -> u16 {
    if i >= ring {
        i - ring
    } else {
        i
    }
}

/// BookSim2's `valiant_torus`: the lanes of dateline half `half` (of a class with lanes
/// `class`) a packet takes in phase one (`phase2` false) or two: the half less its last
/// ⌊⌊n/2⌋/2⌋ lanes, or less its first (n the class's lanes; the two overlap for some
/// counts, as BookSim2's ranges do).
pub(super) fn phase_lanes(class: u32, half: u32, phase2: bool) -> u32 {
    let give = (class.count_ones() / 2 / 2) as usize;
    if phase2 {
        drop_lowest(half, give)
    } else {
        drop_highest(half, give)
    }
}

/// `m` less its `k` lowest set bits.
fn drop_lowest(mut m: u32, k: usize) -> u32 {
    for _ in 0..k {
        m &= m.wrapping_sub(1);
    }
    m
}

/// `m` less its `k` highest set bits.
fn drop_highest(mut m: u32, k: usize) -> u32 {
    for _ in 0..k {
        if m != 0 {
            m &= !(1 << (31 - m.leading_zeros()));
        }
    }
    m
}
