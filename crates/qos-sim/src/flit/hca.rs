//! Host channel adapters (Yum §3.2, Fig 2): per-class send queues served in priority
//! order (FCFS within a class), a DMA engine moving one flit per cycle into the HCA's
//! VL buffers, and the HCA port's VL arbiter sending one flit per cycle into the
//! router under the same credit flow control as router-to-router links. Flits that
//! arrive at an HCA are consumed at once.
//!
//! `hca.model = "source_queue"` is BookSim2's terminal instead: no
//! DMA and no VL buffers; each class sends the packet at the front of its queue, one
//! flit per cycle, its header on the first lane with a credit after the lane the class
//! used last.
//!
//! An injection gate ([`super::hooks::InjectionGate`]) replaces the per-class send
//! queues when a policy sets one: the DMA then moves one packet at a time, the one the
//! gate picks (Yum's QP scheduler, and the congestion and power controls of that
//! model, are gates). Packets enter through [`Hcas::enqueue`] (the engine's `create_packet`
//! and policies' posts) and leave through the VL buffers; the policy hears of each
//! packet whose tail leaves ([`super::hooks::Hooks::injected`]).

use std::collections::VecDeque;

use qos_core::vlarb::{AnyVlArbiter, RoundRobin, VlArbiter};

use super::config::{FlitConfig, HcaModel};
use super::error::FlitError;
use super::hooks::InjectionGate;
use super::packet::{Packets, HEAD, NO_LANE, TAIL};
use super::records::Tally;
use super::router::{Cycle, Hot, Prio};
use super::stats::Collector;
use super::traffic::Arrival;

mod one_class;

/// State of every HCA, flat per (node, class) and (node, lane).
pub(super) struct Hcas {
    classes: usize,
    lanes: usize,
    /// BookSim2's terminal instead of Yum's DMA.
    source_queue: bool,
    /// Source queue: each (node, class)'s lane for its front packet (`NO_LANE` before
    /// its header leaves) and the lane its last packet took; each class's lanes; each
    /// node's last class served.
    sq_lane: Vec<u8>,
    last_lane: Vec<u8>,
    class_lanes: Vec<u32>,
    last_class: Vec<u8>,
    /// Source queue: per node the lanes a packet is being sent on, header sent and tail
    /// not yet (BookSim2's `BufferState::_in_use_by` of the terminal): classes that
    /// share lanes never start a packet on a lane another class's packet holds.
    sq_busy: Vec<u32>,
    /// HCA VL buffer depth in flits.
    cap: u32,
    /// Classes by descending priority, and each class's priority.
    order: Vec<usize>,
    prio: Vec<u8>,
    /// Source queue: BookSim2's packet priorities (`router.priority`); without, the
    /// classes' own priorities rank them.
    rule: Prio,
    /// Send queue of each (node, class): packets not fully DMA'd.
    sq: Vec<VecDeque<u32>>,
    /// Flits of the front packet of each send queue already DMA'd.
    dma_done: Vec<u32>,
    /// Source queue: the cycle each send queue last sent a tail (`u64::MAX`: never).
    tail_at: Vec<u64>,
    /// Packets with flits in each (node, lane) VL buffer, in order.
    vlq: Vec<VecDeque<u32>>,
    /// Flits of the front packet of each VL buffer already sent.
    sent: Vec<u32>,
    /// Flits in each VL buffer.
    held: Vec<u32>,
    /// Lanes with buffered flits, per node.
    mask: Vec<u32>,
    /// Packets queued or buffered per node.
    load: Vec<u32>,
    arb: Vec<AnyVlArbiter>,
    /// The HCA port arbitrates round-robin: its pointer per node (fast path, no
    /// arbiter record touched).
    rr: Option<Vec<u8>>,
    queued: Vec<u64>,
    active: Vec<u32>,
    next_active: Vec<u32>,
    busy_nodes: usize,
    pub(super) scratch: Vec<Arrival>,
    /// A policy's gate, and each node's packet being DMA'd through it (slot, flits
    /// moved).
    gate: Option<Box<dyn InjectionGate>>,
    dma_cur: Vec<Option<(u32, u32)>>,
    /// With one class and no gate, step by the paths of `one_class` (the same decisions,
    /// fewer instructions); off only in the test that compares them with the general ones.
    one_class_paths: bool,
}

impl Hcas {
    pub fn new(cfg: &FlitConfig, nodes: usize, lanes: usize) -> Result<Hcas, FlitError> {
        let classes = cfg.classes.len();
        let mut order: Vec<usize> = (0..classes).collect();
        order.sort_by_key(|&c| std::cmp::Reverse(cfg.classes[c].priority));
        let arb =
            cfg.hca.arbitration.build().map_err(|e| {
                FlitError::config("hca.arbitration", format!("hca.arbitration: {e}"))
            })?;
        let class_lanes: Vec<u32> = cfg
            .classes
            .iter()
            .map(|c| c.vls.iter().fold(0u32, |m, &l| m | 1 << l))
            .collect();
        Ok(Hcas {
            classes,
            lanes,
            source_queue: cfg.hca_model() == HcaModel::SourceQueue,
            sq_lane: vec![NO_LANE; nodes * classes],
            // BookSim2 starts each class's search at its first lane.
            last_lane: (0..nodes * classes)
                .map(|i| 31 - class_lanes[i % classes].leading_zeros() as u8)
                .collect(),
            class_lanes,
            // BookSim2's `_last_class` starts at 0: its first search begins at class 1.
            last_class: vec![0; nodes],
            sq_busy: vec![0; nodes],
            cap: cfg.hca.vl_buffer.unwrap_or(u32::MAX),
            order,
            prio: cfg.classes.iter().map(|c| c.priority).collect(),
            rule: Prio::new(cfg.router.priority, cfg.classes.iter().map(|c| c.priority)),
            sq: vec![VecDeque::new(); nodes * classes],
            dma_done: vec![0; nodes * classes],
            tail_at: vec![u64::MAX; nodes * classes],
            vlq: vec![VecDeque::new(); nodes * lanes],
            sent: vec![0; nodes * lanes],
            held: vec![0; nodes * lanes],
            mask: vec![0; nodes],
            load: vec![0; nodes],
            arb: vec![arb; nodes],
            rr: matches!(
                cfg.hca.arbitration,
                qos_core::vlarb::VlArbConfig::RoundRobin
            )
            .then(|| vec![0; nodes]),
            queued: vec![u64::MAX; nodes],
            active: Vec::new(),
            next_active: Vec::new(),
            busy_nodes: 0,
            scratch: Vec::new(),
            gate: None,
            dma_cur: vec![None; nodes],
            one_class_paths: true,
        })
    }

    /// Step by the general paths even with one class: the test that compares them with
    /// the one-class paths.
    #[cfg(test)]
    pub(super) fn use_general_paths(&mut self) {
        self.one_class_paths = false;
    }

    /// Flits in node `n`'s buffer of `lane`, and the buffer's size.
    pub fn held(&self, n: usize, lane: usize) -> (u32, u32) {
        let h = if lane < self.lanes {
            self.held.get(n * self.lanes + lane).copied().unwrap_or(0)
        } else {
            0
        };
        (h, self.cap)
    }

    /// No HCA has anything to send.
    pub fn idle(&self) -> bool {
        self.busy_nodes == 0
    }

    /// Serves the HCAs' DMA through `gate`.
    pub fn set_gate(&mut self, gate: Box<dyn InjectionGate>) {
        self.gate = Some(gate);
    }

    /// Replaces the VL arbiter of HCA `n`'s port.
    pub fn set_arbiter(&mut self, n: usize, a: AnyVlArbiter) {
        if n < self.arb.len() {
            self.arb[n] = a;
            self.rr = None;
        }
    }

    fn activate(&mut self, n: usize, next: u64) {
        if self.queued[n] != next {
            self.queued[n] = next;
            self.next_active.push(n as u32);
        }
    }
}

impl Hcas {
    /// The packets' lanes are drawn when they are created (Yum's DMA HCA), not chosen
    /// as their headers leave (BookSim2's terminal).
    pub fn lane_at_creation(&self) -> bool {
        !self.source_queue
    }

    /// Packet `pkt` of class `cls`, `len` flits, created at `now` at node `n`, enters
    /// its send queue; at the front of the queue it counts as in flight for BookSim2's
    /// `latency_thres` rule. Returns whether it is at the front at once.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue(
        &mut self,
        n: usize,
        cls: usize,
        pkt: u32,
        len: u32,
        lane: u8,
        now: u64,
        stats: &mut Collector,
    ) -> bool {
        let mut front = false;
        if let Some(g) = &mut self.gate {
            g.enqueue(n, cls, pkt, lane, now);
            stats.flight_flits[cls] += len as u64;
            stats.flight_created[cls] += len as u64 * now;
        } else {
            let q = &mut self.sq[n * self.classes + cls];
            q.push_back(pkt);
            if q.len() == 1 {
                front = true;
                stats.flight_flits[cls] += len as u64;
                stats.flight_created[cls] += len as u64 * now;
            }
        }
        if self.load[n] == 0 {
            self.busy_nodes += 1;
        }
        self.load[n] += 1;
        self.activate(n, now);
        front
    }

    /// Whether a packet's measurement is settled when it reaches the front of its
    /// send queue (BookSim2's terminal generates a packet then, and records it if the
    /// measurement has started and it was created before the measurement's end), not
    /// when it is created.
    pub fn measures_at_front(&self) -> bool {
        self.source_queue
    }
}

impl Hcas {
    /// One cycle of every HCA with work: send one flit on the link, then DMA one flit.
    pub(super) fn step(&mut self, hot: &mut Hot<'_>, now: u64) {
        let mut cur = std::mem::take(&mut self.active);
        std::mem::swap(&mut cur, &mut self.next_active);
        if self.one_class_paths && self.classes == 1 && self.gate.is_none() {
            if self.source_queue {
                self.step_sources_one_class(hot, &cur, now);
                cur.clear();
                self.active = cur;
                return;
            }
            if self.rr.is_some() {
                self.step_dmas_one_class(hot, &cur, now);
                cur.clear();
                self.active = cur;
                return;
            }
        }
        for &n in &cur {
            let n = n as usize;
            if self.queued[n] == now {
                if self.source_queue {
                    self.step_source(hot, n, now);
                } else {
                    self.step_one(hot, n, now);
                }
            }
        }
        cur.clear();
        self.active = cur;
    }

    fn step_one(&mut self, hot: &mut Hot<'_>, n: usize, now: u64) {
        let lanes = self.lanes;
        let gin = hot.fab.hca_port[n] as usize;
        // Send: the HCA port's VL arbiter over lanes with flits and credits.
        let vc_base = gin * lanes;
        let mut elig = 0u32;
        let mut m = self.mask[n];
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            if hot.host_credit_available(vc_base + l, now as Cycle) {
                elig |= 1 << l;
            }
        }
        if elig != 0 {
            let pick = if let Some(rr) = &mut self.rr {
                let l = RoundRobin::first_from(elig, rr[n] as u32);
                if let Some(l) = l {
                    rr[n] = (l + 1) as u8;
                }
                l
            } else {
                let created = &hot.pk.created;
                let vlq = &self.vlq;
                let age = |l: usize| {
                    vlq[n * lanes + l]
                        .front()
                        .map_or(0, |&p| created[p as usize])
                };
                let l = self.arb[n].pick(elig, age);
                if let Some(l) = l {
                    self.arb[n].sent(l);
                }
                l
            };
            if let Some(l) = pick {
                let nl = n * lanes + l;
                let pkt = *self.vlq[nl].front().expect("held flits have a packet");
                let k = self.sent[nl];
                let len = hot.pk.len[pkt as usize];
                let mut word = pkt;
                if k == 0 {
                    word |= HEAD;
                    hot.pk.injected[pkt as usize] = now;
                }
                if k + 1 == len {
                    word |= TAIL;
                    self.vlq[nl].pop_front();
                    self.sent[nl] = 0;
                    self.load[n] -= 1;
                    if self.load[n] == 0 {
                        self.busy_nodes -= 1;
                    }
                    if let Some(h) = hot.hooks.as_deref_mut() {
                        h.injected(&hot.pk.event(pkt, now));
                    }
                } else {
                    self.sent[nl] = k + 1;
                }
                self.held[nl] -= 1;
                if self.held[nl] == 0 {
                    self.mask[n] &= !(1 << l);
                }
                let extra = if k == 0 { hot.k.entry_route } else { 0 };
                let ready = now + (hot.k.d.link + hot.k.d.sync + extra) as u64;
                hot.push_flit(vc_base + l, word, ready as Cycle);
                hot.tally.moved += 1;
            }
        }
        if self.gate.is_some() {
            self.dma_gated(hot, n, now);
            if self.load[n] > 0 {
                self.activate(n, now + 1);
            }
            return;
        }
        // DMA: one flit of the highest-priority class whose lane has room.
        for oi in 0..self.classes {
            let c = self.order[oi];
            let q = n * self.classes + c;
            let Some(&pkt) = self.sq[q].front() else {
                continue;
            };
            let l = hot.pk.vl[pkt as usize] as usize;
            let nl = n * self.lanes + l;
            if self.held[nl] >= self.cap {
                continue;
            }
            if self.dma_done[q] == 0 {
                self.vlq[nl].push_back(pkt);
            }
            self.dma_done[q] += 1;
            self.held[nl] += 1;
            self.mask[n] |= 1 << l;
            hot.tally.in_network += 1;
            if self.dma_done[q] == hot.pk.len[pkt as usize] {
                self.sq[q].pop_front();
                self.dma_done[q] = 0;
                self.front_in_flight(hot, q, now);
            }
            break;
        }
        if self.load[n] > 0 {
            self.activate(n, now + 1);
        }
    }

    /// DMA through the gate: one flit of the packet being moved, or of the one the gate
    /// picks next.
    fn dma_gated(&mut self, hot: &mut Hot<'_>, n: usize, now: u64) {
        let (lanes, cap) = (self.lanes, self.cap);
        let cur = match self.dma_cur[n] {
            Some(c) => Some(c),
            None => {
                let held = &self.held;
                let room = |l: u8| held[n * lanes + l as usize] < cap;
                let gate = self.gate.as_mut().expect("gated DMA has a gate");
                gate.pick(n, &room, now).map(|p| (p, 0))
            }
        };
        let Some((pkt, done)) = cur else {
            return;
        };
        let l = hot.pk.vl[pkt as usize] as usize;
        let nl = n * lanes + l;
        if self.held[nl] >= cap {
            self.dma_cur[n] = Some((pkt, done));
            return;
        }
        if done == 0 {
            self.vlq[nl].push_back(pkt);
        }
        self.held[nl] += 1;
        self.mask[n] |= 1 << l;
        hot.tally.in_network += 1;
        if done + 1 == hot.pk.len[pkt as usize] {
            self.dma_cur[n] = None;
            if let Some(g) = &mut self.gate {
                g.dma_done(n, pkt, now);
            }
        } else {
            self.dma_cur[n] = Some((pkt, done + 1));
        }
    }

    /// The packet now at the front of send queue `q` counts as in flight (BookSim2's
    /// terminal generates a packet when the previous one has left).
    #[inline]
    fn front_in_flight(&self, hot: &mut Hot<'_>, q: usize, now: u64) {
        if let Some(&next) = self.sq[q].front() {
            let p = next as usize;
            let len = hot.pk.len[p] as u64;
            let c = q % self.classes;
            hot.stats.flight_flits[c] += len;
            hot.stats.flight_created[c] += len * hot.pk.created[p];
            if self.source_queue {
                // BookSim2's terminal generates it in the next cycle (`_Inject` runs
                // before the cycle's flit is sent).
                front_measured(
                    &mut hot.pk.measured[p],
                    &mut hot.tally.outstanding,
                    hot.pk.created[p],
                    hot.window,
                    now + 1,
                );
            }
        }
    }

    /// One cycle of HCA `n` as BookSim2's terminal: of the classes whose front packet
    /// can send a flit now (its header a lane with a credit, the first after the lane
    /// the class used last; a later flit a credit on its packet's lane), the one of
    /// highest priority, the first from the class after the last one served among
    /// equals, sends one flit. The flit enters the link the next cycle. As in
    /// BookSim2's `_Step`, a class that does not outrank the one picked so far is
    /// passed over before its header looks for a lane (so it takes none this cycle).
    fn step_source(&mut self, hot: &mut Hot<'_>, n: usize, now: u64) {
        let lanes = self.lanes;
        let classes = self.classes;
        let vc_base = hot.fab.hca_port[n] as usize * lanes;
        let t = now as Cycle;
        let mut pick: Option<(usize, u64)> = None;
        let mut c = self.last_class[n] as usize;
        for _ in 0..classes {
            c = if c + 1 == classes { 0 } else { c + 1 };
            let q = n * classes + c;
            let Some(&front) = self.sq[q].front() else {
                continue;
            };
            let pri = match self.rule {
                Prio::None => self.prio[c] as u64,
                rule => rule.of(c as u8, hot.pk.created[front as usize]),
            };
            if pick.is_some_and(|(_, p)| p >= pri) {
                continue;
            }
            let lane = self.sq_lane[q];
            if lane == NO_LANE {
                let mut free = 0u32;
                let mut m = self.class_lanes[c] & !self.sq_busy[n];
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    if hot.host_lane_free(vc_base + l, t) {
                        free |= 1 << l;
                    }
                }
                let Some(l) = RoundRobin::first_from(free, self.last_lane[q] as u32 + 1) else {
                    continue;
                };
                self.sq_lane[q] = l as u8;
            } else if !hot.host_credit_available(vc_base + lane as usize, t) {
                continue;
            }
            pick = Some((c, pri));
        }
        if let Some((c, _)) = pick {
            let q = n * classes + c;
            let pkt = *self.sq[q].front().expect("a picked class has a packet");
            let lane = self.sq_lane[q];
            let k = self.dma_done[q];
            let len = hot.pk.len[pkt as usize];
            let mut word = pkt;
            if k == 0 {
                word |= HEAD;
                hot.pk.injected[pkt as usize] = now;
                hot.pk.vl[pkt as usize] = lane;
                self.sq_busy[n] |= 1 << lane;
                if hot.k.lookahead_order {
                    hot.order_by_lookahead(vc_base / self.lanes, pkt as usize, t);
                }
            }
            if k + 1 == len {
                word |= TAIL;
                self.sq_busy[n] &= !(1 << lane);
                self.sq[q].pop_front();
                self.dma_done[q] = 0;
                self.sq_lane[q] = NO_LANE;
                self.last_lane[q] = lane;
                self.tail_at[q] = now;
                self.load[n] -= 1;
                if self.load[n] == 0 {
                    self.busy_nodes -= 1;
                }
                self.front_in_flight(hot, q, now);
            } else {
                self.dma_done[q] = k + 1;
            }
            self.last_class[n] = c as u8;
            let extra = if k == 0 { hot.k.entry_route } else { 0 };
            let ready = now + 1 + (hot.k.d.link + hot.k.d.sync + extra) as u64;
            hot.push_flit(vc_base + lane as usize, word, ready as Cycle);
            hot.tally.moved += 1;
            hot.tally.in_network += 1;
        }
        if self.load[n] > 0 {
            self.activate(n, now + 1);
        }
    }

    /// BookSim2's `sim_type = throughput` at the measurement's end (the start of cycle
    /// `end`): its terminal stops generating. A packet BookSim2 has generated — the one
    /// at the front of each send queue, unless it reached the front when the packet
    /// before it sent its tail in cycle `end − 1` (BookSim2 would have generated it in
    /// cycle `end`) — is still sent; every other queued packet is dropped, uncounted
    /// from the measured packets outstanding and from those in flight.
    pub(super) fn stop_sources(
        &mut self,
        end: u64,
        pk: &mut Packets,
        tally: &mut Tally,
        stats: &mut Collector,
    ) {
        for q in 0..self.sq.len() {
            let (n, c) = (q / self.classes, q % self.classes);
            let keep_front = self.tail_at[q] != end.wrapping_sub(1);
            let mut dropped = 0;
            for (i, &p) in self.sq[q].iter().enumerate() {
                if i == 0 && keep_front {
                    continue;
                }
                let p = p as usize;
                if pk.measured[p] {
                    pk.measured[p] = false;
                    tally.outstanding -= 1;
                }
                if i == 0 {
                    // The front counted as in flight.
                    let len = pk.len[p] as u64;
                    stats.flight_flits[c] -= len;
                    stats.flight_created[c] -= len * pk.created[p];
                    self.dma_done[q] = 0;
                    self.sq_lane[q] = NO_LANE;
                }
                pk.release(p as u32);
                dropped += 1;
            }
            let keep = self.sq[q].len() - dropped;
            self.sq[q].truncate(keep);
            if dropped > 0 {
                self.load[n] -= dropped as u32;
                if self.load[n] == 0 {
                    self.busy_nodes -= 1;
                }
            }
        }
    }
}

/// A packet of a source-queue HCA is generated at `now` (it reached the front of its
/// send queue then, or the cycle before when the packet before it sent its tail):
/// BookSim2's terminal records it if the measurement (`window`) has started and the
/// packet was created before it ends. `measured` was set provisionally at creation
/// (and `outstanding` counted it) for every packet created before the measurement's
/// end; one that turns out not to be measured is uncounted.
pub(super) fn front_measured(
    measured: &mut bool,
    outstanding: &mut u64,
    created: u64,
    window: (u64, u64),
    now: u64,
) {
    if *measured && !(now >= window.0 && created < window.1) {
        *measured = false;
        *outstanding -= 1;
    }
}
