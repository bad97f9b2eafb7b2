//! Any of the NIC firmwares as one type ([`AnyNic`]): the cluster holds one per node
//! and calls it through the [`Nic`] interface without dynamic dispatch.

use qos_core::topology::NodeId;
use qos_core::units::{Duration, Time};

use super::via::{self, StageTimes};
use super::{gm, mcp, rate_control};
use super::{Busy, Firmware, Nic, NicConfig, Outputs, Timer};
use crate::myrinet::ids::FlowKey;
use crate::myrinet::packet::Packet;

/// One of the NIC models, chosen at run time from a [`Firmware`].
#[derive(Debug)]
pub enum AnyNic {
    /// Unmodified GM.
    Gm(mcp::Mcp<gm::Gm>),
    /// GM with rate control.
    RateControl(mcp::Mcp<rate_control::RateControl>),
    /// SVIA.
    Svia(Box<via::svia::Svia>),
    /// PVIA, QoSVIA, or PVIA with rate control.
    Pvia(Box<via::pvia::Pvia>),
}

impl AnyNic {
    /// An idle NIC of node `node` running `firmware`.
    pub fn new(firmware: Firmware, node: NodeId, config: &NicConfig) -> AnyNic {
        match firmware {
            Firmware::Gm => AnyNic::Gm(mcp::Mcp::new(node, config)),
            Firmware::RateControl => AnyNic::RateControl(mcp::Mcp::new(node, config)),
            Firmware::Svia => AnyNic::Svia(Box::new(via::svia::Svia::new(node, config))),
            Firmware::Pvia => AnyNic::Pvia(Box::new(via::pvia::Pvia::new(
                node,
                config,
                via::pvia::Discipline::Fcfs,
            ))),
            Firmware::Qosvia => AnyNic::Pvia(Box::new(via::pvia::Pvia::new(
                node,
                config,
                via::pvia::Discipline::VirtualClock,
            ))),
            Firmware::PviaRateControl => AnyNic::Pvia(Box::new(via::pvia::Pvia::new(
                node,
                config,
                via::pvia::Discipline::RateControl,
            ))),
        }
    }

    /// Which firmware this is.
    pub fn firmware(&self) -> Firmware {
        match self {
            AnyNic::Gm(_) => Firmware::Gm,
            AnyNic::RateControl(_) => Firmware::RateControl,
            AnyNic::Svia(_) => Firmware::Svia,
            AnyNic::Pvia(p) => match p.discipline() {
                via::pvia::Discipline::Fcfs => Firmware::Pvia,
                via::pvia::Discipline::VirtualClock => Firmware::Qosvia,
                via::pvia::Discipline::RateControl => Firmware::PviaRateControl,
            },
        }
    }
}

/// Calls the same method on whichever NIC an [`AnyNic`] holds (static dispatch).
macro_rules! dispatch {
    ($self:expr, $n:ident => $call:expr) => {
        match $self {
            AnyNic::Gm($n) => $call,
            AnyNic::RateControl($n) => $call,
            AnyNic::Svia($n) => $call,
            AnyNic::Pvia($n) => $call,
        }
    };
}

impl Nic for AnyNic {
    #[inline]
    fn open_flow(
        &mut self,
        now: Time,
        flow: FlowKey,
        dst: NodeId,
        idt: Duration,
        out: &mut Outputs,
    ) {
        dispatch!(self, n => n.open_flow(now, flow, dst, idt, out))
    }
    #[inline]
    fn close_flow(&mut self, now: Time, flow: FlowKey, out: &mut Outputs) {
        dispatch!(self, n => n.close_flow(now, flow, out))
    }
    #[inline]
    fn set_idt(&mut self, now: Time, flow: FlowKey, idt: Duration, out: &mut Outputs) {
        dispatch!(self, n => n.set_idt(now, flow, idt, out))
    }
    #[inline]
    fn host_post(&mut self, now: Time, flow: FlowKey, bytes: u64, out: &mut Outputs) {
        dispatch!(self, n => n.host_post(now, flow, bytes, out))
    }
    #[inline]
    fn packet_arrived(&mut self, now: Time, packet: Packet, out: &mut Outputs) {
        dispatch!(self, n => n.packet_arrived(now, packet, out))
    }
    #[inline]
    fn tail_left(&mut self, now: Time, out: &mut Outputs) {
        dispatch!(self, n => n.tail_left(now, out))
    }
    #[inline]
    fn timer(&mut self, now: Time, timer: Timer, out: &mut Outputs) {
        dispatch!(self, n => n.timer(now, timer, out))
    }
    #[inline]
    fn receive_buffers(&self) -> u32 {
        dispatch!(self, n => n.receive_buffers())
    }
    #[inline]
    fn idt(&self, flow: FlowKey) -> Option<Duration> {
        dispatch!(self, n => n.idt(flow))
    }
    #[inline]
    fn dispatches(&self, flow: FlowKey) -> &[u32] {
        dispatch!(self, n => n.dispatches(flow))
    }
    #[inline]
    fn stage_times(&self) -> Option<&StageTimes> {
        dispatch!(self, n => n.stage_times())
    }
    #[inline]
    fn busy(&self) -> Busy {
        dispatch!(self, n => n.busy())
    }
}
