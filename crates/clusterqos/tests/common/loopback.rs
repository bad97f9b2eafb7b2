//! A cluster of real processes on loopback for the data-plane tests: a master manager
//! and `clusterqos agent --nodes` per node (local manager + data plane), applications on
//! ports through the client library, and streams whose arrivals are timed.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use qos_client::{Port, PortOptions};

use super::{Proc, BIN};

/// Payload bytes per packet the agents use (messages of this size are one packet, so a
/// rate is exactly payload / IDT).
pub const PAYLOAD: usize = 8192;

/// Master + agents on loopback.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub manager_addr: String,
    master: Option<Proc>,
    agents: Vec<Proc>,
}

/// A free port on loopback for a process started here. UDP ports (agents' data planes,
/// which bind them themselves) are drawn at random below the kernel's ephemeral range
/// (32768 and up), where no `bind(port 0)` of a parallel test lands, and checked free just
/// before; a TCP port is one the kernel picks.
fn free_port(udp: bool) -> u16 {
    if udp {
        use rand::Rng;
        let mut rng = rand::thread_rng();
        loop {
            let port = rng.gen_range(20_000..32_000);
            if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    } else {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}

/// A topology of `hosts` on a crossbar whose nodes can send `bmax_mb_s`, with T the time
/// of one `PAYLOAD` packet at that rate (so IDT = T·Bmax/B paces B exactly).
pub fn topology(hosts: usize, bmax_mb_s: f64) -> String {
    let t_ns = (PAYLOAD as f64 / (bmax_mb_s * 1e6) * 1e9).round() as u64;
    format!(
        "[defaults]\nt = \"{t_ns}ns\"\nbmax = \"{bmax_mb_s}MB/s\"\nlink = \"1000MB/s\"\n\n\
         [build]\nshape = \"crossbar\"\nhosts = {hosts}\n"
    )
}

impl Cluster {
    /// Starts the master and agents `n0..n{hosts-1}` with data planes.
    pub fn start(hosts: usize, bmax_mb_s: f64) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("topology.toml"), topology(hosts, bmax_mb_s)).unwrap();
        std::fs::write(
            dir.path().join("secret"),
            "loopback-cluster-secret-0123456789",
        )
        .unwrap();
        let manager_addr = format!("127.0.0.1:{}", free_port(false));
        let mut c = Cluster {
            dir,
            manager_addr,
            master: None,
            agents: Vec::new(),
        };
        c.start_master();
        let nodes: Vec<String> = (0..hosts)
            .map(|i| format!("n{i}=127.0.0.1:{}", free_port(true)))
            .collect();
        let nodes = nodes.join(",");
        for i in 0..hosts {
            let node = format!("n{i}");
            let a = Command::new(BIN)
                .args(["agent", "--node", &node, "--manager"])
                .arg(format!("http://{}", c.manager_addr))
                .arg("--secret")
                .arg(c.path("secret"))
                .arg("--socket")
                .arg(c.agent_socket(i))
                .args(["--nodes", &nodes, "--payload", &PAYLOAD.to_string()])
                .arg("--dataplane-socket")
                .arg(c.dp_socket(i))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            c.agents.push(Proc(a));
        }
        for i in 0..hosts {
            assert!(wait_for(&c.dp_socket(i)), "agent n{i} did not start");
            assert!(wait_for(&c.agent_socket(i)), "agent n{i} did not start");
        }
        c
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn agent_socket(&self, i: usize) -> PathBuf {
        self.path(&format!("n{i}.sock"))
    }
    pub fn dp_socket(&self, i: usize) -> PathBuf {
        self.path(&format!("n{i}-dp.sock"))
    }

    /// Starts the master (again) on the same address and database.
    pub fn start_master(&mut self) {
        let mut m = Command::new(BIN)
            .args(["manager", "--listen", &self.manager_addr, "--topology"])
            .arg(self.path("topology.toml"))
            .arg("--db")
            .arg(self.path("m.db"))
            .arg("--secret")
            .arg(self.path("secret"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(m.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("listening on"), "manager said {line:?}");
        self.master = Some(Proc(m));
    }

    /// Kills the master (SIGKILL: a crash).
    pub fn kill_master(&mut self) {
        self.master = None;
    }

    /// A port on node `i`, whose bandwidth requests go to node `i`'s agent.
    pub fn port(&self, i: usize, port: u16) -> Port {
        Port::open(
            PortOptions::new(self.dp_socket(i))
                .port(port)
                .max_message(PAYLOAD)
                .manager_socket(self.agent_socket(i)),
        )
        .unwrap()
    }
}

fn wait_for(path: &Path) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A stream of `PAYLOAD`-byte messages from `tx` to (`node`, `dst_port`), sending while
/// on, and its receiver timing every arrival.
pub struct Stream {
    on: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    sender: Option<JoinHandle<Port>>,
    receiver: Option<JoinHandle<Vec<Instant>>>,
    arrivals: Vec<Instant>,
}

impl Stream {
    pub fn start(mut tx: Port, mut rx: Port, node: &str, dst_port: u16) -> Stream {
        let on = Arc::new(AtomicBool::new(true));
        let done = Arc::new(AtomicBool::new(false));
        let (o, d, node) = (on.clone(), done.clone(), node.to_string());
        let sender = std::thread::spawn(move || {
            let data = vec![9u8; PAYLOAD];
            while !d.load(Ordering::Relaxed) {
                if o.load(Ordering::Relaxed) {
                    tx.wait_sends(48, Duration::from_secs(10)).unwrap();
                    tx.send(&node, dst_port, 0, &data).unwrap();
                } else {
                    let _ = tx.wait_sends(16, Duration::from_millis(2));
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            tx
        });
        let d = done.clone();
        let receiver = std::thread::spawn(move || {
            let mut at = Vec::new();
            while !d.load(Ordering::Relaxed) {
                if rx.recv(Duration::from_millis(50)).is_ok() {
                    at.push(Instant::now());
                }
            }
            at
        });
        Stream {
            on,
            done,
            sender: Some(sender),
            receiver: Some(receiver),
            arrivals: Vec::new(),
        }
    }

    pub fn set_on(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    /// Stops both threads; the arrivals stay for [`Stream::rate`].
    pub fn stop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(s) = self.sender.take() {
            s.join().unwrap();
        }
        if let Some(r) = self.receiver.take() {
            self.arrivals = r.join().unwrap();
        }
    }

    /// Bytes per second received in [from, to) (after [`Stream::stop`]).
    pub fn rate(&self, from: Instant, to: Instant) -> f64 {
        // Over the span between the first and the last arrival inside the window, not the
        // window's edges: a receiving thread descheduled at an edge (a loaded machine)
        // moves a few arrivals across it, which would bias a short window by the stall.
        let inside: Vec<Instant> = self
            .arrivals
            .iter()
            .copied()
            .filter(|t| *t >= from && *t < to)
            .collect();
        match (inside.first(), inside.last()) {
            (Some(a), Some(b)) if inside.len() >= 2 && b > a => {
                ((inside.len() - 1) * PAYLOAD) as f64 / (*b - *a).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}
