//! Tests of the sending and receiving state machines.

use qos_core::units::{Duration, Time};

use super::*;
use crate::transport::wire::ConnIds;

fn t(ms: u64) -> Time {
    Time::ZERO + Duration::from_ms(ms)
}

const CONN: u32 = 77;
const RID: u32 = 99;
const IDS: ConnIds = ConnIds {
    conn: CONN,
    rid: RID,
};

fn flow(window: u32) -> SendFlow<u32> {
    SendFlow::new(RetxConfig::default(), window, CONN)
}

/// An ack of everything before `cum`, all of it taken by the port.
fn ack(cum: u32, window: u32, sack: u64) -> AckInfo {
    AckInfo {
        cum,
        window,
        sack,
        delivered: cum,
    }
}

/// Resends `s` has marked, as the engine would take them at `now`.
fn resends(s: &mut SendFlow<u32>, now: Time) -> Vec<(u32, u32)> {
    std::iter::from_fn(|| s.next_resend(now)).collect()
}

#[test]
fn sequence_comparison_wraps() {
    assert!(seq_lt(u32::MAX, 0));
    assert!(seq_lt(5, 6));
    assert!(!seq_lt(6, 6));
}

#[test]
fn sender_stops_at_the_receivers_window_and_resumes_on_update() {
    let mut s = flow(2);
    assert_eq!(s.room(), 2);
    s.on_send(t(0), 0);
    s.on_send(t(0), 1);
    assert!(!s.can_send());
    let mut done = vec![];
    let v = s.on_ack(t(1), IDS, ack(2, 4, 0), |f| done.push(f));
    assert_eq!(v, AckVerdict::Applied);
    assert_eq!(done, vec![0, 1]);
    assert_eq!(s.room(), 2);
}

#[test]
fn lost_packet_is_marked_after_the_timeout_with_backoff_and_its_timer_runs_from_the_resend() {
    let mut s = flow(8);
    s.on_send(t(0), 7);
    assert_eq!(s.due_retransmits(t(19)), Ok(0));
    assert_eq!(s.due_retransmits(t(20)), Ok(1));
    assert_eq!(s.resends_pending(), 1);
    assert_eq!(s.due_retransmits(t(100)), Ok(0), "marked once until resent");
    // The scheduler lets it go only at 30 ms: the doubled timer runs from then.
    assert_eq!(resends(&mut s, t(30)), vec![(0, 7)]);
    assert_eq!(s.resends_pending(), 0);
    assert_eq!(s.due_retransmits(t(69)), Ok(0), "second timeout is doubled");
    assert_eq!(s.due_retransmits(t(70)), Ok(1));
    assert_eq!(s.timeouts, 2);
}

#[test]
fn the_timeout_grows_with_a_long_measured_round_trip_and_never_shrinks_below_the_floor() {
    let cfg = RetxConfig::default();
    let mut s = flow(64);
    // Packets that sit 30 ms in a shaper's queue before their ack comes back.
    for i in 0..20u32 {
        s.on_send(t(i as u64 * 10), i);
        s.on_ack(t(i as u64 * 10 + 30), IDS, ack(i + 1, 64, 0), |_| {});
    }
    assert!(s.rto() > Duration::from_ms(30), "rto {}", s.rto());
    assert!(s.rto() <= cfg.max_rto);
    // So a packet 35 ms old is not resent: it is only as late as the path is slow.
    s.on_send(t(1000), 99);
    assert_eq!(
        s.due_retransmits(t(1035)),
        Ok(0),
        "spurious retransmission at rto {}",
        s.rto()
    );
    // Fast round trips keep the configured timeout.
    let mut f = flow(64);
    for i in 0..20u32 {
        f.on_send(t(i as u64), i);
        f.on_ack(t(i as u64), IDS, ack(i + 1, 64, 0), |_| {});
    }
    assert_eq!(f.rto(), cfg.rto);
}

#[test]
fn sack_hole_is_marked_at_once_and_sacked_packets_are_not() {
    let mut s = flow(16);
    for i in 0..6 {
        s.on_send(t(0), i);
    }
    // Receiver has 0, misses 1, has 2..=5.
    let mut done = vec![];
    s.on_ack(t(1), IDS, ack(1, 20, 0b1111), |f| done.push(f));
    assert_eq!(
        done,
        vec![0],
        "the port took 0; 2..=5 arrived, not yet taken"
    );
    assert_eq!(s.fast_retransmits, 1);
    assert_eq!(resends(&mut s, t(1)), vec![(1, 1)]);
    assert_eq!(s.due_retransmits(t(100)), Ok(1));
    assert_eq!(
        resends(&mut s, t(100)),
        vec![(1, 1)],
        "only the hole is resent"
    );
}

#[test]
fn a_marked_packet_acknowledged_before_its_turn_is_not_resent() {
    let mut s = flow(16);
    for i in 0..3 {
        s.on_send(t(0), i);
    }
    assert_eq!(s.due_retransmits(t(20)), Ok(3));
    assert_eq!(s.resends_pending(), 3);
    // The first arrives after all (a slow path), the third is SACKed, the second
    // comes last.
    s.on_ack(t(21), IDS, ack(1, 16, 0), |_| {});
    assert_eq!(s.resends_pending(), 2);
    s.on_ack(t(21), IDS, ack(1, 16, 0b1), |_| {});
    assert_eq!(s.resends_pending(), 1);
    s.on_ack(t(21), IDS, ack(3, 16, 0), |_| {});
    assert_eq!(s.resends_pending(), 0);
    assert_eq!(resends(&mut s, t(22)), vec![]);
}

#[test]
fn acks_of_another_connection_are_ignored_and_another_receiver_means_it_restarted() {
    let mut s = flow(4);
    s.on_send(t(0), 0);
    s.on_send(t(0), 1);
    let other = ConnIds { conn: 5, rid: RID };
    assert_eq!(
        s.on_ack(t(1), other, ack(1, 4, 0), |_| {}),
        AckVerdict::Stale
    );
    assert_eq!(s.in_flight(), 2);
    // The first ack names the receiver; later ones must come from it.
    assert_eq!(s.ids().rid, 0);
    assert_eq!(
        s.on_ack(t(1), IDS, ack(1, 4, 0), |_| {}),
        AckVerdict::Applied
    );
    assert_eq!(s.ids(), IDS);
    let restarted = ConnIds {
        conn: CONN,
        rid: 1234,
    };
    assert_eq!(
        s.on_ack(t(2), restarted, ack(2, 4, 0), |_| {}),
        AckVerdict::PeerRestarted
    );
    assert_eq!(s.in_flight(), 1, "nothing applied");
    // Acks for data never sent are ignored.
    assert_eq!(
        s.on_ack(t(2), IDS, ack(9, 12, 0), |_| {}),
        AckVerdict::Stale
    );
}

#[test]
fn a_sender_gives_up_when_a_packet_or_its_probes_go_unanswered_too_long() {
    let cfg = RetxConfig::default();
    let mut s = flow(8);
    s.on_send(t(0), 0);
    let mut now = t(0);
    let mut marks = 0;
    let gave_up = loop {
        now += Duration::from_ms(1);
        match s.due_retransmits(now) {
            Ok(n) => marks += n,
            Err(GaveUp) => break now,
        }
        resends(&mut s, now);
        assert!(now < t(20_000), "never gave up");
    };
    assert!(gave_up >= Time::ZERO + cfg.give_up, "gave up at {gave_up}");
    assert!(gave_up <= Time::ZERO + cfg.give_up + cfg.max_rto);
    assert!(marks > 10, "{marks} resends before giving up");
    // A closed window whose probes nobody answers.
    let mut p = flow(1);
    p.on_send(t(0), 0);
    p.on_ack(t(1), IDS, ack(1, 1, 0), |_| {});
    let mut now = t(1);
    let gave_up = loop {
        now += Duration::from_ms(5);
        if p.probe_due(now, true).is_err() {
            break now;
        }
        assert!(now < t(20_000), "never gave up probing");
    };
    assert!(gave_up >= t(1) + cfg.give_up && gave_up <= t(1) + cfg.give_up + cfg.rto * 3);
    // An answered probe starts the count again.
    let mut q = flow(1);
    q.on_send(t(0), 0);
    q.on_ack(t(1), IDS, ack(1, 1, 0), |_| {});
    for k in 0..1000u64 {
        let now = t(1) + Duration::from_ms(25 * k);
        assert_eq!(q.probe_due(now, true).map(|_| ()), Ok(()));
        q.on_ack(now, IDS, ack(1, 1, 0), |_| {});
    }
}

#[test]
fn receiver_tells_current_new_stale_and_unknown_connections_apart() {
    let mut r = RecvConn::new(10, 500);
    let ids = |conn, rid| ConnIds { conn, rid };
    assert_eq!(r.classify(ids(10, 0)), ConnVerdict::Current);
    assert_eq!(r.classify(ids(10, 500)), ConnVerdict::Current);
    assert_eq!(r.classify(ids(10, 501)), ConnVerdict::Refuse);
    assert_eq!(r.classify(ids(11, 0)), ConnVerdict::New);
    assert_eq!(r.classify(ids(11, 9)), ConnVerdict::Refuse);
    r.switch(11, 600);
    assert_eq!(r.classify(ids(11, 600)), ConnVerdict::Current);
    assert_eq!(r.classify(ids(10, 0)), ConnVerdict::Stale);
    assert_eq!(r.classify(ids(10, 500)), ConnVerdict::Stale);
    assert!(RecvConn::may_start(ids(3, 0)));
    assert!(
        !RecvConn::may_start(ids(3, 7)),
        "mid-stream: refuse, do not guess"
    );
    for c in 12..20 {
        r.switch(c, c + 1000);
    }
    assert_eq!(
        r.classify(ids(10, 0)),
        ConnVerdict::New,
        "only the last few are kept"
    );
    assert_eq!(r.classify(ids(18, 0)), ConnVerdict::Stale);
}

#[test]
fn fresh_ids_are_never_zero_and_differ() {
    let a: Vec<u32> = (0..100).map(|_| fresh_id()).collect();
    assert!(a.iter().all(|&x| x != 0));
    let mut b = a.clone();
    b.sort_unstable();
    b.dedup();
    assert!(b.len() >= 99);
}

#[test]
fn receiver_delivers_in_order_and_drops_duplicates() {
    let mut r: RecvFlow<u32> = RecvFlow::new(8);
    assert_eq!(r.on_data(1, 1), Accepted::Stored);
    assert_eq!(r.front(), None);
    assert_eq!(r.on_data(1, 1), Accepted::Duplicate);
    assert_eq!(r.on_data(0, 0), Accepted::Stored);
    assert_eq!(r.on_data(0, 0), Accepted::Duplicate);
    assert_eq!(r.pop(), Some(0));
    assert_eq!(r.pop(), Some(1));
    assert_eq!(r.pop(), None);
}

#[test]
fn a_restarted_receiver_flow_forgets_what_it_held_and_expects_zero() {
    let mut r: RecvFlow<u32> = RecvFlow::new(8);
    r.on_data(0, 0);
    r.on_data(3, 3);
    r.on_data(1, 1);
    let mut gone = vec![];
    r.restart(|p| gone.push(p));
    gone.sort_unstable();
    assert_eq!(gone, vec![0, 1, 3]);
    assert_eq!((r.held(), r.window()), (0, 8));
    assert_eq!(r.on_data(0, 10), Accepted::Stored);
    assert_eq!(r.pop(), Some(10));
}

#[test]
fn slow_receiver_closes_its_window_and_holds_bounded_memory() {
    let mut r: RecvFlow<u32> = RecvFlow::new(4);
    for i in 0..4 {
        assert_eq!(r.on_data(i, i), Accepted::Stored);
    }
    assert_eq!(r.on_data(4, 4), Accepted::OutsideWindow);
    assert_eq!(r.held(), 4);
    let a = r.take_ack().unwrap();
    assert_eq!((a.cum, a.window, a.sack), (4, 4, 0), "window closed at 4");
    r.pop();
    assert_eq!(
        r.take_ack(),
        None,
        "a quarter of the window is not worth an ack"
    );
    r.pop();
    assert_eq!(
        r.take_ack().map(|a| a.window),
        Some(6),
        "half the window taken reopens it"
    );
}

#[test]
fn ack_carries_sack_bits_for_out_of_order_packets() {
    let mut r: RecvFlow<u32> = RecvFlow::new(70);
    r.on_data(2, 2);
    r.on_data(64, 64);
    let a = r.take_ack().unwrap();
    assert_eq!(a.cum, 0);
    assert_eq!(a.sack, (1 << 1) | (1 << 63));
}

#[test]
fn probe_is_sent_only_when_window_closed_and_nothing_in_flight() {
    let mut s = flow(1);
    assert_eq!(s.probe_due(t(0), true), Ok(false));
    s.on_send(t(0), 0);
    s.on_ack(t(1), IDS, ack(1, 1, 0), |_| {});
    assert!(!s.can_send());
    assert_eq!(s.probe_due(t(1), true), Ok(false), "arms the timer");
    assert_eq!(s.probe_due(t(10), true), Ok(false));
    assert_eq!(s.probe_due(t(21), true), Ok(true));
    assert_eq!(s.probe_due(t(22), false), Ok(false));
}

#[test]
fn a_send_completes_when_the_port_has_taken_it_not_when_the_receiver_holds_it() {
    let mut s = flow(8);
    for i in 0..4 {
        s.on_send(t(0), i);
    }
    let mut done = vec![];
    let held = AckInfo {
        cum: 4,
        window: 8,
        sack: 0,
        delivered: 1,
    };
    s.on_ack(t(1), IDS, held, |f| done.push(f));
    assert_eq!(done, vec![0], "only what the port took");
    assert_eq!(s.in_flight(), 3);
    // What the receiver holds is never resent, nor does it count against give-up.
    assert_eq!(s.due_retransmits(t(5_000)), Ok(0));
    assert_eq!(s.due_retransmits(t(50_000)), Ok(0));
    // Nothing awaits an ack: the sender probes, so a lost "taken" ack cannot stall it.
    assert_eq!(s.probe_due(t(50_000), false), Ok(false));
    assert_eq!(s.probe_due(t(50_030), false), Ok(true));
    // A hostile "delivered" beyond the cumulative ack is held to it.
    let mut more = AckInfo {
        cum: 3,
        window: 8,
        sack: 0,
        delivered: 9,
    };
    s.on_ack(t(50_031), IDS, more, |f| done.push(f));
    assert_eq!(done, vec![0, 1, 2]);
    more.cum = 4;
    more.delivered = 4;
    s.on_ack(t(50_032), IDS, more, |f| done.push(f));
    assert_eq!(done, vec![0, 1, 2, 3]);
    assert_eq!(s.in_flight(), 0);
}

#[test]
fn the_receiver_acknowledges_what_its_port_took_apart_from_what_it_holds() {
    let mut r: RecvFlow<u32> = RecvFlow::new(8);
    for i in 0..3 {
        r.on_data(i, i);
    }
    let a = r.take_ack().unwrap();
    assert_eq!((a.cum, a.delivered, a.window), (3, 0, 8));
    r.pop();
    assert_eq!(r.take_ack(), None);
    r.ack_soon();
    let a = r.take_ack().unwrap();
    assert_eq!((a.cum, a.delivered, a.window), (3, 1, 9));
}
