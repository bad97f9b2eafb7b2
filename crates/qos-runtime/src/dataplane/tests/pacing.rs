//! Every packet on the wire is paced by its flow's IDT: first copies,
//! retransmissions (SACK holes and time-outs) and the packets that go when a closed
//! window opens again all leave through the scheduler, at most one per IDT. Deterministic:
//! an in-memory network and a clock the test advances.

use std::sync::Arc;

use qos_core::sched::rate::RateControl;
use qos_core::units::{Duration, Time};

use super::memnet::{Kind, MemLink, MemNet, Sent};
use crate::dataplane::engine::{Completion, Engine, EngineConfig, FlowKey, Payload};
use crate::transport::wire::FlowTag;

type Eng = Engine<MemLink, RateControl>;

const A: &str = "10.0.0.1:7500";
const B: &str = "10.0.0.2:7500";

fn engine(net: &MemNet, addr: &str, payload: usize, window: u32) -> Eng {
    let cfg = EngineConfig {
        payload,
        window,
        ..EngineConfig::default()
    };
    Engine::new(cfg, net.link(addr), RateControl::new())
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

/// Data packets A put on the wire, in order.
fn data_from_a(net: &MemNet) -> Vec<Sent> {
    let a = A.parse().unwrap();
    net.log()
        .into_iter()
        .filter(|s| s.from == a && matches!(s.kind, Kind::Data { .. }))
        .collect()
}

/// Asserts that no two data packets left closer than `idt - step` (the engine runs every
/// `step`, so a packet due between two runs leaves at the next one) and that no window
/// of `k` IDTs holds more than `k + 1` packets.
fn assert_paced(sent: &[Sent], idt: Duration, step: Duration) {
    for w in sent.windows(2) {
        let gap = w[1].at.saturating_since(w[0].at);
        assert!(
            gap + step >= idt,
            "two packets {gap} apart (IDT {idt}): {:?} then {:?}",
            w[0],
            w[1]
        );
    }
    for k in [4u64, 16, 64] {
        let span = Duration::from_ps(idt.as_ps() * k);
        let mut j = 0;
        for i in 0..sent.len() {
            while sent[j].at + span <= sent[i].at {
                j += 1;
            }
            assert!(
                (i - j + 1) as u64 <= k + 1,
                "{} packets within {k} IDTs ending at {}",
                i - j + 1,
                sent[i].at
            );
        }
    }
}

/// Runs both engines every `step` until `done` says so; returns the completions seen.
fn run(
    net: &MemNet,
    a: &mut Eng,
    b: &mut Eng,
    now: &mut Time,
    step: Duration,
    limit: usize,
    mut done: impl FnMut(&mut Eng, &mut Eng, Time) -> bool,
) {
    for _ in 0..limit {
        net.set_now(*now);
        a.poll(*now).unwrap();
        b.poll(*now).unwrap();
        if done(a, b, *now) {
            return;
        }
        *now += step;
    }
    panic!(
        "not done after {limit} steps: a {:?}, b {:?}",
        a.stats, b.stats
    );
}

#[test]
fn retransmissions_after_losses_and_time_outs_are_paced_by_the_flows_idt() {
    let net = MemNet::new(Duration::from_us(300));
    let (mut a, mut b) = (engine(&net, A, 1000, 32), engine(&net, B, 1000, 32));
    a.open_port(1).unwrap();
    b.open_port(2).unwrap();
    let idt = Duration::from_us(500);
    a.set_idt(key(), idt);
    // First copies of every seventh packet are lost (SACK holes: resent at once, before
    // the fix); so is a run of twelve (whose tail has nothing SACKed behind it: resent
    // on time-out, all together, before the fix).
    net.set_drop(|s| match s.kind {
        Kind::Data { seq, .. } => s.copy == 0 && (seq % 7 == 3 || (100..112).contains(&seq)),
        _ => false,
    });
    let n = 30u64;
    let mut now = Time::ZERO;
    for i in 0..n {
        a.send(now, key(), Arc::new(vec![i as u8; 8000]) as Payload, i)
            .unwrap();
        b.post_recv(2, i, Box::new(vec![0u8; 8000])).unwrap();
    }
    let (mut got, mut sent) = (0, 0);
    run(
        &net,
        &mut a,
        &mut b,
        &mut now,
        Duration::from_us(20),
        200_000,
        |a, b, _| {
            while let Some(c) = b.poll_completion() {
                got += matches!(c, Completion::Received { .. }) as u64;
            }
            while let Some(c) = a.poll_completion() {
                sent += matches!(c, Completion::Sent { .. }) as u64;
            }
            got == n && sent == n
        },
    );
    let data = data_from_a(&net);
    let resent = data.iter().filter(|s| s.copy > 0).count();
    assert!(resent >= 40, "losses were repaired by resending: {resent}");
    assert_eq!(
        data.len() - resent,
        240,
        "each packet sent once, then resent"
    );
    assert_paced(&data, idt, Duration::from_us(20));
}

#[test]
fn packets_waiting_for_a_closed_window_leave_paced_when_it_opens() {
    let net = MemNet::new(Duration::from_us(200));
    let (mut a, mut b) = (engine(&net, A, 1000, 8), engine(&net, B, 1000, 8));
    a.open_port(1).unwrap();
    b.open_port(2).unwrap();
    let idt = Duration::from_us(400);
    a.set_idt(key(), idt);
    let n = 10u64;
    let mut now = Time::ZERO;
    for i in 0..n {
        a.send(now, key(), Arc::new(vec![i as u8; 4000]) as Payload, i)
            .unwrap();
    }
    // No receive buffer for 50 ms: the receiver's window (8 packets) closes.
    let step = Duration::from_us(10);
    run(&net, &mut a, &mut b, &mut now, step, 10_000, |_, _, t| {
        t >= Time::ZERO + Duration::from_ms(50)
    });
    assert_eq!(data_from_a(&net).len(), 8, "the window held the sender");
    for i in 0..n {
        b.post_recv(2, i, Box::new(vec![0u8; 4000])).unwrap();
    }
    b.kick_port(2);
    let mut got = 0;
    run(&net, &mut a, &mut b, &mut now, step, 100_000, |_, b, _| {
        while let Some(c) = b.poll_completion() {
            got += matches!(c, Completion::Received { .. }) as u64;
        }
        got == n
    });
    let data = data_from_a(&net);
    assert_eq!(data.len(), 40);
    assert_paced(&data, idt, step);
}
