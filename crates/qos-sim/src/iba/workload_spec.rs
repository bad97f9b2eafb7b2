//! The workload of a Yum et al. cluster run as a scenario file writes it (§6.2, §7.1):
//! MPEG-2 streams (trace files, the input regulator) or ON/OFF real-time sources,
//! control traffic on VL15, the real-time:best-effort mix and connection lifetimes. Part
//! of [`super::config::IbaConfig`], which checks every value.

use std::sync::Arc;

use qos_core::source::Located;
use qos_core::stream_metrics::Anchor;
use qos_core::units::{Bandwidth, Duration};
use serde::{Deserialize, Serialize};

use crate::workload::mix::Mix;
use crate::workload::mpeg::{SizeUnit, Trace};

/// The input regulator of MPEG streams (§7.1: "an input regulator to remove the
/// traffic burst"; the paper does not say which).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RegulatorSpec {
    /// A token bucket per stream: rate ρ, depth σ.
    TokenBucket {
        /// ρ as a multiple of the stream's peak rate (default 1).
        #[serde(default = "unit")]
        rate_of_peak: f64,
        /// σ in packets (default 1).
        #[serde(default = "one")]
        depth_packets: u32,
    },
    /// Each frame's packets spread evenly over nine tenths of its frame time, the last
    /// one at the same offset whatever the frame's size.
    Smooth,
}

fn unit() -> f64 {
    1.0
}

/// An MPEG trace file (one frame per line: a size, or a frame type and a size; the
/// format of [`Trace::parse`]) that real-time streams replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The file, relative to the scenario file.
    pub file: String,
    /// Unit of its sizes: `"bits"` (Rose's MPEG traces) or `"bytes"`.
    pub unit: SizeUnit,
    /// Frames per second (default 30, the paper's MPEG-2 streams).
    #[serde(default = "default_fps")]
    pub fps: f64,
    /// The frames, read by the scenario loader ([`TraceSpec::load`]); a run needs them.
    #[serde(skip)]
    pub frames: Option<Arc<Trace>>,
}

fn default_fps() -> f64 {
    crate::workload::classes::FPS
}

impl TraceSpec {
    /// Parses the trace's text (`name` is the file as errors show it).
    pub fn load(&mut self, name: &str, text: &str) -> Result<(), Located> {
        self.frames = Some(Arc::new(Trace::parse(name, text, self.unit)?));
        Ok(())
    }

    /// Mean rate of the trace at its frame rate (zero before it is read).
    pub fn mean_rate(&self) -> Bandwidth {
        self.frames
            .as_ref()
            .map_or(Bandwidth::ZERO, |t| t.mean_rate(self.fps))
    }

    /// Peak rate: its largest frame in one frame time (zero before it is read).
    pub fn peak_rate(&self) -> Bandwidth {
        let max = self
            .frames
            .as_ref()
            .and_then(|t| t.frames.iter().map(|b| b.get()).max())
            .unwrap_or(0);
        Bandwidth::from_bytes_per_sec((max as f64 * self.fps).round() as u64)
    }
}

/// Real-time traffic: MPEG-2 streams or ON/OFF sources (§6.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RealTimeSpec {
    /// MPEG-2 streams drawn among the seven synthetic classes
    /// ([`crate::workload::classes`]), or among trace files, until each node's
    /// real-time load is reached.
    Mpeg {
        /// Class indices to draw from (default all seven).
        #[serde(default)]
        classes: Vec<usize>,
        /// Trace files to draw from instead of the synthetic classes; each stream
        /// replays one from a random frame, wrapping around.
        #[serde(default)]
        traces: Vec<TraceSpec>,
        /// Input regulator (absent: frames are handed over whole, as bursts).
        #[serde(default)]
        regulator: Option<RegulatorSpec>,
    },
    /// ON/OFF sources with exponential ON and OFF periods, packets evenly spaced while
    /// ON; as many connections per node as its real-time load needs.
    OnOff {
        /// Mean ON period.
        mean_on: Duration,
        /// Mean OFF period.
        mean_off: Duration,
        /// A connection's rate while ON.
        rate: Bandwidth,
    },
}

/// Control traffic on VL15 (§6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlSpec {
    /// Flits per control packet (default 10).
    #[serde(default = "ten_flits")]
    pub packet_flits: u32,
    /// Packets per period per node (default 10; 0 = no control traffic).
    #[serde(default = "ten")]
    pub count: u32,
    /// The period (default 33.3 ms; with ON/OFF sources the paper uses ON + OFF).
    #[serde(default = "frame_time")]
    pub period: Duration,
}

fn ten_flits() -> u32 {
    10
}
fn one() -> u32 {
    1
}

fn ten() -> u32 {
    10
}
pub(super) fn frame_time() -> Duration {
    Duration::from_ps(33_333_333_333)
}

impl Default for ControlSpec {
    fn default() -> Self {
        ControlSpec {
            packet_flits: 10,
            count: 10,
            period: frame_time(),
        }
    }
}

/// How long real-time connections last (§4.1: "when the source finishes data
/// transmission, it inserts the same bandwidth requirement that was used for
/// connection setup in the header of the final data packet"). Without it connections
/// last the whole run, as the paper's long-lasting MPEG-2 streams do (§7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifetimeSpec {
    /// Mean holding time (exponential) from admission to the final data packet.
    pub hold: Duration,
    /// Mean idle time (exponential) before the connection asks again, after its end
    /// or a refusal.
    pub idle: Duration,
}

/// The workload (§6.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Offered load per node, a fraction of the link (one run per load).
    pub loads: Vec<f64>,
    /// Real-time fraction of the load (default 0.8).
    #[serde(default)]
    pub mix: Mix,
    /// Flits per data packet (default 40).
    #[serde(default = "forty")]
    pub packet_flits: u32,
    /// The real-time traffic.
    pub real_time: RealTimeSpec,
    /// Control traffic (default: ten 10-flit packets per 33.3 ms per node; `count = 0`
    /// for none).
    #[serde(default)]
    pub control: ControlSpec,
    /// Connections end and ask again (default: each lasts the whole run).
    #[serde(default)]
    pub lifetime: Option<LifetimeSpec>,
    /// Where a stream's first deadline lies for DMP and DMT (default `"generation"`:
    /// one frame time after the first frame was generated; `"first_arrival"`: its
    /// arrival, zero slack). Both are measured; this one is the run's DMP and DMT.
    #[serde(default)]
    pub deadline_anchor: Anchor,
    /// Only these connections (by number, [`super::traffic::Connection::id`]) ask and
    /// send; the others stay silent. Not a scenario key: a comparison at equal
    /// admitted load feeds a case without admission control exactly the streams
    /// another case admitted.
    #[serde(skip)]
    pub streams: Option<Arc<Vec<u32>>>,
}

fn forty() -> u32 {
    40
}
