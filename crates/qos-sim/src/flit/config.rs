//! Configuration of a flit-level network (Yum et al. §3.1–3.3, §6.1): router pipeline
//! delays, virtual lanes and buffers, the switch allocator, VL arbitration, the HCA,
//! topology, traffic classes and the warm-up / measurement / drain phases with
//! BookSim2's sample periods and stability rule. Written in scenario TOML as-is
//! (`deny_unknown_fields`) and checked once by [`FlitConfig::validate`]
//! (`super::validate`). Nothing here reads files: a graph topology's file is read by
//! whoever parses the scenario and handed over as a built [`Fabric`].
//!
//! A setting named after BookSim2 means BookSim2's whole network: `delays =
//! "booksim2"` (or `"booksim"`) is BookSim2's `iq_router` and terminal cycle for cycle
//! — its stage, channel and credit delays, and, unless the file says otherwise (it may
//! not say anything else), its separable input-first allocator, its source-queue
//! terminal and its torus tie and dateline rules. The project's own benchmark network
//! (BookSim2's stage delays with one-cycle credits, Yum's VL arbiters and DMA HCA) is
//! `delays = "reference"`.

use std::sync::Arc;

use qos_core::vlarb::VlArbConfig;
use serde::{Deserialize, Serialize};

use super::anynet::AnyNet;
use super::error::FlitError;
use super::topology::{self, Fabric, Ties};

/// Longest run in cycles (the router core keeps 32-bit cycle numbers).
pub const MAX_CYCLES: u64 = 1 << 31;
/// Longest credit trip back, in cycles (the routers keep a 64-cycle history of the
/// flits that left each buffer; the credits in flight are the pops of the last
/// `credit` cycles).
pub const MAX_CREDIT_DELAY: u32 = 64;

/// Cycles spent in each stage of the router pipeline (Yum Fig 1), on the wires and on a
/// credit's way back. A header flit takes every stage; body and tail flits skip `route`
/// and `vl_alloc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delays {
    /// Stage 1: synchronisation and demultiplexing into a VL buffer.
    pub sync: u32,
    /// Stage 2: routing decision (header only).
    pub route: u32,
    /// Stage 3: arbitration for an output VL (header only; BookSim's VC allocation).
    pub vl_alloc: u32,
    /// Stage 3/4: crossbar (switch) arbitration, every flit.
    pub switch_alloc: u32,
    /// Stage 4: crossbar traversal.
    pub crossbar: u32,
    /// Stage 5: output buffering, link multiplexing and the wire to the next buffer, on
    /// the links between an HCA and its router, and between routers unless
    /// `router_link` says otherwise.
    pub link: u32,
    /// Stage 5 on router-to-router links when it differs from `link` (BookSim2 with
    /// `use_noc_latency` gives torus channels 2 cycles and host channels 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_link: Option<u32>,
    /// A credit's trip back to the upstream router after a flit leaves a buffer: from
    /// the cycle the flit wins the crossbar to the first cycle the upstream sender may
    /// spend the credit.
    pub credit: u32,
    /// The same trip back to an HCA, when it differs from `credit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_credit: Option<u32>,
    /// An HCA's ejection buffer: `router.buffer` flits per lane, each slot's credit
    /// back at the router this many cycles after the flit reached the HCA (BookSim2's
    /// terminal: 3). Absent: the HCA takes every flit at once (Yum's HCA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eject_credit: Option<u32>,
}

impl Delays {
    /// The project's reference router (`delays = "reference"`): BookSim2's stage
    /// delays (routing 0, VC allocation 1, switch allocation 1, crossbar 1, channel 1)
    /// with a one-cycle credit trip. Its zero-load latency on a mesh is BookSim2's;
    /// under load BookSim2's credits take longer ([`Delays::booksim2`]).
    pub const REFERENCE: Delays = Delays {
        sync: 0,
        route: 0,
        vl_alloc: 1,
        switch_alloc: 1,
        crossbar: 1,
        link: 1,
        router_link: None,
        credit: 1,
        host_credit: None,
        eject_credit: None,
    };
    /// A header's cycles through one router and its output link when nothing blocks
    /// it (Yum et al.'s S, §5).
    pub fn header_hop(&self) -> u32 {
        self.sync + self.route + self.vl_alloc + self.switch_alloc + self.crossbar + self.link
    }

    /// Yum Fig 1: five one-cycle stages.
    pub const YUM: Delays = Delays {
        sync: 1,
        route: 1,
        vl_alloc: 1,
        switch_alloc: 0,
        crossbar: 1,
        link: 1,
        router_link: None,
        credit: 1,
        host_credit: None,
        eject_credit: None,
    };

    /// BookSim2's `iq_router` cycle for cycle (routing_delay 0, vc_alloc_delay 1,
    /// sw_alloc_delay 1, st_final_delay 1, credit_delay 1, use_noc_latency 1): every
    /// channel delivers one cycle after the latency it is given (a flit sent at cycle
    /// t on a channel of latency L is read at t + L + 1), so a router link of latency
    /// L is `link = L` here, and a credit sent back at the cycle its flit leaves the
    /// buffer is read L + 1 cycles later and usable `credit_delay` after that:
    /// `credit = L + 2` on router links; the terminal uses its credits as soon as it
    /// reads them, `host_credit = 2`. The terminal's ejection buffer returns a credit
    /// as it reads the flit, over a 1-cycle channel: `eject_credit = 3`. On a torus
    /// and a concentrated mesh (`long`) BookSim2 gives router channels latency 2
    /// (`router_link = 2`, `credit = 4`).
    pub fn booksim2(long: bool) -> Delays {
        Delays::booksim2_with(long, 1, 0)
    }

    /// [`Delays::booksim2`] with BookSim2's `credit_delay` and `routing_delay`: a
    /// router uses a credit `credit_delay` cycles after reading it (`credit = L + 1 +
    /// credit_delay` on router links, `eject_credit = 2 + credit_delay` from the
    /// terminal's ejection buffer; the terminal's own credits do not wait), and a header
    /// spends `routing_delay` cycles routing before it asks for a VC (`route`).
    pub fn booksim2_with(long: bool, credit_delay: u32, routing_delay: u32) -> Delays {
        let wire = if long { 2 } else { 1 };
        Delays {
            route: routing_delay,
            router_link: long.then_some(wire),
            credit: wire + 1 + credit_delay,
            host_credit: Some(2),
            eject_credit: Some(2 + credit_delay),
            ..Delays::REFERENCE
        }
    }

    /// Cycles a header flit spends in a router's stages, the wire out excluded.
    pub fn stages(&self) -> u64 {
        (self.sync + self.route + self.vl_alloc + self.switch_alloc + self.crossbar) as u64
    }

    /// Wire delay between routers.
    pub fn router_wire(&self) -> u32 {
        self.router_link.unwrap_or(self.link)
    }

    /// Credit trip back to an HCA.
    pub fn host_credit_trip(&self) -> u32 {
        self.host_credit.unwrap_or(self.credit)
    }

    /// Cycles a header flit spends per router, the wire to the next router included.
    pub fn per_hop(&self) -> u64 {
        self.stages() + self.router_wire() as u64
    }

    /// Zero-load latency of an `len`-flit packet through `routers` routers: the
    /// stages of every router, the wires between them and to the destination HCA, the
    /// wire from the source HCA and its one-cycle DMA of the first flit, and the body.
    pub fn zero_load(&self, routers: u64, len: u64) -> u64 {
        routers * self.stages()
            + routers.saturating_sub(1) * self.router_wire() as u64
            + 2 * self.link as u64
            + 1
            + (len - 1)
    }
}

/// How the crossbar is allocated each cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Allocator {
    /// Yum's router: each input port's VL arbiter picks one eligible lane
    /// (`input_arbitration`), each output port's VL arbiter picks one of the lanes
    /// requesting it (`output_arbitration`, the link multiplexer of §3.3).
    #[default]
    VlArbiters,
    /// BookSim2's `separable_input_first` switch allocator with round-robin arbiters and
    /// one iteration: per input port and output port the lane after the input's last
    /// winner requests; each input port's arbiter picks one requested output port
    /// (round-robin over ports), each output port's arbiter one input port; an arbiter
    /// moves past its winner only when the grant goes through.
    SeparableInputFirst,
    /// BookSim2's `islip` VC and switch allocators (`iSLIP_Sparse`, one iteration,
    /// BookSim2's default): the requests are the separable allocator's; each output's
    /// arbiter grants one requesting input (round-robin from its pointer), each input's
    /// arbiter accepts one of the outputs that granted it (round-robin from its
    /// pointer), and only an accepted grant moves both pointers past each other.
    Islip,
    /// A crossbar input per lane (no input scheduler): every eligible lane requests
    /// its output and each output port's VL arbiter picks one; lanes of one input port
    /// may cross the crossbar in the same cycle towards different outputs.
    FullCrossbar,
}

impl Allocator {
    /// Whether this is one of BookSim2's allocators (separable input-first or iSLIP),
    /// which share the requests, the VC allocation stage and the round-robin VL rules.
    pub fn is_booksim2(self) -> bool {
        matches!(self, Allocator::SeparableInputFirst | Allocator::Islip)
    }
}

/// Router parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// Flit buffer per VL per input port (default 10).
    #[serde(default = "default_buffer")]
    pub buffer: u16,
    /// Pipeline delays; `delays = "reference"`, `"booksim2"` (or `"booksim"`) or
    /// `"yum"` in TOML via [`DelaySpec`].
    #[serde(default)]
    pub delays: DelaySpec,
    /// Crossbar allocation; absent, BookSim2's under BookSim2's delays and Yum's VL
    /// arbiters otherwise ([`FlitConfig::allocator`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<Allocator>,
    /// Output-link VL arbitration (stage 5; the policy of §3.3).
    #[serde(default)]
    pub output_arbitration: VlArbConfig,
    /// Crossbar-input VL arbitration (stage 4 scheduler).
    #[serde(default)]
    pub input_arbitration: VlArbConfig,
    /// Under Yum's VL arbiters, which of the headers that take free lanes of one
    /// router's outputs in the same cycle goes first (an assumption of the model:
    /// docs/flit-network.md, "Headers arriving together"); BookSim2's separable
    /// allocator decides by its own arbiters.
    #[serde(default, skip_serializing_if = "LaneOrder::is_default")]
    pub lane_order: LaneOrder,
    /// Output VL buffers, flits per lane of every router output (Yum §3.1's stage 5,
    /// Table 1: 1,280 bits = 10 flits); 0: none, the crossbar's output arbiter drives
    /// the link. Absent: 10 under `delays = "yum"`, none otherwise
    /// ([`FlitConfig::output_buffer`]). With buffers, a lane crosses the crossbar when
    /// its output lane's buffer has room (every output lane its own crossbar output),
    /// and `output_arbitration` chooses, every cycle, which buffered lane sends on the
    /// link. Yum's VL arbiters only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_buffer: Option<u16>,
    /// BookSim2's `credit_delay` under `delays = "booksim2"` only: cycles between a
    /// router reading a credit and using it (default 1; BookSim2's own default is 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credit_delay: Option<u32>,
    /// BookSim2's `use_noc_latency` under `delays = "booksim2"` only: a torus's router
    /// channels take latency 2 (true, BookSim2's default: the wrap-around makes them
    /// longer) or 1 (false), and so do a concentrated mesh's (two nodes' width); meshes,
    /// butterflies and fat trees take 1 either way, as in BookSim2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_noc_latency: Option<bool>,
    /// BookSim2's `routing_delay` under `delays = "booksim2"` only: a header's cycles
    /// of route computation before it asks for a VC (default 0; BookSim2's own default
    /// is 1). From 2 cycles a router routes its headers in batches, one batch at a
    /// time, as BookSim2 does; such a run is on one thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_delay: Option<u32>,
    /// BookSim2's `input_speedup` with BookSim2's allocators: crossbar inputs per input
    /// port (1 or 2); with 2, lanes of even and odd number are two crossbar inputs, so
    /// two lanes of a port may cross in one cycle towards different outputs (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_speedup: Option<u8>,
    /// BookSim2's `alloc_iters` with `allocator = "islip"`: iSLIP's iterations (1-16,
    /// default 1; pointers move in the first only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc_iters: Option<u8>,
    /// BookSim2's `wait_for_tail_credit` with BookSim2's allocators: an output lane (and
    /// a terminal's lane) takes a new packet only once the credit of the last one's tail
    /// is back, not when that tail leaves (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_tail_credit: Option<bool>,
    /// BookSim2's `hold_switch_for_packet` with BookSim2's allocators: a crossbar
    /// connection granted to a packet's flit is kept for its next flits, without
    /// allocation, while the next one is buffered and has a credit (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_switch_for_packet: Option<bool>,
    /// BookSim2's `priority` with BookSim2's allocators: what a packet's priority is
    /// where arbiters compare packets (default `none`: no packet outranks another).
    /// It decides which class a terminal sends from, which of an input port's lanes
    /// wanting one output asks for it (any allocator) and, under
    /// `allocator = "separable_input_first"`, which request each arbiter of the VC
    /// and switch allocators grants (BookSim2's iSLIP arbiters ignore priorities, as
    /// here).
    #[serde(default, skip_serializing_if = "PriorityRule::is_none")]
    pub priority: PriorityRule,
}

/// BookSim2's packet priorities (its `priority` key): the larger wins an arbiter, ties
/// go round-robin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PriorityRule {
    /// Every packet the same (BookSim2's default).
    #[default]
    None,
    /// The packet's class's `priority` (BookSim2's `priority = class` with
    /// `class_priority`).
    Class,
    /// The older packet first, by its creation cycle (BookSim2's `priority = age`:
    /// `INT_MAX` less the cycle the packet was created, its time in the source queue
    /// included).
    Age,
}

impl PriorityRule {
    /// Whether packets have no priority.
    pub fn is_none(&self) -> bool {
        *self == PriorityRule::None
    }
}

/// Most classes under `router.priority = "class"` (their priorities ride in the
/// routers' constants).
pub const MAX_PRIORITY_CLASSES: usize = 16;

/// The order in which a router's headers of one cycle take free output lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneOrder {
    /// The oldest packet (by creation cycle) first; packets as old in turn from an
    /// input VC drawn from the cycle and the router.
    #[default]
    Oldest,
    /// In turn from an input VC drawn from the cycle and the router, whatever the
    /// packets' ages.
    Turn,
}

impl LaneOrder {
    fn is_default(&self) -> bool {
        *self == LaneOrder::default()
    }
}

fn default_buffer() -> u16 {
    10
}

/// Delays by preset name or stage by stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DelaySpec {
    /// `delays = "booksim"`, `"booksim2"` or `"yum"`.
    Preset(DelayPreset),
    /// Every stage given.
    Stages(Delays),
}

impl Default for DelaySpec {
    fn default() -> Self {
        DelaySpec::Preset(DelayPreset::Reference)
    }
}

impl DelaySpec {
    /// The stage delays on topology `top` (BookSim2's channel latencies depend on it).
    pub fn delays(&self, top: &TopologySpec) -> Delays {
        match self {
            DelaySpec::Preset(DelayPreset::Reference) => Delays::REFERENCE,
            DelaySpec::Preset(DelayPreset::Booksim | DelayPreset::Booksim2) => {
                Delays::booksim2(top.noc_latency_links())
            }
            DelaySpec::Preset(DelayPreset::Yum) => Delays::YUM,
            DelaySpec::Stages(d) => *d,
        }
    }

    /// Whether these are BookSim2's delays by name, which makes the whole network
    /// BookSim2's.
    pub fn is_booksim2(&self) -> bool {
        matches!(
            self,
            DelaySpec::Preset(DelayPreset::Booksim | DelayPreset::Booksim2)
        )
    }
}

/// Named delay presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayPreset {
    /// [`Delays::REFERENCE`]: the project's benchmark router.
    Reference,
    /// The same as `booksim2` (BookSim2 by its old name).
    Booksim,
    /// [`Delays::booksim2`] for the topology, and BookSim2's allocator, terminal and
    /// torus rules wherever the configuration leaves them out.
    Booksim2,
    /// [`Delays::YUM`].
    Yum,
}

/// How an HCA turns its send queues into flits on its link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum HcaModel {
    /// Yum §3.2: a packet's lane is drawn when it is created; a DMA engine moves one
    /// flit per cycle into the HCA's VL buffers and the port's VL arbiter sends one
    /// flit per cycle, so packets on different lanes interleave.
    #[default]
    Dma,
    /// BookSim2's terminal: one packet at a time per class, in creation order; its
    /// header takes the first lane with a credit after the lane the class used last,
    /// and its flits follow one per cycle as credits allow (classes by priority, then
    /// round-robin).
    SourceQueue,
}

/// Host channel adapter parameters (Yum §3.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct HcaConfig {
    /// How packets become flits on the link; absent, BookSim2's terminal under
    /// BookSim2's delays and Yum's DMA otherwise ([`FlitConfig::hca_model`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<HcaModel>,
    /// Flits per HCA VL buffer (`model = "dma"`); absent = unbounded.
    pub vl_buffer: Option<u32>,
    /// VL arbitration of the HCA port (`model = "dma"`).
    #[serde(default)]
    pub arbitration: VlArbConfig,
}

/// Which half of a class's lanes a packet may use on a torus ring (both rules make
/// the rings free of deadlock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Dateline {
    /// The lower half until the packet crosses the dimension's wrap-around link, the
    /// upper half after it; packets are injected on the lower half.
    #[default]
    Crossing,
    /// BookSim2's `dim_order_torus`: the half is chosen when the packet enters a
    /// dimension — the upper one if its coordinate there is above the destination's —
    /// and kept to the end of the dimension; injection and ejection may use any lane.
    OnEntry,
}

/// The network's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TopologySpec {
    /// One router with `ports` ports, an HCA on each (the paper's 8-port cluster).
    Crossbar {
        /// Ports = HCAs.
        ports: u32,
    },
    /// Mesh of `n` dimensions (k×k by default), one HCA per router, dimension-order
    /// routing (X, then Y, then Z, ...).
    Mesh {
        /// Routers per side.
        k: u32,
        /// Dimensions (BookSim2's `n`): 2 unless written, 1–8.
        #[serde(default = "two_dims", skip_serializing_if = "is_two_dims")]
        n: u32,
        /// Routing: ascending dimension order for every packet (`dor`, the default);
        /// `xy_yx`, each packet ascending or descending at random, ½ each, on the lower
        /// or the upper lanes of its class (BookSim2's `xy_yx_mesh`), or by the
        /// credits in use at its first router (`adaptive_xy_yx`); `valiant` or
        /// `romm`, dimension order through a random intermediate node, each phase on
        /// its half of the lanes (BookSim2's `valiant_mesh`, `romm_mesh`;
        /// [`MeshRouting`]).
        #[serde(default, skip_serializing_if = "MeshRouting::is_dor")]
        routing: MeshRouting,
    },
    /// Torus of `n` dimensions (k×k by default), one HCA per router, dimension-order
    /// routing the short way round with dateline lane classes.
    Torus {
        /// Routers per side.
        k: u32,
        /// Dimensions (BookSim2's `n`): 2 unless written, 1–8.
        #[serde(default = "two_dims", skip_serializing_if = "is_two_dims")]
        n: u32,
        /// Which way a packet half-way round a ring goes; absent, at random under
        /// BookSim2's delays and the + way otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ties: Option<Ties>,
        /// How lanes split into dateline classes; absent, on entry under BookSim2's
        /// delays and by crossing otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dateline: Option<Dateline>,
        /// Routing: dimension order the short way round (`dor`, the default), or
        /// `valiant`, through a random intermediate node, as BookSim2's `valiant_torus`
        /// is written: each phase on its part of each dateline class's lanes (so four
        /// lanes or more), the dateline class chosen on entering a dimension (also at
        /// the intermediate node), each phase's ties drawn apart, up to 4 dimensions.
        /// (BookSim2 itself cannot run it: it leaves the ring partition unset when a
        /// packet goes straight through a router and stops on its assertion; here the
        /// partition stays the one chosen on entry, as its `dim_order_torus` keeps it.)
        #[serde(default, skip_serializing_if = "MeshRouting::is_dor")]
        routing: MeshRouting,
    },
    /// k-ary n-fly (BookSim2's `fly`): `n` stages of k^(n-1) routers with `k` ports,
    /// k^n HCAs injecting at the first stage and ejected at the last, destination-tag
    /// routing; `n = 1` is one k-port crossbar.
    Fly {
        /// Ports per router.
        k: u32,
        /// Stages (BookSim2's `n`): 2 unless written.
        #[serde(default = "two_dims", skip_serializing_if = "is_two_dims")]
        n: u32,
    },
    /// k-ary n-tree (BookSim2's `fattree`): `n` levels of k^(n-1) routers, each with k
    /// ports down and (below the top) k up, k^n HCAs at the leaves, nearest-common-
    /// ancestor routing with the up port drawn at random (BookSim2's `nca`).
    FatTree {
        /// Down ports per router (and HCAs per leaf).
        k: u32,
        /// Levels (BookSim2's `n`): 2 unless written.
        #[serde(default = "two_dims", skip_serializing_if = "is_two_dims")]
        n: u32,
    },
    /// Concentrated mesh (BookSim2's `cmesh`): a k×k mesh of routers with four HCAs
    /// each, a 2×2 block of a 2k×2k node grid ([`topology::CMesh`]), routed in
    /// dimension order between routers (`dor`, BookSim2's `dor_no_express`) or X or Y
    /// first per packet on the lower or upper lanes (`xy_yx`, its `xy_yx_no_express`).
    /// Under BookSim2's delays its router links take 2 cycles (`use_noc_latency`).
    Cmesh {
        /// Routers per side.
        k: u32,
        /// Routing between routers: `dor` (the default) or `xy_yx`.
        #[serde(default, skip_serializing_if = "MeshRouting::is_dor")]
        routing: MeshRouting,
        /// `dor` taking the express channels along the mesh's edges (BookSim2's
        /// `dor_cmesh`; k even): a packet on an edge router more than k/2 − 1 routers
        /// from its destination's column (row) jumps k/2 routers along the edge, over a
        /// link of latency k under `use_noc_latency`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        express: bool,
    },
    /// Flattened butterfly (BookSim2's `flatfly`, two dimensions): k×k routers of `c`
    /// HCAs each (a √c×√c block of a node grid of side k·√c, as BookSim2's `xr`, `yr`),
    /// each router linked to every other router of its row and of its column, routed X
    /// then Y (BookSim2's `ran_min`, [`topology::flatfly`]). Under BookSim2's delays
    /// with `use_noc_latency` (its default) a link between routers dx columns and dy
    /// rows apart takes √c·(dx + dy) cycles, as BookSim2 lays the routers out.
    Flatfly {
        /// Routers per side.
        k: u32,
        /// HCAs per router: 1, 4 or 9 (BookSim2's `c` = `xr`·`yr`, `xr` = `yr`).
        #[serde(default = "one")]
        c: u32,
        /// Routing: X then Y (`dor`, the default: BookSim2's `ran_min`), or X or Y
        /// first per packet on the lower or upper lanes, drawn at random (`xy_yx`, its
        /// `xyyx`) or by the first router's credits in use (`adaptive_xy_yx`, its
        /// `adaptive_xyyx`), as on a mesh ([`MeshRouting`]); or `valiant` (its
        /// `valiant`): X then Y to the router of an intermediate node drawn uniformly,
        /// on the lower lanes, then to the destination on the upper ones, phase one
        /// ending early at the destination's router, the lanes not split into it.
        #[serde(default, skip_serializing_if = "MeshRouting::is_dor")]
        routing: MeshRouting,
    },
    /// Any graph of routers and nodes in BookSim2's `anynet` listing (the file its
    /// `network_file` names), one line per router: `router R`, then `node N` for each
    /// of its nodes and `router S [latency]` for each router it is linked to (links
    /// both ways; a latency, in cycles, is the channel R → S's only, the way back
    /// taking 1 unless written). Routed by BookSim2's `min_anynet`: one shortest path
    /// by latency per pair of routers, ties to the lowest router number
    /// ([`super::anynet`]). The latencies apply under BookSim2's delays.
    Anynet {
        /// The listing's lines.
        network: Vec<String>,
    },
    /// Any graph of a qos-core topology file (docs/topology.md): a router per switch,
    /// an HCA per host, the file's source routes (checked free of deadlock).
    Graph {
        /// The topology file, relative to the scenario file.
        file: String,
        /// The fabric built from it, set by whoever read the file (the scenario parser,
        /// or [`super::graph::spec`]).
        #[serde(skip)]
        graph: Option<Arc<Fabric>>,
    },
}

/// A mesh's routing ([`TopologySpec::Mesh`]); on a torus, `dor` or `valiant`
/// ([`TopologySpec::Torus`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MeshRouting {
    /// X, then Y, then Z, ... for every packet.
    #[default]
    Dor,
    /// BookSim2's `xy_yx_mesh`: at its first router a packet goes ascending or
    /// descending at random, ½ each; from then on the lane it came in on decides,
    /// descending from the class's ⌊n/2⌋-th lane up. Ascending takes the class's lanes
    /// less the last ⌊n/2⌋, descending the lanes less the first ⌊n/2⌋ (with an odd
    /// count the middle lane is in both, and a packet taking it ascending goes on
    /// descending); the host port's lanes are not split.
    XyYx,
    /// BookSim2's `adaptive_xy_yx_mesh`: as [`MeshRouting::XyYx`], except that at its
    /// first router a packet goes X first when the X-first output has fewer credits in
    /// use (flits sent and not yet credited back, over all its lanes) than the Y-first
    /// one, Y first when more, and at random (½ each) when as many.
    AdaptiveXyYx,
    /// BookSim2's `valiant_mesh` (on a torus, its `valiant_torus`: [`TopologySpec::Torus`]):
    /// a packet goes in dimension order to an intermediate
    /// node drawn uniformly over all nodes (its source and destination included), then
    /// in dimension order to its destination. Phase one takes the class's lanes less
    /// the last ⌊n/2⌋, phase two the lanes less the first ⌊n/2⌋ (with an odd count the
    /// middle lane is in both); at the destination's router the lanes are not split
    /// (BookSim2's rule, also for a packet passing its destination in phase one).
    Valiant,
    /// BookSim2's `romm_mesh`: as [`MeshRouting::Valiant`], the intermediate node drawn
    /// in the minimal quadrant, each coordinate uniformly between the source's and the
    /// destination's (both included): the route stays minimal.
    Romm,
    /// A flatfly only, BookSim2's `ugal` (`ugal_flatfly_onchip`): at its first router
    /// a packet goes minimally (on the upper lanes) unless its minimal output's credits
    /// in use times its hops exceed, by more than 2, those of the output towards a
    /// random intermediate router (its port and every coordinate in which source and
    /// destination differ drawn uniformly, `find_ran_intm`) times the hops through
    /// it; then through that router on the lower lanes, and on to the destination on
    /// the upper ones.
    Ugal,
}

impl MeshRouting {
    /// Dimension order (the default).
    pub fn is_dor(&self) -> bool {
        *self == MeshRouting::Dor
    }

    /// Routes in two phases through an intermediate node (`valiant`, `romm`).
    pub fn two_phase(&self) -> bool {
        matches!(
            self,
            MeshRouting::Valiant | MeshRouting::Romm | MeshRouting::Ugal
        )
    }

    /// Splits the lanes between routers in two ranges (`xy_yx`, `valiant`, `romm`).
    pub fn splits_lanes(&self) -> bool {
        !self.is_dor()
    }

    /// The name scenario files use.
    pub fn name(&self) -> &'static str {
        match self {
            MeshRouting::Dor => "dor",
            MeshRouting::XyYx => "xy_yx",
            MeshRouting::AdaptiveXyYx => "adaptive_xy_yx",
            MeshRouting::Valiant => "valiant",
            MeshRouting::Romm => "romm",
            MeshRouting::Ugal => "ugal",
        }
    }
}

fn two_dims() -> u32 {
    2
}

fn is_two_dims(n: &u32) -> bool {
    *n == 2
}

fn one() -> u32 {
    1
}

impl TopologySpec {
    /// A k×k mesh.
    pub fn mesh(k: u32) -> TopologySpec {
        TopologySpec::mesh_n(k, 2)
    }

    /// A mesh of `n` dimensions, `k` routers per side, with dimension-order routes.
    pub fn mesh_n(k: u32, n: u32) -> TopologySpec {
        TopologySpec::Mesh {
            k,
            n,
            routing: MeshRouting::Dor,
        }
    }

    /// A k×k torus with the tie and dateline rules left to the delays.
    pub fn torus(k: u32) -> TopologySpec {
        TopologySpec::Torus {
            k,
            n: 2,
            ties: None,
            dateline: None,
            routing: MeshRouting::Dor,
        }
    }

    /// The k and n of a mesh, torus or butterfly (k^n nodes), whose node numbers
    /// BookSim2's digit permutations (tornado, neighbor) read as n digits base k.
    pub fn digits(&self) -> Option<(u32, u32)> {
        match *self {
            TopologySpec::Mesh { k, n, .. }
            | TopologySpec::Torus { k, n, .. }
            | TopologySpec::Fly { k, n }
            | TopologySpec::FatTree { k, n } => Some((k, n)),
            // BookSim2 reads a concentrated mesh's node numbers as two digits base
            // xr·k (xr = 2 nodes per router along X).
            TopologySpec::Cmesh { k, .. } => Some((2 * k, 2)),
            // And a flattened butterfly's base xr·k as well.
            TopologySpec::Flatfly { k, c, .. } => Some((c.isqrt() * k, 2)),
            _ => None,
        }
    }

    /// Whether BookSim2's `use_noc_latency` lengthens this topology's router links to two
    /// cycles (a torus's, a concentrated mesh's; the others' are one cycle either way).
    pub fn noc_latency_links(&self) -> bool {
        matches!(
            self,
            TopologySpec::Torus { .. } | TopologySpec::Cmesh { .. }
        )
    }

    /// The fabric: routers, ports, links and routes (a torus's ties as written, the
    /// + way if not; [`FlitConfig::fabric`] applies BookSim2's defaults).
    pub fn fabric(&self) -> Result<Fabric, FlitError> {
        self.fabric_with(Ties::Plus)
    }

    /// The fabric, a torus whose ties are not written breaking them by `ties`.
    pub(super) fn fabric_with(&self, default_ties: Ties) -> Result<Fabric, FlitError> {
        Ok(match self {
            TopologySpec::Crossbar { ports } => topology::crossbar(*ports),
            TopologySpec::Mesh { k, n, routing } => {
                let mut f = topology::grid(*k, *n, false, Ties::Plus);
                if let Some(g) = &mut f.grid {
                    g.xy_yx = matches!(routing, MeshRouting::XyYx | MeshRouting::AdaptiveXyYx);
                }
                f
            }
            TopologySpec::Torus { k, n, ties, .. } => {
                topology::grid(*k, *n, true, ties.unwrap_or(default_ties))
            }
            TopologySpec::Fly { k, n } => topology::fly(*k, *n),
            TopologySpec::FatTree { k, n } => topology::fat_tree(*k, *n),
            TopologySpec::Cmesh {
                k,
                routing,
                express,
            } => topology::cmesh(*k, *routing == MeshRouting::XyYx, *express),
            TopologySpec::Flatfly { k, c, routing } => topology::flatfly(
                *k,
                c.isqrt(),
                true,
                matches!(routing, MeshRouting::XyYx | MeshRouting::AdaptiveXyYx),
            ),
            TopologySpec::Anynet { network } => AnyNet::parse(network)
                .map_err(|m| {
                    FlitError::config("topology.network", format!("topology.network: {m}"))
                })?
                .fabric(),
            TopologySpec::Graph { graph, .. } => match graph {
                Some(f) => f.as_ref().clone(),
                None => return Err(FlitError::config("topology.file", self.unloaded())),
            },
        })
    }

    /// The message for a graph whose file was not loaded.
    pub(super) fn unloaded(&self) -> String {
        match self {
            TopologySpec::Graph { file, .. } => {
                format!("topology.file = '{file}': the topology file was not loaded")
            }
            _ => String::new(),
        }
    }
}

/// Where packets of a class go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Pattern {
    /// Uniform over all nodes, the source included (as BookSim).
    #[default]
    Uniform,
    /// Uniform over all other nodes.
    UniformOthers,
    /// (x, y) → (y, x) on a square node grid.
    Transpose,
    /// Node i → node !i (node count a power of two).
    BitComplement,
    /// Node i → node i with its address bits reversed (node count a power of two;
    /// BookSim2's `bitrev`).
    BitReverse,
    /// Node i → node i with its address bits rotated left by one (node count a power
    /// of two; BookSim2's `shuffle`).
    Shuffle,
    /// Each coordinate of (x, y) on a square node grid of side k moved ⌈k/2⌉ − 1 up,
    /// wrapping (BookSim2's `tornado`).
    Tornado,
    /// Each coordinate of (x, y) on a square node grid moved one up, wrapping
    /// (BookSim2's `neighbor`).
    Neighbor,
    /// A `fraction` of packets to the `nodes`, the rest uniform. With `fraction = 1`
    /// and `weights`, BookSim2's `hotspot({nodes},{rates})`.
    Hotspot {
        /// Hotspot nodes.
        nodes: Vec<u32>,
        /// Share of packets to them (0–1).
        fraction: f64,
        /// Relative share of each hotspot node among the packets sent to them (one
        /// per node, each at least 1); left out, every node alike.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        weights: Vec<u32>,
    },
    /// Node i → node i + 1 (modulo the node count) with probability 1/3, else node i
    /// itself (BookSim2's `diagonal`: `RandomInt(2) == 0`, a draw of 0, 1 or 2).
    Diagonal,
    /// Node i → node i mod N/2 or that plus N/2, each with probability 1/2, N the
    /// node count (BookSim2's `asymmetric`).
    Asymmetric,
    /// 64 nodes only: with probability 1/2 one of the nine nodes i + 8a + b, a and b
    /// each −1, 0 or +1, modulo 64, else uniform over all nodes (BookSim2's `taper64`).
    Taper64,
    /// Node i → entry i of a random permutation of the nodes: BookSim2's `randperm`
    /// with `perm_seed = seed`, the very permutation BookSim2 draws (its generator,
    /// Knuth's `ran_array`, seeded with `seed`; [`super::ran_array`]).
    Randperm {
        /// BookSim2's `perm_seed`.
        seed: i64,
    },
    /// Uniform over the nodes not `excluded` (BookSim2's `background({excluded})`).
    Background {
        /// Nodes no packet goes to.
        excluded: Vec<u32>,
    },
}

/// How packet arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Process {
    /// One packet per cycle with probability `rate` (BookSim's injection process).
    #[default]
    Bernoulli,
    /// Poisson arrivals at `rate` per cycle.
    Poisson,
    /// Bursts (BookSim2's `on_off`): every node is a two-state Markov chain, off at
    /// cycle 0. Each cycle an off node turns on with probability `alpha` and an on node
    /// turns off with probability `beta`; then a node that is on injects with
    /// probability r1 = rate · (alpha + beta) / alpha, so that `rate` stays the
    /// long-run mean (bursts of 1/beta cycles on average, gaps of 1/alpha).
    OnOff {
        /// Probability per cycle that an off node turns on (0–1].
        alpha: f64,
        /// Probability per cycle that an on node turns off [0–1].
        beta: f64,
    },
}

impl Process {
    /// The injection probability of an on node (r1) for a long-run `rate`; `rate`
    /// itself for Bernoulli and Poisson arrivals.
    pub fn peak(&self, rate: f64) -> f64 {
        match *self {
            Process::OnOff { alpha, beta } => rate * (alpha + beta) / alpha,
            _ => rate,
        }
    }
}

/// One packet length of a class's mix: packets of `flits` flits drawn with a
/// probability proportional to `weight` (BookSim2's `packet_size` and
/// `packet_size_rate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketSize {
    /// Length in flits.
    pub flits: u32,
    /// Relative frequency (a whole number ≥ 1).
    pub weight: u32,
}

impl PacketSize {
    /// Packets of `flits` flits with relative frequency `weight`.
    pub const fn new(flits: u32, weight: u32) -> PacketSize {
        PacketSize { flits, weight }
    }
}

/// A traffic class: its lanes, packet length, priority and random injection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Name used in results.
    pub name: String,
    /// Virtual lanes this class may use (VL15 for control traffic).
    pub vls: Vec<u8>,
    /// Packet length in flits (paper: 40 data, 10 control).
    #[serde(default = "default_packet")]
    pub packet_flits: u32,
    /// Packet lengths drawn per packet instead of `packet_flits` (which is then unused),
    /// each with its weight; `rate` stays in packets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packet_mix: Vec<PacketSize>,
    /// HCA send-queue priority: larger goes first.
    #[serde(default)]
    pub priority: u8,
    /// Packets per node per cycle (0 = only CBR streams).
    #[serde(default)]
    pub rate: f64,
    /// Arrival process.
    #[serde(default)]
    pub process: Process,
    /// Destinations.
    #[serde(default)]
    pub pattern: Pattern,
    /// A packet keeps the lane it was injected on at every hop (IBA with an identity
    /// SL→VL mapping: a real-time connection's lane, whose WRR weight the routers
    /// reserve), instead of taking any free lane of its class. Not on a torus.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_lane: bool,
}

fn default_packet() -> u32 {
    40
}

impl ClassConfig {
    /// Mean packet length in flits: `packet_flits`, or the mix's weighted mean.
    pub fn mean_flits(&self) -> f64 {
        if self.packet_mix.is_empty() {
            return self.packet_flits as f64;
        }
        let w: f64 = self.packet_mix.iter().map(|p| p.weight as f64).sum();
        let f: f64 = self
            .packet_mix
            .iter()
            .map(|p| p.flits as f64 * p.weight as f64)
            .sum();
        f / w
    }
}

/// A constant-bit-rate stream: one packet every `period` cycles from `src` to `dst`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    /// Name in results (per-flow statistics).
    pub name: String,
    /// Source node.
    pub src: u32,
    /// Destination node.
    pub dst: u32,
    /// Class name.
    pub class: String,
    /// Cycles between packets.
    pub period: u64,
    /// First packet's cycle.
    #[serde(default)]
    pub start: u64,
}

/// BookSim-style phases, in cycles, cut into BookSim2's sample periods, with
/// BookSim2's stability rule and convergence tests ([`super::sampling`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phases {
    /// Warm-up: run, measure nothing (with `warmup_converge`, the warm-up lasts until
    /// it converges, and `warmup + measure` bounds warm-up and measurement together).
    pub warmup: u64,
    /// Measurement: packets created now are measured. At most this long: it ends
    /// earlier after three successive converged sample periods (`stopping_thres`).
    pub measure: u64,
    /// Longest drain after measurement for measured packets to arrive; a run that
    /// does not drain in time is reported as saturated.
    #[serde(default = "default_drain")]
    pub drain_max: u64,
    /// BookSim2's `latency_thres` (default 500): at the end of every `sample_period`
    /// and every 1,000 cycles of the drain, the run stops as unstable when a class's
    /// mean over the latencies of the packets delivered since the statistics were last
    /// cleared and the ages of its flits in flight exceeds this many cycles; so does a
    /// run whose measured packets' mean latency exceeds it once they have all arrived.
    /// `false` = never.
    #[serde(
        default = "default_abort",
        deserialize_with = "abort_latency",
        skip_serializing_if = "is_default_abort"
    )]
    pub abort_latency: Option<f64>,
    /// BookSim2's `sample_period` (default 10,000 cycles).
    #[serde(default = "default_sample")]
    pub sample_period: u64,
    /// BookSim2's `warmup_periods = 0`: the warm-up ends at the first sample period
    /// whose mean latency and accepted rate each changed by at most `warmup_thres` and
    /// `acc_warmup_thres` (relative) from the period before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warmup_converge: bool,
    /// BookSim2's `warmup_thres` and `acc_warmup_thres` (default 0.05; negative: that
    /// test is skipped, as in BookSim2).
    #[serde(default = "default_thres", skip_serializing_if = "is_default_thres")]
    pub warmup_thres: f64,
    #[serde(default = "default_thres", skip_serializing_if = "is_default_thres")]
    pub acc_warmup_thres: f64,
    /// BookSim2's `stopping_thres` and `acc_stopping_thres` (default 0.05; negative:
    /// that test is skipped, as in BookSim2): with `stop_converged`, the measurement
    /// ends after three successive sample periods whose mean latency and accepted rate
    /// changed by at most these from the period before.
    #[serde(default = "default_thres", skip_serializing_if = "is_default_thres")]
    pub stopping_thres: f64,
    #[serde(default = "default_thres", skip_serializing_if = "is_default_thres")]
    pub acc_stopping_thres: f64,
    /// Whether a converged measurement ends early (default true, as BookSim2 does;
    /// false: the measurement always lasts `measure` cycles).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub stop_converged: bool,
    /// BookSim2's `sim_type = throughput` drain (default false: the sources keep
    /// injecting until every measured packet has arrived, BookSim2's `latency` mode):
    /// at the measurement's end the sources stop — each node sends on the packets its
    /// terminal had generated (the one at the front of each class's queue, unless it
    /// reached the front in the measurement's last cycle), the packets queued behind
    /// them are never sent — and the run drains what is in flight. BookSim2's terminal
    /// only (`hca.model = "source_queue"`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub stop_sources: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

fn default_drain() -> u64 {
    50_000
}

fn default_sample() -> u64 {
    10_000
}

fn default_abort() -> Option<f64> {
    Some(500.0)
}

fn is_default_abort(a: &Option<f64>) -> bool {
    *a == default_abort()
}

fn default_thres() -> f64 {
    0.05
}

fn is_default_thres(t: &f64) -> bool {
    *t == default_thres()
}

/// `abort_latency`: a number of cycles, or `false` for none.
fn abort_latency<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Abort {
        Cycles(f64),
        Flag(bool),
    }
    match Abort::deserialize(d)? {
        Abort::Cycles(c) => Ok(Some(c)),
        Abort::Flag(false) => Ok(None),
        Abort::Flag(true) => Err(serde::de::Error::custom(
            "abort_latency: a number of cycles, or false for none",
        )),
    }
}

impl Phases {
    /// Warm-up and measurement of these lengths with BookSim2's stability rule and
    /// convergence tests at their defaults (`latency_thres` 500, sample periods of
    /// 10,000 cycles, thresholds 0.05), the default drain.
    pub fn new(warmup: u64, measure: u64) -> Phases {
        Phases {
            warmup,
            measure,
            drain_max: default_drain(),
            abort_latency: default_abort(),
            sample_period: default_sample(),
            warmup_converge: false,
            warmup_thres: default_thres(),
            acc_warmup_thres: default_thres(),
            stopping_thres: default_thres(),
            acc_stopping_thres: default_thres(),
            stop_converged: true,
            stop_sources: false,
        }
    }

    /// Warm-up and measurement of exactly these lengths: no stability rule, no
    /// convergence test (a run always measures its whole window and drains).
    pub fn fixed(warmup: u64, measure: u64) -> Phases {
        Phases {
            abort_latency: None,
            stop_converged: false,
            ..Phases::new(warmup, measure)
        }
    }
}

/// A whole flit-network configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlitConfig {
    /// Topology.
    pub topology: TopologySpec,
    /// Routers.
    pub router: RouterConfig,
    /// HCAs.
    #[serde(default)]
    pub hca: HcaConfig,
    /// Traffic classes (at least one).
    pub classes: Vec<ClassConfig>,
    /// CBR streams.
    #[serde(default)]
    pub streams: Vec<StreamConfig>,
    /// Phases.
    pub phases: Phases,
    /// Seed of the random number generator.
    #[serde(default)]
    pub seed: u64,
    /// When no flit moves for this many cycles while flits wait, the network is
    /// deadlocked: the run ends as unstable (stop reason `deadlock`) under the stability
    /// rule (`phases.abort_latency` set) and fails without it.
    #[serde(default = "default_watchdog")]
    pub watchdog: u64,
}

fn default_watchdog() -> u64 {
    20_000
}

impl FlitConfig {
    /// The reference configuration of the benchmark: 8×8 mesh, DOR, 4 VLs × 10-flit
    /// buffers, 40-flit packets, uniform traffic at `rate` packets/node/cycle, Yum's
    /// router with BookSim2's stage delays and one-cycle credits
    /// ([`Delays::REFERENCE`]), 10,000 warm-up and 30,000 measured cycles.
    pub fn reference(k: u32, rate: f64) -> FlitConfig {
        FlitConfig {
            topology: TopologySpec::mesh(k),
            router: RouterConfig {
                buffer: 10,
                delays: DelaySpec::Preset(DelayPreset::Reference),
                allocator: None,
                output_arbitration: VlArbConfig::RoundRobin,
                input_arbitration: VlArbConfig::RoundRobin,
                lane_order: Default::default(),
                output_buffer: None,
                credit_delay: None,
                use_noc_latency: None,
                routing_delay: None,
                input_speedup: None,
                alloc_iters: None,
                wait_for_tail_credit: None,
                hold_switch_for_packet: None,
                priority: Default::default(),
            },
            hca: HcaConfig::default(),
            classes: vec![ClassConfig {
                name: "data".into(),
                vls: vec![0, 1, 2, 3],
                packet_flits: 40,
                packet_mix: Vec::new(),
                priority: 0,
                rate,
                process: Process::Bernoulli,
                pattern: Pattern::Uniform,
                keep_lane: false,
            }],
            streams: vec![],
            phases: Phases::new(10_000, 30_000),
            seed: 1,
            watchdog: default_watchdog(),
        }
    }

    /// The BookSim2-equivalent configuration of `topology` (scenarios/flit/booksim/):
    /// BookSim2's router and terminal cycle for cycle (`delays = "booksim2"`, which
    /// brings the separable input-first allocator, the source-queue terminal and, on a
    /// torus, random ties and dateline halves chosen on entry), 4 VCs × 10-flit
    /// buffers, 40-flit packets, uniform traffic at `rate`, 10,000 warm-up and 30,000
    /// measured cycles, `latency_thres = 500` checked every 10,000 cycles.
    pub fn booksim2(topology: TopologySpec, rate: f64) -> FlitConfig {
        let mut c = FlitConfig::reference(8, rate);
        c.topology = topology;
        c.router.delays = DelaySpec::Preset(DelayPreset::Booksim2);
        c
    }

    /// The stage delays of this configuration.
    pub fn delays(&self) -> Delays {
        if self.is_booksim2() {
            return Delays::booksim2_with(
                self.topology.noc_latency_links() && self.router.use_noc_latency.unwrap_or(true),
                self.router.credit_delay.unwrap_or(1),
                self.router.routing_delay.unwrap_or(0),
            );
        }
        self.router.delays.delays(&self.topology)
    }

    /// Whether the delays name BookSim2, which makes BookSim2's rules the defaults.
    pub fn is_booksim2(&self) -> bool {
        self.router.delays.is_booksim2()
    }

    /// The crossbar allocator: as written, else BookSim2's separable input-first one
    /// under BookSim2's delays and Yum's VL arbiters otherwise.
    pub fn allocator(&self) -> Allocator {
        self.router.allocator.unwrap_or(if self.is_booksim2() {
            Allocator::SeparableInputFirst
        } else {
            Allocator::VlArbiters
        })
    }

    /// Flits per output VL buffer of a router: as written, else Yum's 10 (Table 1)
    /// under `delays = "yum"` with Yum's VL arbiters, and none otherwise.
    pub fn output_buffer(&self) -> u16 {
        self.router.output_buffer.unwrap_or(
            if self.router.delays == DelaySpec::Preset(DelayPreset::Yum)
                && !self.allocator().is_booksim2()
            {
                10
            } else {
                0
            },
        )
    }

    /// The HCA model: as written, else BookSim2's terminal under BookSim2's delays and
    /// Yum's DMA otherwise.
    pub fn hca_model(&self) -> HcaModel {
        self.hca.model.unwrap_or(if self.is_booksim2() {
            HcaModel::SourceQueue
        } else {
            HcaModel::Dma
        })
    }

    /// A torus's tie rule: as written, else random under BookSim2's delays and the +
    /// way otherwise.
    pub fn ties(&self) -> Ties {
        match self.topology {
            TopologySpec::Torus { ties: Some(t), .. } => t,
            _ if self.is_booksim2() => Ties::Random,
            _ => Ties::Plus,
        }
    }

    /// A torus's dateline rule: as written, else on entry under BookSim2's delays and
    /// by crossing otherwise.
    pub fn dateline(&self) -> Dateline {
        match self.topology {
            TopologySpec::Torus {
                dateline: Some(d), ..
            } => d,
            _ if self.is_booksim2() => Dateline::OnEntry,
            _ => Dateline::Crossing,
        }
    }

    /// The fabric, with the tie rule of [`FlitConfig::ties`].
    pub fn fabric(&self) -> Result<Fabric, FlitError> {
        let mut f = self.topology.fabric_with(self.ties())?;
        if !self.link_lengths() {
            f.latency.clear();
        }
        Ok(f)
    }

    /// Whether router links take the latencies of their lengths
    /// ([`topology::Fabric::latency`]): under BookSim2's delays with its
    /// `use_noc_latency` (the default); else every router link takes the delays' one.
    pub fn link_lengths(&self) -> bool {
        self.is_booksim2()
            && (self.router.use_noc_latency.unwrap_or(true)
                || matches!(self.topology, TopologySpec::Anynet { .. }))
    }

    /// Number of HCAs (nodes).
    pub fn nodes(&self) -> u32 {
        match self.topology {
            TopologySpec::Crossbar { ports } => ports,
            TopologySpec::Mesh { k, n, .. }
            | TopologySpec::Torus { k, n, .. }
            | TopologySpec::Fly { k, n }
            | TopologySpec::FatTree { k, n } => k.saturating_pow(n),
            TopologySpec::Cmesh { k, .. } => topology::CMESH_C.saturating_mul(k.saturating_mul(k)),
            TopologySpec::Flatfly { k, c, .. } => c.saturating_mul(k.saturating_mul(k)),
            TopologySpec::Anynet { ref network } => AnyNet::parse(network).map_or(0, |a| a.nodes),
            TopologySpec::Graph { ref graph, .. } => graph.as_ref().map_or(0, |f| f.nodes),
        }
    }

    /// Cycles the warm-up and measurement take (the drain comes on top).
    pub fn planned_cycles(&self) -> u64 {
        self.phases.warmup.saturating_add(self.phases.measure)
    }
}
