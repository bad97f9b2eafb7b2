//! CLI tests of `clusterqos bench manager` at a tiny size (the real benchmark is run by
//! hand; figures in docs/ha-manager.md): its JSON, and on etcd, etcd's own
//! account of each phase — transactions, operations per transaction, fsyncs.

use assert_cmd::Command;

fn bench(dir: &std::path::Path, store: &str) -> serde_json::Value {
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args([
            "bench",
            "manager",
            "--k",
            "4",
            "--flows",
            "200",
            "--clients",
            "4",
        ])
        .args(["--sync", "normal", "--store", store, "--json", "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn bench_manager_on_sqlite_times_every_decision_and_has_no_etcd_account() {
    let dir = tempfile::tempdir().unwrap();
    let v = bench(dir.path(), "sqlite");
    let r = &v.as_array().unwrap()[0];
    assert_eq!(r["sync"], "sqlite normal");
    assert_eq!(r["decisions"]["count"], 200);
    assert_eq!(r["via_agents"]["count"], 200);
    assert!(r["decisions"]["per_sec"].as_f64().unwrap() > 0.0);
    assert!(r["decisions"]["etcd"].is_null());
}

#[cfg(feature = "etcd")]
mod etcd {
    use super::bench;

    #[test]
    #[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
    fn bench_manager_on_etcd_says_how_decisions_were_grouped_and_how_long_fsyncs_took() {
        let dir = tempfile::tempdir().unwrap();
        let v = bench(dir.path(), "etcd");
        let r = &v.as_array().unwrap()[0];
        assert_eq!(r["sync"], "etcd 3 members");
        for phase in ["decisions", "releases", "via_agents"] {
            let p = &r[phase];
            let a = &p["etcd"];
            let txns = a["transactions"].as_u64().unwrap();
            let count = p["count"].as_u64().unwrap();
            // Every decision is committed (releases: one per granted flow), in at least
            // one transaction, at most one each plus the resolving reads.
            assert!(count > 0 && txns > 0, "{phase}: {p}");
            assert!(
                a["ops_per_transaction"].as_f64().unwrap() >= 0.5,
                "{phase}: {p}"
            );
            // Each commit is fsynced by a quorum of the members (the resolving reads,
            // which are not, are rare).
            assert!(a["fsyncs"].as_u64().unwrap() >= txns, "{phase}: {p}");
            assert!(a["fsync_mean_ms"].as_f64().unwrap() > 0.0, "{phase}: {p}");
            assert!(a["fsync_p99_ms"].as_f64().unwrap() > 0.0, "{phase}: {p}");
        }
        // One transaction in flight: etcd's time per transaction is part of the wall
        // time per transaction.
        let a = &r["decisions"]["etcd"];
        let etcd_ms = a["etcd_ms_per_transaction"].as_f64().unwrap();
        assert!(etcd_ms > 0.0, "{a}");
        assert!(etcd_ms <= a["ms_per_transaction"].as_f64().unwrap(), "{a}");
    }
}
