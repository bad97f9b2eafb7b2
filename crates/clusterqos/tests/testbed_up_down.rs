//! `clusterqos testbed up/down` and `calibrate --testbed` on real namespaces. Needs root
//! and network namespaces: ignored by default and run by `scripts/test` where they can run.

use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;

fn cq() -> Command {
    Command::cargo_bin("clusterqos").unwrap()
}

fn namespaces() -> String {
    String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned()
}

/// Needs root and network namespaces: run by `scripts/test` as root (`-- --ignored root::`).
mod root {
    use super::*;

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc"]
    fn testbed_up_shapes_links_runs_services_calibrates_and_down_removes_exactly_what_it_made() {
        if let Some(why) = qos_runtime::testbed::unavailable_reason() {
            panic!("testbed needs {why}");
        }
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("t{}", std::process::id() % 100_000);
        let before = namespaces();
        let up = cq()
            .args([
                "testbed",
                "up",
                "--nodes",
                "3",
                "--link-rate",
                "40Mbit/s",
                "--prefix",
                &prefix,
                "--subnet",
                "10.77.9",
                "--scheduler",
                "h1=virtual-clock",
                "--json",
                "--dir",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        let teardown = || {
            let _ = cq()
                .args(["testbed", "down", "--dir"])
                .arg(dir.path())
                .output();
        };
        if !up.status.success() {
            teardown();
            panic!("testbed up failed: {}", String::from_utf8_lossy(&up.stderr));
        }
        let st: serde_json::Value = serde_json::from_slice(&up.stdout).unwrap();
        let result = std::panic::catch_unwind(|| {
            assert_eq!(st["hosts"].as_array().unwrap().len(), 3);
            let ns = namespaces();
            for n in [
                format!("{prefix}-sw"),
                format!("{prefix}-h0"),
                format!("{prefix}-h2"),
            ] {
                assert!(ns.contains(&n), "namespace {n} exists");
            }
            // Both directions of every link are shaped with tbf at 40 Mbit/s = 5 MB/s.
            let q = qos_runtime::testbed::qdiscs(&format!("{prefix}-h1"), "eth0").unwrap();
            assert!(q.contains("tbf") && q.contains("40Mbit"), "{q}");
            let q = qos_runtime::testbed::qdiscs(&format!("{prefix}-sw"), "p1").unwrap();
            assert!(q.contains("tbf") && q.contains("40Mbit"), "{q}");
            // Each host has its address on eth0 (traffic between hosts is shown by calibrate below).
            let a = qos_runtime::testbed::exec_in(
                &format!("{prefix}-h2"),
                "ip",
                &["-4", "addr", "show", "eth0"],
            )
            .unwrap();
            assert!(a.contains("10.77.9.3/24"), "{a}");
            // Manager and agents are running.
            for p in st["processes"].as_array().unwrap() {
                let pid = p["pid"].as_u64().unwrap();
                assert!(
                    std::path::Path::new(&format!("/proc/{pid}")).exists(),
                    "{} is running",
                    p["role"]
                );
            }
            // Each agent runs the scheduler its host was given: h1 VirtualClock,
            // paced to the link; the others rate control, unpaced.
            let cmdline = |role: &str| {
                let p = st["processes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["role"] == role)
                    .unwrap_or_else(|| panic!("no {role}"));
                let raw =
                    std::fs::read(format!("/proc/{}/cmdline", p["pid"].as_u64().unwrap())).unwrap();
                String::from_utf8_lossy(&raw).replace('\0', " ")
            };
            let h1 = cmdline("agent-h1");
            assert!(
                h1.contains("--scheduler virtual-clock") && h1.contains("--link-rate 5000000B/s"),
                "{h1}"
            );
            let h0 = cmdline("agent-h0");
            assert!(
                h0.contains("--scheduler rate-control") && !h0.contains("--link-rate"),
                "{h0}"
            );
            // Calibration through the shaped link finds Bmax near the link rate.
            let topo = dir.path().join("topology.toml");
            let cal = cq()
                .args(["calibrate", "--messages", "12", "--json", "--testbed"])
                .arg(dir.path())
                .arg("--topology")
                .arg(&topo)
                .output()
                .unwrap();
            assert!(
                cal.status.success(),
                "calibrate: {}",
                String::from_utf8_lossy(&cal.stderr)
            );
            let c: serde_json::Value = serde_json::from_slice(&cal.stdout).unwrap();
            let bmax = c["bmax_bytes_per_sec"].as_u64().unwrap() as f64;
            assert!(
                bmax > 2.5e6 && bmax < 5.6e6,
                "Bmax {bmax} B/s vs a 5 MB/s link"
            );
            let text = std::fs::read_to_string(&topo).unwrap();
            assert!(
                text.contains("bmax = ") && text.contains("t = \""),
                "{text}"
            );
        });
        let down = cq()
            .args(["testbed", "down", "--json", "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            down.status.success(),
            "down: {}",
            String::from_utf8_lossy(&down.stderr)
        );
        assert_eq!(
            namespaces().lines().count(),
            before.lines().count(),
            "down removed exactly what up created"
        );
        assert!(!dir.path().join("testbed.json").exists());
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn testbed_up_refuses_the_machines_own_network_and_bad_arguments() {
    let out = cq()
        .args([
            "testbed",
            "up",
            "--nodes",
            "2",
            "--link-rate",
            "fast",
            "--dir",
            "/nonexistent-cq",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: --link-rate"));
    let out = cq()
        .args([
            "testbed",
            "up",
            "--nodes",
            "2",
            "--link-rate",
            "1MB/s",
            "--subnet",
            "192.0.2",
            "--dir",
            "/nonexistent-cq",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("192.0.2.0/24"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A bad scheduler name is refused before anything is built.
    let out = cq()
        .args([
            "testbed",
            "up",
            "--nodes",
            "2",
            "--link-rate",
            "1MB/s",
            "--scheduler",
            "h0=virtual-clock,h1=wfq",
            "--dir",
            "/nonexistent-cq",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: --scheduler: unknown scheduler 'wfq'") && err.lines().count() == 1,
        "{err}"
    );
}
