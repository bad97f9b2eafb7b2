//! What a run of the cluster model needs ([`Setup`]) and what it measured
//! ([`Outcome`]).

use std::sync::Arc;

use qos_core::topology::Topology;
use qos_core::units::{Duration, Time};
use serde::Serialize;

use super::calibration::Calibration;
use super::flow::{FlowOutcome, FlowSpec};
use super::nic::{self, Firmware};

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The cluster.
    pub topology: Arc<Topology>,
    /// The constants.
    pub calibration: Calibration,
    /// The MCP of every NIC.
    pub firmware: Firmware,
    /// The constants of the VIA control programs (used when `firmware` is one).
    pub via: nic::via::ViaCalibration,
    /// The flows.
    pub flows: Vec<FlowSpec>,
    /// Latency of one bandwidth-manager control message (local ↔ master, master → NIC).
    pub control_latency: Duration,
    /// Where bandwidth is measured for streams: [from, to).
    pub window: (Time, Time),
    /// Bin width of the dispatch-frequency time series (None: not recorded).
    pub timeline_bin: Option<Duration>,
    /// Stop the run at this time even if work remains.
    pub until: Time,
    /// Seed of the random streams (jitter of host posting times).
    pub seed: u64,
}

/// What a run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    /// Per flow, in setup order.
    pub flows: Vec<FlowOutcome>,
    /// Simulated time at the end.
    pub end_us: f64,
    /// Events delivered.
    pub events: u64,
    /// VIA firmware: per node, when each operation of Nagar's Table 1 completed.
    #[serde(skip)]
    pub stages: Vec<Option<nic::via::StageTimes>>,
    /// Per node, how long its NIC's processor and host DMA engine were busy.
    pub busy: Vec<nic::Busy>,
}
