//! A small cluster on loopback for the integration tests: a master on an ephemeral
//! port and agents on Unix sockets in a temporary directory, all in this process on
//! one tokio runtime, so the tests can use the blocking client library directly.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qos_core::besteffort::Policy;
use qos_runtime::agent::{self, AgentHandle, IdtTable};
use qos_runtime::auth::Secret;
use qos_runtime::client::Client;
use qos_runtime::manager::{self, ManagerHandle};
use qos_runtime::master_client::MasterClient;
use qos_runtime::protocol::{IdtEntry, StatusReport};

/// Two switches s0 {a, b} and s1 {c, d} joined by a 60 MB/s trunk (s0:7 <-> s1:7);
/// every node T = 48 us, Bmax = 81.8 MB/s, links 160 MB/s.
pub const TWO_SWITCHES: &str = r#"
[defaults]
t = "48us"
bmax = "81.8MB/s"
link = "160MB/s"

[[switch]]
name = "s0"
ports = 8

[[switch]]
name = "s1"
ports = 8

[[host]]
name = "a"
port = "s0:0"

[[host]]
name = "b"
port = "s0:1"

[[host]]
name = "c"
port = "s1:0"

[[host]]
name = "d"
port = "s1:1"

[[link]]
a = "s0:7"
b = "s1:7"
capacity = "60MB/s"
"#;

/// The thesis's test cluster: four hosts on one crossbar (§5.1).
pub const CROSSBAR: &str = r#"
[defaults]
t = "48us"
bmax = "81.8MB/s"
link = "160MB/s"

[build]
shape = "crossbar"
hosts = 4
"#;

pub const SECRET: &str = "test-secret-0123456789abcdef";

pub struct Cluster {
    pub rt: tokio::runtime::Runtime,
    pub dir: tempfile::TempDir,
    pub master: Option<ManagerHandle>,
    pub url: String,
    pub agents: HashMap<String, AgentHandle>,
    /// TLS settings the agents started by [`Cluster::agent`] use.
    pub agent_tls: Option<Arc<qos_runtime::tls::ClientConfig>>,
}

impl Cluster {
    pub fn start(topology: &str, policy: Policy, lease: Duration) -> Cluster {
        Cluster::start_with(topology, policy, lease, None)
    }

    /// A master serving https:// with `tls` when given.
    pub fn start_with(
        topology: &str,
        policy: Policy,
        lease: Duration,
        tls: Option<Arc<qos_runtime::tls::ServerConfig>>,
    ) -> Cluster {
        Cluster::start_custom(topology, |c| {
            c.policy = policy;
            c.lease = lease;
            c.tls = tls;
        })
    }

    /// A master whose configuration `tune` adjusts (30 s lease, thesis policy, plain
    /// HTTP unless it says otherwise).
    pub fn start_custom(topology: &str, tune: impl FnOnce(&mut manager::Config)) -> Cluster {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut config = Cluster::config(topology, &dir.path().join("manager.db"));
        tune(&mut config);
        let tls = config.tls.is_some();
        let master = rt
            .block_on(async {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                manager::start(config, l).await
            })
            .unwrap();
        let scheme = if tls { "https" } else { "http" };
        let url = format!("{scheme}://{}", master.addr);
        Cluster {
            rt,
            dir,
            master: Some(master),
            url,
            agents: HashMap::new(),
            agent_tls: None,
        }
    }

    /// The configuration of a master over `topology` keeping its books in `db`.
    pub fn config(topology: &str, db: &std::path::Path) -> manager::Config {
        let topo = qos_core::topology::file::load("test.toml", topology).unwrap();
        manager::Config {
            lease: Duration::from_secs(30),
            ..manager::Config::new(
                Arc::new(topo),
                db.to_path_buf(),
                Secret::new(SECRET).unwrap(),
            )
        }
    }

    /// The master's database.
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("manager.db")
    }

    /// Stops the master (as a clean shutdown) and starts a new one on the same
    /// database and address with `config`; its error if it refuses to start.
    pub fn restart(&mut self, config: manager::Config) -> Result<(), manager::ManagerError> {
        let addr: std::net::SocketAddr = self
            .url
            .split("://")
            .nth(1)
            .and_then(|a| a.parse().ok())
            .expect("the master's address");
        if let Some(m) = self.master.take() {
            self.rt.block_on(m.shutdown());
        }
        let master = self.rt.block_on(async {
            let l = tokio::net::TcpListener::bind(addr).await.unwrap();
            manager::start(config, l).await
        })?;
        self.master = Some(master);
        Ok(())
    }

    pub fn socket(&self, node: &str) -> PathBuf {
        self.dir.path().join(format!("{node}.sock"))
    }

    /// Starts the agent of `node` and waits until it has the master's snapshot.
    pub fn agent(&mut self, node: &str) {
        let config = agent::Config {
            tls: self.agent_tls.clone(),
            ..agent::Config::new(
                node,
                &self.url,
                Secret::new(SECRET).unwrap(),
                self.socket(node),
            )
        };
        let h = self.rt.block_on(agent::start(config)).unwrap();
        self.agents.insert(node.into(), h);
        assert!(
            self.wait(|| self.table(node).synced),
            "agent {node} never synced"
        );
    }

    pub fn client(&self, node: &str) -> Client {
        Client::connect(self.socket(node)).unwrap()
    }

    pub fn table(&self, node: &str) -> Arc<IdtTable> {
        self.agents[node].idt_table().borrow().clone()
    }

    /// The agent's row for the flow from `src_port` to `dst`:`dst_port`.
    pub fn row(&self, node: &str, src_port: u16, dst: &str, dst_port: u16) -> Option<IdtEntry> {
        self.table(node)
            .flows
            .values()
            .find(|e| {
                e.flow.src.port == src_port && e.flow.dst.node == dst && e.flow.dst.port == dst_port
            })
            .cloned()
    }

    /// Polls `f` for up to 5 s.
    pub fn wait(&self, f: impl Fn() -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        f()
    }

    pub fn master_flows(&self) -> Vec<IdtEntry> {
        let m = self.master.as_ref().unwrap();
        m.term().unwrap().state.lock().unwrap().all_flows()
    }

    pub fn status(&self) -> StatusReport {
        let m = self.master.as_ref().unwrap();
        m.term().unwrap().state.lock().unwrap().status()
    }

    /// An HTTP client speaking for `node` with the right secret.
    pub fn master_client(&self, node: &str) -> MasterClient {
        MasterClient::new(&self.url, node, &Secret::new(SECRET).unwrap()).unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, a) in self.agents.drain() {
            a.shutdown();
        }
    }
}

/// MB/s (10^6 bytes/s) as bytes/s.
pub fn mbps(x: f64) -> u64 {
    (x * 1e6).round() as u64
}
