//! Unit tests of the VIA firmware mechanisms (Nagar §3), one NIC driven with hand-built
//! inputs on the bench of the NIC tests, with round-number constants so that every
//! expected time can be worked out by hand: SVIA's sequencing, PVIA's overlap of two
//! messages, QoSVIA's timestamp-ordered HDMA and NSDMA queues with the guard near the
//! HDMA head, rate control holding doorbells, and the receive path.

use qos_core::topology::NodeId;
use qos_core::units::{Bandwidth, Bytes, Duration, Time};

use super::super::testbench::{config, data, open, Bench, Input};
use super::super::{Nic, NicConfig, Output};
use super::pvia::{Discipline, Pvia};
use super::queue::{Key, OrderedQueue};
use super::svia::Svia;
use super::Stage;
use super::{LcpCosts, QosCosts};
use crate::myrinet::ids::{AppId, FlowKey};

/// 1 µs per LCP operation, 1 µs per device check, host DMA at 100 MB/s (10 ns a byte)
/// with 1 µs of set-up, 100-byte descriptors and status records (2 µs each), 4 KiB
/// pages with page-aligned buffers.
fn round() -> NicConfig {
    let mut c = config();
    let us = Duration::from_us;
    let costs = LcpCosts {
        poll: us(1),
        doorbell: us(2),
        data_prog: us(3),
        per_page: us(1),
        nsdma_start: us(1),
        status_prog: us(1),
        status_done: us(1),
        recv: us(2),
        rx_latency: Duration::ZERO,
    };
    c.via.svia = costs;
    c.via.pvia = costs;
    c.via.qosvia = QosCosts {
        timestamp: us(1),
        insert: us(1),
        scan: Duration::ZERO,
        guard: 1,
        ordered_completions: true,
    };
    let h = &mut c.via.hdma;
    h.read = Bandwidth::from_mb_per_sec(100.0);
    h.write = Bandwidth::from_mb_per_sec(100.0);
    h.read_setup = us(1);
    h.write_setup = us(1);
    h.descriptor = Bytes::new(100);
    h.status = Bytes::new(100);
    h.page = Bytes::kib(4);
    h.buffer_offset = Bytes::ZERO;
    c
}

fn t(us_x1000: u64) -> Time {
    Time::ZERO + Duration::from_ns(us_x1000)
}

fn flow(app: u32) -> FlowKey {
    FlowKey::forward(AppId(app))
}

/// (time, flow) events.
type Timed = Vec<(Time, FlowKey)>;

/// (time, flow) of every injection and of every send completion.
fn sends<N: Nic>(b: &Bench<N>) -> (Timed, Timed) {
    let inj = b.data().into_iter().map(|(t, f, _)| (t, f)).collect();
    let done = b
        .log
        .iter()
        .filter_map(|(t, o)| match o {
            Output::SendCompleted(f) => Some((*t, *f)),
            _ => None,
        })
        .collect();
    (inj, done)
}

/// Two 1000-byte messages rung at t = 0 on one channel (wire 1016 B at 160 MB/s:
/// 6.35 µs).
fn two_messages<N: Nic>(nic: N) -> Bench<N> {
    let mut b = Bench::new(nic);
    open(&mut b.nic, flow(0), 1, Duration::ZERO);
    b.at(Time::ZERO, Input::Post(flow(0), 1000));
    b.at(Time::ZERO, Input::Post(flow(0), 1000));
    b.run();
    b
}

#[test]
fn svia_does_each_send_sequence_to_the_end_before_the_next() {
    let b = two_messages(Svia::new(NodeId(0), &round()));
    let (inj, done) = sends(&b);
    // Message 1: doorbell noticed at the loop's first visit (check 1) → 1; doorbell
    // handler 2 → 3; descriptor DMA 1 + 1 → 5; data programmed 3 → 8; data DMA 1 + 10
    // → 19; NSDMA started 1 → 20; tail out at 26.35; status programmed 1 → 27.35;
    // status DMA 2 → 29.35. Retired 1 → 30.35. The loop goes on at NRDMA (check to
    // 31.35), reaches the doorbell queue (check to 32.35): message 2 repeats the
    // sequence 31.35 µs later.
    assert_eq!(inj, [(t(20_000), flow(0)), (t(51_350), flow(0))]);
    assert_eq!(done, [(t(29_350), flow(0)), (t(60_700), flow(0))]);
    let s = b.nic.stage_times().unwrap();
    assert_eq!(s.count(Stage::SendStatusDone), 2);
    // Stage times of the two from their doorbells (both at 0): 29.35 and 60.7.
    assert!((s.mean_us(Stage::SendStatusDone).unwrap() - (29.35 + 60.7) / 2.0).abs() < 1e-9);
    assert!((s.mean_us(Stage::SendDescProg).unwrap() - (3.0 + 34.35) / 2.0).abs() < 1e-9);
}

#[test]
fn pvia_overlaps_the_second_message_with_the_first() {
    let b = two_messages(Pvia::new(NodeId(0), &round(), Discipline::Fcfs));
    let (inj, done) = sends(&b);
    // The loop visits doorbell, HDMA, NSDMA, NRDMA, 1 µs each, handling one event per
    // visit:
    //  1: doorbell m1 → 3 (descriptor DMA 3..5)      7: doorbell m2 → 9 (DMA 9..11)
    // 10: m1's descriptor is down: data programmed → 13 (data DMA 13..24)
    // 17: m2's descriptor: data programmed → 20 (queued: DMA 24..35)
    // 28: m1's data is down: NSDMA starts → 29 (tail out at 35.35)
    // 37: m2's data is down: NSDMA busy, queued → 38
    // 39: NSDMA done: status of m1 programmed, m2's NSDMA started → 41 (status 41..43)
    // 44: m1's status done → 45;  50: NSDMA done (m2's tail out at 47.35) → 51 (status
    //     DMA 51..53).
    assert_eq!(inj, [(t(29_000), flow(0)), (t(41_000), flow(0))]);
    assert_eq!(done, [(t(43_000), flow(0)), (t(53_000), flow(0))]);
    // The first message alone takes longer than under SVIA (polling and queuing),
    // the second finishes earlier: the overlap.
    let svia = two_messages(Svia::new(NodeId(0), &round()));
    let (_, sdone) = sends(&svia);
    assert!(done[0].0 > sdone[0].0 && done[1].0 < sdone[1].0);
}

/// Channel 0 (best-effort) rings one 64 KiB message at 0, whose data keeps the host DMA
/// busy until ~700 µs; then channel 1 (Vtick 100 µs) rings three 4 KiB messages and
/// channel 2 (Vtick 10 µs) three, all at 1 µs, in that order. Everything after the
/// best-effort message queues while its data moves.
fn backlogged(discipline: Discipline) -> Bench<Pvia> {
    let mut b = Bench::new(Pvia::new(NodeId(0), &round(), discipline));
    open(&mut b.nic, flow(0), 1, Duration::ZERO);
    open(&mut b.nic, flow(1), 2, Duration::from_us(100));
    open(&mut b.nic, flow(2), 3, Duration::from_us(10));
    b.at(Time::ZERO, Input::Post(flow(0), 65536));
    for ch in 1..3 {
        for _ in 0..3 {
            b.at(t(1_000), Input::Post(flow(ch), 4096));
        }
    }
    b
}

#[test]
fn qosvia_keeps_the_hdma_queue_in_stamp_order_except_next_to_its_head() {
    let mut b = backlogged(Discipline::VirtualClock);
    b.run_until(t(100_000));
    let q = b.nic.hdma_queue();
    // Channel 1's doorbells are stamped about 100, 200, 300 µs (auxVC = max(now, auxVC)
    // + Vtick), channel 2's about 10 µs apart from ~40 µs. Channel 1's first
    // descriptor request found the queue empty; the guard keeps it next to the head;
    // behind it every request is in stamp order.
    let flows: Vec<u32> = q.iter().map(|e| e.0.app.0).collect();
    assert_eq!(flows, [1, 2, 2, 2, 1, 1], "{q:?}");
    assert!(q[1..].windows(2).all(|w| w[0].1 < w[1].1), "{q:?}");
    assert!(
        q[0].1 > q[1].1,
        "the guarded request keeps its place: {q:?}"
    );
    // PVIA keeps the order of the doorbells.
    let mut p = backlogged(Discipline::Fcfs);
    p.run_until(t(100_000));
    let f: Vec<u32> = p.nic.hdma_queue().iter().map(|e| e.0.app.0).collect();
    assert_eq!(f, [1, 1, 1, 2, 2, 2]);
}

#[test]
fn qosvia_sends_in_stamp_order_and_pvia_in_doorbell_order() {
    let order = |d| {
        let mut b = backlogged(d);
        b.run();
        b.data().iter().map(|x| x.1.app.0).collect::<Vec<u32>>()
    };
    // Channel 1's first descriptor went ahead (the guard), but its data request and
    // its NSDMA turn are ordered by stamp again: the mis-ordering is "remedied in the
    // next pipeline stage" (§3.3), and channel 2 goes first.
    assert_eq!(order(Discipline::VirtualClock), [0, 2, 2, 2, 1, 1, 1]);
    assert_eq!(order(Discipline::Fcfs), [0, 1, 1, 1, 2, 2, 2]);
}

#[test]
fn ordered_insertion_never_passes_the_guarded_head() {
    let k = |stamp: u64, seq| Key {
        stamp: Time::from_ps(stamp),
        seq,
    };
    let mut q = OrderedQueue::default();
    for (i, s) in [50, 60, 70].iter().enumerate() {
        q.push_back(k(*s, i as u64), *s);
    }
    // Stamp 10 belongs at the head; with guard 1 it goes second, guard 0 first.
    assert_eq!(q.position(k(10, 9), 1), 1);
    assert_eq!(q.position(k(10, 9), 0), 0);
    // Equal stamps keep arrival order; a late stamp goes to the tail.
    assert_eq!(q.insert(k(60, 8), 65, 1), 2);
    assert_eq!(q.insert(k(99, 9), 99, 1), 4);
    let v: Vec<u64> = q.iter().map(|e| e.1).collect();
    assert_eq!(v, [50, 60, 65, 70, 99]);
    // The guard cannot reach past the end of a short queue.
    let mut short = OrderedQueue::default();
    assert_eq!(short.insert(k(5, 0), 5, 3), 0);
}

#[test]
fn rate_control_holds_doorbells_until_their_next_dispatch_time() {
    let mut b = Bench::new(Pvia::new(NodeId(0), &round(), Discipline::RateControl));
    open(&mut b.nic, flow(0), 1, Duration::from_us(100));
    for _ in 0..4 {
        b.at(Time::ZERO, Input::Post(flow(0), 1000));
    }
    b.run();
    let inj: Vec<Time> = b.data().iter().map(|x| x.0).collect();
    assert_eq!(inj.len(), 4);
    // One doorbell released per 100 µs IDT: by time T at most 1 + T / 100 µs sent.
    for k in 0..4u64 {
        let by = Time::ZERO + Duration::from_us(100 * k + 99);
        assert!(
            inj.iter().filter(|&&x| x <= by).count() as u64 <= k + 1,
            "{inj:?}"
        );
    }
    assert!(inj[3] < t(350_000), "{inj:?}");
    // Without rate control the four go back to back.
    let mut f = Bench::new(Pvia::new(NodeId(0), &round(), Discipline::Fcfs));
    open(&mut f.nic, flow(0), 1, Duration::from_us(100));
    for _ in 0..4 {
        f.at(Time::ZERO, Input::Post(flow(0), 1000));
    }
    f.run();
    assert!(f.data()[3].0 < t(100_000));
}

#[test]
fn a_received_message_goes_up_with_its_status_and_frees_nrdma() {
    for discipline in [Discipline::Fcfs, Discipline::VirtualClock] {
        let mut b = Bench::new(Pvia::new(NodeId(0), &round(), discipline));
        let mut p = data(1, flow(5), 0, 1000, true);
        if let crate::myrinet::packet::Body::Data(d) = &mut p.body {
            d.negotiated = Some(Duration::from_us(50));
        }
        b.at(t(2_000), Input::Arrive(p));
        b.run();
        let ups: Vec<(Time, u64)> = b
            .log
            .iter()
            .filter_map(|(t, o)| match o {
                Output::ToHost {
                    bytes, last: true, ..
                } => Some((*t, *bytes)),
                _ => None,
            })
            .collect();
        // Visible at 2 (the loop reaches NRDMA at 3, check to 4); recv 2 (+1 insertion
        // for QoSVIA) → data DMA 1 + 10; status programmed 1, written 2.
        let extra = u64::from(discipline == Discipline::VirtualClock) * 1_000;
        let data_done = 6_000 + extra + 11_000;
        // The data DMA is noticed at the next HDMA visit (loop period 4 µs from
        // the end of the receive handler at NRDMA).
        assert_eq!(ups.len(), 1, "{discipline:?}");
        assert_eq!(ups[0].1, 1000);
        assert!(ups[0].0 > t(data_done + 3_000), "{discipline:?} {ups:?}");
        assert_eq!(
            b.count(|o| matches!(o, Output::ReceiveBufferFreed)),
            1,
            "{discipline:?}"
        );
    }
    // SVIA fetches the receive descriptor first (Table 1).
    let mut b = Bench::new(Svia::new(NodeId(0), &round()));
    b.at(t(0), Input::Arrive(data(1, flow(5), 0, 1000, true)));
    b.run();
    let s = b.nic.stage_times().unwrap();
    // Loop check at NRDMA (visited at 1, check to 2) → recv 2 → 4; descriptor DMA 2 → 6.
    assert_eq!(s.mean_us(Stage::RecvDescProg), Some(4.0));
    assert_eq!(s.mean_us(Stage::RecvDescDown), Some(6.0));
    assert_eq!(b.count(|o| matches!(o, Output::ReceiveBufferFreed)), 1);
}
