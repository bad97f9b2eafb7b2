//! The master bandwidth resource manager (thesis §3.3, §4.3): admits premium flows with
//! the three criteria of §3.3.1, assigns IDT = T·Bmax/B_req, keeps best-effort shares
//! current (§3.3.2), and pushes IDT changes to the agents whose flows changed.
//!
//! Laid out like a small service: [`state`] holds the books (no I/O), [`store`] makes
//! them durable (SQLite with group commit, or etcd shared by replicas), [`role`] says
//! whether this master leads and holds the books of its term, [`ha`] wins and loses
//! that leadership through etcd, [`hub`] pushes updates to agents,
//! [`http`] is the protocol's endpoints, [`serve`] the connections, and this file is
//! the server loop: open the store, restore, serve, reap expired leases, shut down.

#[cfg(feature = "etcd")]
mod ha;
pub mod http;
pub mod hub;
pub mod launch;
pub mod role;
pub mod serve;
pub mod state;
pub mod store;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use qos_core::besteffort::Policy;
use qos_core::topology::Topology;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

use crate::auth::Secret;
use crate::metrics::Metrics;
use hub::Hub;
use role::{Role, Term};
use state::State;
use store::etcd_config::EtcdConfig;
use store::{Restored, SqliteStore, Store, StoreError};

/// Where the master keeps its books.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    /// An SQLite database file beside this master (one master, no failover).
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// How far a grant's commit goes before it is acknowledged.
        sync: store::Sync,
    },
    /// etcd, shared with the other replicas; the one elected leads.
    Etcd(EtcdConfig),
}

impl StoreConfig {
    /// The store, for messages.
    pub fn name(&self) -> String {
        match self {
            StoreConfig::Sqlite { path, .. } => path.display().to_string(),
            StoreConfig::Etcd(e) => format!("etcd://{}", e.name()),
        }
    }
}

/// How the master runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The cluster.
    pub topology: Arc<Topology>,
    /// Where the books are kept.
    pub store: StoreConfig,
    /// The agents' shared secret.
    pub secret: Secret,
    /// How best-effort flows share the surplus.
    pub policy: Policy,
    /// Silence after which a client's or an agent's flows are released.
    pub lease: Duration,
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
    /// The URL agents reach this replica at (etcd store): what followers name when
    /// they redirect to it. Default: the scheme and the address it listens on.
    pub advertise: Option<String>,
    /// Time to live of the leader's election lease (etcd store): how long a leader
    /// that vanished without resigning (killed, paused, cut off) holds the election
    /// before another replica takes over. etcd rounds it up to whole seconds and to
    /// its minimum (1.5 × its election timeout).
    pub election_ttl: Duration,
}

impl Config {
    /// A master over `topology` keeping its books in the SQLite database `db`, with
    /// the defaults: thesis policy, 10 s lease, fsync at every commit, plain HTTP,
    /// refusing unfit grants, connection limits from the descriptor limit.
    pub fn new(topology: Arc<Topology>, db: PathBuf, secret: Secret) -> Config {
        Config {
            topology,
            store: StoreConfig::Sqlite {
                path: db,
                sync: store::Sync::Full,
            },
            secret,
            policy: Policy::Thesis,
            lease: Duration::from_secs(10),
            tls: None,
            drop_unfit: false,
            conns: serve::ConnLimits::default(),
            hub: hub::HubLimits::default(),
            advertise: None,
            election_ttl: Duration::from_secs(2),
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
    /// Stored grants that the topology cannot hold.
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
    /// Leader (with the books of its term) or follower.
    pub role: Role,
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
    /// (SQLite store, only with [`Config::drop_unfit`]).
    pub dropped: Vec<Unfit>,
    /// Says why a replica on etcd gave up (a damaged store, unfit grants), if it does.
    pub fatal: Option<oneshot::Receiver<ManagerError>>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ManagerHandle {
    /// The current term's books, if this master leads.
    pub fn term(&self) -> Option<Arc<Term>> {
        self.shared.role.term()
    }

    /// Stops serving (a leader on etcd resigns) and waits for the server's tasks.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Rebuilds the books from what the store holds (`now`: the start of the term):
/// re-admits every stored grant, refuses the start if some no longer fit unless
/// `drop_unfit` (then releases them, durably, through `store`), gives each node back
/// to the agent instance that held it for one lease, and starts every lease afresh.
/// Returns the books and the grants released.
async fn rebuild(
    config: &Config,
    restored: Restored,
    store: &dyn Store,
    now: Instant,
) -> Result<(State, Vec<Unfit>), ManagerError> {
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
                db: config.store.name(),
                unfit,
            });
        }
        for u in &unfit {
            tracing::warn!(flow = %u.row.spec, owner_uid = u.row.owner.uid, reason = %u.reason,
                "stored grant does not fit the topology: released (--drop-unfit-grants)");
        }
        let (tx, rx) = oneshot::channel();
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
        rx.await.map_err(|_| {
            ManagerError::Store(StoreError::Fenced {
                store: config.store.name(),
                message: "the release of the unfit grants did not commit".into(),
            })
        })?;
    }
    for (node, instance) in &restored.holders {
        state.restore_holder(node, *instance, now);
    }
    state.reset_leases(now);
    tracing::info!(flows = count - unfit.len(), dropped = unfit.len(), store = %config.store.name(), "books restored");
    Ok((state, unfit))
}

/// Opens the store and serves on `listener` (inside a tokio runtime).
///
/// On SQLite the master leads at once, with the books restored from the database;
/// stored grants that no longer fit the topology stop the start, unless
/// [`Config::drop_unfit`] says to release them. On etcd it serves as a follower and
/// campaigns in the background ([`ha`]); each time it is elected it rebuilds the
/// books from etcd under the same rules, and if they cannot be (a damaged store,
/// unfit grants) it stops leading and says why on [`ManagerHandle::fatal`].
pub async fn start(config: Config, listener: TcpListener) -> Result<ManagerHandle, ManagerError> {
    let addr = listener
        .local_addr()
        .map_err(|source| ManagerError::Listen {
            addr: "?".into(),
            source,
        })?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let advertise = config
        .advertise
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{addr}"));
    let metrics = Arc::new(Metrics::default());
    let shared = Arc::new(Shared {
        role: Role::follower(Some(advertise)),
        metrics: metrics.clone(),
        secret: config.secret.clone(),
        lease: config.lease,
    });
    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    let (dropped, fatal) = match &config.store {
        StoreConfig::Sqlite { path, sync } => {
            let (store, restored) = SqliteStore::open(path, *sync)?;
            let (state, unfit) = rebuild(&config, restored, &store, Instant::now()).await?;
            shared.role.promote(Arc::new(Term {
                state: Mutex::new(state),
                store: Box::new(store),
                hub: Arc::new(Hub::new(metrics.clone(), config.hub)),
                number: 0,
            }));
            (unfit, None)
        }
        #[cfg(not(feature = "etcd"))]
        StoreConfig::Etcd(ec) => {
            return Err(StoreError::NoEtcd {
                store: format!("etcd://{}", ec.name()),
            }
            .into());
        }
        #[cfg(feature = "etcd")]
        StoreConfig::Etcd(ec) => {
            let backend = store::etcd::EtcdStore::connect(ec).await?;
            let (tx, rx) = oneshot::channel();
            tasks.push(tokio::spawn(ha::run(
                ha::Ha::new(shared.clone(), backend, config.clone(), tx),
                stop.subscribe(),
            )));
            (Vec::new(), Some(rx))
        }
    };
    let app = http::router(shared.clone());
    let reaper = shared.clone();
    let mut stop_reaper = stop.subscribe();
    tasks.push(tokio::spawn(async move {
        let period = (reaper.lease / 4).max(Duration::from_millis(20));
        let mut tick = tokio::time::interval(period);
        // Memory freed by closed connections and streams goes back to the system
        // within a second, whatever the lease.
        let mut trim = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => http::reap(&reaper),
                _ = trim.tick() => hub::release_freed_memory(),
                _ = stop_reaper.changed() => break,
            }
        }
    }));
    let conns = serve::Connections::new(config.conns, metrics);
    tasks.push(tokio::spawn(serve::run(serve::Server {
        listener,
        tls: config.tls.clone(),
        app,
        conns: conns.clone(),
        stop: stopped,
    })));
    tracing::info!(%addr, tls = config.tls.is_some(), store = %config.store.name(),
        max_connections = config.conns.max_connections, "manager listening");
    Ok(ManagerHandle {
        addr,
        shared,
        conns,
        dropped,
        fatal,
        stop,
        tasks,
    })
}

/// Runs the master on `listen` until interrupted (Ctrl-C or SIGTERM), or until a
/// replica on etcd gives up; builds its own runtime, for the command line.
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
        let mut handle = start(config, listener).await?;
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
        let fatal = async {
            match handle.fatal.take() {
                Some(rx) => rx.await.ok(),
                None => std::future::pending().await,
            }
        };
        let failed = tokio::select! {
            _ = wait_for_signal() => None,
            e = fatal => e,
        };
        handle.shutdown().await;
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
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
