//! Packet schedulers for one output — a NIC's send engine (thesis §4.2.2) or a host
//! channel adapter — behind one small trait, [`Scheduler`], with one enum,
//! [`AnyScheduler`], chosen from configuration ([`SchedulerKind`]).
//!
//! The caller owns the packets; a scheduler only keeps, per flow, how many packets of
//! which queued messages are still sendable, and answers "which flow sends next, and
//! when?". Time is passed in; nothing here reads a clock.
//!
//! Implementations:
//! - [`rate::RateControl`] — IDT/NDT rate control (thesis §3.2.2, Fig 3.3, Table 3.1).
//! - [`virtual_clock::VirtualClock`] — Zhang's VirtualClock as in QoS-VIA (Nagar §3.3).
//! - [`round_robin::MessageRoundRobin`] — a whole send descriptor per turn (thesis Fig 2.3a).
//! - [`round_robin::InterleavedRoundRobin`] — one packet per flow per turn (thesis Fig 2.3b).
//! - [`gm::GmRotation`] — GM's connection → sub-port queues, rotated after each packet
//!   (thesis §4.1, Fig 4.2): the unmodified-GM baseline.

use serde::{Deserialize, Serialize};

pub mod gm;
mod heap;
pub mod rate;
pub mod round_robin;
pub mod scheduler;
pub mod virtual_clock;

pub use scheduler::{Decision, FlowId, FlowParams, Scheduler};

use crate::units::{Duration, Time};

/// Which scheduler to use, as written in configuration files (kebab-case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulerKind {
    /// IDT/NDT rate control (thesis §3.2.2).
    RateControl,
    /// VirtualClock (Nagar §3.3).
    VirtualClock,
    /// Whole send descriptors round-robin (thesis Fig 2.3a).
    MessageRoundRobin,
    /// One packet per flow per turn (thesis Fig 2.3b).
    InterleavedRoundRobin,
    /// GM's connection/sub-port rotation (thesis §4.1).
    Gm,
}

impl SchedulerKind {
    /// Every kind, in documentation order.
    pub const ALL: [SchedulerKind; 5] = [
        SchedulerKind::RateControl,
        SchedulerKind::VirtualClock,
        SchedulerKind::MessageRoundRobin,
        SchedulerKind::InterleavedRoundRobin,
        SchedulerKind::Gm,
    ];

    /// The configuration name ("rate-control", ...).
    pub const fn name(self) -> &'static str {
        match self {
            SchedulerKind::RateControl => "rate-control",
            SchedulerKind::VirtualClock => "virtual-clock",
            SchedulerKind::MessageRoundRobin => "message-round-robin",
            SchedulerKind::InterleavedRoundRobin => "interleaved-round-robin",
            SchedulerKind::Gm => "gm",
        }
    }
}

impl std::fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheduler name that is not one of [`SchedulerKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduler '{0}' (expected one of rate-control, virtual-clock, message-round-robin, interleaved-round-robin, gm)")]
pub struct UnknownScheduler(pub String);

impl std::str::FromStr for SchedulerKind {
    type Err = UnknownScheduler;
    fn from_str(s: &str) -> Result<Self, UnknownScheduler> {
        SchedulerKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownScheduler(s.to_string()))
    }
}

/// One of the schedulers, chosen at run time from a [`SchedulerKind`].
#[derive(Debug, Clone)]
pub enum AnyScheduler {
    /// See [`rate::RateControl`].
    RateControl(rate::RateControl),
    /// See [`virtual_clock::VirtualClock`].
    VirtualClock(virtual_clock::VirtualClock),
    /// See [`round_robin::MessageRoundRobin`].
    MessageRoundRobin(round_robin::MessageRoundRobin),
    /// See [`round_robin::InterleavedRoundRobin`].
    InterleavedRoundRobin(round_robin::InterleavedRoundRobin),
    /// See [`gm::GmRotation`].
    Gm(gm::GmRotation),
}

impl AnyScheduler {
    /// An empty scheduler of the given kind.
    pub fn new(kind: SchedulerKind) -> Self {
        match kind {
            SchedulerKind::RateControl => AnyScheduler::RateControl(Default::default()),
            SchedulerKind::VirtualClock => AnyScheduler::VirtualClock(Default::default()),
            SchedulerKind::MessageRoundRobin => AnyScheduler::MessageRoundRobin(Default::default()),
            SchedulerKind::InterleavedRoundRobin => {
                AnyScheduler::InterleavedRoundRobin(Default::default())
            }
            SchedulerKind::Gm => AnyScheduler::Gm(Default::default()),
        }
    }

    /// Which kind this is.
    pub fn kind(&self) -> SchedulerKind {
        match self {
            AnyScheduler::RateControl(_) => SchedulerKind::RateControl,
            AnyScheduler::VirtualClock(_) => SchedulerKind::VirtualClock,
            AnyScheduler::MessageRoundRobin(_) => SchedulerKind::MessageRoundRobin,
            AnyScheduler::InterleavedRoundRobin(_) => SchedulerKind::InterleavedRoundRobin,
            AnyScheduler::Gm(_) => SchedulerKind::Gm,
        }
    }
}

/// Calls the same method on whichever scheduler an [`AnyScheduler`] holds (static
/// dispatch, no vtable on the per-packet path).
macro_rules! dispatch {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            AnyScheduler::RateControl($s) => $call,
            AnyScheduler::VirtualClock($s) => $call,
            AnyScheduler::MessageRoundRobin($s) => $call,
            AnyScheduler::InterleavedRoundRobin($s) => $call,
            AnyScheduler::Gm($s) => $call,
        }
    };
}

impl From<SchedulerKind> for AnyScheduler {
    fn from(kind: SchedulerKind) -> Self {
        AnyScheduler::new(kind)
    }
}

impl Scheduler for AnyScheduler {
    fn add_flow(&mut self, flow: FlowId, params: FlowParams) {
        dispatch!(self, s => s.add_flow(flow, params))
    }
    fn remove_flow(&mut self, flow: FlowId) {
        dispatch!(self, s => s.remove_flow(flow))
    }
    fn set_idt(&mut self, flow: FlowId, idt: Duration) {
        dispatch!(self, s => s.set_idt(flow, idt))
    }
    fn enqueue(&mut self, now: Time, flow: FlowId, packets: u32) {
        dispatch!(self, s => s.enqueue(now, flow, packets))
    }
    fn next(&mut self, now: Time) -> Decision {
        dispatch!(self, s => s.next(now))
    }
    fn backlog(&self, flow: FlowId) -> u64 {
        dispatch!(self, s => s.backlog(flow))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_use_kebab_case_names_in_configuration() {
        for kind in SchedulerKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
            assert_eq!(serde_json::from_str::<SchedulerKind>(&json).unwrap(), kind);
            assert_eq!(kind.name().parse::<SchedulerKind>().unwrap(), kind);
            assert_eq!(AnyScheduler::new(kind).kind(), kind);
        }
        let err = "fifo".parse::<SchedulerKind>().unwrap_err();
        assert!(err.to_string().contains("unknown scheduler 'fifo'"));
    }

    /// The same workload through every kind: each is work-conserving or paced, never
    /// loses or invents a packet, and honours removal.
    #[test]
    fn every_kind_sends_each_queued_packet_exactly_once() {
        for kind in SchedulerKind::ALL {
            let mut s = AnyScheduler::new(kind);
            for f in 0..4u32 {
                s.add_flow(
                    FlowId(f),
                    FlowParams {
                        idt: Duration::from_ps(u64::from(f) + 1),
                        vtick: (f % 2 == 0).then(|| Duration::from_ps(u64::from(f) + 2)),
                        connection: f % 2,
                        subport: f / 2,
                    },
                );
                s.enqueue(Time::ZERO, FlowId(f), f + 1);
                s.enqueue(Time::ZERO, FlowId(f), 2);
            }
            s.remove_flow(FlowId(3));
            let mut sent = [0u64; 4];
            let mut now = Time::ZERO;
            loop {
                match s.next(now) {
                    Decision::Dispatch(f) => sent[f.0 as usize] += 1,
                    Decision::WaitUntil(t) => {
                        assert!(t > now, "{kind}: wait must be in the future");
                        now = t;
                    }
                    Decision::Idle => break,
                }
            }
            assert_eq!(sent, [3, 4, 5, 0], "{kind}");
            for f in 0..4 {
                assert_eq!(s.backlog(FlowId(f)), 0, "{kind}");
            }
        }
    }
}
