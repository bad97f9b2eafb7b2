//! The kernel backend as the agent's [`Enforcer`]: the local manager (thesis §4.3)
//! keeps the node's table from the master's pushes, and this keeps the interface's
//! traffic control in step with it — at once on every change, and every second
//! besides (an interface that vanished, state someone changed by hand).
//!
//! Until the first snapshot from the master arrives the installed classes are left as
//! they are: a restarted agent whose master is down goes on enforcing the last grants.
//! Replies to requests and releases wait until the kernel holds the change
//! ([`Hooks::enforced`]), so a program started after `request` returns is already
//! regulated.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{KernelBackend, KernelConfig, KernelError};
use crate::agent::enforcer::{EnforceError, Enforcer, Hooks};
use crate::agent::table::IdtTable;
use crate::shutdown::Stop;

/// How often the kernel state is checked when nothing changes.
const PERIOD: Duration = Duration::from_secs(1);

/// The kernel backend, installed on its interface.
pub struct KernelEnforcer {
    kb: Option<KernelBackend>,
    interface: String,
    enforced: watch::Sender<u64>,
    /// The interface vanished: nothing is left to uninstall.
    vanished: bool,
}

impl KernelEnforcer {
    /// Installs the backend (its qdisc and root classes): a missing interface, qdisc
    /// or permission fails here, before the agent starts.
    pub fn install(cfg: KernelConfig) -> Result<KernelEnforcer, KernelError> {
        let interface = cfg.interface.clone();
        let kb = KernelBackend::install(cfg)?;
        tracing::info!(
            interface = %interface,
            attach = ?kb.attach(),
            adopted = kb.adopted,
            link_rate = kb.link_rate(),
            "kernel backend installed"
        );
        Ok(KernelEnforcer {
            kb: Some(kb),
            interface,
            enforced: watch::channel(0).0,
            vanished: false,
        })
    }
}

impl Enforcer for KernelEnforcer {
    fn describe(&self) -> String {
        format!("kernel backend on {}", self.interface)
    }

    fn hooks(&mut self) -> Hooks {
        Hooks {
            ports: None,
            enforced: Some(self.enforced.subscribe()),
            job_cgroups: self.kb.as_ref().and_then(KernelBackend::job_cgroups),
        }
    }

    fn run(
        &mut self,
        table: watch::Receiver<Arc<IdtTable>>,
        rt: tokio::runtime::Handle,
        stop: Stop,
    ) -> Result<(), EnforceError> {
        let kb = self.kb.as_mut().expect("installed until finished");
        match follow(kb, &rt, table, &self.enforced, stop) {
            Some(e) => {
                self.vanished = true;
                Err(Box::new(e))
            }
            None => Ok(()),
        }
    }

    fn finish(mut self: Box<Self>) -> Result<(), EnforceError> {
        match self.kb.take() {
            Some(kb) if !self.vanished => kb.uninstall().map_err(|e| Box::new(e) as EnforceError),
            _ => Ok(()),
        }
    }
}

/// Follows `table` into the kernel until `stop`; returns the fatal error that ended it
/// (the interface vanished), if one did. `enforced` hears the table generation the
/// kernel holds after each reconciliation.
fn follow(
    kb: &mut KernelBackend,
    rt: &tokio::runtime::Handle,
    mut table: watch::Receiver<Arc<IdtTable>>,
    enforced: &watch::Sender<u64>,
    mut stop: Stop,
) -> Option<KernelError> {
    let mut last_error = String::new();
    while !stop.requested() {
        let t = table.borrow_and_update().clone();
        if t.snapshots > 0 {
            let started = Instant::now();
            match kb.reconcile(&t) {
                Ok(a) => {
                    enforced.send_replace(t.generation());
                    last_error.clear();
                    if a.added + a.changed + a.removed + a.filters > 0 {
                        tracing::info!(
                            added = a.added,
                            changed = a.changed,
                            removed = a.removed,
                            filters = a.filters,
                            flows = a.placed.len(),
                            us = started.elapsed().as_micros() as u64,
                            "kernel state updated"
                        );
                    }
                    for s in a.skipped {
                        tracing::warn!("not enforced: {s}");
                    }
                }
                Err(e @ KernelError::Vanished(_)) => return Some(e),
                Err(e) => {
                    let msg = e.to_string();
                    if msg != last_error {
                        tracing::warn!(error = %msg, "kernel state not updated; retrying");
                        last_error = msg;
                    }
                }
            }
        } else if let Err(e) = kb.check_link() {
            if let KernelError::Vanished(_) = e {
                return Some(e);
            }
        }
        let _ = rt.block_on(async {
            tokio::select! {
                r = tokio::time::timeout(PERIOD, table.changed()) => r.map(|_| ()).map_err(|_| ()),
                _ = stop.wait() => Ok(()),
            }
        });
    }
    None
}
