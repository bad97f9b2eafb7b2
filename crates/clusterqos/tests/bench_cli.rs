//! CLI tests of `clusterqos bench network` and `clusterqos run` on flit scenarios, at
//! tiny sizes (the real benchmark is run by hand; see docs/flit-network.md).

use assert_cmd::Command;

#[test]
fn bench_network_prints_speed_as_json() {
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args([
            "bench",
            "network",
            "--k",
            "2",
            "--warmup",
            "100",
            "--measure",
            "500",
        ])
        .args(["--sizes", "2", "--compare", "1000", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["reference"]["cycles_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["peak_mb"].as_f64().is_some());
    assert!(v["ratio"].as_f64().unwrap() > 0.0);
    assert_eq!(v["scaling"].as_array().unwrap().len(), 1);
}

#[test]
fn bench_network_rejects_bad_rate() {
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["bench", "network", "--rate", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
}

#[test]
fn run_flit_scenario_writes_report_and_names_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("tiny.toml");
    std::fs::write(
        &good,
        "name = \"tiny\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 100, measure = 500 }\n[[network.classes]]\nname = \"d\"\nvls = [0]\n[sweep]\nclass = \"d\"\nrates = [0.001, 0.002]\n",
    )
    .unwrap();
    let out_dir = dir.path().join("rep");
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args([
            "run",
            good.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out_dir.join("latency-vs-load.svg").exists());
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"b\"\n[network]\nwhat = 1\n").unwrap();
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["run", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:3"), "{err}");
}
