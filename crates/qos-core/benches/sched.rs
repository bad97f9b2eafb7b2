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
//! On Unix the clock is the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), so
//! figures taken on a busy shared machine leave out the time the thread spent
//! descheduled; elsewhere it is wall time.
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

fn rate_control(c: &mut Criterion<Clock>) {
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

fn every_kind(c: &mut Criterion<Clock>) {
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

#[cfg(unix)]
type Clock = thread_cpu::ThreadCpuTime;
#[cfg(not(unix))]
type Clock = criterion::measurement::WallTime;

#[cfg(unix)]
fn clock() -> Clock {
    thread_cpu::ThreadCpuTime
}
#[cfg(not(unix))]
fn clock() -> Clock {
    criterion::measurement::WallTime
}

#[cfg(unix)]
mod thread_cpu {
    //! A criterion measurement reading the calling thread's CPU time, in nanoseconds.
    use criterion::measurement::{Measurement, ValueFormatter};
    use criterion::Throughput;

    pub struct ThreadCpuTime;

    fn now_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux
        // and the BSDs define.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    impl Measurement for ThreadCpuTime {
        type Intermediate = u64;
        type Value = u64;
        fn start(&self) -> u64 {
            now_ns()
        }
        fn end(&self, start: u64) -> u64 {
            now_ns().saturating_sub(start)
        }
        fn add(&self, a: &u64, b: &u64) -> u64 {
            a + b
        }
        fn zero(&self) -> u64 {
            0
        }
        fn to_f64(&self, v: &u64) -> f64 {
            *v as f64
        }
        fn formatter(&self) -> &dyn ValueFormatter {
            &Nanoseconds
        }
    }

    /// Prints every figure in CPU nanoseconds (and packets per CPU second).
    struct Nanoseconds;

    impl ValueFormatter for Nanoseconds {
        fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
            "ns (cpu)"
        }
        fn scale_throughputs(
            &self,
            _typical: f64,
            throughput: &Throughput,
            values: &mut [f64],
        ) -> &'static str {
            let per = match *throughput {
                Throughput::Elements(n) | Throughput::Bytes(n) | Throughput::BytesDecimal(n) => {
                    n as f64
                }
            };
            for v in values {
                *v = per * 1e9 / *v;
            }
            "elem/cpu-s"
        }
        fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
            "ns"
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(clock());
    targets = rate_control, every_kind
}
criterion_main!(benches);
