//! Tests of runs on threads: the same seed gives the same result on one thread and on
//! several, for meshes and tori, uniform and transpose traffic, Yum's router and
//! BookSim2's, below and past saturation.

use super::config::{FlitConfig, Pattern, Phases, PriorityRule, TopologySpec};
use super::engine::Network;
use super::stats::RunResult;

fn run(cfg: &FlitConfig, threads: usize) -> RunResult {
    let mut net = Network::new(cfg).expect("valid configuration");
    net.set_threads(threads).expect("threads");
    net.run().expect("runs")
}

/// Short phases, so that a debug build runs each case in well under a second.
fn short(mut c: FlitConfig, pattern: Pattern, seed: u64) -> FlitConfig {
    c.phases = Phases::new(300, 1_200);
    c.classes[0].pattern = pattern;
    c.seed = seed;
    c
}

/// (name, configuration, thread counts to compare with one thread).
fn cases() -> Vec<(String, FlitConfig, Vec<usize>)> {
    let (u, t) = (Pattern::Uniform, Pattern::Transpose);
    let mut torus = FlitConfig::reference(6, 0.012);
    torus.topology = TopologySpec::torus(6);
    let bs_mesh = FlitConfig::booksim2(TopologySpec::mesh(6), 0.012);
    let bs_torus = FlitConfig::booksim2(TopologySpec::torus(6), 0.016);
    // BookSim2's default router (iSLIP, credit_delay 0, routing_delay 1) with two
    // iterations and two crossbar inputs per port: the general allocation.
    let mut bs_islip = FlitConfig::booksim2(TopologySpec::mesh(6), 0.014);
    bs_islip.router.allocator = Some(super::config::Allocator::Islip);
    bs_islip.router.credit_delay = Some(0);
    bs_islip.router.routing_delay = Some(1);
    bs_islip.router.alloc_iters = Some(2);
    bs_islip.router.input_speedup = Some(2);
    // BookSim2's classes sharing every VC, ranked by class priority and by age.
    let bs_classes = |rule| {
        let mut c = FlitConfig::booksim2(TopologySpec::mesh(6), 0.006);
        c.router.priority = rule;
        let mut low = c.classes[0].clone();
        low.name = "low".into();
        low.pattern = Pattern::Transpose;
        c.classes[0].priority = 1;
        c.classes.push(low);
        c
    };
    // Yum's router (VL arbiters, one-cycle credits) and BookSim2's (separable
    // allocator, source queues, 3-cycle credits), near saturation.
    [
        (
            "booksim2 mesh6 class priorities",
            bs_classes(PriorityRule::Class),
            u.clone(),
            6,
            vec![2],
        ),
        (
            "booksim2 mesh6 age priority",
            bs_classes(PriorityRule::Age),
            u.clone(),
            7,
            vec![2],
        ),
        (
            "mesh6 uniform",
            FlitConfig::reference(6, 0.012),
            u.clone(),
            1,
            vec![2, 3],
        ),
        (
            "mesh6 transpose",
            FlitConfig::reference(6, 0.012),
            t.clone(),
            2,
            vec![2],
        ),
        ("torus6 uniform", torus.clone(), u.clone(), 2, vec![2]),
        ("torus6 transpose", torus, t.clone(), 3, vec![3]),
        ("booksim2 mesh6 transpose", bs_mesh, t, 1, vec![2]),
        ("booksim2 torus6 uniform", bs_torus, u.clone(), 3, vec![2]),
        (
            "booksim2 islip mesh6 uniform",
            bs_islip,
            u.clone(),
            5,
            vec![2],
        ),
        (
            "mesh8 uniform",
            FlitConfig::reference(8, 0.008),
            u,
            4,
            vec![4],
        ),
    ]
    .into_iter()
    .map(|(n, c, p, seed, th)| (format!("{n} seed {seed}"), short(c, p, seed), th))
    .collect()
}

#[test]
fn threads_give_the_result_of_one_thread() {
    for (name, cfg, threads) in cases() {
        let one = format!("{:?}", run(&cfg, 1));
        for n in threads {
            let many = format!("{:?}", run(&cfg, n));
            assert!(
                one == many,
                "{name}: {n} threads differ from one\n{one}\n{many}"
            );
        }
    }
}

#[test]
fn a_run_on_threads_moves_flits_and_saturates_where_one_thread_does() {
    // Past saturation the runs stop as unstable, identically.
    let mut c = FlitConfig::reference(6, 0.03);
    c.phases = Phases::new(300, 1_200);
    let (a, b) = (run(&c, 1), run(&c, 2));
    assert!(a.flit_hops > 10_000, "{}", a.flit_hops);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

#[test]
fn a_policy_driven_run_refuses_threads() {
    struct Nothing;
    impl super::hooks::Hooks for Nothing {}
    let c = short(FlitConfig::reference(4, 0.004), Pattern::Uniform, 1);
    let mut net = Network::new(&c).unwrap();
    net.set_threads(2).unwrap();
    assert!(net.run_hooked(&mut Nothing, &mut |_| {}).is_err());
}

/// A run without `set_threads`: the engine's own event order.
fn run_default(cfg: &FlitConfig) -> RunResult {
    Network::new(cfg).expect("valid").run().expect("runs")
}

#[test]
fn every_network_on_threads_gives_the_sequential_engines_result() {
    // Yum's VL arbiters (the headers of a cycle take free lanes oldest packet first,
    // ties in an order drawn from the cycle and the router) and
    // BookSim2's separable allocator (order-free by itself), meshes and tori, below
    // and past saturation, several seeds and sizes: the run without threads, on one
    // thread and on several gives the same result.
    let (mesh6, torus6) = (TopologySpec::mesh(6), TopologySpec::torus(6));
    let mut yum_torus = FlitConfig::reference(6, 0.012);
    yum_torus.topology = torus6.clone();
    let yum_hot = FlitConfig::reference(8, 0.03);
    // Yum's own five stages with its output VL buffers, a WRR link, below and past
    // saturation.
    let buffered = |k: u32, rate: f64| {
        let mut c = FlitConfig::reference(k, rate);
        c.router.delays = super::config::DelaySpec::Preset(super::config::DelayPreset::Yum);
        c.router.output_arbitration = qos_core::vlarb::VlArbConfig::Wrr {
            table: vec![
                qos_core::vlarb::wrr::Entry { vl: 0, weight: 9 },
                qos_core::vlarb::wrr::Entry { vl: 1, weight: 3 },
            ],
            pointer: qos_core::vlarb::wrr::Pointer::Slow,
        };
        assert_eq!(c.output_buffer(), 10);
        c
    };
    for (name, cfg, pattern, seed, threads) in [
        (
            "yum buffered mesh6 uniform",
            buffered(6, 0.012),
            Pattern::Uniform,
            6,
            2,
        ),
        (
            "yum buffered mesh8 past saturation",
            buffered(8, 0.03),
            Pattern::Transpose,
            7,
            3,
        ),
        (
            "yum mesh6 uniform",
            FlitConfig::reference(6, 0.012),
            Pattern::Uniform,
            1,
            2,
        ),
        (
            "yum mesh6 transpose",
            FlitConfig::reference(6, 0.012),
            Pattern::Transpose,
            2,
            3,
        ),
        (
            "yum mesh8 uniform",
            FlitConfig::reference(8, 0.009),
            Pattern::Uniform,
            3,
            2,
        ),
        ("yum mesh8 past saturation", yum_hot, Pattern::Uniform, 4, 2),
        ("yum torus6 uniform", yum_torus, Pattern::Uniform, 5, 3),
        (
            "booksim2 mesh6 uniform",
            FlitConfig::booksim2(mesh6.clone(), 0.012),
            Pattern::Uniform,
            1,
            2,
        ),
        (
            "booksim2 mesh6 transpose",
            FlitConfig::booksim2(mesh6, 0.012),
            Pattern::Transpose,
            2,
            2,
        ),
        (
            "booksim2 torus6 transpose",
            FlitConfig::booksim2(torus6, 0.016),
            Pattern::Transpose,
            1,
            2,
        ),
        // Three dimensions: a torus with ties drawn per packet and dimension, and a
        // mesh under Yum's arbiters.
        (
            "booksim2 torus 4x4x4 tornado",
            FlitConfig::booksim2(
                TopologySpec::Torus {
                    k: 4,
                    n: 3,
                    ties: None,
                    routing: super::config::MeshRouting::Dor,
                    dateline: None,
                },
                0.012,
            ),
            Pattern::Tornado,
            3,
            2,
        ),
        (
            "yum mesh 4x4x4 uniform",
            {
                let mut c = FlitConfig::reference(4, 0.02);
                c.topology = TopologySpec::mesh_n(4, 3);
                c
            },
            Pattern::Uniform,
            4,
            3,
        ),
        // BookSim2's xy_yx: packets cross the row blocks in either order.
        (
            "booksim2 mesh6 xy_yx transpose",
            FlitConfig::booksim2(
                TopologySpec::Mesh {
                    k: 6,
                    n: 2,
                    routing: super::config::MeshRouting::XyYx,
                },
                0.02,
            ),
            Pattern::Transpose,
            5,
            2,
        ),
        // BookSim2's valiant: the phase bit set by whichever partition routes the head.
        (
            "booksim2 mesh6 valiant uniform",
            {
                let mut c = FlitConfig::booksim2(
                    TopologySpec::Mesh {
                        k: 6,
                        n: 2,
                        routing: super::config::MeshRouting::Valiant,
                    },
                    0.01,
                );
                c.classes[0].vls = vec![0, 1, 2];
                c
            },
            Pattern::Uniform,
            6,
            2,
        ),
        // BookSim2's valiant on a torus: dateline class by phase.
        (
            "booksim2 torus5 valiant tornado",
            {
                let mut c = FlitConfig::booksim2(
                    TopologySpec::Torus {
                        k: 5,
                        n: 2,
                        ties: None,
                        dateline: None,
                        routing: super::config::MeshRouting::Valiant,
                    },
                    0.01,
                );
                c.classes[0].vls = vec![0, 1, 2, 3, 4];
                c
            },
            Pattern::Tornado,
            7,
            2,
        ),
        // BookSim2's fat tree: up ports drawn per packet; below and past saturation.
        (
            "booksim2 fat tree 4x3 uniform",
            FlitConfig::booksim2(TopologySpec::FatTree { k: 4, n: 3 }, 0.04),
            Pattern::Uniform,
            8,
            2,
        ),
        (
            "booksim2 fat tree 2x4 past saturation",
            FlitConfig::booksim2(TopologySpec::FatTree { k: 2, n: 4 }, 0.2),
            Pattern::Transpose,
            9,
            3,
        ),
    ] {
        let c = short(cfg, pattern, seed);
        let seq = format!("{:?}", run_default(&c));
        for n in [1, threads] {
            let par = format!("{:?}", run(&c, n));
            assert!(
                seq == par,
                "{name} seed {seed}: {n} threads differ from none\n{seq}\n{par}"
            );
        }
    }
}

#[test]
fn the_oldest_packet_first_shortens_the_tail_near_saturation() {
    // What the lane order credits: with the oldest header of a cycle first, the
    // slowest packets near saturation are faster than with the turn alone (p99 under
    // 0.9 times the turn's in every seed). Seen failing with the oldest-first key
    // switched off.
    for seed in 1..=3 {
        let mut c = FlitConfig::reference(6, 0.012);
        c.phases = Phases::new(2_000, 8_000);
        c.seed = seed;
        let oldest = run_default(&c).total.latency;
        c.router.lane_order = super::LaneOrder::Turn;
        let turn = run_default(&c).total.latency;
        assert!(
            (oldest.p99 as f64) < 0.9 * turn.p99 as f64,
            "seed {seed}: p99 {} (oldest first) against {} (turn)",
            oldest.p99,
            turn.p99
        );
    }
}

#[test]
fn a_lane_order_applies_to_yums_arbiters_alone() {
    let mut c = FlitConfig::booksim2(TopologySpec::mesh(4), 0.01);
    c.router.lane_order = super::LaneOrder::Turn;
    let e = Network::new(&c).err().expect("refused").to_string();
    assert!(e.contains("router.lane_order"), "{e}");
}

#[test]
fn waiting_for_tail_credits_and_batched_routing_run_on_one_thread() {
    // Its lanes are freed by looking at the VC downstream, which may be another
    // partition's: refused on threads with a clear error, not run wrong.
    let mut c = short(
        FlitConfig::booksim2(TopologySpec::mesh(4), 0.004),
        Pattern::Uniform,
        1,
    );
    // The message a run on two threads is refused with names the setting.
    let refused_on_threads = |c: &FlitConfig| {
        let mut net = Network::new(c).unwrap();
        net.set_threads(2).unwrap();
        net.run().unwrap_err().to_string()
    };
    c.router.wait_for_tail_credit = Some(true);
    let e = refused_on_threads(&c);
    assert!(e.contains("wait_for_tail_credit"), "{e}");
    assert!(run(&c, 1).total.latency.packets > 0);
    // BookSim2's batched routing (two cycles or more) keeps a router-wide batch.
    c.router.wait_for_tail_credit = None;
    c.router.routing_delay = Some(2);
    let e = refused_on_threads(&c);
    assert!(e.contains("routing_delay"), "{e}");
    // Held crossbar connections (kept per crossing input, run on one thread too).
    c.router.routing_delay = None;
    c.router.hold_switch_for_packet = Some(true);
    let e = refused_on_threads(&c);
    assert!(e.contains("hold_switch_for_packet"), "{e}");
    assert!(run(&c, 1).total.latency.packets > 0);
}
