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

fn free_udp() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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

#[test]
fn agents_with_nodes_carry_messages_between_ports_under_a_grant() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
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
    let _master = Proc(master);
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
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let _a0 = agent("n0");
    let _a1 = agent("n1");
    // The control socket is bound after the data plane's: wait for both.
    assert!(wait_for(&p("n0-dp.sock")) && wait_for(&p("n1-dp.sock")) && wait_for(&p("n0.sock")));

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
