//! The receive side's memory is bounded by configuration, not by what arrives: caps on
//! flows (in all and per peer) and on bytes held, and idle receive state reclaimed — with
//! a sending flow that was idle starting a new connection, so a reclaimed flow delivers
//! again without an error. Deterministic: in-memory network, a clock the test advances.

use std::sync::Arc;

use qos_core::sched::rate::RateControl;
use qos_core::units::{Duration, Time};

use super::memnet::MemNet;
use crate::dataplane::engine::{Completion, Engine, EngineConfig, FlowKey, Payload};
use crate::transport::link::Link;
use crate::transport::wire::{ConnIds, FlowTag, Repr};

const A: &str = "10.0.0.1:7500";
const B: &str = "10.0.0.2:7500";
const C: &str = "10.0.0.3:7500";

fn cfg() -> EngineConfig {
    EngineConfig {
        payload: 1000,
        window: 16,
        max_flows: 50,
        max_flows_per_peer: 30,
        max_held_bytes: 40_000,
        idle_flow: Duration::from_secs(60),
        ..EngineConfig::default()
    }
}

/// A data packet of flow (src_port → 2) on connection `conn`, sequence `seq`, one
/// 1000-byte fragment of a `msg_len`-byte message at `offset`.
fn data(src_port: u16, conn: u32, seq: u32, msg_len: u32, offset: u32) -> Vec<u8> {
    let payload = vec![7u8; 1000];
    let r = Repr::Data {
        tag: FlowTag {
            src_port,
            dst_port: 2,
            priority: 0,
        },
        ids: ConnIds { conn, rid: 0 },
        seq,
        msg_seq: 0,
        msg_len,
        offset,
        payload: &payload,
    };
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut buf).unwrap();
    buf
}

#[test]
fn flows_are_capped_in_all_and_per_peer() {
    let net = MemNet::new(Duration::from_us(10));
    let mut b = Engine::new(cfg(), net.link(B), RateControl::new());
    b.open_port(2).unwrap();
    let (a, c, me) = (A.parse().unwrap(), C.parse().unwrap(), B.parse().unwrap());
    // 40 flows from A (30 allowed), then 40 from C (20 more allowed: 50 in all).
    for (peer, base) in [(a, 100u16), (c, 200u16)] {
        for i in 0..40 {
            net.inject(peer, me, data(base + i, 1, 1, 3000, 1000));
        }
    }
    net.set_now(Time::ZERO + Duration::from_ms(1));
    b.poll(Time::ZERO + Duration::from_ms(1)).unwrap();
    assert_eq!(b.receive_state().0, 50);
    assert_eq!(b.stats.flow_cap, 30);
}

#[test]
fn bytes_held_are_capped_and_idle_flows_are_reclaimed() {
    let net = MemNet::new(Duration::from_us(10));
    // 1,040-byte datagrams are held in buffers of their own size: 9 fit in 10,000 bytes.
    let small = EngineConfig {
        max_held_bytes: 10_000,
        ..cfg()
    };
    let mut b = Engine::new(small, net.link(B), RateControl::new());
    b.open_port(2).unwrap();
    let (a, me) = (A.parse().unwrap(), B.parse().unwrap());
    // Out of order (sequence 1, 2, … of a message whose start never comes): held.
    for seq in 1..=15 {
        net.inject(a, me, data(5, 1, seq, 16_000, seq * 1000));
    }
    let t = Time::ZERO + Duration::from_ms(1);
    net.set_now(t);
    b.poll(t).unwrap();
    let (flows, held) = b.receive_state();
    assert_eq!(flows, 1);
    assert_eq!(held, 9 * 1040, "bytes held");
    assert_eq!(b.stats.over_budget, 6, "{:?}", b.stats);
    // Silence past the idle time: the state is reclaimed, every byte freed.
    let later = t + Duration::from_secs(62);
    net.set_now(later);
    b.poll(later).unwrap();
    assert_eq!(b.receive_state(), (0, 0));
    assert_eq!(b.stats.reclaimed, 1);
}

#[test]
fn a_flow_idle_past_the_reclaim_time_delivers_again_without_an_error() {
    let net = MemNet::new(Duration::from_us(10));
    let mut a = Engine::new(cfg(), net.link(A), RateControl::new());
    let mut b = Engine::new(cfg(), net.link(B), RateControl::new());
    a.open_port(1).unwrap();
    b.open_port(2).unwrap();
    let key = FlowKey {
        peer: B.parse().unwrap(),
        tag: FlowTag {
            src_port: 1,
            dst_port: 2,
            priority: 0,
        },
    };
    let mut now = Time::ZERO;
    let run = |a: &mut Engine<_, _>, b: &mut Engine<_, _>, now: &mut Time, cookie: u64| {
        a.send(*now, key, Arc::new(vec![1u8; 2500]) as Payload, cookie)
            .unwrap();
        b.post_recv(2, cookie, Box::new(vec![0u8; 4000])).unwrap();
        let (mut sent, mut got) = (false, false);
        for _ in 0..10_000 {
            net.set_now(*now);
            a.poll(*now).unwrap();
            b.poll(*now).unwrap();
            while let Some(c) = a.poll_completion() {
                match c {
                    Completion::Sent { .. } => sent = true,
                    other => panic!("{other:?}"),
                }
            }
            while let Some(c) = b.poll_completion() {
                got |= matches!(c, Completion::Received { .. });
            }
            if sent && got {
                return;
            }
            *now += Duration::from_us(100);
        }
        panic!(
            "message {cookie} not delivered: {:?} {:?}",
            a.stats, b.stats
        );
    };
    run(&mut a, &mut b, &mut now, 1);
    now += Duration::from_secs(61);
    net.set_now(now);
    b.poll(now).unwrap();
    assert_eq!(b.stats.reclaimed, 1);
    run(&mut a, &mut b, &mut now, 2);
    assert_eq!((a.stats.peer_restarts, a.stats.messages_failed), (0, 0));
    let _ = a.link().local_addr();
}
