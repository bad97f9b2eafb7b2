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

pub mod calibration;
mod poll;
pub mod pvia;
mod queue;
pub mod svia;

#[cfg(test)]
mod tests;

use qos_core::topology::NodeId;
use qos_core::units::{Duration, Time};
use serde::Serialize;

use crate::myrinet::ids::FlowKey;

pub use calibration::{LcpCosts, QosCosts, ViaCalibration};

/// The operations of Table 1, in its order: when each completes, counted from the send
/// doorbell (send side) or from the message reaching the LCP (receive side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Send: HDMA programmed for the descriptor.
    SendDescProg,
    /// Send: descriptor in SRAM.
    SendDescDown,
    /// Send: HDMA programmed for the data (every page).
    SendDataProg,
    /// Send: data in SRAM.
    SendDataDown,
    /// Send: message on the network.
    SendNsdmaDone,
    /// Send: HDMA programmed for the completion status.
    SendStatusProg,
    /// Send: completion status in host memory.
    SendStatusDone,
    /// Receive: HDMA programmed for the receive descriptor.
    RecvDescProg,
    /// Receive: receive descriptor in SRAM.
    RecvDescDown,
    /// Receive: HDMA programmed for the data (every page).
    RecvDataProg,
    /// Receive: data in host memory.
    RecvDataUp,
    /// Receive: HDMA programmed for the completion status.
    RecvStatusProg,
    /// Receive: completion status in host memory.
    RecvStatusDone,
}

impl Stage {
    /// Every stage, in Table 1's order.
    pub const ALL: [Stage; 13] = [
        Stage::SendDescProg,
        Stage::SendDescDown,
        Stage::SendDataProg,
        Stage::SendDataDown,
        Stage::SendNsdmaDone,
        Stage::SendStatusProg,
        Stage::SendStatusDone,
        Stage::RecvDescProg,
        Stage::RecvDescDown,
        Stage::RecvDataProg,
        Stage::RecvDataUp,
        Stage::RecvStatusProg,
        Stage::RecvStatusDone,
    ];

    /// The row name in scenario files ("send-desc-prog").
    pub fn name(self) -> &'static str {
        match self {
            Stage::SendDescProg => "send-desc-prog",
            Stage::SendDescDown => "send-desc-down",
            Stage::SendDataProg => "send-data-prog",
            Stage::SendDataDown => "send-data-down",
            Stage::SendNsdmaDone => "send-nsdma-done",
            Stage::SendStatusProg => "send-status-prog",
            Stage::SendStatusDone => "send-status-done",
            Stage::RecvDescProg => "recv-desc-prog",
            Stage::RecvDescDown => "recv-desc-down",
            Stage::RecvDataProg => "recv-data-prog",
            Stage::RecvDataUp => "recv-data-up",
            Stage::RecvStatusProg => "recv-status-prog",
            Stage::RecvStatusDone => "recv-status-done",
        }
    }

    /// The row as Table 1 labels it.
    pub fn label(self) -> &'static str {
        match self {
            Stage::SendDescProg => "Send HDMA Prog. (Desc.)",
            Stage::SendDescDown => "Send Desc. Down",
            Stage::SendDataProg => "Send HDMA Prog. (Data)",
            Stage::SendDataDown => "Send Data Down",
            Stage::SendNsdmaDone => "Send NSDMA Done",
            Stage::SendStatusProg => "Send HDMA Prog. (Status)",
            Stage::SendStatusDone => "Send Status Done",
            Stage::RecvDescProg => "Receive HDMA Prog. (Desc.)",
            Stage::RecvDescDown => "Receive Desc Down",
            Stage::RecvDataProg => "Receive HDMA Prog. (Data)",
            Stage::RecvDataUp => "Receive Data Up",
            Stage::RecvStatusProg => "Receive HDMA Prog. (Status)",
            Stage::RecvStatusDone => "Receive Status Done",
        }
    }

    /// The stage named `name` ([`Stage::name`]).
    pub fn parse(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// When each Table 1 operation completed, summed over the messages a NIC handled.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StageTimes {
    sum_ps: [u128; 13],
    count: [u64; 13],
}

impl StageTimes {
    /// Records that `stage` of a message completed `after` its origin.
    pub fn record(&mut self, stage: Stage, after: Duration) {
        let i = stage as usize;
        self.sum_ps[i] += u128::from(after.as_ps());
        self.count[i] += 1;
    }

    /// The mean completion time of `stage` (µs), if any message went through it.
    pub fn mean_us(&self, stage: Stage) -> Option<f64> {
        let i = stage as usize;
        (self.count[i] > 0).then(|| self.sum_ps[i] as f64 / self.count[i] as f64 / 1e6)
    }

    /// How many messages went through `stage`.
    pub fn count(&self, stage: Stage) -> u64 {
        self.count[stage as usize]
    }
}

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
