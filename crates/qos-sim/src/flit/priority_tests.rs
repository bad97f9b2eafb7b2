//! Tests of BookSim2's traffic classes and packet priorities in the BookSim2-equivalent
//! network: classes sharing every VC, the terminal's choice of class, and the
//! separable allocators' arbiters ranking requests by priority (`router.priority`).
//! The figures they are held to were measured with BookSim2 (booksim/booksim2
//! 28f4329) on the same network; docs/flit-network.md gives the side-by-side runs.

use super::config::*;
use super::stats::RunResult;
use super::{simulate, FlitConfig};

/// BookSim2's 4×4 mesh of `scenarios/flit/booksim-extra/mesh4-classes.cfg`: 4 VCs of 4
/// flits, credit delay 2, 5-flit packets, two uniform classes sharing every VC, each
/// at `rate`, class 0 of priority 1 and class 1 of priority 0 under `rule`.
fn two_classes(rule: PriorityRule, rate: f64, seed: u64) -> FlitConfig {
    let mut c = FlitConfig::booksim2(TopologySpec::mesh(4), rate);
    c.seed = seed;
    c.router.buffer = 4;
    c.router.credit_delay = Some(2);
    c.router.priority = rule;
    // BookSim2's stability rule (`latency_thres` 500, checked every 1,000 cycles).
    c.phases = Phases {
        drain_max: 20_000,
        abort_latency: Some(500.0),
        sample_period: 1_000,
        ..Phases::fixed(3_000, 20_000)
    };
    let mut class = c.classes[0].clone();
    class.vls = vec![0, 1, 2, 3];
    class.packet_flits = 5;
    class.rate = rate;
    c.classes = vec![
        ClassConfig {
            name: "high".into(),
            priority: 1,
            ..class.clone()
        },
        ClassConfig {
            name: "low".into(),
            priority: 0,
            ..class
        },
    ];
    if rule == PriorityRule::None {
        // BookSim2 without priorities ranks no packet above another, at the terminal
        // either.
        for cl in &mut c.classes {
            cl.priority = 0;
        }
    }
    c
}

/// Mean latency of each class over seeds 1-3.
fn latencies(rule: PriorityRule, rate: f64) -> (f64, f64) {
    let runs: Vec<RunResult> = (1..=3)
        .map(|s| simulate(&two_classes(rule, rate, s)).unwrap())
        .collect();
    for r in &runs {
        assert!(!r.unstable, "{rule:?} at {rate}: unstable ({:?})", r.stop);
    }
    let mean = |c: usize| runs.iter().map(|r| r.classes[c].latency.avg).sum::<f64>() / 3.0;
    (mean(0), mean(1))
}

#[test]
fn class_priority_serves_the_high_class_first_as_booksim2_does() {
    // BookSim2, seeds 1-3 at 0.05 packets/node/cycle per class (0.5 flits/node/cycle
    // in all): class 0 28.0 cycles, class 1 42.7 with `priority = class`; 32.7 and
    // 32.8 with `priority = none` (`scripts/booksim-compare BOOKSIM
    // scenarios/flit/booksim-extra/mesh4-classes.cfg [--set priority=none]`).
    let (hi, lo) = latencies(PriorityRule::Class, 0.05);
    assert!((hi - 28.0).abs() < 0.1 * 28.0, "high class {hi:.1}");
    assert!((lo - 42.7).abs() < 0.1 * 42.7, "low class {lo:.1}");
    let (a, b) = latencies(PriorityRule::None, 0.05);
    assert!(
        (a - 32.7).abs() < 0.1 * 32.7,
        "class 0 without priorities {a:.1}"
    );
    assert!(
        (b - 32.8).abs() < 0.1 * 32.8,
        "class 1 without priorities {b:.1}"
    );
}

#[test]
fn under_islip_priority_chooses_the_vc_an_input_asks_with() {
    // `mesh4-classes-islip.cfg`: the same classes under BookSim2's iSLIP allocators,
    // credit delay 1. iSLIP's arbiters ignore priorities, but BookSim2's router asks
    // each output with the input's highest-priority VC wanting it (`_SWAllocAddReq`),
    // and its terminal sends the higher class first. BookSim2, seeds 1-3 at 0.05:
    // class 0 29.2 cycles, class 1 37.0, a gap of 7.8 (2.9 with the priority at the
    // terminal alone).
    let mut runs = Vec::new();
    for seed in 1..=3 {
        let mut c = two_classes(PriorityRule::Class, 0.05, seed);
        c.router.allocator = Some(Allocator::Islip);
        c.router.credit_delay = Some(1);
        runs.push(simulate(&c).unwrap());
    }
    let mean = |c: usize| runs.iter().map(|r| r.classes[c].latency.avg).sum::<f64>() / 3.0;
    let (hi, lo) = (mean(0), mean(1));
    assert!((hi - 29.2).abs() < 0.1 * 29.2, "high class {hi:.1}");
    assert!((lo - 37.0).abs() < 0.1 * 37.0, "low class {lo:.1}");
    assert!((lo - hi - 7.8).abs() < 0.25 * 7.8, "gap {:.1}", lo - hi);
}

#[test]
fn the_priority_arbiters_with_equal_priorities_are_the_round_robin_ones() {
    // `priority = "class"` with every class of priority 0 takes the routers' priority
    // paths (the switch allocation of `step_router_prio`, the ranked VC arbiters) and
    // must decide exactly as the round-robin paths without priorities.
    for (rate, seed) in [(0.03, 1), (0.06, 2)] {
        let plain = two_classes(PriorityRule::None, rate, seed);
        let mut ranked = plain.clone();
        ranked.router.priority = PriorityRule::Class;
        let (a, b) = (simulate(&plain).unwrap(), simulate(&ranked).unwrap());
        assert_eq!(a.flit_hops, b.flit_hops, "{rate}");
        assert_eq!(a.classes, b.classes, "{rate}");
    }
}

#[test]
fn classes_sharing_lanes_never_start_a_packet_on_a_lane_another_holds() {
    // Two classes sharing every VC at a light load: a terminal that started a packet
    // on a lane another class's packet holds would interleave their flits in one VC
    // (at 0.04 per class that broke the run: unstable, the in-flight ages garbled).
    let r = simulate(&two_classes(PriorityRule::None, 0.04, 1)).unwrap();
    assert!(!r.unstable, "{:?}", r.stop);
    for c in &r.classes {
        assert!(
            (c.accepted - c.offered).abs() < 0.05 * c.offered,
            "{}: accepted {} of {}",
            c.name,
            c.accepted,
            c.offered
        );
        assert!(c.latency.avg < 40.0, "{}: {}", c.name, c.latency.avg);
    }
}

#[test]
fn priorities_are_refused_where_they_are_not_modelled() {
    let refused = |c: FlitConfig, says: &str| {
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    };
    // BookSim2's delays written stage by stage, so that the allocator and the HCA may
    // be others.
    let unnamed = |rule| {
        let mut c = two_classes(rule, 0.01, 1);
        c.router.allocator = Some(c.allocator());
        c.hca.model = Some(c.hca_model());
        c.router.delays = DelaySpec::Stages(c.delays());
        c.router.credit_delay = None;
        c
    };
    let mut c = unnamed(PriorityRule::Class);
    c.router.allocator = Some(Allocator::VlArbiters);
    refused(c, "apply to BookSim2's allocators");
    let mut c = two_classes(PriorityRule::Class, 0.01, 1);
    c.router.input_speedup = Some(2);
    refused(c, "router.input_speedup = 2: not modelled");
    let mut c = unnamed(PriorityRule::Age);
    c.hca.model = Some(HcaModel::Dma);
    refused(c, "needs hca.model = \"source_queue\"");
    // Yum's DMA HCA keeps one class per lane.
    let mut c = unnamed(PriorityRule::None);
    c.hca.model = Some(HcaModel::Dma);
    refused(c, "already belongs to another class");
}
