//! The master bandwidth resource manager (thesis §3.3, §4.3): admits premium flows with
//! the three criteria of §3.3.1, assigns IDT = T·Bmax/B_req, keeps best-effort shares
//! current (§3.3.2), and pushes IDT changes to the agents whose flows changed.
//!
//! Laid out like a small service: [`state`] holds the books (no I/O), [`store`] makes
//! them durable (SQLite, group commit), [`hub`] pushes updates to agents, [`http`] is
//! the protocol's endpoints, [`serve`] the connections, and this file is the server
//! loop: open the database, restore, serve, reap expired leases, shut down.

pub mod http;
pub mod hub;
pub mod serve;
pub mod state;
pub mod store;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use qos_core::besteffort::Policy;
use qos_core::topology::Topology;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::auth::Secret;
use crate::metrics::Metrics;
use hub::Hub;
use state::State;
use store::{Store, StoreError};

/// How the master runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The cluster.
    pub topology: Arc<Topology>,
    /// The database file.
    pub db: PathBuf,
    /// The agents' shared secret.
    pub secret: Secret,
    /// How best-effort flows share the surplus.
    pub policy: Policy,
    /// Silence after which a client's or an agent's flows are released.
    pub lease: Duration,
    /// How far a grant's commit goes before it is acknowledged.
    pub sync: store::Sync,
    /// Serve `https://` with this (certificate, key, and the client CA for mutual
    /// TLS); plain HTTP when `None`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Start even if stored grants do not fit the topology, releasing them (each is
    /// logged); without it such a start is refused, naming them.
    pub drop_unfit: bool,
    /// Limits on connections.
    pub conns: serve::ConnLimits,
    /// How far an agent's event stream may fall behind before it is re-synced.
    pub hub: hub::HubLimits,
}

impl Config {
    /// A master over `topology` keeping its books in `db`, with the defaults:
    /// thesis policy, 10 s lease, fsync at every commit, plain HTTP, refusing
    /// unfit grants, connection limits from the descriptor limit.
    pub fn new(topology: Arc<Topology>, db: PathBuf, secret: Secret) -> Config {
        Config {
            topology,
            db,
            secret,
            policy: Policy::Thesis,
            lease: Duration::from_secs(10),
            sync: store::Sync::Full,
            tls: None,
            drop_unfit: false,
            conns: serve::ConnLimits::default(),
            hub: hub::HubLimits::default(),
        }
    }
}

/// A stored grant that does not fit the topology, and why.
#[derive(Debug, Clone)]
pub struct Unfit {
    /// The grant.
    pub row: state::FlowRow,
    /// Why it does not fit.
    pub reason: String,
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let class = match self.row.class {
            crate::protocol::ClassSpec::Premium { bandwidth } => {
                format!("premium {bandwidth} B/s")
            }
            crate::protocol::ClassSpec::BestEffort { weight } => {
                format!("best-effort weight {weight}")
            }
        };
        write!(
            f,
            "{} ({class}, uid {}): {}",
            self.row.spec, self.row.owner.uid, self.reason
        )
    }
}

/// The first few of `unfit`, for a one-line message.
fn list_unfit(unfit: &[Unfit]) -> String {
    const SHOWN: usize = 5;
    let mut s: Vec<String> = unfit.iter().take(SHOWN).map(|u| u.to_string()).collect();
    if unfit.len() > SHOWN {
        s.push(format!("and {} more", unfit.len() - SHOWN));
    }
    s.join("; ")
}

/// Why the master could not start.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The database.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The listening socket.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// Stored grants that the topology cannot hold (issue 11 point 10).
    #[error(
        "database {db} holds {} granted flows that do not fit this topology: {}; start with \
         the topology they were granted under, or pass --drop-unfit-grants to release them",
        unfit.len(),
        list_unfit(unfit)
    )]
    Unfit {
        /// The database.
        db: String,
        /// Every grant that does not fit.
        unfit: Vec<Unfit>,
    },
}

/// What every handler shares.
pub struct Shared {
    /// The books.
    pub state: Mutex<State>,
    /// The database writer.
    pub store: Store,
    /// Agents' event streams.
    pub hub: Arc<Hub>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The agents' secret.
    pub secret: Secret,
    /// The lease.
    pub lease: Duration,
}

/// A running master.
pub struct ManagerHandle {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    /// Its shared state (tests read the books through it).
    pub shared: Arc<Shared>,
    /// Its connections.
    pub conns: Arc<serve::Connections>,
    /// Stored grants released at start-up because they did not fit the topology
    /// (only with [`Config::drop_unfit`]).
    pub dropped: Vec<Unfit>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl ManagerHandle {
    /// Stops serving and waits for the server task.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Opens the database, restores the books, and serves on `listener` (inside a tokio
/// runtime). Stored grants that no longer fit the topology stop the start, unless
/// [`Config::drop_unfit`] says to release them.
pub async fn start(config: Config, listener: TcpListener) -> Result<ManagerHandle, ManagerError> {
    let (store, restored) = Store::open(&config.db, config.sync)?;
    let now = Instant::now();
    let mut state = State::new(config.topology.clone(), config.policy);
    let count = restored.rows.len();
    let mut unfit = Vec::new();
    for row in restored.rows {
        if let Err(e) = state.restore(row.clone(), now) {
            unfit.push(Unfit {
                row,
                reason: e.message,
            });
        }
    }
    if !unfit.is_empty() {
        if !config.drop_unfit {
            return Err(ManagerError::Unfit {
                db: config.db.display().to_string(),
                unfit,
            });
        }
        for u in &unfit {
            tracing::warn!(flow = %u.row.spec, owner_uid = u.row.owner.uid, reason = %u.reason,
                "stored grant does not fit the topology: released (--drop-unfit-grants)");
        }
        let (tx, rx) = std::sync::mpsc::channel();
        store.submit(store::Job {
            ops: unfit
                .iter()
                .map(|u| state::DbOp::Delete(u.row.id, u.row.spec.clone()))
                .collect(),
            done: Box::new(move || {
                let _ = tx.send(());
            }),
        });
        // Durable before serving: a grant released here must not come back.
        let _ = tokio::task::spawn_blocking(move || rx.recv()).await;
    }
    for (node, instance) in &restored.holders {
        state.restore_holder(node, *instance, now);
    }
    state.reset_leases(now);
    tracing::info!(flows = count - unfit.len(), dropped = unfit.len(), db = %config.db.display(), "books restored");
    let metrics = Arc::new(Metrics::default());
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        store,
        hub: Arc::new(Hub::new(metrics.clone(), config.hub)),
        metrics: metrics.clone(),
        secret: config.secret,
        lease: config.lease,
    });
    let addr = listener
        .local_addr()
        .map_err(|source| ManagerError::Listen {
            addr: "?".into(),
            source,
        })?;
    let (stop, stopped) = watch::channel(false);
    let app = http::router(shared.clone());
    let reaper = shared.clone();
    let mut stop_reaper = stop.subscribe();
    tokio::spawn(async move {
        let period = (reaper.lease / 4).max(Duration::from_millis(20));
        let mut tick = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = tick.tick() => http::reap(&reaper),
                _ = stop_reaper.changed() => break,
            }
        }
    });
    let conns = serve::Connections::new(config.conns, metrics);
    let task = tokio::spawn(serve::run(serve::Server {
        listener,
        tls: config.tls.clone(),
        app,
        conns: conns.clone(),
        stop: stopped,
    }));
    tracing::info!(%addr, tls = config.tls.is_some(), max_connections = config.conns.max_connections, "manager listening");
    Ok(ManagerHandle {
        addr,
        shared,
        conns,
        dropped: unfit,
        stop,
        task,
    })
}

/// Runs the master on `listen` until interrupted (Ctrl-C or SIGTERM); builds its own
/// runtime, for the command line.
pub fn run_blocking(config: Config, listen: &str) -> Result<(), ManagerError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ManagerError::Runtime)?;
    rt.block_on(async move {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| ManagerError::Listen {
                addr: listen.to_string(),
                source,
            })?;
        let handle = start(config, listener).await?;
        if !handle.dropped.is_empty() {
            eprintln!(
                "warning: released {} stored grants that do not fit the topology \
                 (--drop-unfit-grants): {}",
                handle.dropped.len(),
                list_unfit(&handle.dropped)
            );
        }
        // The bound address on stdout, for scripts and tests that pass port 0.
        println!("listening on {}", handle.addr);
        wait_for_signal().await;
        handle.shutdown().await;
        Ok(())
    })
}

/// Waits for Ctrl-C or SIGTERM.
pub async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(t) => t,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
