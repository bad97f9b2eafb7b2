//! The manager service as operators run it: `clusterqos manager` and `clusterqos agent`
//! as real processes on loopback, driven by `clusterqos request/release/status` and the
//! client library. Covers the crash test (kill -9 under load, restart, every
//! acknowledged grant back, agents re-synced), leases of killed clients, and ownership
//! across users.

mod common;

use common::other_user::{SharedDir, NOBODY};
use common::{Proc, BIN};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use qos_runtime::client::{Client, LocalFlow};
use qos_runtime::protocol::{Decision, IdtEntry};

const SECRET: &str = "process-test-secret-0123456789";

const TOPOLOGY: &str = r#"
[defaults]
t = "48us"
bmax = "81.8MB/s"
link = "160MB/s"

[build]
shape = "crossbar"
hosts = 4
"#;

enum Dir {
    Private(tempfile::TempDir),
    Shared(SharedDir),
}

struct Setup {
    dir: Dir,
    port: u16,
}

impl Setup {
    fn new() -> Setup {
        Setup::in_dir(Dir::Private(tempfile::tempdir().unwrap()))
    }

    /// A setup whose files another user can reach (sockets, a copy of the binary).
    fn shared() -> Result<Setup, String> {
        Ok(Setup::in_dir(Dir::Shared(SharedDir::new()?)))
    }

    fn in_dir(dir: Dir) -> Setup {
        let root = match &dir {
            Dir::Private(d) => d.path().to_path_buf(),
            Dir::Shared(d) => d.path().to_path_buf(),
        };
        std::fs::write(root.join("topology.toml"), TOPOLOGY).unwrap();
        std::fs::write(root.join("secret"), SECRET).unwrap();
        // A free port, fixed for the run so a restarted master is found again.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Setup { dir, port }
    }

    /// The binary another user can run: the shared copy, or the build's own.
    fn other_user_bin(&self) -> PathBuf {
        match &self.dir {
            Dir::Private(_) => PathBuf::from(BIN),
            Dir::Shared(d) => d.bin().to_path_buf(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        match &self.dir {
            Dir::Private(d) => d.path().join(name),
            Dir::Shared(d) => d.path().join(name),
        }
    }

    fn manager(&self, lease: &str) -> Proc {
        let mut child = Command::new(BIN)
            .args(["manager", "--topology"])
            .arg(self.path("topology.toml"))
            .arg("--db")
            .arg(self.path("manager.db"))
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .arg("--secret")
            .arg(self.path("secret"))
            .args(["--lease", lease])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("listening on"), "manager said {line:?}");
        Proc(child)
    }

    fn agent(&self, node: &str) -> Proc {
        let child = Command::new(BIN)
            .args(["agent", "--node", node, "--manager"])
            .arg(format!("http://127.0.0.1:{}", self.port))
            .arg("--secret")
            .arg(self.path("secret"))
            .arg("--socket")
            .arg(self.socket(node))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let p = Proc(child);
        assert!(
            wait(|| synced_flows(&self.socket(node)).is_some()),
            "agent {node} never synced"
        );
        p
    }

    fn socket(&self, node: &str) -> PathBuf {
        self.path(&format!("{node}.sock"))
    }

    /// `GET /v1/flows` from the master, with the secret.
    fn master_flows(&self) -> Vec<IdtEntry> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET /v1/flows HTTP/1.1\r\nhost: x\r\nconnection: close\r\nclusterqos-protocol: 1\r\nauthorization: Bearer {SECRET}\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
        #[derive(serde::Deserialize)]
        struct All {
            flows: Vec<IdtEntry>,
        }
        serde_json::from_str::<All>(body).unwrap().flows
    }
}

/// The agent's table if it is in sync with the master.
fn synced_flows(socket: &Path) -> Option<Vec<IdtEntry>> {
    let mut c = Client::connect(socket).ok()?;
    match c.call(qos_runtime::protocol::LocalOp::Flows {}).ok()? {
        qos_runtime::protocol::LocalResult::Flows {
            synced: true,
            flows,
            ..
        } => Some(flows),
        _ => None,
    }
}

fn wait(f: impl Fn() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn ports(flows: &[IdtEntry]) -> HashSet<u16> {
    flows.iter().map(|e| e.flow.src.port).collect()
}

#[test]
fn kill_9_under_load_keeps_every_acknowledged_grant_and_agents_resync() {
    let s = Setup::new();
    let mut master = s.manager("30s");
    let _agent = s.agent("n0");

    // 8 clients request 1 kB/s flows n0 -> n1 as fast as they can.
    let acked = Arc::new(Mutex::new(HashSet::<u16>::new()));
    let in_flight = Arc::new(Mutex::new(HashSet::<u16>::new()));
    let loaders: Vec<_> = (0..8u16)
        .map(|t| {
            let (acked, in_flight, socket) = (acked.clone(), in_flight.clone(), s.socket("n0"));
            std::thread::spawn(move || {
                let mut c = Client::connect(socket).unwrap();
                for i in 0..4000u16 {
                    let port = t * 4000 + i;
                    in_flight.lock().unwrap().insert(port);
                    match c.request_bandwidth(&LocalFlow::new(port, "n1", 0), 1000) {
                        Ok(Decision::Granted(_)) => {
                            in_flight.lock().unwrap().remove(&port);
                            acked.lock().unwrap().insert(port);
                        }
                        Ok(Decision::Rejected(r)) => panic!("unexpected rejection: {}", r.message),
                        Err(_) => return, // the master is gone: this one stays in flight
                    }
                }
            })
        })
        .collect();
    assert!(
        wait(|| acked.lock().unwrap().len() >= 300),
        "load never got going"
    );
    master.0.kill().unwrap(); // SIGKILL
    master.0.wait().unwrap();
    for l in loaders {
        l.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let in_flight = in_flight.lock().unwrap().clone();
    assert!(in_flight.len() <= 8);

    let _master = s.manager("30s");
    let recovered = ports(&s.master_flows());
    eprintln!(
        "acknowledged {}, in flight at the kill {}, recovered {}",
        acked.len(),
        in_flight.len(),
        recovered.len()
    );
    assert!(
        acked.is_subset(&recovered),
        "lost {} acknowledged grants",
        acked.difference(&recovered).count()
    );
    let extra: HashSet<u16> = recovered.difference(&acked).copied().collect();
    assert!(
        extra.is_subset(&in_flight),
        "flows nobody was granted: {extra:?}"
    );

    // The agent re-syncs on its own: its table equals the master's books.
    assert!(
        wait(|| synced_flows(&s.socket("n0")).map(|f| ports(&f)) == Some(recovered.clone())),
        "agent did not re-sync"
    );
}

#[test]
fn a_killed_client_loses_its_reservation_after_the_lease() {
    let s = Setup::new();
    let _master = s.manager("1s");
    let _agent = s.agent("n0");
    let app = Proc(Command::new("sleep").arg("30").spawn().unwrap());
    let out = Command::new(BIN)
        .args([
            "request",
            "--to",
            "n1:2",
            "--port",
            "5",
            "--bandwidth",
            "40MB/s",
            "--json",
        ])
        .args(["--pid", &app.0.id().to_string()])
        .arg("--socket")
        .arg(s.socket("n0"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: Decision = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        matches!(d, Decision::Granted(ref g) if g.idt_ps == Some(98_160_000)),
        "{d:?}"
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        s.master_flows().len(),
        1,
        "a live client keeps its flow past the lease"
    );

    drop(app); // kill -9, no release
    assert!(
        wait(|| s.master_flows().is_empty()),
        "flow outlived its owner"
    );
    assert!(wait(|| synced_flows(&s.socket("n0")) == Some(vec![])));
    let status = Command::new(BIN)
        .args(["status", "--json", "--socket"])
        .arg(s.socket("n0"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["premium_flows"], 0);
}

#[test]
fn rejections_exit_1_and_the_owner_releases() {
    let s = Setup::new();
    let _master = s.manager("30s");
    let _agent = s.agent("n0");
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .arg("--socket")
            .arg(s.socket("n0"))
            .output()
            .unwrap()
    };
    let me = std::process::id().to_string();
    let out = run(&[
        "request",
        "--to",
        "n1",
        "--bandwidth",
        "80MB/s",
        "--pid",
        &me,
    ]);
    assert!(out.status.success());
    let out = run(&[
        "request",
        "--to",
        "n2",
        "--bandwidth",
        "10MB/s",
        "--pid",
        &me,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("node n0 send"));

    let out = run(&["release", "--to", "n1"]);
    assert!(out.status.success());
    assert!(s.master_flows().is_empty());
}

/// Tests that switch to another uid: run by `scripts/test` as root (`-- --ignored root::`).
mod root {
    use super::*;

    #[test]
    #[ignore = "needs root: runs a command as another uid"]
    fn another_user_cannot_release_a_flow() {
        assert!(
            common::other_user::is_root(),
            "run as root: this test switches to uid {NOBODY}"
        );
        // Sockets and the binary in a directory every user can traverse, wherever the
        // checkout is: only the agent's own check stands in the other user's way.
        let s = Setup::shared().unwrap_or_else(|why| panic!("{why}"));
        let bin = s.other_user_bin();
        let _master = s.manager("30s");
        let _agent = s.agent("n0");
        let me = std::process::id().to_string();
        let out = Command::new(BIN)
            .args([
                "request",
                "--to",
                "n1",
                "--bandwidth",
                "20MB/s",
                "--pid",
                &me,
            ])
            .arg("--socket")
            .arg(s.socket("n0"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        use std::os::unix::process::CommandExt;
        let out = Command::new(bin)
            .args(["release", "--to", "n1", "--socket"])
            .arg(s.socket("n0"))
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.starts_with("error:") && err.contains("may not release"),
            "{err}"
        );
        assert_eq!(s.master_flows().len(), 1);
        let out = Command::new(BIN)
            .args(["release", "--to", "n1", "--socket"])
            .arg(s.socket("n0"))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(s.master_flows().is_empty());
    }
}

#[test]
fn bad_arguments_give_one_line_and_exit_2() {
    let s = Setup::new();
    let out = Command::new(BIN)
        .args(["manager", "--topology", "/nonexistent.toml", "--secret"])
        .arg(s.path("secret"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    std::fs::write(s.path("weak"), "short").unwrap();
    let out = Command::new(BIN)
        .args(["manager", "--topology"])
        .arg(s.path("topology.toml"))
        .arg("--secret")
        .arg(s.path("weak"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 16"));
    let out = Command::new(BIN)
        .args([
            "request",
            "--to",
            "n1",
            "--bandwidth",
            "40parsecs",
            "--socket",
        ])
        .arg(s.path("none.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // TLS settings that cannot work are refused before anything starts.
    let out = Command::new(BIN)
        .args(["agent", "--node", "n0", "--manager", "https://127.0.0.1:1"])
        .arg("--secret")
        .arg(s.path("secret"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-ca"));
    let out = Command::new(BIN)
        .args(["manager", "--topology"])
        .arg(s.path("topology.toml"))
        .arg("--secret")
        .arg(s.path("secret"))
        .args([
            "--tls-cert",
            "/nonexistent/cert.pem",
            "--tls-key",
            "/nonexistent/key.pem",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/cert.pem") && err.lines().count() == 1,
        "{err}"
    );
}

/// A build without the `etcd` feature names the feature instead of failing obscurely.
#[test]
#[cfg(not(feature = "etcd"))]
fn an_etcd_store_in_a_build_without_etcd_is_one_line_and_exit_2() {
    let s = Setup::new();
    let out = Command::new(BIN)
        .args(["manager", "--topology"])
        .arg(s.path("topology.toml"))
        .arg("--secret")
        .arg(s.path("secret"))
        .args(["--listen", "127.0.0.1:0", "--store", "etcd://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--features etcd") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn a_damaged_database_stops_the_manager_with_one_line_and_exit_2() {
    // Regression: a 0-byte file in place of the database started empty.
    let s = Setup::new();
    std::fs::write(s.path("manager.db"), b"").unwrap();
    let out = Command::new(BIN)
        .args(["manager", "--topology"])
        .arg(s.path("topology.toml"))
        .arg("--db")
        .arg(s.path("manager.db"))
        .arg("--secret")
        .arg(s.path("secret"))
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: database ") && err.contains("empty (0 bytes)"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty(), "it must not have started");
}
