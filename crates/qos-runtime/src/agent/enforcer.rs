//! The seam between the local manager and what enforces its decisions on the node
//! (thesis §4.3 → §4.2: the NIC firmware that paces each flow at its IDT). An
//! [`Enforcer`] follows the node's [`IdtTable`]; the agent knows nothing else of it.
//! Two implement it: the agent's own data plane (`dataplane::seam`) and Linux traffic
//! control (`kernel::enforcer`). One launcher (`node`) starts the agent with either.

use std::sync::Arc;

use tokio::sync::watch;

use super::cgroup::JobCgroups;
use super::ports::PortOwners;
use super::table::IdtTable;
use crate::shutdown::Stop;

/// Which enforcement backend an agent runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// Its own data plane: ports, rate control, reliable UDP.
    Dataplane,
    /// htb classes and u32 filters on an interface, for unmodified programs.
    Kernel,
}

/// What an enforcer lends the agent before the agent starts.
#[derive(Debug, Default)]
pub struct Hooks {
    /// The data plane's open ports and who opened them: only a port's opener, or root,
    /// may reserve bandwidth from it.
    pub ports: Option<PortOwners>,
    /// The table generation ([`IdtTable::generation`]) the enforcer holds, when it
    /// applies changes on its own time: the agent's replies wait until it caught up.
    pub enforced: Option<watch::Receiver<u64>>,
    /// The jobs' cgroups, when the enforcer tells a job's traffic by them (the kernel
    /// backend with its BPF classifier): the agent's `join_job` puts processes in them.
    pub job_cgroups: Option<JobCgroups>,
}

/// Why an enforcer stopped on its own, or could not clean up.
pub type EnforceError = Box<dyn std::error::Error + Send + Sync>;

/// An enforcement backend, installed and ready (its constructor did what can fail
/// before anything runs: bind sockets, install the qdisc).
pub trait Enforcer: Send {
    /// What it is, for the ready line and logs ("data plane", "kernel backend on eth0").
    fn describe(&self) -> String;

    /// What the agent needs from it; called once, before the agent starts.
    fn hooks(&mut self) -> Hooks;

    /// Follows `table` until `stop` is triggered, on a thread of its own (it may
    /// block; `rt` is the agent's runtime, for waiting on the table). Returns early
    /// with an error when it can no longer enforce (an interface vanished): the agent
    /// then stops too.
    fn run(
        &mut self,
        table: watch::Receiver<Arc<IdtTable>>,
        rt: tokio::runtime::Handle,
        stop: Stop,
    ) -> Result<(), EnforceError>;

    /// Removes what it installed; called after [`Enforcer::run`] returned `Ok`, or when
    /// the agent could not start.
    fn finish(self: Box<Self>) -> Result<(), EnforceError>;
}
