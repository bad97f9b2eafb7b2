//! `clusterqos reproduce nagar --real --quick` (real runtime): the Figs 3–4
//! CBR experiment on the namespace testbed — testbed up, Bmax measured, every load under
//! every packet scheduler with θ and messages with jitter from the receiving
//! applications, the checks against the paper, the report — and the testbed removed
//! afterwards. Needs root and network namespaces: ignored by default and run by
//! `scripts/test` where they can run. The figures themselves are real traffic on a
//! shared machine: this checks what was measured and reported, not its values.

mod common;

use common::real::reproduce_real;

/// Needs root and network namespaces: run by `scripts/test` as root (`-- --ignored root::`).
mod root {
    use super::*;

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc"]
    fn reproduce_nagar_real_measures_every_scheduler_at_every_load_and_removes_its_testbed() {
        let run = reproduce_real("nagar", 'v', &["--quick"]);
        let v = &run.json;
        let bmax = v["bmax_bytes_per_sec"].as_f64().unwrap();
        let capacity = v["payload_capacity_bytes_per_sec"].as_f64().unwrap();
        assert!(
            bmax > 0.3 * capacity && bmax < 1.05 * capacity,
            "{bmax} vs {capacity}"
        );
        let points = v["points"].as_array().unwrap();
        let loads: Vec<(u64, bool)> = points
            .iter()
            .map(|p| {
                (
                    p["channels_per_class"].as_u64().unwrap(),
                    p["best_effort"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(loads, [(1, false), (5, false), (25, false), (25, true)]);
        for p in points {
            let runs = p["runs"].as_array().unwrap();
            let names: Vec<&str> = runs
                .iter()
                .map(|r| r["scheduler"].as_str().unwrap())
                .collect();
            assert_eq!(
                names,
                ["rate-control", "virtual-clock", "fcfs", "round-robin", "gm"]
            );
            for r in runs {
                let classes = r["classes"].as_array().unwrap();
                assert_eq!(classes.len(), 3);
                // The best-effort channel is measured where it ran, and only there (under
                // VirtualClock it may be starved: it goes when no stamped packet waits).
                let be = r["best_effort_mb_s"].as_f64();
                assert_eq!(be.is_some(), p["best_effort"] == true, "{r}");
                assert!(be.is_none_or(|b| b >= 0.0), "{r}");
                // GM's rotation gives its destination turns whatever the reservations.
                if r["scheduler"] == "gm" {
                    assert!(be.is_none_or(|b| b > 0.0), "{r}");
                }
                for c in classes {
                    // Messages arrived and were measured at the receiving applications.
                    assert!(c["messages"].as_u64().unwrap() > 0, "{r}");
                    let theta = c["theta"].as_f64().unwrap();
                    let jittered = c["jittered"].as_f64().unwrap();
                    assert!(theta >= 0.0 && (0.0..=1.0).contains(&jittered), "{r}");
                }
            }
        }
        // The Bmax check, the paper's orderings at 30 MB/s and at the top load, the
        // bounds there and every scheduler's worst θ shown; beside the best-effort
        // channel the Fig 5 and design orderings and the bounds. The 30 MB/s ones have
        // the VIA model's ratio beside them.
        let checks = v["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 1 + 4 + 4 + 2 + 5 + 3 + 4 + 2);
        assert_eq!(v["summary"]["checks"], 20);
        let at_paper: Vec<&serde_json::Value> = checks
            .iter()
            .filter(|c| {
                c["id"]["at"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("5 ch/class"))
            })
            .collect();
        assert_eq!(at_paper.len(), 4);
        assert!(
            at_paper.iter().all(|c| c["simulated"].is_f64()),
            "{at_paper:?}"
        );
        let shown = checks.iter().filter(|c| c["published"].is_null()).count();
        assert_eq!(shown, 5, "every scheduler's worst θ at the top, shown");
        for c in checks.iter().filter(|c| !c["published"].is_null()) {
            assert!(c["published"]["source"].is_object(), "{c}");
            assert!(c["measured"].is_f64() || c["measured"].is_null(), "{c}");
        }
        let report = run.dir.path().join("report");
        assert!(report.join("index.html").exists());
        let html = std::fs::read_to_string(report.join("index.html")).unwrap();
        assert!(
            html.contains("virtual-clock") && html.contains("θ"),
            "report lacks the table"
        );
    }
}
