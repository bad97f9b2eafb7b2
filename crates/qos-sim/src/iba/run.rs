//! One run of a Yum cluster at one offered load: the flit network built from the
//! configuration, driven through its hooks ([`crate::flit::hooks`]) by a policy that
//! plays every consumer and HCA — it posts the workload's messages as WQEs on queue
//! pairs ([`super::hca`]), sets up real-time connections with probes (§4.1), charges
//! and releases reservations in the routers as probes, releases and final packets
//! pass ([`super::admission`]), reloads the VL arbiters with the WRR weights of the
//! admitted connections (§3.3), and measures ([`super::metrics`]).
//!
//! The protocol, hop by hop: at its request time a connection's source HCA checks its
//! own link (a refusal is answered at once); the probe, a one-flit packet on VL15,
//! is checked by every router on its way; the destination's router turns it into an
//! ACK, a router without room into a NACK carrying its hop, both routed back to the
//! source by the routing function. On the ACK the source starts sending; on a NACK it
//! releases its link and sends a release, absorbed by the router before the rejecting
//! one. Without admission control every connection sends from its request time.
//!
//! Frames are counted when produced in the measurement window, less two frame times
//! at its end, so that every counted frame's packets are posted inside the window and
//! are waited for by the drain.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;

use qos_core::admission::probe::{
    release_visits, Path, ProbeError, ProbeVerdict, Rejecter, Request,
};
use qos_core::iba::queues::QueueError;
use qos_core::units::Time;
use serde::Serialize;

use super::admission::{unweighted, Admission};
use super::config::{IbaConfig, Pipeline, Shape};
use super::hca::{Adapters, QpGate};
use super::metrics::{Collector, Measures};
use super::traffic::{Message, TrafficClass, Workload};
use crate::flit::config::{
    ClassConfig, DelayPreset, DelaySpec, FlitConfig, HcaConfig, HcaModel, Pattern, Phases, Process,
    RouterConfig, TopologySpec,
};
use crate::flit::hooks::{Delivered, Header, Hooks, Kind, Outputs, Place, Post, Poster, Verdict};
use crate::flit::{FlitError, Network};

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum IbaError {
    /// The flit network refused the configuration or deadlocked.
    #[error(transparent)]
    Flit(#[from] FlitError),
    /// A queue-pair operation failed.
    #[error("HCA queues: {0}")]
    Queue(#[from] QueueError),
    /// The reservation ledger was misused (a bug, reported rather than hidden).
    #[error("admission: {0}")]
    Probe(#[from] ProbeError),
}

/// What one run produced.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutput {
    /// The offered load.
    pub load: f64,
    /// DMP, DMT, latencies, rejections.
    pub measures: Measures,
    /// Real-time connections in the workload.
    pub connections: usize,
    /// Real-time messages dropped at a full send queue.
    pub dropped: u64,
    /// Mean and highest utilisation of the cabled router links.
    pub link_utilisation_avg: f64,
    /// Highest link utilisation.
    pub link_utilisation_max: f64,
    /// Cycles simulated.
    pub cycles: u64,
    /// Flit hops simulated.
    pub flit_hops: u64,
    /// Measured packets did not all drain in time.
    pub saturated: bool,
    /// Highest reservation on any link at the end, a fraction of its capacity (0
    /// without admission control).
    pub reserved_max: f64,
    /// Flits moved per wall-clock second are the caller's to measure; this is the
    /// fabric's size.
    pub routers: u32,
}

/// The flit network of `cfg`: its topology, Yum's (or BookSim's) router, the HCA, the
/// three traffic classes (control on VL15, real time, best effort; indices as
/// [`TrafficClass`]), no traffic of its own, the phases in cycles.
pub fn flit_config(cfg: &IbaConfig, seed: u64) -> FlitConfig {
    let n = &cfg.network;
    let arb = unweighted(&n.lanes, &cfg.arbitration);
    let class = |name: &str, vls: Vec<u8>, len: u32, priority: u8| ClassConfig {
        name: name.into(),
        vls,
        packet_flits: len,
        priority,
        rate: 0.0,
        process: Process::Poisson,
        pattern: Pattern::UniformOthers,
        keep_lane: true,
    };
    FlitConfig {
        topology: match n.topology {
            Shape::Crossbar { ports } => TopologySpec::Crossbar { ports },
            Shape::Mesh { k } => TopologySpec::Mesh { k },
        },
        router: RouterConfig {
            buffer: n.vl_buffer,
            delays: DelaySpec::Preset(match n.pipeline {
                Pipeline::Yum => DelayPreset::Yum,
                Pipeline::Booksim => DelayPreset::Booksim,
            }),
            allocator: n.crossbar.allocator(),
            output_arbitration: arb.clone(),
            input_arbitration: qos_core::vlarb::VlArbConfig::RoundRobin,
        },
        hca: HcaConfig {
            model: HcaModel::Dma,
            vl_buffer: Some(cfg.hca.vl_buffer),
            arbitration: arb,
        },
        classes: vec![
            class("control", vec![15], cfg.workload.control.packet_flits, 3),
            class(
                "real-time",
                n.lanes.real_time.clone(),
                cfg.workload.packet_flits,
                2,
            ),
            class(
                "best-effort",
                n.lanes.best_effort.clone(),
                cfg.workload.packet_flits,
                1,
            ),
        ],
        streams: vec![],
        phases: Phases {
            drain_max: n.cycles(cfg.run.drain).max(1),
            ..Phases::new(n.cycles(cfg.run.warmup), n.cycles(cfg.run.measure).max(1))
        },
        seed,
        watchdog: 100_000,
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;

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
struct Driver<'a> {
    cfg: &'a IbaConfig,
    wl: Workload,
    cycle_ps: u64,
    adapters: Rc<RefCell<Adapters>>,
    adm: Option<Admission>,
    paths: Vec<Path>,
    state: Vec<Conn>,
    /// Connection requests, latest first (popped from the end).
    requests: Vec<(u64, u32)>,
    /// Message sources: 0 the background, 1 + c connection c. Heap of (cycle, seq,
    /// source) of each source's next message.
    sources: Vec<Option<Box<dyn Iterator<Item = Message> + Send>>>,
    next: Vec<Option<Message>>,
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    /// Messages in flight, by the tag they carry.
    inflight: Vec<Option<Message>>,
    free: Vec<u32>,
    /// Protocol packets to post and HCA arbiters to reload at the next cycle.
    to_post: Vec<Post>,
    hca_reload: Vec<u32>,
    collector: Collector,
    dropped: u64,
    error: Option<IbaError>,
}

impl Driver<'_> {
    fn time(&self, cycle: u64) -> Time {
        Time::from_ps(cycle.saturating_mul(self.cycle_ps))
    }

    fn cycle_of(&self, t: Time) -> u64 {
        t.as_ps().div_ceil(self.cycle_ps)
    }

    fn request(&self, c: u32) -> Request {
        let k = &self.wl.connections()[c as usize];
        Request {
            conn: c,
            avg: k.solicit,
            peak: k.peak,
            lane: k.lane,
        }
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
        let s = c + 1;
        self.sources[s as usize] = Some(self.wl.stream(c, self.time(now)));
        self.push_source(s);
    }

    /// Posts one message as a WQE; `false` when its send queue is full.
    fn post_message(
        &mut self,
        m: Message,
        net: &mut Poster<'_>,
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
            kind: Kind::Data,
            tag,
            aux: 0,
        })?;
        let bytes = m.flits as u64 * self.cfg.network.flit_bytes() as u64;
        self.adapters
            .borrow_mut()
            .post(m.src, m.class, m.conn, slot, bytes, m.dst, now)?;
        Ok(true)
    }

    /// A protocol packet from `src`'s HCA, on its control QP.
    fn post_protocol(&mut self, p: Post, net: &mut Poster<'_>, now: u64) -> Result<(), IbaError> {
        let slot = net.post(p)?;
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

    fn probe(&self, c: u32, kind: Kind, aux: u32) -> Post {
        let k = &self.wl.connections()[c as usize];
        Post {
            src: k.src,
            dst: k.dst,
            class: TrafficClass::Control as u8,
            vl: 15,
            len: 1,
            kind,
            tag: c,
            aux,
        }
    }

    fn step(&mut self, now: u64, net: &mut Poster<'_>) -> Result<(), IbaError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for n in std::mem::take(&mut self.hca_reload) {
            if let Some(a) = self.adm.as_ref().and_then(|a| a.arbiter(a.injection(n))) {
                net.set_hca_arbiter(n, a);
            }
        }
        for p in std::mem::take(&mut self.to_post) {
            self.post_protocol(p, net, now)?;
        }
        while self.requests.last().is_some_and(|&(t, _)| t <= now) {
            let (_, c) = self.requests.pop().expect("checked");
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
            if self.post_message(m, net, now)? {
                self.push_source(s);
            } else if m.class == TrafficClass::RealTime {
                // A full send queue drops a real-time message (§4.2).
                self.dropped += 1;
                self.push_source(s);
            } else {
                // A best-effort or control consumer waits and retries.
                self.next[s as usize] = Some(m);
                self.seq += 1;
                self.heap.push(Reverse((now + 1, self.seq, s)));
            }
        }
        Ok(())
    }

    fn on_header(
        &mut self,
        h: &Header,
        at: &Place,
        out: &mut Outputs<'_>,
    ) -> Result<Verdict, IbaError> {
        let Some(adm) = &mut self.adm else {
            return Ok(Verdict::Pass);
        };
        if !matches!(h.kind, Kind::Probe | Kind::Release | Kind::Final) {
            return Ok(Verdict::Pass);
        }
        let c = match h.kind {
            Kind::Final => match self.inflight.get(h.tag as usize).copied().flatten() {
                Some(m) => match m.conn {
                    Some(c) => c,
                    None => return Ok(Verdict::Pass),
                },
                None => return Ok(Verdict::Pass),
            },
            _ => h.tag,
        };
        let path = &self.paths[c as usize];
        let link = adm.output(at.router, at.out_port);
        let Some(hop) = Admission::hop(path, link) else {
            return Ok(Verdict::Pass);
        };
        let k = &self.wl.connections()[c as usize];
        let req = Request {
            conn: c,
            avg: k.solicit,
            peak: k.peak,
            lane: k.lane,
        };
        let (verdict, update) = match h.kind {
            Kind::Probe => {
                let (v, u) = adm.ledger.at_router(path, hop, &req)?;
                let v = match v {
                    ProbeVerdict::Forward => Verdict::Pass,
                    ProbeVerdict::Ack => Verdict::TurnAround {
                        kind: Kind::Ack,
                        aux: 0,
                    },
                    ProbeVerdict::Nack(_) => Verdict::TurnAround {
                        kind: Kind::Nack,
                        aux: hop as u32,
                    },
                };
                (v, u)
            }
            Kind::Release => {
                let u = adm.ledger.release_at_router(path, hop, &req)?;
                let v = if release_visits(hop + 1, Rejecter::Router(h.aux as u16)) {
                    Verdict::Pass
                } else {
                    Verdict::Absorb
                };
                (v, u)
            }
            _ => (
                Verdict::Pass,
                adm.ledger.release_at_router(path, hop, &req)?,
            ),
        };
        if update.changed {
            if let Some(a) = adm.arbiter(link) {
                out.set(at.out_port, a);
            }
        }
        Ok(verdict)
    }

    fn on_delivered(&mut self, d: &Delivered) -> Result<(), IbaError> {
        match d.kind {
            Kind::Data | Kind::Final => {
                if let Some(m) = self.inflight.get_mut(d.tag as usize).and_then(|m| m.take()) {
                    self.free.push(d.tag);
                    let at = self.time(d.at);
                    self.collector.delivered(&m, at);
                    let bytes = d.len as u64 * self.cfg.network.flit_bytes() as u64;
                    self.adapters
                        .borrow_mut()
                        .arrived(m.dst, m.class, m.conn, bytes, d.at);
                }
            }
            Kind::Ack => {
                let c = d.tag;
                if let Conn::Probing(t0) = self.state[c as usize] {
                    self.collector.set_up(self.time(t0), self.time(d.at), true);
                    self.start(c, d.at);
                }
            }
            Kind::Nack => {
                let c = d.tag;
                if let Conn::Probing(t0) = self.state[c as usize] {
                    self.state[c as usize] = Conn::Refused;
                    self.collector.set_up(self.time(t0), self.time(d.at), false);
                    let req = self.request(c);
                    if let Some(adm) = &mut self.adm {
                        let u = adm
                            .ledger
                            .release_at_source(&self.paths[c as usize], &req)?;
                        if u.changed {
                            self.hca_reload.push(self.wl.connections()[c as usize].src);
                        }
                    }
                    if release_visits(0, Rejecter::Router(d.aux as u16)) {
                        self.to_post.push(self.probe(c, Kind::Release, d.aux));
                    }
                }
            }
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
    }

    fn cycle(&mut self, now: u64, net: &mut Poster<'_>) -> Result<(), FlitError> {
        self.step(now, net).map_err(|e| match e {
            IbaError::Flit(f) => f,
            e => FlitError::config("iba", e.to_string()),
        })
    }

    fn next_time(&self, _now: u64) -> Option<u64> {
        let r = self.requests.last().map(|&(t, _)| t);
        let m = self.heap.peek().map(|&Reverse((t, _, _))| t);
        let soon = (!self.to_post.is_empty() || !self.hca_reload.is_empty()).then_some(0);
        [r, m, soon].into_iter().flatten().min()
    }
}

/// Runs `cfg` (validated) at offered `load` with `seed`; `progress` hears the cycle.
pub fn run(
    cfg: &IbaConfig,
    load: f64,
    seed: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<RunOutput, IbaError> {
    let fc = flit_config(cfg, seed);
    let mut net = Network::new(&fc)?;
    let fab = net.fabric().clone();
    let wl = Workload::new(cfg, load, seed);
    let mut adapters = Adapters::new(fab.nodes, &cfg.hca)?;
    for c in wl.connections() {
        adapters.open(c.id, c.src, c.dst, &cfg.hca)?;
    }
    let adapters = Rc::new(RefCell::new(adapters));
    net.set_injection_gate(Box::new(QpGate(adapters.clone())));
    let adm = cfg.admission.enabled.then(|| Admission::new(&fab, cfg));
    let paths = match &adm {
        Some(a) => wl
            .connections()
            .iter()
            .map(|c| a.path(&fab, c.src, c.dst))
            .collect(),
        None => Vec::new(),
    };
    let cycle_ps = cfg.network.cycle().as_ps();
    let w0 = fc.phases.warmup;
    let w1 = w0 + fc.phases.measure;
    let period = wl.longest_frame_period();
    let from = Time::from_ps(w0 * cycle_ps);
    let until = Time::from_ps(w1 * cycle_ps);
    let frames_until = Time::from_ps(
        until
            .as_ps()
            .saturating_sub(2 * period.as_ps())
            .max(from.as_ps() + 1),
    );
    let mut requests: Vec<(u64, u32)> = wl
        .connections()
        .iter()
        .map(|c| (c.request_at.as_ps().div_ceil(cycle_ps), c.id))
        .collect();
    requests.sort_unstable_by(|a, b| b.cmp(a));
    let n = wl.connections().len();
    let mut d = Driver {
        cfg,
        cycle_ps,
        adapters,
        adm,
        paths,
        state: vec![Conn::Idle; n],
        requests,
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
        collector: Collector::with_frames(from, until, frames_until, cfg.run.batches),
        dropped: 0,
        error: None,
        wl,
    };
    d.push_source(0);
    let r = net.run_hooked(&mut d, progress)?;
    if let Some(e) = d.error.take() {
        return Err(e);
    }
    let reserved_max = d.adm.as_ref().map_or(0.0, |a| {
        (0..a.ledger.len() as u32)
            .map(qos_core::admission::probe::LinkId)
            .filter(|&l| !a.ledger.capacity(l).is_zero())
            .map(|l| {
                a.ledger.reserved(l).bytes_per_sec() as f64
                    / a.ledger.capacity(l).bytes_per_sec() as f64
            })
            .fold(0.0, f64::max)
    });
    let routers = net.fabric().routers;
    Ok(RunOutput {
        load,
        measures: d.collector.finish(),
        connections: n,
        dropped: d.dropped,
        link_utilisation_avg: r.link_utilisation_avg,
        link_utilisation_max: r.link_utilisation_max,
        cycles: r.cycles,
        flit_hops: r.flit_hops,
        saturated: r.saturated,
        reserved_max,
        routers,
    })
}
