//! `clusterqos reproduce gulati`: table or JSON of published against measured values,
//! a report directory, exit 0 when it ran (a miss is a result), 1 on a miss with
//! `--check`, 2 on bad arguments. Runs one scenario at reduced length (the full
//! reproduction belongs to the command itself).

use assert_cmd::Command;
use predicates::prelude::*;

#[test]
fn one_scenario_reproduces_within_tolerance_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = Command::cargo_bin("clusterqos")
        .unwrap()
        .args([
            "reproduce",
            "gulati",
            "--only",
            "two-sources-one-destination",
            "--quick",
            "--json",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = v["results"][0]["checks"].as_array().unwrap();
    let flow2 = checks
        .iter()
        .find(|c| c["id"]["metric"] == "bandwidth" && c["id"]["flow"] == "flow 2")
        .unwrap();
    assert_eq!(flow2["published"]["value"], 75.91);
    assert_eq!(flow2["published"]["source"]["stated"], "§5.4.2");
    assert_eq!(flow2["role"], "prediction");
    assert_eq!(flow2["kind"], "value");
    assert_eq!(flow2["ok"], true);
    assert_eq!(flow2["verdict"], "pass");
    assert_eq!(flow2["id"]["experiment"], "two-sources-one-destination");
    assert!(flow2["mode"]["within"].is_number());
    assert_eq!(v["summary"]["misses"], 0);
    assert_eq!(v["summary"]["checks"], checks.len());
    assert_eq!(v["summary"]["values"], checks.len());
    for f in [
        "index.html",
        "checks.csv",
        "checks.json",
        "sources.csv",
        "report.json",
        "two-sources-one-destination-sharing.svg",
        "two-sources-one-destination-sharing.csv",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
}

#[test]
fn the_table_has_the_published_and_measured_columns() {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("clusterqos")
        .unwrap()
        .args([
            "reproduce",
            "gulati",
            "--only",
            "three-flows-one-node",
            "--quick",
            "--out",
        ])
        .arg(dir.path().join("r"))
        .assert()
        .success()
        .stdout(predicate::str::contains("published"))
        .stdout(predicate::str::contains("measured"))
        .stdout(predicate::str::contains("simulated").not())
        .stdout(predicate::str::contains("prediction"))
        .stdout(predicate::str::contains("39.810"))
        .stdout(predicate::str::contains(
            "5 checks (5 values, 0 bounds, 0 orderings) and 0 shown; 5 predictions, 0 fits, 0 identities; 0 misses, 0 not differentiated",
        ));
}

/// A documented miss is a result: the command exits 0 and shows it; with `--check` (CI)
/// it exits 1.
#[test]
fn a_known_miss_exits_0_and_shows_as_a_miss_and_1_with_check() {
    let dir = tempfile::tempdir().unwrap();
    for (check, code) in [(false, 0), (true, 1)] {
        let mut c = Command::cargo_bin("clusterqos").unwrap();
        c.args([
            "reproduce",
            "gulati",
            "--only",
            "overhead",
            "--quick",
            "--out",
        ])
        .arg(dir.path().join("r"));
        if check {
            c.arg("--check");
        }
        c.assert()
            .code(code)
            .stdout(predicate::str::contains("bandwidth-loss-worst"))
            .stdout(predicate::str::contains("miss"))
            .stdout(predicate::str::contains("2 bounds, 0 orderings"))
            .stdout(predicate::str::contains("; 2 misses, 0 not differentiated"));
    }
}

#[test]
fn unknown_paper_or_scenario_is_a_one_line_error() {
    Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["reproduce", "nobody"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid value 'nobody'"))
        .stderr(predicate::str::contains("gulati, nagar, yum"));
    Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["reproduce", "gulati", "--only", "nothing"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("best-effort-one"));
}

#[test]
fn same_seed_gives_byte_identical_json_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let run = |sub: &str| {
        let out = dir.path().join(sub);
        let o = Command::cargo_bin("clusterqos")
            .unwrap()
            .args([
                "reproduce",
                "gulati",
                "--only",
                "send-and-receive",
                "--quick",
                "--seed",
                "7",
                "--json",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0));
        (o.stdout, std::fs::read(out.join("report.json")).unwrap())
    };
    let (a, ra) = run("a");
    let (b, rb) = run("b");
    // The report path differs; everything else must be identical.
    let strip = |v: Vec<u8>| {
        String::from_utf8(v)
            .unwrap()
            .replace(dir.path().to_str().unwrap(), "")
    };
    assert_eq!(
        strip(a).replace("/a\"", "").replace("/b\"", ""),
        strip(b).replace("/a\"", "").replace("/b\"", "")
    );
    assert_eq!(ra, rb);
}

/// `reproduce nagar`, Table 2 reduced: Table 2's printed latencies are misses with
/// their reasons (exit 1 with --check), the crossover orderings hold, the report has
/// the paper's table, and the same seed gives byte-identical JSON.
#[test]
fn nagar_table_2_shows_its_misses_with_reasons_and_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let run = |sub: &str| {
        let out = dir.path().join(sub);
        let o = Command::cargo_bin("clusterqos")
            .unwrap()
            .args([
                "reproduce",
                "nagar",
                "--only",
                "table-2",
                "--quick",
                "--seed",
                "3",
                "--json",
                "--check",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.join("table-2.csv").exists() && out.join("index.html").exists());
        o.stdout
    };
    // The same JSON but for the report directory's name.
    let json = |bytes: Vec<u8>| {
        let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        v["report"] = serde_json::Value::Null;
        v
    };
    let v = json(run("a"));
    assert_eq!(v, json(run("b")));
    let checks = v["results"][0]["checks"].as_array().unwrap();
    let svia_4k = checks
        .iter()
        .find(|c| {
            c["id"]["metric"] == "latency" && c["id"]["flow"] == "svia" && c["id"]["at"] == "4K"
        })
        .unwrap();
    assert_eq!(svia_4k["published"]["value"], 48.0);
    assert_eq!(svia_4k["published"]["source"]["stated"], "Table 2");
    assert_eq!(svia_4k["ok"], false);
    assert!(svia_4k["note"].as_str().unwrap().contains("Table 1"));
    // The crossover: PVIA slower than SVIA at 1 KB, faster at 4 KB.
    let ratio = |size: &str| {
        checks
            .iter()
            .find(|c| {
                c["id"]["flow"] == "pvia" && c["id"]["reference"] == "svia" && c["id"]["at"] == size
            })
            .unwrap()["ok"]
            .clone()
    };
    assert_eq!(ratio("1K"), true);
    assert_eq!(ratio("4K"), true);
    let ordering = checks
        .iter()
        .find(|c| {
            c["id"]["flow"] == "pvia" && c["id"]["reference"] == "svia" && c["id"]["at"] == "4K"
        })
        .unwrap();
    assert_eq!(ordering["kind"], "ordering");
    assert_eq!(ordering["differentiated"], true);
    assert_eq!(ordering["published"]["value"], 1.0);
}

#[test]
fn nagar_unknown_scenario_lists_the_shipped_ones() {
    Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["reproduce", "nagar", "--only", "fig-9"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("fig-5"));
}

/// `reproduce nagar --real` runs Figs 3-4 on the agents' data planes: another scenario
/// or the kernel backend is a one-line error before anything is built.
#[test]
#[cfg(feature = "runtime")]
fn nagar_real_refuses_other_scenarios_and_the_kernel_backend() {
    for (args, says) in [
        (&["--only", "fig-5"][..], "runs fig-3-4 only, not 'fig-5'"),
        (&["--backend", "kernel"][..], "data planes only"),
        (&["--link-rate", "fast"][..], "--link-rate"),
    ] {
        let out = Command::cargo_bin("clusterqos")
            .unwrap()
            .args(["reproduce", "nagar", "--real"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(says),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// In a log (stderr not a terminal) `reproduce` says what it runs and how far it is.
#[test]
fn a_reproduction_writes_progress_lines_to_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::cargo_bin("clusterqos")
        .unwrap()
        .args([
            "reproduce",
            "gulati",
            "--only",
            "idt-sweep",
            "--quick",
            "--out",
        ])
        .arg(dir.path().join("r"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("reproduce gulati: 1 to run ("), "{err}");
    assert!(
        err.contains("reproduce gulati: 1/1 done, last idt-sweep ("),
        "{err}"
    );
    assert!(err.contains(" elapsed)"), "{err}");
}
