//! Unit tests of the simulated bandwidth manager: admission with
//! its messages and their times, rejection, best-effort re-sharing on admission and
//! release.

use std::sync::Arc;

use qos_core::admission::idt_for;
use qos_core::topology::{build, NodeId, RateParams};
use qos_core::units::{Bandwidth, Bytes, Duration, Time};

use super::{Manager, ManagerOutput, MsgId};
use crate::engine::EventQueue;
use crate::myrinet::flow::{Api, FlowSpec, Rate, Workload};
use crate::myrinet::ids::{AppId, FlowKey};

const L: Duration = Duration::from_us(100);

fn flow(src: u32, dst: u32, rate: Rate) -> FlowSpec {
    FlowSpec {
        name: format!("{src}->{dst}"),
        src: NodeId(src),
        dst: NodeId(dst),
        message: Bytes::kib(64),
        rate,
        workload: Workload::Stream,
        api: Api::Gm,
        start: Time::ZERO,
        stop: None,
    }
}

/// The manager alone: its messages come back to it after their latency; answers and
/// IDTs are recorded with their times.
struct Bench {
    m: Manager,
    q: EventQueue<MsgId>,
    log: Vec<(Time, ManagerOutput)>,
}

impl Bench {
    fn new(flows: &[FlowSpec]) -> Bench {
        let topo = build::crossbar(4, &build::HostDefaults::thesis_cluster())
            .and_then(|b| b.build())
            .unwrap();
        Bench {
            m: Manager::new(Arc::new(topo), L, flows),
            q: EventQueue::new(),
            log: Vec::new(),
        }
    }

    fn apply(&mut self, now: Time, out: Vec<ManagerOutput>) {
        for o in out {
            match o {
                ManagerOutput::Schedule { at, msg } => {
                    assert_eq!(at, now + L, "every message takes one control latency");
                    self.q.schedule_at(at, msg);
                }
                o => self.log.push((now, o)),
            }
        }
    }

    fn run(&mut self) {
        while let Some((now, msg)) = self.q.pop() {
            let mut out = Vec::new();
            self.m.deliver(now, msg, &mut out);
            self.apply(now, out);
        }
    }

    fn request(&mut self, at: Time, app: u32) {
        let mut out = Vec::new();
        self.m.request(at, AppId(app), &mut out);
        self.apply(at, out);
        self.run();
    }

    fn release(&mut self, at: Time, app: u32) {
        let mut out = Vec::new();
        self.m.release(at, AppId(app), &mut out);
        self.apply(at, out);
        self.run();
    }

    fn take(&mut self) -> Vec<(Time, ManagerOutput)> {
        std::mem::take(&mut self.log)
    }
}

fn us(x: u64) -> Time {
    Time::ZERO + Duration::from_us(x)
}

fn set_idt(app: u32, idt: Duration) -> ManagerOutput {
    ManagerOutput::SetIdt {
        node: NodeId(0),
        flow: FlowKey::forward(AppId(app)),
        idt,
    }
}

fn answer(app: u32, granted: bool) -> ManagerOutput {
    ManagerOutput::Answer {
        app: AppId(app),
        granted,
    }
}

fn idt(mb_s: f64) -> Duration {
    idt_for(RateParams::thesis(), Bandwidth::from_mb_per_sec(mb_s)).unwrap()
}

#[test]
fn a_premium_request_is_granted_after_two_latencies_with_its_idt_set_first() {
    let mb = Bandwidth::from_mb_per_sec;
    let mut b = Bench::new(&[
        flow(0, 1, Rate::Premium(mb(50.0))),
        flow(0, 2, Rate::Premium(mb(50.0))),
    ]);
    b.request(us(0), 0);
    // Request reaches the master at L; the IDT (T·Bmax/50 MB/s = 78.528 µs) and the
    // answer reach the source node at 2L, the IDT first.
    assert_eq!(idt(50.0), Duration::from_ps(78_528_000));
    assert_eq!(
        b.take(),
        vec![(us(200), set_idt(0, idt(50.0))), (us(200), answer(0, true))]
    );
    // A second 50 MB/s from the same node exceeds its 81.8 MB/s: refused, no IDT.
    b.request(us(1000), 1);
    assert_eq!(b.take(), vec![(us(1200), answer(1, false))]);
    assert_eq!(b.m.decisions(), [(AppId(0), true), (AppId(1), false)]);
}

#[test]
fn best_effort_flows_get_the_surplus_again_on_every_admission_and_release() {
    let mut b = Bench::new(&[
        flow(0, 1, Rate::BestEffort),
        flow(0, 2, Rate::Premium(Bandwidth::from_mb_per_sec(40.0))),
    ]);
    // Alone on its node, the best-effort flow may send at peak rate: IDT = T.
    b.request(us(0), 0);
    assert_eq!(
        b.take(),
        vec![
            (us(200), set_idt(0, Duration::from_us(48))),
            (us(200), answer(0, true))
        ]
    );
    // A 40 MB/s premium flow on the same node leaves it 78 − 40 = 38 MB/s: the node
    // shares the calibration's best-effort capacity (78 MB/s, fitted to thesis §5.6).
    b.request(us(1000), 1);
    assert_eq!(
        b.take(),
        vec![
            (us(1200), set_idt(1, idt(40.0))),
            (us(1200), set_idt(0, idt(38.0))),
            (us(1200), answer(1, true)),
        ]
    );
    // When the premium flow ends, the best-effort flow is back to peak rate.
    b.release(us(2000), 1);
    assert_eq!(
        b.take(),
        vec![(us(2200), set_idt(0, Duration::from_us(48)))]
    );
    // Releasing an application the master does not know changes nothing.
    b.release(us(3000), 1);
    assert!(b.take().is_empty());
}
