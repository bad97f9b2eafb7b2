//! Output VL buffers (`router.output_buffer`, Yum §3.1's stage 5): a lane keeps its
//! share of the link across the gaps between its packets, the zero-load latency is
//! the pipeline's, and the buffers never deadlock a mesh or a torus.

use qos_core::vlarb::wrr::{Entry, Pointer};
use qos_core::vlarb::VlArbConfig;

use super::config::*;
use super::tests::{base, class, stream, CUSTOM};
use super::{simulate, FlitConfig, FlitError};

/// Two sources on a 3-port crossbar in Yum's five-stage router, on lanes 0 and 1, both
/// sending `len`-flit packets to node 0 as fast as they can, the link arbitrated by
/// `arb`, with `output_buffer` flits of output buffer per lane: each lane's share of
/// the link.
fn two_lanes(arb: VlArbConfig, len: u32, output_buffer: u16) -> Vec<f64> {
    let mut cfg = base(TopologySpec::Crossbar { ports: 3 }, Delays::YUM, 20_000);
    cfg.phases.warmup = 1_000;
    cfg.phases.drain_max = 0;
    cfg.router.output_arbitration = arb;
    cfg.router.output_buffer = Some(output_buffer);
    cfg.classes = (0..2)
        .map(|v| class(&format!("c{v}"), &[v], len, 0.0, Pattern::Uniform))
        .collect();
    cfg.streams = (0..2)
        .map(|v| stream(v + 1, 0, &format!("c{v}"), len as u64))
        .collect();
    let r = simulate(&cfg).unwrap();
    r.flows.iter().map(|f| f.accepted).collect()
}

fn wrr(a: u8, b: u8, pointer: Pointer) -> VlArbConfig {
    VlArbConfig::Wrr {
        table: vec![Entry { vl: 0, weight: a }, Entry { vl: 1, weight: b }],
        pointer,
    }
}

fn iba_high(a: u8, b: u8, pointer: Pointer) -> VlArbConfig {
    VlArbConfig::Iba {
        high: vec![Entry { vl: 0, weight: a }, Entry { vl: 1, weight: b }],
        low: vec![],
        limit: 255,
        pointer,
        exact_limit: None,
    }
}

#[test]
fn output_buffers_keep_a_lanes_wrr_share_across_the_gaps_between_its_packets() {
    // Weights above the packet length: between two packets a lane's next header
    // spends a cycle in routing and one in lane allocation. Without output buffers the
    // link's arbiter sees the lane idle then and gives its turn away (the control);
    // with them the lane's flits wait in its buffer and the shares are the tables'
    // (Yum §3.3: "exact bandwidth").
    let cases = [
        (wrr(8, 4, Pointer::Fast), 4, [2.0 / 3.0, 1.0 / 3.0]),
        (wrr(8, 4, Pointer::Slow), 4, [2.0 / 3.0, 1.0 / 3.0]),
        (iba_high(200, 50, Pointer::Slow), 40, [0.8, 0.2]),
        (iba_high(200, 50, Pointer::Fast), 40, [0.8, 0.2]),
    ];
    for (arb, len, want) in cases {
        let got = two_lanes(arb.clone(), len, 10);
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() < 0.005,
                "{arb:?} {len}-flit: {got:?} vs {want:?}"
            );
        }
        let without = two_lanes(arb.clone(), len, 0);
        assert!(
            (without[0] - want[0]).abs() > 0.05,
            "{arb:?} without output buffers: {without:?} (the control must miss)"
        );
    }
}

#[test]
fn output_buffers_give_best_effort_its_minimum_under_a_fractional_limit() {
    // L = 5/2 (B_p = 0.6 B): the low-priority lane is owed B/L = 0.4 of the link.
    let arb = VlArbConfig::Iba {
        high: vec![Entry { vl: 0, weight: 1 }],
        low: vec![Entry { vl: 1, weight: 1 }],
        limit: 255,
        pointer: Pointer::Fast,
        exact_limit: Some(qos_core::vlarb::iba::limit_of_high_priority(5, 3)),
    };
    let got = two_lanes(arb.clone(), 8, 10);
    assert!((got[1] - 0.4).abs() < 0.002, "{got:?}");
    let without = two_lanes(arb, 8, 0);
    assert!(without[1] < 0.39, "the control must miss: {without:?}");
}

#[test]
fn output_buffers_leave_the_zero_load_latency_of_every_pipeline_unchanged() {
    for delays in [Delays::REFERENCE, Delays::YUM, CUSTOM] {
        for top in [
            TopologySpec::Crossbar { ports: 8 },
            TopologySpec::mesh(4),
            TopologySpec::torus(5),
        ] {
            let mut cfg = base(top.clone(), delays, 10);
            cfg.router.buffer = 16;
            cfg.router.output_buffer = Some(4);
            let fab = top.fabric().unwrap();
            let n = fab.nodes;
            for (src, dst) in [(0, n - 1), (1, 2), (n / 2, 0)] {
                cfg.streams = vec![stream(src, dst, "data", 1_000_000)];
                let r = simulate(&cfg).unwrap();
                let h = fab.routers_on_path(src, dst) as u64;
                let want = h * delays.per_hop() + delays.link as u64 + 1 + 39;
                assert_eq!(
                    r.flows[0].latency.max, want,
                    "{top:?} {delays:?} {src}->{dst}"
                );
            }
        }
    }
}

#[test]
fn output_buffers_carry_any_load_on_mesh_and_torus_without_deadlock() {
    // Past saturation, one- and several-flit buffers: every run ends (no watchdog),
    // delivers, and accepts what it offers below saturation.
    for top in [TopologySpec::mesh(4), TopologySpec::torus(4)] {
        for ob in [1, 3] {
            for rate in [0.005, 0.05] {
                let mut cfg = base(top.clone(), Delays::YUM, 4_000);
                cfg.phases.warmup = 1_000;
                cfg.router.output_buffer = Some(ob);
                cfg.classes = vec![class("data", &[0, 1, 2, 3], 8, rate, Pattern::Uniform)];
                let r = simulate(&cfg).unwrap_or_else(|e| panic!("{top:?} ob {ob} {rate}: {e}"));
                assert!(r.total.accepted > 0.0);
                if rate < 0.01 {
                    let (o, a) = (r.total.offered, r.total.accepted);
                    assert!((a - o).abs() < 0.05 * o, "{top:?} ob {ob}: {a} of {o}");
                }
            }
        }
    }
}

#[test]
fn output_buffers_are_refused_where_they_do_not_apply() {
    let mut cfg = base(TopologySpec::mesh(4), Delays::REFERENCE, 10);
    cfg.router.output_buffer = Some(10);
    cfg.router.allocator = Some(Allocator::SeparableInputFirst);
    let e = simulate(&cfg).unwrap_err();
    assert!(
        matches!(&e, FlitError::Config { key, .. } if key == "router.output_buffer"),
        "{e}"
    );
    cfg.router.allocator = Some(Allocator::VlArbiters);
    cfg.router.output_buffer = Some(256);
    assert!(simulate(&cfg).is_err());
    cfg.router.output_buffer = Some(10);
    let mut zero = cfg.clone();
    zero.router.delays = DelaySpec::Stages(Delays {
        switch_alloc: 0,
        crossbar: 0,
        link: 2,
        ..Delays::REFERENCE
    });
    assert!(simulate(&zero).is_err());
}

#[test]
fn yums_router_has_its_output_buffers_unless_told_otherwise() {
    // `delays = "yum"` names Yum's router, whose stage 5 buffers 10 flits per lane
    // (Table 1); every other router has none unless the scenario gives a size.
    let mut cfg = base(TopologySpec::mesh(4), Delays::YUM, 10);
    cfg.router.delays = DelaySpec::Preset(DelayPreset::Yum);
    assert_eq!(cfg.output_buffer(), 10);
    cfg.router.output_buffer = Some(0);
    assert_eq!(cfg.output_buffer(), 0);
    cfg.router.output_buffer = None;
    cfg.router.delays = DelaySpec::Preset(DelayPreset::Reference);
    assert_eq!(cfg.output_buffer(), 0);
    cfg.router.delays = DelaySpec::Stages(Delays::YUM);
    assert_eq!(cfg.output_buffer(), 0);
    let bs = FlitConfig::booksim2(TopologySpec::mesh(4), 0.01);
    assert_eq!(bs.output_buffer(), 0);
}
