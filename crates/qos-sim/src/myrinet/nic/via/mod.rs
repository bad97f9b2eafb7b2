//! VIA LANai control programs on a Myrinet NIC (Nagar et al. §2–3), as implementations
//! of the NIC firmware trait [`super::Nic`]:
//!
//! - [`svia::Svia`] — **SVIA** (§3.1): the whole send (or receive) sequence of Fig 2,
//!   one operation after another, busy-waiting on each device; the only overlap is
//!   polling NRDMA while waiting for the host DMA.
//! - [`pvia::Pvia`] — **PVIA** (§3.2): the LCP as a polling state machine over the
//!   devices (doorbell queue, HDMA, NSDMA, NRDMA), queuing requests per device and never
//!   waiting on one; with [`pvia::Discipline::VirtualClock`] it is **QoSVIA** (§3.3):
//!   every doorbell stamped with qos-core's VirtualClock and the HDMA and NSDMA queues
//!   kept in stamp order, tolerating mis-ordering next to the HDMA queue head; with
//!   [`pvia::Discipline::RateControl`], Gulati's IDT/NDT rate control in its place (a
//!   comparison beyond the paper).
//!
//! The devices (§2): doorbells rung by the host are merged by hardware into one FCFS
//! queue ([`super::Nic::host_post`]); **HDMA** moves descriptors and data between host
//! memory and SRAM one request at a time from a hardware queue, one request per page of
//! a buffer ([`queue::Hdma`], completions are [`super::Timer::HostDma`]); **NSDMA**
//! sends one message at a time onto the network ([`super::Output::Inject`], done at
//! [`super::Nic::tail_left`]) from a software queue; **NRDMA** takes messages off the
//! network in FIFO order ([`super::Nic::packet_arrived`]). Send descriptors live in host
//! memory and are DMA'd down before the data; receive descriptors are pre-posted;
//! completion status is DMA'd up, which is when the host sees it. A VIA message is one
//! network packet. VIA has no acknowledgements or flow control (§4.1).
//!
//! Every LCP operation costs the LANai the time [`calibration::LcpCosts`] gives (polling,
//! state and queue maintenance, time-stamping, mid-queue insertion), fitted to Table 1;
//! [`StageTimes`] records when each operation of Table 1 completes.

mod poll;
pub mod pvia;
mod queue;
pub mod svia;

#[cfg(test)]
mod tests;

use qos_core::topology::NodeId;
use qos_core::units::{Duration, Time};

use crate::myrinet::ids::FlowKey;

pub use super::via_calibration::{LcpCosts, QosCosts, ViaCalibration};
pub use super::via_stages::{Stage, StageTimes};

/// A message the NIC is working on.
#[derive(Debug, Clone)]
pub(crate) struct Msg {
    /// Its channel.
    pub flow: FlowKey,
    /// The other end: the destination of a send, the source of a receive.
    pub peer: NodeId,
    /// Payload bytes.
    pub bytes: u64,
    /// Its order in the device queues.
    pub key: queue::Key,
    /// The doorbell (send) or the moment the LCP may see it (receive): Table 1's origin.
    pub origin: Time,
    /// The channel's negotiated inter-arrival time (None: best-effort).
    pub negotiated: Option<Duration>,
    /// Per-channel sequence number.
    pub seq: u64,
}

/// A channel sourced at this NIC.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chan {
    /// Destination.
    pub dst: NodeId,
    /// Negotiated inter-arrival time (Vtick, IDT); zero: best-effort.
    pub interval: Duration,
    /// Messages sent so far.
    pub next_seq: u64,
}
