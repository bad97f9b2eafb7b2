//! Cost of the bandwidth resource manager's decisions (thesis §3.3.1, §4.3) at the
//! manager service's scale: a 32×32 mesh (1,024 hosts, dimension-order routes of up to
//! 63 switch ports) holding 10,000 flows, half premium and half best-effort.
//!
//! - `request_release`: one premium request decided and granted, then released: two
//!   admission decisions, each O(route length).
//! - `thesis_update`: after one premium request, bring the thesis-rule best-effort
//!   shares up to date incrementally (only flows on the changed resources).
//! - `thesis_full` / `max_min_full`: recompute every best-effort share from scratch.
//!
//! Run: `cargo bench -p qos-core --bench admission`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use qos_core::admission::Ledger;
use qos_core::besteffort::{max_min, thesis_rule, ThesisShares};
use qos_core::flow::{Flow, FlowKey};
use qos_core::topology::build::{mesh, HostDefaults};
use qos_core::topology::NodeId;
use qos_core::units::Bandwidth;

const K: u16 = 32;
const FLOWS: u32 = 10_000;

/// A small deterministic generator (no dependency needed for a benchmark's input).
fn lcg(state: &mut u64) -> u32 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*state >> 33) as u32
}

fn loaded() -> (Ledger, u64) {
    let topo = Arc::new(mesh(K, &HostDefaults::thesis()).unwrap().build().unwrap());
    let n = topo.nodes().len() as u32;
    let mut l = Ledger::new(topo);
    let mut seed = 42u64;
    let mut i = 0u32;
    while l.len() < FLOWS as usize {
        let (a, b) = (lcg(&mut seed) % n, lcg(&mut seed) % n);
        if a == b {
            continue;
        }
        let key = FlowKey {
            priority: (i % 2) as u8,
            ..FlowKey::between(NodeId(a), NodeId(b))
        };
        i += 1;
        let f = if i % 2 == 1 {
            Flow::best_effort("b", NodeId(a), NodeId(b))
        } else {
            Flow::premium("p", NodeId(a), NodeId(b), Bandwidth::from_mb_per_sec(0.5))
        };
        let _ = l.request(f.with_key(key));
    }
    l.take_changed();
    (l, seed)
}

fn bench(c: &mut Criterion) {
    let (mut l, mut seed) = loaded();
    let n = l.topology().nodes().len() as u32;
    let mut g = c.benchmark_group("admission_32x32_mesh_10k_flows");
    g.bench_function("request_release", |b| {
        b.iter(|| {
            let a = lcg(&mut seed) % n;
            let z = (a + 1 + lcg(&mut seed) % (n - 1)) % n;
            let key = FlowKey {
                priority: 7,
                ..FlowKey::between(NodeId(a), NodeId(z))
            };
            let f = Flow::premium("x", NodeId(a), NodeId(z), Bandwidth::from_mb_per_sec(1.0))
                .with_key(key);
            if l.request(black_box(f)).is_ok() {
                l.release(&key).unwrap();
            }
        })
    });
    let mut shares = ThesisShares::new();
    shares.update(&mut l);
    g.bench_function("request_thesis_update_release_update", |b| {
        b.iter(|| {
            let a = lcg(&mut seed) % n;
            let z = (a + 1 + lcg(&mut seed) % (n - 1)) % n;
            let key = FlowKey {
                priority: 7,
                ..FlowKey::between(NodeId(a), NodeId(z))
            };
            let f = Flow::premium("x", NodeId(a), NodeId(z), Bandwidth::from_mb_per_sec(1.0))
                .with_key(key);
            if l.request(f).is_ok() {
                black_box(shares.update(&mut l));
                l.release(&key).unwrap();
                black_box(shares.update(&mut l));
            }
        })
    });
    g.sample_size(20);
    g.bench_function("thesis_full", |b| b.iter(|| black_box(thesis_rule(&l))));
    g.bench_function("max_min_full", |b| b.iter(|| black_box(max_min(&l))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
