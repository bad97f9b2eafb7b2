//! Best-effort shares against thesis §5.6 and the feasibility / fairness
//! invariants, under random sequences of premium and best-effort requests.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::flow::{Flow, Weight};
use crate::topology::build::{cascade, crossbar, mesh, HostDefaults};
use crate::topology::{NodeId, Topology};

fn mbs(x: f64) -> Bandwidth {
    Bandwidth::from_mb_per_sec(x)
}

fn ledger(hosts: u16) -> Ledger {
    Ledger::new(Arc::new(
        crossbar(hosts, &HostDefaults::thesis())
            .unwrap()
            .build()
            .unwrap(),
    ))
}

fn be(name: &str, a: u32, b: u32) -> Flow {
    Flow::best_effort(name, NodeId(a), NodeId(b))
}

fn rate_of(shares: &[Share], f: &Flow) -> Bandwidth {
    shares.iter().find(|s| s.key == f.key).unwrap().rate
}

#[test]
fn a_lone_best_effort_flow_sends_at_peak_rate() {
    let mut l = ledger(4);
    l.request(be("be", 0, 1)).unwrap();
    for policy in [Policy::Thesis, Policy::MaxMin] {
        let s = allocate(&l, policy);
        assert_eq!(s[0].rate, mbs(81.8));
        assert_eq!(s[0].idt, Some(Duration::from_us(48)), "IDT = T");
        assert_eq!(s[0].bottleneck, Bottleneck::Peak);
    }
}

#[test]
fn premium_flows_on_the_node_shrink_the_best_effort_share_as_in_thesis_5_6() {
    // Fig 5.11: one best-effort flow, then premium 40 MB/s, then premium 20 MB/s.
    let mut l = ledger(4);
    let f = be("be", 0, 1);
    l.request(f.clone()).unwrap();
    let p1 = l
        .request(Flow::premium("p1", NodeId(0), NodeId(2), mbs(40.0)))
        .unwrap();
    assert_eq!(rate_of(&thesis_rule(&l), &f), mbs(41.8)); // measured ≈ 38
    let p2 = l
        .request(Flow::premium("p2", NodeId(0), NodeId(3), mbs(20.0)))
        .unwrap();
    assert_eq!(rate_of(&thesis_rule(&l), &f), mbs(21.8)); // measured ≈ 18
    assert_eq!(rate_of(&max_min(&l), &f), mbs(21.8));
    l.release(&p1.key).unwrap();
    l.release(&p2.key).unwrap();
    assert_eq!(rate_of(&thesis_rule(&l), &f), mbs(81.8));
}

#[test]
fn two_best_effort_flows_split_the_surplus_equally_as_in_thesis_5_6() {
    // Fig 5.12: two best-effort flows get half the peak each (measured ≈ 39),
    // then share what a 20 MB/s premium flow leaves (measured: 58 MB/s shared).
    let mut l = ledger(4);
    let (a, b) = (be("a", 0, 1), be("b", 0, 2));
    l.request(a.clone()).unwrap();
    l.request(b.clone()).unwrap();
    let s = thesis_rule(&l);
    assert_eq!((rate_of(&s, &a), rate_of(&s, &b)), (mbs(40.9), mbs(40.9)));
    l.request(Flow::premium("p", NodeId(0), NodeId(3), mbs(20.0)))
        .unwrap();
    for s in [thesis_rule(&l), max_min(&l)] {
        assert_eq!((rate_of(&s, &a), rate_of(&s, &b)), (mbs(30.9), mbs(30.9)));
    }
}

#[test]
fn max_min_hands_out_what_the_thesis_rule_leaves_idle() {
    let mut l = ledger(4);
    let (a, b) = (be("a", 0, 1), be("b", 0, 2));
    l.request(a.clone()).unwrap();
    l.request(b.clone()).unwrap();
    // A premium flow into n1 leaves 21.8 MB/s there, so `a` is held to 21.8.
    l.request(Flow::premium("p", NodeId(3), NodeId(1), mbs(60.0)))
        .unwrap();
    let t = thesis_rule(&l);
    assert_eq!((rate_of(&t, &a), rate_of(&t, &b)), (mbs(21.8), mbs(40.9)));
    let m = max_min(&l);
    assert_eq!((rate_of(&m, &a), rate_of(&m, &b)), (mbs(21.8), mbs(60.0)));
}

#[test]
fn max_min_follows_the_weights() {
    let mut l = ledger(3);
    let a = be("a", 0, 1);
    let mut b = be("b", 0, 2);
    b.class = Class::BestEffort { weight: Weight(3) };
    l.request(a.clone()).unwrap();
    l.request(b.clone()).unwrap();
    let m = max_min(&l);
    assert_eq!((rate_of(&m, &a), rate_of(&m, &b)), (mbs(20.45), mbs(61.35)));
    // The thesis rule ignores weights.
    assert_eq!(rate_of(&thesis_rule(&l), &b), mbs(40.9));
}

#[test]
fn a_full_resource_stops_best_effort_flows_with_no_idt() {
    let mut l = ledger(3);
    let f = be("be", 0, 1);
    l.request(f.clone()).unwrap();
    l.request(Flow::premium("p", NodeId(0), NodeId(2), mbs(81.8)))
        .unwrap();
    for s in [thesis_rule(&l), max_min(&l)] {
        assert_eq!(s[0].rate, Bandwidth::ZERO);
        assert_eq!(s[0].idt, None);
    }
}

#[derive(Debug, Clone)]
enum Op {
    Premium(u32, u32, u8, u32),
    BestEffort(u32, u32, u8, u32),
    Release(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        2 => (0u32..64, 0u32..64, 0u8..3, 1u32..60).prop_map(|(a, b, p, m)| Op::Premium(a, b, p, m)),
        3 => (0u32..64, 0u32..64, 0u8..3, 1u32..5).prop_map(|(a, b, p, w)| Op::BestEffort(a, b, p, w)),
        1 => (0usize..64).prop_map(Op::Release),
    ];
    proptest::collection::vec(op, 1..60)
}

fn topologies() -> Vec<Arc<Topology>> {
    let d = HostDefaults::thesis();
    vec![
        Arc::new(cascade(2, 3, &d, mbs(100.0)).unwrap().build().unwrap()),
        Arc::new(mesh(3, &d).unwrap().build().unwrap()),
    ]
}

/// Applies `ops`, calling `check` after each one.
fn replay(t: Arc<Topology>, ops: &[Op], mut check: impl FnMut(&mut Ledger)) {
    let n = t.nodes().len() as u32;
    let mut l = Ledger::new(t);
    let mut held = Vec::new();
    for op in ops {
        let flow = match *op {
            Op::Premium(a, b, p, m) => Some((
                Flow::premium("p", NodeId(a % n), NodeId(b % n), mbs(m as f64)),
                p,
            )),
            Op::BestEffort(a, b, p, w) => {
                let mut f = be("b", a % n, b % n);
                f.class = Class::BestEffort { weight: Weight(w) };
                Some((f, p))
            }
            Op::Release(i) => {
                if !held.is_empty() {
                    let k = held.swap_remove(i % held.len());
                    l.release(&k).unwrap();
                }
                None
            }
        };
        if let Some((mut f, p)) = flow {
            f.key.priority = p;
            if let Ok(g) = l.request(f) {
                held.push(g.key);
            }
        }
        check(&mut l);
    }
}

/// Σ rate·cost per resource, in milli-bytes/s.
fn loads(l: &Ledger, shares: &[Share]) -> Vec<u128> {
    let mut load = vec![0u128; l.resource_count()];
    for s in shares {
        for u in &l.get(&s.key).unwrap().uses {
            load[u.resource.0 as usize] += s.rate.bytes_per_sec() as u128 * u.cost as u128;
        }
    }
    load
}

fn assert_feasible(l: &Ledger, shares: &[Share]) {
    assert_eq!(shares.len(), l.best_effort_count());
    for (r, &x) in loads(l, shares).iter().enumerate() {
        if let Some(s) = l.surplus_milli(ResourceId(r as u32)) {
            assert!(
                x <= s as u128,
                "{} over its surplus",
                l.label(ResourceId(r as u32))
            );
        }
    }
    for s in shares {
        let bmax = l.topology().node(s.key.src.node).rate.bmax;
        assert!(s.rate <= bmax, "above Bmax");
    }
}

fn w(l: &Ledger, s: &Share) -> u128 {
    match l.get(&s.key).unwrap().flow.class {
        Class::BestEffort { weight } => weight.0 as u128,
        Class::Premium { .. } => unreachable!(),
    }
}

/// Every flow is at Bmax or has a saturated resource on its path on which its
/// rate per unit of weight is the largest (up to the rounding of rates to whole
/// bytes/s).
fn assert_max_min_fair(l: &Ledger, shares: &[Share]) {
    let load = loads(l, shares);
    let by_key: HashMap<FlowKey, &Share> = shares.iter().map(|s| (s.key, s)).collect();
    for s in shares {
        if s.rate == l.topology().node(s.key.src.node).rate.bmax {
            continue;
        }
        let e = l.get(&s.key).unwrap();
        let ok = e.uses.iter().any(|u| {
            let r = u.resource;
            let on: Vec<&Share> = l.best_effort_on(r).map(|o| by_key[&o.flow.key]).collect();
            let slack: u128 = l
                .best_effort_on(r)
                .map(|o| {
                    let c = o.uses.iter().find(|x| x.resource == r).unwrap().cost;
                    c as u128 * (w(l, by_key[&o.flow.key]) + 1)
                })
                .sum();
            let saturated = load[r.0 as usize] + slack >= l.surplus_milli(r).unwrap() as u128;
            // s.rate / w(s) >= o.rate / w(o) - 1, cross-multiplied.
            let maximal = on.iter().all(|o| {
                (s.rate.bytes_per_sec() as u128 + w(l, s)) * w(l, o)
                    >= o.rate.bytes_per_sec() as u128 * w(l, s)
            });
            saturated && maximal
        });
        assert!(ok, "flow {:?} at {} has no bottleneck", s.key, s.rate);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn best_effort_shares_never_exceed_the_surplus(ops in ops()) {
        for t in topologies() {
            replay(t, &ops, |l| {
                assert_feasible(l, &thesis_rule(l));
                assert_feasible(l, &max_min(l));
            });
        }
    }

    #[test]
    fn max_min_shares_are_feasible_and_every_flow_has_a_bottleneck(ops in ops()) {
        for t in topologies() {
            replay(t, &ops, |l| {
                let m = max_min(l);
                assert_feasible(l, &m);
                assert_max_min_fair(l, &m);
            });
        }
    }

    #[test]
    fn incremental_thesis_shares_match_a_full_recomputation(ops in ops()) {
        for t in topologies() {
            let mut inc = ThesisShares::new();
            replay(t, &ops, |l| {
                inc.update(l);
                let full = thesis_rule(l);
                assert_eq!(inc.iter().count(), full.len());
                for s in &full {
                    assert_eq!(inc.get(&s.key), Some(s));
                }
            });
        }
    }
}

#[test]
fn with_a_sharing_capacity_the_shares_are_the_thesis_measured_ones() {
    // Thesis §5.6, Fig 5.11 and 5.12: 38, 18, 2 × 39 and 2 × 29 MB/s — a node sharing
    // 78 MB/s among its best-effort flows; a flow alone still sends at peak rate.
    let current = |t: &mut ThesisShares, l: &mut Ledger, f: &Flow| {
        t.update(l);
        t.get(&f.key).unwrap().rate
    };
    let capped = || {
        let topo = crossbar(4, &HostDefaults::thesis())
            .unwrap()
            .build()
            .unwrap();
        Ledger::new(Arc::new(topo.with_best_effort_capacity(Some(mbs(78.0)))))
    };
    let mut l = capped();
    let mut t = ThesisShares::new();
    let f = be("be", 0, 1);
    l.request(f.clone()).unwrap();
    assert_eq!(current(&mut t, &mut l, &f), mbs(81.8), "alone: peak rate");
    assert_eq!(t.get(&f.key).unwrap().bottleneck, Bottleneck::Peak);
    let p1 = l
        .request(Flow::premium("p1", NodeId(0), NodeId(2), mbs(40.0)))
        .unwrap();
    assert_eq!(current(&mut t, &mut l, &f), mbs(38.0));
    let p2 = l
        .request(Flow::premium("p2", NodeId(0), NodeId(3), mbs(20.0)))
        .unwrap();
    assert_eq!(current(&mut t, &mut l, &f), mbs(18.0));
    l.release(&p1.key).unwrap();
    l.release(&p2.key).unwrap();
    assert_eq!(current(&mut t, &mut l, &f), mbs(81.8), "alone again: peak");
    assert_eq!(
        rate_of(&thesis_rule(&l), &f),
        mbs(81.8),
        "the full rule agrees"
    );

    let mut l = capped();
    let mut t = ThesisShares::new();
    let (a, b) = (be("a", 0, 1), be("b", 0, 2));
    l.request(a.clone()).unwrap();
    l.request(b.clone()).unwrap();
    assert_eq!(current(&mut t, &mut l, &a), mbs(39.0));
    assert_eq!(t.get(&b.key).unwrap().rate, mbs(39.0));
    l.request(Flow::premium("p", NodeId(0), NodeId(3), mbs(20.0)))
        .unwrap();
    assert_eq!(current(&mut t, &mut l, &a), mbs(29.0));
    assert_eq!(t.get(&b.key).unwrap().rate, mbs(29.0));
    assert_eq!(
        rate_of(&thesis_rule(&l), &a),
        mbs(29.0),
        "the full rule agrees"
    );
}

#[test]
fn a_sharing_capacity_does_not_limit_admission_or_switch_ports() {
    // Premium flows are admitted against the full 81.8 MB/s; only best-effort sharing
    // on nodes is capped.
    let topo = crossbar(4, &HostDefaults::thesis())
        .unwrap()
        .build()
        .unwrap();
    let mut l = Ledger::new(Arc::new(topo.with_best_effort_capacity(Some(mbs(78.0)))));
    let mut t = ThesisShares::new();
    l.request(Flow::premium("p", NodeId(0), NodeId(1), mbs(80.0)))
        .unwrap();
    let f = be("be", 2, 1);
    l.request(f.clone()).unwrap();
    t.update(&mut l);
    // n1 receives 80 premium: its combined capacity 81.8 leaves 1.8; the sharing cap
    // would leave nothing, so the share is zero (the flow must not send).
    assert_eq!(t.get(&f.key).unwrap().rate, mbs(0.0));
}

#[test]
fn a_host_best_effort_capacity_is_read_from_the_topology_file() {
    let text = "[defaults]\nt = \"48us\"\nbmax = \"81.8MB/s\"\nbest_effort = \"78MB/s\"\n\n[build]\nshape = \"crossbar\"\nhosts = 3\n";
    let topo = crate::topology::file::load("t.toml", text).unwrap();
    assert_eq!(topo.node(NodeId(0)).capacity.best_effort, Some(mbs(78.0)));
    let mut l = Ledger::new(Arc::new(topo));
    let f = be("be", 0, 1);
    l.request(f.clone()).unwrap();
    l.request(Flow::premium("p", NodeId(0), NodeId(2), mbs(40.0)))
        .unwrap();
    assert_eq!(rate_of(&thesis_rule(&l), &f), mbs(38.0));
}
