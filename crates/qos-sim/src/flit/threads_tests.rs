//! Tests of runs on threads: the same seed gives the same result on one thread and on
//! several, for meshes and tori, uniform and transpose traffic, Yum's router and
//! BookSim2's, below and past saturation.

use super::config::{FlitConfig, Pattern, Phases, TopologySpec};
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
    let bs_mesh = FlitConfig::booksim2(TopologySpec::Mesh { k: 6 }, 0.012);
    let bs_torus = FlitConfig::booksim2(TopologySpec::torus(6), 0.016);
    // Yum's router (VL arbiters, one-cycle credits) and BookSim2's (separable
    // allocator, source queues, 3-cycle credits), near saturation.
    [
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
fn booksim2_networks_on_threads_give_the_sequential_engines_result() {
    // Under BookSim2's separable allocator no outcome depends on the order of a
    // cycle's evaluations, so threads reproduce the engine's own order exactly.
    let (mesh, torus) = (TopologySpec::Mesh { k: 6 }, TopologySpec::torus(6));
    for (name, topo, rate, pattern, seed) in [
        ("mesh6 uniform", &mesh, 0.012, Pattern::Uniform, 1),
        ("mesh6 transpose", &mesh, 0.012, Pattern::Transpose, 2),
        ("torus6 transpose", &torus, 0.016, Pattern::Transpose, 1),
    ] {
        let c = short(FlitConfig::booksim2(topo.clone(), rate), pattern, seed);
        let seq = format!("{:?}", run_default(&c));
        let par = format!("{:?}", run(&c, 2));
        assert!(seq == par, "{name} seed {seed}\n{seq}\n{par}");
    }
}

#[test]
fn yums_arbiters_on_threads_break_same_cycle_ties_in_vc_order() {
    // Under Yum's VL arbiters a header takes a free lane when it is evaluated, so the
    // order of a cycle's evaluations can decide which lane it gets: the order of runs
    // on threads (ascending VCs) is not the engine's own, and near saturation the
    // results differ.
    let c = short(FlitConfig::reference(6, 0.012), Pattern::Uniform, 1);
    assert_ne!(
        format!("{:?}", run_default(&c)),
        format!("{:?}", run(&c, 1))
    );
}
