//! A flow of the cluster model: the API it is posted through, its rate, its workload,
//! the flow as a run is given it ([`FlowSpec`]) and what it measured ([`FlowOutcome`]);
//! and the transfer time of a number of bytes at a bandwidth ([`xfer`]). A leaf, used by
//! every component.

use qos_core::topology::NodeId;
use qos_core::units::{Bandwidth, Bytes, Duration, Time};
use serde::Serialize;

/// Time to move `len` bytes at `bw` (zero for a zero rate, which validation forbids).
#[inline]
pub(crate) fn xfer(bw: Bandwidth, len: u64) -> Duration {
    bw.transfer_time(Bytes::new(len)).unwrap_or(Duration::ZERO)
}

/// The programming interface a flow's application uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// GM directly.
    #[default]
    Gm,
    /// MPICH-GM (extra host work per message, thesis §4.4, §5.5).
    Mpi,
}

/// How a flow's bandwidth is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// A fixed IDT pushed to the NIC at start (zero: unregulated).
    Idt(Duration),
    /// A premium request to the bandwidth manager.
    Premium(Bandwidth),
    /// A best-effort flow registered with the manager.
    BestEffort,
}

/// What a flow's application does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// Posts messages continuously while active (as many as its send tokens allow).
    Stream,
    /// The thesis's bandwidth test: pump `messages`, then the receiver sends a small
    /// acknowledgement message back; bandwidth = volume / elapsed (§5.1).
    Pump {
        /// Messages to pump.
        messages: u64,
    },
    /// The thesis's latency test: ping-pong `iterations` round trips (§5.1).
    PingPong {
        /// Round trips.
        iterations: u64,
    },
    /// Posts one message per emission of a source, at its time, whatever is
    /// outstanding (VIA has no flow control, Nagar §4.1): CBR, Poisson or MPEG channels.
    /// An emission larger than the flow's message size (an MPEG frame) is cut into
    /// messages of that size and a last, shorter one, posted back to back. The
    /// receiver's application records when each emission reached it: when its last
    /// message did.
    Emit(crate::workload::spec::Spec),
    /// Nagar's ping-bulk test (§4.1, Table 2): `window` messages one way, then
    /// `window` back, `rounds` times; latency = elapsed / (2 · window · rounds).
    PingBulk {
        /// Messages each way per round.
        window: u32,
        /// Rounds.
        rounds: u64,
    },
}

/// One flow of a setup.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    /// Name for tables.
    pub name: String,
    /// Source host.
    pub src: NodeId,
    /// Destination host.
    pub dst: NodeId,
    /// Message size.
    pub message: Bytes,
    /// How its rate is set.
    pub rate: Rate,
    /// What its application does.
    pub workload: Workload,
    /// GM or MPI.
    pub api: Api,
    /// When it starts.
    pub start: Time,
    /// When it stops posting (None: never).
    pub stop: Option<Time>,
}

/// What a run measured for one flow.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FlowOutcome {
    /// Name.
    pub name: String,
    /// Payload bytes delivered to the receiving host within the window.
    pub window_bytes: u64,
    /// Bandwidth in the window (MB/s), for streams.
    pub window_mb_s: f64,
    /// Pump: volume / elapsed (MB/s).
    pub pump_mb_s: Option<f64>,
    /// Ping-pong: half the mean round trip (µs).
    pub latency_us: Option<f64>,
    /// Messages delivered.
    pub messages: u64,
    /// Packets dispatched by the source NIC, per timeline bin.
    pub dispatches: Vec<u32>,
    /// IDT in force at the end (ticks), if regulated.
    pub idt_ticks: Option<f64>,
    /// Whether the manager refused the flow.
    pub rejected: bool,
    /// Timed messages (`Workload::Emit`) emitted and received within the window:
    /// jitter against their emission times, θ relative to the source's mean spacing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<qos_core::stream_metrics::Jitter>,
    /// Timed messages: mean time from emission to the receiving application (µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_latency_us: Option<f64>,
}
