//! Data-plane benchmarks, through the whole path: application →
//! shared queues → agent → UDP → agent → shared queues → application, two agents on
//! loopback.
//!
//! - `loopback_64KiB_unregulated/{rate_control_on,rate_control_off_gm}`: one unregulated
//!   flow of 64 KiB messages, with the rate-control scheduler and with GM rotation (rate
//!   control off) — throughput and the overhead between them.
//! - `shares`: two regulated flows at IDTs 10T/3 and 10T/7 (thesis Fig 5.5); prints the
//!   achieved byte ratio over the span where both are backlogged.
//!
//! - `pingpong_round_trip/{rate_control_on,rate_control_off_gm}/<size>`: round-trip
//!   latency (thesis Fig 5.2).
//!
//! Run: `cargo bench -p qos-client --bench dataplane`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use qos_client::{Port, PortOptions};
use qos_core::sched::SchedulerKind;
use qos_core::units::Duration as QDuration;
use qos_runtime::dataplane::harness::Harness;
use qos_runtime::dataplane::service::IdtRow;

const MSG: usize = 64 * 1024;

fn cluster(kind: SchedulerKind) -> Harness {
    Harness::loopback(2, kind).expect("two data planes on loopback")
}

/// The applications' ports: `flows` senders on n0 (ports 1..) and receivers on n1 (101..).
struct Apps {
    tx: Vec<Port>,
    rx: Vec<Port>,
}

fn apps(c: &Harness, flows: usize) -> Apps {
    let open =
        |s: &PathBuf, p: u16| Port::open(PortOptions::new(s).port(p).max_message(MSG)).unwrap();
    Apps {
        tx: (0..flows)
            .map(|f| open(&c.sockets[0], 1 + f as u16))
            .collect(),
        rx: (0..flows)
            .map(|f| open(&c.sockets[1], 101 + f as u16))
            .collect(),
    }
}

/// Sends `n` messages on each flow; returns per flow the arrival time of every message,
/// and the start time.
fn pump(a: &mut Apps, n: usize) -> (Vec<Vec<Instant>>, Instant) {
    let rx: Vec<_> =
        a.rx.drain(..)
            .map(|mut p| {
                std::thread::spawn(move || {
                    let mut at = Vec::with_capacity(n);
                    while at.len() < n {
                        match p.recv(Duration::from_secs(30)) {
                            Ok(_) => at.push(Instant::now()),
                            Err(e) => panic!("receive failed: {e}"),
                        }
                    }
                    (p, at)
                })
            })
            .collect();
    let start = Instant::now();
    // One sending thread per flow, so a slow flow's full queue never holds back another.
    let tx: Vec<_> =
        a.tx.drain(..)
            .enumerate()
            .map(|(f, mut p)| {
                std::thread::spawn(move || {
                    let data = vec![7u8; MSG];
                    for _ in 0..n {
                        p.send("n1", 101 + f as u16, 0, &data).unwrap();
                    }
                    p
                })
            })
            .collect();
    for t in tx {
        a.tx.push(t.join().unwrap());
    }
    let mut arrivals = vec![];
    for t in rx {
        let (p, at) = t.join().unwrap();
        a.rx.push(p);
        arrivals.push(at);
    }
    (arrivals, start)
}

fn loopback_throughput(c: &mut Criterion) {
    let mut g = c.benchmark_group("loopback_64KiB_unregulated");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let n = 2000;
    g.throughput(Throughput::Bytes((n * MSG) as u64));
    for (label, kind) in [
        ("rate_control_on", SchedulerKind::RateControl),
        ("rate_control_off_gm", SchedulerKind::Gm),
    ] {
        let cl = cluster(kind);
        let mut a = apps(&cl, 1);
        g.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (at, start) = pump(&mut a, n);
                    total += *at[0].last().unwrap() - start;
                }
                total
            })
        });
    }
    g.finish();
}

/// Shares of two regulated flows at IDTs 10T/3 and 10T/7 with T = 1 ms per packet
/// (~19.6 and ~45.8 MB/s: feasible on a loaded machine, so rate control is the limit).
fn shares(_c: &mut Criterion) {
    let cl = cluster(SchedulerKind::RateControl);
    let t_ps = 1_000_000_000u64;
    let row = |src, dst, idt| IdtRow {
        src_port: src,
        dst_node: "n1".into(),
        dst_port: dst,
        priority: 0,
        idt: Some(QDuration::from_ps(idt)),
        reserved: None,
    };
    cl.set_table(
        0,
        vec![row(1, 101, t_ps * 10 / 3), row(2, 102, t_ps * 10 / 7)],
    );
    std::thread::sleep(Duration::from_millis(50));
    let mut a = apps(&cl, 2);
    let (at, start) = pump(&mut a, 1000);
    // Window where both flows are backlogged: after 100 ms of warm-up until the faster ends.
    let from = start + Duration::from_millis(100);
    let to = *at[1].last().unwrap().min(at[0].last().unwrap());
    let count = |v: &Vec<Instant>| v.iter().filter(|t| **t >= from && **t <= to).count() as f64;
    let (a, b) = (count(&at[0]), count(&at[1]));
    let secs = (to - from).as_secs_f64();
    let share = a / (a + b);
    eprintln!(
        "shares 3:7 — flow 1 {:.2} MB/s, flow 2 {:.2} MB/s over {secs:.2} s: share {share:.4} (wanted 0.3000, error {:.2} %)",
        a * MSG as f64 / secs / 1e6,
        b * MSG as f64 / secs / 1e6,
        (share - 0.3).abs() / 0.3 * 100.0
    );
}

/// Round-trip latency of small and large messages (thesis Fig 5.2), rate control on and off.
fn pingpong(c: &mut Criterion) {
    let mut g = c.benchmark_group("pingpong_round_trip");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    for (label, kind) in [
        ("rate_control_on", SchedulerKind::RateControl),
        ("rate_control_off_gm", SchedulerKind::Gm),
    ] {
        let cl = cluster(kind);
        let mut a = Port::open(PortOptions::new(&cl.sockets[0]).port(1).max_message(MSG)).unwrap();
        let mut b =
            Port::open(PortOptions::new(&cl.sockets[1]).port(101).max_message(MSG)).unwrap();
        for size in [64usize, 4096, 65536] {
            let data = vec![3u8; size];
            g.bench_function(format!("{label}/{size}B"), |bench| {
                bench.iter(|| {
                    a.send("n1", 101, 0, &data).unwrap();
                    let m = b.recv(Duration::from_secs(5)).unwrap();
                    b.send("n0", 1, 0, &m.data).unwrap();
                    a.recv(Duration::from_secs(5)).unwrap();
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, loopback_throughput, shares, pingpong);
criterion_main!(benches);
