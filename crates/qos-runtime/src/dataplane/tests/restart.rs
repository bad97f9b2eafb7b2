//! A restarted agent, on either end of a flow, is recognised and the flow delivers again;
//! a peer that is gone is given up on with an error for every
//! message, not resent to forever. Deterministic: an in-memory network, a clock the test
//! advances, and "restart" as a new engine at the same address (everything it held lost).

use std::collections::BTreeSet;
use std::sync::Arc;

use qos_core::sched::rate::RateControl;
use qos_core::units::{Duration, Time};

use super::memnet::{Kind, MemLink, MemNet};
use crate::dataplane::engine::{Completion, Engine, EngineConfig, FlowKey, Payload, SendFailure};
use crate::transport::wire::FlowTag;

type Eng = Engine<MemLink, RateControl>;

const A: &str = "10.0.0.1:7500";
const B: &str = "10.0.0.2:7500";
const STEP: Duration = Duration::from_us(100);

fn engine(net: &MemNet, addr: &str) -> Eng {
    let cfg = EngineConfig {
        payload: 1000,
        window: 16,
        ..EngineConfig::default()
    };
    let mut e = Engine::new(cfg, net.link(addr), RateControl::new());
    e.open_port(if addr == A { 1 } else { 2 }).unwrap();
    e
}

fn key() -> FlowKey {
    FlowKey {
        peer: B.parse().unwrap(),
        tag: FlowTag {
            src_port: 1,
            dst_port: 2,
            priority: 0,
        },
    }
}

fn message(cookie: u64) -> Payload {
    Arc::new(vec![cookie as u8; 3500]) as Payload
}

/// What the two ends have reported.
#[derive(Default)]
struct Seen {
    sent: BTreeSet<u64>,
    failed: Vec<(u64, SendFailure)>,
    /// Received messages, by their first byte (the sender's cookie).
    received: Vec<u64>,
}

impl Seen {
    fn collect(&mut self, a: &mut Eng, b: &mut Eng) {
        while let Some(c) = a.poll_completion() {
            match c {
                Completion::Sent { cookie, .. } => assert!(self.sent.insert(cookie)),
                Completion::Failed { cookie, why, .. } => self.failed.push((cookie, why)),
                Completion::Received { .. } => panic!("A receives nothing"),
            }
        }
        while let Some(c) = b.poll_completion() {
            if let Completion::Received { target, len, .. } = c {
                assert_eq!(len, 3500);
                self.received
                    .push(u64::from(super::contents(&*target, 1)[0]));
            }
        }
    }
    fn completed(&self) -> usize {
        self.sent.len() + self.failed.len()
    }
}

/// Two engines on an in-memory network and what they reported.
struct World {
    net: MemNet,
    now: Time,
    a: Eng,
    b: Eng,
    /// Whether B runs (a host that is gone does not).
    b_alive: bool,
    seen: Seen,
}

impl World {
    fn new() -> World {
        let net = MemNet::new(Duration::from_us(300));
        let (a, b) = (engine(&net, A), engine(&net, B));
        World {
            net,
            now: Time::ZERO,
            a,
            b,
            b_alive: true,
            seen: Seen::default(),
        }
    }

    fn send(&mut self, cookies: std::ops::Range<u64>) {
        for c in cookies {
            self.a.send(self.now, key(), message(c), c).unwrap();
        }
    }

    /// A new engine at `addr`: everything the old one held (and what was queued for it
    /// on the network) is lost.
    fn restart(&mut self, addr: &str) {
        self.net.flush(addr);
        let e = engine(&self.net, addr);
        if addr == A {
            self.a = e;
        } else {
            self.b = e;
        }
    }

    /// Runs every `STEP` until `done`, for at most `limit`.
    fn run(&mut self, limit: Duration, mut done: impl FnMut(&Seen) -> bool) {
        let end = self.now + limit;
        while self.now < end {
            self.net.set_now(self.now);
            self.a.poll(self.now).unwrap();
            if self.b_alive {
                self.b.poll(self.now).unwrap();
            }
            self.seen.collect(&mut self.a, &mut self.b);
            if done(&self.seen) {
                return;
            }
            self.now += STEP;
        }
        let s = &self.seen;
        panic!(
            "not done within {limit}: sent {:?}, failed {:?}, received {:?}; a {:?}, b {:?}",
            s.sent, s.failed, s.received, self.a.stats, self.b.stats
        );
    }

    /// Runs for `d` whatever happens.
    fn idle(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.run(STEP * 2, |_| true);
            self.now += STEP;
        }
    }
}

fn post(b: &mut Eng, n: u64) {
    for i in 0..n {
        b.post_recv(2, i, Box::new(vec![0u8; 4000])).unwrap();
    }
    b.kick_port(2);
}

#[test]
fn a_restarted_sender_is_heard_again_on_the_same_flow_and_old_stragglers_are_dropped() {
    let mut w = World::new();
    post(&mut w.b, 20);
    w.send(0..5);
    let limit = Duration::from_secs(1);
    w.run(limit, |s| s.sent.len() == 5 && s.received.len() == 5);
    // A restarts: a new engine at the same address, same port, same flow.
    w.restart(A);
    w.send(10..15);
    w.run(limit, |s| s.sent.len() == 10 && s.received.len() == 10);
    assert_eq!(w.seen.received, vec![0, 1, 2, 3, 4, 10, 11, 12, 13, 14]);
    assert!(w.seen.failed.is_empty());
    // A packet of the first connection arriving late is dropped, not delivered.
    let old = w
        .net
        .log()
        .into_iter()
        .find(|s| matches!(s.kind, Kind::Data { seq: 0, .. }))
        .expect("the first connection's first packet");
    w.net.inject(old.from, old.to, old.bytes.to_vec());
    let stale = w.b.stats.stale;
    w.idle(Duration::from_ms(5));
    assert_eq!(w.b.stats.stale, stale + 1);
    assert_eq!(w.seen.received.len(), 10);
}

#[test]
fn a_restarted_receiver_makes_the_sender_start_anew_and_report_what_may_be_lost() {
    let mut w = World::new();
    post(&mut w.b, 3);
    // Ten messages; the receiving port takes three, then its agent's window (16
    // packets, 4 a message) fills with the next four, and it restarts, losing them.
    w.send(0..10);
    let limit = Duration::from_secs(2);
    w.run(limit, |s| s.received.len() == 3 && s.sent.len() == 3);
    w.idle(Duration::from_ms(20));
    w.restart(B);
    post(&mut w.b, 20);
    w.send(10..15);
    w.run(limit, |s| s.completed() == 15);
    let seen = &w.seen;
    // Every message has exactly one completion; what may have been lost says so.
    let failed: BTreeSet<u64> = seen.failed.iter().map(|f| f.0).collect();
    assert_eq!(failed.len(), seen.failed.len());
    assert!(failed.is_disjoint(&seen.sent));
    assert!(
        seen.failed
            .iter()
            .all(|f| f.1 == SendFailure::PeerRestarted),
        "{:?}",
        seen.failed
    );
    assert!(
        !failed.is_empty(),
        "messages in flight at the restart failed"
    );
    assert!(
        failed.iter().all(|&c| (3..10).contains(&c)),
        "only messages begun before the restart: {failed:?}"
    );
    // What was reported sent was delivered (by the old receiver or the new one), and
    // everything after the restart arrived, in order.
    let got: BTreeSet<u64> = seen.received.iter().copied().collect();
    assert!(seen.sent.is_subset(&got), "{:?} vs {:?}", seen.sent, got);
    let after: Vec<u64> = seen.received.iter().copied().filter(|&c| c >= 10).collect();
    assert_eq!(after, vec![10, 11, 12, 13, 14]);
    assert!(w.a.stats.peer_restarts >= 1 && w.b.stats.resets_sent >= 1);
}

#[test]
fn a_sender_whose_peer_is_gone_gives_up_with_an_error_for_every_message() {
    let mut w = World::new();
    w.send(0..3);
    // Nobody answers.
    w.b_alive = false;
    let give_up = EngineConfig::default().retx.give_up;
    w.run(give_up * 2, |s| s.completed() == 3);
    assert!(w.now >= Time::ZERO + give_up, "gave up at {}", w.now);
    assert_eq!(
        w.seen.failed,
        (0..3)
            .map(|c| (c, SendFailure::PeerUnreachable))
            .collect::<Vec<_>>()
    );
    let data = w
        .net
        .log()
        .iter()
        .filter(|s| matches!(s.kind, Kind::Data { .. }))
        .count();
    assert!(data < 300, "{data} packets: resends back off");
    // The flow works again once the peer is back (a fresh one: what was queued for the
    // old one is gone with it).
    w.restart(B);
    w.b_alive = true;
    post(&mut w.b, 1);
    w.send(7..8);
    w.run(give_up, |s| s.sent.contains(&7));
    assert_eq!(w.seen.received, vec![7]);
}
