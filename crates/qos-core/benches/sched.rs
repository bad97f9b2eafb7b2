//! Cost of one scheduling decision (thesis §4.2.2: the SDMA state machine's "find the
//! minimum NDT from all valid flows"), for the runtime agent's target of at most 200 ns
//! per packet with 10,000 active flows.
//!
//! Each iteration is one packet's worth of scheduler work in steady state: `next(now)`
//! dispatches the due flow with the minimum NDT and `enqueue` posts a replacement packet
//! for it, so all `n` flows stay valid (backlogged). IDTs are `n` time units (all flows
//! share the link equally, sum(1/IDT) = 1) and time advances one unit per packet, so
//! every decision dispatches. The other schedulers run the same loop for comparison.
//!
//! Run: `cargo bench -p qos-core --bench sched`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use qos_core::sched::rate::RateControl;
use qos_core::sched::{AnyScheduler, Decision, FlowId, FlowParams, Scheduler, SchedulerKind};
use qos_core::units::{Duration, Time};

const FLOW_COUNTS: [u32; 3] = [10, 1_000, 10_000];

/// A scheduler with `n` backlogged flows, each with two packets queued.
fn loaded<S: Scheduler>(mut s: S, n: u32) -> S {
    for f in 0..n {
        s.add_flow(
            FlowId(f),
            FlowParams {
                idt: Duration::from_ps(u64::from(n)),
                vtick: Some(Duration::from_ps(u64::from(n))),
                connection: f % 64,
                subport: f / 64,
            },
        );
        s.enqueue(Time::ZERO, FlowId(f), 2);
    }
    s
}

/// One decision plus the enqueue that keeps the dispatched flow backlogged.
fn step<S: Scheduler>(s: &mut S, now: &mut u64) {
    let t = Time::from_ps(*now);
    match s.next(t) {
        Decision::Dispatch(f) => s.enqueue(t, black_box(f), 1),
        Decision::WaitUntil(_) | Decision::Idle => unreachable!("every flow stays backlogged"),
    }
    *now += 1;
}

fn rate_control(c: &mut Criterion) {
    let mut g = c.benchmark_group("rate_control_enqueue_next");
    g.throughput(Throughput::Elements(1));
    for n in FLOW_COUNTS {
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let mut s = loaded(RateControl::new(), n);
            let mut now = 0;
            b.iter(|| step(&mut s, &mut now));
        });
    }
    g.finish();
}

fn every_kind(c: &mut Criterion) {
    let mut g = c.benchmark_group("any_scheduler_enqueue_next_10000_flows");
    g.throughput(Throughput::Elements(1));
    for kind in SchedulerKind::ALL {
        g.bench_function(kind.name(), |b| {
            let mut s = loaded(AnyScheduler::new(kind), 10_000);
            let mut now = 0;
            b.iter(|| step(&mut s, &mut now));
        });
    }
    g.finish();
}

criterion_group!(benches, rate_control, every_kind);
criterion_main!(benches);
