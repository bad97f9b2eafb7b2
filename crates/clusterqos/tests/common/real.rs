//! `clusterqos reproduce PAPER --real …` for the root tests: the run on a testbed in a
//! temporary directory, and what every such test checks first — it ran (exit 0, or 1 for
//! a miss), said it removed its testbed and left no namespace behind.
#![allow(dead_code)]

use std::process::Command;

use super::BIN;

/// A finished real reproduction.
pub struct RealRun {
    /// Its `--json` output.
    pub json: serde_json::Value,
    /// Its progress and messages.
    pub stderr: String,
    /// Holds `report/` (and held `testbed/`); removed when dropped.
    pub dir: tempfile::TempDir,
}

/// Runs `clusterqos reproduce PAPER --real ARGS --json` with namespaces prefixed by `tag`
/// and the process id, the report and testbed in a fresh temporary directory; panics
/// unless it ran, removed its testbed and left no namespace.
pub fn reproduce_real(paper: &str, tag: char, args: &[&str]) -> RealRun {
    if let Some(why) = qos_runtime::testbed::unavailable_reason() {
        panic!("reproduce --real needs {why}");
    }
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("{tag}{}", std::process::id() % 100_000);
    let out = Command::new(BIN)
        .args(["reproduce", paper, "--real"])
        .args(args)
        .args(["--json", "--prefix", &prefix, "--out"])
        .arg(dir.path().join("report"))
        .arg("--testbed-dir")
        .arg(dir.path().join("testbed"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "reproduce {paper} --real {args:?} failed: {stderr}"
    );
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&netns.stdout);
    assert!(
        !left.lines().any(|l| l.starts_with(&format!("{prefix}-"))),
        "namespaces left behind: {left}"
    );
    assert!(stderr.contains("testbed removed"), "{stderr}");
    let json = serde_json::from_slice(&out.stdout).unwrap();
    RealRun { json, stderr, dir }
}
