//! What a decision of the master's books produces besides its answer (thesis §4.3):
//! the row it keeps per flow, the durable write to make before answering, and the IDT
//! table changes to push to each agent whose flows changed.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::job::JobRecord;
use super::refusal::Refusal;
use crate::protocol::job::{JobInfo, JobShortfall};
use crate::protocol::{ClassSpec, FlowSpec, IdtEntry, Owner};

/// A flow as the master keeps it besides the ledger: its wire form and its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRow {
    /// The database row id: granted flows are numbered in grant order, so inserts
    /// append to the table and deletes find their row by id (no secondary index).
    pub id: i64,
    /// The flow's identity, with node names.
    pub spec: FlowSpec,
    /// Name for people.
    pub name: String,
    /// Premium or best-effort.
    pub class: ClassSpec,
    /// The owning process.
    pub owner: Owner,
}

/// What a change does to the agents' IDT tables: per source node, rows to upsert and
/// flows to remove; and the jobs granted or released, pushed to the agents of the
/// nodes each names (and of its holding process). Pushed only to the nodes listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Per node (by name): (upserts, removals).
    pub per_node: BTreeMap<String, (Vec<IdtEntry>, Vec<FlowSpec>)>,
    /// Jobs granted (`true`) or released (`false`).
    pub jobs: Vec<(Arc<JobInfo>, bool)>,
    /// The books' version after this change ([`State::version`]): a stream re-synced
    /// from a snapshot of version v skips changes of version ≤ v.
    pub version: u64,
}

impl Changes {
    pub(super) fn upsert(&mut self, node: &str, e: IdtEntry) {
        self.per_node.entry(node.to_string()).or_default().0.push(e);
    }
    pub(super) fn remove(&mut self, node: &str, f: FlowSpec) {
        self.per_node.entry(node.to_string()).or_default().1.push(f);
    }
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.per_node.is_empty() && self.jobs.is_empty()
    }
}

/// A durable change to write before acknowledging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbOp {
    /// A granted flow.
    Insert(FlowRow),
    /// A released flow: its row id, and its identity for the log.
    Delete(i64, FlowSpec),
    /// The agent instance now holding a node (by name), kept across master restarts
    /// so that a restarted master gives the node back to it.
    Holder(String, u64),
    /// A granted job (its compact record).
    JobPut(JobRecord),
    /// A released job, by id.
    JobDelete(String),
}

/// The books' decision on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted (premium, with the IDT the manager computed) or registered
    /// (best-effort): the flow's IDT-table row.
    Granted(IdtEntry),
    /// Refused by admission control, and why.
    Rejected(Refusal),
}

/// The outcome of a request: the decision, what to write, what to push.
#[derive(Debug)]
pub struct Outcome {
    /// Granted or rejected.
    pub decision: Verdict,
    /// Nothing for a rejection.
    pub db: Option<DbOp>,
    /// IDT table changes.
    pub changes: Changes,
}

impl Outcome {
    /// A refusal: nothing to write or push.
    pub(super) fn rejected(r: Refusal) -> Outcome {
        Outcome {
            decision: Verdict::Rejected(r),
            db: None,
            changes: Changes::default(),
        }
    }
}

/// The books' decision on a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobVerdict {
    /// Every flow reserved.
    Granted(JobInfo),
    /// Nothing reserved: the first resource short.
    Rejected(JobShortfall),
}

/// A job decision: what to answer, write and push.
#[derive(Debug)]
pub struct JobOutcome {
    /// Granted or rejected.
    pub decision: JobVerdict,
    /// The write to make durable before answering (none for a rejection, nor for a
    /// retry of a job already held).
    pub db: Option<DbOp>,
    /// Best-effort shares changed around the job.
    pub changes: Changes,
}

/// A node's whole table: its flows, the jobs its agent follows, and the books'
/// version they are from.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every flow sourced at the node.
    pub flows: Vec<IdtEntry>,
    /// Every job the node's agent follows.
    pub jobs: Vec<Arc<JobInfo>>,
    /// The books' version.
    pub version: u64,
}
