//! CLI tests of `clusterqos bench network`, `clusterqos bench yum` and `clusterqos run`
//! on flit scenarios, at tiny sizes (the real benchmark is run by hand; see docs/flit-network.md).

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
        "model = \"flit\"\nname = \"tiny\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\nrouter = { buffer = 4 }\nphases = { warmup = 100, measure = 500 }\n[[network.classes]]\nname = \"d\"\nvls = [0]\n[sweep]\nclass = \"d\"\nrates = [0.001, 0.002]\n",
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
    std::fs::write(
        &bad,
        "model = \"flit\"\nname = \"b\"\n[network]\nwhat = 1\n",
    )
    .unwrap();
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["run", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:4"), "{err}");
}

#[test]
fn bench_network_repeat_reports_the_median_run() {
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["bench", "network", "--k", "2", "--warmup", "100"])
        .args(["--measure", "2000", "--repeat", "3", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["reference"];
    let mut runs: Vec<f64> = r["runs_cpu_seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(runs.len(), 3);
    runs.sort_by(f64::total_cmp);
    assert_eq!(r["cpu_seconds"].as_f64().unwrap(), runs[1]);
    let cycles = r["cycles"].as_f64().unwrap();
    let rate = r["cycles_per_cpu_s"].as_f64().unwrap();
    assert!((rate - cycles / runs[1]).abs() < 1e-6 * rate);
}

#[test]
fn bench_network_runs_the_booksim2_preset() {
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["bench", "network", "--k", "2", "--warmup", "100"])
        .args(["--measure", "500", "--preset", "booksim2", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["reference"]["cycles"].as_f64().unwrap() >= 600.0);
}

/// A flit scenario on a 2×2 mesh with `rates`.
fn tiny(dir: &std::path::Path, rates: &str) -> std::path::PathBuf {
    let f = dir.join("tiny.toml");
    std::fs::write(
        &f,
        format!("model = \"flit\"\nname = \"tiny\"\n[network]\ntopology = {{ kind = \"mesh\", k = 2 }}\nrouter = {{ buffer = 4 }}\nphases = {{ warmup = 100, measure = 500 }}\n[[network.classes]]\nname = \"d\"\nvls = [0]\n[sweep]\nclass = \"d\"\nrates = [{rates}]\n"),
    )
    .unwrap();
    f
}

/// In a log (stderr not a terminal) a run says what it runs and how far it is, with
/// or without `--json` (whose stdout stays JSON alone).
#[test]
fn run_shows_progress_lines_in_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let f = tiny(dir.path(), "0.001, 0.002");
    let rep = dir.path().join("rep");
    let run = |json: bool| {
        let mut c = Command::cargo_bin("clusterqos").unwrap();
        c.args(["run", f.to_str().unwrap(), "--out", rep.to_str().unwrap()]);
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    for json in [false, true] {
        let err = run(json);
        assert!(err.contains("run: 2 to run ("), "{err}");
        assert!(err.contains("run: 2/2 done, last tiny point 2 ("), "{err}");
        assert!(err.contains(" elapsed)"), "{err}");
    }
}

#[test]
fn run_names_the_line_of_a_value_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let f = tiny(dir.path(), "0.001");
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("vls = [0]", "vls = [0]\npacket_flits = 0");
    std::fs::write(&f, text).unwrap();
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["run", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tiny.toml:10:") && err.contains("packet_flits = 0"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn bench_yum_measures_the_mesh_with_admission_as_json() {
    let o = Command::cargo_bin("clusterqos")
        .unwrap()
        .args([
            "bench",
            "yum",
            "--warmup-ms",
            "1",
            "--measure-ms",
            "2",
            "--repeat",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["routers"], 25);
    assert_eq!(v["case"], "A");
    assert!(v["cycles_per_cpu_s"].as_f64().unwrap() > 0.0);
    assert!(v["requested"].as_u64().unwrap() > 0);
    assert_eq!(v["runs_cpu_seconds"].as_array().unwrap().len(), 2);
    let o = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["bench", "yum", "--load", "1.5"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_booksim2_configuration_runs_as_its_written_scenario_and_names_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("tiny.cfg");
    std::fs::write(
        &cfg,
        "// a 3x3 mesh, short phases\ntopology = mesh; k = 3; routing_function = dor;\n\
         num_vcs = 2; vc_buf_size = 4; packet_size = 4; injection_rate = 0.02;\n\
         credit_delay = 1; routing_delay = 0;\n\
         vc_allocator = separable_input_first; sw_allocator = separable_input_first;\n\
         sample_period = 500; warmup_periods = 1; max_samples = 3; seed = 5;\n",
    )
    .unwrap();
    let toml = dir.path().join("tiny.toml");
    let cli = || Command::cargo_bin("clusterqos").unwrap();
    let out = cli()
        .args(["from-booksim", cfg.to_str().unwrap(), "injection_rate=0.03"])
        .args(["--out", toml.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The override is in the written scenario; without it, `run FILE.cfg` and the
    // scenario `from-booksim` writes give the same results.
    assert!(std::fs::read_to_string(&toml)
        .unwrap()
        .contains("rates = [0.03]"));
    let out = cli()
        .args([
            "from-booksim",
            cfg.to_str().unwrap(),
            "--out",
            toml.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let run = |path: &std::path::Path| {
        let rep = dir.path().join("rep");
        let out = cli()
            .args([
                "run",
                path.to_str().unwrap(),
                "--json",
                "--out",
                rep.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["runs"][0]["points"].clone()
    };
    let from_cfg = run(&cfg);
    assert_eq!(from_cfg, run(&toml));
    assert_eq!(from_cfg.as_array().unwrap().len(), 1);
    // A setting the equivalent does not model, at its line.
    let bad = dir.path().join("bad.cfg");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &bad,
        text.replace(
            "routing_delay = 0;",
            "routing_delay = 0; output_speedup = 2;",
        ),
    )
    .unwrap();
    let out = cli().args(["run", bad.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.cfg:4:") && err.contains("output_speedup = 1 only"),
        "{err}"
    );
}
