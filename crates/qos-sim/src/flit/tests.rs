//! Tests of the flit network, named after what they prove:
//! exact zero-load latency per router configuration, accepted = offered below
//! saturation, the bisection bound, WRR shares and the high-priority limit on a loaded
//! link, freedom from deadlock on mesh and torus, determinism.

use qos_core::vlarb::wrr::{Entry, Pointer};
use qos_core::vlarb::VlArbConfig;

use super::config::*;
use super::{simulate, FlitConfig, FlitError, Network};

pub(super) fn class(name: &str, vls: &[u8], len: u32, rate: f64, pattern: Pattern) -> ClassConfig {
    ClassConfig {
        name: name.into(),
        vls: vls.to_vec(),
        packet_flits: len,
        packet_mix: Vec::new(),
        priority: 0,
        rate,
        process: Process::Bernoulli,
        pattern,
        keep_lane: false,
    }
}

pub(super) fn base(topology: TopologySpec, delays: Delays, measure: u64) -> FlitConfig {
    FlitConfig {
        topology,
        router: RouterConfig {
            buffer: 10,
            delays: DelaySpec::Stages(delays),
            allocator: Some(Allocator::VlArbiters),
            output_arbitration: VlArbConfig::RoundRobin,
            input_arbitration: VlArbConfig::RoundRobin,
            lane_order: Default::default(),
            output_buffer: None,
            credit_delay: None,
            use_noc_latency: None,
            routing_delay: None,
            input_speedup: None,
            alloc_iters: None,
            wait_for_tail_credit: None,
            hold_switch_for_packet: None,
            priority: Default::default(),
        },
        hca: HcaConfig::default(),
        classes: vec![class("data", &[0, 1], 40, 0.0, Pattern::Uniform)],
        streams: vec![],
        phases: Phases {
            drain_max: 100_000,
            ..Phases::fixed(0, measure)
        },
        seed: 7,
        watchdog: 5_000,
    }
}

pub(super) fn stream(src: u32, dst: u32, class: &str, period: u64) -> StreamConfig {
    StreamConfig {
        name: format!("{src}->{dst}"),
        src,
        dst,
        class: class.into(),
        period,
        start: 0,
    }
}

pub(super) const CUSTOM: Delays = Delays {
    sync: 2,
    route: 3,
    vl_alloc: 1,
    switch_alloc: 2,
    crossbar: 1,
    link: 4,
    router_link: None,
    credit: 2,
    host_credit: None,
    eject_credit: None,
};

#[test]
fn zero_load_latency_equals_hops_times_per_hop_plus_serialisation() {
    let tops = [
        TopologySpec::Crossbar { ports: 8 },
        TopologySpec::mesh(4),
        TopologySpec::torus(5),
    ];
    for delays in [Delays::REFERENCE, Delays::YUM, CUSTOM] {
        for top in &tops {
            for hca_buf in [None, Some(10)] {
                let mut cfg = base(top.clone(), delays, 10);
                // Buffers cover the credit round trip, so flits never wait for credits.
                cfg.router.buffer = 16;
                cfg.hca.vl_buffer = hca_buf;
                let fab = top.fabric().unwrap();
                let n = fab.nodes;
                for (src, dst) in [(0, n - 1), (1, 2), (n / 2, 0), (3, 3)] {
                    cfg.streams = vec![stream(src, dst, "data", 1_000_000)];
                    let r = simulate(&cfg).unwrap();
                    let h = fab.routers_on_path(src, dst) as u64;
                    let want = h * delays.per_hop() + delays.link as u64 + 1 + 39;
                    assert_eq!(r.flows[0].latency.packets, 1);
                    assert_eq!(
                        r.flows[0].latency.max, want,
                        "{top:?} {delays:?} {src}->{dst} hca {hca_buf:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn booksim_router_zero_load_matches_booksim_formula() {
    // BookSim2 iq_router, 1-flit packets: 4 cycles per router + 2.
    let mut cfg = base(TopologySpec::mesh(8), Delays::REFERENCE, 10);
    cfg.classes[0].packet_flits = 1;
    cfg.streams = vec![stream(0, 63, "data", 1_000_000)];
    let r = simulate(&cfg).unwrap();
    assert_eq!(r.flows[0].latency.max, 4 * 15 + 2);
}

#[test]
fn accepted_equals_offered_below_saturation() {
    let mut cfg = base(TopologySpec::mesh(4), Delays::REFERENCE, 20_000);
    cfg.phases.warmup = 2_000;
    cfg.classes[0].rate = 0.005; // 0.2 flits/node/cycle, well below saturation
    let r = simulate(&cfg).unwrap();
    assert!(!r.saturated);
    let (o, a) = (r.total.offered, r.total.accepted);
    assert!((o - 0.2).abs() < 0.02, "offered {o}");
    assert!((a - o).abs() < 0.02 * o, "offered {o} accepted {a}");
}

#[test]
fn uniform_traffic_never_exceeds_bisection_bound() {
    for k in [4u32, 8] {
        let mut cfg = base(TopologySpec::mesh(k), Delays::REFERENCE, 4_000);
        cfg.phases.warmup = 2_000;
        cfg.phases.drain_max = 1;
        cfg.classes[0].rate = 0.025; // 1 flit/node/cycle offered
        let r = simulate(&cfg).unwrap();
        let bound = 4.0 / k as f64;
        assert!(
            r.total.accepted <= bound,
            "k={k}: {} > {bound}",
            r.total.accepted
        );
        assert!(
            r.total.accepted > 0.3 * bound,
            "k={k}: {}",
            r.total.accepted
        );
    }
}

/// Three sources on lanes 0, 1, 2 of a crossbar, all saturating node 3's link.
fn contended_crossbar(arb: VlArbConfig) -> Vec<f64> {
    let mut cfg = base(
        TopologySpec::Crossbar { ports: 4 },
        Delays::REFERENCE,
        30_000,
    );
    cfg.phases.warmup = 2_000;
    cfg.phases.drain_max = 1;
    cfg.router.output_arbitration = arb;
    cfg.classes = (0..3)
        .map(|v| class(&format!("c{v}"), &[v], 40, 0.0, Pattern::Uniform))
        .collect();
    cfg.streams = (0..3).map(|v| stream(v, 3, &format!("c{v}"), 20)).collect();
    let r = simulate(&cfg).unwrap();
    let total: f64 = r.flows.iter().map(|f| f.accepted).sum();
    assert!(total > 0.99, "link not saturated: {total}");
    r.flows.iter().map(|f| f.accepted / total).collect()
}

#[test]
fn wrr_shares_match_configured_weights_under_saturation() {
    for pointer in [Pointer::Fast, Pointer::Slow] {
        let table = vec![
            Entry { vl: 0, weight: 10 },
            Entry { vl: 1, weight: 20 },
            Entry { vl: 2, weight: 30 },
        ];
        let s = contended_crossbar(VlArbConfig::Wrr { table, pointer });
        for (v, want) in [1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0].iter().enumerate() {
            assert!(
                (s[v] - want).abs() < 0.02 * want,
                "{pointer:?} vl{v}: {} vs {want}",
                s[v]
            );
        }
    }
}

#[test]
fn high_priority_limit_guarantees_low_priority_its_minimum_share() {
    // Lanes 0 and 1 high priority, lane 2 low; L = 5 keeps 1/5 of the link for lane 2.
    let arb = VlArbConfig::Iba {
        high: vec![Entry { vl: 0, weight: 1 }, Entry { vl: 1, weight: 1 }],
        low: vec![Entry { vl: 2, weight: 1 }],
        limit: 255,
        pointer: Pointer::Fast,
        exact_limit: Some(qos_core::vlarb::iba::limit_of_high_priority(100, 80)),
    };
    let s = contended_crossbar(arb);
    assert!(s[2] >= 0.2 * 0.98, "low-priority share {}", s[2]);
    let unlimited = VlArbConfig::Iba {
        high: vec![Entry { vl: 0, weight: 1 }, Entry { vl: 1, weight: 1 }],
        low: vec![Entry { vl: 2, weight: 1 }],
        limit: 255,
        pointer: Pointer::Fast,
        exact_limit: None,
    };
    assert!(contended_crossbar(unlimited)[2] < 0.01);
}

#[test]
fn no_deadlock_at_any_load_on_mesh_and_torus() {
    for top in [TopologySpec::mesh(4), TopologySpec::torus(4)] {
        for rate in [0.002, 0.01, 0.05, 1.0] {
            for pattern in [Pattern::Uniform, Pattern::Transpose, Pattern::BitComplement] {
                let mut cfg = base(top.clone(), Delays::REFERENCE, 3_000);
                cfg.classes[0].rate = rate;
                cfg.classes[0].pattern = pattern.clone();
                cfg.phases.drain_max = 3_000;
                cfg.watchdog = 2_000;
                let r = simulate(&cfg);
                assert!(r.is_ok(), "{top:?} {rate} {pattern:?}: {r:?}");
            }
        }
    }
}

#[test]
fn watchdog_reports_a_network_that_stops() {
    // A stage delay longer than the watchdog looks exactly like a stopped network.
    let mut d = Delays::REFERENCE;
    d.link = 200;
    let mut cfg = base(TopologySpec::mesh(2), d, 100);
    cfg.watchdog = 50;
    cfg.streams = vec![stream(0, 3, "data", 1_000)];
    assert!(matches!(simulate(&cfg), Err(FlitError::Deadlock { .. })));
    // Under the stability rule the same stop ends the run as unstable, at the cycle
    // after the watchdog's limit, with the window it measured.
    cfg.phases.abort_latency = Some(500.0);
    let r = simulate(&cfg).expect("an unstable run, not an error");
    let stop = r.stop.expect("stopped early");
    assert_eq!(stop.reason, super::stats::StopReason::Deadlock);
    assert!(r.unstable && r.saturated, "{r:?}");
    assert_eq!(stop.window, (0, stop.at), "{stop:?}");
    assert!(stop.at > 50 && stop.at < 100, "{stop:?}");
}

#[test]
fn same_seed_gives_identical_results() {
    let mut cfg = base(TopologySpec::torus(4), Delays::YUM, 3_000);
    cfg.classes[0].rate = 0.01;
    cfg.classes[0].process = Process::Poisson;
    assert_eq!(simulate(&cfg).unwrap(), simulate(&cfg).unwrap());
    let mut other = cfg.clone();
    other.seed += 1;
    assert_ne!(simulate(&cfg).unwrap(), simulate(&other).unwrap());
}

#[test]
fn control_traffic_on_vl15_overtakes_saturated_data() {
    let mut cfg = base(
        TopologySpec::Crossbar { ports: 4 },
        Delays::REFERENCE,
        20_000,
    );
    cfg.phases.drain_max = 1_000;
    cfg.classes = vec![
        class("data", &[0], 40, 0.0, Pattern::Uniform),
        class("control", &[15], 10, 0.0, Pattern::Uniform),
    ];
    cfg.classes[1].priority = 1;
    cfg.streams = vec![
        stream(0, 3, "data", 20),
        stream(1, 3, "data", 20),
        stream(2, 3, "control", 500),
    ];
    let r = simulate(&cfg).unwrap();
    let ctl = &r.flows[2].latency;
    // One control packet never waits more than one data flit per hop.
    assert!(
        ctl.max <= (Delays::REFERENCE.per_hop() + 2 + 9 + 2),
        "{ctl:?}"
    );
}

#[test]
fn hca_vl_buffer_limits_nothing_at_low_load() {
    let mut cfg = base(TopologySpec::mesh(4), Delays::YUM, 5_000);
    cfg.classes[0].rate = 0.002;
    let a = simulate(&cfg).unwrap();
    cfg.hca.vl_buffer = Some(10);
    let b = simulate(&cfg).unwrap();
    assert!((a.total.latency.avg - b.total.latency.avg).abs() < 1.0);
}

#[test]
fn invalid_configuration_is_an_error_not_a_panic() {
    let mut cfg = base(TopologySpec::torus(4), Delays::REFERENCE, 10);
    cfg.classes[0].vls = vec![0];
    assert!(matches!(simulate(&cfg), Err(FlitError::Config { .. })));
    let mut cfg = base(TopologySpec::mesh(3), Delays::REFERENCE, 10);
    cfg.classes[0].pattern = Pattern::BitComplement;
    assert!(matches!(simulate(&cfg), Err(FlitError::Config { .. })));
    // BookSim2's random patterns: weights one per hotspot node and at least 1, some
    // node not excluded, taper64 on 64 nodes only.
    let refused = |p: Pattern, says: &str| {
        let mut cfg = base(TopologySpec::mesh(3), Delays::REFERENCE, 10);
        cfg.classes[0].pattern = p;
        let e = simulate(&cfg).unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    };
    let hot = |weights: Vec<u32>| Pattern::Hotspot {
        nodes: vec![1, 2],
        fraction: 1.0,
        weights,
    };
    refused(hot(vec![1]), "(2 nodes, 1 weights)");
    refused(hot(vec![1, 0]), "one weight of at least 1");
    refused(hot(vec![u32::MAX, 1]), "less than 2^32");
    refused(
        Pattern::Background {
            excluded: (0..9).rev().collect(),
        },
        "every node is excluded",
    );
    refused(
        Pattern::Background { excluded: vec![9] },
        "node 9: nodes are below 9",
    );
    refused(Pattern::Taper64, "taper64 needs exactly 64 nodes, not 9");
}

/// A cascade of two crossbars (thesis Fig 2.4) as a qos-core topology file.
const CASCADE: &str = r#"
[build]
shape = "cascade"
switches = 2
hosts_per_switch = 2
"#;

/// A network on the graph of `topology.toml`, as a scenario file writes it.
const GRAPH_NETWORK: &str = r#"
topology = { kind = "graph", file = "topology.toml" }
router = { buffer = 16, delays = "booksim" }
phases = { warmup = 0, measure = 10, drain_max = 100000 }
[[classes]]
name = "data"
vls = [0, 1]
"#;

/// [`GRAPH_NETWORK`] with its topology file `topology` built into a fabric, as the
/// scenario loader does.
fn graph_network(topology: &str) -> Result<FlitConfig, String> {
    let mut cfg: FlitConfig = toml::from_str(GRAPH_NETWORK).map_err(|e| e.to_string())?;
    let t = qos_core::topology::file::load("topology.toml", topology).map_err(|e| e.to_string())?;
    let fabric = super::graph::fabric(&t).map_err(|e| format!("topology.toml: {e}"))?;
    if let TopologySpec::Graph { graph, .. } = &mut cfg.topology {
        *graph = Some(std::sync::Arc::new(fabric));
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

#[test]
fn topology_file_graph_zero_load_latency_is_hops_times_per_hop_plus_serialisation() {
    let net = graph_network(CASCADE).unwrap();
    let fab = net.topology.fabric().unwrap();
    assert_eq!((fab.routers, fab.nodes), (2, 4));
    // n0, n1 on s0; n2, n3 on s1: across the trunk is two routers.
    assert_eq!(fab.routers_on_path(0, 2), 2);
    assert_eq!(fab.routers_on_path(0, 1), 1);
    for delays in [Delays::REFERENCE, Delays::YUM, CUSTOM] {
        let mut cfg = net.clone();
        cfg.router.delays = DelaySpec::Stages(delays);
        for (src, dst) in [(0, 3), (3, 0), (1, 0), (2, 2)] {
            cfg.streams = vec![stream(src, dst, "data", 1_000_000)];
            let r = simulate(&cfg).unwrap();
            let h = fab.routers_on_path(src, dst) as u64;
            let want = h * delays.per_hop() + delays.link as u64 + 1 + 39;
            assert_eq!(r.flows[0].latency.packets, 1);
            assert_eq!(r.flows[0].latency.max, want, "{delays:?} {src}->{dst}");
        }
    }
}

#[test]
fn topology_file_graph_carries_uniform_traffic_without_deadlock() {
    let mut cfg = graph_network(CASCADE).unwrap();
    cfg.phases.measure = 20_000;
    cfg.phases.warmup = 2_000;
    // Half the trunk's capacity: packets from two hosts cross it half the time.
    cfg.classes[0].rate = 0.005;
    let r = simulate(&cfg).unwrap();
    assert!(!r.saturated);
    let t = &r.total;
    assert!((t.accepted - t.offered).abs() < 0.05 * t.offered, "{t:?}");
    assert!(t.latency.packets > 300);
}

#[test]
fn topology_file_routes_with_a_dependency_cycle_are_refused() {
    // A ring of four switches whose explicit routes chase each other round it.
    let mut ring = String::new();
    for s in 0..4 {
        ring += &format!("[[switch]]\nname = \"s{s}\"\nports = 4\n");
    }
    for (h, s) in ["a", "b", "c", "d"].iter().zip(0..4) {
        ring += &format!("[[host]]\nname = \"{h}\"\nport = \"s{s}:0\"\n");
    }
    for s in 0..4 {
        ring += &format!("[[link]]\na = \"s{s}:1\"\nb = \"s{}:2\"\n", (s + 1) % 4);
    }
    for (from, to, s) in [("a", "c", 0), ("b", "d", 1), ("c", "a", 2), ("d", "b", 3)] {
        ring += &format!(
            "[[route]]\nfrom = \"{from}\"\nto = \"{to}\"\nports = [\"s{s}:1\", \"s{}:1\", \"s{}:0\"]\n",
            (s + 1) % 4,
            (s + 2) % 4
        );
    }
    let e = graph_network(&ring).unwrap_err();
    assert!(e.contains("deadlock") && e.contains("topology.toml"), "{e}");
    // A malformed topology file is reported at its own line.
    let e = graph_network("[build]\nshape = \"cascade\"\nswitchez = 2\n").unwrap_err();
    assert!(e.contains("topology.toml:3"), "{e}");
}

#[test]
fn a_credit_trip_longer_than_the_buffer_paces_a_stream_to_buffer_per_trip() {
    // One saturating stream through one router: each of the `buffer` slots of a lane
    // can carry one flit per credit trip, so the stream gets about buffer / trip.
    let run = |credit: u32| {
        let mut cfg = base(
            TopologySpec::Crossbar { ports: 2 },
            Delays {
                credit,
                ..Delays::REFERENCE
            },
            20_000,
        );
        cfg.router.buffer = 2;
        cfg.classes[0].vls = vec![0];
        cfg.streams = vec![stream(0, 1, "data", 1)];
        cfg.phases.drain_max = 0;
        simulate(&cfg).unwrap().flows[0].accepted
    };
    let slow = run(40);
    assert!(slow <= 2.0 / 40.0 + 1e-3, "{slow}");
    assert!(slow >= 2.0 / 46.0, "{slow}");
    let fast = run(1);
    assert!(fast > 0.5, "{fast}");
    let mut cfg = base(TopologySpec::mesh(2), Delays::REFERENCE, 10);
    if let DelaySpec::Stages(d) = &mut cfg.router.delays {
        d.credit = 65;
    }
    let err = simulate(&cfg).unwrap_err().to_string();
    assert!(err.contains("router.delays.credit"), "{err}");
}

#[test]
fn a_full_crossbar_carries_more_than_a_multiplexed_one_near_saturation() {
    // 8-port crossbar, uniform traffic at 0.9 flits/node/cycle on four lanes: with one
    // lane per input port per cycle, output conflicts leave inputs idle; with a
    // crossbar input per lane they do not.
    let mut c = base(TopologySpec::Crossbar { ports: 8 }, Delays::YUM, 20_000);
    c.classes = vec![class(
        "data",
        &[0, 1, 2, 3],
        40,
        0.0225,
        Pattern::UniformOthers,
    )];
    c.phases.drain_max = 5_000;
    let m = simulate(&c).unwrap();
    c.router.allocator = Some(Allocator::FullCrossbar);
    let f = simulate(&c).unwrap();
    assert!(
        f.total.accepted > 1.05 * m.total.accepted,
        "full {} multiplexed {}",
        f.total.accepted,
        m.total.accepted
    );
}

#[test]
fn the_one_class_hca_paths_decide_as_the_general_ones() {
    // With one class and no gate the HCAs step by paths of their own (BookSim2's
    // source queue, Yum's DMA with a round-robin port): every result must be the one
    // the general paths give, below and past saturation, on meshes and tori.
    use super::engine::Network;
    let mut torus = FlitConfig::reference(6, 0.016);
    torus.topology = TopologySpec::torus(6);
    let cases = [
        ("reference mesh6 0.012", FlitConfig::reference(6, 0.012)),
        (
            "reference mesh6 0.03 (past saturation)",
            FlitConfig::reference(6, 0.03),
        ),
        ("reference torus6 0.016", torus),
        (
            "booksim2 mesh6 0.012",
            FlitConfig::booksim2(TopologySpec::mesh(6), 0.012),
        ),
        (
            "booksim2 torus6 0.02 (past saturation)",
            FlitConfig::booksim2(TopologySpec::torus(6), 0.02),
        ),
    ];
    for (name, mut cfg) in cases {
        cfg.phases = Phases::new(300, 1_200);
        cfg.classes[0].pattern = Pattern::Transpose;
        let fast = Network::new(&cfg).unwrap().run().unwrap();
        let mut net = Network::new(&cfg).unwrap();
        net.hca.use_general_paths();
        let general = net.run().unwrap();
        assert!(fast.flit_hops > 1_000, "{name}: {}", fast.flit_hops);
        assert_eq!(format!("{fast:?}"), format!("{general:?}"), "{name}");
    }
}

#[test]
fn prefetch_hints_are_on_for_networks_larger_than_the_threshold_only() {
    use super::engine::PREFETCH_ABOVE;
    // The reference router: 4 lanes of 10-flit buffers (10-slot rings), 120 bytes a VC.
    let on = |k| {
        Network::new(&FlitConfig::reference(k, 0.001))
            .unwrap()
            .prefetch()
    };
    assert!(!on(8) && !on(16), "16x16 holds 0.61 MB of records");
    assert!(on(32) && on(64), "32x32 holds 2.5 MB of records");
    assert_eq!(PREFETCH_ABOVE, 1 << 20);
}

#[test]
fn prefetch_hints_change_no_result() {
    // Near saturation, where routers step several eligible ports at once, on both
    // crossbar allocators; with threads too (each partition prefetches its own).
    for (name, cfg, threads) in [
        ("reference mesh6", FlitConfig::reference(6, 0.012), 0),
        (
            "booksim2 torus6",
            FlitConfig::booksim2(TopologySpec::torus(6), 0.016),
            0,
        ),
        (
            "reference mesh6 on 2 threads",
            FlitConfig::reference(6, 0.012),
            2,
        ),
    ] {
        let mut cfg = cfg;
        cfg.phases = Phases::new(300, 1_500);
        let run = |hint: bool| {
            let mut net = Network::new(&cfg).unwrap();
            net.set_prefetch(hint);
            if threads > 0 {
                net.set_threads(threads).unwrap();
            }
            format!("{:?}", net.run().unwrap())
        };
        assert_eq!(run(false), run(true), "{name}");
    }
}

/// A class's packet mix reaches the network: the offered and accepted flits are the
/// packet rate times the mix's mean length (4.1 flits), not `packet_flits`.
#[test]
fn a_packet_mix_offers_its_mean_length_per_packet() {
    let mut cfg = FlitConfig::booksim2(TopologySpec::mesh(4), 0.02);
    cfg.classes[0].packet_mix = vec![
        PacketSize::new(1, 6),
        PacketSize::new(5, 3),
        PacketSize::new(20, 1),
    ];
    let r = simulate(&cfg).unwrap();
    let c = &r.classes[0];
    assert!(
        (c.offered / (0.02 * 4.1) - 1.0).abs() < 0.05,
        "{}",
        c.offered
    );
    assert!((c.accepted / c.offered - 1.0).abs() < 0.05, "{c:?}");
}
