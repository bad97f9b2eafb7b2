//! The cycle-driven core of the flit network: input-buffered wormhole routers with
//! virtual lanes and credit flow control (Yum §3.1, Fig 1), kept as flat arrays.
//!
//! Layout (struct of arrays, indices not pointers): a *global port* `g` numbers every
//! router port; an *input VC* is `g * lanes + vl`. Each input VC owns a fixed ring of
//! `buffer` flit words (packet index plus head/tail bits) with the cycle each flit
//! becomes ready, its wormhole state (output port and output VL held by the packet in
//! it) and the credit count its upstream sender sees, with a ring of credits still on
//! their way back. No flit is ever allocated: a flit is a `u32` in a ring.
//!
//! Timing. A flit granted the crossbar at cycle `s` is written into the downstream ring
//! at once, with ready time `s + switch_alloc + crossbar + link + sync (+ route if it is
//! a header)`; the slot was already reserved by the credit, so writing early is safe,
//! and since every delay into another router is at least one cycle, routers can be
//! stepped in any order with the same result. A header flit at the front of its VC at
//! its ready time is routed and tries VL allocation; on success it may request the
//! crossbar `vl_alloc` cycles later. Body and tail flits follow the path their header
//! holds. Each cycle every input port's VL arbiter picks one eligible lane (stage 4
//! input scheduler) and each output port's VL arbiter picks one of the lanes requesting
//! it (stage 5 link multiplexer) — with one request per output VL (wormhole) this is
//! exactly VL arbitration of the link. A popped flit's credit reaches the upstream
//! `credit` cycles later. Zero-load packet latency is therefore
//! `H · per_hop + link + 1 + (L − 1)` for H routers and L flits (the 1 is the HCA's
//! DMA of the first flit).
//!
//! Only routers holding flits are stepped (an active list), and a cycle with nothing
//! active skips ahead to the next packet arrival.

use qos_core::vlarb::{AnyVlArbiter, RoundRobin, VlArbiter, CONTROL_VL};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::config::{Delays, FlitConfig};
use super::hca::Hcas;
use super::stats::{ClassResult, Collector, FlowResult, Latency, RunResult};
use super::topology::{Fabric, Link, NO_PORT};
use super::traffic::{Arrival, Traffic};
use super::FlitError;

/// Header flit bit of a flit word.
pub(super) const HEAD: u32 = 1 << 31;
/// Tail flit bit of a flit word.
pub(super) const TAIL: u32 = 1 << 30;
/// Packet index bits of a flit word.
pub(super) const PKT: u32 = TAIL - 1;
/// Mask bit of the management lane VL15, which always wins arbitration.
const CONTROL_BIT: u32 = 1 << CONTROL_VL;
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
    free: Vec<u32>,
}

impl Packets {
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
        Ok(i)
    }
    pub fn release(&mut self, i: u32) {
        self.free.push(i);
    }
}

/// Wormhole state of one input VC (one cache line holds several).
#[derive(Debug, Clone, Copy)]
struct InVc {
    /// Ready cycle of the front flit.
    front_ready: u64,
    /// Cycle from which the packet holding an output lane may request the crossbar.
    sa_ready: u64,
    /// Ring head and length.
    head: u16,
    len: u16,
    /// Output port (local) and output lane held, or `NO_PORT` / `NO_LANE`.
    out: u8,
    ovl: u8,
}

/// Credit state of one output VC: free slots at the far end that the sender knows of,
/// and credits still travelling back (their arrival cycles in a ring).
#[derive(Debug, Clone, Copy)]
struct OutVc {
    credits: u16,
    ring_head: u16,
    ring_len: u16,
}

/// State of one global port (input side and output side of the same port number).
#[derive(Debug, Clone, Copy)]
struct Port {
    /// Input VCs holding flits.
    nonempty: u32,
    /// Input VCs not asleep: a VC whose output VC has no credit and none on the way
    /// sleeps until a credit comes back for that output VC; a header with no free
    /// output lane sleeps until a tail leaves that output.
    awake: u32,
    /// Output lanes held by a packet.
    busy: u32,
    /// Next output lane VL allocation tries first.
    va_next: u8,
    /// Round-robin pointers of the input and output arbiters (fast path).
    in_rr: u8,
    out_rr: u8,
    /// Router owning the port.
    router: u32,
    /// Output port (global; HCAs after the routers' ports) feeding this input port.
    upstream: u32,
    /// First input VC at the far end of this output port, or `u32::MAX` for an HCA.
    down_vc: u32,
}

/// The network state.
pub struct Network {
    pub(super) fab: Fabric,
    /// Lane slots per port (a power of two) and its log2.
    pub(super) lanes: usize,
    lshift: u32,
    /// Flits per VL buffer.
    pub(super) cap: usize,
    pub(super) d: Delays,
    // Per input VC: hot state together, flit rings apart.
    vc: Vec<InVc>,
    buf: Vec<u32>,
    rdy: Vec<u64>,
    // Per output VC (router output ports, then one virtual port per HCA): credits.
    out: Vec<OutVc>,
    cring: Vec<u64>,
    /// Per global port: everything a flit hop touches, in one place.
    port: Vec<Port>,
    /// Input VC holding each router output VC (the one a returning credit may wake).
    holder: Vec<u32>,
    /// Input VCs (bit `port * lanes + lane` of the router) whose header waits for a
    /// free lane of each output port, asleep until a tail leaves it.
    va_wait: Vec<u128>,
    /// Input / output arbiters are plain round-robin (fast path on `Port` pointers).
    in_rr: bool,
    out_rr: bool,
    in_arb: Vec<AnyVlArbiter>,
    out_arb: Vec<AnyVlArbiter>,
    // Per router.
    rflits: Vec<u32>,
    queued: Vec<u64>,
    active: Vec<u32>,
    next_active: Vec<u32>,
    // Scratch for one router step.
    req: Vec<u32>,
    req_src: Vec<u16>,
    // Per class.
    pub(super) class_mask: Vec<u32>,
    pub(super) class_lo: Vec<u32>,
    class_hi: Vec<u32>,
    pub(super) class_len: Vec<u32>,
    pub(super) pk: Packets,
    pub(super) hca: Hcas,
    traffic: Traffic,
    pub(super) rng: ChaCha8Rng,
    // Phases and statistics.
    pub(super) window: (u64, u64),
    pub(super) stats: Collector,
    pub(super) outstanding: u64,
    pub(super) in_network: u64,
    pub(super) moved: u64,
    pub(super) flit_hops: u64,
    cfg: FlitConfig,
}

impl Network {
    /// Builds the network for a validated `cfg`.
    pub fn new(cfg: &FlitConfig) -> Result<Network, FlitError> {
        cfg.validate()?;
        let fab = Fabric::build(&cfg.topology);
        let max_vl = cfg
            .classes
            .iter()
            .flat_map(|c| c.vls.iter().copied())
            .max()
            .unwrap_or(0) as usize;
        // A power of two, so VC indices split into port and lane by shifts.
        let lanes = (max_vl + 1).next_power_of_two();
        let cap = cfg.router.buffer as usize;
        let ports = fab.total_ports();
        let nvc = ports * lanes;
        let nout = (ports + fab.nodes as usize) * lanes;
        let mut upstream = vec![u32::MAX; ports];
        let mut down_vc = vec![u32::MAX; ports];
        for (g, l) in fab.link.iter().enumerate() {
            if let Link::Router(gi) = *l {
                upstream[gi as usize] = g as u32;
                down_vc[g] = gi * lanes as u32;
            }
        }
        for (n, &gi) in fab.hca_port.iter().enumerate() {
            upstream[gi as usize] = (ports + n) as u32;
        }
        let arb = |c: &qos_core::vlarb::VlArbConfig| {
            c.build().map_err(|e| FlitError::Config(e.to_string()))
        };
        let in_proto = arb(&cfg.router.input_arbitration)?;
        let out_proto = arb(&cfg.router.output_arbitration)?;
        let mut class_mask = Vec::new();
        let mut class_lo = Vec::new();
        let mut class_hi = Vec::new();
        for c in &cfg.classes {
            let mut v = c.vls.clone();
            v.sort_unstable();
            let half = v.len().div_ceil(2);
            let m = |s: &[u8]| s.iter().fold(0u32, |m, &l| m | 1 << l);
            class_mask.push(m(&v));
            if fab.dateline {
                class_lo.push(m(&v[..half]));
                class_hi.push(m(&v[half..]));
            } else {
                class_lo.push(m(&v));
                class_hi.push(m(&v));
            }
        }
        let max_ports = fab.ports.iter().copied().max().unwrap_or(1) as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let traffic = Traffic::new(cfg, &mut rng);
        let hca = Hcas::new(cfg, fab.nodes as usize, lanes)?;
        let w0 = cfg.phases.warmup;
        let classes = cfg.classes.len();
        Ok(Network {
            lanes,
            lshift: lanes.trailing_zeros(),
            cap,
            d: cfg.router.delays.delays(),
            vc: vec![
                InVc {
                    front_ready: 0,
                    sa_ready: 0,
                    head: 0,
                    len: 0,
                    out: NO_PORT,
                    ovl: NO_LANE,
                };
                nvc
            ],
            buf: vec![0; nvc * cap],
            rdy: vec![0; nvc * cap],
            out: vec![
                OutVc {
                    credits: cap as u16,
                    ring_head: 0,
                    ring_len: 0,
                };
                nout
            ],
            cring: vec![0; nout * cap],
            port: (0..ports)
                .map(|g| Port {
                    nonempty: 0,
                    awake: u32::MAX,
                    busy: 0,
                    va_next: 0,
                    in_rr: 0,
                    out_rr: 0,
                    router: fab.port_router[g],
                    upstream: upstream[g],
                    down_vc: down_vc[g],
                })
                .collect(),
            holder: vec![u32::MAX; nvc],
            va_wait: vec![0; ports],
            in_rr: matches!(
                cfg.router.input_arbitration,
                qos_core::vlarb::VlArbConfig::RoundRobin
            ),
            out_rr: matches!(
                cfg.router.output_arbitration,
                qos_core::vlarb::VlArbConfig::RoundRobin
            ),
            in_arb: vec![in_proto; ports],
            out_arb: vec![out_proto; ports],
            rflits: vec![0; fab.routers as usize],
            queued: vec![u64::MAX; fab.routers as usize],
            active: Vec::with_capacity(fab.routers as usize),
            next_active: Vec::with_capacity(fab.routers as usize),
            req: vec![0; max_ports],
            req_src: vec![0; max_ports * lanes],
            class_mask,
            class_lo,
            class_hi,
            class_len: cfg.classes.iter().map(|c| c.packet_flits).collect(),
            pk: Packets::default(),
            hca,
            traffic,
            rng,
            window: (w0, w0 + cfg.phases.measure),
            stats: Collector::new(classes, cfg.streams.len(), ports),
            outstanding: 0,
            in_network: 0,
            moved: 0,
            flit_hops: 0,
            cfg: cfg.clone(),
            fab,
        })
    }

    /// The fabric.
    pub fn fabric(&self) -> &Fabric {
        &self.fab
    }

    /// Queues router `r` for the next cycle.
    #[inline]
    pub(super) fn activate(&mut self, r: usize, next: u64) {
        if self.queued[r] != next {
            self.queued[r] = next;
            self.next_active.push(r as u32);
        }
    }

    /// Whether output VC `ovc` has a credit at `now` (collecting credits that arrived).
    #[inline]
    pub(super) fn credit_available(&mut self, ovc: usize, now: u64) -> bool {
        let o = &mut self.out[ovc];
        if o.credits > 0 {
            return true;
        }
        let cap = self.cap;
        while o.ring_len > 0 {
            let h = o.ring_head as usize;
            if self.cring[ovc * cap + h] > now {
                break;
            }
            o.credits += 1;
            o.ring_head = if h + 1 == cap { 0 } else { h as u16 + 1 };
            o.ring_len -= 1;
        }
        o.credits > 0
    }

    /// Writes flit `word`, sent through output VC `ovc`, into input VC `ivc` of router
    /// `r`, ready at `ready`.
    #[inline]
    pub(super) fn push_flit(
        &mut self,
        r: usize,
        ovc: usize,
        ivc: usize,
        word: u32,
        ready: u64,
        now: u64,
    ) {
        let cap = self.cap;
        let v = &mut self.vc[ivc];
        let mut at = v.head as usize + v.len as usize;
        if at >= cap {
            at -= cap;
        }
        if v.len == 0 {
            v.front_ready = ready;
        }
        v.len += 1;
        self.buf[ivc * cap + at] = word;
        self.rdy[ivc * cap + at] = ready;
        self.out[ovc].credits -= 1;
        self.port[ivc >> self.lshift].nonempty |= 1 << (ivc & (self.lanes - 1));
        self.rflits[r] += 1;
        self.activate(r, now + 1);
    }

    /// One cycle of router `r`: route and VL-allocate headers, arbitrate inputs then
    /// outputs, move the winners.
    fn step_router(&mut self, r: usize, now: u64) {
        let lanes = self.lanes;
        let cap = self.cap;
        let base = self.fab.port_base[r] as usize;
        let np = self.fab.ports[r] as usize;
        let nodes = self.fab.nodes as usize;
        let mut want: u64 = 0;
        let mut busy = false;
        for p in 0..np {
            let g = base + p;
            let pg = self.port[g];
            let mut m = pg.nonempty & pg.awake;
            busy |= m != 0;
            let mut elig = 0u32;
            while m != 0 {
                let lane = m.trailing_zeros() as usize;
                m &= m - 1;
                let ivc = g * lanes + lane;
                let v = self.vc[ivc];
                if v.front_ready > now {
                    continue;
                }
                let (op, ovl) = if v.ovl == NO_LANE {
                    // Header at the front: route, then ask for an output VL.
                    let pkt = (self.buf[ivc * cap + v.head as usize] & PKT) as usize;
                    let op = self.fab.route[r * nodes + self.pk.dst[pkt] as usize] as usize;
                    let gout = base + op;
                    let cls = self.pk.class[pkt] as usize;
                    let mut allowed = self.class_mask[cls] & !self.port[gout].busy;
                    if self.fab.dateline && self.fab.dim[gout] != NO_PORT {
                        let upper = self.class_hi[cls] & (1 << lane) != 0
                            && self.class_lo[cls] & (1 << lane) == 0;
                        let stay = self.fab.dim[gout] == self.fab.dim[g] && upper;
                        allowed &= if self.fab.wrap[gout] || stay {
                            self.class_hi[cls]
                        } else {
                            self.class_lo[cls]
                        };
                    }
                    let Some(ovl) = RoundRobin::first_from(allowed, self.port[gout].va_next as u32)
                    else {
                        // No free output lane: sleep until a tail leaves this output.
                        let bit = p * lanes + lane;
                        if bit < 128 {
                            self.va_wait[gout] |= 1 << bit;
                            self.port[g].awake &= !(1 << lane);
                        }
                        continue;
                    };
                    self.port[gout].busy |= 1 << ovl;
                    self.port[gout].va_next = ovl as u8 + 1;
                    self.holder[gout * lanes + ovl] = ivc as u32;
                    let sa = now + self.d.vl_alloc as u64;
                    let w = &mut self.vc[ivc];
                    w.out = op as u8;
                    w.ovl = ovl as u8;
                    w.sa_ready = sa;
                    if sa > now {
                        continue;
                    }
                    (op, ovl)
                } else {
                    if v.sa_ready > now {
                        continue;
                    }
                    (v.out as usize, v.ovl as usize)
                };
                let gout = base + op;
                let ovc = gout * lanes + ovl;
                if self.port[gout].down_vc != u32::MAX && !self.credit_available(ovc, now) {
                    if self.out[ovc].ring_len == 0 {
                        self.port[g].awake &= !(1 << lane);
                    }
                    continue;
                }
                elig |= 1 << lane;
            }
            if elig == 0 {
                continue;
            }
            let lane = if elig & CONTROL_BIT != 0 {
                CONTROL_VL
            } else if self.in_rr {
                RoundRobin::first_from(elig, pg.in_rr as u32).unwrap_or(0)
            } else {
                let vcs = &self.vc;
                let age = |l: usize| vcs[g * lanes + l].front_ready;
                let Some(lane) = self.in_arb[g].pick(elig, age) else {
                    continue;
                };
                lane
            };
            let v = self.vc[g * lanes + lane];
            let (op, ovl) = (v.out as usize, v.ovl as usize);
            self.req[op] |= 1 << ovl;
            self.req_src[op * lanes + ovl] = (p * lanes + lane) as u16;
            want |= 1 << op;
        }
        while want != 0 {
            let op = want.trailing_zeros() as usize;
            want &= want - 1;
            let gout = base + op;
            let reqs = self.req[op];
            self.req[op] = 0;
            let ovl = if reqs & CONTROL_BIT != 0 {
                CONTROL_VL
            } else if self.out_rr {
                let l = RoundRobin::first_from(reqs, self.port[gout].out_rr as u32).unwrap_or(0);
                self.port[gout].out_rr = (l + 1) as u8;
                l
            } else {
                let (vcs, src) = (&self.vc, &self.req_src);
                let age = |l: usize| vcs[base * lanes + src[op * lanes + l] as usize].front_ready;
                let Some(ovl) = self.out_arb[gout].pick(reqs, age) else {
                    continue;
                };
                self.out_arb[gout].sent(ovl);
                ovl
            };
            let s = self.req_src[op * lanes + ovl] as usize;
            let (p, lane) = (s >> self.lshift, s & (lanes - 1));
            if self.in_rr {
                self.port[base + p].in_rr = (lane + 1) as u8;
            } else {
                self.in_arb[base + p].sent(lane);
            }
            self.forward(r, base + p, lane, gout, ovl, now);
        }
        if busy {
            self.activate(r, now + 1);
        }
    }

    /// Moves the front flit of input VC (`gin`, `lane`) through the crossbar to output
    /// port `gout`, lane `ovl`.
    fn forward(&mut self, r: usize, gin: usize, lane: usize, gout: usize, ovl: usize, now: u64) {
        let lanes = self.lanes;
        let cap = self.cap;
        let ivc = gin * lanes + lane;
        let v = &mut self.vc[ivc];
        let h = v.head as usize;
        let word = self.buf[ivc * cap + h];
        let nh = if h + 1 == cap { 0 } else { h + 1 };
        v.head = nh as u16;
        v.len -= 1;
        if v.len == 0 {
            self.port[gin].nonempty &= !(1 << lane);
        } else {
            v.front_ready = self.rdy[ivc * cap + nh];
        }
        if word & TAIL != 0 {
            v.ovl = NO_LANE;
            v.out = NO_PORT;
            self.port[gout].busy &= !(1 << ovl);
            // Wake headers of this router waiting for a lane of this output.
            let mut w = std::mem::take(&mut self.va_wait[gout]);
            let base = self.fab.port_base[r] as usize;
            while w != 0 {
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                self.port[base + (b >> self.lshift)].awake |= 1 << (b & (lanes - 1));
            }
        }
        self.rflits[r] -= 1;
        // The freed slot's credit travels back to the upstream sender.
        let uvc = self.port[gin].upstream as usize * lanes + lane;
        let o = &mut self.out[uvc];
        let mut at = o.ring_head as usize + o.ring_len as usize;
        if at >= cap {
            at -= cap;
        }
        o.ring_len += 1;
        self.cring[uvc * cap + at] = now + self.d.credit as u64;
        if uvc < self.holder.len() {
            // Wake the input VC upstream that may be asleep waiting for this credit.
            let hv = self.holder[uvc] as usize;
            if hv != u32::MAX as usize {
                let hg = hv >> self.lshift;
                let bit = 1 << (hv & (lanes - 1));
                if self.port[hg].awake & bit == 0 {
                    self.port[hg].awake |= bit;
                    let hr = self.port[hg].router as usize;
                    self.activate(hr, now + 1);
                }
            }
        }
        self.moved += 1;
        self.flit_hops += 1;
        if now >= self.window.0 && now < self.window.1 {
            self.stats.link[gout] += 1;
        }
        let arrive = now + (self.d.switch_alloc + self.d.crossbar + self.d.link) as u64;
        let dvc = self.port[gout].down_vc;
        if dvc != u32::MAX {
            let divc = dvc as usize + ovl;
            let r2 = self.port[divc >> self.lshift].router as usize;
            let extra = if word & HEAD != 0 { self.d.route } else { 0 };
            let ready = arrive + (self.d.sync + extra) as u64;
            self.push_flit(r2, gout * lanes + ovl, divc, word, ready, now);
        } else {
            self.in_network -= 1;
            self.deliver(word, arrive);
        }
    }

    /// A flit reached its HCA at `at`.
    fn deliver(&mut self, word: u32, at: u64) {
        let pkt = (word & PKT) as usize;
        let cls = self.pk.class[pkt] as usize;
        let stream = self.pk.stream[pkt];
        if at >= self.window.0 && at < self.window.1 {
            self.stats.accepted[cls] += 1;
            if stream != u32::MAX {
                self.stats.flow_acc[stream as usize] += 1;
            }
        }
        if word & TAIL != 0 {
            if self.pk.measured[pkt] {
                let lat = (at - self.pk.created[pkt]).min(u32::MAX as u64) as u32;
                self.stats.lat[cls].push(lat);
                self.stats.net_lat_sum[cls] += at - self.pk.injected[pkt];
                if stream != u32::MAX {
                    self.stats.flow_lat[stream as usize].push(lat);
                }
                self.outstanding -= 1;
            }
            self.pk.release(pkt as u32);
        }
    }

    /// Creates the packets arriving at `now` and hands them to their HCAs.
    fn generate(&mut self, now: u64) -> Result<(), FlitError> {
        let mut arrivals = std::mem::take(&mut self.hca.scratch);
        arrivals.clear();
        self.traffic
            .arrivals(now, &mut self.rng, |a: Arrival| arrivals.push(a));
        for a in arrivals.iter().copied() {
            self.create_packet(a, now)?;
        }
        self.hca.scratch = arrivals;
        Ok(())
    }

    /// Runs warm-up, measurement and drain; fails if the watchdog sees no flit move
    /// for `watchdog` cycles while flits wait.
    pub fn run(&mut self) -> Result<RunResult, FlitError> {
        let (w0, w1) = self.window;
        let drain_end = w1.saturating_add(self.cfg.phases.drain_max);
        let mut now: u64 = 0;
        let mut last_move = 0u64;
        let mut moved_before = 0u64;
        let saturated;
        loop {
            self.generate(now)?;
            let mut cur = std::mem::take(&mut self.active);
            std::mem::swap(&mut cur, &mut self.next_active);
            for &r in &cur {
                self.step_router(r as usize, now);
            }
            cur.clear();
            self.active = cur;
            // HCAs after routers: what they push is queued for the next cycle.
            self.step_hcas(now);
            if self.moved != moved_before || self.in_network == 0 {
                moved_before = self.moved;
                last_move = now;
            } else if now - last_move > self.cfg.watchdog {
                return Err(FlitError::Deadlock {
                    cycle: now,
                    idle: now - last_move,
                    flits: self.in_network,
                });
            }
            if now + 1 >= w1 && self.outstanding == 0 {
                saturated = false;
                now += 1;
                break;
            }
            if now + 1 >= drain_end {
                saturated = true;
                now += 1;
                break;
            }
            now += 1;
            // Nothing in flight: jump to the next arrival.
            if self.in_network == 0 && self.next_active.is_empty() && self.hca.idle() {
                if let Some(t) = self.traffic.next_time() {
                    let limit = if self.outstanding == 0 && now < w1 {
                        w1
                    } else {
                        drain_end
                    };
                    if t > now {
                        now = t.min(limit.max(now));
                        last_move = now;
                    }
                }
            }
        }
        Ok(self.result(now, w1 - w0, saturated))
    }

    fn result(&mut self, cycles: u64, window: u64, saturated: bool) -> RunResult {
        let nodes = self.fab.nodes as f64;
        let w = window as f64;
        let mut all = Vec::new();
        let mut classes = Vec::new();
        let (mut off, mut acc, mut net) = (0u64, 0u64, 0u64);
        for (i, c) in self.cfg.classes.iter().enumerate() {
            all.extend_from_slice(&self.stats.lat[i]);
            let n = self.stats.lat[i].len().max(1) as f64;
            off += self.stats.offered[i];
            acc += self.stats.accepted[i];
            net += self.stats.net_lat_sum[i];
            classes.push(ClassResult {
                name: c.name.clone(),
                offered: self.stats.offered[i] as f64 / nodes / w,
                accepted: self.stats.accepted[i] as f64 / nodes / w,
                network_latency: self.stats.net_lat_sum[i] as f64 / n,
                latency: Latency::of(&mut self.stats.lat[i]),
            });
        }
        let total = ClassResult {
            name: "all".into(),
            offered: off as f64 / nodes / w,
            accepted: acc as f64 / nodes / w,
            network_latency: net as f64 / all.len().max(1) as f64,
            latency: Latency::of(&mut all),
        };
        let flows = self
            .cfg
            .streams
            .iter()
            .enumerate()
            .map(|(i, s)| FlowResult {
                name: s.name.clone(),
                latency: Latency::of(&mut self.stats.flow_lat[i]),
                accepted: self.stats.flow_acc[i] as f64 / w,
            })
            .collect();
        let util: Vec<f64> = self.stats.link.iter().map(|&f| f as f64 / w).collect();
        let connected: Vec<f64> = util
            .iter()
            .zip(&self.fab.link)
            .filter(|(_, l)| !matches!(l, Link::None))
            .map(|(u, _)| *u)
            .collect();
        RunResult {
            classes,
            flows,
            total,
            link_utilisation_avg: connected.iter().sum::<f64>() / connected.len().max(1) as f64,
            link_utilisation_max: connected.iter().copied().fold(0.0, f64::max),
            link_utilisation: util,
            cycles,
            flit_hops: self.flit_hops,
            saturated,
        }
    }
}
