//! The node's IDT table (thesis §4.3: the local manager's copy of the master's
//! decisions for the flows sourced at its node) and the jobs that concern the node
//! (`docs/jobs.md`), which the enforcement backend follows, and whether an owning
//! process is still alive.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::protocol::job::JobInfo;
use crate::protocol::{AgentEvent, FlowSpec, IdtEntry, Owner};

/// The node's flows as the master last said: the rate-control parameters the data
/// plane enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdtTable {
    /// Whether the agent is connected and has applied the master's snapshot.
    pub synced: bool,
    /// Sequence number of the last event applied.
    pub seq: u64,
    /// Update events received since start (snapshots not counted).
    pub updates: u64,
    /// Snapshots received since start (1 + number of re-syncs).
    pub snapshots: u64,
    /// Rows by flow.
    pub flows: BTreeMap<FlowSpec, IdtEntry>,
    /// The jobs that name this node or are held by a process on it, by id.
    pub jobs: BTreeMap<String, Arc<JobInfo>>,
}

impl IdtTable {
    /// Applies one event from the master.
    pub fn apply(&mut self, ev: AgentEvent) {
        match ev {
            AgentEvent::Snapshot { seq, flows, jobs } => {
                self.seq = seq;
                self.snapshots += 1;
                self.synced = true;
                self.flows = flows.into_iter().map(|e| (e.flow.clone(), e)).collect();
                self.jobs = jobs.into_iter().map(|j| (j.id.clone(), j)).collect();
            }
            AgentEvent::Update {
                seq,
                upsert,
                remove,
                jobs,
                jobs_gone,
            } => {
                self.seq = seq;
                self.updates += 1;
                for f in remove {
                    self.flows.remove(&f);
                }
                for e in upsert {
                    self.flows.insert(e.flow.clone(), e);
                }
                for id in jobs_gone {
                    self.jobs.remove(&id);
                }
                for j in jobs {
                    self.jobs.insert(j.id.clone(), j);
                }
            }
        }
    }

    /// A number that grows with every event applied (snapshots and updates), across
    /// re-syncs: what an enforcement backend reports having applied.
    pub fn generation(&self) -> u64 {
        self.snapshots + self.updates
    }

    /// The distinct owners of the node's flows, and the processes on node `me`
    /// holding jobs.
    pub fn owners(&self, me: &str) -> Vec<Owner> {
        let mut v: Vec<Owner> = self.flows.values().map(|e| e.owner).collect();
        v.extend(
            self.jobs
                .values()
                .filter_map(|j| j.process.as_ref())
                .filter(|(n, _)| n == me)
                .map(|(_, o)| *o),
        );
        v.sort();
        v.dedup();
        v
    }
}

/// Whether process `pid` exists.
pub fn process_alive(pid: u32) -> bool {
    pid != 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}
