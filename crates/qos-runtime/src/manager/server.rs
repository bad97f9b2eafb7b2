//! The master's server loop (thesis §4.3): open the store, restore the books (or, on
//! etcd, campaign for leadership and restore them each term), serve the protocol's
//! endpoints, reap expired leases, shut down.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::config::{Config, StoreConfig};
#[cfg(feature = "etcd")]
use super::ha;
use super::http;
use super::http_jobs;
use super::hub::Hub;
use super::queue::JobQueue;
use super::role::{Role, Term};
use super::serve;
use super::shared::Shared;
use super::startup::{list_unfit, rebuild, ManagerError, Unfit};
use super::store::{self, SqliteStore};
use crate::metrics::Metrics;
use crate::shutdown::{self, Shutdown};

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
    stop: Shutdown,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ManagerHandle {
    /// The current term's books, if this master leads.
    pub fn term(&self) -> Option<Arc<Term>> {
        self.shared.role.term()
    }

    /// Stops serving (a leader on etcd resigns) and waits for the server's tasks.
    pub async fn shutdown(self) {
        self.stop.trigger();
        for t in self.tasks {
            let _ = t.await;
        }
    }
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
        topology: config.topology.clone(),
        empty: Arc::new(qos_core::admission::Ledger::new(config.topology.clone())),
        jobs_queue: JobQueue::default(),
    });
    let stop = Shutdown::new();
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
            return Err(store::StoreError::NoEtcd {
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
                stop.stop(),
            )));
            (Vec::new(), Some(rx))
        }
    };
    let app = http::router(shared.clone(), http_jobs::routes());
    let reaper = shared.clone();
    let mut stop_reaper = stop.stop();
    tasks.push(tokio::spawn(async move {
        let period = (reaper.lease / 4).max(Duration::from_millis(20));
        let mut tick = tokio::time::interval(period);
        // Memory freed by closed connections and streams goes back to the system
        // within a second, whatever the lease.
        let mut trim = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => http::reap(&reaper),
                _ = trim.tick() => super::hub::release_freed_memory(),
                _ = stop_reaper.wait() => break,
            }
        }
    }));
    let conns = serve::Connections::new(config.conns, metrics);
    tasks.push(tokio::spawn(serve::run(serve::Server {
        listener,
        tls: config.tls.clone(),
        app,
        conns: conns.clone(),
        stop: stop.stop(),
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
        .on_thread_park(super::hub::release_on_park)
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
            _ = shutdown::signal() => None,
            e = fatal => e,
        };
        handle.shutdown().await;
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}
