//! A namespace testbed (`clusterqos testbed up`) for the root tests: hosts as network
//! namespaces behind one switch namespace, a manager on h0 and an agent per host,
//! removed when dropped; and the small command helpers those tests share.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::BIN;

/// Runs a command to completion, stdin closed.
pub fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().expect("spawning")
}

/// A command's status and output, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {}: stdout {} stderr {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The standard output of `sh -c SCRIPT` in namespace `ns`.
pub fn sh(ns: &str, script: &str) -> String {
    let o = run(Command::new("ip").args(["netns", "exec", ns, "sh", "-c", script]));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Waits (bounded) until `f` holds; false if it never did.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    f()
}

/// The u32 filters that send packets to one of the backend's classes (`c05:`) in `tc
/// filter show` output (not the jobs' BPF classifier, whose line names `c05:` too).
pub fn u32_filters(tc: &str) -> usize {
    tc.lines()
        .filter(|l| l.contains(" u32 ") && l.contains("flowid c05:"))
        .count()
}

/// A testbed, removed when dropped.
pub struct Testbed {
    pub dir: tempfile::TempDir,
    pub prefix: String,
    pub subnet: String,
}

impl Testbed {
    /// `nodes` hosts on 40 Mbit/s links, namespaces named `<tag><pid>-h<i>`, addresses
    /// `<subnet>.<i + 1>`; `backend` is the agents' (`dataplane` or `kernel`).
    pub fn up(nodes: usize, tag: &str, subnet: &str, backend: &str) -> Testbed {
        Testbed::build(nodes, tag, subnet, &["--backend", backend])
    }
    /// The network alone: no manager, no agents (nothing touches traffic control).
    pub fn network(nodes: usize, tag: &str, subnet: &str) -> Testbed {
        Testbed::build(nodes, tag, subnet, &["--no-services"])
    }
    fn build(nodes: usize, tag: &str, subnet: &str, extra: &[&str]) -> Testbed {
        if let Some(why) = qos_runtime::testbed::unavailable_reason() {
            panic!("testbed needs {why}");
        }
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("{tag}{}", std::process::id() % 10_000);
        let o = run(Command::new(BIN)
            .args(["testbed", "up"])
            .args(extra)
            .arg("--nodes")
            .arg(nodes.to_string())
            .args([
                "--link-rate",
                "40Mbit/s",
                "--prefix",
                &prefix,
                "--subnet",
                subnet,
            ])
            .arg("--dir")
            .arg(dir.path()));
        assert!(o.status.success(), "testbed up: {}", text(&o));
        Testbed {
            dir,
            prefix,
            subnet: subnet.into(),
        }
    }
    /// The namespace of `host` ("h1").
    pub fn ns(&self, host: &str) -> String {
        format!("{}-{host}", self.prefix)
    }
    /// The address of host `i`.
    pub fn addr(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 1)
    }
    /// The manager's URL.
    pub fn manager(&self) -> String {
        format!("http://{}:7400", self.addr(0))
    }
    /// The Unix socket of `host`'s agent.
    pub fn socket(&self, host: &str) -> PathBuf {
        self.dir.path().join(format!("{host}.agent.sock"))
    }
    /// The pid of the process `testbed up` started as `role` ("agent-h1").
    pub fn pid(&self, role: &str) -> u32 {
        let st: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(self.dir.path().join("testbed.json")).unwrap(),
        )
        .unwrap();
        st["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["role"] == role)
            .unwrap()["pid"]
            .as_u64()
            .unwrap() as u32
    }
    /// The cluster's secret file.
    pub fn secret(&self) -> PathBuf {
        self.dir.path().join("secret")
    }
    /// `clusterqos job ARGS` against the testbed's manager, from `host`.
    pub fn job(&self, host: &str, args: &[&str]) -> Output {
        run(Command::new("ip")
            .args(["netns", "exec", &self.ns(host), BIN, "job"])
            .args(args)
            .args(["--manager", &self.manager()])
            .arg("--secret")
            .arg(self.secret()))
    }
    /// The ids of the jobs the manager holds.
    pub fn jobs_held(&self) -> Vec<String> {
        let o = self.job("h0", &["list", "--json"]);
        assert!(o.status.success(), "job list: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_string())
            .collect()
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = run(Command::new(BIN)
            .args(["testbed", "down", "--dir"])
            .arg(self.dir.path()));
        // A failed test keeps its directory (logs, configuration) to be read.
        if std::thread::panicking() {
            self.dir.disable_cleanup(true);
            eprintln!("kept the test's directory {}", self.dir.path().display());
        }
    }
}
