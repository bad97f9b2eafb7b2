//! The NIC firmware interface (thesis §4.1–4.2; Nagar et al. §2–3): one small trait,
//! [`Nic`], for what a network interface card model is told and what it does, and one
//! enum, [`AnyNic`], chosen from configuration ([`Firmware`]).
//!
//! A NIC is a self-contained component: it knows its node number and its constants,
//! nothing of who is cabled to it. The cluster calls it with an *input* and the
//! current time; the NIC answers by pushing *outputs* into an [`Outputs`] buffer,
//! which the cluster applies in the order they were pushed.
//!
//! Inputs:
//! - [`Nic::host_post`] — the host posted a send descriptor (GM's send event, VIA's
//!   doorbell);
//! - [`Nic::packet_arrived`] — a packet's tail is in the NIC (the network receive DMA,
//!   Nagar's NRDMA, has taken it off the wire);
//! - [`Nic::tail_left`] — the tail of the packet the NIC was injecting has left it
//!   (the network send DMA, Nagar's NSDMA, is free);
//! - [`Nic::timer`] — one of the NIC's own timers or device completions
//!   ([`Timer`]: processor handler done, host DMA done, scheduler wake-up, delayed
//!   acknowledgement due);
//! - control from the host's driver and the bandwidth manager: [`Nic::open_flow`],
//!   [`Nic::close_flow`], [`Nic::set_idt`].
//!
//! Outputs ([`Output`]): inject a packet into the fabric, tell the host a send
//! completed or data landed in its memory, arm a timer, free a receive buffer (which
//! lets a packet blocked in the network go on: backpressure).
//!
//! Implementations:
//! - [`mcp::Mcp`] — the GM Myrinet Control Program (four state machines on one LANai
//!   processor, one host DMA engine, SRAM staging buffers, delayed cumulative
//!   acknowledgements), generic over what differs between
//!   [`gm::Gm`] (unmodified GM: connection/sub-port rotation, equal-size segments) and
//!   [`rate_control::RateControl`] (the thesis's IDT/NDT rate control in SDMA, full-MTU
//!   segments, the rate-control handler cost).
//!
//! - [`via`] — the VIA LANai control programs of Nagar et al. (§3): [`via::svia::Svia`]
//!   (sequential) and [`via::pvia::Pvia`] (the polling state machine: PVIA, QoSVIA with
//!   VirtualClock, and PVIA with rate control). A doorbell is a `host_post` (its FCFS
//!   doorbell queue is the firmware's own state); descriptor, data and completion
//!   transfers of the host DMA engine end with [`Timer::HostDma`]; NSDMA is done at
//!   `tail_left`; NRDMA's FIFO is the order of `packet_arrived`; each LCP operation's
//!   cost ends with [`Timer::Processor`]. The cluster does not change.

pub mod any;
pub mod gm;
pub mod mcp;
pub mod rate_control;
mod sram;
pub mod via;
pub mod via_calibration;
pub mod via_stages;

#[cfg(test)]
mod testbench;
#[cfg(test)]
mod tests;

use qos_core::sched::SchedulerKind;
use qos_core::topology::NodeId;
use qos_core::units::{Duration, Time};
use serde::Serialize;

use super::calibration::Calibration;
use super::ids::FlowKey;
use super::packet::Packet;
use via_calibration::ViaCalibration;
use via_stages::StageTimes;

/// Which firmware the NICs run (thesis §5.2; Nagar §3).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Firmware {
    /// Unmodified GM: connection/sub-port rotation, equal-size segmentation.
    Gm,
    /// GM with the thesis's rate control in SDMA, full-MTU segmentation.
    RateControl,
    /// Sequential VIA (Nagar §3.1).
    Svia,
    /// Parallel VIA: the polling state machine, FCFS queues (Nagar §3.2).
    Pvia,
    /// QoS VIA: PVIA with VirtualClock-ordered queues (Nagar §3.3).
    Qosvia,
    /// PVIA with the thesis's rate control holding doorbells (beyond Nagar et al.).
    PviaRateControl,
}

impl Firmware {
    /// The packet scheduler this firmware uses (None: first come, first served).
    pub fn scheduler(self) -> Option<SchedulerKind> {
        match self {
            Firmware::Gm => Some(SchedulerKind::Gm),
            Firmware::RateControl | Firmware::PviaRateControl => Some(SchedulerKind::RateControl),
            Firmware::Qosvia => Some(SchedulerKind::VirtualClock),
            Firmware::Svia | Firmware::Pvia => None,
        }
    }

    /// The name in configuration files and tables ("qosvia").
    pub fn name(self) -> &'static str {
        match self {
            Firmware::Gm => "gm",
            Firmware::RateControl => "rate-control",
            Firmware::Svia => "svia",
            Firmware::Pvia => "pvia",
            Firmware::Qosvia => "qosvia",
            Firmware::PviaRateControl => "pvia-rate-control",
        }
    }

    /// Whether this is one of the VIA control programs.
    pub fn is_via(self) -> bool {
        !matches!(self, Firmware::Gm | Firmware::RateControl)
    }
}

impl std::fmt::Display for Firmware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A NIC's own timers and device completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The processor finished its current handler.
    Processor,
    /// The host DMA engine finished its current transfer.
    HostDma,
    /// A time the packet scheduler asked to be woken at (rate control's NDT).
    Wake,
    /// The delayed acknowledgement to this peer is due.
    Ack(NodeId),
}

/// What a NIC asks the rest of the cluster to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Start transmitting this packet into the fabric now.
    Inject(Packet),
    /// A posted message of this flow completed: its send token goes back to the host.
    SendCompleted(FlowKey),
    /// The NIC wrote `bytes` of a flow's message into host memory; `last` when the
    /// message is complete.
    ToHost {
        /// The flow.
        flow: FlowKey,
        /// Payload bytes written.
        bytes: u64,
        /// Whether this completes a message.
        last: bool,
    },
    /// Call [`Nic::timer`] with `timer` at `at`.
    Arm {
        /// When.
        at: Time,
        /// Which.
        timer: Timer,
    },
    /// A receive buffer became free: a data packet waiting for one may come in.
    ReceiveBufferFreed,
}

/// The outputs of one NIC call, in order.
#[derive(Debug, Default)]
pub struct Outputs(Vec<Output>);

impl Outputs {
    /// An empty buffer.
    pub fn new() -> Outputs {
        Outputs(Vec::new())
    }

    /// Appends an output.
    #[inline]
    pub fn push(&mut self, o: Output) {
        self.0.push(o);
    }

    /// Arms `timer` at `at`.
    #[inline]
    pub fn arm(&mut self, at: Time, timer: Timer) {
        self.0.push(Output::Arm { at, timer });
    }

    /// The outputs pushed so far.
    pub fn as_slice(&self) -> &[Output] {
        &self.0
    }

    /// Takes the outputs out in order, leaving the buffer empty (and its memory).
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, Output> {
        self.0.drain(..)
    }

    /// Whether nothing was pushed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What every NIC of a run is built from.
#[derive(Debug, Clone, Copy)]
pub struct NicConfig {
    /// The calibrated constants.
    pub calibration: Calibration,
    /// Bin width of the per-flow dispatch counts (None: not recorded).
    pub timeline_bin: Option<Duration>,
    /// The constants of the VIA control programs.
    pub via: ViaCalibration,
}

/// A NIC model: inputs in, outputs pushed to `out` (see the module documentation).
///
/// Every input comes with the current simulated time; the outputs' times are never
/// earlier than it.
pub trait Nic {
    /// The host's driver opened a flow sourced here whose packets go to `dst`, with
    /// inter-packet dispatch time `idt` (zero: unregulated). Opening an open flow
    /// changes its destination and IDT.
    fn open_flow(
        &mut self,
        now: Time,
        flow: FlowKey,
        dst: NodeId,
        idt: Duration,
        out: &mut Outputs,
    );

    /// The application closed a flow sourced here: what it has not sent is dropped.
    fn close_flow(&mut self, now: Time, flow: FlowKey, out: &mut Outputs);

    /// The bandwidth manager set a flow's IDT. Firmware without rate control may
    /// ignore it (the default).
    fn set_idt(&mut self, _now: Time, _flow: FlowKey, _idt: Duration, _out: &mut Outputs) {}

    /// The host posted a send descriptor of `bytes` for `flow`.
    fn host_post(&mut self, now: Time, flow: FlowKey, bytes: u64, out: &mut Outputs);

    /// A packet's tail arrived from the network; a data packet occupies one of the
    /// receive buffers until the NIC reports [`Output::ReceiveBufferFreed`].
    fn packet_arrived(&mut self, now: Time, packet: Packet, out: &mut Outputs);

    /// The tail of the packet last injected left the NIC.
    fn tail_left(&mut self, now: Time, out: &mut Outputs);

    /// A timer armed with [`Output::Arm`] is due.
    fn timer(&mut self, now: Time, timer: Timer, out: &mut Outputs);

    /// Receive buffers for data packets, all free at the start.
    fn receive_buffers(&self) -> u32;

    /// The IDT in force for a flow sourced here (for reports; none by default).
    fn idt(&self, _flow: FlowKey) -> Option<Duration> {
        None
    }

    /// Packets of a flow injected per timeline bin (for reports; empty when not
    /// recorded, the default).
    fn dispatches(&self, _flow: FlowKey) -> &[u32] {
        &[]
    }

    /// When each operation of Nagar's Table 1 completed, summed over the messages this
    /// NIC handled (VIA firmware only).
    fn stage_times(&self) -> Option<&StageTimes> {
        None
    }

    /// How long the NIC's processor and host DMA engine have been busy so far (zero
    /// where a model does not count it, the default).
    fn busy(&self) -> Busy {
        Busy::default()
    }
}

/// Time a NIC's resources were busy since the start of a run: with the run's length,
/// which one limits a workload (the one near 100 %).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Busy {
    /// The LANai processor, running handlers (including the ones still running).
    pub processor: Duration,
    /// The host DMA engine, both directions (including the transfer in progress).
    pub host_dma: Duration,
    /// GM MCPs: time the processor had nothing to run while packets waited to be
    /// prepared and every SRAM send buffer was taken (SDMA could not start one).
    pub idle_send_buffers_full: Duration,
}
