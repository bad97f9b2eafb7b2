//! What a master's term starts from (thesis §4.3): the books rebuilt from what its
//! store holds, the grants that no longer fit the topology, and why a master could not
//! start.

use std::time::Instant;

use tokio::sync::oneshot;

use super::config::Config;
use super::state::{self, State};
use super::store::{self, Restored, Store, StoreError};

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
pub(super) fn list_unfit(unfit: &[Unfit]) -> String {
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
    /// Stored jobs that the topology cannot hold.
    #[error(
        "database {db} holds jobs that do not fit this topology: {jobs}; start with the \
         topology they were granted under, or pass --drop-unfit-grants to release them"
    )]
    UnfitJobs {
        /// The database.
        db: String,
        /// Each job and why.
        jobs: String,
    },
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

/// Rebuilds the books from what the store holds (`now`: the start of the term):
/// re-admits every stored grant, refuses the start if some no longer fit unless
/// `drop_unfit` (then releases them, durably, through `store`), gives each node back
/// to the agent instance that held it for one lease, and starts every lease afresh.
/// Returns the books and the grants released.
pub(super) async fn rebuild(
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
                reason: e.to_string(),
            });
        }
    }
    let mut unfit_jobs = Vec::new();
    for job in restored.jobs {
        let id = job.id.clone();
        if let Err(e) = state.restore_job(job, now) {
            unfit_jobs.push((id, e.to_string()));
        }
    }
    if !unfit_jobs.is_empty() && !config.drop_unfit {
        return Err(ManagerError::UnfitJobs {
            db: config.store.name(),
            jobs: unfit_jobs
                .iter()
                .map(|(id, why)| format!("{id}: {why}"))
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    if !unfit.is_empty() || !unfit_jobs.is_empty() {
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
        for (id, why) in &unfit_jobs {
            tracing::warn!(job = %id, reason = %why,
                "stored job does not fit the topology: released (--drop-unfit-grants)");
        }
        let (tx, rx) = oneshot::channel();
        store.submit(store::Job {
            ops: unfit
                .iter()
                .map(|u| state::DbOp::Delete(u.row.id, u.row.spec.clone()))
                .chain(
                    unfit_jobs
                        .iter()
                        .map(|(id, _)| state::DbOp::JobDelete(id.clone())),
                )
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
