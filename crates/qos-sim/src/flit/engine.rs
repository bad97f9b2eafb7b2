//! The flit network's state and main loop (Yum §3.1–3.3, §6.1): flat arrays built from
//! the configuration, the cycle loop (traffic, router wake-ups, routers, HCAs,
//! watchdog, phases) and the run's results. The routers themselves are in
//! [`super::router`], the HCAs in [`super::hca`].
//!
//! Layout (struct of arrays, indices not pointers): a *global port* `g` numbers every
//! router port; an *input VC* is `g * lanes + vl`. Each input VC has one record with
//! its front flit (packet index plus head/tail bits, and the cycle it becomes ready),
//! its wormhole state (output port and output VL held by the packet in it) and a
//! 64-cycle history of the flits that left it, from which the credits its upstream
//! sender holds follow; the flits behind the front one wait in a fixed ring. No flit is
//! ever allocated: a flit is a `u32`.
//!
//! A cycle with nothing in flight skips ahead to the next packet arrival.
//!
//! The run stops early as *unstable* under BookSim2's `latency_thres` rule when
//! `phases.abort_latency` is set ([`super::stats::Collector::abort_mean`]), and reports
//! its progress to a callback every [`PROGRESS_EVERY`] cycles.

use qos_core::vlarb::AnyVlArbiter;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::{
    Allocator, Dateline, FlitConfig, HcaModel, LaneOrder, MeshRouting, TopologySpec,
};
use super::error::FlitError;
use super::hca::Hcas;
use super::hooks::{Hooks, InjectionGate, Net, NoHooks, Post, Poster};
use super::huge;
use super::packet::Packets;
use super::parallel::{Ctx, Part, ThreadsProfile};
use super::router::{Cycle, Hot, InVc, OutBufs, Params, Port, Prio, Requests, Slot, Tally, NO_VC};
use super::sampling::{Phase, Sampler, Step};
use super::stats::{ClassResult, Collector, FlowResult, Latency, RunResult, Stop, StopReason};
use super::topology::{Fabric, Link, Ties};
use super::traffic::{Arrival, Traffic};

/// Cycles between two calls of the progress callback of [`Network::run_with_progress`].
pub const PROGRESS_EVERY: u64 = 1 << 12;

/// Bytes of VC records and rings above which the routers' sweep prefetches the records
/// of the routers it steps next ([`Network::set_prefetch`]). An assumption, not a
/// measured constant of every machine: about a level-2 cache (1 MB per core on the
/// machine the docs were measured on; 0.25–2 MB on current x86 servers). A 16×16 mesh of
/// the reference router (4 lanes, 10-flit buffers: 0.61 MB) runs without the hints,
/// a 32×32 (2.5 MB) with them. Hints change no result.
pub const PREFETCH_ABOVE: usize = 1 << 20;

/// A shorter-lived borrow of a run's hooks, as the routers see them.
#[inline(always)]
fn reborrow<'s, H: Hooks>(h: &'s mut Option<&mut H>) -> Option<&'s mut (dyn Hooks + 's)> {
    match h {
        Some(h) => Some(&mut **h),
        None => None,
    }
}

/// The network state.
pub struct Network {
    pub(super) fab: Fabric,
    /// The routers' settings, copied into every view of a cycle.
    pub(super) k: Params,
    // Per input VC: the record (front flit, wormhole and credit state), the ring apart.
    pub(super) vc: Vec<InVc>,
    pub(super) slot: Vec<Slot>,
    /// Per input VC: the next VC asleep on the same output's lanes (intrusive list),
    /// or `NO_VC`; then per global port, the head of its list (`wait_next[nvc + g]`).
    pub(super) wait_next: Vec<u32>,
    /// Per global port to an HCA with a bounded ejection buffer (`delays.eject_credit`):
    /// the first of its per-lane credit records (`InVc`s that hold no flit, only the
    /// history of the flits the HCA took), else `NO_VC`.
    pub(super) sink: Vec<u32>,
    /// Per global port: everything a flit hop touches, in one place.
    pub(super) port: Vec<Port>,
    /// Output VL buffers (`router.output_buffer`), else empty.
    pub(super) ob: OutBufs,
    pub(super) in_arb: Vec<AnyVlArbiter>,
    pub(super) out_arb: Vec<AnyVlArbiter>,
    /// Timing wheel of input VC evaluations (slot = cycle mod its length).
    pub(super) wheel: Vec<Vec<u32>>,
    // Per router: local ports with an eligible lane, and whether it is listed.
    pub(super) rports: Vec<u64>,
    pub(super) listed: Vec<bool>,
    /// Routers with an eligible lane (and an empty spare of the same capacity).
    pub(super) arb_list: Vec<u32>,
    pub(super) spare_list: Vec<u32>,
    // Scratch for one router step.
    pub(super) reqs: Box<Requests>,
    // The separable VC allocator: this cycle's requests (input VC, lanes it may take),
    // the claim on each output lane, the claimed lanes, each output lane's pointer.
    pub(super) va_list: Vec<u32>,
    pub(super) va_allowed: Vec<u32>,
    pub(super) va_claim: Vec<u32>,
    pub(super) va_touched: Vec<u32>,
    pub(super) va_out_rr: Vec<u16>,
    /// Per output port, its lanes whose packet's tail has left but whose tail credit is
    /// not known to be back yet (`wait_for_tail_credit`; empty without).
    pub(super) tail_out: Vec<u32>,
    /// Per input VC, the cycle its front header's routing completes (`NEVER`: not
    /// routed yet), and per router its latest routing batch (first cycle, last cycle);
    /// only with `route_fifo`.
    pub(super) route_done: Vec<Cycle>,
    pub(super) route_batch: Vec<(Cycle, Cycle)>,
    /// Per crossbar input (port × 2), its held connection under
    /// `hold_switch_for_packet`: the cycle it holds for and `output << 8 | lane`
    /// (empty without).
    pub(super) hold: Vec<(Cycle, u16)>,
    // Headers of a cycle waiting for their lane under Yum's VL arbiters.
    pub(super) heads: Vec<u128>,
    // Per class: its lanes, the dateline halves, the lanes a packet may be injected on.
    pub(super) class_mask: Vec<u32>,
    pub(super) class_lo: Vec<u32>,
    pub(super) class_hi: Vec<u32>,
    pub(super) class_inject: Vec<u32>,
    /// Per class: packets keep their injection lane (`ClassConfig::keep_lane`).
    pub(super) class_keep: Vec<bool>,
    pub(super) pk: Packets,
    pub(super) hca: Hcas,
    traffic: Traffic,
    pub(super) rng: ChaCha8Rng,
    // Phases and statistics.
    pub(super) window: (u64, u64),
    /// The sources have stopped (`phases.stop_sources`, from the measurement's end).
    sources_stopped: bool,
    pub(super) stats: Collector,
    pub(super) tally: Tally,
    /// Per-router caps on what the routers spend (PowerHerd), when a policy set them.
    pub(super) gov: Option<super::governor::Governor>,
    /// Per global output port, the lane a keep-lane packet takes for each injection
    /// lane (IBA's per-port SL→VL tables, the packet's injection lane its SL), when a
    /// policy set them; without, a packet keeps its injection lane.
    lane_map: Option<Vec<[u8; 16]>>,
    /// The cycle being simulated (packets posted by a policy are created then).
    now: u64,
    pub(super) cfg: FlitConfig,
    /// Threads of the run ([`Network::set_threads`]; 0: the engine's event order, one
    /// thread), and with two or more, the partitions and the wheel the serial phase
    /// schedules into.
    pub(super) threads: usize,
    pub(super) parts: Vec<Part>,
    pub(super) shared: Vec<Vec<u32>>,
    pub(super) profile: ThreadsProfile,
}

impl Network {
    /// Builds the network for a validated `cfg`.
    pub fn new(cfg: &FlitConfig) -> Result<Network, FlitError> {
        cfg.validate()?;
        let fab = cfg.fabric()?;
        let max_vl = cfg
            .classes
            .iter()
            .flat_map(|c| c.vls.iter().copied())
            .max()
            .unwrap_or(0) as usize;
        // A power of two, so VC indices split into port and lane by shifts.
        let lanes = (max_vl + 1).next_power_of_two();
        // At most 16 (lanes 0-15, validated): within `Requests`' fixed arrays.
        let cap = cfg.router.buffer as usize;
        let ports = fab.total_ports();
        let d = cfg.delays();
        // Router input VCs, then (bounded ejection) a credit record per HCA lane.
        let router_vcs = ports * lanes;
        let nvc = router_vcs + d.eject_credit.map_or(0, |_| fab.nodes as usize * lanes);
        let mut down_vc = vec![NO_VC; ports];
        let mut sink = vec![NO_VC; ports];
        for (g, l) in fab.link.iter().enumerate() {
            match *l {
                Link::Router(gi) => down_vc[g] = gi * lanes as u32,
                Link::Hca(n) if d.eject_credit.is_some() => {
                    sink[g] = (router_vcs + n as usize * lanes) as u32
                }
                _ => {}
            }
        }
        let arb = |key: &str, c: &qos_core::vlarb::VlArbConfig| {
            c.build()
                .map_err(|e| FlitError::config(key, format!("{key}: {e}")))
        };
        let in_proto = arb("router.input_arbitration", &cfg.router.input_arbitration)?;
        let out_proto = arb("router.output_arbitration", &cfg.router.output_arbitration)?;
        let on_entry = matches!(cfg.topology, TopologySpec::Torus { .. })
            && cfg.dateline() == Dateline::OnEntry;
        let xy_yx = fab
            .grid
            .or(fab.cmesh.map(|c| c.grid))
            .is_some_and(|g| g.xy_yx)
            || !fab.route_yx.is_empty();
        let routing = match cfg.topology {
            TopologySpec::Mesh { routing, .. }
            | TopologySpec::Torus { routing, .. }
            | TopologySpec::Cmesh { routing, .. }
            | TopologySpec::Flatfly { routing, .. } => routing,
            _ => MeshRouting::Dor,
        };
        let two_phase = routing.two_phase();
        // BookSim2's terminal routes the first router by lookahead with
        // `routing_delay = 0`, `adaptive_xy_yx`'s choice included.
        let lookahead_order = matches!(routing, MeshRouting::AdaptiveXyYx | MeshRouting::Ugal)
            && cfg.is_booksim2()
            && d.route == 0
            && cfg.hca_model() == HcaModel::SourceQueue;
        let mut class_mask = Vec::new();
        let mut class_lo = Vec::new();
        let mut class_hi = Vec::new();
        for c in &cfg.classes {
            let mut v = c.vls.clone();
            v.sort_unstable();
            let half = v.len().div_ceil(2);
            let m = |s: &[u8]| s.iter().fold(0u32, |m, &l| m | 1 << l);
            class_mask.push(m(&v));
            if fab.dateline && on_entry {
                // BookSim2's `dim_order_torus`: each half is the class's lanes less
                // the other end's floor(n / 2), so with an odd count the middle lane
                // is in both (3 lanes: {0, 1} and {1, 2}).
                let give = v.len() / 2;
                class_lo.push(m(&v[..v.len() - give]));
                class_hi.push(m(&v[give..]));
            } else if fab.dateline {
                class_lo.push(m(&v[..half]));
                class_hi.push(m(&v[half..]));
            } else if xy_yx || two_phase {
                // (A torus under `valiant` takes the branches above: its phases split
                // each dateline half in the router.)
                // BookSim2's `xy_yx_mesh`: ascending order on the lanes less the last
                // ⌊n/2⌋, descending on the lanes less the first ⌊n/2⌋ (with an odd
                // count the middle lane is in both: 3 lanes, {0, 1} and {1, 2}); its
                // `valiant_mesh` and `romm_mesh` the same for the two phases.
                let give = v.len() / 2;
                class_lo.push(m(&v[..v.len() - give]));
                class_hi.push(m(&v[give..]));
            } else {
                class_lo.push(m(&v));
                class_hi.push(m(&v));
            }
        }
        // Injection: the lower dateline half under the crossing rule, any lane else.
        let class_inject = if on_entry || xy_yx || two_phase {
            class_mask.clone()
        } else {
            class_lo.clone()
        };
        let max_ports = fab.ports.iter().copied().max().unwrap_or(1) as usize;
        if max_ports > 64 {
            return Err(FlitError::config(
                "topology",
                format!("a router has {max_ports} ports; at most 64 are supported"),
            ));
        }
        let separable = cfg.allocator().is_booksim2();
        let route_fifo = separable && d.route >= 2;
        let lanes_used = cfg
            .classes
            .iter()
            .flat_map(|c| c.vls.iter().map(|&v| v as u32 + 1))
            .max()
            .unwrap_or(1) as u8;
        if cfg.router.input_speedup.unwrap_or(1) > 1 && max_ports > 32 {
            return Err(FlitError::config(
                "router.input_speedup",
                format!("router.input_speedup: a router has {max_ports} ports; with two crossbar inputs per port at most 32 are supported"),
            ));
        }
        // Evaluations are never further ahead than one hop's delays or a credit's trip.
        let far = d.per_hop().max(d.stages() + d.link as u64);
        // A credit of an HCA's ejection buffer starts back when the flit arrives.
        let credits = (d.credit.max(d.host_credit_trip()) as u64)
            .max(d.stages() + d.link as u64 + d.eject_credit.unwrap_or(0) as u64);
        // Links longer than the delays' router wire lengthen both.
        let longest = fab.latency.iter().copied().max().unwrap_or(0) as u64;
        let extra = longest.saturating_sub(d.router_wire() as u64);
        let horizon = (far.max(credits) as usize + extra as usize + 2).next_power_of_two();
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let traffic = Traffic::new(cfg, &mut rng);
        let hca = Hcas::new(cfg, fab.nodes as usize, lanes)?;
        let w0 = cfg.phases.warmup;
        let classes = cfg.classes.len();
        let k = Params {
            lanes,
            lshift: lanes.trailing_zeros(),
            cap: cap as u32,
            d,
            hop: d.switch_alloc + d.crossbar + d.router_wire(),
            hop_host: d.switch_alloc + d.crossbar + d.link,
            head_extra: d.sync + if route_fifo { 0 } else { d.route },
            body_extra: d.sync,
            front_route: if separable && !route_fifo { d.route } else { 0 },
            route_fifo,
            entry_route: if route_fifo { 0 } else { d.route },
            credit_delay: d.credit,
            link_extra: extra > 0,
            host_credit: d.host_credit_trip(),
            eject_credit: d.eject_credit.unwrap_or(0),
            vl_alloc: d.vl_alloc,
            separable,
            islip: cfg.allocator() == Allocator::Islip,
            speedup: cfg.router.input_speedup.unwrap_or(1),
            iters: cfg.router.alloc_iters.unwrap_or(1),
            nvl: lanes_used,
            prio: if separable {
                Prio::new(cfg.router.priority, cfg.classes.iter().map(|c| c.priority))
            } else {
                Prio::None
            },
            wait_tail: separable && cfg.router.wait_for_tail_credit == Some(true),
            hold: separable && cfg.router.hold_switch_for_packet == Some(true),
            general: separable
                && (cfg.allocator() == Allocator::Islip
                    || cfg.router.input_speedup.unwrap_or(1) > 1
                    || cfg.router.hold_switch_for_packet == Some(true)),
            full: cfg.allocator() == Allocator::FullCrossbar,
            on_entry,
            xy_yx,
            two_phase,
            romm: routing == MeshRouting::Romm,
            via_router: routing.two_phase() && matches!(cfg.topology, TopologySpec::Flatfly { .. }),
            via_ends_at_dest: routing == MeshRouting::Valiant
                && matches!(cfg.topology, TopologySpec::Flatfly { .. }),
            ugal: routing == MeshRouting::Ugal,
            flatfly: match cfg.topology {
                TopologySpec::Flatfly { k, c, .. } => (k, c.isqrt()),
                _ => (0, 0),
            },
            adaptive_order: routing == MeshRouting::AdaptiveXyYx,
            read_lag: match (lookahead_order, cfg.is_booksim2() && d.route > 0) {
                (true, _) => (1, 1),
                (false, true) => (2, 1),
                (false, false) => (0, 0),
            },
            lookahead_order,
            oldest_first: cfg.router.lane_order == LaneOrder::Oldest,
            wmask: horizon as Cycle - 1,
            in_rr: matches!(
                cfg.router.input_arbitration,
                qos_core::vlarb::VlArbConfig::RoundRobin
            ),
            out_rr: matches!(
                cfg.router.output_arbitration,
                qos_core::vlarb::VlArbConfig::RoundRobin
            ),
            out_buf: cfg.output_buffer() > 0,
            look_ahead: (nvc * (std::mem::size_of::<InVc>() + cap * std::mem::size_of::<Slot>()))
                > PREFETCH_ABOVE,
        };
        Ok(Network {
            k,
            vc: huge::filled(nvc, InVc::new()),
            slot: huge::filled(nvc * cap, Slot::default()),
            wait_next: vec![NO_VC; nvc + ports],
            sink,
            port: (0..ports)
                .map(|g| Port {
                    nonempty: 0,
                    elig: 0,
                    vwait: 0,
                    busy: 0,
                    va_next: 0,
                    in_rr: 0,
                    out_rr: 0,
                    in_port_rr: 0,
                    local: (g as u32 - fab.port_base[fab.port_router[g] as usize]) as u8,
                    x_in_rr: 1,
                    x_port_rr: 0,
                    wire: match fab.link[g] {
                        Link::Router(_) if extra > 0 => {
                            (fab.latency[g] as u32).saturating_sub(d.router_wire()) as u8
                        }
                        _ => 0,
                    },
                    down_vc: down_vc[g],
                    sent: 0,
                })
                .collect(),
            ob: OutBufs::new(cfg.output_buffer() as u32, ports, lanes),
            in_arb: vec![in_proto; ports],
            out_arb: vec![out_proto; ports],
            wheel: vec![Vec::new(); horizon],
            rports: vec![0; fab.routers as usize],
            listed: vec![false; fab.routers as usize],
            arb_list: Vec::with_capacity(fab.routers as usize),
            spare_list: Vec::with_capacity(fab.routers as usize),
            reqs: Box::default(),
            va_list: Vec::new(),
            va_allowed: Vec::new(),
            va_claim: vec![NO_VC; if separable { nvc } else { 0 }],
            va_touched: Vec::new(),
            va_out_rr: vec![0; if separable { nvc } else { 0 }],
            route_done: vec![super::records::NEVER; if route_fifo { nvc } else { 0 }],
            route_batch: vec![(0, 0); if route_fifo { fab.routers as usize } else { 0 }],
            hold: vec![
                (super::records::NEVER, 0);
                if cfg.router.hold_switch_for_packet == Some(true) {
                    2 * ports
                } else {
                    0
                }
            ],
            tail_out: vec![
                0;
                if cfg.router.wait_for_tail_credit == Some(true) {
                    ports
                } else {
                    0
                }
            ],
            heads: Vec::new(),
            class_mask,
            class_lo,
            class_hi,
            class_inject,
            class_keep: cfg.classes.iter().map(|c| c.keep_lane).collect(),
            pk: Packets::default(),
            hca,
            traffic,
            rng,
            // A converging warm-up's end is not known in advance.
            window: if cfg.phases.warmup_converge {
                (u64::MAX, w0.saturating_add(cfg.phases.measure))
            } else {
                (w0, w0 + cfg.phases.measure)
            },
            sources_stopped: false,
            stats: Collector::new(classes, cfg.streams.len(), ports),
            tally: Tally::default(),
            gov: None,
            lane_map: None,
            now: 0,
            cfg: cfg.clone(),
            threads: 0,
            parts: Vec::new(),
            shared: Vec::new(),
            profile: Default::default(),
            fab,
        })
    }

    /// Switches the routers' prefetch hints on or off (by default on when the VC records
    /// and rings exceed [`PREFETCH_ABOVE`] bytes). Only the speed changes: the hints
    /// never change a result.
    pub fn set_prefetch(&mut self, on: bool) {
        self.k.look_ahead = on;
    }

    /// Whether the routers' prefetch hints are on.
    pub fn prefetch(&self) -> bool {
        self.k.look_ahead
    }

    /// The fabric.
    pub fn fabric(&self) -> &Fabric {
        &self.fab
    }

    /// Runs `f` on the routers' view of the state (local slices; see [`Hot`]) and the
    /// HCAs, and keeps the counters it changed.
    #[inline(always)]
    pub(super) fn with_hot<'s, R>(
        &'s mut self,
        hooks: Option<&'s mut (dyn Hooks + 's)>,
        f: impl FnOnce(&mut Hot<'s>, &mut Hcas) -> R,
    ) -> R {
        let own_len = self.vc.len();
        let heads_in_order = !self.k.separable && hooks.is_none() && self.gov.is_none();
        let mut hot = Hot {
            k: self.k,
            window: self.window,
            fab: &self.fab,
            vc: &mut self.vc,
            slot: &mut self.slot,
            port: &mut self.port,
            wait_next: &mut self.wait_next,
            sink: &self.sink,
            rports: &mut self.rports,
            listed: &mut self.listed,
            arb_list: &mut self.arb_list,
            spare_list: &mut self.spare_list,
            // On threads, the serial phase schedules into the shared wheel.
            wheel: if self.shared.is_empty() {
                &mut self.wheel
            } else {
                &mut self.shared
            },
            reqs: &mut self.reqs,
            va_list: &mut self.va_list,
            va_allowed: &mut self.va_allowed,
            va_claim: &mut self.va_claim,
            va_touched: &mut self.va_touched,
            va_out_rr: &mut self.va_out_rr,
            tail_out: &mut self.tail_out,
            route_done: &mut self.route_done,
            route_batch: &mut self.route_batch,
            hold: &mut self.hold,
            ob: self.ob.view(),
            in_arb: &mut self.in_arb,
            out_arb: &mut self.out_arb,
            class_mask: &self.class_mask,
            class_lo: &self.class_lo,
            class_hi: &self.class_hi,
            class_keep: &self.class_keep,
            pk: &mut self.pk,
            stats: &mut self.stats,
            tally: self.tally,
            gov: self.gov.as_mut(),
            lane_map: self.lane_map.as_deref(),
            hooks,
            own_lo: 0,
            own_len,
            heads_in_order,
            heads: &mut self.heads,
            shared_wheel: None,
            outbox: None,
        };
        let r = f(&mut hot, &mut self.hca);
        self.tally = hot.tally;
        r
    }

    /// Flits sent on each router output so far.
    fn sent(&self) -> Vec<u64> {
        self.port.iter().map(|p| p.sent as u64).collect()
    }

    /// The intermediate node of a packet from `src` to `dst` under `valiant` (uniform
    /// over all nodes: BookSim2's `RandomInt(gNodes - 1)`, whose bound is inclusive) or
    /// `romm` (each coordinate uniform between the source's and the destination's,
    /// both included: `rand_min_intr_mesh`).
    pub(super) fn intermediate(&mut self, src: u32, dst: u32) -> u32 {
        if self.k.ugal {
            // BookSim2's `find_ran_intm`: a port drawn uniformly, and in each dimension
            // the source router's coordinate where the destination's shares it, a
            // uniform one where not; the node there on the flatfly's node grid.
            let (k, xr) = self.k.flatfly;
            let (s, d) = (self.fab.node_router(src), self.fab.node_router(dst));
            let port = self.rng.gen_range(0..xr * xr);
            let mut at = [0u32; 2];
            for (c, (a, b)) in at.iter_mut().zip([(s % k, d % k), (s / k, d / k)]) {
                *c = if a == b { a } else { self.rng.gen_range(0..k) };
            }
            let (gx, gy) = (at[0] * xr + port % xr, at[1] * xr + port / xr);
            return gy * k * xr + gx;
        }
        if !self.k.romm {
            return self.rng.gen_range(0..self.fab.nodes);
        }
        let g = self.fab.grid.expect("romm routing is on a mesh");
        let (mut s, mut d, mut at, mut unit) = (src, dst, 0, 1);
        for _ in 0..g.n {
            let (a, b) = (s % g.k, d % g.k);
            at += unit * self.rng.gen_range(a.min(b)..=a.max(b));
            unit *= g.k;
            s /= g.k;
            d /= g.k;
        }
        at
    }

    /// A new packet from the traffic sources enters its HCA's send queue.
    fn create_packet(&mut self, a: Arrival, now: u64) -> Result<(), FlitError> {
        let pkt = self.pk.alloc()?;
        let p = pkt as usize;
        let cls = a.class as usize;
        let len = a.len;
        if self.hca.lane_at_creation() {
            // First lane: uniform over the lanes the class may be injected on.
            let lanes_ok = self.class_inject[cls];
            let k = self.rng.gen_range(0..lanes_ok.count_ones());
            let mut m = lanes_ok;
            for _ in 0..k {
                m &= m - 1;
            }
            self.pk.vl[p] = m.trailing_zeros() as u8;
        }
        if let Some(g) = self.fab.grid.filter(|g| g.ties == Ties::Random && g.torus) {
            // One bit per dimension: + or − way when half-way round (u16, sampled
            // as the u8 of two-dimensional runs before: the same draws); under
            // `valiant` one per dimension and phase (at most 4 dimensions), phase two's
            // above phase one's.
            let bits = if self.k.two_phase { 2 * g.n } else { g.n };
            self.pk.tie[p] = self.rng.gen_range(0..1u16 << bits) as u8;
        } else if self.k.xy_yx {
            // The dimension order, ½ each (BookSim2 draws it at the first router; under
            // `adaptive_xy_yx`, where the first router's credits in use are as many
            // both ways).
            self.pk.tie[p] = self.rng.gen_range(0..2u8);
        }
        if self.fab.fat_tree.is_some() {
            // A fat tree's up ports, one base-k digit per level (BookSim2's `nca` draws
            // one at each router on the way up).
            self.pk.route[p] = self.rng.gen();
        }
        if self.k.two_phase {
            // The intermediate node (BookSim2 draws it at the first router): any node
            // under `valiant`, in the minimal quadrant under `romm`.
            self.pk.route[p] = self.intermediate(a.src, a.dst);
        }
        self.pk.dst[p] = a.dst;
        self.pk.src[p] = a.src;
        self.pk.class[p] = a.class;
        self.pk.kind[p] = 0;
        self.pk.len[p] = len;
        self.pk.created[p] = now;
        self.pk.stream[p] = a.stream;
        if let Some(sr) = &self.fab.source {
            self.pk.route[p] = sr.start[(a.src * self.fab.nodes + a.dst) as usize];
            self.pk.hop[p] = 0;
        }
        let lane = self.pk.vl[p];
        self.enqueue(pkt, a.src, cls, len, lane, now);
        Ok(())
    }

    /// Packet `pkt` (class `cls`, `len` flits, first lane `lane`) created at `now`
    /// enters the send queue of node `src`: counted as offered if created in the
    /// measurement window, and measured if so (Yum's DMA HCA) or, for BookSim2's
    /// terminal, if it reaches the front of its queue after the measurement's start
    /// ([`super::hca::front_measured`]).
    fn enqueue(&mut self, pkt: u32, src: u32, cls: usize, len: u32, lane: u8, now: u64) {
        let p = pkt as usize;
        let in_window = now >= self.window.0 && now < self.window.1;
        self.stats.recent_off[cls] += len as u64;
        if in_window {
            self.stats.offered[cls] += len as u64;
        }
        let at_front = self.hca.measures_at_front();
        let counted = if at_front {
            now < self.window.1
        } else {
            in_window
        };
        self.pk.measured[p] = counted;
        if counted {
            self.tally.outstanding += 1;
        }
        let front = self
            .hca
            .enqueue(src as usize, cls, pkt, len, lane, now, &mut self.stats);
        if at_front && front {
            super::hca::front_measured(
                &mut self.pk.measured[p],
                &mut self.tally.outstanding,
                now,
                self.window,
                now,
            );
        }
    }

    /// A packet a policy hands to its source HCA at the current cycle.
    pub(super) fn post(&mut self, p: Post) -> Result<u32, FlitError> {
        let nodes = self.fab.nodes;
        let cls = p.class as usize;
        let bad = |m: String| Err(FlitError::config("post", m));
        if p.src >= nodes || p.dst >= nodes {
            return bad(format!(
                "packet from node {} to node {}: {nodes} nodes",
                p.src, p.dst
            ));
        }
        if cls >= self.class_mask.len() || self.class_mask[cls] & (1 << p.vl) == 0 {
            return bad(format!("lane {} is not a lane of class {}", p.vl, p.class));
        }
        if p.len == 0 {
            return bad("a packet of no flit".into());
        }
        let now = self.now;
        let pkt = self.pk.alloc()?;
        let i = pkt as usize;
        self.pk.dst[i] = p.dst;
        self.pk.src[i] = p.src;
        self.pk.class[i] = p.class;
        self.pk.vl[i] = p.vl;
        self.pk.len[i] = p.len;
        self.pk.created[i] = now;
        self.pk.stream[i] = u32::MAX;
        self.pk.kind[i] = p.kind as u8;
        self.pk.tag[i] = p.tag;
        self.pk.aux[i] = p.aux;
        self.pk.tie[i] = 0;
        if self.fab.fat_tree.is_some() {
            self.pk.route[i] = self.rng.gen();
        }
        if let Some(sr) = &self.fab.source {
            self.pk.route[i] = sr.start[(p.src * nodes + p.dst) as usize];
            self.pk.hop[i] = 0;
        }
        self.enqueue(pkt, p.src, cls, p.len, p.vl, now);
        Ok(pkt)
    }

    /// Lets `gate` decide which packet each HCA's DMA takes next (instead of the
    /// per-class send queues served by priority).
    pub fn set_injection_gate(&mut self, gate: Box<dyn InjectionGate>) {
        self.hca.set_gate(gate);
    }

    /// Creates the packets arriving at `now` and hands them to their HCAs.
    fn generate(&mut self, now: u64) -> Result<(), FlitError> {
        if self.sources_stopped {
            return Ok(());
        }
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

    /// Runs warm-up, measurement and drain. When the watchdog sees no flit move for
    /// `watchdog` cycles while flits wait, the run ends as unstable
    /// ([`StopReason::Deadlock`]) under the stability rule (`phases.abort_latency`
    /// set) and fails with [`FlitError::Deadlock`] without it.
    pub fn run(&mut self) -> Result<RunResult, FlitError> {
        self.run_with_progress(&mut |_| {})
    }

    /// [`Network::run`], calling `progress(cycle)` every [`PROGRESS_EVERY`] cycles (the
    /// warm-up and measurement take [`FlitConfig::planned_cycles`], the drain at most
    /// `phases.drain_max` more).
    pub fn run_with_progress(
        &mut self,
        progress: &mut dyn FnMut(u64),
    ) -> Result<RunResult, FlitError> {
        self.run_loop::<NoHooks>(progress, None)
    }

    /// [`Network::run_with_progress`] driven by a policy ([`super::hooks`]): it posts
    /// packets, sees headers of its own packets at routing, deliveries and injections,
    /// and is called every [`Hooks::period`] cycles.
    pub fn run_hooked<H: Hooks>(
        &mut self,
        hooks: &mut H,
        progress: &mut dyn FnMut(u64),
    ) -> Result<RunResult, FlitError> {
        self.run_loop(progress, Some(hooks))
    }

    /// Caps what each router may spend ([`super::governor::Governor`]); a policy
    /// adjusts the caps through [`super::hooks::Poster::governor`].
    pub fn set_governor(&mut self, g: super::governor::Governor) {
        self.gov = Some(g);
    }

    /// Per global output port (index [`super::topology::Fabric`]'s ports), the lane a
    /// packet of a keep-lane class takes on that port for each injection lane: IBA's
    /// SL→VL table of the port, the injection lane standing for the packet's SL.
    /// Each entry must be a lane of the packet's class.
    pub fn set_lane_map(&mut self, map: Vec<[u8; 16]>) {
        self.lane_map = Some(map);
    }

    fn run_loop<H: Hooks>(
        &mut self,
        progress: &mut dyn FnMut(u64),
        hooks: Option<&mut H>,
    ) -> Result<RunResult, FlitError> {
        if self.parts.is_empty() {
            return self.run_cycles(progress, hooks, None);
        }
        if hooks.is_some() || self.gov.is_some() {
            return Err(FlitError::config(
                "threads",
                "a run driven by a policy runs on one thread",
            ));
        }
        if self.k.adaptive_order || self.k.ugal {
            return Err(FlitError::config(
                "threads",
                "topology.routing = \"adaptive_xy_yx\" or \"ugal\" reads the credits of \
                 neighbouring routers: runs on one thread",
            ));
        }
        if self.k.wait_tail {
            return Err(FlitError::config(
                "threads",
                "router.wait_for_tail_credit: runs on one thread",
            ));
        }
        if self.k.hold {
            return Err(FlitError::config(
                "threads",
                "router.hold_switch_for_packet: runs on one thread",
            ));
        }
        if self.k.route_fifo {
            return Err(FlitError::config(
                "threads",
                "router.routing_delay of 2 or more: runs on one thread",
            ));
        }
        self.run_threads(progress)
    }

    /// The cycle loop; `par` runs the routers on threads. Generic over the policy, so
    /// that its per-cycle hook and what it reads of the network are direct calls.
    pub(super) fn run_cycles<H: Hooks>(
        &mut self,
        progress: &mut dyn FnMut(u64),
        mut hooks: Option<&mut H>,
        par: Option<&Ctx<'_>>,
    ) -> Result<RunResult, FlitError> {
        let period = hooks.as_ref().map_or(0, |h| h.period());
        let phases = self.cfg.phases;
        let mut st = RunState {
            sampler: Sampler::new(&phases, self.cfg.classes.len(), self.fab.nodes),
            drain_end: self.window.1.saturating_add(phases.drain_max),
            stop: None,
            sent0: None,
            sent1: None,
            sent_reset: vec![0; self.port.len()],
        };
        let mut now: u64 = 0;
        let mut last_move = 0u64;
        let mut moved_before = 0u64;
        let mut saturated = false;
        let mut next_progress = PROGRESS_EVERY;
        st.sampler.clears_at_start();
        if st.sampler.phase == Phase::Running {
            st.sent0 = Some(self.sent());
        }
        // Set for the first cycle and when the loop jumped over idle cycles: that
        // cycle is run before the run may end or jump again.
        let mut run_now = true;
        'run: loop {
            // Ends of sample periods (and drain steps) due at the start of this cycle.
            while now >= st.sampler.next {
                if self.period_end(&mut st, now) {
                    break 'run;
                }
            }
            if !run_now {
                if st.sampler.phase == Phase::Draining && self.tally.outstanding == 0 {
                    if let Some(m) = st.sampler.final_check(&self.stats) {
                        st.stop = Some(stopped(StopReason::LatencyThres, now, Some(m)));
                    }
                    break;
                }
                if now >= st.drain_end {
                    saturated = true;
                    break;
                }
                // Nothing in flight: jump to the next arrival.
                if self.tally.in_network == 0 && self.hca.idle() {
                    let mut next = if self.sources_stopped {
                        None
                    } else {
                        self.traffic.next_time()
                    };
                    if let Some(h) = hooks.as_deref() {
                        let mut at = h.next_time(now);
                        if period > 0 {
                            let p = now.div_ceil(period) * period;
                            at = Some(at.map_or(p, |a| a.min(p)));
                        }
                        next = match (next, at) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        };
                    }
                    if let Some(t) = next {
                        let limit = if self.tally.outstanding == 0 && now < self.window.1 {
                            self.window.1
                        } else {
                            st.drain_end
                        };
                        let t = t.min(limit);
                        if t > now {
                            // The idle cycles change nothing: the periods ending
                            // among them end as they would have.
                            while st.sampler.next < t {
                                let b = st.sampler.next;
                                if self.period_end(&mut st, b) {
                                    now = b;
                                    break 'run;
                                }
                            }
                            now = t;
                            last_move = now;
                            self.clear_wheels();
                            run_now = true;
                            continue;
                        }
                    }
                }
            }
            run_now = false;
            self.now = now;
            if let Some(h) = hooks.as_deref_mut() {
                if period > 0 && now.is_multiple_of(period) {
                    h.periodic(now, &mut Poster { net: self });
                }
                h.cycle(now, &mut Poster { net: self })?;
            }
            self.generate(now)?;
            if let Some(par) = par {
                self.par_cycle(par, now);
            } else {
                self.with_hot(reborrow(&mut hooks), |h, hca| {
                    h.wake(now as Cycle);
                    h.allocate_vcs(now as Cycle);
                    h.step_routers(now as Cycle);
                    h.step_links(now as Cycle);
                    // HCAs after routers: what they push is queued for the next cycle.
                    hca.step(h, now);
                });
            }
            let t = self.tally;
            if t.moved + t.flit_hops != moved_before || t.in_network == 0 {
                moved_before = t.moved + t.flit_hops;
                last_move = now;
            } else if now - last_move > self.cfg.watchdog {
                if self.cfg.phases.abort_latency.is_some() {
                    // Under BookSim2's stability rule a deadlocked network is an
                    // unstable run, not a failed one.
                    now += 1;
                    st.stop = Some(stopped(StopReason::Deadlock, now, None));
                    break 'run;
                }
                return Err(FlitError::Deadlock {
                    cycle: now,
                    idle: now - last_move,
                    flits: t.in_network,
                });
            }
            now += 1;
            if now >= next_progress {
                progress(now);
                next_progress = now - now % PROGRESS_EVERY + PROGRESS_EVERY;
            }
        }
        let warm = st.sent0.is_none();
        let mut stop = st.stop;
        let unstable = stop.is_some_and(|s| s.reason != StopReason::Converged);
        saturated |= unstable;
        let (start, end, window) = if warm {
            // Stopped during the warm-up: what was seen since the last clear.
            (st.sent_reset, self.sent(), (st.sampler.reset_at, now))
        } else {
            let end = st.sent1.unwrap_or_else(|| self.sent());
            let w = (self.window.0, self.window.1.min(now));
            (st.sent0.unwrap_or_default(), end, w)
        };
        self.stats.link = end.iter().zip(&start).map(|(e, s)| e - s).collect();
        if let Some(s) = &mut stop {
            s.window = window;
        }
        Ok(self.result(now, window, warm, saturated, unstable, stop))
    }

    /// The sample period (or drain step) ending at the start of cycle `at`: BookSim2's
    /// checks, the measurement's start and end, the statistics' clears. Returns
    /// whether the run stops there.
    fn period_end(&mut self, st: &mut RunState, at: u64) -> bool {
        let s = &mut st.sampler;
        match s.phase {
            Phase::Draining => {
                if let Some(m) = s.drain_check(at, &self.stats) {
                    st.stop = Some(stopped(StopReason::LatencyThres, at, Some(m)));
                    return true;
                }
            }
            _ => match s.end_period(at, &self.stats) {
                Step::Go => {}
                Step::Measure => {
                    self.window = (at, self.window.1.max(at));
                    st.sent0 = Some(self.sent());
                }
                Step::Drain => {
                    if st.sent0.is_none() {
                        self.window.0 = at;
                        st.sent0 = Some(self.sent());
                    }
                    if at < self.window.1 {
                        st.stop = Some(stopped(StopReason::Converged, at, None));
                    }
                    self.window.1 = at;
                    st.sent1 = Some(self.sent());
                    st.drain_end = at.saturating_add(self.cfg.phases.drain_max);
                    if self.cfg.phases.stop_sources {
                        // BookSim2's `sim_type = throughput`: the terminals stop.
                        self.hca
                            .stop_sources(at, &mut self.pk, &mut self.tally, &mut self.stats);
                        self.sources_stopped = true;
                    }
                }
                Step::Unstable(reason, m) => {
                    let mean = (reason == StopReason::LatencyThres).then_some(m);
                    st.stop = Some(stopped(reason, at, mean));
                    return true;
                }
            },
        }
        if s.phase != Phase::Draining && s.clears_at_start() {
            self.stats.clear_recent();
            s.reset_at = at;
            if s.phase == Phase::Warming {
                st.sent_reset = self.sent();
            }
        }
        false
    }

    fn result(
        &mut self,
        cycles: u64,
        window: (u64, u64),
        warm: bool,
        saturated: bool,
        unstable: bool,
        stop: Option<Stop>,
    ) -> RunResult {
        let nodes = self.fab.nodes as f64;
        let w = window.1.saturating_sub(window.0).max(1) as f64;
        if warm {
            // A run stopped in its warm-up reports its last sample: the packets
            // created, delivered and their latencies since the statistics were last
            // cleared.
            for c in 0..self.cfg.classes.len() {
                self.stats.lat[c] = std::mem::take(&mut self.stats.recent_samples[c]);
                self.stats.offered[c] = self.stats.recent_off[c];
                self.stats.accepted[c] = self.stats.recent_acc[c];
                self.stats.net_lat_sum[c] = 0;
            }
        }
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
            flit_hops: self.tally.flit_hops,
            saturated,
            unstable,
            stop,
        }
    }
}

/// What the run loop carries from one period end to the next.
struct RunState {
    sampler: Sampler,
    /// The drain's last cycle.
    drain_end: u64,
    /// Why the run stopped early, if it did.
    stop: Option<Stop>,
    /// Flits sent on each output at the measurement's start and end, and at the last
    /// clear of the statistics (for a run stopped during its warm-up).
    sent0: Option<Vec<u64>>,
    sent1: Option<Vec<u64>>,
    sent_reset: Vec<u64>,
}

/// A stop at `at` for `reason` (its window is filled in at the end of the run).
fn stopped(reason: StopReason, at: u64, mean: Option<f64>) -> Stop {
    Stop {
        reason,
        at,
        window: (0, 0),
        mean,
    }
}

/// The network as a policy's [`Poster`] reaches it between cycles.
impl Net for Network {
    fn post(&mut self, p: Post) -> Result<u32, FlitError> {
        Network::post(self, p)
    }

    fn set_hca_arbiter(&mut self, node: u32, a: AnyVlArbiter) {
        self.hca.set_arbiter(node as usize, a);
    }

    fn set_output_arbiter(&mut self, router: u32, port: u8, a: AnyVlArbiter) {
        let f = &self.fab;
        if (router as usize) < f.port_base.len() && (port as u32) < f.ports[router as usize] {
            let g = f.port_base[router as usize] as usize + port as usize;
            self.out_arb[g] = a;
        }
    }

    fn fabric(&self) -> &Fabric {
        &self.fab
    }

    fn lanes_held(&self, g: u32) -> u32 {
        self.port.get(g as usize).map_or(0, |p| p.busy)
    }

    fn downstream_flits(&self, g: u32, lane: u8) -> u32 {
        match self.port.get(g as usize) {
            Some(p) if p.down_vc != NO_VC => self
                .vc
                .get(p.down_vc as usize + lane as usize)
                .map_or(0, |v| v.len as u32),
            _ => 0,
        }
    }

    fn input_flits(&self, g: u32, lane: u8) -> u32 {
        self.vc
            .get(g as usize * self.k.lanes + lane as usize)
            .map_or(0, |v| v.len as u32)
    }

    fn flit_counts(&self) -> (u64, u64) {
        (self.tally.moved, self.tally.flit_hops)
    }

    fn governor(&mut self) -> Option<&mut super::governor::Governor> {
        self.gov.as_mut()
    }

    fn vc_buffer(&self) -> u32 {
        self.k.cap
    }

    fn hca_flits(&self, node: u32, lane: u8) -> (u32, u32) {
        self.hca.held(node as usize, lane as usize)
    }

    #[cfg(test)]
    fn set_tie(&mut self, slot: u32, tie: u8) {
        self.pk.tie[slot as usize] = tie;
    }

    #[cfg(test)]
    fn set_up_ports(&mut self, slot: u32, draw: u32) {
        self.pk.route[slot as usize] = draw;
    }
}
