//! Flit scenario files: the shipped ones load, every error names the file and line of
//! the value at fault, a graph topology comes through the reader, a run reports its
//! progress and its saturation.

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

/// A cascade of two crossbars (thesis Fig 2.4) as a qos-core topology file.
const CASCADE: &str = r#"
[build]
shape = "cascade"
switches = 2
hosts_per_switch = 2
"#;

/// A scenario on the graph of `topology.toml` next to it.
const GRAPH_SCENARIO: &str = r#"model = "flit"
name = "cascade"
[network]
topology = { kind = "graph", file = "topology.toml" }
router = { buffer = 16, delays = "booksim" }
phases = { warmup = 0, measure = 10, drain_max = 100000 }
[[network.classes]]
name = "data"
vls = [0, 1]
"#;

#[test]
fn shipped_scenarios_parse_and_validate() {
    use super::scenario::FlitScenario;
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
        assert!(
            text.starts_with("model = \"flit\"") || text.contains("\nmodel = \"flit\""),
            "{name}"
        );
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
    let text = "model = \"flit\"\nname = \"x\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 0, measure = 10 }\nspeed = 3\n[[network.classes]]\nname = \"d\"\nvls = [0]\n";
    let e = FlitScenario::parse("f.toml", text, no_files)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("f.toml:7"), "{e}");
    let text = "model = \"flit\"\nname = \"x\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 0, measure = 10 }\n[[network.classes]]\nname = \"d\"\nvls = [0]\n[sweep]\nclass = \"nope\"\nrates = [0.1]\n";
    let e = FlitScenario::parse("f.toml", text, no_files)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("f.toml:11") && e.contains("nope"), "{e}");
}

#[test]
fn a_sweep_of_several_classes_sets_each_ones_rate() {
    use super::scenario::FlitScenario;
    let net = "model = \"flit\"\nname = \"x\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 0, measure = 10 }\n[[network.classes]]\nname = \"a\"\nvls = [0]\n[[network.classes]]\nname = \"b\"\nvls = [1]\n[[network.classes]]\nname = \"c\"\nvls = [2]\nrate = 0.003\n[sweep]\n";
    let s = FlitScenario::parse(
        "f.toml",
        &format!("{net}classes = [\"a\", \"b\"]\nrates = [0.01, 0.02]\n"),
        no_files,
    )
    .unwrap();
    let rates: Vec<Vec<f64>> = s
        .points()
        .iter()
        .map(|(_, c)| c.classes.iter().map(|c| c.rate).collect())
        .collect();
    assert_eq!(rates, [[0.01, 0.01, 0.003], [0.02, 0.02, 0.003]]);
    for (sweep, line, says) in [
        (
            "classes = [\"a\", \"z\"]\nrates = [0.1]\n",
            18,
            "sweep.classes[1]: no class named 'z'",
        ),
        (
            "classes = [\"a\", \"a\"]\nrates = [0.1]\n",
            18,
            "'a' is named twice",
        ),
        (
            "class = \"a\"\nclasses = [\"b\"]\nrates = [0.1]\n",
            19,
            "either class or classes",
        ),
        ("rates = [0.1]\n", 17, "name the class swept"),
    ] {
        let e = FlitScenario::parse("f.toml", &format!("{net}{sweep}"), no_files)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("f.toml:{line}")) && e.contains(says),
            "{e}"
        );
    }
}

#[test]
fn a_run_of_several_classes_reports_each_class() {
    use super::scenario::{report, run_scenario, FlitScenario};
    let text = "model = \"flit\"\nname = \"two\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 100, measure = 500, drain_max = 500 }\n[[network.classes]]\nname = \"a\"\nvls = [0]\nrate = 0.002\n[[network.classes]]\nname = \"b\"\nvls = [1]\n[sweep]\nclasses = [\"a\", \"b\"]\nrates = [0.001, 0.002]\n";
    let s = FlitScenario::parse("t.toml", text, no_files).unwrap();
    let run = run_scenario("t.toml", &s, |_| {}).unwrap();
    let rep = report(&run, "");
    let t = rep
        .tables
        .iter()
        .find(|t| t.id == "classes")
        .expect("a table of the classes");
    assert_eq!(t.rows.len(), 4);
    // One class: its line of the points table says it all.
    let one = text
        .replace("[[network.classes]]\nname = \"b\"\nvls = [1]\n", "")
        .replace("classes = [\"a\", \"b\"]", "class = \"a\"");
    let s = FlitScenario::parse("t.toml", &one, no_files).unwrap();
    let rep = report(&run_scenario("t.toml", &s, |_| {}).unwrap(), "");
    assert!(rep.tables.iter().all(|t| t.id != "classes"));
}

#[test]
fn sweep_report_has_latency_figure_and_saturation() {
    use super::scenario::{report, run_scenario, FlitScenario};
    let text = "model = \"flit\"\nname = \"tiny\"\n[network]\ntopology = { kind = \"mesh\", k = 4 }\nrouter = { buffer = 10 }\nphases = { warmup = 500, measure = 2000, drain_max = 2000 }\n[[network.classes]]\nname = \"d\"\nvls = [0, 1]\n[sweep]\nclass = \"d\"\nrates = [0.002, 0.05]\n";
    let s = FlitScenario::parse("t.toml", text, no_files).unwrap();
    let run = run_scenario("t.toml", &s, |_| {}).unwrap();
    assert_eq!(run.points.len(), 2);
    assert_eq!(run.saturation, Some(0.05));
    let rep = report(&run, &s.description);
    assert!(rep.figures.iter().any(|f| f.id == "latency-vs-load"));
    let dir = tempfile::tempdir().unwrap();
    rep.write(dir.path()).unwrap();
    let problems = crate::report::audit::audit(dir.path());
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The first line of a scenario error, `file:line:...`, and its message.
fn scenario_error(network: &str) -> (usize, String) {
    use super::scenario::FlitScenario;
    let text = format!("model = \"flit\"\nname = \"x\"\n[network]\n{network}");
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
    // Lines: 1 model, 2 name, 3 [network], 4 topology, 5 phases, 6 [network.router],
    // 7 buffer, 8 [[network.classes]], 9 name, 10 vls, 11 packet_flits, 12 rate.
    for (over, line, says) in [
        ("buffer = 0", 7, "router.buffer = 0"),
        ("rate = 1.5", 12, "rate = 1.5"),
        ("rate = nan", 12, "rate = NaN"),
        ("topology = { kind = \"mesh\", k = 100000 }", 4, "topology.k = 100000"),
        (
            "topology = { kind = \"mesh\", k = 4, n = 9 }",
            4,
            "topology.n = 9: must be 1-8",
        ),
        (
            "topology = { kind = \"mesh\", k = 4, n = 0 }",
            4,
            "topology.n = 0: must be 1-8",
        ),
        (
            "topology = { kind = \"mesh\", k = 5, n = 7 }",
            4,
            "5^7 routers, at most 65536",
        ),
        ("vls = []", 10, "at least one lane"),
        ("packet_flits = 0", 11, "packet_flits = 0"),
        (
            "topology = { kind = \"torus\", k = 4 }\nphases = { warmup = 10, measure = 100 }\n[network.router]\nbuffer = 10\n[[network.classes]]\nname = \"d\"\nvls = [0]",
            10,
            "two lanes",
        ),
        (
            "phases = { warmup = 10, measure = 3000000000 }",
            5,
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
    assert_eq!(l, 4, "{e}");
    assert!(e.contains("GB"), "{e}");
    // The same mesh with the default buffers and lanes is accepted.
    use super::scenario::FlitScenario;
    let text = format!(
        "model = \"flit\"\nname = \"x\"\n[network]\n{}",
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
    let text = "model = \"flit\"\nname = \"p\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 0, measure = 20000, drain_max = 1000 }\n[[network.classes]]\nname = \"d\"\nvls = [0]\nrate = 0.001\n[sweep]\nclass = \"d\"\nrates = [0.001, 0.002]\n";
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

/// A load at which the network deadlocks is reported as such: unstable, with a summary
/// line saying so (the network of `qos_sim`'s deadlock test, an 8×8 `xy_yx` mesh with
/// three VCs far past saturation, which deadlocks in BookSim2 too).
#[test]
fn a_deadlocked_load_is_said_in_the_summary() {
    use super::scenario::{run_scenario, summary_lines, FlitScenario};
    let text = "model = \"flit\"\nname = \"dl\"\n[network]\n\
        topology = { kind = \"mesh\", k = 8, routing = \"xy_yx\" }\nseed = 0\n\
        phases = { warmup = 1000, measure = 8000, drain_max = 1000, abort_latency = 1e12, sample_period = 1000 }\n\
        watchdog = 500\n[network.router]\nbuffer = 4\ndelays = \"booksim2\"\n\
        [[network.classes]]\nname = \"data\"\nvls = [0, 1, 2]\npacket_flits = 5\nrate = 0.1\n\
        [sweep]\nclass = \"data\"\nrates = [0.1]\n";
    let s = FlitScenario::parse("t.toml", text, no_files).unwrap();
    let run = run_scenario("t.toml", &s, |_| {}).unwrap();
    assert!(run.points[0].result.unstable);
    let lines = summary_lines(&run);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("at 0.1 packets/node/cycle the network deadlocked")),
        "{lines:?}"
    );
}
