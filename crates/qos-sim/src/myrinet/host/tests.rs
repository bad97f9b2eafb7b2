//! Unit tests of the host applications: send tokens, the pump's
//! answer, the measurement window, MPI cost, managed flows.

use qos_core::topology::NodeId;
use qos_core::units::{Bandwidth, Bytes, Duration, Time};

use super::{HostEvent, HostOutput, Hosts, ANSWER_BYTES};
use crate::engine::EventQueue;
use crate::myrinet::calibration::Calibration;
use crate::myrinet::flow::{xfer, Api, FlowSpec, Rate, Workload};
use crate::myrinet::ids::{AppId, FlowKey};

fn us(x: u64) -> Time {
    Time::ZERO + Duration::from_us(x)
}

fn spec(rate: Rate, workload: Workload, api: Api) -> FlowSpec {
    FlowSpec {
        name: "f".into(),
        src: NodeId(0),
        dst: NodeId(1),
        message: Bytes::kib(64),
        rate,
        workload,
        api,
        start: Time::ZERO,
        stop: None,
    }
}

const APP: AppId = AppId(0);

/// The hosts alone: their own events come back to them; the rest is recorded.
struct Bench {
    h: Hosts,
    q: EventQueue<HostEvent>,
    log: Vec<(Time, HostOutput)>,
}

impl Bench {
    fn new(f: FlowSpec) -> Bench {
        let window = (us(100), us(200));
        let mut q = EventQueue::new();
        q.schedule_at(f.start, HostEvent::Start(APP));
        Bench {
            h: Hosts::new(&[f], &Calibration::thesis(), window, 1),
            q,
            log: Vec::new(),
        }
    }

    fn apply(&mut self, now: Time, out: Vec<HostOutput>) {
        for o in out {
            match o {
                HostOutput::Schedule { at, event } => {
                    assert!(at >= now);
                    self.q.schedule_at(at, event);
                }
                o => self.log.push((now, o)),
            }
        }
    }

    fn run_until(&mut self, until: Time) {
        while self.q.peek_time().is_some_and(|t| t <= until) {
            let (now, ev) = self.q.pop().unwrap();
            let mut out = Vec::new();
            self.h.handle(now, ev, &mut out);
            self.apply(now, out);
        }
    }

    fn completed(&mut self, now: Time, flow: FlowKey) {
        let mut out = Vec::new();
        self.h.send_completed(now, flow, &mut out);
        self.apply(now, out);
    }

    fn received(&mut self, now: Time, flow: FlowKey, bytes: u64, last: bool) {
        let mut out = Vec::new();
        self.h.received(now, flow, bytes, last, &mut out);
        self.apply(now, out);
    }

    fn posts(&self) -> Vec<(Time, NodeId, FlowKey, u64)> {
        self.log
            .iter()
            .filter_map(|(t, o)| match *o {
                HostOutput::Post { node, flow, bytes } => Some((*t, node, flow, bytes)),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn a_stream_posts_while_it_holds_send_tokens_and_resumes_on_each_completion() {
    let tokens = Calibration::thesis().host.send_tokens as usize;
    let mut b = Bench::new(spec(Rate::Idt(Duration::ZERO), Workload::Stream, Api::Gm));
    b.run_until(us(1000));
    // Both ends' NICs get the flow, then the source posts one message per token.
    assert_eq!(
        b.log[..2],
        [
            (
                Time::ZERO,
                HostOutput::Open {
                    node: NodeId(0),
                    flow: FlowKey::forward(APP),
                    peer: NodeId(1),
                    idt: Duration::ZERO
                }
            ),
            (
                Time::ZERO,
                HostOutput::Open {
                    node: NodeId(1),
                    flow: FlowKey::reply(APP),
                    peer: NodeId(0),
                    idt: Duration::ZERO
                }
            ),
        ]
    );
    let posts = b.posts();
    assert_eq!(posts.len(), tokens);
    assert!(posts
        .iter()
        .all(|&(_, n, f, l)| (n, f, l) == (NodeId(0), FlowKey::forward(APP), 65536)));
    // One message at a time, each costing the post time plus at most 0.1 µs jitter.
    for w in posts.windows(2) {
        let d = w[1].0 - w[0].0;
        assert!(
            d >= Duration::from_us(1) && d <= Duration::from_ns(1100),
            "{d}"
        );
    }
    // A completion, noticed after the polling time, gives the token back.
    b.completed(us(2000), FlowKey::forward(APP));
    b.run_until(us(3000));
    let posts = b.posts();
    assert_eq!(posts.len(), tokens + 1);
    let t = posts[tokens].0;
    assert!(
        t >= us(2002) && t <= us(2002) + Duration::from_ns(100),
        "{t}"
    );
    // Completions of the reply direction give no token back.
    b.completed(us(4000), FlowKey::reply(APP));
    b.run_until(us(5000));
    assert_eq!(b.posts().len(), tokens + 1);
}

#[test]
fn the_pump_receiver_answers_the_last_message_and_the_sender_stops_the_clock() {
    let mut b = Bench::new(spec(
        Rate::Idt(Duration::ZERO),
        Workload::Pump { messages: 3 },
        Api::Gm,
    ));
    b.run_until(us(100));
    assert_eq!(b.posts().len(), 3);
    let fwd = FlowKey::forward(APP);
    for (i, at) in [us(500), us(600)].into_iter().enumerate() {
        b.received(at, fwd, 65536, true);
        b.run_until(at + Duration::from_us(50));
        assert_eq!(b.posts().len(), 3, "no answer after message {}", i + 1);
    }
    b.received(us(700), fwd, 65536, true);
    b.run_until(us(800));
    let answer = *b.posts().last().unwrap();
    assert_eq!(
        (answer.1, answer.2, answer.3),
        (NodeId(1), FlowKey::reply(APP), ANSWER_BYTES)
    );
    assert!(!b.h.all_done());
    b.received(us(900), FlowKey::reply(APP), ANSWER_BYTES, true);
    b.run_until(us(1000));
    assert!(b.h.all_done());
    // 3 × 64 KiB between the start and the answer's delivery (900 µs + 1 µs poll).
    let o = b.h.outcome(APP);
    assert_eq!(o.messages, 3);
    let want = 3.0 * 65536.0 / 901e-6 / 1e6;
    assert!((o.pump_mb_s.unwrap() - want).abs() < 1e-9);
}

#[test]
fn only_forward_bytes_inside_the_window_count() {
    let mut b = Bench::new(spec(Rate::Idt(Duration::ZERO), Workload::Stream, Api::Gm));
    let fwd = FlowKey::forward(APP);
    b.received(us(99), fwd, 1000, false);
    b.received(us(100), fwd, 2000, false);
    b.received(us(150), FlowKey::reply(APP), 4000, false);
    b.received(us(199), fwd, 3000, true);
    b.received(us(200), fwd, 5000, true);
    let o = b.h.outcome(APP);
    assert_eq!(o.window_bytes, 5000);
    // 5000 B in 100 µs.
    assert!((o.window_mb_s - 50.0).abs() < 1e-9);
}

#[test]
fn an_mpi_message_costs_the_host_a_fixed_time_and_a_copy_before_the_gm_post() {
    let cal = Calibration::thesis();
    let mut b = Bench::new(spec(Rate::Idt(Duration::ZERO), Workload::Stream, Api::Mpi));
    b.run_until(us(100_000));
    let first = b.posts()[0].0;
    let cost = cal.host.post + cal.mpi.per_message + xfer(cal.mpi.copy_bandwidth, 65536);
    assert!(first >= Time::ZERO + cost && first <= Time::ZERO + cost + Duration::from_ns(100));
    // 64 KiB at 54 MB/s is 1.214 ms of copying.
    assert!(cost > Duration::from_us(1250) && cost < Duration::from_us(1260));
}

#[test]
fn a_managed_flow_asks_the_manager_and_sends_nothing_if_refused() {
    let mut b = Bench::new(spec(
        Rate::Premium(Bandwidth::from_mb_per_sec(10.0)),
        Workload::Stream,
        Api::Gm,
    ));
    b.run_until(us(10));
    assert_eq!(b.log.last().unwrap().1, HostOutput::Request(APP));
    assert!(b.posts().is_empty());
    let mut out = Vec::new();
    b.h.answer(us(20), APP, false, &mut out);
    assert!(out.is_empty());
    assert!(b.h.rejected(APP));
    assert!(b.h.all_done());
    assert!(b.h.outcome(APP).rejected);
}

#[test]
fn a_granted_flow_starts_posting_and_releases_its_reservation_when_it_stops() {
    let mut b = Bench::new(spec(Rate::BestEffort, Workload::Stream, Api::Gm));
    b.run_until(us(10));
    let mut out = Vec::new();
    b.h.answer(us(20), APP, true, &mut out);
    b.apply(us(20), out);
    b.run_until(us(100));
    assert!(!b.posts().is_empty());
    assert!(b.posts().iter().all(|p| p.0 > us(20)));
    b.q.schedule_at(us(200), HostEvent::Stop(APP));
    b.run_until(us(200));
    let tail: Vec<&HostOutput> = b.log.iter().rev().take(2).map(|(_, o)| o).collect();
    assert_eq!(
        tail,
        [
            &HostOutput::Release(APP),
            &HostOutput::Close {
                node: NodeId(0),
                flow: FlowKey::forward(APP)
            }
        ]
    );
}

/// An MPEG stream's posts, each delivered 10 µs after it was posted, with messages of
/// at most `message`: the sizes posted and what the receiver measured.
fn mpeg_posts(message: Bytes) -> (Vec<u64>, crate::myrinet::flow::FlowOutcome) {
    use crate::workload::mpeg::Synthetic;
    use crate::workload::spec::Spec;
    let stream = Synthetic::new(Bandwidth::from_bytes_per_sec(250_000), 25.0);
    let mut f = spec(
        Rate::Idt(Duration::from_ms(1)),
        Workload::Emit(Spec::Mpeg { streams: 1, stream }),
        Api::Gm,
    );
    f.message = message;
    let mut b = Bench::new(f);
    b.h.window = (Time::ZERO, us(1_000_000));
    b.run_until(us(400_000));
    let posts = b.posts();
    for &(t, _, flow, bytes) in &posts {
        b.received(t + Duration::from_us(10), flow, bytes, true);
        b.run_until(t + Duration::from_us(20));
    }
    (posts.iter().map(|p| p.3).collect(), b.h.outcome(APP))
}

#[test]
fn a_frame_larger_than_the_message_size_is_cut_and_received_with_its_last_message() {
    let (whole, o_whole) = mpeg_posts(Bytes::kib(64));
    let (cut, o_cut) = mpeg_posts(Bytes::new(1000));
    // ~10 frames of 10 kB on average: one message each, or cut into 1000-byte ones.
    assert!(whole.len() >= 8, "{whole:?}");
    assert!(whole.iter().any(|&b| b > 1000), "{whole:?}");
    assert!(cut.iter().all(|&b| b <= 1000), "{cut:?}");
    assert!(cut.len() > 5 * whole.len(), "{} {}", cut.len(), whole.len());
    assert_eq!(cut.iter().sum::<u64>(), whole.iter().sum::<u64>());
    // The receiver counts frames either way: one receipt per frame.
    let (jw, jc) = (o_whole.jitter.unwrap(), o_cut.jitter.unwrap());
    assert_eq!(jw.intervals + 1, whole.len() as u64);
    assert_eq!(jc.intervals, jw.intervals);
    assert_eq!(o_cut.messages, cut.len() as u64);
}
