//! The agent with the kernel backend: the local manager (thesis §4.3) keeps
//! the node's table from the master's pushes, and a thread of its own keeps the
//! interface's traffic control in step with it — at once on every change, and every
//! second besides (an interface that vanished, state someone changed by hand).
//!
//! Until the first snapshot from the master arrives the installed classes are left as
//! they are: a restarted agent whose master is down goes on enforcing the last grants.
//! Replies to requests and releases wait until the kernel holds the change, so a
//! program started after `request` returns is already regulated.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use super::{KernelBackend, KernelConfig, KernelError};
use crate::agent::{self, IdtTable};

/// Why the agent with the kernel backend stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Agent(#[from] agent::socket::SocketError),
    #[error("starting the agent's runtime: {0}")]
    Runtime(std::io::Error),
}

/// How often the kernel state is checked when nothing changes.
const PERIOD: Duration = Duration::from_secs(1);

/// Follows `table` into the kernel until `stop`; returns the fatal error that ended it
/// (the interface vanished), if one did. `enforced` hears the table generation the
/// kernel holds after each reconciliation.
fn follow(
    kb: &mut KernelBackend,
    rt: &tokio::runtime::Handle,
    mut table: watch::Receiver<Arc<IdtTable>>,
    enforced: &watch::Sender<u64>,
    stop: &AtomicBool,
) -> Option<KernelError> {
    let mut last_error = String::new();
    while !stop.load(Ordering::SeqCst) {
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
        let _ = rt.block_on(async { tokio::time::timeout(PERIOD, table.changed()).await });
    }
    None
}

/// Runs a node's agent with the kernel backend until interrupted (or until the
/// interface vanishes: an error). The backend is installed before the agent starts,
/// so a missing interface, qdisc or permission stops it before anything else; on exit
/// everything it installed is removed.
pub fn run_agent_with_kernel(agent_cfg: agent::Config, kcfg: KernelConfig) -> Result<(), RunError> {
    let iface = kcfg.interface.clone();
    let mut kb = KernelBackend::install(kcfg)?;
    tracing::info!(
        interface = %iface,
        attach = ?kb.attach(),
        adopted = kb.adopted,
        link_rate = kb.link_rate(),
        "kernel backend installed"
    );
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = kb.uninstall();
            return Err(RunError::Runtime(e));
        }
    };
    let (enforced_tx, enforced_rx) = watch::channel(0u64);
    let agent_cfg = agent::Config {
        enforced: Some(enforced_rx),
        ..agent_cfg
    };
    let handle = match rt.block_on(agent::start(agent_cfg)) {
        Ok(h) => h,
        Err(e) => {
            let _ = kb.uninstall();
            return Err(e.into());
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (fatal_tx, fatal_rx) = oneshot::channel();
    let table = handle.idt_table();
    let rt_handle = rt.handle().clone();
    let stop2 = stop.clone();
    let worker = std::thread::Builder::new()
        .name("kernel".into())
        .spawn(move || {
            let fatal = follow(&mut kb, &rt_handle, table, &enforced_tx, &stop2);
            let vanished = fatal.is_some();
            if let Some(e) = fatal {
                let _ = fatal_tx.send(e);
            }
            (kb, vanished)
        })
        .map_err(RunError::Runtime)?;
    println!("agent ready (kernel backend on {iface})");
    let fatal = rt.block_on(async move {
        tokio::select! {
            _ = crate::manager::wait_for_signal() => None,
            e = fatal_rx => e.ok(),
        }
    });
    stop.store(true, Ordering::SeqCst);
    handle.shutdown();
    let (kb, vanished) = worker
        .join()
        .map_err(|_| RunError::Runtime(std::io::Error::other("the kernel thread panicked")))?;
    if let Some(e) = fatal {
        return Err(e.into());
    }
    if !vanished {
        kb.uninstall()?;
    }
    Ok(())
}
