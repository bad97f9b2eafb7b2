//! The local manager on each node (thesis §4.3: "a set of manager processes, one on
//! each node"): registers with the master, keeps the node's IDT table current from the
//! master's pushes, reports which owning processes are alive, and serves the node's
//! applications on a Unix socket ([`socket`]).
//!
//! **Data-plane seam**: the node's rate-control scheduler takes its IDTs from
//! [`AgentHandle::idt_table`], a `tokio::sync::watch` receiver that always holds the
//! latest [`IdtTable`] and wakes on every change (`changed().await`, or `borrow()` to
//! poll). The table is replaced whole on each update (copy-on-write `Arc`), so a
//! reader never sees half an update. When the master is unreachable the table keeps
//! the last IDTs (`synced = false`) and re-syncs from the master's snapshot on
//! reconnection.

pub mod ports;
pub mod socket;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::auth::Secret;
use crate::master_client::MasterClient;
use crate::protocol::{AgentEvent, ErrorCode, FlowSpec, IdtEntry, Owner, WireError};

/// How an agent runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// This node's name in the topology.
    pub node: String,
    /// The master's base URL ("http://10.0.0.1:7400").
    pub manager: String,
    /// The cluster's shared secret.
    pub secret: Secret,
    /// The Unix socket applications connect to.
    pub socket: PathBuf,
    /// TLS towards an `https://` master (the cluster's CA; the agent's certificate
    /// for mutual TLS).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Which local users may reserve bandwidth through this agent.
    pub users: socket::Users,
    /// The data plane's open ports and who opened them (`None` without a data plane):
    /// only a port's opener, or root, may reserve bandwidth from it.
    pub ports: Option<ports::PortOwners>,
    /// The table [`IdtTable::generation`] an enforcement backend holds, when it applies
    /// changes on its own time (the kernel backend): replies to requests and releases
    /// wait until it has caught up.
    pub enforced: Option<watch::Receiver<u64>>,
}

impl Config {
    /// An agent for `node` of the master at `manager`, serving `socket`, with the
    /// defaults: plain HTTP, reservations for the agent's own user and root.
    pub fn new(node: &str, manager: &str, secret: Secret, socket: PathBuf) -> Config {
        Config {
            node: node.to_string(),
            manager: manager.to_string(),
            secret,
            socket,
            tls: None,
            users: socket::Users::default(),
            ports: None,
            enforced: None,
        }
    }
}

/// The node's flows as the master last said: the rate-control parameters the data
/// plane enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdtTable {
    /// Whether the agent is connected and has applied the master's snapshot.
    pub synced: bool,
    /// Sequence number of the last event applied.
    pub seq: u64,
    /// Update events received since start (snapshots not counted).
    pub updates: u64,
    /// Snapshots received since start (1 + number of re-syncs).
    pub snapshots: u64,
    /// Rows by flow.
    pub flows: BTreeMap<FlowSpec, IdtEntry>,
}

impl IdtTable {
    /// Applies one event from the master.
    pub fn apply(&mut self, ev: AgentEvent) {
        match ev {
            AgentEvent::Snapshot { seq, flows } => {
                self.seq = seq;
                self.snapshots += 1;
                self.synced = true;
                self.flows = flows.into_iter().map(|e| (e.flow.clone(), e)).collect();
            }
            AgentEvent::Update {
                seq,
                upsert,
                remove,
            } => {
                self.seq = seq;
                self.updates += 1;
                for f in remove {
                    self.flows.remove(&f);
                }
                for e in upsert {
                    self.flows.insert(e.flow.clone(), e);
                }
            }
        }
    }

    /// A number that grows with every event applied (snapshots and updates), across
    /// re-syncs: what an enforcement backend reports having applied.
    pub fn generation(&self) -> u64 {
        self.snapshots + self.updates
    }

    /// The distinct owners of the node's flows.
    pub fn owners(&self) -> Vec<Owner> {
        let mut v: Vec<Owner> = self.flows.values().map(|e| e.owner).collect();
        v.sort();
        v.dedup();
        v
    }
}

/// A running agent.
pub struct AgentHandle {
    table: watch::Receiver<Arc<IdtTable>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    socket: PathBuf,
}

impl AgentHandle {
    /// The node's IDT table, kept current: the data plane's subscription point.
    pub fn idt_table(&self) -> watch::Receiver<Arc<IdtTable>> {
        self.table.clone()
    }

    /// Stops the agent's tasks and removes its socket.
    pub fn shutdown(self) {
        for t in self.tasks {
            t.abort();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Whether process `pid` exists.
pub fn process_alive(pid: u32) -> bool {
    pid != 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Starts the agent (inside a tokio runtime): binds the socket, then keeps a link to
/// the master alive in the background (register, event stream, heartbeats), retrying
/// with back-off while the master is away.
pub async fn start(config: Config) -> Result<AgentHandle, socket::SocketError> {
    let mut master = MasterClient::new(&config.manager, &config.node, &config.secret)
        .map_err(|e| socket::SocketError::Other(e.message))?
        .with_instance(rand::random());
    if let Some(tls) = config.tls {
        master = master
            .with_tls(tls)
            .map_err(|e| socket::SocketError::Other(e.message))?;
    } else if config.manager.starts_with("https://") {
        return Err(socket::SocketError::Other(format!(
            "{} needs the cluster's CA certificate (--tls-ca)",
            config.manager
        )));
    }
    let (tx, rx) = watch::channel(Arc::new(IdtTable::default()));
    let tx = Arc::new(tx);
    let listener = socket::bind(&config.socket)?;
    let tasks = vec![
        tokio::spawn(link(master.clone(), tx.clone())),
        tokio::spawn(heartbeats(master.clone(), rx.clone())),
        tokio::spawn(socket::serve(
            listener,
            master,
            rx.clone(),
            Arc::new(socket::Serving {
                users: config.users,
                enforced: config.enforced,
                ports: config.ports,
            }),
        )),
    ];
    tracing::info!(node = %config.node, socket = %config.socket.display(), "agent started");
    Ok(AgentHandle {
        table: rx,
        tasks,
        socket: config.socket,
    })
}

/// Register, follow the event stream, and start over when it breaks.
async fn link(master: MasterClient, table: Arc<watch::Sender<Arc<IdtTable>>>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match follow(&master, &table).await {
            Ok(()) => tracing::warn!("manager closed the event stream; reconnecting"),
            Err(e) if e.code == ErrorCode::Conflict => {
                tracing::error!(error = %e.message, "the manager refuses this agent; retrying")
            }
            Err(e) => tracing::warn!(error = %e.message, "manager link down; retrying"),
        }
        table.send_modify(|t| Arc::make_mut(t).synced = false);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

async fn follow(
    master: &MasterClient,
    table: &watch::Sender<Arc<IdtTable>>,
) -> Result<(), WireError> {
    master.register().await?;
    let mut events = master.events().await?;
    while let Some(ev) = events.next().await {
        table.send_modify(|t| Arc::make_mut(t).apply(ev));
    }
    Ok(())
}

/// Tells the master every `heartbeat` period that the agent and its live owners are
/// here. Owners whose process has exited are left out, so their lease runs out.
async fn heartbeats(master: MasterClient, table: watch::Receiver<Arc<IdtTable>>) {
    let mut period = Duration::from_millis(200);
    loop {
        match master.register().await {
            Ok(r) => {
                period = Duration::from_millis(r.heartbeat_ms.max(10));
                break;
            }
            Err(_) => tokio::time::sleep(period).await,
        }
    }
    loop {
        let live: Vec<Owner> = table
            .borrow()
            .owners()
            .into_iter()
            .filter(|o| process_alive(o.pid))
            .collect();
        if let Err(e) = master.heartbeat(live).await {
            tracing::debug!(error = %e.message, "heartbeat failed");
        }
        tokio::time::sleep(period).await;
    }
}

/// Runs an agent until interrupted; builds its own runtime, for the command line.
pub fn run_blocking(config: Config) -> Result<(), socket::SocketError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| socket::SocketError::Other(e.to_string()))?;
    rt.block_on(async move {
        let handle = start(config).await?;
        println!("agent ready");
        crate::manager::wait_for_signal().await;
        handle.shutdown();
        Ok(())
    })
}
