//! The interface every packet scheduler implements: flows by index ([`FlowId`]) with
//! their parameters ([`FlowParams`]), the answer to "which flow sends next, and when?"
//! ([`Decision`]) and the [`Scheduler`] trait. A leaf, so the implementations use it
//! without importing the module that chooses between them.

use serde::{Deserialize, Serialize};

use crate::units::{Duration, Time};

/// A flow as a scheduler sees it: a dense caller-chosen index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FlowId(pub u32);

/// Per-flow parameters given when a flow is added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FlowParams {
    /// Inter-packet dispatch time (rate control). Zero means unregulated.
    pub idt: Duration,
    /// VirtualClock tick per packet; `None` means best-effort (infinite Vtick).
    pub vtick: Option<Duration>,
    /// GM connection (the remote node) this flow's packets go to.
    pub connection: u32,
    /// GM sub-port (port and priority) within the connection.
    pub subport: u32,
}

/// What a scheduler says when asked for the next packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Send one packet of this flow now (the scheduler has already counted it as sent).
    Dispatch(FlowId),
    /// Nothing may be sent before this time (rate control holding packets back).
    WaitUntil(Time),
    /// No sendable packet at all.
    Idle,
}

/// A packet scheduler for one output.
///
/// Conventions shared by every implementation: packets posted for a flow that is not
/// registered are ignored, as is a message of zero packets; [`Scheduler::next`] only
/// returns [`Decision::WaitUntil`] for a time later than `now`.
pub trait Scheduler {
    /// Registers a flow. Adding a flow that exists replaces its parameters.
    fn add_flow(&mut self, flow: FlowId, params: FlowParams);
    /// Forgets a flow and any packets still queued for it.
    fn remove_flow(&mut self, flow: FlowId);
    /// Changes a flow's inter-packet dispatch time at run time. Schedulers without rate
    /// control ignore it.
    fn set_idt(&mut self, _flow: FlowId, _idt: Duration) {}
    /// A send descriptor (one message of `packets` packets, at least one) was posted for
    /// `flow` at `now`.
    fn enqueue(&mut self, now: Time, flow: FlowId, packets: u32);
    /// Picks the packet to send at `now`.
    fn next(&mut self, now: Time) -> Decision;
    /// Packets still queued for `flow`.
    fn backlog(&self, flow: FlowId) -> u64;
}
