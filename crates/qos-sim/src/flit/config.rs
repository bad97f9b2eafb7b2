//! Configuration of a flit-level network (Yum et al. §3.1–3.3, §6.1): router pipeline
//! delays, virtual lanes and buffers, VL arbitration, the HCA, topology, traffic classes
//! and the warm-up / measurement / drain phases. Written in scenario TOML as-is
//! (`deny_unknown_fields`) and checked once by [`FlitConfig::validate`].

use std::path::Path;
use std::sync::Arc;

use qos_core::source::Located;
use qos_core::topology::Topology;
use qos_core::vlarb::{VlArbConfig, CONTROL_VL, MAX_VLS};
use serde::{Deserialize, Serialize};

use super::topology::Fabric;
use super::FlitError;

/// Longest run in cycles (the router core keeps 32-bit cycle numbers).
pub const MAX_CYCLES: u64 = 1 << 31;
/// Longest credit trip back, in cycles (the routers keep a 64-cycle history of the
/// flits that left each buffer; the credits in flight are the pops of the last
/// `credit` cycles).
pub const MAX_CREDIT_DELAY: u32 = 64;

/// Cycles spent in each stage of the router pipeline (Yum Fig 1). A header flit takes
/// every stage; body and tail flits skip `route` and `vl_alloc`.
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
    /// Stage 5: output buffering, link multiplexing and the wire, to the next buffer.
    pub link: u32,
    /// A credit's trip back to the upstream sender after a flit leaves a buffer.
    pub credit: u32,
}

impl Delays {
    /// BookSim2's input-queued router: routing_delay 0, vc_alloc_delay 1,
    /// sw_alloc_delay 1, st_final_delay 1, channel latency 1, credit_delay 1.
    pub const BOOKSIM: Delays = Delays {
        sync: 0,
        route: 0,
        vl_alloc: 1,
        switch_alloc: 1,
        crossbar: 1,
        link: 1,
        credit: 1,
    };
    /// Yum Fig 1: five one-cycle stages.
    pub const YUM: Delays = Delays {
        sync: 1,
        route: 1,
        vl_alloc: 1,
        switch_alloc: 0,
        crossbar: 1,
        link: 1,
        credit: 1,
    };
    /// Cycles a header flit spends per router, link included.
    pub fn per_hop(&self) -> u64 {
        (self.sync + self.route + self.vl_alloc + self.switch_alloc + self.crossbar + self.link)
            as u64
    }
}

/// Router parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// Flit buffer per VL per input port (default 10).
    #[serde(default = "default_buffer")]
    pub buffer: u16,
    /// Pipeline delays; `preset = "booksim"` or `"yum"` in TOML via [`DelaySpec`].
    #[serde(default)]
    pub delays: DelaySpec,
    /// Output-link VL arbitration (stage 5; the policy of §3.3).
    #[serde(default)]
    pub output_arbitration: VlArbConfig,
    /// Crossbar-input VL arbitration (stage 4 scheduler).
    #[serde(default)]
    pub input_arbitration: VlArbConfig,
}

fn default_buffer() -> u16 {
    10
}

/// Delays by preset name or stage by stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DelaySpec {
    /// `delays = "booksim"` or `"yum"`.
    Preset(DelayPreset),
    /// Every stage given.
    Stages(Delays),
}

impl Default for DelaySpec {
    fn default() -> Self {
        DelaySpec::Preset(DelayPreset::Booksim)
    }
}

impl DelaySpec {
    /// The stage delays.
    pub fn delays(&self) -> Delays {
        match self {
            DelaySpec::Preset(DelayPreset::Booksim) => Delays::BOOKSIM,
            DelaySpec::Preset(DelayPreset::Yum) => Delays::YUM,
            DelaySpec::Stages(d) => *d,
        }
    }
}

/// Named delay presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayPreset {
    /// [`Delays::BOOKSIM`].
    Booksim,
    /// [`Delays::YUM`].
    Yum,
}

/// Host channel adapter parameters (Yum §3.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct HcaConfig {
    /// Flits per HCA VL buffer; absent = unbounded (BookSim's source queue).
    pub vl_buffer: Option<u32>,
    /// VL arbitration of the HCA port.
    #[serde(default)]
    pub arbitration: VlArbConfig,
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
    /// k×k mesh, one HCA per router, dimension-order (X then Y) routing.
    Mesh {
        /// Routers per side.
        k: u32,
    },
    /// k×k torus, one HCA per router, dimension-order routing with dateline VL classes.
    Torus {
        /// Routers per side.
        k: u32,
    },
    /// Any graph of a qos-core topology file (docs/topology.md): a router per switch,
    /// an HCA per host, the file's source routes (checked free of deadlock).
    Graph {
        /// The topology file, relative to the scenario file.
        file: String,
        /// The fabric built from it: set when a scenario is read
        /// ([`TopologySpec::load_graph`]) or by [`TopologySpec::graph`].
        #[serde(skip)]
        graph: Option<Arc<Fabric>>,
    },
}

impl TopologySpec {
    /// A graph topology from an already loaded qos-core topology (`file` names it in
    /// results and messages).
    pub fn graph(file: &str, t: &Topology) -> Result<TopologySpec, FlitError> {
        Ok(TopologySpec::Graph {
            file: file.to_string(),
            graph: Some(Arc::new(super::graph::fabric(t)?)),
        })
    }

    /// Loads the topology file of a `Graph` (its path relative to directory `dir`);
    /// nothing for the other shapes. Errors name the topology file and line.
    pub fn load_graph(&mut self, dir: &Path) -> Result<(), GraphLoadError> {
        let TopologySpec::Graph { file, graph } = self else {
            return Ok(());
        };
        let path = dir.join(&*file);
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|e| GraphLoadError::Read {
            file: name.clone(),
            message: e.to_string(),
        })?;
        let t = qos_core::topology::file::load(&name, &text)?;
        let f = super::graph::fabric(&t).map_err(|e| GraphLoadError::Graph {
            file: name,
            source: e,
        })?;
        *graph = Some(Arc::new(f));
        Ok(())
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

/// Why a graph's topology file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GraphLoadError {
    /// The file could not be read.
    #[error("{file}: {message}")]
    Read {
        /// Path.
        file: String,
        /// Cause.
        message: String,
    },
    /// The file is malformed (file:line).
    #[error(transparent)]
    Parse(#[from] Located),
    /// The graph or its routes cannot be simulated.
    #[error("{file}: {source}")]
    Graph {
        /// Path.
        file: String,
        /// Cause.
        source: FlitError,
    },
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
    /// A `fraction` of packets to the `nodes`, the rest uniform.
    Hotspot {
        /// Hotspot nodes.
        nodes: Vec<u32>,
        /// Share of packets to them (0–1).
        fraction: f64,
    },
}

/// How packet arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Process {
    /// One packet per cycle with probability `rate` (BookSim's injection process).
    #[default]
    Bernoulli,
    /// Poisson arrivals at `rate` per cycle.
    Poisson,
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
}

fn default_packet() -> u32 {
    40
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

/// BookSim-style phases, in cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phases {
    /// Warm-up: run, measure nothing.
    pub warmup: u64,
    /// Measurement: packets created now are measured.
    pub measure: u64,
    /// Longest drain after measurement for measured packets to arrive; a run that
    /// does not drain in time is reported as saturated.
    #[serde(default = "default_drain")]
    pub drain_max: u64,
}

fn default_drain() -> u64 {
    50_000
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
    /// Fail the run if no flit moves for this many cycles while flits wait.
    #[serde(default = "default_watchdog")]
    pub watchdog: u64,
}

fn default_watchdog() -> u64 {
    20_000
}

impl FlitConfig {
    /// The reference configuration of the benchmark: 8×8 mesh, DOR, 4 VLs × 10-flit
    /// buffers, 40-flit packets, uniform traffic at `rate` packets/node/cycle, the
    /// BookSim-equivalent router, 10,000 warm-up and 30,000 measured cycles.
    pub fn reference(k: u32, rate: f64) -> FlitConfig {
        FlitConfig {
            topology: TopologySpec::Mesh { k },
            router: RouterConfig {
                buffer: 10,
                delays: DelaySpec::Preset(DelayPreset::Booksim),
                output_arbitration: VlArbConfig::RoundRobin,
                input_arbitration: VlArbConfig::RoundRobin,
            },
            hca: HcaConfig::default(),
            classes: vec![ClassConfig {
                name: "data".into(),
                vls: vec![0, 1, 2, 3],
                packet_flits: 40,
                priority: 0,
                rate,
                process: Process::Bernoulli,
                pattern: Pattern::Uniform,
            }],
            streams: vec![],
            phases: Phases {
                warmup: 10_000,
                measure: 30_000,
                drain_max: 50_000,
            },
            seed: 1,
            watchdog: default_watchdog(),
        }
    }

    /// Number of HCAs (nodes).
    pub fn nodes(&self) -> u32 {
        match self.topology {
            TopologySpec::Crossbar { ports } => ports,
            TopologySpec::Mesh { k } | TopologySpec::Torus { k } => k * k,
            TopologySpec::Graph { ref graph, .. } => graph.as_ref().map_or(0, |f| f.nodes),
        }
    }

    /// Checks everything a model relies on; the message names the key at fault.
    pub fn validate(&self) -> Result<(), FlitError> {
        let bad = |m: String| Err(FlitError::Config(m));
        match self.topology {
            TopologySpec::Crossbar { ports } if !(1..=64).contains(&ports) => {
                return bad(format!("topology.ports = {ports}: must be 1-64"))
            }
            TopologySpec::Mesh { k } | TopologySpec::Torus { k } if !(1..=256).contains(&k) => {
                return bad(format!("topology.k = {k}: must be 1-256"))
            }
            TopologySpec::Graph { graph: None, .. } => return bad(self.topology.unloaded()),
            _ => {}
        }
        let torus = matches!(self.topology, TopologySpec::Torus { .. });
        if self.router.buffer == 0 || self.router.buffer > 1024 {
            return bad(format!(
                "router.buffer = {}: must be 1-1024 flits",
                self.router.buffer
            ));
        }
        let d = self.router.delays.delays();
        if d.credit == 0 || d.switch_alloc + d.crossbar + d.link == 0 {
            return bad("router.delays: credit and switch_alloc + crossbar + link must be at least one cycle".into());
        }
        if d.per_hop() > 10_000 {
            return bad("router.delays: stage delays above 10000 cycles".into());
        }
        if d.credit > MAX_CREDIT_DELAY {
            return bad(format!(
                "router.delays.credit = {}: at most {MAX_CREDIT_DELAY} cycles",
                d.credit
            ));
        }
        self.router
            .output_arbitration
            .build()
            .map_err(|e| FlitError::Config(format!("router.output_arbitration: {e}")))?;
        self.router
            .input_arbitration
            .build()
            .map_err(|e| FlitError::Config(format!("router.input_arbitration: {e}")))?;
        self.hca
            .arbitration
            .build()
            .map_err(|e| FlitError::Config(format!("hca.arbitration: {e}")))?;
        if self.hca.vl_buffer == Some(0) {
            return bad("hca.vl_buffer must be at least 1 flit".into());
        }
        if self.classes.is_empty() {
            return bad("classes: at least one class is needed".into());
        }
        let n = self.nodes();
        let mut used: u32 = 0;
        for (i, c) in self.classes.iter().enumerate() {
            let at = format!("classes[{i}] ({})", c.name);
            if c.vls.is_empty() {
                return bad(format!("{at}.vls: at least one lane"));
            }
            for &v in &c.vls {
                if v as usize >= MAX_VLS {
                    return bad(format!("{at}.vls: lane {v} out of range (0-15)"));
                }
                if used & (1 << v) != 0 {
                    return bad(format!(
                        "{at}.vls: lane {v} already belongs to another class"
                    ));
                }
                used |= 1 << v;
            }
            if torus && c.vls.len() < 2 {
                return bad(format!(
                    "{at}.vls: a torus needs at least two lanes per class (dateline)"
                ));
            }
            if c.vls.contains(&(CONTROL_VL as u8)) && c.vls.len() > 1 && !torus {
                return bad(format!("{at}.vls: VL15 is for control traffic alone"));
            }
            if c.packet_flits == 0 || c.packet_flits > 100_000 {
                return bad(format!("{at}.packet_flits: must be 1-100000"));
            }
            if !(0.0..=1.0).contains(&c.rate) || !c.rate.is_finite() {
                return bad(format!(
                    "{at}.rate = {}: must be 0-1 packets/node/cycle",
                    c.rate
                ));
            }
            match &c.pattern {
                Pattern::Transpose => {
                    let s = (n as f64).sqrt() as u32;
                    if s * s != n {
                        return bad(format!(
                            "{at}.pattern: transpose needs a square node count, not {n}"
                        ));
                    }
                }
                Pattern::BitComplement if !n.is_power_of_two() => {
                    return bad(format!(
                        "{at}.pattern: bit_complement needs a power-of-two node count, not {n}"
                    ));
                }
                Pattern::UniformOthers if n < 2 => {
                    return bad(format!("{at}.pattern: uniform_others needs two nodes"));
                }
                Pattern::Hotspot { nodes, fraction } => {
                    if nodes.is_empty() || nodes.iter().any(|&h| h >= n) {
                        return bad(format!("{at}.pattern.nodes: need nodes below {n}"));
                    }
                    if !(0.0..=1.0).contains(fraction) {
                        return bad(format!("{at}.pattern.fraction must be 0-1"));
                    }
                }
                _ => {}
            }
        }
        for (i, s) in self.streams.iter().enumerate() {
            let at = format!("streams[{i}] ({})", s.name);
            if s.src >= n || s.dst >= n {
                return bad(format!("{at}: nodes must be below {n}"));
            }
            if s.period == 0 {
                return bad(format!("{at}.period must be at least 1 cycle"));
            }
            if !self.classes.iter().any(|c| c.name == s.class) {
                return bad(format!("{at}.class: no class named '{}'", s.class));
            }
        }
        if self.phases.measure == 0 {
            return bad("phases.measure must be at least 1 cycle".into());
        }
        let p = &self.phases;
        let total = p
            .warmup
            .saturating_add(p.measure)
            .saturating_add(p.drain_max);
        if total > MAX_CYCLES {
            return bad(format!(
                "phases: warmup + measure + drain_max = {total} cycles; at most {MAX_CYCLES}"
            ));
        }
        if self.watchdog == 0 {
            return bad("watchdog must be at least 1 cycle".into());
        }
        Ok(())
    }
}
