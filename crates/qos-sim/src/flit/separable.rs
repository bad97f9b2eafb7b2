//! BookSim2's separable input-first allocators, for
//! `router.allocator = "separable_input_first"`: the VC allocator that decides once
//! every header of the cycle has asked, and the switch allocator that replaces the
//! input and output VL arbiters. Both have one iteration and round-robin arbiters
//! whose pointers move only on a grant, as BookSim2's `SeparableInputFirstAllocator`
//! with `RoundRobinArbiter`s; the requests are BookSim2's `iq_router`'s (a VC asks for
//! every free output VC of its route; an input port asks each output port for the
//! lane after its last winner). They work on the router view [`Hot`].
//!
//! `router.allocator = "islip"` (BookSim2's default for both allocators) takes the
//! same requests to BookSim2's `iSLIP_Sparse` with one iteration: every requested
//! output grants one of the inputs asking for it, round-robin from its pointer; every
//! input granted accepts one of the outputs that granted it, round-robin from its own
//! pointer; an accepted grant moves both pointers past each other, and a grant not
//! accepted leaves the output unmatched this cycle.

use qos_core::vlarb::{first_set_from, RoundRobin};

use super::packet::{NO_LANE, PKT, TAIL};
use super::records::NEVER;
use super::router::{Cycle, Hot, Prio, NO_VC};

impl Hot<'_> {
    /// BookSim2's separable input-first VC allocator over the requests of cycle `now`
    /// (one iteration, round-robin arbiters). Each requesting input VC's arbiter picks
    /// one of the free lanes it may take, the first from its pointer over the router's
    /// output lanes; each output lane's arbiter picks one of the input VCs that chose
    /// it, the first from its pointer over the router's input VCs. Winners may request
    /// the crossbar `vl_alloc` cycles later; losers try again next cycle. Only a grant
    /// moves pointers, past the winner.
    pub(super) fn allocate_vcs(&mut self, now: Cycle) {
        if self.va_list.is_empty() {
            return;
        }
        if self.k.islip {
            self.allocate_vcs_islip(now);
            return;
        }
        let lanes = self.k.lanes;
        for i in 0..self.va_list.len() {
            let ivc = self.va_list[i] as usize;
            let g = ivc >> self.k.lshift;
            let pg = self.port[g];
            let base = g - pg.local as usize;
            // Fields, not a copy: on threads, the upstream partition may write the
            // record's `feeder` meanwhile.
            let (v_out, ptr) = (self.vc[ivc].out, self.vc[ivc].va_rr as usize);
            let block = v_out as usize * lanes;
            let start = if (block..block + lanes).contains(&ptr) {
                ptr - block
            } else {
                0
            };
            let ovl = RoundRobin::first_from(self.va_allowed[i], start as u32).unwrap_or(0);
            let ovc = (base + v_out as usize) * lanes + ovl;
            let size = self.fab.ports[self.fab.port_router[g] as usize] as usize * lanes;
            self.va_ask(ovc, ivc, base * lanes, size);
        }
        for i in 0..self.va_touched.len() {
            let ovc = self.va_touched[i] as usize;
            let ivc = std::mem::replace(&mut self.va_claim[ovc], NO_VC) as usize;
            let (gout, ovl) = (ovc >> self.k.lshift, ovc & (lanes - 1));
            let g = ivc >> self.k.lshift;
            let pg = self.port[g];
            let base = g - pg.local as usize;
            let size = self.fab.ports[self.fab.port_router[g] as usize] as usize * lanes;
            self.grant_lane(ivc, gout, ovl);
            self.vc[ivc].va_rr = (((gout - base) * lanes + ovl + 1) % size) as u16;
            self.va_out_rr[ovc] = ((ivc - base * lanes + 1) % size) as u16;
            let sa = now + self.k.vl_alloc;
            self.vc[ivc].sa_ready = sa;
            self.schedule(ivc, sa);
        }
        self.va_touched.clear();
        self.va_losers_retry(now);
    }

    /// Headers that got no lane this cycle ask again next cycle; the requests end.
    fn va_losers_retry(&mut self, now: Cycle) {
        for i in 0..self.va_list.len() {
            let ivc = self.va_list[i] as usize;
            if self.vc[ivc].ovl == NO_LANE {
                self.schedule(ivc, now + 1);
            }
        }
        self.va_list.clear();
        self.va_allowed.clear();
    }

    /// Input VC `ivc` asks for output lane `ovc`: the output's arbiter keeps the asking
    /// VC first from its pointer over the router's `size` input VCs (from `first`) —
    /// under packet priorities, the one whose packet ranks highest, and of those the
    /// first from the pointer (BookSim2's `RoundRobinArbiter` with the VC's priority as
    /// `out_pri`).
    #[inline]
    fn va_ask(&mut self, ovc: usize, ivc: usize, first: usize, size: usize) {
        let label = |x: usize, ptr: u16| (x + size - ptr as usize % size) % size;
        let claim = self.va_claim[ovc];
        if claim == NO_VC {
            self.va_touched.push(ovc as u32);
            self.va_claim[ovc] = ivc as u32;
        } else {
            let ptr = self.va_out_rr[ovc];
            let closer = label(ivc - first, ptr) < label(claim as usize - first, ptr);
            // BookSim2's iSLIP ignores priorities.
            let wins = if self.k.prio == Prio::None || self.k.islip {
                closer
            } else {
                let (a, b) = (self.front_prio(ivc), self.front_prio(claim as usize));
                a > b || (a == b && closer)
            };
            if wins {
                self.va_claim[ovc] = ivc as u32;
            }
        }
    }

    /// Of the lanes `mask` of the port whose first VC is `v0`, the one whose front
    /// packet has the highest priority, ties the first from lane `start` (below 32).
    #[inline]
    fn first_of_highest(&self, mask: u64, v0: usize, start: u32) -> usize {
        let mut best: Option<(u64, usize)> = None;
        for l in round_robin(mask, start) {
            let pr = self.front_prio(v0 + l);
            if best.is_none_or(|(b, _)| pr > b) {
                best = Some((pr, l));
            }
        }
        best.map_or(0, |(_, l)| l)
    }

    /// The priority of the packet whose flit is at the front of input VC `ivc`
    /// (BookSim2's `VC::GetPriority`: its front flit's).
    #[inline]
    fn front_prio(&self, ivc: usize) -> u64 {
        let pkt = (self.vc[ivc].front & PKT) as usize;
        self.k.prio.of(self.pk.class[pkt], self.pk.created[pkt])
    }

    /// The router of requesting input VC `ivc`: its first port, the output port (local)
    /// the VC routes to, and the router's lane slots (ports × lanes).
    #[inline]
    fn va_router(&self, ivc: usize) -> (usize, usize, usize) {
        let g = ivc >> self.k.lshift;
        let base = g - self.port[g].local as usize;
        let size = self.fab.ports[self.fab.port_router[g] as usize] as usize * self.k.lanes;
        (base, self.vc[ivc].out as usize, size)
    }

    /// BookSim2's iSLIP VC allocator (`iSLIP_Sparse`, `alloc_iters` iterations) over the
    /// requests of cycle `now`: each free output lane asked for grants the unmatched
    /// input VC that asked first from its pointer over the router's input VCs; each
    /// input VC granted accepts the output lane that granted it first from its pointer
    /// over the router's output lanes. The first iteration's matches move both
    /// pointers, past each other.
    fn allocate_vcs_islip(&mut self, now: Cycle) {
        let lanes = self.k.lanes;
        for it in 0..self.k.iters {
            // Grant: per free output lane, the unmatched input VC asking first from its
            // pointer.
            for i in 0..self.va_list.len() {
                let ivc = self.va_list[i] as usize;
                if self.vc[ivc].ovl != NO_LANE {
                    continue;
                }
                let (base, v_out, size) = self.va_router(ivc);
                let mut m = self.va_allowed[i] & !self.port[base + v_out].busy;
                while m != 0 {
                    let ovl = m.trailing_zeros() as usize;
                    m &= m - 1;
                    self.va_ask((base + v_out) * lanes + ovl, ivc, base * lanes, size);
                }
            }
            if self.va_touched.is_empty() {
                break;
            }
            // Accept: per input VC granted, the granting output lane first from its
            // pointer; the first iteration's matches move both pointers.
            for i in 0..self.va_list.len() {
                let ivc = self.va_list[i] as usize;
                if self.vc[ivc].ovl != NO_LANE {
                    continue;
                }
                let (base, v_out, size) = self.va_router(ivc);
                let block = (base + v_out) * lanes;
                let mut granted: u32 = 0;
                let mut m = self.va_allowed[i];
                while m != 0 {
                    let ovl = m.trailing_zeros() as usize;
                    m &= m - 1;
                    if self.va_claim[block + ovl] == ivc as u32 {
                        granted |= 1 << ovl;
                    }
                }
                if granted == 0 {
                    continue;
                }
                let ptr = self.vc[ivc].va_rr as usize;
                let rel = v_out * lanes;
                let start = if (rel..rel + lanes).contains(&ptr) {
                    ptr - rel
                } else {
                    0
                };
                let ovl = RoundRobin::first_from(granted, start as u32).unwrap_or(0);
                let (gout, ovc) = (base + v_out, block + ovl);
                self.grant_lane(ivc, gout, ovl);
                if it == 0 {
                    self.vc[ivc].va_rr = ((v_out * lanes + ovl + 1) % size) as u16;
                    self.va_out_rr[ovc] = ((ivc - base * lanes + 1) % size) as u16;
                }
                let sa = now + self.k.vl_alloc;
                self.vc[ivc].sa_ready = sa;
                self.schedule(ivc, sa);
            }
            for i in 0..self.va_touched.len() {
                let ovc = self.va_touched[i] as usize;
                self.va_claim[ovc] = NO_VC;
            }
            self.va_touched.clear();
        }
        self.va_losers_retry(now);
    }

    /// One cycle of router `r` under BookSim2's separable input-first allocator (one
    /// iteration, round-robin arbiters). Each input port requests, for each output port
    /// some eligible lane of it wants, the first such lane from the port's lane pointer
    /// (BookSim2's `_sw_rr_offset`); its input arbiter picks one of those output ports
    /// from its port pointer; each output port's arbiter picks one of the input ports
    /// that chose it from its own pointer. Only a grant moves pointers: the input
    /// arbiter's past the output, the output arbiter's past the input, the lane pointer
    /// past the lane.
    #[inline(always)]
    pub(super) fn step_router_separable(&mut self, r: usize, now: Cycle) {
        let lanes = self.k.lanes;
        let base = self.fab.port_base[r] as usize;
        let mut want: u64 = 0;
        let mut pm = self.rports[r];
        // The requests read and write these alone: locals keep their pointers in
        // registers across the stores.
        let (port, vc) = (&*self.port, &*self.vc);
        let sep = &mut *self.reqs;
        while pm != 0 {
            let p = pm.trailing_zeros() as usize;
            pm &= pm - 1;
            let g = base + p;
            let pg = &port[g];
            let elig = pg.elig;
            // The port's lanes by index from `v0` (one bounds check per record read,
            // none for a sub-slice).
            let v0 = g * lanes;
            let (op, lane, ovl) = if elig & elig.wrapping_sub(1) == 0 {
                // One eligible lane (the common case): both arbiters pick it.
                let l = elig.trailing_zeros() as usize;
                let v = &vc[v0 + l];
                (v.out as usize, l, v.ovl)
            } else {
                let mut outs: u64 = 0;
                let mut m = elig;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    outs |= 1 << vc[v0 + l].out;
                }
                let op = first_set_from(outs, pg.in_port_rr as u32);
                // Every eligible lane wants the same output (often so): all are its.
                let mut mine = if outs & (outs - 1) == 0 { elig } else { 0 };
                let mut m = if mine == 0 { elig } else { 0 };
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    if vc[v0 + l].out as usize == op {
                        mine |= 1 << l;
                    }
                }
                let l = RoundRobin::first_from(mine, pg.in_rr as u32).unwrap_or(0);
                (op, l, vc[v0 + l].ovl)
            };
            // (Ports are at most 64: the masks only spare the bounds checks.)
            sep.ins[op & 63] |= 1 << p;
            // The lane and the output lane it holds, read while its record is at hand.
            sep.src[p & 63] = lane as u16 | (ovl as u16) << 8;
            want |= 1 << op;
        }
        while want != 0 {
            let op = want.trailing_zeros() as usize;
            want &= want - 1;
            let gout = base + op;
            let ins = std::mem::take(&mut self.reqs.ins[op & 63]);
            let p = first_set_from(ins, self.port[gout].out_rr as u32);
            self.cross_granted(r, base, p, op, now);
        }
    }

    /// Input port `p` of router `r` (ports from `base`) won output port `op`: the lane
    /// it asked with (`reqs.src`) crosses, and the output's, the input's port and the
    /// input's lane pointers move past the winners.
    #[inline(always)]
    fn cross_granted(&mut self, r: usize, base: usize, p: usize, op: usize, now: Cycle) {
        let src = self.reqs.src[p & 63] as usize;
        let (lane, ovl) = (src & 0xff, src >> 8);
        let (g, gout) = (base + p, base + op);
        self.port[gout].out_rr = (p + 1) as u8;
        let pg = &mut self.port[g];
        pg.in_port_rr = (op + 1) as u8;
        pg.in_rr = (lane + 1) as u8;
        self.forward(r, g, lane, gout, ovl, now);
    }

    /// One cycle of router `r` under BookSim2's separable input-first allocator with
    /// packet priorities (`router.priority`), as BookSim2's `RoundRobinArbiter`s rank
    /// requests: the highest priority wins, ties go to the first from the pointer. Each
    /// input port asks each output port some eligible lane wants with the lane of
    /// highest priority among those (ties: the first from the port's lane pointer, as
    /// `_SWAllocAddReq`'s `Supersedes`); its input arbiter picks the output port whose
    /// request ranks highest (ties: the first from its port pointer); each output
    /// port's arbiter picks the input port whose request ranks highest (ties: the
    /// first from its pointer). Pointers move as without priorities: only on a grant,
    /// past the winner.
    pub(super) fn step_router_prio(&mut self, r: usize, now: Cycle) {
        let lanes = self.k.lanes;
        let base = self.fab.port_base[r] as usize;
        let mut want: u64 = 0;
        // Per output port of the current input port: its request's priority and lane
        // (read only for the ports in `outs`, which starts empty for every input port).
        let mut best = [(0u64, 0u8); 64];
        let mut pm = self.rports[r];
        while pm != 0 {
            let p = pm.trailing_zeros() as usize;
            pm &= pm - 1;
            let g = base + p;
            let (elig, lane_ptr, port_ptr) = {
                let pg = &self.port[g];
                (pg.elig, pg.in_rr as u32 % 32, pg.in_port_rr as u32)
            };
            let v0 = g * lanes;
            let mut outs: u64 = 0;
            for l in round_robin(elig as u64, lane_ptr) {
                let o = self.vc[v0 + l].out as usize & 63;
                let pr = self.front_prio(v0 + l);
                if outs & (1 << o) == 0 || pr > best[o].0 {
                    best[o] = (pr, l as u8);
                    outs |= 1 << o;
                }
            }
            let mut op = first_set_from(outs, port_ptr);
            for o in round_robin(outs, if port_ptr >= 64 { 0 } else { port_ptr }) {
                if best[o].0 > best[op].0 {
                    op = o;
                }
            }
            let (pr, lane) = best[op];
            let ovl = self.vc[v0 + lane as usize].ovl;
            self.reqs.ins[op] |= 1 << p;
            self.reqs.src[p & 63] = lane as u16 | (ovl as u16) << 8;
            self.reqs.pri[p & 63] = pr;
            want |= 1 << op;
        }
        while want != 0 {
            let op = want.trailing_zeros() as usize;
            want &= want - 1;
            let gout = base + op;
            let ins = std::mem::take(&mut self.reqs.ins[op & 63]);
            let ptr = self.port[gout].out_rr as u32;
            let mut p = first_set_from(ins, ptr);
            for i in round_robin(ins, if ptr >= 64 { 0 } else { ptr }) {
                if self.reqs.pri[i] > self.reqs.pri[p] {
                    p = i;
                }
            }
            self.cross_granted(r, base, p, op, now);
        }
    }

    /// The pointers of crossbar input `j` of port `g`: (over output ports, over lanes).
    #[inline(always)]
    fn input_ptrs(&self, g: usize, j: usize) -> (u8, u8) {
        let pg = &self.port[g];
        if j == 0 {
            (pg.in_port_rr, pg.in_rr)
        } else {
            (pg.x_port_rr, pg.x_in_rr)
        }
    }

    /// One cycle of router `r` under BookSim2's iSLIP allocator (any iterations,
    /// `alloc_iters`), or its separable input-first one with two crossbar inputs per
    /// input port (`input_speedup = 2`: BookSim2's expanded input `2p + j` holds the
    /// lanes `l` with `l % 2 == j`). Each
    /// crossbar input asks every output port one of its eligible lanes wants. Separable
    /// input-first: each input's arbiter picks one of those outputs, each output's
    /// arbiter one of the inputs that picked it. iSLIP: in every iteration each
    /// unmatched output grants the first unmatched input asking for it from its pointer,
    /// and each input granted accepts the first granting output from its pointer; only
    /// the first iteration's matches move those pointers. A matched input sends the lane
    /// first from its lane pointer among those wanting its output, and that pointer
    /// moves past the lane (by the input count, modulo the lanes in use, as BookSim2's
    /// `_sw_rr_offset`).
    pub(super) fn step_router_general(&mut self, r: usize, now: Cycle) {
        let (lanes, s) = (self.k.lanes, self.k.speedup as usize);
        let base = self.fab.port_base[r] as usize;
        let class = |j: usize| -> u32 {
            match (s, j) {
                (1, _) => u32::MAX,
                (_, 0) => 0x5555_5555,
                _ => 0xAAAA_AAAA,
            }
        };
        // Connections held for this cycle (`hold_switch_for_packet`): their crossbar
        // inputs and outputs take no part in the allocation, as in BookSim2, whose
        // allocator skips them whether or not the held flit then moves.
        let (held_in, held_out) = if self.k.hold {
            self.held(r, base, s, now)
        } else {
            (0, 0)
        };
        // Requests: per crossbar input e the outputs it asks for, per output the inputs.
        let mut want: u64 = 0;
        let mut pm = self.rports[r];
        while pm != 0 {
            let p = pm.trailing_zeros() as usize;
            pm &= pm - 1;
            let g = base + p;
            let v0 = g * lanes;
            for j in 0..s {
                let m0 = self.port[g].elig & class(j);
                if m0 == 0 {
                    continue;
                }
                let e = p * s + j;
                if held_in & (1 << e) != 0 {
                    continue;
                }
                let mut outs: u64 = 0;
                let mut m = m0;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    outs |= 1 << self.vc[v0 + l].out;
                }
                outs &= !held_out;
                if outs == 0 {
                    continue;
                }
                self.reqs.elig[e & 63] = m0;
                if self.k.islip {
                    want |= outs;
                    let mut o = outs;
                    while o != 0 {
                        let op = o.trailing_zeros() as usize;
                        o &= o - 1;
                        self.reqs.ins[op & 63] |= 1 << e;
                    }
                } else {
                    let op = first_set_from(outs, self.input_ptrs(g, j).0 as u32);
                    self.reqs.ins[op & 63] |= 1 << e;
                    want |= 1 << op;
                }
            }
        }
        // The matching: per matched input its output (in `src`), pointers moved.
        let mut matched: u64 = 0;
        if self.k.islip {
            let mut taken: u64 = 0;
            for it in 0..self.k.iters {
                let mut granted: u64 = 0;
                let mut o = want & !taken;
                while o != 0 {
                    let op = o.trailing_zeros() as usize;
                    o &= o - 1;
                    let ins = self.reqs.ins[op & 63] & !matched;
                    if ins == 0 {
                        continue;
                    }
                    let e = first_set_from(ins, self.port[base + op].out_rr as u32);
                    self.reqs.grants[e & 63] |= 1 << op;
                    granted |= 1 << e;
                }
                if granted == 0 {
                    break;
                }
                while granted != 0 {
                    let e = granted.trailing_zeros() as usize;
                    granted &= granted - 1;
                    let (p, j) = (e / s, e % s);
                    let g = base + p;
                    let outs = std::mem::take(&mut self.reqs.grants[e & 63]);
                    let op = first_set_from(outs, self.input_ptrs(g, j).0 as u32);
                    matched |= 1 << e;
                    taken |= 1 << op;
                    self.reqs.src[e & 63] = op as u16;
                    if it == 0 {
                        self.port[base + op].out_rr = (e + 1) as u8;
                        self.set_port_ptr(g, j, (op + 1) as u8);
                    }
                }
            }
            let mut o = want;
            while o != 0 {
                let op = o.trailing_zeros() as usize;
                o &= o - 1;
                self.reqs.ins[op & 63] = 0;
            }
        } else {
            let mut o = want;
            while o != 0 {
                let op = o.trailing_zeros() as usize;
                o &= o - 1;
                let ins = std::mem::take(&mut self.reqs.ins[op & 63]);
                let e = first_set_from(ins, self.port[base + op].out_rr as u32);
                let (p, j) = (e / s, e % s);
                matched |= 1 << e;
                self.reqs.src[e & 63] = op as u16;
                self.port[base + op].out_rr = (e + 1) as u8;
                self.set_port_ptr(base + p, j, (op + 1) as u8);
            }
        }
        // The held connections' flits cross first (BookSim2's `_SWHoldUpdate` runs
        // before `_SWAllocUpdate`).
        if held_in != 0 {
            self.cross_held(r, base, s, held_in, now);
        }
        // The crossing: every matched input's lane, inputs in order.
        let nvl = self.k.nvl as usize;
        while matched != 0 {
            let e = matched.trailing_zeros() as usize;
            matched &= matched - 1;
            let (p, j) = (e / s, e % s);
            let g = base + p;
            let op = self.reqs.src[e & 63] as usize;
            let v0 = g * lanes;
            let mut mine: u32 = 0;
            let mut m = self.reqs.elig[e & 63];
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                if self.vc[v0 + l].out as usize == op {
                    mine |= 1 << l;
                }
            }
            let ptr = self.input_ptrs(g, j).1 as u32;
            let lane = if self.k.prio == Prio::None {
                RoundRobin::first_from(mine, ptr).unwrap_or(0)
            } else {
                // BookSim2's `_SWAllocAddReq`, whatever the allocator: of an input's
                // VCs asking for one output, the request is the highest priority's,
                // ties the first from `_sw_rr_offset`.
                self.first_of_highest(mine as u64, v0, ptr % 32)
            };
            let ovl = self.vc[v0 + lane].ovl as usize;
            let next = if s == 1 {
                lane + 1
            } else {
                (lane + s) % nvl.max(1)
            };
            if j == 0 {
                self.port[g].in_rr = next as u8;
            } else {
                self.port[g].x_in_rr = next as u8;
            }
            let tail = self.vc[v0 + lane].front & TAIL != 0;
            self.forward(r, g, lane, base + op, ovl, now);
            if self.k.hold {
                self.keep_hold(g * 2 + j, v0 + lane, tail, op, lane, now);
            }
        }
    }

    /// The crossing inputs and outputs of router `r` (ports from `base`, `s` inputs per
    /// port) whose connection is held for cycle `now`.
    #[cold]
    fn held(&self, r: usize, base: usize, s: usize, now: Cycle) -> (u64, u64) {
        let (mut ins, mut outs) = (0u64, 0u64);
        for p in 0..self.fab.ports[r] as usize {
            for j in 0..s {
                let (at, h) = self.hold[(base + p) * 2 + j];
                if at == now {
                    ins |= 1 << (p * s + j);
                    outs |= 1 << (h >> 8);
                }
            }
        }
        (ins, outs)
    }

    /// Moves the flits of the connections held for `now` (crossing inputs `held_in` of
    /// router `r`) that can go: the lane still eligible — its front flit ready, a credit
    /// in hand. One that cannot loses its hold and asks the allocator from the next
    /// cycle on (BookSim2: "no credit available").
    #[cold]
    fn cross_held(&mut self, r: usize, base: usize, s: usize, held_in: u64, now: Cycle) {
        let lanes = self.k.lanes;
        let mut m = held_in;
        while m != 0 {
            let e = m.trailing_zeros() as usize;
            m &= m - 1;
            let (p, j) = (e / s, e % s);
            let g = base + p;
            let h = self.hold[g * 2 + j].1;
            let (lane, op) = ((h & 0xff) as usize, (h >> 8) as usize);
            self.hold[g * 2 + j] = (NEVER, 0);
            if self.port[g].elig & (1 << lane) == 0 {
                continue;
            }
            let ivc = g * lanes + lane;
            let tail = self.vc[ivc].front & TAIL != 0;
            let ovl = self.vc[ivc].ovl as usize;
            self.forward(r, g, lane, base + op, ovl, now);
            self.keep_hold(g * 2 + j, ivc, tail, op, lane, now);
        }
    }

    /// After a flit of input VC `ivc` crossed to output `op` at `now` over crossing input
    /// `x`: the connection is held for the next cycle unless that flit was the tail or
    /// the VC has no next flit buffered (BookSim2's `hold_switch_for_packet`).
    #[inline]
    fn keep_hold(&mut self, x: usize, ivc: usize, tail: bool, op: usize, lane: usize, now: Cycle) {
        let v = &self.vc[ivc];
        if !tail && v.len > 0 && v.front_ready <= now {
            self.hold[x] = (now + 1, (op << 8 | lane) as u16);
        }
    }

    /// Sets the output-port pointer of crossbar input `j` of port `g`.
    #[inline(always)]
    fn set_port_ptr(&mut self, g: usize, j: usize, v: u8) {
        if j == 0 {
            self.port[g].in_port_rr = v;
        } else {
            self.port[g].x_port_rr = v;
        }
    }
}

/// The set bits of `mask` in round-robin order from bit `start` (below 64): those at
/// or after it ascending, then those before it.
#[inline]
fn round_robin(mask: u64, start: u32) -> impl Iterator<Item = usize> {
    let hi = mask & (u64::MAX << start);
    let lo = mask & !(u64::MAX << start);
    Bits(hi).chain(Bits(lo))
}

/// The set bits of a mask, ascending.
struct Bits(u64);

impl Iterator for Bits {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let b = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(b)
    }
}
