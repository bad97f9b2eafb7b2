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

pub mod cgroup;
pub mod enforcer;
pub mod ports;
pub mod socket;
pub mod table;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use crate::auth::Secret;
use crate::master_client::MasterClient;
use crate::protocol::{ErrorCode, Owner, WireError};
pub use table::{process_alive, IdtTable};

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
    /// The jobs' cgroups, when the enforcement backend tells a job's traffic by them
    /// (the kernel backend): `join_job` puts processes in them.
    pub job_cgroups: Option<cgroup::JobCgroups>,
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
            job_cgroups: None,
        }
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
    let nudge = Arc::new(Notify::new());
    let tasks = vec![
        tokio::spawn(link(master.clone(), tx.clone(), nudge.clone())),
        tokio::spawn(heartbeats(master.clone(), rx.clone())),
        tokio::spawn(socket::serve(
            listener,
            master,
            rx.clone(),
            Arc::new(socket::Serving {
                users: config.users,
                enforced: config.enforced,
                ports: config.ports,
                job_cgroups: config.job_cgroups,
            }),
            nudge,
        )),
    ];
    tracing::info!(node = %config.node, socket = %config.socket.display(), "agent started");
    Ok(AgentHandle {
        table: rx,
        tasks,
        socket: config.socket,
    })
}

/// How long the link waits before trying the master again: doubling from
/// [`Retry::FIRST`] to [`Retry::MOST`] while attempts fail, and from the first again
/// once an attempt got a link (a replica took over: it is found at once, not after the
/// longest wait).
#[derive(Debug)]
struct Retry {
    wait: Duration,
}

impl Retry {
    const FIRST: Duration = Duration::from_millis(50);
    const MOST: Duration = Duration::from_secs(1);

    fn new() -> Retry {
        Retry { wait: Self::FIRST }
    }

    /// The wait before the next attempt; `linked` says whether the last attempt
    /// registered and opened the event stream before it ended.
    fn next(&mut self, linked: bool) -> Duration {
        if linked {
            self.wait = Self::FIRST;
        }
        let wait = self.wait;
        self.wait = (wait * 2).min(Self::MOST);
        wait
    }
}

/// Register, follow the event stream, and start over when it breaks. `nudge` cuts a
/// wait short: the socket side got an answer from a master while the table is not
/// synced, so a leader is there now (after a failover the agent follows
/// the new leader as soon as it serves).
async fn link(master: MasterClient, table: Arc<watch::Sender<Arc<IdtTable>>>, nudge: Arc<Notify>) {
    let mut retry = Retry::new();
    loop {
        let mut linked = false;
        match follow(&master, &table, &mut linked).await {
            Ok(()) => tracing::warn!("manager closed the event stream; reconnecting"),
            Err(e) if e.code == ErrorCode::Conflict => {
                tracing::error!(error = %e.message, "the manager refuses this agent; retrying")
            }
            Err(e) => tracing::warn!(error = %e.message, "manager link down; retrying"),
        }
        table.send_modify(|t| Arc::make_mut(t).synced = false);
        tokio::select! {
            _ = tokio::time::sleep(retry.next(linked)) => {}
            _ = nudge.notified() => {}
        }
    }
}

async fn follow(
    master: &MasterClient,
    table: &watch::Sender<Arc<IdtTable>>,
    linked: &mut bool,
) -> Result<(), WireError> {
    master.register().await?;
    let mut events = master.events().await?;
    *linked = true;
    while let Some(ev) = events.next().await {
        table.send_modify(|t| Arc::make_mut(t).apply(ev));
    }
    Ok(())
}

/// Tells the master every `heartbeat` period that the agent and its live owners are
/// here — and at once when a snapshot from the master (a re-sync) brings owners the
/// last heartbeat did not list. Owners whose process has exited are left out, so their
/// lease runs out. (A grant's owner needs no early heartbeat: the grant itself starts
/// its lease.)
///
/// A restarted agent (or one back from a broken link) sends its first heartbeat before
/// its snapshot arrives, listing no one; waiting a whole period for the next let the
/// lease of a grant whose owner is alive run out while its agent restarted within the
/// lease (agent killed 3.4 s, owner last listed up to one period before the kill).
async fn heartbeats(master: MasterClient, mut table: watch::Receiver<Arc<IdtTable>>) {
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
        let (live, listed, snapshots) = {
            let t = table.borrow_and_update();
            let owners = t.owners(master.node());
            let live: Vec<Owner> = owners
                .iter()
                .copied()
                .filter(|o| process_alive(o.pid))
                .collect();
            (live, owners, t.snapshots)
        };
        if let Err(e) = master.heartbeat(live).await {
            tracing::debug!(error = %e.message, "heartbeat failed");
        }
        let next = tokio::time::Instant::now() + period;
        loop {
            match tokio::time::timeout_at(next, table.changed()).await {
                Ok(Ok(())) => {
                    let t = table.borrow_and_update();
                    if t.snapshots > snapshots
                        && t.owners(master.node()).iter().any(|o| !listed.contains(o))
                    {
                        break;
                    }
                }
                Ok(Err(_)) => {
                    tokio::time::sleep_until(next).await;
                    break;
                }
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_retries_at_once_after_a_link_it_had_ends() {
        let mut r = Retry::new();
        // The master away: the waits double up to the longest.
        let waits: Vec<u128> = (0..7).map(|_| r.next(false).as_millis()).collect();
        assert_eq!(waits, [50, 100, 200, 400, 800, 1000, 1000]);
        // A link was made (a new leader served), then it ended: the next attempt
        // comes after the shortest wait, not the longest.
        assert_eq!(r.next(true), Retry::FIRST);
        assert_eq!(r.next(false), Retry::FIRST * 2);
    }
}
