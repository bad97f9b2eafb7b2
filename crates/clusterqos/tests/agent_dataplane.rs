//! `clusterqos agent --nodes ...` runs the node's data plane beside its local manager:
//! two agents as real processes on loopback, applications on each opening ports through
//! the client library, a premium flow granted by the master, and messages crossing from
//! one node to the other in order.

mod common;

use common::{Proc, BIN};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use qos_client::{Port, PortOptions};

const TOPOLOGY: &str = r#"
[defaults]
t = "48us"
bmax = "81.8MB/s"
link = "160MB/s"

[build]
shape = "crossbar"
hosts = 2
"#;

/// A UDP port on loopback for an agent started as another process (which must bind it
/// itself, so the port cannot be handed over bound). Drawn at random below the kernel's
/// ephemeral range (32768 and up on Linux), where no `bind(port 0)` of another test or
/// process lands, and checked free just before: only another explicit choice could
/// take it before the agent binds, not the many port-0 binds of a parallel test run.
fn free_udp() -> u16 {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    loop {
        let port = rng.gen_range(20_000..32_000);
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn wait_for(path: &Path) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A master and the agents of n0 and n1 with their data planes, their files in `dir`
/// (topology, secret, sockets `NODE.sock` and `NODE-dp.sock`); `agent_args` go to both
/// agents. Returns once every socket exists.
fn cluster(dir: &Path, agent_args: &[&str]) -> Vec<Proc> {
    let p = |n: &str| dir.join(n);
    std::fs::write(p("topology.toml"), TOPOLOGY).unwrap();
    std::fs::write(p("secret"), "agent-dataplane-secret-0123456789").unwrap();

    let mut master = Command::new(BIN)
        .args(["manager", "--listen", "127.0.0.1:0", "--topology"])
        .arg(p("topology.toml"))
        .arg("--db")
        .arg(p("m.db"))
        .arg("--secret")
        .arg(p("secret"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(master.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let master = Proc(master);
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("manager said {line:?}"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();

    let nodes = format!("n0=127.0.0.1:{},n1=127.0.0.1:{}", free_udp(), free_udp());
    let agent = |node: &str| {
        Proc(
            Command::new(BIN)
                .args(["agent", "--node", node, "--manager"])
                .arg(format!("http://{addr}"))
                .arg("--secret")
                .arg(p("secret"))
                .arg("--socket")
                .arg(p(&format!("{node}.sock")))
                .args(["--nodes", &nodes, "--dataplane-socket"])
                .arg(p(&format!("{node}-dp.sock")))
                .args(agent_args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let procs = vec![master, agent("n0"), agent("n1")];
    // The control socket is bound after the data plane's: wait for all.
    for s in ["n0-dp.sock", "n1-dp.sock", "n0.sock", "n1.sock"] {
        assert!(wait_for(&p(s)), "{s} never appeared");
    }
    procs
}

#[test]
fn agents_with_nodes_carry_messages_between_ports_under_a_grant() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let _cluster = cluster(dir.path(), &[]);

    let mut tx = Port::open(
        PortOptions::new(p("n0-dp.sock"))
            .port(1)
            .manager_socket(p("n0.sock")),
    )
    .unwrap();
    let mut rx = Port::open(PortOptions::new(p("n1-dp.sock")).port(2)).unwrap();
    let grant = tx.request_bandwidth("n1", 2, 20_000_000).unwrap();
    assert!(
        matches!(grant, qos_client::Grant::Granted),
        "20 MB/s fits an idle crossbar: {grant:?}"
    );
    for i in 0..50u32 {
        let data: Vec<u8> = (0..1000 + i * 97).map(|j| (i ^ j) as u8).collect();
        tx.send("n1", 2, 0, &data).unwrap();
        let m = rx.recv(Duration::from_secs(10)).unwrap();
        assert_eq!(m.data, data, "message {i}");
        assert_eq!((m.src_node.as_str(), m.src_port), ("n0", 1));
    }
    tx.release("n1", 2).unwrap();
}

#[test]
fn data_plane_options_need_nodes() {
    let out = Command::new(BIN)
        .args([
            "agent",
            "--node",
            "n0",
            "--manager",
            "http://127.0.0.1:1",
            "--secret",
            "/nonexistent",
            "--scheduler",
            "gm",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--nodes"));
}

/// Every scheduler kind is accepted by name (chosen per node): each gets past
/// the option and on to loading the secret, which does not exist; a bad name is a
/// one-line error naming it and listing the good ones.
#[test]
fn every_scheduler_is_selectable_and_a_bad_name_is_a_one_line_error() {
    let run = |scheduler: &str| {
        Command::new(BIN)
            .args([
                "agent",
                "--node",
                "n0",
                "--manager",
                "http://127.0.0.1:1",
                "--secret",
                "/nonexistent-cq-secret",
                "--nodes",
                "n0=127.0.0.1:1,n1=127.0.0.1:2",
                "--scheduler",
                scheduler,
            ])
            .output()
            .unwrap()
    };
    for name in [
        "rate",
        "rate-control",
        "virtual-clock",
        "round-robin",
        "message-round-robin",
        "interleaved-round-robin",
        "gm",
    ] {
        let out = run(name);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains("/nonexistent-cq-secret"), "{name}: {err}");
    }
    let out = run("fifo");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: --scheduler: unknown scheduler 'fifo'")
            && err.contains("virtual-clock")
            && err.contains("interleaved-round-robin"),
        "{err}"
    );
}

/// Tests that switch to another uid: run by `scripts/test` as root (`-- --ignored root::`).
mod root {
    use super::*;
    use common::other_user::{is_root, SharedDir, NOBODY};
    use std::os::unix::process::CommandExt;

    /// A user the agent serves (`--allow-uid`) cannot reserve — and so
    /// throttle — a data-plane port another user has open, even before that user
    /// reserved anything from it; root's own request still succeeds.
    #[test]
    #[ignore = "needs root: runs a command as another uid"]
    fn another_user_cannot_reserve_a_port_someone_else_has_open() {
        assert!(is_root(), "run as root: this test switches to uid {NOBODY}");
        let s = SharedDir::new().unwrap_or_else(|why| panic!("{why}"));
        let p = |n: &str| s.path().join(n);
        let _cluster = cluster(s.path(), &["--allow-uid", &NOBODY.to_string()]);
        // Root's application opens port 91 on n0 and reserves nothing yet.
        let _port = Port::open(PortOptions::new(p("n0-dp.sock")).port(91)).unwrap();
        // The flow is attributed to the command's parent: for the other user, a shell of
        // its own (`; exit` keeps the shell from exec-ing the command).
        let request = |port: &str, as_nobody: bool| {
            let mut c = Command::new(if as_nobody { "sh" } else { BIN });
            if as_nobody {
                c.args(["-c", "\"$@\"; exit $?", "sh"])
                    .arg(s.bin())
                    .uid(NOBODY)
                    .gid(NOBODY);
            }
            c.args([
                "request",
                "--to",
                "n1:20",
                "--bandwidth",
                "1KB/s",
                "--port",
                port,
            ])
            .arg("--socket")
            .arg(p("n0.sock"));
            c.output().unwrap()
        };
        let out = request("91", true);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.starts_with("error:") && err.contains("port 91 on node 'n0' is open by uid 0"),
            "{err}"
        );
        // A port nobody has open stays free for the allowed user.
        let out = request("92", true);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // And the port's owner reserves its own port.
        let out = request("91", false);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
