//! A bench for one NIC in the unit tests: hand-built inputs (timers, posts, packets) on
//! an event queue, every output logged, injected packets leaving at the link rate.

use qos_core::topology::NodeId;
use qos_core::units::{Bandwidth, Duration, Time};

use super::{Nic, NicConfig, Output, Outputs, Timer};
use crate::engine::EventQueue;
use crate::myrinet::calibration::Calibration;
use crate::myrinet::flow::xfer;
use crate::myrinet::ids::FlowKey;
use crate::myrinet::packet::{Body, Data, Packet};

pub(in crate::myrinet::nic) fn us(x: u64) -> Time {
    Time::ZERO + Duration::from_us(x)
}

pub(in crate::myrinet::nic) fn config() -> NicConfig {
    NicConfig {
        calibration: Calibration::thesis(),
        timeline_bin: None,
        via: super::via_calibration::ViaCalibration::paper(),
    }
}

/// What a bench feeds its NIC.
#[derive(Debug, Clone)]
pub(in crate::myrinet::nic) enum Input {
    Timer(Timer),
    TailLeft,
    Post(FlowKey, u64),
    Arrive(Packet),
}

/// One NIC alone: its timers come back to it, each packet it injects leaves at the
/// link rate (an idle network), everything else it outputs is recorded with its time.
pub(in crate::myrinet::nic) struct Bench<N: Nic> {
    pub(in crate::myrinet::nic) nic: N,
    q: EventQueue<Input>,
    out: Outputs,
    pub(in crate::myrinet::nic) log: Vec<(Time, Output)>,
    link: Bandwidth,
}

impl<N: Nic> Bench<N> {
    pub(in crate::myrinet::nic) fn new(nic: N) -> Self {
        Bench {
            nic,
            q: EventQueue::new(),
            out: Outputs::new(),
            log: Vec::new(),
            link: Calibration::thesis().network.link,
        }
    }

    pub(in crate::myrinet::nic) fn at(&mut self, t: Time, input: Input) {
        self.q.schedule_at(t, input);
    }

    pub(in crate::myrinet::nic) fn run(&mut self) {
        self.run_until(Time::NEVER);
    }

    /// Runs the events up to `end` (included).
    pub(in crate::myrinet::nic) fn run_until(&mut self, end: Time) {
        while self.q.peek_time().is_some_and(|t| t <= end) {
            let Some((now, input)) = self.q.pop() else {
                break;
            };
            match input {
                Input::Timer(t) => self.nic.timer(now, t, &mut self.out),
                Input::TailLeft => self.nic.tail_left(now, &mut self.out),
                Input::Post(flow, bytes) => self.nic.host_post(now, flow, bytes, &mut self.out),
                Input::Arrive(p) => self.nic.packet_arrived(now, p, &mut self.out),
            }
            let outs: Vec<Output> = self.out.drain().collect();
            for o in outs {
                match o {
                    Output::Arm { at, timer } => {
                        assert!(at >= now, "a timer armed in the past");
                        self.q.schedule_at(at, Input::Timer(timer));
                    }
                    Output::Inject(p) => {
                        let left = now + xfer(self.link, p.wire);
                        self.q.schedule_at(left, Input::TailLeft);
                        self.log.push((now, Output::Inject(p)));
                    }
                    o => self.log.push((now, o)),
                }
            }
        }
    }

    /// Injected packets with their times.
    pub(in crate::myrinet::nic) fn injected(&self) -> Vec<(Time, &Packet)> {
        self.log
            .iter()
            .filter_map(|(t, o)| match o {
                Output::Inject(p) => Some((*t, p)),
                _ => None,
            })
            .collect()
    }

    /// Injected data packets: (time, flow, payload).
    pub(in crate::myrinet::nic) fn data(&self) -> Vec<(Time, FlowKey, u64)> {
        self.injected()
            .into_iter()
            .filter_map(|(t, p)| match p.body {
                Body::Data(d) => Some((t, d.flow, d.len)),
                Body::Ack(_) => None,
            })
            .collect()
    }

    pub(in crate::myrinet::nic) fn count(&self, f: impl Fn(&Output) -> bool) -> usize {
        self.log.iter().filter(|(_, o)| f(o)).count()
    }
}

pub(in crate::myrinet::nic) fn open(nic: &mut impl Nic, flow: FlowKey, dst: u32, idt: Duration) {
    let mut out = Outputs::new();
    nic.open_flow(Time::ZERO, flow, NodeId(dst), idt, &mut out);
    assert!(out.is_empty());
}

pub(in crate::myrinet::nic) fn data(
    src: u32,
    flow: FlowKey,
    seq: u64,
    len: u64,
    last: bool,
) -> Packet {
    Packet {
        src: NodeId(src),
        dst: NodeId(0),
        wire: len + 16,
        body: Body::Data(Data {
            flow,
            seq,
            len,
            last,
            negotiated: None,
        }),
    }
}
