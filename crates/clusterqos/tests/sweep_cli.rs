//! `clusterqos sweep`: every combination of values and seeds, the same JSON
//! whatever the number of workers, a table row per point, CSV, and one-line errors
//! naming file:line with exit status 2.

use assert_cmd::Command;

const TINY: &str = r#"model = "flit"
name = "tiny"
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

fn sweep(dir: &tempfile::TempDir, args: &[&str]) -> std::process::Output {
    let f = dir.path().join("tiny.toml");
    std::fs::write(&f, TINY).unwrap();
    Command::cargo_bin("clusterqos")
        .unwrap()
        .arg("sweep")
        .arg(&f)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn results_are_the_same_on_one_or_three_workers() {
    let dir = tempfile::tempdir().unwrap();
    let args = |w: &'static str| {
        [
            "--over",
            "network.router.buffer=2,4",
            "--over",
            "network.classes.data.packet_flits=2,4",
            "--seeds",
            "1..2",
            "--workers",
            w,
            "--json",
        ]
    };
    let one = sweep(&dir, &args("1"));
    let three = sweep(&dir, &args("3"));
    assert_eq!(
        one.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    assert_eq!(one.stdout, three.stdout);
    let v: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 8);
    assert_eq!(runs[0]["params"]["network.router.buffer"], 2);
    assert_eq!(runs[0]["seed"], 1);
    assert_eq!(runs[7]["params"]["network.classes.data.packet_flits"], 4);
    assert_eq!(runs[7]["seed"], 2);
    assert_eq!(runs[0]["result"]["points"].as_array().unwrap().len(), 2);
    assert_ne!(
        runs[0]["result"], runs[1]["result"],
        "the seed changes the run"
    );
}

#[test]
fn one_run_on_one_worker_is_said_in_the_singular() {
    let dir = tempfile::tempdir().unwrap();
    let o = sweep(
        &dir,
        &[
            "--over",
            "network.router.buffer=2",
            "--seeds",
            "7",
            "--workers",
            "1",
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    let last = out.lines().last().unwrap_or_default();
    assert!(last.starts_with("1 run of "), "{out}");
    assert!(last.ends_with(" on 1 worker"), "{out}");
}

#[test]
fn the_table_has_a_row_per_point_and_goes_to_csv() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let o = sweep(
        &dir,
        &[
            "--over",
            "network.router.buffer=2,4",
            "--seeds",
            "7",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("2 runs of"), "{out}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "header and two points per run: {text}");
    assert!(lines[0].starts_with("network.router.buffer,seed,rate"));
    assert!(lines[1].starts_with("2,7,0.01,"));
}

#[test]
fn errors_are_one_line_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tiny.toml");
    for (args, want) in [
        (
            vec!["--over", "network.router.bufer=2"],
            // The added key is written at the end of its table, line 11 of the edited
            // scenario (after `delays`, line 10): the error names where it went.
            format!(
                "error: at network.router.bufer=2 seed (any): {}:11:1: unknown field `bufer`",
                f.display()
            ),
        ),
        (
            vec!["--over", "network.router.buffer"],
            "error: --over network.router.buffer: expected KEY=V1,V2".to_string(),
        ),
        (
            vec!["--seeds", "9..1"],
            "error: --seeds 9..1: expected seeds".to_string(),
        ),
        (
            vec!["--workers", "0"],
            "error: --workers must be at least 1".to_string(),
        ),
    ] {
        let o = sweep(&dir, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].starts_with(&want),
            "{} does not start with {want}",
            lines[0]
        );
        assert!(
            lines[0].matches("unknown field").count() <= 1,
            "said once: {}",
            lines[0]
        );
    }
}
