//! Sweeps: expansion order, results independent of the number of workers, per-seed
//! determinism, and errors that still name the user's file and line.

use super::*;

/// A flit scenario small enough for debug builds: 4-port crossbar, short phases.
pub(crate) const SMALL_FLIT: &str = r#"model = "flit"
name = "tiny"
description = "4-port crossbar, short phases"

[network]
topology = { kind = "crossbar", ports = 4 }
seed = 5
phases = { warmup = 200, measure = 1000, drain_max = 2000 }

[network.router]
buffer = 4
delays = "booksim"

[[network.classes]]
name = "data"
vls = [0, 1]
packet_flits = 4
rate = 0.02
process = "bernoulli"
pattern = { kind = "uniform" }

[sweep]
class = "data"
rates = [0.01, 0.05]
"#;

fn sweep(over: &[&str], seeds: Option<Vec<u64>>) -> Sweep {
    Sweep {
        source: Source::new("tiny.toml", SMALL_FLIT),
        over: over.iter().map(|a| Param::parse(a).unwrap()).collect(),
        seeds,
        quick: false,
    }
}

fn json(r: &SweepRun) -> String {
    serde_json::to_string(r).unwrap()
}

#[test]
fn tasks_are_every_combination_at_every_seed_in_order() {
    let s = sweep(
        &[
            "network.router.buffer=4,8",
            "network.classes.data.packet_flits=2,4,8",
        ],
        Some(vec![1, 2]),
    );
    let t = s.tasks().unwrap();
    assert_eq!(t.len(), 12);
    assert_eq!(
        t[0].params.to_string(),
        "network.router.buffer=4 network.classes.data.packet_flits=2"
    );
    assert_eq!((t[0].seed, t[1].seed), (Some(1), Some(2)));
    assert_eq!(
        t[11].params.to_string(),
        "network.router.buffer=8 network.classes.data.packet_flits=8"
    );
    assert!(t.iter().enumerate().all(|(i, x)| x.index == i));
}

#[test]
fn results_do_not_depend_on_the_number_of_workers() {
    let s = sweep(&["network.router.buffer=2,4"], Some(vec![1, 2]));
    let one = s.run(1, &|_, _| {}).unwrap();
    let three = s.run(3, &|_, _| {}).unwrap();
    assert_eq!(json(&one), json(&three));
    assert_eq!(one.runs.len(), 4);
    // Each run is the pure task: the same as running that point alone.
    let alone = run_point(&s.source, &one.runs[3].params, Some(2), false).unwrap();
    assert_eq!(
        serde_json::to_string(&alone).unwrap(),
        serde_json::to_string(&one.runs[3].outcome).unwrap()
    );
    // The seed matters (else "deterministic per seed" would prove nothing).
    assert_ne!(
        serde_json::to_string(&one.runs[0].outcome).unwrap(),
        serde_json::to_string(&one.runs[1].outcome).unwrap()
    );
    let t = one.table();
    assert_eq!(t.columns[0], "network.router.buffer");
    assert_eq!(t.rows.len(), 8, "two points per run");
    assert_eq!(&t.shown_rows()[2][..2], &["2".to_string(), "2".to_string()]);
}

#[test]
fn progress_hears_every_run() {
    let s = sweep(&[], Some(vec![1, 2, 3]));
    let seen = std::sync::Mutex::new(Vec::new());
    s.run(2, &|done, n| seen.lock().unwrap().push((done, n)))
        .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort_unstable();
    assert_eq!(seen, vec![(1, 3), (2, 3), (3, 3)]);
}

#[test]
fn a_bad_value_is_reported_before_running_with_the_users_line() {
    // buffer = x is refused by the flit model's validation; the key is on line 11.
    let s = sweep(&["network.router.buffer=4,x"], None);
    let e = s.tasks().unwrap_err().to_string();
    assert!(
        e.starts_with("at network.router.buffer=x seed (any): tiny.toml:11"),
        "{e}"
    );
    let s = sweep(&["network.nonsense=1"], None);
    let e = s.tasks().unwrap_err().to_string();
    assert!(e.contains("tiny.toml:"), "{e}");
    assert!(e.contains("nonsense"), "{e}");
}

#[test]
fn an_unknown_scenario_names_the_shipped_ones() {
    let e = Source::resolve("no-such-scenario").unwrap_err().to_string();
    assert!(e.starts_with("no-such-scenario: no such file"), "{e}");
    assert!(e.contains("idt-sweep"), "{e}");
    let s = Source::resolve("idt-sweep").unwrap();
    assert_eq!(s.file, "scenarios/gulati/idt-sweep.toml");
    assert_eq!(s.model(), Model::Cluster);
}

#[test]
fn a_cluster_scenario_sweeps_over_its_own_keys() {
    let text = r#"model = "gulati"
name = "mine"
title = "two flows"
kind = "sharing"
hosts = 3
duration = "2ms"
warmup = "1ms"

[[flow]]
name = "a"
from = "n0"
to = "n1"

[[flow]]
name = "b"
from = "n0"
to = "n2"

[[case]]
label = "(2T, 4T)"
idts = ["2T", "4T"]
"#;
    let s = Sweep {
        source: Source::new("mine.toml", text),
        over: vec![Param::parse("case.0.idts=[\"2T\",\"2T\"],[\"2T\",\"8T\"]").unwrap()],
        seeds: Some(vec![3]),
        quick: false,
    };
    let r = s.run(2, &|_, _| {}).unwrap();
    assert_eq!(r.model, Model::Cluster);
    let ratio = |i: usize| match &r.runs[i].outcome {
        Outcome::Cluster { sim, seed, .. } => {
            assert_eq!(*seed, 3);
            sim.checks()
                .find(|c| c.id.metric == "ratio")
                .map(|c| c.measured)
                .unwrap()
        }
        Outcome::Flit { .. } => unreachable!(),
    };
    // Flow b's share against a's follows the IDTs written in: equal at (2T, 2T), well
    // under a third at (2T, 8T) (the IDT ratio is 1/4; the short run measures 0.18).
    assert!((ratio(0) - 1.0).abs() < 0.05, "{}", ratio(0));
    assert!(ratio(1) < 0.3, "{}", ratio(1));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["runs"][1]["params"]["case.0.idts"][1], "8T");
    assert!(v["runs"][0]["result"]["summary"].is_object());
}

#[test]
fn a_graph_topology_file_is_read_beside_the_scenario() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/flit/cascade2-graph.toml"
    );
    let source = Source::resolve(file).unwrap();
    let s = Sweep {
        source: source.clone(),
        over: vec![
            Param::parse("network.phases={ warmup = 100, measure = 500, drain_max = 1000 }")
                .unwrap(),
            Param::parse("sweep.rates=[0.004]").unwrap(),
        ],
        seeds: Some(vec![2]),
        quick: false,
    };
    let r = s.run(1, &|_, _| {}).unwrap();
    match &r.runs[0].outcome {
        Outcome::Flit { run, .. } => assert_eq!(run.points.len(), 1),
        Outcome::Cluster { .. } => unreachable!(),
    }
    // Moved elsewhere, the same text cannot find its topology, and says where it looked.
    let moved = Source::new("/nonexistent/cascade2-graph.toml", source.text);
    let e = moved.load().unwrap_err().to_string();
    assert!(
        e.starts_with("/nonexistent/cascade2-graph.toml:12:")
            && e.contains("cannot read /nonexistent/topologies/cascade2.toml"),
        "{e}"
    );
}
