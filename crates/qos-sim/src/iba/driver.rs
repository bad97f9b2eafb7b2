//! The policy that drives a Yum cluster run through the flit network's hooks
//! ([`crate::flit::hooks`]): it plays every consumer and HCA, posting the workload's
//! messages as WQEs on queue pairs ([`super::hca`]), and the routers' admission control
//! (§4.1) on the probes, releases and final data packets that pass them
//! ([`super::admission`]), reloading VL arbiters with the WRR weights of the admitted
//! connections (§3.3); it feeds the measurements ([`super::metrics`]).
//!
//! The protocol, hop by hop: at its request time a connection's source HCA checks its
//! own link (a refusal is answered at once); the probe, a one-flit packet on VL15,
//! is checked by every router on its way; the destination's router turns it into an
//! ACK, a router without room into a NACK carrying its hop, both routed back to the
//! source by the routing function. On the ACK the source starts sending; on a NACK it
//! releases its link and sends a release, absorbed by the router before the rejecting
//! one. Without admission control every connection sends from its request time.
//!
//! With connection lifetimes (`workload.lifetime`) a session's last message is its
//! final data packet: the source HCA releases its link as that packet's tail leaves,
//! and every router on the path once the tail has passed it — applied when the tail
//! reaches the destination, since a router's arbiter must keep serving the packet's
//! lane until then (a lane whose weight drops to zero is no longer served). A session
//! with nothing left to send ends with a release along the whole path. The connection
//! then asks again after its idle time, as it does after a refusal.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;

use qos_core::admission::probe::{release_visits, LinkId, Path, ProbeVerdict, Rejecter, Request};
use qos_core::units::Time;

use super::admission::Admission;
use super::config::{Completion, IbaConfig};
use super::congestion::{Credits, Holder};
use super::hca::{Adapters, SharedGate};
use super::metrics::Collector;
use super::peak::RtPower;
use super::power::PowerMeter;
use super::powerherd::Herd;
use super::throttle::Throttle;

#[path = "driver_admission.rs"]
mod admission_side;
#[path = "driver_credits.rs"]
mod credits;
use super::error::IbaError;
use super::traffic::{Message, TrafficClass, Workload};
use crate::flit::hooks::{
    Delivered, Header, Hooks, Kind, Net, Outputs, Place, Post, Poster, Verdict,
};
use crate::flit::FlitError;
use credits::set;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    /// Not asked yet.
    Idle,
    /// Probe out since this cycle.
    Probing(u64),
    /// Sending.
    Admitted,
    /// Refused.
    Refused,
}

/// The policy of a run: consumers, HCAs and the routers' admission control.
pub struct Driver<'a> {
    cfg: &'a IbaConfig,
    wl: Workload,
    cycle_ps: u64,
    adapters: Rc<RefCell<Adapters>>,
    pub(super) adm: Option<Admission>,
    paths: Vec<Path>,
    state: Vec<Conn>,
    /// Each connection's session: its request number.
    session: Vec<u32>,
    /// Connections admitted at least once (or started without admission control).
    pub(super) admitted: Vec<bool>,
    /// Per connection: the cycle its consumer was first refused a credit for the
    /// message it holds, while it waits for one.
    parked: Vec<Option<u64>>,
    /// Connection requests due: (cycle, connection), earliest first.
    requests: BinaryHeap<Reverse<(u64, u32)>>,
    /// Sessions ended: by a final data packet, and by a release when the session had
    /// nothing left to send.
    pub(super) ended: (u64, u64),
    /// Message sources: 0 the background, 1 + c connection c. Heap of (cycle, seq,
    /// source) of each source's next message.
    sources: Vec<Option<Box<dyn Iterator<Item = Message> + Send>>>,
    next: Vec<Option<Message>>,
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    /// Messages in flight, by the tag they carry.
    inflight: Vec<Option<Message>>,
    free: Vec<u32>,
    /// Protocol packets to post, HCA arbiters to reload and sessions to end (with a
    /// release) at the next cycle.
    to_post: Vec<Post>,
    hca_reload: Vec<u32>,
    to_end: Vec<u32>,
    /// Router outputs whose arbiters to reload at the next cycle.
    out_reload: Vec<LinkId>,
    pub(super) collector: Collector,
    pub(super) dropped: u64,
    /// Credit-based congestion control (§4.2), when configured: the credits, each
    /// in-flight message's credit (by tag), credits to give back at the next cycle,
    /// each packet slot's tag (for completions at the DMA), and the credits riding on
    /// unacknowledged messages (reliable service: by ACK number).
    pub(super) credits: Option<Credits<Message>>,
    credit_of: Vec<Option<Holder>>,
    returned: Vec<Holder>,
    slot_tag: Vec<u32>,
    acks: Vec<Option<Holder>>,
    free_acks: Vec<u32>,
    /// ALO or Self-Tuned (§7.2): looks at the network every cycle, counts deliveries;
    /// the HCAs' gate consults it.
    pub(super) throttle: Option<Rc<RefCell<Throttle>>>,
    /// The HCAs' DMA gates (told when a data packet's tail leaves its HCA).
    pub(super) gates: Vec<SharedGate>,
    /// ACKs of data messages received (reliable service).
    pub(super) data_acks: u64,
    /// The energy model's sampler (`[power]`).
    pub(super) meter: Option<PowerMeter>,
    /// Peak power control's real-time budgets per router, checked by probes (§5).
    pub(super) rt_power: Option<RtPower>,
    /// PowerHerd's exchange between neighbouring routers.
    pub(super) herd: Option<Herd>,
    error: Option<IbaError>,
}

/// `aux` of an ACK that acknowledges a data message (reliable service), not a probe.
const DATA_ACK: u32 = u32::MAX;
/// `slot_tag` of a protocol packet's slot.
const NO_TAG: u32 = u32::MAX;

impl<'a> Driver<'a> {
    /// The policy of `cfg` for workload `wl`, with the HCAs' queues, admission control
    /// (and each connection's path) when enabled, and the collector; the background
    /// traffic's first message is queued.
    pub fn new(
        cfg: &'a IbaConfig,
        wl: Workload,
        adapters: Rc<RefCell<Adapters>>,
        adm: Option<Admission>,
        paths: Vec<Path>,
        collector: Collector,
        credits: Option<Credits<Message>>,
    ) -> Driver<'a> {
        let cycle_ps = cfg.network.cycle().as_ps();
        let only = cfg.workload.streams.as_deref();
        let requests: BinaryHeap<Reverse<(u64, u32)>> = wl
            .connections()
            .iter()
            .filter(|c| only.is_none_or(|o| o.contains(&c.id)))
            .map(|c| Reverse((c.request_at.as_ps().div_ceil(cycle_ps), c.id)))
            .collect();
        let n = wl.connections().len();
        let mut d = Driver {
            cfg,
            cycle_ps,
            adapters,
            adm,
            paths,
            state: vec![Conn::Idle; n],
            session: vec![0; n],
            admitted: vec![false; n],
            parked: vec![None; n],
            requests,
            ended: (0, 0),
            sources: std::iter::once(Some(
                Box::new(wl.background()) as Box<dyn Iterator<Item = Message> + Send>
            ))
            .chain((0..n).map(|_| None))
            .collect(),
            next: vec![None; n + 1],
            heap: BinaryHeap::new(),
            seq: 0,
            inflight: Vec::new(),
            free: Vec::new(),
            to_post: Vec::new(),
            hca_reload: Vec::new(),
            to_end: Vec::new(),
            out_reload: Vec::new(),
            collector,
            dropped: 0,
            credits,
            credit_of: Vec::new(),
            returned: Vec::new(),
            slot_tag: Vec::new(),
            acks: Vec::new(),
            free_acks: Vec::new(),
            throttle: None,
            gates: Vec::new(),
            data_acks: 0,
            meter: None,
            rt_power: None,
            herd: None,
            error: None,
            wl,
        };
        d.push_source(0);
        d
    }

    /// The first error a hook met (hooks cannot return one).
    pub fn take_error(&mut self) -> Option<IbaError> {
        self.error.take()
    }

    fn time(&self, cycle: u64) -> Time {
        Time::from_ps(cycle.saturating_mul(self.cycle_ps))
    }

    fn cycle_of(&self, t: Time) -> u64 {
        t.as_ps().div_ceil(self.cycle_ps)
    }

    fn push_source(&mut self, s: u32) {
        let m = self.sources[s as usize].as_mut().and_then(|it| it.next());
        if let Some(m) = m {
            let at = self.cycle_of(m.at);
            self.next[s as usize] = Some(m);
            self.seq += 1;
            self.heap.push(Reverse((at, self.seq, s)));
        }
    }

    fn start(&mut self, c: u32, now: u64) {
        self.state[c as usize] = Conn::Admitted;
        self.admitted[c as usize] = true;
        let s = c + 1;
        let session = self.session[c as usize];
        self.sources[s as usize] = Some(self.wl.stream(c, self.time(now), session));
        self.push_source(s);
        if self.next[s as usize].is_none() && self.wl.lifetime(c, session).is_some() {
            // A session too short to send anything: released by a release packet.
            self.to_end.push(c);
        }
    }

    /// The connection's session is over (refused, or ended at `now`): it asks again
    /// after its idle time when connections have lifetimes.
    fn next_session(&mut self, c: u32, now: u64) {
        let session = self.session[c as usize];
        if let Some((_, idle)) = self.wl.lifetime(c, session) {
            self.session[c as usize] = session + 1;
            let at = now + self.cycle_of(Time::ZERO + idle).max(1);
            self.requests.push(Reverse((at, c)));
        }
    }

    /// The credit a data message needs under credit-based congestion control.
    fn holder(&self, m: &Message) -> Option<Holder> {
        let c = self.credits.as_ref()?;
        match (m.class, m.conn) {
            (TrafficClass::RealTime, Some(k)) => Some(Holder::Conn(k)),
            (TrafficClass::BestEffort, _) => Some(c.cq_of(m.src, m.dst)),
            _ => None,
        }
    }

    /// Posts one message as a WQE; `false` when its send queue is full.
    fn post_message<N: Net>(
        &mut self,
        m: Message,
        net: &mut Poster<'_, N>,
        now: u64,
    ) -> Result<bool, IbaError> {
        let depth = self.cfg.hca.send_depth;
        if !self
            .adapters
            .borrow()
            .has_room(m.src, m.class, m.conn, depth)
        {
            return Ok(false);
        }
        self.post_held(m, None, net, now)?;
        Ok(true)
    }

    /// Posts message `m`, which holds credit `h` (if any), as a WQE (its send queue
    /// has room).
    fn post_held<N: Net>(
        &mut self,
        m: Message,
        h: Option<Holder>,
        net: &mut Poster<'_, N>,
        now: u64,
    ) -> Result<(), IbaError> {
        let tag = match self.free.pop() {
            Some(t) => {
                self.inflight[t as usize] = Some(m);
                t
            }
            None => {
                self.inflight.push(Some(m));
                self.inflight.len() as u32 - 1
            }
        };
        let slot = net.post(Post {
            src: m.src,
            dst: m.dst,
            class: m.class as u8,
            vl: m.lane,
            len: m.flits,
            kind: if m.last { Kind::Final } else { Kind::Data },
            tag,
            aux: 0,
        })?;
        let bytes = m.flits as u64 * self.cfg.network.flit_bytes() as u64;
        self.adapters
            .borrow_mut()
            .post(m.src, m.class, m.conn, slot, bytes, m.dst, now)?;
        if self.credits.is_some() {
            set(&mut self.credit_of, tag as usize, h, None);
            set(&mut self.slot_tag, slot as usize, tag, NO_TAG);
        }
        Ok(())
    }

    /// A protocol packet from `src`'s HCA, on its control QP.
    fn post_protocol<N: Net>(
        &mut self,
        p: Post,
        net: &mut Poster<'_, N>,
        now: u64,
    ) -> Result<(), IbaError> {
        let slot = net.post(p)?;
        if self.credits.is_some() {
            set(&mut self.slot_tag, slot as usize, NO_TAG, NO_TAG);
        }
        let bytes = p.len as u64 * self.cfg.network.flit_bytes() as u64;
        self.adapters.borrow_mut().post(
            p.src,
            TrafficClass::Control,
            None,
            slot,
            bytes,
            p.dst,
            now,
        )?;
        Ok(())
    }

    fn step<N: Net>(&mut self, now: u64, net: &mut Poster<'_, N>) -> Result<(), IbaError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.return_credits(net, now)?;
        for c in std::mem::take(&mut self.to_end) {
            self.end(c, now, false)?;
        }
        for n in std::mem::take(&mut self.hca_reload) {
            if let Some(a) = self.adm.as_ref().and_then(|a| a.arbiter(a.injection(n))) {
                net.set_hca_arbiter(n, a);
            }
        }
        for l in std::mem::take(&mut self.out_reload) {
            let adm = self.adm.as_ref();
            if let Some(((r, p), a)) = adm.and_then(|a| Some((a.router_port(l)?, a.arbiter(l)?))) {
                net.set_output_arbiter(r, p, a);
            }
        }
        for p in std::mem::take(&mut self.to_post) {
            self.post_protocol(p, net, now)?;
        }
        while self
            .requests
            .peek()
            .is_some_and(|&Reverse((t, _))| t <= now)
        {
            let Reverse((_, c)) = self.requests.pop().expect("checked");
            let t = self.time(now);
            let req = self.request(c);
            let Some(adm) = &mut self.adm else {
                self.collector.set_up(t, t, true);
                self.start(c, now);
                continue;
            };
            match adm.ledger.at_source(&self.paths[c as usize], &req)? {
                Err(_) => {
                    self.state[c as usize] = Conn::Refused;
                    self.collector.set_up(t, t, false);
                    self.next_session(c, now);
                }
                Ok(u) => {
                    if u.changed {
                        let src = self.wl.connections()[c as usize].src;
                        if let Some(a) = adm.arbiter(adm.injection(src)) {
                            net.set_hca_arbiter(src, a);
                        }
                    }
                    self.state[c as usize] = Conn::Probing(now);
                    let p = self.probe(c, Kind::Probe, 0);
                    self.post_protocol(p, net, now)?;
                }
            }
        }
        while let Some(&Reverse((at, _, s))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            let Some(m) = self.next[s as usize].take() else {
                continue;
            };
            if let Some(h) = self.holder(&m) {
                let depth = self.cfg.hca.send_depth;
                let room = self
                    .adapters
                    .borrow()
                    .has_room(m.src, m.class, m.conn, depth);
                let c = self.credits.as_mut().expect("a holder has credits");
                if room && c.take(h) {
                    self.post_held(m, Some(h), net, now)?;
                    self.push_source(s);
                    continue;
                }
                if room {
                    if m.class == TrafficClass::BestEffort {
                        // Waits on its CQ; the consumer goes on with its next message.
                        c.wait(h, m);
                        self.push_source(s);
                    } else {
                        // A real-time consumer drops the attempt and tries the same
                        // message again every `retry` (§4.2); its attempts before
                        // its credit is back are counted when the credit returns
                        // ([`Driver::unpark`]).
                        c.rt_refusals += 1;
                        self.next[s as usize] = Some(m);
                        if let Some(k) = m.conn {
                            self.parked[k as usize] = Some(now);
                        }
                    }
                    continue;
                }
            }
            if self.post_message(m, net, now)? {
                self.push_source(s);
            } else if m.class == TrafficClass::RealTime {
                // A full send queue drops a real-time message (§4.2).
                self.dropped += 1;
                self.push_source(s);
                if let (true, Some(c)) = (m.last, m.conn) {
                    // The final packet was dropped: release along the path.
                    self.end(c, now, false)?;
                }
            } else {
                // A best-effort or control consumer waits and retries.
                self.next[s as usize] = Some(m);
                self.seq += 1;
                self.heap.push(Reverse((now + 1, self.seq, s)));
            }
        }
        Ok(())
    }

    fn on_delivered(&mut self, d: &Delivered) -> Result<(), IbaError> {
        if d.kind == Kind::Final {
            self.on_final_delivered(d)?;
        }
        match d.kind {
            Kind::Data | Kind::Final => {
                if let Some(m) = self.inflight.get_mut(d.tag as usize).and_then(|m| m.take()) {
                    self.free.push(d.tag);
                    let at = self.time(d.at);
                    self.collector.delivered(&m, at);
                    self.collector.queued(
                        &m,
                        self.time(d.injected).saturating_since(self.time(d.created)),
                    );
                    self.collector
                        .posted(&m, at.saturating_since(self.time(d.created)));
                    self.collector
                        .in_network(&m, at.saturating_since(self.time(d.injected)));
                    self.collector.received(m.class, d.len, at);
                    if let Some(t) = &self.throttle {
                        t.borrow_mut().delivered(d.len);
                    }
                    if self.cfg.hca.completion == Completion::Acknowledged {
                        if let Some(h) = self
                            .credit_of
                            .get_mut(d.tag as usize)
                            .and_then(|h| h.take())
                        {
                            self.acknowledge(&m, h);
                        }
                    }
                    let bytes = d.len as u64 * self.cfg.network.flit_bytes() as u64;
                    self.adapters
                        .borrow_mut()
                        .arrived(m.dst, m.class, m.conn, bytes, d.at);
                }
            }
            Kind::Ack if d.aux == DATA_ACK => {
                if let Some(h) = self.acks.get_mut(d.tag as usize).and_then(|h| h.take()) {
                    self.data_acks += 1;
                    self.free_acks.push(d.tag);
                    self.returned.push(h);
                }
            }
            Kind::Ack | Kind::Nack => self.on_answer(d)?,
            _ => {}
        }
        Ok(())
    }
}

impl Hooks for Driver<'_> {
    fn header(&mut self, h: &Header, at: &Place, out: &mut Outputs<'_>) -> Verdict {
        match self.on_header(h, at, out) {
            Ok(v) => v,
            Err(e) => {
                self.error.get_or_insert(e);
                Verdict::Pass
            }
        }
    }

    fn delivered(&mut self, d: &Delivered) {
        if let Err(e) = self.on_delivered(d) {
            self.error.get_or_insert(e);
        }
    }

    fn injected(&mut self, d: &Delivered) {
        self.adapters
            .borrow_mut()
            .injected(d.src as usize, d.slot, d.at);
        if matches!(d.kind, Kind::Data | Kind::Final) {
            let bytes = d.len as u64 * self.cfg.network.flit_bytes() as u64;
            for g in &self.gates {
                g.borrow_mut().injected(d.src, d.slot, bytes, d.at);
            }
            if self.cfg.hca.completion == Completion::Injected {
                self.completed(d.tag);
            }
        }
        if d.kind == Kind::Final {
            if let Err(e) = self.on_final_injected(d) {
                self.error.get_or_insert(e);
            }
        }
    }

    fn cycle<N: Net>(&mut self, now: u64, net: &mut Poster<'_, N>) -> Result<(), FlitError> {
        if let Some(t) = &self.throttle {
            t.borrow_mut().update(now, net);
        }
        self.step(now, net).map_err(|e| match e {
            IbaError::Flit(f) => f,
            e => FlitError::config("iba", e.to_string()),
        })
    }

    fn period(&self) -> u64 {
        let m = self.meter.as_ref().map_or(0, |m| m.period());
        let h = self.herd.as_ref().map_or(0, |h| h.window);
        gcd(m, h)
    }

    fn periodic<N: Net>(&mut self, now: u64, net: &mut Poster<'_, N>) {
        if let Some(m) = &mut self.meter {
            if now.is_multiple_of(m.period()) {
                let (injected, hops) = net.flit_counts();
                m.sample(now, injected, hops);
            }
        }
        if let (Some(h), Some(g)) = (&mut self.herd, net.governor()) {
            if now > 0 && now.is_multiple_of(h.window) {
                h.exchange(g);
            }
        }
    }

    fn next_time(&self, _now: u64) -> Option<u64> {
        let r = self.requests.peek().map(|&Reverse((t, _))| t);
        let m = self.heap.peek().map(|&Reverse((t, _, _))| t);
        let soon = (!self.to_post.is_empty()
            || !self.returned.is_empty()
            || !self.adapters.borrow().dma_completed.is_empty()
            || !self.hca_reload.is_empty()
            || !self.to_end.is_empty()
            || !self.out_reload.is_empty())
        .then_some(0);
        [r, m, soon].into_iter().flatten().min()
    }
}

/// The greatest common divisor (0 with 0 gives the other).
fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
