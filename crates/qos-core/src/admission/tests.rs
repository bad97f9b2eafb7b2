//! Admission control against the thesis's examples (§3.3.1, §5.3, §5.4) and the
//! no-over-commit invariant under any order of requests and releases.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::flow::{Flow, FlowKey};
use crate::topology::build::{cascade, crossbar, mesh, HostDefaults};
use crate::topology::{NodeCapacity, NodeId, Topology};

fn mbs(x: f64) -> Bandwidth {
    Bandwidth::from_mb_per_sec(x)
}

fn thesis_crossbar(hosts: u16) -> Arc<Topology> {
    Arc::new(
        crossbar(hosts, &HostDefaults::thesis())
            .unwrap()
            .build()
            .unwrap(),
    )
}

fn n(t: &Topology, name: &str) -> NodeId {
    t.node_id(name).unwrap()
}

#[test]
fn idt_is_t_times_bmax_over_the_request() {
    let t = thesis_crossbar(3);
    let mut l = Ledger::new(t.clone());
    // Bmax / 2 gets IDT = 2T (thesis §5.4.1: the pair (2T, 2T) shares 81.8 MB/s).
    let g = l
        .request(Flow::premium("f", n(&t, "n0"), n(&t, "n1"), mbs(40.9)))
        .unwrap();
    assert_eq!(g.idt, Some(Duration::from_us(96)));
    // 40 MB/s: 48 µs · 81.8 / 40 = 98.16 µs = 196.32 ticks of 0.5 µs.
    let idt = idt_for(RateParams::thesis(), mbs(40.0)).unwrap();
    assert_eq!(idt, Duration::from_ns(98_160));
    // Bmax itself: IDT = T, the peak rate.
    assert_eq!(
        idt_for(RateParams::thesis(), mbs(81.8)),
        Some(Duration::from_us(48))
    );
}

#[test]
fn the_idt_pairs_of_thesis_5_4_come_from_the_bandwidth_ratios() {
    // §5.4.1: (10T/3, 10T/7) shares Bmax 3 : 7; §5.4.2: (10T, 10T/9) shares it 1 : 9.
    let rp = RateParams::thesis();
    let t = rp.t.as_ps();
    let idt = |share: f64| idt_for(rp, mbs(81.8 * share)).unwrap().as_ps();
    assert_eq!(idt(0.3), t * 10 / 3);
    assert_eq!(idt(0.7), (t * 10).div_ceil(7));
    assert_eq!(idt(0.1), t * 10);
    assert_eq!(idt(0.9), (t * 10).div_ceil(9));
    // §5.4.1 triple (2T, 4T, 4T): 2 : 1 : 1.
    assert_eq!(idt(0.5), 2 * t);
    assert_eq!(idt(0.25), 4 * t);
}

#[test]
fn source_node_capacity_covers_flows_originating_or_terminating_there() {
    let t = thesis_crossbar(3);
    let mut l = Ledger::new(t.clone());
    let (a, b, c) = (n(&t, "n0"), n(&t, "n1"), n(&t, "n2"));
    // Incoming 16.37 MB/s at b (thesis §5.4.3, IDT = 500 ticks)...
    l.request(Flow::premium("in", a, b, mbs(16.37))).unwrap();
    // ...leaves b about 65 MB/s to send (Fig 5.4: ≈ 65.0 MB/s).
    l.request(Flow::premium("out1", b, c, mbs(32.7))).unwrap();
    l.request(Flow::premium("out2", b, a, mbs(32.7))).unwrap();
    let e = l
        .request(Flow::premium("out3", b, c, mbs(1.0)).with_key(FlowKey {
            priority: 1,
            ..FlowKey::between(b, c)
        }))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "rejected: node n1 send + receive: 81.77 MB/s reserved + 1 MB/s requested > 81.8 MB/s \
         (criterion 1: source node)"
    );
}

#[test]
fn a_cheaper_receive_cost_lets_a_receiving_node_send_more() {
    let mut d = HostDefaults::thesis();
    d.capacity = NodeCapacity {
        send: Some(d.rate.bmax),
        receive: None,
        combined: Some(d.rate.bmax),
        receive_cost_permille: 500,
        best_effort: None,
    };
    let t = Arc::new(crossbar(3, &d).unwrap().build().unwrap());
    let mut l = Ledger::new(t.clone());
    let (a, b, c) = (n(&t, "n0"), n(&t, "n1"), n(&t, "n2"));
    l.request(Flow::premium("in", a, b, mbs(40.0))).unwrap();
    // 40 MB/s in costs 20 MB/s of b's combined limit: 61.8 MB/s remain to send.
    l.request(Flow::premium("out", b, c, mbs(61.8))).unwrap();
    assert_eq!(
        l.reserved(ResourceId(3 * b.0 + 2)),
        mbs(81.8),
        "combined = 61.8 + 0.5 · 40"
    );
}

#[test]
fn destination_node_is_criterion_three() {
    let t = thesis_crossbar(3);
    let mut l = Ledger::new(t.clone());
    let (a, b, c) = (n(&t, "n0"), n(&t, "n1"), n(&t, "n2"));
    l.request(Flow::premium("x", a, c, mbs(60.0))).unwrap();
    let e = l.request(Flow::premium("y", b, c, mbs(30.0))).unwrap_err();
    let AdmitError::Rejected(r) = e else {
        panic!("{e}")
    };
    assert_eq!(r.criterion, Criterion::DestinationNode);
    assert_eq!(r.resource, "node n2 send + receive");
}

#[test]
fn a_full_switch_port_rejects_with_the_numbers() {
    // Fig 2.4: two cascaded switches; flows from s0's hosts to s1 share the trunk.
    let d = HostDefaults::thesis();
    let t = Arc::new(cascade(2, 4, &d, mbs(160.0)).unwrap().build().unwrap());
    let mut l = Ledger::new(t.clone());
    for (i, bw) in [(0, 70.0), (1, 60.0)] {
        let f = Flow::premium("f", NodeId(i), NodeId(4 + i), mbs(bw));
        l.request(f).unwrap();
    }
    let e = l
        .request(Flow::premium("g", NodeId(2), NodeId(6), mbs(40.0)))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "rejected: switch s0 port 4: 130 MB/s reserved + 40 MB/s requested > 160 MB/s \
         (criterion 2: switch output port)"
    );
    // 30 MB/s still fits.
    l.request(Flow::premium("g", NodeId(2), NodeId(6), mbs(30.0)))
        .unwrap();
}

#[test]
fn fig_1_3_flows_contend_at_an_end_node_and_at_a_switch_port() {
    // Four nodes on two cascaded switches: n0, n1 on s0; n2, n3 on s1; a 100 MB/s trunk.
    let d = HostDefaults::thesis();
    let t = Arc::new(cascade(2, 2, &d, mbs(100.0)).unwrap().build().unwrap());
    let mut l = Ledger::new(t.clone());
    let (n0, n1, n2, n3) = (n(&t, "n0"), n(&t, "n1"), n(&t, "n2"), n(&t, "n3"));
    l.request(Flow::premium("flow 2", n0, n2, mbs(60.0)))
        .unwrap();
    // Flow 3 shares the trunk port of s0 with flow 2.
    let AdmitError::Rejected(r) = l
        .request(Flow::premium("flow 3", n1, n3, mbs(50.0)))
        .unwrap_err()
    else {
        panic!("expected a rejection")
    };
    assert_eq!(
        (r.criterion, r.resource.as_str()),
        (Criterion::SwitchPort, "switch s0 port 2")
    );
    // Flow 1 shares node n0 with flow 2.
    let AdmitError::Rejected(r) = l
        .request(Flow::premium("flow 1", n0, n1, mbs(30.0)))
        .unwrap_err()
    else {
        panic!("expected a rejection")
    };
    assert_eq!(r.criterion, Criterion::SourceNode);
    l.request(Flow::premium("flow 3", n1, n3, mbs(40.0)))
        .unwrap();
    l.request(Flow::premium("flow 1", n0, n1, mbs(21.8)))
        .unwrap();
}

#[test]
fn release_returns_capacity_and_unknown_release_is_an_error() {
    let t = thesis_crossbar(2);
    let mut l = Ledger::new(t.clone());
    let (a, b) = (n(&t, "n0"), n(&t, "n1"));
    let g = l.request(Flow::premium("x", a, b, mbs(80.0))).unwrap();
    assert!(l.request(Flow::premium("y", b, a, mbs(10.0))).is_err());
    l.release(&g.key).unwrap();
    assert_eq!(l.release(&g.key), Err(UnknownFlow(g.key)));
    l.request(Flow::premium("y", b, a, mbs(80.0))).unwrap();
    assert_eq!(l.len(), 1);
}

#[test]
fn zero_bandwidth_duplicates_and_self_flows_are_refused() {
    let t = thesis_crossbar(2);
    let mut l = Ledger::new(t.clone());
    let (a, b) = (n(&t, "n0"), n(&t, "n1"));
    let e = l
        .request(Flow::premium("z", a, b, Bandwidth::ZERO))
        .unwrap_err();
    assert_eq!(e, AdmitError::ZeroBandwidth);
    l.request(Flow::best_effort("x", a, b)).unwrap();
    let e = l.request(Flow::premium("y", a, b, mbs(1.0))).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    let e = l.request(Flow::premium("s", a, a, mbs(1.0))).unwrap_err();
    assert!(e.to_string().contains("same node"), "{e}");
    let e = l
        .request(Flow::premium("big", b, a, mbs(90.0)))
        .unwrap_err();
    assert!(e.to_string().contains("Bmax 81.8 MB/s"), "{e}");
}

#[test]
fn an_idt_beyond_the_largest_duration_is_refused_not_saturated() {
    // Regression: t = 1 ms, bmax = 20 GB/s, 1 B/s gives T·Bmax/B = 2·10^19 ps,
    // more than 2^64 - 1: the IDT used to saturate silently at u64::MAX ps.
    let rate = RateParams {
        t: Duration::from_ms(1),
        bmax: Bandwidth::from_bytes_per_sec(20_000_000_000),
    };
    let one = Bandwidth::from_bytes_per_sec(1);
    assert_eq!(idt_for(rate, one), None);
    assert_eq!(min_rate(rate), Bandwidth::from_bytes_per_sec(2));
    let two = Bandwidth::from_bytes_per_sec(2);
    assert_eq!(
        idt_for(rate, two),
        Some(Duration::from_ps(10_000_000_000_000_000_000))
    );
    // The thesis NIC paces 1 B/s.
    assert_eq!(min_rate(RateParams::thesis()), one);
    let d = HostDefaults {
        rate,
        capacity: crate::topology::NodeCapacity::peak(rate.bmax),
        link: Bandwidth::from_bytes_per_sec(40_000_000_000),
    };
    let t = Arc::new(crossbar(2, &d).unwrap().build().unwrap());
    let mut l = Ledger::new(t.clone());
    let e = l
        .request(Flow::premium("slow", n(&t, "n0"), n(&t, "n1"), one))
        .unwrap_err();
    assert!(
        matches!(e, AdmitError::BelowMinRate { .. }) && e.to_string().contains("2 B/s"),
        "{e}"
    );
    assert!(l.is_empty());
    let g = l
        .request(Flow::premium("ok", n(&t, "n0"), n(&t, "n1"), two))
        .unwrap();
    assert!(g.idt.is_some());
}

#[test]
fn changed_resources_are_reported_once() {
    let t = thesis_crossbar(2);
    let mut l = Ledger::new(t.clone());
    l.request(Flow::premium("x", NodeId(0), NodeId(1), mbs(1.0)))
        .unwrap();
    let changed = l.take_changed();
    // send + combined at n0, port to n1, combined at n1 (receive is unlimited).
    assert_eq!(changed.resources.len(), 4);
    assert_eq!(l.take_changed(), Changes::default());
    let b = l
        .request(Flow::best_effort("b", NodeId(1), NodeId(0)))
        .unwrap();
    l.release(&b.key).unwrap();
    assert_eq!(l.take_changed().released_best_effort, vec![b.key]);
}

/// An operation of the property test: request (src, dst, prio, MB/s) or release #i.
#[derive(Debug, Clone)]
enum Op {
    Request(u32, u32, u8, u32),
    Release(usize),
}

fn ops(nodes: u32) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (0..nodes, 0..nodes, 0u8..2, 1u32..70).prop_map(|(a, b, p, m)| Op::Request(a, b, p, m)),
        1 => (0usize..64).prop_map(Op::Release),
    ];
    proptest::collection::vec(op, 1..80)
}

/// Recomputes every resource's load from the flows held and checks it fits.
fn assert_within_capacity(l: &Ledger) {
    let mut load = vec![0u128; l.resource_count()];
    for e in l.flows() {
        if let Class::Premium { bandwidth } = e.flow.class {
            for u in &e.uses {
                load[u.resource.0 as usize] += bandwidth.bytes_per_sec() as u128 * u.cost as u128;
            }
        }
    }
    for (r, &x) in load.iter().enumerate() {
        let r = ResourceId(r as u32);
        if let Some(cap) = l.capacity(r) {
            assert!(
                x <= cap.bytes_per_sec() as u128 * 1000,
                "{} over-committed",
                l.label(r)
            );
        }
        assert_eq!(
            l.reserved(r).bytes_per_sec() as u128,
            x / 1000,
            "ledger drifted"
        );
    }
}

fn run(t: Arc<Topology>, ops: Vec<Op>) {
    let nodes = t.nodes().len() as u32;
    let mut l = Ledger::new(t);
    let mut held: Vec<FlowKey> = Vec::new();
    for op in ops {
        match op {
            Op::Request(a, b, p, m) => {
                let key = FlowKey {
                    priority: p,
                    ..FlowKey::between(NodeId(a % nodes), NodeId(b % nodes))
                };
                let f = Flow::premium("p", key.src.node, key.dst.node, mbs(m as f64)).with_key(key);
                if l.request(f).is_ok() {
                    held.push(key);
                }
            }
            Op::Release(i) if !held.is_empty() => {
                let key = held.swap_remove(i % held.len());
                l.release(&key).unwrap();
            }
            Op::Release(_) => {}
        }
        assert_within_capacity(&l);
    }
}

proptest! {
    #[test]
    fn an_admitted_set_never_exceeds_any_capacity_on_a_cascade(ops in ops(8)) {
        let d = HostDefaults::thesis();
        run(Arc::new(cascade(2, 4, &d, mbs(100.0)).unwrap().build().unwrap()), ops);
    }

    #[test]
    fn an_admitted_set_never_exceeds_any_capacity_on_a_mesh(ops in ops(9)) {
        run(Arc::new(mesh(3, &HostDefaults::thesis()).unwrap().build().unwrap()), ops);
    }
}
