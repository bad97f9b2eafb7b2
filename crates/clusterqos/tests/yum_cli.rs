//! `clusterqos run` on Yum et al. scenario files and `clusterqos reproduce yum`:
//! a user's scenario (with a trace file beside it) runs like the shipped ones, and
//! broken copies of the shipped scenarios are one line naming file:line, exit 2.

use assert_cmd::Command;

fn shipped(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/yum")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

fn run(dir: &tempfile::TempDir, file: &str, extra: &[&str]) -> (String, String, i32) {
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .arg("run")
        .arg(dir.path().join(file))
        .arg("--out")
        .arg(dir.path().join("report"))
        .args(extra)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
        out.status.code().unwrap_or(-1),
    )
}

/// Line (1-based) of the first occurrence of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> usize {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle}"));
    text[..at].matches('\n').count() + 1
}

#[test]
fn broken_copies_of_the_shipped_yum_scenarios_are_one_line_with_file_and_line() {
    let cases: &[(&str, &str, &str, &str)] = &[
        // (file, replace, with, what the message says)
        (
            "table2-wrr.toml",
            "loads = [0.6, 0.7, 0.8]",
            "loads = [0.6, 1.7, 0.8]",
            "above 0 and at most 1",
        ),
        (
            "table2-wrr.toml",
            "pointer = \"slow\"",
            "pointer = \"sideways\"",
            "sideways",
        ),
        (
            "table2-wrr.toml",
            "case = \"large-slow\"",
            "case = \"huge-slow\"",
            "no case 'huge-slow'",
        ),
        (
            "fig5-admission.toml",
            "measure = \"200ms\"",
            "measure = \"200 parsecs\"",
            "parsecs",
        ),
        (
            "fig5-admission.toml",
            "batches = 10",
            "batches = 10\nspeed = 3",
            "speed",
        ),
        (
            "fig5-admission.toml",
            "load = 0.7",
            "load = 0.75",
            "not one of workload.loads",
        ),
        (
            "fig6-mesh.toml",
            "k = 5",
            "k = 99",
            "a mesh side is 2 to 32 routers",
        ),
        (
            "fig8-9-best-effort.toml",
            "rate = \"100Mbit/s\" }",
            "rate = \"100Gbit/s\" }",
            "at most the link",
        ),
        (
            "fig6-mesh.toml",
            "value = \"20Mbit/s\"",
            "value = \"80Mbit/s\"",
            "outside its range",
        ),
        (
            "fig8-9-best-effort.toml",
            "solicit = \"peak\"",
            "solicit = \"peak\"\nprobe_flits = 0",
            "1 to 64 flits",
        ),
        (
            "table3-fig4-congestion.toml",
            "best_effort = 600 }",
            "best_effort = 6000 }",
            "at most the HCA buffer M = 640",
        ),
        ("fig7-cq.toml", "cq = \"quad\" }", "cq = \"octo\" }", "octo"),
        (
            "table3-fig4-congestion.toml",
            "congestion = { kind = \"alo\" }",
            "congestion = { kind = \"self_tuned\", drop = 2.0 }",
            "a fraction above 0 and at most 1",
        ),
        (
            "beyond-source-rate-4x4.toml",
            "utilisation = 0.9, share",
            "utilisation = 1.5, share",
            "congestion.utilisation: a fraction of the link above 0 and at most 1",
        ),
        (
            "beyond-source-rate-8x8.toml",
            "burst = 1 }",
            "burst = 0 }",
            "congestion.burst: 1 to 1000000 packets",
        ),
        (
            "table4-rejection.toml",
            "published = 0.164",
            "published = 0.164\ntolerance = 0.5",
            "acceptance bar",
        ),
    ];
    for (file, from, to, says) in cases {
        let text = shipped(file);
        assert!(text.contains(from), "{file}: {from}");
        let bad = text.replacen(from, to, 1);
        // The line the error must name: the replaced key's (for a tolerance, the
        // expectation's `tolerance` key; for an unknown key, the key itself).
        let key = to.lines().last().unwrap();
        let want = line_of(&bad, key);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.toml"), &bad).unwrap();
        let (out, err, code) = run(&dir, "bad.toml", &[]);
        assert_eq!(code, 2, "{file} {to}: {err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("bad.toml:{want}:")),
            "{file} {to}: want line {want}: {err}"
        );
        assert!(err.contains(says), "{file} {to}: {err}");
    }
}

const MINE: &str = r#"model = "yum"
name = "mine"
title = "four nodes replaying a trace"
seed = 4

[network]
topology = { kind = "crossbar", ports = 4 }
link = "160Mbit/s"

[workload]
loads = [0.5]
real_time = { kind = "mpeg", traces = [{ file = "traces/clip.txt", unit = "bits", fps = 25 }], regulator = { kind = "smooth" } }

[run]
warmup = "10ms"
measure = "160ms"
drain = "10ms"
batches = 4

[[case]]
label = "A"

[[case]]
label = "No A"
admission = { enabled = false }

[[expect]]
metric = "rejection"
case = "No A"
load = 0.5
published = 0.0
kind = "bound"
bound = "at-most"
role = "identity"
source = { stated = "no admission control, no refusal" }
"#;

#[test]
fn a_yum_scenario_file_replays_its_trace_and_writes_a_report() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("traces")).unwrap();
    std::fs::write(
        dir.path().join("traces/clip.txt"),
        "# frame sizes in bits\nI 400000\nB 80000\nB 80000\nP 200000\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("mine.toml"), MINE).unwrap();
    let (out, err, code) = run(&dir, "mine.toml", &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["misses"], 0, "{out}");
    let points = v["results"][0]["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        let m = &p["out"]["measures"];
        assert!(m["frames"]["frames"].as_u64().unwrap() > 0, "{p}");
        assert!(m["dmp"]["half_width"].is_number(), "{p}");
    }
    assert!(dir.path().join("report/index.html").exists());
    // A line of the trace at fault: the trace's file and line.
    std::fs::write(dir.path().join("traces/clip.txt"), "400000\n80000 B\n").unwrap();
    let (_, err, code) = run(&dir, "mine.toml", &[]);
    assert_eq!(code, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("clip.txt:2:"), "{err}");
    // A missing trace: the scenario's line that names it.
    std::fs::remove_file(dir.path().join("traces/clip.txt")).unwrap();
    let (_, err, code) = run(&dir, "mine.toml", &[]);
    assert_eq!(code, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("mine.toml:12:"), "{err}");
    assert!(err.contains("cannot read trace"), "{err}");
}

#[test]
fn reproduce_yum_names_its_scenarios_and_has_no_real_run() {
    let o = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["reproduce", "yum", "--only", "fig7"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("table2-wrr, fig5-admission, fig6-mesh, table4-rejection"),
        "{err}"
    );
    let o = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["reproduce", "yum", "--real"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
