//! A job reservation as the master keeps it (thesis §3.3.1 applied to a whole job):
//! the compact record it stores (the request's pattern and node list, or its explicit
//! list — never one row per flow), and the job's demand per resource, summed once from
//! the record on the topology's routes.
//!
//! [`prepare`] does the expensive part — checking the names against the topology and
//! summing a million flows' routes — before the books are locked; the decision under
//! the lock then costs O(resources the job touches).

use std::sync::Arc;
use std::time::Instant;

use qos_core::admission::{AdmitError, Demand, Ledger, Rejection};
use qos_core::topology::{NodeId, Topology};
use qos_core::units::Bandwidth;
use serde::{Deserialize, Serialize};

use super::error::BooksError;
use super::request::node_id;
use crate::protocol::job::{JobBody, JobInfo, JobRequest, JobShortfall};
use crate::protocol::Owner;

/// What the store keeps of a granted job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The client's id.
    pub id: String,
    /// Its holder.
    pub owner: String,
    /// What it reserves.
    pub body: JobBody,
    /// Its lease, milliseconds.
    pub lease_ms: u64,
    /// The process holding it: its node's name and its identity there.
    pub process: Option<(String, Owner)>,
}

impl JobRecord {
    /// The job as listings show it.
    pub fn info(&self, flows: u64) -> JobInfo {
        JobInfo {
            id: self.id.clone(),
            owner: self.owner.clone(),
            body: self.body.clone(),
            flow_count: flows,
            lease_ms: self.lease_ms,
            process: self.process.clone(),
        }
    }

    /// Whether `other` asks for the same reservation (an idempotent retry); if not,
    /// what differs, for the refusal.
    pub fn differs(&self, other: &JobRecord) -> Option<String> {
        if self.owner != other.owner {
            return Some(format!(
                "it is held by '{}', not '{}'",
                self.owner, other.owner
            ));
        }
        if self.body != other.body {
            return Some(match (&self.body, &other.body) {
                (
                    JobBody::Pattern {
                        pattern: p1,
                        nodes: n1,
                        rate: r1,
                        ..
                    },
                    JobBody::Pattern {
                        pattern: p2,
                        nodes: n2,
                        rate: r2,
                        ..
                    },
                ) => {
                    if p1 != p2 {
                        format!("its pattern is {}, not {}", p1.name(), p2.name())
                    } else if r1 != r2 {
                        format!("its rate is {r1} B/s, not {r2} B/s")
                    } else {
                        format!(
                            "its node list differs ({} nodes, not {})",
                            n1.len(),
                            n2.len()
                        )
                    }
                }
                _ => "its flows differ".to_string(),
            });
        }
        if self.process != other.process {
            return Some("it is held by another process".into());
        }
        None
    }
}

/// A job the books hold.
#[derive(Debug, Clone)]
pub struct HeldJob {
    /// As stored.
    pub record: JobRecord,
    /// As listed and pushed to the agents of its nodes (made once, shared).
    pub info: Arc<JobInfo>,
    /// What it reserves on each resource.
    pub demand: Demand,
    /// When its lease was last renewed.
    pub seen: Instant,
}

/// A checked job request with its demand, ready to be decided.
#[derive(Debug, Clone)]
pub struct PreparedJob {
    /// What would be stored.
    pub record: JobRecord,
    /// Its demand.
    pub demand: Demand,
}

/// A job's flows: (source, destination, rate) each.
pub type JobFlows = Box<dyn Iterator<Item = (NodeId, NodeId, Bandwidth)>>;

/// The job's flows as (source, destination, rate) on `topo`: a pattern expanded over
/// its node list, or the explicit list. Names are resolved first, so an unknown node
/// is named whatever its place.
pub fn flows(topo: &Topology, body: &JobBody) -> Result<JobFlows, BooksError> {
    match body {
        JobBody::Pattern {
            pattern,
            nodes,
            rate,
            ..
        } => {
            let ids: Vec<NodeId> = nodes
                .iter()
                .map(|n| node_id(topo, n))
                .collect::<Result<_, _>>()?;
            let b = Bandwidth::from_bytes_per_sec(*rate);
            Ok(Box::new(
                pattern
                    .pairs(ids.len())
                    .map(move |(a, c)| (ids[a], ids[c], b)),
            ))
        }
        JobBody::Flows { flows } => {
            let v: Vec<(NodeId, NodeId, Bandwidth)> = flows
                .iter()
                .map(|f| {
                    Ok((
                        node_id(topo, &f.src)?,
                        node_id(topo, &f.dst)?,
                        Bandwidth::from_bytes_per_sec(f.rate),
                    ))
                })
                .collect::<Result<_, BooksError>>()?;
            Ok(Box::new(v.into_iter()))
        }
    }
}

/// Checks `req` against the topology and sums its demand (outside the books' lock:
/// `ledger` only lends the resource layout; nothing in it is read but capacities).
/// `process` is the holder process on `node` when an agent forwarded the request.
/// A rate no single flow could have (above its source's Bmax or a node's capacity)
/// is bad input, not a rejection.
pub fn prepare(
    ledger: &Ledger,
    req: JobRequest,
    default_lease_ms: u64,
    process: Option<(String, Owner)>,
) -> Result<PreparedJob, BooksError> {
    req.validate().map_err(|e| BooksError::Invalid(e.message))?;
    let topo = ledger.topology();
    let demand = ledger
        .demand(flows(topo, &req.body)?)
        .map_err(|e| match e {
            AdmitError::Route(r) => BooksError::Invalid(r.to_string()),
            e => BooksError::Invalid(format!("job '{}': {e}", req.id)),
        })?;
    // One flow's rate alone above a node's capacity: no state of the books admits it.
    let one = match &req.body {
        JobBody::Pattern { rate, .. } => Some(*rate),
        JobBody::Flows { .. } => None,
    };
    // For a pattern, one flow from and one into every node of the list (a ring over
    // it): every node's own limits are met by a single flow at the rate.
    let single: Vec<(NodeId, NodeId, Bandwidth)> = match &req.body {
        JobBody::Pattern { nodes, rate, .. } => {
            let ring = JobBody::Pattern {
                pattern: crate::protocol::job::Pattern::Ring,
                nodes: nodes.clone(),
                rate: *rate,
                class: "premium".into(),
            };
            flows(topo, &ring)?.collect()
        }
        JobBody::Flows { .. } => flows(topo, &req.body)?.collect(),
    };
    for f in single {
        let d = ledger
            .demand([f])
            .map_err(|e| BooksError::Invalid(e.to_string()))?;
        if let Err(r) = ledger.check_demand_alone(&d) {
            return Err(BooksError::Invalid(format!(
                "a rate of {} B/s is above the capacity of {} ({} B/s): no flow of job '{}' can have it",
                one.unwrap_or(f.2.bytes_per_sec()),
                r.resource,
                r.capacity.bytes_per_sec(),
                req.id
            )));
        }
    }
    Ok(PreparedJob {
        record: JobRecord {
            id: req.id,
            owner: req.owner,
            body: req.body,
            lease_ms: req.lease_ms.unwrap_or(default_lease_ms),
            process,
        },
        demand,
    })
}

/// A rejection as the protocol's shortfall.
pub fn shortfall(r: &Rejection, never_fits: bool) -> JobShortfall {
    let (reserved, requested, capacity) = (
        r.reserved.bytes_per_sec(),
        r.requested.bytes_per_sec(),
        r.capacity.bytes_per_sec(),
    );
    JobShortfall {
        resource: r.resource.clone(),
        reserved,
        requested,
        capacity,
        short_by: (reserved + requested).saturating_sub(capacity).max(1),
        never_fits,
    }
}
