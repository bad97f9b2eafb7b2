//! Tests of source rate control (beyond the paper): the manager's shares
//! against every link's capacity and against an independent water-filling oracle, the
//! thesis's equal-split rule, the gate's IDT/NDT arithmetic, bad values, and a mesh
//! past its saturation point where the rates keep the network's own delay low.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::flit::topology::{self, Fabric};
use crate::iba::config::IbaConfig;
use crate::iba::congestion::CongestionSpec;
use crate::iba::run::run;
use qos_core::besteffort::Policy;

const LINK: u64 = 312_500_000; // 2.5 Gbit/s in bytes/s

fn cfg(k: u32) -> IbaConfig {
    toml::from_str(&format!(
        "[network]\ntopology = {{ kind = \"mesh\", k = {k} }}\n[workload]\nloads = [0.5]\nreal_time = {{ kind = \"mpeg\" }}\n[run]\nwarmup = \"1ms\"\nmeasure = \"1ms\"\n"
    ))
    .unwrap()
}

fn mesh(k: u32) -> (Fabric, Admission) {
    let fab = topology::grid(k, 2, false, topology::Ties::Plus);
    let adm = Admission::new(&fab, &cfg(k));
    (fab, adm)
}

/// Every link a flow s → d crosses, by the ledger's numbering.
fn links(fab: &Fabric, adm: &Admission, s: u32, d: u32) -> Vec<usize> {
    adm.path(fab, s, d)
        .links
        .iter()
        .map(|l| l.0 as usize)
        .collect()
}

/// Water filling written from scratch in floating point: all unfrozen flows rise
/// together; the link with the least room per rising flow fills first and freezes
/// its flows; a flow also stops at `cap` (its Bmax).
fn oracle(fab: &Fabric, adm: &Admission, cap: f64, left: &[f64]) -> Vec<f64> {
    let n = fab.nodes;
    let flows: Vec<(u32, u32)> = (0..n)
        .flat_map(|s| (0..n).filter(move |&d| d != s).map(move |d| (s, d)))
        .collect();
    let paths: Vec<Vec<usize>> = flows.iter().map(|&(s, d)| links(fab, adm, s, d)).collect();
    let mut room = left.to_vec();
    let mut rate = vec![0.0; flows.len()];
    let mut frozen = vec![false; flows.len()];
    let mut level = 0.0;
    while frozen.iter().any(|f| !f) {
        let mut rising = vec![0usize; room.len()];
        for (i, p) in paths.iter().enumerate() {
            if !frozen[i] {
                for &l in p {
                    rising[l] += 1;
                }
            }
        }
        // The next event: a link fills, or the rising flows reach the cap.
        let mut step = cap - level;
        for (l, &c) in rising.iter().enumerate() {
            if c > 0 {
                step = step.min(room[l] / c as f64);
            }
        }
        let step = step.max(0.0);
        level += step;
        for (l, &c) in rising.iter().enumerate() {
            room[l] -= step * c as f64;
        }
        for (i, p) in paths.iter().enumerate() {
            if frozen[i] {
                continue;
            }
            if level >= cap - 1e-9 || p.iter().any(|&l| room[l] <= 1e-6 * cap) {
                frozen[i] = true;
                rate[i] = level;
            }
        }
    }
    rate
}

#[test]
fn shares_respect_every_link_and_match_an_independent_water_filling() {
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    for trial in 0..12 {
        let k = rng.gen_range(2..=5);
        let (fab, adm) = mesh(k);
        let n = fab.nodes;
        let u = [1.0, 0.9, 0.5, rng.gen_range(0.2..1.0)][trial % 4];
        let spec = SourceRateSpec {
            utilisation: u,
            ..SourceRateSpec::default()
        };
        let cap = (LINK as f64 * u).floor();
        // A few real-time reservations, small enough to fit.
        let premium: Vec<(u32, u32, Bandwidth)> = (0..rng.gen_range(0..6))
            .map(|_| {
                let s = rng.gen_range(0..n);
                let d = (s + rng.gen_range(1..n)) % n;
                let b = rng.gen_range(1..(cap as u64 / 8));
                (s, d, Bandwidth::from_bytes_per_sec(b))
            })
            .collect();
        let a = Allocation::new(
            &fab,
            &adm,
            Bandwidth::from_bytes_per_sec(LINK),
            &spec,
            &premium,
        )
        .unwrap();
        assert!(a.refused.is_empty());
        let nlinks = adm.ledger.len();
        let mut left = vec![0.0; nlinks];
        for (l, v) in left.iter_mut().enumerate() {
            let real = adm
                .ledger
                .capacity(qos_core::admission::probe::LinkId(l as u32));
            if !real.is_zero() {
                *v = cap;
            }
        }
        for &(s, d, b) in &premium {
            for l in links(&fab, &adm, s, d) {
                left[l] -= b.bytes_per_sec() as f64;
            }
        }
        // Capacity: best effort plus reservations within u × link on every link.
        let mut load = vec![0.0; nlinks];
        for s in 0..n {
            for d in (0..n).filter(|&d| d != s) {
                let r = a.rate(s, d).bytes_per_sec() as f64;
                assert!(r > 0.0, "k = {k}: flow {s} → {d} got nothing");
                for l in links(&fab, &adm, s, d) {
                    load[l] += r;
                }
            }
        }
        for l in 0..nlinks {
            assert!(
                load[l] <= left[l] + 1e-6,
                "k = {k}, link {l}: {} > {}",
                load[l],
                left[l]
            );
        }
        // Max-min: the same rates as the oracle (integer rounding: a few bytes/s).
        let want = oracle(&fab, &adm, cap, &left);
        let mut i = 0;
        for s in 0..n {
            for d in (0..n).filter(|&d| d != s) {
                let got = a.rate(s, d).bytes_per_sec() as f64;
                assert!(
                    (got - want[i]).abs() <= 1e-6 * cap + 4.0,
                    "k = {k}, u = {u}, {s} → {d}: {got} vs oracle {}",
                    want[i]
                );
                i += 1;
            }
        }
        // And the definition: every flow has a full link on its path on which no
        // flow has a larger rate (or sends at its cap).
        for s in 0..n {
            for d in (0..n).filter(|&d| d != s) {
                let r = a.rate(s, d).bytes_per_sec() as f64;
                if r >= cap - 4.0 {
                    continue;
                }
                let ok = links(&fab, &adm, s, d).into_iter().any(|l| {
                    let full = load[l] >= left[l] - (n * n) as f64;
                    let top = (0..n).all(|s2| {
                        (0..n).filter(|&d2| d2 != s2).all(|d2| {
                            !links(&fab, &adm, s2, d2).contains(&l)
                                || a.rate(s2, d2).bytes_per_sec() as f64 <= r + 4.0
                        })
                    });
                    full && top
                });
                assert!(ok, "k = {k}: flow {s} → {d} at {r} has no bottleneck");
            }
        }
    }
}

#[test]
fn the_central_links_of_a_mesh_bound_the_flows_that_cross_them() {
    // 4×4 mesh, uniform traffic, X first: the link between columns 1 and 2 of a row
    // carries 2 sources × 8 destinations = 16 flows, so they get 1/16 of it; an
    // injection link carries 15 flows. Flows that cross no central link share what
    // the 1/16 flows leave of their injection and ejection links.
    let (fab, adm) = mesh(4);
    let a = Allocation::new(
        &fab,
        &adm,
        Bandwidth::from_bytes_per_sec(LINK),
        &SourceRateSpec::default(),
        &[],
    )
    .unwrap();
    let sixteenth = LINK as f64 / 16.0;
    // Node 0 (0,0) to node 2 (2,0) crosses the central X link of row 0.
    let r = a.rate(0, 2).bytes_per_sec() as f64;
    assert!((r - sixteenth).abs() < 2.0, "{r}");
    // Every flow gets at least 1/16 and the injection links are full.
    for s in 0..16 {
        let sum: u64 = (0..16)
            .filter(|&d| d != s)
            .map(|d| {
                let r = a.rate(s, d).bytes_per_sec();
                assert!(r as f64 >= sixteenth - 2.0);
                r
            })
            .sum();
        assert!(sum as f64 >= LINK as f64 - 64.0, "node {s}: {sum}");
    }
}

#[test]
fn the_thesis_rule_gives_each_flow_its_smallest_equal_part() {
    let (fab, adm) = mesh(3);
    let spec = SourceRateSpec {
        share: Policy::Thesis,
        ..SourceRateSpec::default()
    };
    let a = Allocation::new(&fab, &adm, Bandwidth::from_bytes_per_sec(LINK), &spec, &[]).unwrap();
    let n = fab.nodes;
    let mut count = vec![0u64; adm.ledger.len()];
    for s in 0..n {
        for d in (0..n).filter(|&d| d != s) {
            for l in links(&fab, &adm, s, d) {
                count[l] += 1;
            }
        }
    }
    for s in 0..n {
        for d in (0..n).filter(|&d| d != s) {
            let want = links(&fab, &adm, s, d)
                .into_iter()
                .map(|l| LINK / count[l])
                .min()
                .unwrap();
            let got = a.rate(s, d).bytes_per_sec();
            assert!(got.abs_diff(want) <= 1, "{s} → {d}: {got} vs {want}");
        }
    }
}

#[test]
fn a_reservation_that_does_not_fit_is_refused_and_the_rest_share_the_surplus() {
    let (fab, adm) = mesh(2);
    let link = Bandwidth::from_bytes_per_sec(LINK);
    let half = Bandwidth::from_bytes_per_sec(LINK / 2);
    // 0 → 1 reserves half of node 0's injection link; 0 → 3 asks for more than the rest.
    let a = Allocation::new(
        &fab,
        &adm,
        link,
        &SourceRateSpec::default(),
        &[
            (0, 1, half),
            (0, 3, Bandwidth::from_bytes_per_sec(LINK * 3 / 4)),
        ],
    )
    .unwrap();
    assert_eq!(a.refused, vec![(0, 3)]);
    let be: u64 = (1..4).map(|d| a.rate(0, d).bytes_per_sec()).sum();
    assert!(be <= LINK / 2 && be + 8 >= LINK / 2, "{be}");
}

#[test]
fn idt_is_the_packet_time_at_the_flow_rate() {
    // A 640-byte packet (40 flits of 128 bits) at 1/16 of 2.5 Gbit/s: 32.768 µs.
    let d = idt(640, Bandwidth::from_bytes_per_sec(LINK / 16)).unwrap();
    assert_eq!(d.as_ps(), 32_768_000);
    // Rounded up, never down.
    let d = idt(1, Bandwidth::from_bytes_per_sec(3)).unwrap();
    assert_eq!(d.as_ps(), 333_333_333_334);
    assert_eq!(idt(640, Bandwidth::ZERO), None);
}

/// A gate for two nodes of a 2×2 mesh with `rate` bytes/s on every flow (by hand),
/// one cycle = 1 ns.
fn gate(rate: u64, burst: u32) -> SourceRate {
    let alloc = Allocation {
        nodes: 4,
        rate: vec![Bandwidth::from_bytes_per_sec(rate); 16],
        refused: Vec::new(),
    };
    SourceRate::new(alloc, burst, 1_000)
}

const BE: u8 = TrafficClass::BestEffort as u8;

#[test]
fn ndt_starts_at_now_and_advances_by_the_idt() {
    // 100 bytes at 1e9 B/s: IDT 100 ns = 100 cycles.
    let mut g = gate(1_000_000_000, 1);
    assert!(g.allows(0, 1, BE, 100, 50));
    assert_eq!(g.ndt(0, 1), Some(Time::from_ps(50_000)));
    g.taken(0, 0, 1, BE, 100, 50);
    assert_eq!(g.ndt(0, 1), Some(Time::from_ps(150_000)));
    // Not before NDT; another flow of the node is not held back by this one.
    assert!(!g.allows(0, 1, BE, 100, 149));
    assert!(g.allows(0, 1, BE, 100, 150));
    g.taken(0, 1, 1, BE, 100, 160);
    // Taken late (the HCA was busy): NDT counts from the old NDT, as the thesis's
    // NDT += IDT while the flow stays valid.
    assert_eq!(g.ndt(0, 1), Some(Time::from_ps(250_000)));
    assert!(g.allows(0, 2, BE, 100, 161));
    // Idle for long: no credit banked, NDT = max(NDT, now).
    assert!(g.allows(0, 1, BE, 100, 10_000));
    assert_eq!(g.ndt(0, 1), Some(Time::from_ps(10_000_000)));
    // Real-time packets are never held.
    assert!(g.allows(0, 1, TrafficClass::RealTime as u8, 100, 10_001));
    assert_eq!(g.held, 1);
}

#[test]
fn a_flow_never_exceeds_its_rate_over_any_window() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for burst in [1u32, 4] {
        // 100 bytes at 100 MB/s: IDT 1 µs = 1,000 cycles of 1 ns.
        let mut g = gate(100_000_000, burst);
        let idt_cycles = 1_000u64;
        let mut sent: Vec<u64> = Vec::new();
        // Packets reach the head of the QP at random times, sometimes in bursts,
        // sometimes after idling; the DMA asks every cycle while one is there.
        let mut arrivals = 0u64;
        let mut next_arrival = 0u64;
        for now in 0..400_000u64 {
            while now >= next_arrival {
                arrivals += 1;
                next_arrival += if rng.gen_bool(0.7) {
                    rng.gen_range(1..200)
                } else {
                    rng.gen_range(1..20_000)
                };
            }
            if arrivals > 0 && g.allows(1, 3, BE, 100, now) {
                g.taken(1, 0, 3, BE, 100, now);
                sent.push(now);
                arrivals -= 1;
            }
        }
        assert!(sent.len() > 50, "{}", sent.len());
        for i in 0..sent.len() {
            for j in i..sent.len() {
                let w = sent[j] - sent[i];
                let n = (j - i + 1) as u64;
                assert!(
                    n <= burst as u64 + w / idt_cycles,
                    "burst {burst}: {n} packets in {w} cycles"
                );
            }
        }
        if burst == 1 {
            assert!(sent.windows(2).all(|p| p[1] - p[0] >= idt_cycles));
        }
    }
}

#[test]
fn an_idle_flow_may_send_its_burst_back_to_back_then_its_rate() {
    let mut g = gate(10_000_000, 3);
    let mut t = Vec::new();
    for now in 1_000_000..1_100_000u64 {
        if g.allows(2, 0, BE, 320, now) {
            g.taken(2, 0, 0, BE, 320, now);
            t.push(now);
        }
    }
    // Three at once, then one every 32,000 cycles.
    assert_eq!(&t[..4], &[1_000_000, 1_000_001, 1_000_002, 1_032_000]);
}

#[test]
fn bad_values_name_their_key() {
    let c = |u: f64, burst: u32| {
        CongestionSpec::SourceRate(SourceRateSpec {
            utilisation: u,
            burst,
            ..SourceRateSpec::default()
        })
        .validate(16, true, 1600, 40)
    };
    assert!(c(1.0, 1).is_ok());
    assert_eq!(c(0.0, 1).unwrap_err().path, "congestion.utilisation");
    assert_eq!(c(1.5, 1).unwrap_err().path, "congestion.utilisation");
    assert_eq!(c(f64::NAN, 1).unwrap_err().path, "congestion.utilisation");
    assert_eq!(c(0.5, 0).unwrap_err().path, "congestion.burst");
    // The TOML form, with its defaults.
    let spec: CongestionSpec =
        toml::from_str::<toml::Table>("c = { kind = \"source_rate\", share = \"thesis\" }")
            .unwrap()["c"]
            .clone()
            .try_into()
            .unwrap();
    assert_eq!(
        spec,
        CongestionSpec::SourceRate(SourceRateSpec {
            share: Policy::Thesis,
            ..SourceRateSpec::default()
        })
    );
    assert!(
        toml::from_str::<toml::Table>("c = { kind = \"source_rate\", rate = 1 }").unwrap()["c"]
            .clone()
            .try_into::<CongestionSpec>()
            .is_err()
    );
}

/// A 4×4 mesh with best effort only, links 16 times slower than 2.5 Gbit/s.
fn run_cfg(congestion: &str) -> IbaConfig {
    let text = format!(
        "[network]\ntopology = {{ kind = \"mesh\", k = 4 }}\nlink = \"160Mbit/s\"\nlanes = {{ real_time = [0], best_effort = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14] }}\n{congestion}\n[workload]\nloads = [1.0]\nmix = 0.0\nreal_time = {{ kind = \"mpeg\" }}\ncontrol = {{ count = 0 }}\n[run]\nwarmup = \"3ms\"\nmeasure = \"20ms\"\ndrain = \"10ms\"\nbatches = 4\n"
    );
    let c: IbaConfig = toml::from_str(&text).unwrap();
    c.validate().unwrap();
    c
}

#[test]
fn past_saturation_the_shares_hold_in_the_network_and_cost_little_throughput() {
    // At 100 % offered load the central links (16 flows of 1/15 each: 107 %) are
    // overloaded without control. With source rate control at 90 % of every link no
    // router link carries more than 90 % over the run, the mesh delivers nearly as much
    // as without control (measured 0.844 against 0.876 flits/node/cycle, 96 %: the
    // routers' output buffers let the uncontrolled mesh fill its busiest link to 98 %;
    // without them 0.842 against 0.850), and a packet's time from its header entering the injection link
    // to its delivery (latency − queueing: it shares that link with the packets of the
    // HCA's other lanes, then the routers) is a fraction of no control's. The wait
    // moves to the source.
    let be = TrafficClass::BestEffort;
    let free = run(&run_cfg(""), 1.0, 3, &mut |_| {}).unwrap();
    let sr = run(
        &run_cfg("[congestion]\nkind = \"source_rate\"\nutilisation = 0.9"),
        1.0,
        3,
        &mut |_| {},
    )
    .unwrap();
    let net = |r: &crate::iba::run::RunOutput| {
        r.measures.latency_us[&be].mean - r.measures.queueing_us[&be].mean
    };
    assert!(sr.throttled > 0 && free.throttled == 0);
    assert!(
        free.link_utilisation_max > 0.92,
        "{}",
        free.link_utilisation_max
    );
    assert!(
        sr.link_utilisation_max <= 0.9 + 0.005,
        "{}",
        sr.link_utilisation_max
    );
    assert!(
        sr.throughput >= 0.95 * free.throughput,
        "{} vs {}",
        sr.throughput,
        free.throughput
    );
    assert!(
        net(&sr) < 0.5 * net(&free),
        "source rate {} µs, no control {} µs",
        net(&sr),
        net(&free)
    );
}

#[test]
fn a_flow_held_by_its_rate_does_not_hold_back_the_other_flows_of_its_hca() {
    use crate::flit::hooks::InjectionGate;
    use crate::iba::config::HcaSpec;
    use crate::iba::hca::{Adapters, QpGate, SharedGate};
    use std::cell::RefCell;
    use std::rc::Rc;
    // Node 0 sends to 1, then to 1 again and to 2: the second packet for 1 is not due
    // (IDT 100 cycles), the one for 2 is.
    let spec = HcaSpec::default();
    let pick = |per_destination: bool| {
        let mut a = Adapters::new(4, &spec).unwrap();
        if per_destination {
            a.best_effort_per_destination(&spec).unwrap();
        }
        let a = Rc::new(RefCell::new(a));
        let g: SharedGate = Rc::new(RefCell::new(gate(6_400_000_000, 1)));
        let mut qp = QpGate(a.clone(), vec![g]);
        for (slot, dst) in [(0u32, 1u32), (1, 1), (2, 2)] {
            a.borrow_mut()
                .post(0, TrafficClass::BestEffort, None, slot, 640, dst, 0)
                .unwrap();
            qp.enqueue(0, 2, slot, 1, 0);
        }
        let first = qp.pick(0, &|_| true, 10);
        (first, qp.pick(0, &|_| true, 11))
    };
    assert_eq!(pick(true), (Some(0), Some(2)));
    // One best-effort QP served in order: the packet for 2 waits behind the one for 1.
    assert_eq!(pick(false), (Some(0), None));
}
