//! What a Yum et al. cluster run is made of, as a scenario file writes it (§3, §4.1,
//! §6.1–6.2): the network, the HCAs, the VL arbitration variant, admission control, the
//! workload and the run's phases. Every table has defaults from the paper; every value
//! is checked once by [`IbaConfig::validate`], whose errors name the key at fault
//! (`workload.mix`, `arbitration.frame`) so the scenario loader can point at its line.
//!
//! The time base is the flit cycle: one 128-bit flit on a 1.6 Gbit/s link is 80 ns.

use qos_core::iba::Lanes;
use qos_core::units::{Bandwidth, Bytes, Duration};
use qos_core::vlarb::alloc::{LimitRule, RtShare};
use qos_core::vlarb::wrr::{Frame, Pointer};
use serde::{Deserialize, Serialize};

use super::congestion::CongestionSpec;
use crate::flit::config::{DelayPreset, DelaySpec, Delays, TopologySpec};

pub use super::error::ConfigError;
pub use super::workload_spec::{
    ControlSpec, LifetimeSpec, RealTimeSpec, RegulatorSpec, TraceSpec, WorkloadSpec,
};

fn bad(path: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.into(),
        message: message.into(),
    }
}

/// The network's shape (§6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Shape {
    /// One router with an HCA on every port (the paper's 8-port cluster).
    Crossbar {
        /// Ports = HCAs.
        ports: u32,
    },
    /// k×k mesh of 5-port routers, one HCA each, dimension-order routing.
    Mesh {
        /// Routers per side.
        k: u32,
    },
}

impl Shape {
    /// The flit network's topology of this shape.
    pub fn topology(self) -> TopologySpec {
        match self {
            Shape::Crossbar { ports } => TopologySpec::Crossbar { ports },
            Shape::Mesh { k } => TopologySpec::mesh(k),
        }
    }

    /// Number of HCAs.
    pub fn nodes(self) -> u32 {
        match self {
            Shape::Crossbar { ports } => ports,
            Shape::Mesh { k } => k * k,
        }
    }
}

/// Router pipeline timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pipeline {
    /// Yum Fig 1: five one-cycle stages.
    #[default]
    Yum,
    /// BookSim2's input-queued router: its stage, channel and credit delays (on the
    /// Yum cluster's own allocator and HCAs).
    Booksim,
}

impl Pipeline {
    /// The flit network's delays of this pipeline.
    pub fn delays(self) -> DelaySpec {
        match self {
            Pipeline::Yum => DelaySpec::Preset(DelayPreset::Yum),
            Pipeline::Booksim => DelaySpec::Stages(Delays::booksim2(false)),
        }
    }
}

/// How lanes reach the crossbar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Crossbar {
    /// A crossbar input per lane.
    #[default]
    Full,
    /// One crossbar input per port, its lanes multiplexed by round-robin.
    Multiplexed,
}

impl Crossbar {
    /// The flit network's allocator.
    pub fn allocator(self) -> crate::flit::config::Allocator {
        match self {
            Crossbar::Full => crate::flit::config::Allocator::FullCrossbar,
            Crossbar::Multiplexed => crate::flit::config::Allocator::VlArbiters,
        }
    }
}

/// The network (§6.1: 16 VLs per physical channel, 128-bit flits, 1.6 Gbit/s links,
/// 10-flit VL buffers, 40-flit packets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Crossbar or mesh.
    pub topology: Shape,
    /// Link bandwidth (default 1.6 Gbit/s).
    #[serde(default = "default_link")]
    pub link: Bandwidth,
    /// Flit size in bits (default 128).
    #[serde(default = "default_flit_bits")]
    pub flit_bits: u32,
    /// Flits per VL buffer in the routers (default 10).
    #[serde(default = "default_buffer")]
    pub vl_buffer: u16,
    /// Flits per output VL buffer of a router (Fig 1's stage 5, Table 1's output VL
    /// buffer of 1,280 bits: default 10); 0: no output buffers (the crossbar's output
    /// arbiter drives the link; the model before output buffers).
    #[serde(default = "default_buffer")]
    pub output_buffer: u16,
    /// Router pipeline (default Yum's five stages).
    #[serde(default)]
    pub pipeline: Pipeline,
    /// The router's crossbar (default `"full"`: a crossbar input per lane; `"multiplexed"`:
    /// one lane per input port per cycle, chosen round-robin — Fig 1's input scheduler).
    #[serde(default)]
    pub crossbar: Crossbar,
    /// Lanes of each traffic class (default: VL0–VL10 real time, VL11–VL14 best
    /// effort, VL15 control).
    #[serde(default = "Lanes::yum")]
    pub lanes: Lanes,
    /// How a packet's lane is chosen at each router output (default `"per_port"`:
    /// every output port has its own SL→VL table, a random permutation of each
    /// class's lanes drawn from the run's seed, so a connection's input and output
    /// lanes are each uniform over its class's lanes, §6.2; `"identity"`: a packet
    /// keeps its injection lane along its whole path).
    #[serde(default)]
    pub sl_to_vl: SlToVlSpec,
}

/// How packets' lanes are chosen hop by hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlToVlSpec {
    /// A table per output port (IBA §7.6.6), random permutations within each class.
    #[default]
    PerPort,
    /// The injection lane on every hop.
    Identity,
}

fn default_link() -> Bandwidth {
    Bandwidth::from_bits_per_sec(1_600_000_000)
}
fn default_flit_bits() -> u32 {
    128
}
fn default_buffer() -> u16 {
    10
}

impl NetworkSpec {
    /// Bytes per flit.
    pub fn flit_bytes(&self) -> u32 {
        self.flit_bits / 8
    }

    /// One cycle: a flit's time on a link.
    pub fn cycle(&self) -> Duration {
        let bytes = self.flit_bytes() as u128 * qos_core::units::PS_PER_SEC as u128;
        let bps = self.link.bytes_per_sec().max(1) as u128;
        Duration::from_ps((bytes / bps).max(1) as u64)
    }

    /// Cycles in `d` (rounded to the nearest cycle).
    pub fn cycles(&self, d: Duration) -> u64 {
        let c = self.cycle().as_ps();
        (d.as_ps() + c / 2) / c
    }
}

/// Where a send WQE completes (where its CQE is posted): the credit-based congestion
/// control of §4.2 counts these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Completion {
    /// When the DMA has moved the message's last flit into the HCA.
    Dma,
    /// When the message's last packet has entered the network (§4.3: "when a whole
    /// packet enters the network from an HCA, a credit will be generated").
    #[default]
    Injected,
    /// When the receiver acknowledged it (§4.2 footnote 3: reliable service).
    Acknowledged,
}

/// The host channel adapter (§3.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HcaSpec {
    /// Flits per HCA VL buffer (default 1600: 40 packets per lane, 640 over the 16
    /// lanes — the paper does not size the HCA buffer, but its credit-based control
    /// hands out up to 600 initial credits from it, §4.2 and Table 3).
    #[serde(default = "default_hca_buffer")]
    pub vl_buffer: u32,
    /// WQEs a QP's send queue holds (default 4096); a full queue drops a real-time
    /// message and makes a best-effort consumer wait.
    #[serde(default = "default_send_depth")]
    pub send_depth: usize,
    /// CQEs a completion queue holds (default 4096).
    #[serde(default = "default_send_depth")]
    pub cq_depth: usize,
    /// Where a send completes.
    #[serde(default)]
    pub completion: Completion,
}

fn default_hca_buffer() -> u32 {
    1600
}
fn default_send_depth() -> usize {
    4096
}

impl Default for HcaSpec {
    fn default() -> Self {
        HcaSpec {
            vl_buffer: default_hca_buffer(),
            send_depth: default_send_depth(),
            cq_depth: default_send_depth(),
            completion: Completion::default(),
        }
    }
}

/// The WRR variant of §3.3 at every router output and HCA port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArbitrationSpec {
    /// `{ small = { k = 4 } }` (F = k·N, default), `"large"` (255×64) or
    /// `{ fixed = F }`.
    #[serde(default = "default_frame")]
    pub frame: Frame,
    /// `"fast"` (default) or `"slow"`.
    #[serde(default)]
    pub pointer: Pointer,
    /// B_r: `"reserved"` (default, Σ R_j) or `{ fixed = "1.28Gbit/s" }`.
    #[serde(default = "default_share")]
    pub share: RtShare,
    /// The Limit of High Priority: `"peak"` (default, the paper's L = B/(B − B_p)
    /// from the admitted peaks) or `"none"` (high priority always first, to measure
    /// what the limit costs real time).
    #[serde(default)]
    pub limit: LimitRule,
}

fn default_frame() -> Frame {
    Frame::Small { k: 4 }
}
fn default_share() -> RtShare {
    RtShare::Reserved
}

impl Default for ArbitrationSpec {
    fn default() -> Self {
        ArbitrationSpec {
            frame: default_frame(),
            pointer: Pointer::Fast,
            share: default_share(),
            limit: LimitRule::default(),
        }
    }
}

/// What bandwidth a real-time connection solicits in its probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Solicit {
    /// Its mean rate (MPEG: the class's mean; ON/OFF: duty × ON rate).
    #[default]
    Mean,
    /// Its peak rate (MPEG: the I frame in one frame time; ON/OFF: the ON rate).
    Peak,
}

/// Probe-based admission control (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmissionSpec {
    /// Whether real-time connections are admitted by probes (default true). Without
    /// admission every connection sends, and the real-time lanes are served
    /// round-robin with no limit on high priority.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Flits of a probe, ACK, NACK and release packet (default 1: a header carrying the
    /// route, the bandwidth and the connection).
    #[serde(default = "one")]
    pub probe_flits: u32,
    /// Mean (default) or peak rate solicited.
    #[serde(default)]
    pub solicit: Solicit,
    /// Connections start their probes at uniformly random times within this window
    /// from the start (default 1 ms).
    #[serde(default = "default_stagger")]
    pub stagger: Duration,
}

fn yes() -> bool {
    true
}
fn one() -> u32 {
    1
}
fn default_stagger() -> Duration {
    Duration::from_ms(1)
}

impl Default for AdmissionSpec {
    fn default() -> Self {
        AdmissionSpec {
            enabled: true,
            probe_flits: 1,
            solicit: Solicit::Mean,
            stagger: default_stagger(),
        }
    }
}

/// Phases of a run and how its confidence intervals are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Warm-up, not measured (connections set up, queues fill).
    pub warmup: Duration,
    /// Measurement.
    pub measure: Duration,
    /// Longest drain after the measurement.
    #[serde(default = "default_drain")]
    pub drain: Duration,
    /// Batches of the measurement for batch-means confidence intervals (default 10).
    #[serde(default = "ten")]
    pub batches: u32,
}

fn ten() -> u32 {
    10
}

fn default_drain() -> Duration {
    Duration::from_ms(5)
}

/// A whole run's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IbaConfig {
    /// The network.
    pub network: NetworkSpec,
    /// The HCAs.
    #[serde(default)]
    pub hca: HcaSpec,
    /// The WRR variant.
    #[serde(default)]
    pub arbitration: ArbitrationSpec,
    /// Admission control.
    #[serde(default)]
    pub admission: AdmissionSpec,
    /// Congestion control at the HCAs (default none).
    #[serde(default)]
    pub congestion: CongestionSpec,
    /// The energy model: power sampled every N cycles (default: not measured).
    #[serde(default)]
    pub power: Option<super::power::EnergySpec>,
    /// Peak power control (§5) or PowerHerd (default: none).
    #[serde(default)]
    pub power_control: Option<super::power::PowerControlSpec>,
    /// The workload.
    pub workload: WorkloadSpec,
    /// The phases.
    pub run: RunSpec,
}

/// Largest mesh side and crossbar size accepted.
pub const MAX_NODES: u32 = 1024;

impl IbaConfig {
    /// Credit-based peak power control's best-effort budget (§5) and a flit's energy,
    /// when the run has one: P_BE = P_peak less the real-time share, S from the
    /// router pipeline unless given.
    pub fn be_params(&self) -> Option<(super::power::BeParams, super::power::FlitEnergy)> {
        let e = self.power.as_ref()?;
        let super::power::PowerControlSpec::Credits {
            peak_w,
            real_time_share,
            window,
            restore,
            hop_cycles,
        } = self.power_control?
        else {
            return None;
        };
        let share = real_time_share.unwrap_or(self.workload.mix.0);
        if share >= 1.0 {
            return None;
        }
        let n = &self.network;
        let delays = n.pipeline.delays().delays(&n.topology.topology());
        let p = super::power::BeParams {
            p_be: peak_w * (1.0 - share),
            window,
            restore,
            cycle_s: n.cycle().as_ps() as f64 * 1e-12,
            hop_cycles: hop_cycles.unwrap_or(delays.header_hop() as u64),
            packet_flits: self.workload.packet_flits,
            sample_cycles: e.sample_cycles,
            flit_bytes: n.flit_bytes() as u64,
        };
        Some((p, super::power::FlitEnergy::new(e, n.flit_bits)))
    }

    /// Checks every value; the first one at fault is returned with its key path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let n = &self.network;
        match n.topology {
            Shape::Crossbar { ports } if !(2..=64).contains(&ports) => {
                return Err(bad(
                    "network.topology.ports",
                    "a crossbar has 2 to 64 ports",
                ))
            }
            Shape::Mesh { k } if !(2..=32).contains(&k) => {
                return Err(bad("network.topology.k", "a mesh side is 2 to 32 routers"))
            }
            _ => {}
        }
        if n.link.is_zero() {
            return Err(bad("network.link", "must be above zero"));
        }
        if n.flit_bits == 0 || !n.flit_bits.is_multiple_of(8) || n.flit_bits > 4096 {
            return Err(bad(
                "network.flit_bits",
                "a whole number of bytes, 8 to 4096 bits",
            ));
        }
        if n.cycle().as_ps() < 1 {
            return Err(bad("network.link", "too fast for a picosecond clock"));
        }
        if n.vl_buffer == 0 {
            return Err(bad("network.vl_buffer", "at least one flit"));
        }
        if n.output_buffer > 255 {
            return Err(bad("network.output_buffer", "0 (none) to 255 flits"));
        }
        n.lanes
            .validate()
            .map_err(|e| bad("network.lanes", e.to_string()))?;
        let h = &self.hca;
        if h.vl_buffer == 0 {
            return Err(bad("hca.vl_buffer", "at least one flit"));
        }
        if h.send_depth == 0 {
            return Err(bad("hca.send_depth", "at least one WQE"));
        }
        if h.cq_depth == 0 {
            return Err(bad("hca.cq_depth", "at least one CQE"));
        }
        let a = &self.arbitration;
        if a.frame.flits(n.lanes.real_time.len()) == 0 {
            return Err(bad("arbitration.frame", "a frame of at least one flit"));
        }
        if let RtShare::Fixed(b) = a.share {
            if b.is_zero() || b > n.link {
                return Err(bad(
                    "arbitration.share",
                    format!(
                        "a fixed B_r is above zero and at most the link ({})",
                        n.link
                    ),
                ));
            }
        }
        self.congestion.validate(
            n.topology.nodes(),
            matches!(n.topology, Shape::Mesh { .. }),
            h.vl_buffer,
            self.workload.packet_flits,
        )?;
        if let CongestionSpec::Credits { best_effort, .. } = self.congestion {
            if best_effort as usize > h.send_depth {
                return Err(bad(
                    "congestion.best_effort",
                    format!("C_b is at most hca.send_depth ({} WQEs)", h.send_depth),
                ));
            }
        }
        if let Some(p) = &self.power {
            p.validate()?;
        }
        if let Some(pc) = &self.power_control {
            pc.validate()?;
            if self.power.is_none() {
                return Err(bad(
                    "power_control",
                    "power control needs the energy model: add a [power] section",
                ));
            }
            if let super::power::PowerControlSpec::Credits {
                real_time_share, ..
            } = *pc
            {
                let share = real_time_share.unwrap_or(self.workload.mix.0);
                if share > 0.0 && self.workload.mix.0 > 0.0 && !self.admission.enabled {
                    return Err(bad(
                        "power_control",
                        "credit-based peak power control checks real-time power with admission control's probes: real-time traffic needs admission.enabled = true",
                    ));
                }
            }
            // E_BE must hold the dearest packet.
            if let Some((p, fe)) = self.be_params() {
                let fab = n
                    .topology
                    .topology()
                    .fabric()
                    .map_err(|e| bad("network.topology", e.to_string()))?;
                super::power::be_budget(&fab, &fe, &p)?;
            }
        }
        let ad = &self.admission;
        if ad.probe_flits == 0 || ad.probe_flits > 64 {
            return Err(bad("admission.probe_flits", "1 to 64 flits"));
        }
        let w = &self.workload;
        if w.loads.is_empty() {
            return Err(bad("workload.loads", "at least one load"));
        }
        if let Some(i) = w
            .loads
            .iter()
            .position(|l| !(l.is_finite() && *l > 0.0 && *l <= 1.0))
        {
            return Err(bad(
                &format!("workload.loads[{i}]"),
                "a load is a fraction of the link bandwidth, above 0 and at most 1",
            ));
        }
        if !w.mix.is_valid() {
            return Err(bad(
                "workload.mix",
                "the real-time fraction is between 0 and 1",
            ));
        }
        if w.packet_flits == 0 || w.packet_flits > 1024 {
            return Err(bad("workload.packet_flits", "1 to 1024 flits"));
        }
        match &w.real_time {
            RealTimeSpec::Mpeg {
                classes,
                traces,
                regulator,
            } => {
                if let Some(i) = classes.iter().position(|&c| c >= 7) {
                    return Err(bad(
                        &format!("workload.real_time.classes[{i}]"),
                        "the MPEG-2 stream classes are numbered 0 to 6",
                    ));
                }
                if !classes.is_empty() && !traces.is_empty() {
                    return Err(bad(
                        "workload.real_time.traces",
                        "streams replay trace files or are drawn among the synthetic classes: give traces or classes, not both",
                    ));
                }
                for (i, t) in traces.iter().enumerate() {
                    if !(t.fps.is_finite() && t.fps > 0.0 && t.fps <= 1000.0) {
                        return Err(bad(
                            &format!("workload.real_time.traces[{i}].fps"),
                            "frames per second above 0 and at most 1000",
                        ));
                    }
                    if t.frames.is_none() {
                        return Err(bad(
                            &format!("workload.real_time.traces[{i}].file"),
                            format!("the trace {} has not been read", t.file),
                        ));
                    }
                    if t.mean_rate().is_zero() {
                        return Err(bad(
                            &format!("workload.real_time.traces[{i}].file"),
                            format!(
                                "the trace {} carries no data (every frame is empty)",
                                t.file
                            ),
                        ));
                    }
                }
                if let Some(RegulatorSpec::TokenBucket {
                    rate_of_peak,
                    depth_packets,
                }) = regulator
                {
                    if !(rate_of_peak.is_finite() && *rate_of_peak > 0.0) {
                        return Err(bad(
                            "workload.real_time.regulator.rate_of_peak",
                            "a positive multiple of the peak rate",
                        ));
                    }
                    if *depth_packets == 0 {
                        return Err(bad(
                            "workload.real_time.regulator.depth_packets",
                            "at least one packet",
                        ));
                    }
                }
            }
            RealTimeSpec::OnOff {
                mean_on,
                mean_off,
                rate,
            } => {
                if mean_on.is_zero() {
                    return Err(bad("workload.real_time.mean_on", "must be above zero"));
                }
                if mean_off.is_zero() {
                    return Err(bad("workload.real_time.mean_off", "must be above zero"));
                }
                if rate.is_zero() || *rate > n.link {
                    return Err(bad(
                        "workload.real_time.rate",
                        format!("above zero and at most the link ({})", n.link),
                    ));
                }
            }
        }
        if let Some(l) = &w.lifetime {
            if l.hold.is_zero() {
                return Err(bad("workload.lifetime.hold", "must be above zero"));
            }
            if l.idle.is_zero() {
                return Err(bad("workload.lifetime.idle", "must be above zero"));
            }
        }
        let c = &w.control;
        if c.count > 0 {
            if c.packet_flits == 0 || c.packet_flits > 1024 {
                return Err(bad("workload.control.packet_flits", "1 to 1024 flits"));
            }
            if c.period.is_zero() {
                return Err(bad("workload.control.period", "must be above zero"));
            }
        }
        let r = &self.run;
        if r.measure.is_zero() {
            return Err(bad("run.measure", "must be above zero"));
        }
        if !(2..=1000).contains(&r.batches) {
            return Err(bad("run.batches", "2 to 1000 batches"));
        }
        let cycles = n.cycles(r.warmup + r.measure + r.drain);
        if cycles >= 1 << 31 {
            return Err(bad(
                "run.measure",
                format!("the run is {cycles} cycles; at most 2^31 are simulated"),
            ));
        }
        Ok(())
    }

    /// Bytes per data packet.
    pub fn packet_bytes(&self) -> Bytes {
        Bytes::new(self.workload.packet_flits as u64 * self.network.flit_bytes() as u64)
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
