//! Engine tests with simulated time (the engine reads no clock): over real UDP on
//! loopback here, over an in-memory network in [`pacing`] and [`restart`].

mod limits;
mod memnet;
mod pacing;
mod restart;
mod schedulers;

use std::net::SocketAddr;
use std::sync::Arc;

use qos_core::sched::rate::RateControl;
use qos_core::sched::Scheduler;
use qos_core::units::{Duration, Time};

use super::engine::{Completion, Engine, EngineConfig, FlowKey, Payload, RecvTarget};
use crate::transport::link::{AnyLink, Faults, Link};
use crate::transport::wire::FlowTag;

type Eng = Engine<AnyLink, RateControl>;

fn engine(faults: Faults, payload: usize, window: u32) -> Eng {
    engine_with(faults, payload, window, RateControl::new())
}

fn engine_with<S: Scheduler>(
    faults: Faults,
    payload: usize,
    window: u32,
    sched: S,
) -> Engine<AnyLink, S> {
    let link = AnyLink::udp("127.0.0.1:0".parse().unwrap(), 4 << 20, faults).unwrap();
    let cfg = EngineConfig {
        payload,
        window,
        ..EngineConfig::default()
    };
    Engine::new(cfg, link, sched)
}

/// The flow from `src_port` to port `dst_port` at `peer`, priority 0.
fn flow(peer: SocketAddr, src_port: u16, dst_port: u16) -> FlowKey {
    FlowKey {
        peer,
        tag: FlowTag {
            src_port,
            dst_port,
            priority: 0,
        },
    }
}

/// The first `len` bytes of a receive buffer.
fn contents(target: &dyn RecvTarget, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    target.read(0, &mut v);
    v
}

fn message(i: u32, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize * 31 + j * 7) as u8).collect()
}

/// Runs both engines with time advancing by `step` until `done` or `limit` steps.
fn pump(
    a: &mut Eng,
    b: &mut Eng,
    now: &mut Time,
    step: Duration,
    limit: usize,
    mut done: impl FnMut(&mut Eng, &mut Eng) -> bool,
) {
    for _ in 0..limit {
        a.poll(*now).unwrap();
        b.poll(*now).unwrap();
        if done(a, b) {
            return;
        }
        *now += step;
    }
    panic!(
        "did not finish in {limit} steps (a: {:?}, b: {:?})",
        a.stats, b.stats
    );
}

#[test]
fn no_message_is_lost_duplicated_or_reordered_under_drop_duplicate_and_reorder() {
    let faults = Faults {
        drop: 0.1,
        duplicate: 0.1,
        reorder: 0.15,
        seed: 11,
    };
    let mut a = engine(faults, 1000, 16);
    let mut b = engine(Faults { seed: 12, ..faults }, 1000, 16);
    a.open_port(1).unwrap();
    b.open_port(2).unwrap();
    let key = flow(b.link().local_addr().unwrap(), 1, 2);
    let n = 120u32;
    let mut now = Time::ZERO;
    for i in 0..n {
        let len = (i as usize * 997) % 7000;
        a.send(now, key, Arc::new(message(i, len)) as Payload, u64::from(i))
            .unwrap();
        b.post_recv(2, u64::from(i), Box::new(vec![0u8; 8000]))
            .unwrap();
    }
    let mut got = Vec::new();
    let mut sent = Vec::new();
    pump(
        &mut a,
        &mut b,
        &mut now,
        Duration::from_ms(1),
        20_000,
        |a, b| {
            while let Some(c) = b.poll_completion() {
                if let Completion::Received {
                    target,
                    len,
                    src_port,
                    ..
                } = c
                {
                    assert_eq!(src_port, 1);
                    got.push(contents(&*target, len as usize));
                }
            }
            while let Some(c) = a.poll_completion() {
                if let Completion::Sent { cookie, .. } = c {
                    sent.push(cookie);
                }
            }
            got.len() == n as usize && sent.len() == n as usize
        },
    );
    for (i, m) in got.iter().enumerate() {
        let len = (i * 997) % 7000;
        assert_eq!(
            m,
            &message(i as u32, len),
            "message {i} intact and in its place"
        );
    }
    sent.sort_unstable();
    assert_eq!(
        sent,
        (0..u64::from(n)).collect::<Vec<_>>(),
        "every send completes once"
    );
    assert!(
        a.stats.retransmits > 0 && b.stats.duplicates > 0,
        "faults were exercised: {:?} {:?}",
        a.stats,
        b.stats
    );
}

#[test]
fn slow_receiver_costs_no_loss_and_bounded_memory() {
    let mut a = engine(Faults::default(), 500, 8);
    let mut b = engine(Faults::default(), 500, 8);
    a.open_port(1).unwrap();
    b.open_port(2).unwrap();
    let key = flow(b.link().local_addr().unwrap(), 1, 2);
    let mut now = Time::ZERO;
    for i in 0..40u32 {
        a.send(
            now,
            key,
            Arc::new(message(i, 2000)) as Payload,
            u64::from(i),
        )
        .unwrap();
    }
    // No receive buffers posted: the flow's window closes after 8 packets.
    for _ in 0..200 {
        a.poll(now).unwrap();
        b.poll(now).unwrap();
        now += Duration::from_ms(1);
    }
    assert_eq!(b.stats.outside_window, 0, "sender respected the window");
    assert!(
        b.stats.packets_received <= 8 + 20,
        "only window probes beyond the window: {:?}",
        b.stats
    );
    // The receiver now takes one message at a time.
    let mut got = 0;
    for i in 0..40u64 {
        b.post_recv(2, i, Box::new(vec![0u8; 2000])).unwrap();
        b.kick_port(2);
        pump(
            &mut a,
            &mut b,
            &mut now,
            Duration::from_ms(1),
            2_000,
            |_, b| {
                while let Some(c) = b.poll_completion() {
                    if let Completion::Received { target, .. } = c {
                        assert_eq!(contents(&*target, 2000), message(got, 2000));
                        got += 1;
                    }
                }
                got == i as u32 + 1
            },
        );
    }
    assert_eq!(b.stats.outside_window, 0);
}

#[test]
fn two_flows_share_in_the_inverse_ratio_of_their_idts() {
    let mut a = engine(Faults::default(), 1000, 64);
    let mut b = engine(Faults::default(), 1000, 64);
    a.open_port(1).unwrap();
    b.open_port(2).unwrap();
    b.open_port(3).unwrap();
    let peer = b.link().local_addr().unwrap();
    let k1 = FlowKey {
        peer,
        tag: FlowTag {
            src_port: 1,
            dst_port: 2,
            priority: 0,
        },
    };
    let k2 = FlowKey {
        peer,
        tag: FlowTag {
            src_port: 1,
            dst_port: 3,
            priority: 0,
        },
    };
    // 3 : 7 as thesis Fig 5.5: IDTs 10T/3 and 10T/7 with T = 10 us.
    a.set_idt(k1, Duration::from_ns(100_000 / 3));
    a.set_idt(k2, Duration::from_ns(100_000 / 7));
    let mut now = Time::ZERO;
    for i in 0..400u64 {
        a.send(now, k1, Arc::new(vec![1u8; 64_000]) as Payload, i)
            .unwrap();
        a.send(now, k2, Arc::new(vec![2u8; 64_000]) as Payload, i)
            .unwrap();
        b.post_recv(2, i, Box::new(vec![0u8; 64_000])).unwrap();
        b.post_recv(3, i, Box::new(vec![0u8; 64_000])).unwrap();
    }
    let (mut n2, mut n3) = (0u64, 0u64);
    // Run 200 ms of simulated time in 50 us steps; count bytes received per port.
    for _ in 0..4000 {
        a.poll(now).unwrap();
        b.poll(now).unwrap();
        while let Some(c) = b.poll_completion() {
            if let Completion::Received { port, len, .. } = c {
                if port == 2 {
                    n2 += u64::from(len);
                } else {
                    n3 += u64::from(len);
                }
            }
        }
        now += Duration::from_us(50);
    }
    let share = n2 as f64 / (n2 + n3) as f64;
    assert!(
        (share - 0.3).abs() / 0.3 < 0.02,
        "flow 1 got {share:.4} of the bytes, wanted 0.3"
    );
}

#[test]
fn packets_to_a_port_nobody_opened_are_discarded_not_stalling_the_sender() {
    let mut a = engine(Faults::default(), 1000, 4);
    let mut b = engine(Faults::default(), 1000, 4);
    a.open_port(1).unwrap();
    let key = flow(b.link().local_addr().unwrap(), 1, 9);
    let mut now = Time::ZERO;
    a.send(now, key, Arc::new(vec![0u8; 10_000]) as Payload, 5)
        .unwrap();
    let mut done = false;
    pump(
        &mut a,
        &mut b,
        &mut now,
        Duration::from_ms(1),
        500,
        |a, _| {
            while let Some(c) = a.poll_completion() {
                done |= matches!(c, Completion::Sent { cookie: 5, .. });
            }
            done
        },
    );
    assert_eq!(b.stats.unknown_port, 10);
}

#[test]
fn sending_from_a_port_that_is_not_open_is_refused() {
    let mut a = engine(Faults::default(), 1000, 4);
    let key = flow("127.0.0.1:9".parse().unwrap(), 1, 2);
    let e = a
        .send(Time::ZERO, key, Arc::new(vec![]) as Payload, 0)
        .unwrap_err();
    assert_eq!(e.to_string(), "port 1 is not open on this agent");
}

#[test]
fn replacing_the_scheduler_switches_rate_control_off_and_on_keeping_idt_and_backlog() {
    use qos_core::sched::{AnyScheduler, SchedulerKind};
    let mut a = engine_with(
        Faults::default(),
        1000,
        64,
        AnyScheduler::new(SchedulerKind::RateControl),
    );
    let b = engine(Faults::default(), 1000, 64);
    a.open_port(1).unwrap();
    let key = flow(b.link().local_addr().unwrap(), 1, 2);
    // One packet per 10 ms: rate control sends the first of three at once, holds two.
    a.set_idt(key, Duration::from_ms(10));
    let now = Time::ZERO;
    a.send(now, key, Arc::new(vec![0u8; 3000]) as Payload, 1)
        .unwrap();
    a.poll(now).unwrap();
    assert_eq!(a.stats.packets_sent, 1);
    assert_eq!(a.backlog(&key), 2);
    // Rate control off (GM rotation): the IDT no longer holds anything back.
    let old = a.replace_scheduler(now, AnyScheduler::new(SchedulerKind::Gm));
    assert_eq!(old.kind(), SchedulerKind::RateControl);
    assert_eq!(a.scheduler().kind(), SchedulerKind::Gm);
    assert_eq!(a.backlog(&key), 2, "queued packets follow the flow");
    a.poll(now).unwrap();
    assert_eq!(a.stats.packets_sent, 3);
    assert_eq!(a.backlog(&key), 0);
    // On again: the flow's IDT is back in force.
    a.replace_scheduler(now, AnyScheduler::new(SchedulerKind::RateControl));
    assert_eq!(a.scheduler().kind(), SchedulerKind::RateControl);
    a.send(now, key, Arc::new(vec![0u8; 3000]) as Payload, 2)
        .unwrap();
    a.poll(now).unwrap();
    assert_eq!(a.stats.packets_sent, 4);
    assert_eq!(a.backlog(&key), 2);
    a.poll(now + Duration::from_ms(10)).unwrap();
    assert_eq!(a.stats.packets_sent, 5);
}

#[test]
fn harness_switches_the_running_data_planes_scheduler_and_reads_their_cpu_clocks() {
    use super::harness::Harness;
    use qos_core::sched::SchedulerKind;
    let h = Harness::loopback(2, SchedulerKind::RateControl).unwrap();
    let before = h.agent_cpu_ns();
    assert_eq!(before.len(), 2);
    for kind in [
        SchedulerKind::Gm,
        SchedulerKind::RateControl,
        SchedulerKind::Gm,
    ] {
        h.set_scheduler(kind).unwrap();
        // Traffic still flows through the same data planes after the switch.
        let bw = h.measure_flow(0, 1, Duration::ZERO, 4096, 50).unwrap();
        assert!(bw.bytes_per_sec() > 0);
    }
    let after = h.agent_cpu_ns();
    assert!(
        after.iter().zip(&before).all(|(a, b)| a > b),
        "agent threads' CPU clocks did not advance: {before:?} -> {after:?}"
    );
}

#[test]
fn idle_spin_keeps_traffic_flowing_and_an_idle_agent_asleep() {
    use super::harness::Harness;
    use qos_core::sched::SchedulerKind;
    let h = Harness::loopback(2, SchedulerKind::RateControl).unwrap();
    h.set_idle_spin(Duration::from_us(20));
    let bw = h.measure_flow(0, 1, Duration::ZERO, 1024, 200).unwrap();
    assert!(bw.bytes_per_sec() > 0);
    // Let acknowledgements and timers settle, then an idle agent must use no CPU.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let a = h.agent_cpu_ns();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let b = h.agent_cpu_ns();
    for (x, y) in a.iter().zip(&b) {
        // CPU clocks count only running time: a sleeping thread's stays put whatever
        // the machine's load. 1 % of 300 ms.
        assert!(
            y - x < 3_000_000,
            "idle agent used {} ns of CPU in 300 ms",
            y - x
        );
    }
}

#[test]
fn pacing_a_pair_regulates_its_flows_and_the_pacing_idt_is_below_the_packet_time() {
    use super::harness::Harness;
    use crate::shm::client::PortClient;
    use crate::shm::region::{RecvDesc, SendDesc, CQ_RECEIVED};
    use qos_core::sched::SchedulerKind;
    let h = Harness::loopback(2, SchedulerKind::RateControl).unwrap();
    let a = PortClient::open(&h.sockets[0], Some(21)).unwrap();
    let b = PortClient::open(&h.sockets[1], Some(22)).unwrap();
    let bounce = |n: u64| {
        for i in 0..n {
            b.post_recv(RecvDesc {
                offset: i * 64,
                capacity: 64,
                cookie: i,
                _pad: 0,
            })
            .unwrap();
            a.region().write(i * 64, b"x");
            a.post_send(SendDesc {
                offset: i * 64,
                len: 1,
                dst_node: 1,
                cookie: i,
                dst_port: 22,
                priority: 0,
                _pad: [0; 5],
            })
            .unwrap();
        }
        let mut got = 0;
        while got < n {
            let c = b.wait(std::time::Duration::from_secs(5)).unwrap().unwrap();
            got += u64::from(c.kind == CQ_RECEIVED);
        }
        while a.poll().unwrap().is_some() {}
    };
    // An IDT of 5 ms binds: the agent holds packets back.
    h.pace_pair(0, 21, 1, 22, Duration::from_ms(5));
    let held = h.engine_stats()[0].held_back;
    bounce(4);
    let after = h.engine_stats()[0].held_back;
    assert!(
        after > held,
        "rate control held nothing back: {held} -> {after}"
    );
    // The pacing IDT is a fraction of the fastest packet time, and is what the table gets.
    let idt = h.pacing_idt(0, 1).unwrap();
    assert!(idt > Duration::ZERO && idt < Duration::from_ms(5), "{idt}");
}
