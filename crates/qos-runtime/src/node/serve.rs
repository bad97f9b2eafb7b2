//! The one launcher of a node's agent and its enforcement backend (thesis §4.3 → §4.2):
//! the backend, already installed, lends the agent its hooks; the agent starts; the
//! backend follows the agent's IDT table on a thread of its own; both run until Ctrl-C,
//! SIGTERM, or the backend failing on its own (an interface vanished), then stop in
//! that order and the backend removes what it installed.

use tokio::sync::oneshot;

use crate::agent::enforcer::{EnforceError, Enforcer};
use crate::agent::socket::SocketError;
use crate::agent::{self, Config};
use crate::shutdown::{self, Shutdown};

/// Why a node's agent stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The agent could not start (its socket, the manager's URL).
    #[error(transparent)]
    Agent(#[from] SocketError),
    /// The enforcement backend failed, or could not remove what it installed.
    #[error("{backend}: {source}")]
    Enforcer {
        /// What it is.
        backend: String,
        /// Why.
        #[source]
        source: EnforceError,
    },
    /// The async runtime or a thread.
    #[error("starting the agent's runtime: {0}")]
    Runtime(std::io::Error),
}

/// Runs the agent `config` describes with `enforcer` (none: the control plane alone)
/// until interrupted; builds its own runtime, for the command line. Prints "agent
/// ready" (and what enforces) once it serves.
pub fn serve(config: Config, enforcer: Option<Box<dyn Enforcer>>) -> Result<(), ServeError> {
    let fail = |e: Option<Box<dyn Enforcer>>| {
        if let Some(e) = e {
            let _ = e.finish();
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            fail(enforcer);
            return Err(ServeError::Runtime(e));
        }
    };
    let mut enforcer = enforcer;
    let mut config = config;
    let describe = enforcer.as_ref().map(|e| e.describe());
    if let Some(e) = enforcer.as_mut() {
        let hooks = e.hooks();
        config.ports = hooks.ports;
        config.enforced = hooks.enforced;
        config.job_cgroups = hooks.job_cgroups;
    }
    let handle = match rt.block_on(agent::start(config)) {
        Ok(h) => h,
        Err(e) => {
            fail(enforcer);
            return Err(e.into());
        }
    };
    let stop = Shutdown::new();
    let (failed_tx, failed_rx) = oneshot::channel::<EnforceError>();
    let worker = match enforcer {
        Some(mut e) => {
            let table = handle.idt_table();
            let rt_handle = rt.handle().clone();
            let token = stop.stop();
            let spawned =
                std::thread::Builder::new()
                    .name("enforcer".into())
                    .spawn(move || match e.run(table, rt_handle, token) {
                        Ok(()) => Some(e),
                        Err(err) => {
                            let _ = failed_tx.send(err);
                            None
                        }
                    });
            match spawned {
                Ok(w) => Some(w),
                Err(err) => {
                    handle.shutdown();
                    return Err(ServeError::Runtime(err));
                }
            }
        }
        None => None,
    };
    match &describe {
        Some(d) => println!("agent ready ({d})"),
        None => println!("agent ready"),
    }
    let failed = rt.block_on(async move {
        tokio::select! {
            _ = shutdown::signal() => None,
            e = failed_rx => e.ok(),
        }
    });
    stop.trigger();
    handle.shutdown();
    let backend = describe.unwrap_or_default();
    let enforcer = match worker {
        Some(w) => w.join().map_err(|_| ServeError::Enforcer {
            backend: backend.clone(),
            source: "its thread panicked".into(),
        })?,
        None => None,
    };
    if let Some(source) = failed {
        return Err(ServeError::Enforcer { backend, source });
    }
    if let Some(e) = enforcer {
        e.finish()
            .map_err(|source| ServeError::Enforcer { backend, source })?;
    }
    Ok(())
}
