//! Tests of the flit network, named after what they prove:
//! exact zero-load latency per router configuration, accepted = offered below
//! saturation, the bisection bound, WRR shares and the high-priority limit on a loaded
//! link, freedom from deadlock on mesh and torus, determinism.

use qos_core::vlarb::wrr::{Entry, Pointer};
use qos_core::vlarb::VlArbConfig;

use super::config::*;
use super::{simulate, FlitConfig, FlitError};

fn class(name: &str, vls: &[u8], len: u32, rate: f64, pattern: Pattern) -> ClassConfig {
    ClassConfig {
        name: name.into(),
        vls: vls.to_vec(),
        packet_flits: len,
        priority: 0,
        rate,
        process: Process::Bernoulli,
        pattern,
        keep_lane: false,
    }
}

fn base(topology: TopologySpec, delays: Delays, measure: u64) -> FlitConfig {
    FlitConfig {
        topology,
        router: RouterConfig {
            buffer: 10,
            delays: DelaySpec::Stages(delays),
            allocator: Some(Allocator::VlArbiters),
            output_arbitration: VlArbConfig::RoundRobin,
            input_arbitration: VlArbConfig::RoundRobin,
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

/// A reader for scenarios that name no file.
fn no_files(p: &str) -> Result<(String, String), String> {
    Err(format!("{p}: no files in this test"))
}

/// Reads topology file `p` relative to scenario file `scenario`.
fn read_beside(scenario: &str, p: &str) -> Result<(String, String), String> {
    let full = std::path::Path::new(scenario)
        .parent()
        .unwrap_or(std::path::Path::new(""))
        .join(p);
    std::fs::read_to_string(&full)
        .map(|t| (full.display().to_string(), t))
        .map_err(|e| e.to_string())
}

fn stream(src: u32, dst: u32, class: &str, period: u64) -> StreamConfig {
    StreamConfig {
        name: format!("{src}->{dst}"),
        src,
        dst,
        class: class.into(),
        period,
        start: 0,
    }
}

const CUSTOM: Delays = Delays {
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
        TopologySpec::Mesh { k: 4 },
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
    let mut cfg = base(TopologySpec::Mesh { k: 8 }, Delays::REFERENCE, 10);
    cfg.classes[0].packet_flits = 1;
    cfg.streams = vec![stream(0, 63, "data", 1_000_000)];
    let r = simulate(&cfg).unwrap();
    assert_eq!(r.flows[0].latency.max, 4 * 15 + 2);
}

#[test]
fn accepted_equals_offered_below_saturation() {
    let mut cfg = base(TopologySpec::Mesh { k: 4 }, Delays::REFERENCE, 20_000);
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
        let mut cfg = base(TopologySpec::Mesh { k }, Delays::REFERENCE, 4_000);
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
        limit: qos_core::vlarb::iba::limit_of_high_priority(100, 80),
        pointer: Pointer::Fast,
    };
    let s = contended_crossbar(arb);
    assert!(s[2] >= 0.2 * 0.98, "low-priority share {}", s[2]);
    let unlimited = VlArbConfig::Iba {
        high: vec![Entry { vl: 0, weight: 1 }, Entry { vl: 1, weight: 1 }],
        low: vec![Entry { vl: 2, weight: 1 }],
        limit: 255,
        pointer: Pointer::Fast,
    };
    assert!(contended_crossbar(unlimited)[2] < 0.01);
}

#[test]
fn no_deadlock_at_any_load_on_mesh_and_torus() {
    for top in [TopologySpec::Mesh { k: 4 }, TopologySpec::torus(4)] {
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
    let mut cfg = base(TopologySpec::Mesh { k: 2 }, d, 100);
    cfg.watchdog = 50;
    cfg.streams = vec![stream(0, 3, "data", 1_000)];
    assert!(matches!(simulate(&cfg), Err(FlitError::Deadlock { .. })));
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
    let mut cfg = base(TopologySpec::Mesh { k: 4 }, Delays::YUM, 5_000);
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
    let mut cfg = base(TopologySpec::Mesh { k: 3 }, Delays::REFERENCE, 10);
    cfg.classes[0].pattern = Pattern::BitComplement;
    assert!(matches!(simulate(&cfg), Err(FlitError::Config { .. })));
}

#[test]
fn shipped_scenarios_parse_and_validate() {
    use super::scenario::{is_flit_scenario, FlitScenario};
    for (name, text) in [
        (
            "mesh8-reference.toml",
            include_str!("../../../../scenarios/flit/mesh8-reference.toml"),
        ),
        (
            "crossbar8-wrr.toml",
            include_str!("../../../../scenarios/flit/crossbar8-wrr.toml"),
        ),
        (
            "torus8-dateline.toml",
            include_str!("../../../../scenarios/flit/torus8-dateline.toml"),
        ),
        (
            "mesh8-booksim2.toml",
            include_str!("../../../../scenarios/flit/mesh8-booksim2.toml"),
        ),
        (
            "torus8-booksim2.toml",
            include_str!("../../../../scenarios/flit/torus8-booksim2.toml"),
        ),
    ] {
        assert!(is_flit_scenario(text), "{name}");
        let s = FlitScenario::parse(name, text, no_files).unwrap_or_else(|e| panic!("{e}"));
        assert!(s.points().len() > 1, "{name}");
    }
    // A graph scenario reads its topology file relative to itself.
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/flit/cascade2-graph.toml"
    );
    let text = std::fs::read_to_string(file).unwrap();
    let s = FlitScenario::parse(file, &text, |p| read_beside(file, p))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.network.topology.fabric().unwrap().nodes, 8);
}

#[test]
fn scenario_errors_name_file_and_line() {
    use super::scenario::FlitScenario;
    let text = "name = \"x\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 0, measure = 10 }\nspeed = 3\n[[network.classes]]\nname = \"d\"\nvls = [0]\n";
    let e = FlitScenario::parse("f.toml", text, no_files)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("f.toml:6"), "{e}");
    let text = "name = \"x\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 0, measure = 10 }\n[[network.classes]]\nname = \"d\"\nvls = [0]\n[sweep]\nclass = \"nope\"\nrates = [0.1]\n";
    let e = FlitScenario::parse("f.toml", text, no_files)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("f.toml:10") && e.contains("nope"), "{e}");
}

#[test]
fn sweep_report_has_latency_figure_and_saturation() {
    use super::scenario::{report, run_scenario, FlitScenario};
    let text = "name = \"tiny\"\n[network]\ntopology = { kind = \"mesh\", k = 4 }\nrouter = { buffer = 10 }\nphases = { warmup = 500, measure = 2000, drain_max = 2000 }\n[[network.classes]]\nname = \"d\"\nvls = [0, 1]\n[sweep]\nclass = \"d\"\nrates = [0.002, 0.05]\n";
    let s = FlitScenario::parse("t.toml", text, no_files).unwrap();
    let run = run_scenario("t.toml", &s, |_| {}).unwrap();
    assert_eq!(run.points.len(), 2);
    assert_eq!(run.saturation, Some(0.05));
    let rep = report(&run, &s.description);
    assert!(rep.figures.iter().any(|f| f.id == "latency-vs-load"));
}

/// A cascade of two crossbars (thesis Fig 2.4) as a qos-core topology file.
const CASCADE: &str = r#"
[build]
shape = "cascade"
switches = 2
hosts_per_switch = 2
"#;

/// A scenario on the graph of `topology.toml` next to it.
const GRAPH_SCENARIO: &str = r#"
name = "cascade"
[network]
topology = { kind = "graph", file = "topology.toml" }
router = { buffer = 16, delays = "booksim" }
phases = { warmup = 0, measure = 10, drain_max = 100000 }
[[network.classes]]
name = "data"
vls = [0, 1]
"#;

/// The scenario of [`GRAPH_SCENARIO`] with `topology` written beside it.
fn graph_scenario(topology: &str) -> Result<super::scenario::FlitScenario, String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("topology.toml"), topology).unwrap();
    let file = dir.path().join("cascade.toml");
    let name = file.display().to_string();
    super::scenario::FlitScenario::parse(&name, GRAPH_SCENARIO, |p| read_beside(&name, p))
        .map_err(|e| e.to_string())
}

#[test]
fn topology_file_graph_zero_load_latency_is_hops_times_per_hop_plus_serialisation() {
    let s = graph_scenario(CASCADE).unwrap();
    let fab = s.network.topology.fabric().unwrap();
    assert_eq!((fab.routers, fab.nodes), (2, 4));
    // n0, n1 on s0; n2, n3 on s1: across the trunk is two routers.
    assert_eq!(fab.routers_on_path(0, 2), 2);
    assert_eq!(fab.routers_on_path(0, 1), 1);
    for delays in [Delays::REFERENCE, Delays::YUM, CUSTOM] {
        let mut cfg = s.network.clone();
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
    let s = graph_scenario(CASCADE).unwrap();
    let mut cfg = s.network.clone();
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
    let e = graph_scenario(&ring).unwrap_err();
    assert!(e.contains("deadlock") && e.contains("topology.toml"), "{e}");
    // A malformed topology file is reported at its own line.
    let e = graph_scenario("[build]\nshape = \"cascade\"\nswitchez = 2\n").unwrap_err();
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
    let mut cfg = base(TopologySpec::Mesh { k: 2 }, Delays::REFERENCE, 10);
    if let DelaySpec::Stages(d) = &mut cfg.router.delays {
        d.credit = 65;
    }
    let err = simulate(&cfg).unwrap_err().to_string();
    assert!(err.contains("router.delays.credit"), "{err}");
}

/// The first line of a scenario error, `file:line:...`, and its message.
fn scenario_error(network: &str) -> (usize, String) {
    use super::scenario::FlitScenario;
    let text = format!("name = \"x\"\n[network]\n{network}");
    let e = FlitScenario::parse("f.toml", &text, no_files)
        .unwrap_err()
        .to_string();
    let line = e
        .strip_prefix("f.toml:")
        .and_then(|r| r.split(':').next())
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("no file:line in {e}"));
    (line, e)
}

/// A valid network table with `over` in place of the line starting with its key.
fn network_with(over: &str) -> String {
    let base = [
        "topology = { kind = \"mesh\", k = 4 }",
        "phases = { warmup = 10, measure = 100 }",
        "[network.router]",
        "buffer = 10",
        "[[network.classes]]",
        "name = \"d\"",
        "vls = [0, 1]",
        "packet_flits = 40",
        "rate = 0.01",
    ];
    let key = over.split([' ', '=']).next().unwrap();
    base.iter()
        .map(|l| if l.starts_with(key) { over } else { l })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn every_range_error_points_at_the_line_of_the_value() {
    // Lines: 1 name, 2 [network], 3 topology, 4 phases, 5 [network.router],
    // 6 buffer, 7 [[network.classes]], 8 name, 9 vls, 10 packet_flits, 11 rate.
    for (over, line, says) in [
        ("buffer = 0", 6, "router.buffer = 0"),
        ("rate = 1.5", 11, "rate = 1.5"),
        ("rate = nan", 11, "rate = NaN"),
        ("topology = { kind = \"mesh\", k = 100000 }", 3, "topology.k = 100000"),
        ("vls = []", 9, "at least one lane"),
        ("packet_flits = 0", 10, "packet_flits = 0"),
        (
            "topology = { kind = \"torus\", k = 4 }\nphases = { warmup = 10, measure = 100 }\n[network.router]\nbuffer = 10\n[[network.classes]]\nname = \"d\"\nvls = [0]",
            9,
            "two lanes",
        ),
        (
            "phases = { warmup = 10, measure = 3000000000 }",
            4,
            "at most 2147483648",
        ),
    ] {
        let mut net = network_with(over);
        if over.starts_with("topology = { kind = \"torus\"") {
            net = over.to_string() + "\n";
        }
        let (l, e) = scenario_error(&net);
        assert_eq!(l, line, "{over}: {e}");
        assert!(e.contains(says), "{over}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn a_network_too_large_to_run_is_refused_at_its_size() {
    let net = network_with("topology = { kind = \"mesh\", k = 256 }")
        .replace("buffer = 10", "buffer = 1024")
        .replace("vls = [0, 1]", "vls = [0, 1, 2, 3, 4, 5, 6, 7, 8]");
    let (l, e) = scenario_error(&net);
    assert_eq!(l, 3, "{e}");
    assert!(e.contains("GB"), "{e}");
    // The same mesh with the default buffers and lanes is accepted.
    use super::scenario::FlitScenario;
    let text = format!(
        "name = \"x\"\n[network]\n{}",
        network_with("topology = { kind = \"mesh\", k = 256 }")
    );
    assert!(FlitScenario::parse("f.toml", &text, no_files).is_ok());
}

#[test]
fn a_graph_topology_comes_through_the_reader_not_the_file_system() {
    use super::scenario::FlitScenario;
    let mut asked = Vec::new();
    let s = FlitScenario::parse("nowhere/cascade.toml", GRAPH_SCENARIO, |p| {
        asked.push(p.to_string());
        Ok(("memory:topology.toml".to_string(), CASCADE.to_string()))
    })
    .unwrap();
    assert_eq!(asked, ["topology.toml"]);
    assert_eq!(s.network.topology.fabric().unwrap().nodes, 4);
    // A reader's refusal is reported at the line of `topology`.
    let e = FlitScenario::parse("g.toml", GRAPH_SCENARIO, |_| Err("gone".into()))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("g.toml:4:") && e.contains("gone"), "{e}");
}

#[test]
fn a_run_reports_its_progress_as_it_goes() {
    use super::scenario::{run_scenario, FlitScenario};
    let text = "name = \"p\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 0, measure = 20000, drain_max = 1000 }\n[[network.classes]]\nname = \"d\"\nvls = [0]\nrate = 0.001\n[sweep]\nclass = \"d\"\nrates = [0.001, 0.002]\n";
    let s = FlitScenario::parse("p.toml", text, no_files).unwrap();
    let mut seen = Vec::new();
    run_scenario("p.toml", &s, |p| seen.push((p.point, p.cycle, p.planned))).unwrap();
    assert_eq!(seen.first(), Some(&(0, 0, 20_000)));
    assert!(seen.contains(&(1, 0, 20_000)), "{seen:?}");
    // Within a point, cycles grow in steps of PROGRESS_EVERY.
    let first: Vec<u64> = seen.iter().filter(|p| p.0 == 0).map(|p| p.1).collect();
    assert!(first.len() >= 4, "{first:?}");
    assert!(first.windows(2).all(|w| w[1] > w[0]), "{first:?}");
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
