//! The engine under every scheduler kind (per-node scheduler choice): each
//! flow reaches the scheduler with what its kind needs — VirtualClock's tick from the
//! reservation, GM's connection (the peer) and sub-port (source port, priority) — and
//! with a link rate the engine sends no faster than the link, so a backlog waits in the
//! scheduler. Deterministic: an in-memory network and a clock the test advances.

use std::sync::Arc;

use qos_core::sched::{AnyScheduler, SchedulerKind};
use qos_core::units::{Bandwidth, Duration, Time};

use super::memnet::{Kind, MemLink, MemNet};
use crate::dataplane::engine::{vtick_for, wire_bytes, Engine, EngineConfig, FlowKey, Payload};
use crate::transport::reliable::RetxConfig;
use crate::transport::wire::{FlowTag, Repr};

type Eng = Engine<MemLink, AnyScheduler>;

const A: &str = "10.0.0.1:7500";
const B: &str = "10.0.0.2:7500";
const C: &str = "10.0.0.3:7500";
const D: &str = "10.0.0.4:7500";

/// A sender at A. Nobody acknowledges: the retransmission timer is set beyond every
/// test's span, so each packet goes once.
fn engine(net: &MemNet, kind: SchedulerKind, link_rate: Option<Bandwidth>) -> Eng {
    let cfg = EngineConfig {
        payload: 1000,
        window: 64,
        link_rate,
        retx: RetxConfig {
            rto: Duration::from_secs(1),
            max_rto: Duration::from_secs(2),
            ..RetxConfig::default()
        },
        ..EngineConfig::default()
    };
    Engine::new(cfg, net.link(A), AnyScheduler::new(kind))
}

fn key(peer: &str, src_port: u16, dst_port: u16) -> FlowKey {
    FlowKey {
        peer: peer.parse().unwrap(),
        tag: FlowTag {
            src_port,
            dst_port,
            priority: 0,
        },
    }
}

/// (time, destination address, destination port) of every data packet A sent.
fn data_from_a(net: &MemNet) -> Vec<(Time, String, u16)> {
    let a = A.parse().unwrap();
    net.log()
        .into_iter()
        .filter(|s| s.from == a && matches!(s.kind, Kind::Data { .. }))
        .map(|s| {
            let port = match Repr::parse_bytes(&s.bytes) {
                Ok(Repr::Data { tag, .. }) => tag.dst_port,
                other => panic!("not a data packet: {other:?}"),
            };
            (s.at, s.to.to_string(), port)
        })
        .collect()
}

fn post(e: &mut Eng, k: FlowKey, packets: usize) {
    e.send(
        Time::ZERO,
        k,
        Arc::new(vec![7u8; packets * 1000]) as Payload,
        0,
    )
    .unwrap();
}

/// Best-effort first, then two reserved flows (Vtick 3 ms posted before Vtick 1 ms):
/// VirtualClock sends by stamp — 1, 2, then the tie at 3 ms in arrival order (the 3 ms
/// flow came first), 3, 6, 9 — and best-effort only when no stamped packet waits.
/// Without the reservations every flow is best-effort: first come, first served.
#[test]
fn virtual_clock_orders_by_the_ticks_of_the_reservations() {
    let rate = |mb_s: f64| Some(Bandwidth::from_mb_per_sec(mb_s));
    // The tick is one full packet's time at the reserved rate.
    assert_eq!(vtick_for(1000, rate(1.0)), Some(Duration::from_ms(1)));
    assert_eq!(vtick_for(1000, rate(0.25)), Some(Duration::from_ms(4)));
    assert_eq!(vtick_for(1000, None), None);
    assert_eq!(
        vtick_for(1000, rate(0.0)),
        None,
        "a zero reservation is best-effort"
    );
    for reserved in [true, false] {
        let net = MemNet::new(Duration::from_us(100));
        let mut a = engine(&net, SchedulerKind::VirtualClock, None);
        a.open_port(1).unwrap();
        let (be, slow, fast) = (key(B, 1, 2), key(C, 1, 3), key(D, 1, 4));
        if reserved {
            a.set_vtick(slow, Some(Duration::from_ms(3)));
            a.set_vtick(fast, Some(Duration::from_ms(1)));
        }
        post(&mut a, be, 2);
        post(&mut a, slow, 3);
        post(&mut a, fast, 3);
        a.poll(Time::ZERO).unwrap();
        let order: Vec<u16> = data_from_a(&net).iter().map(|p| p.2).collect();
        if reserved {
            assert_eq!(order, [4, 4, 3, 4, 3, 3, 2, 2]);
        } else {
            assert_eq!(order, [2, 2, 3, 3, 3, 4, 4, 4]);
        }
    }
}

/// GM's rotation sees the engine's flows as GM would: one connection per destination
/// node, one sub-port per source port. Two flows to B (ports 1 and 3) and one to C:
/// C's flow gets every other packet while it has any — fairness per destination node —
/// and B's two flows alternate. (With every flow on one connection and sub-port the
/// rotation was first come, first served.)
#[test]
fn gm_rotates_over_destination_nodes_then_source_ports() {
    let net = MemNet::new(Duration::from_us(100));
    let mut a = engine(&net, SchedulerKind::Gm, None);
    for p in [1, 3, 5] {
        a.open_port(p).unwrap();
    }
    post(&mut a, key(B, 1, 10), 4);
    post(&mut a, key(B, 3, 30), 4);
    post(&mut a, key(C, 5, 50), 4);
    a.poll(Time::ZERO).unwrap();
    let order: Vec<u16> = data_from_a(&net).iter().map(|p| p.2).collect();
    assert_eq!(order, [10, 50, 30, 50, 10, 50, 30, 50, 10, 30, 10, 30]);
}

/// With a link rate the engine puts packets on the wire no faster than the link: after
/// the allowance (two full packets ahead), one per packet time, and the packets still
/// waiting stay in the scheduler — where a reserved flow posted later overtakes the
/// best-effort backlog. Without a link rate everything leaves in the first round.
#[test]
fn a_link_rate_paces_the_engine_and_keeps_the_backlog_in_the_scheduler() {
    let rate = Bandwidth::from_bytes_per_sec(1_000_000);
    let packet = Duration::from_us(wire_bytes(1000) as u64);
    for paced in [false, true] {
        let net = MemNet::new(Duration::from_us(100));
        let mut a = engine(&net, SchedulerKind::VirtualClock, paced.then_some(rate));
        a.open_port(1).unwrap();
        let (be, qos) = (key(B, 1, 2), key(C, 1, 3));
        a.set_vtick(qos, Some(Duration::from_ms(5)));
        post(&mut a, be, 20);
        let mut now = Time::ZERO;
        let step = Duration::from_us(10);
        let mut posted = false;
        while now < Time::ZERO + Duration::from_ms(40) {
            net.set_now(now);
            if !posted && now >= Time::ZERO + Duration::from_ms(5) {
                a.send(now, qos, Arc::new(vec![1u8; 1000]) as Payload, 1)
                    .unwrap();
                posted = true;
            }
            a.poll(now).unwrap();
            now += step;
        }
        let sent = data_from_a(&net);
        assert_eq!(sent.len(), 21);
        let qos_at = sent.iter().position(|p| p.2 == 3).unwrap();
        if !paced {
            assert!(sent[..20].iter().all(|p| p.0 == Time::ZERO && p.2 == 2));
            assert_eq!(
                qos_at, 20,
                "the backlog had gone before the reserved packet came"
            );
            continue;
        }
        // Three go at once (the link is then more than two packets ahead), then one per
        // packet time, give or take the 10 µs step.
        assert!(sent[..3].iter().all(|p| p.0 == Time::ZERO));
        for w in sent[2..].windows(2) {
            let gap = w[1].0 - w[0].0;
            assert!(gap + step >= packet && gap <= packet + step, "gap {gap}");
        }
        // Posted at 5 ms, when ~6 best-effort packets had gone: it goes next.
        assert!((5..=8).contains(&qos_at), "reserved packet went {qos_at}th");
        assert!(sent[qos_at].0 - (Time::ZERO + Duration::from_ms(5)) <= packet + step);
        assert!(a.stats.link_paced > 0);
    }
}

/// Switching schedulers keeps what each flow needs: a reserved flow's tick survives a
/// round trip through GM and still puts it ahead of best-effort.
#[test]
fn replacing_the_scheduler_keeps_every_flows_tick() {
    let net = MemNet::new(Duration::from_us(100));
    let mut a = engine(&net, SchedulerKind::VirtualClock, None);
    a.open_port(1).unwrap();
    let (be, qos) = (key(B, 1, 2), key(C, 1, 3));
    a.set_vtick(qos, Some(Duration::from_ms(1)));
    a.replace_scheduler(Time::ZERO, AnyScheduler::new(SchedulerKind::Gm));
    a.replace_scheduler(Time::ZERO, AnyScheduler::new(SchedulerKind::VirtualClock));
    post(&mut a, be, 2);
    post(&mut a, qos, 2);
    a.poll(Time::ZERO).unwrap();
    let order: Vec<u16> = data_from_a(&net).iter().map(|p| p.2).collect();
    assert_eq!(order, [3, 3, 2, 2]);
}
