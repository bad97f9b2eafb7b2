//! The master bandwidth resource manager (thesis §3.3, §4.3): admits premium flows with
//! the three criteria of §3.3.1, assigns IDT = T·Bmax/B_req, keeps best-effort shares
//! current (§3.3.2), and pushes IDT changes to the agents whose flows changed.
//!
//! Laid out like a small service: [`state`] holds the books (no I/O), [`store`] makes
//! them durable (SQLite, group commit), [`hub`] pushes updates to agents, [`http`] is
//! the protocol's endpoints, and this file is the server loop: open the database,
//! restore, serve, reap expired leases, shut down.

pub mod http;
pub mod hub;
pub mod state;
pub mod store;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::serve::ListenerExt;
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
/// runtime). Flows in the database that no longer fit the topology are logged and
/// dropped.
pub async fn start(config: Config, listener: TcpListener) -> Result<ManagerHandle, ManagerError> {
    let (store, rows) = Store::open(&config.db, config.sync)?;
    let mut state = State::new(config.topology.clone(), config.policy);
    let mut dropped = Vec::new();
    let restored = rows.len();
    for row in rows {
        if let Err(e) = state.restore(row.clone()) {
            tracing::error!(flow = %row.spec, error = %e.message, "stored flow no longer fits; dropped");
            dropped.push(state::DbOp::Delete(row.id, row.spec));
        }
    }
    state.reset_leases(Instant::now());
    if !dropped.is_empty() {
        store.submit(store::Job {
            ops: dropped,
            done: Box::new(|| {}),
        });
    }
    tracing::info!(flows = restored, db = %config.db.display(), "books restored");
    let metrics = Arc::new(Metrics::default());
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        store,
        hub: Arc::new(Hub::new(metrics.clone())),
        metrics,
        secret: config.secret,
        lease: config.lease,
    });
    let addr = listener
        .local_addr()
        .map_err(|source| ManagerError::Listen {
            addr: "?".into(),
            source,
        })?;
    let (stop, mut stopped) = watch::channel(false);
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
    let tls = config.tls.clone();
    let task = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.changed().await;
        };
        let served = match tls {
            Some(tls) => match crate::tls::TlsListener::new(listener, tls) {
                Ok(l) => axum::serve(l, app).with_graceful_shutdown(shutdown).await,
                Err(e) => Err(e),
            },
            None => {
                // Replies and pushed events are small writes: without TCP_NODELAY,
                // Nagle's algorithm holds one behind the peer's delayed
                // acknowledgement (~40 ms).
                let l = listener.tap_io(|tcp| {
                    if let Err(e) = tcp.set_nodelay(true) {
                        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                    }
                });
                axum::serve(l, app).with_graceful_shutdown(shutdown).await
            }
        };
        if let Err(e) = served {
            tracing::error!(error = %e, "server failed");
        }
    });
    tracing::info!(%addr, tls = config.tls.is_some(), "manager listening");
    Ok(ManagerHandle {
        addr,
        shared,
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
