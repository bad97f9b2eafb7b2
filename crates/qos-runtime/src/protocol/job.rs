//! Job reservations on the wire (`/v1/jobs`, `docs/jobs.md`): one request reserves
//! every flow of a parallel job at once, all or nothing — admission (thesis §3.3.1)
//! applied to the job's whole set of flows.
//!
//! A job names its flows compactly: a pattern over a node list (every flow at the same
//! rate, expanded on the topology's routes by the manager) or an explicit list.

use serde::{Deserialize, Serialize};

use super::{check_name, ErrorCode, Owner, WireError, MAX_BANDWIDTH};

/// Largest body of a job request: a node list of a few thousand names, or an
/// explicit list of a few thousand flows.
pub const MAX_JOB_BODY_BYTES: usize = 1024 * 1024;
/// Most nodes in a pattern.
pub const MAX_JOB_NODES: usize = 16_384;
/// Most flows in an explicit list.
pub const MAX_JOB_FLOWS: usize = 16_384;
/// Longest a request may wait for room (`wait_s`), seconds.
pub const MAX_WAIT_S: u32 = 3600;
/// Longest lease a job may ask for, milliseconds.
pub const MAX_LEASE_MS: u64 = 24 * 3600 * 1000;

/// How a pattern connects its node list (nodes in the order listed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Every node to every other node: n·(n−1) flows.
    AllToAll,
    /// Each node to the next, the last to the first: n flows (2 → 2, one each way).
    Ring,
    /// Each node to the one before and the one after it in the list, no wrap:
    /// 2·(n−1) flows.
    NearestNeighbour,
    /// The first node to each of the others: n−1 flows.
    OneToMany,
}

impl Pattern {
    /// The pattern's name on the wire and the command line.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::AllToAll => "all-to-all",
            Pattern::Ring => "ring",
            Pattern::NearestNeighbour => "nearest-neighbour",
            Pattern::OneToMany => "one-to-many",
        }
    }

    /// Every pattern.
    pub const ALL: [Pattern; 4] = [
        Pattern::AllToAll,
        Pattern::Ring,
        Pattern::NearestNeighbour,
        Pattern::OneToMany,
    ];

    /// Its number of flows over `n` distinct nodes.
    pub fn flows(self, n: usize) -> u64 {
        let n = n as u64;
        match self {
            Pattern::AllToAll => n * n.saturating_sub(1),
            Pattern::Ring => {
                if n < 2 {
                    0
                } else {
                    n
                }
            }
            Pattern::NearestNeighbour => 2 * n.saturating_sub(1),
            Pattern::OneToMany => n.saturating_sub(1),
        }
    }

    /// The (source, destination) index pairs of the flows over `n` nodes, in a fixed
    /// order (source-major for all-to-all).
    pub fn pairs(self, n: usize) -> Box<dyn Iterator<Item = (usize, usize)>> {
        match self {
            Pattern::AllToAll => Box::new(
                (0..n).flat_map(move |a| (0..n).filter(move |&b| b != a).map(move |b| (a, b))),
            ),
            Pattern::Ring => {
                Box::new((0..if n < 2 { 0 } else { n }).map(move |a| (a, (a + 1) % n)))
            }
            Pattern::NearestNeighbour => {
                Box::new((0..n.saturating_sub(1)).flat_map(|a| [(a, a + 1), (a + 1, a)]))
            }
            Pattern::OneToMany => Box::new((1..n).map(|b| (0, b))),
        }
    }
}

impl std::str::FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Pattern, String> {
        Pattern::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown pattern '{s}' (all-to-all, ring, nearest-neighbour or one-to-many)"
                )
            })
    }
}

/// One flow of an explicit list: node to node, bytes/s.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFlow {
    /// Source node.
    pub src: String,
    /// Destination node.
    pub dst: String,
    /// Bytes per second.
    pub rate: u64,
    /// The service class: only "premium" (a job reserves bandwidth).
    #[serde(default = "premium")]
    pub class: String,
}

fn premium() -> String {
    "premium".into()
}

/// What a job reserves: the part of a request that identifies its contents (an
/// idempotent retry must repeat it exactly).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum JobBody {
    /// Every flow of `pattern` over `nodes`, each at `rate` bytes/s.
    Pattern {
        /// How the nodes are connected.
        pattern: Pattern,
        /// Distinct node names, at least 2.
        nodes: Vec<String>,
        /// Bytes per second of each flow.
        rate: u64,
        /// The service class: only "premium".
        #[serde(default = "premium")]
        class: String,
    },
    /// These flows.
    Flows {
        /// At least one.
        flows: Vec<JobFlow>,
    },
}

/// `POST /v1/jobs`: reserve a job's flows, all or nothing. (Unknown fields are
/// refused by [`JobBody`], which receives every field not named here.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRequest {
    /// The job's id, chosen by the client: a retry with the same id and contents gets
    /// the same answer; the same id with other contents is refused (409).
    pub id: String,
    /// Who holds it (a scheduler's name and job, a user): shown in listings; a release
    /// must name the same owner.
    pub owner: String,
    /// What it reserves.
    #[serde(flatten)]
    pub body: JobBody,
    /// Its lease, milliseconds: without a renewal (`POST /v1/jobs/{id}/renew`, or the
    /// heartbeat of the agent of `process`'s node listing it alive) for this long the
    /// job is released. Default: the manager's lease.
    #[serde(default)]
    pub lease_ms: Option<u64>,
    /// When it does not fit now, wait up to this many seconds for room, first come
    /// first served, instead of being refused at once.
    #[serde(default)]
    pub wait_s: Option<u32>,
    /// The process whose life holds the job, on the node of the agent that forwarded
    /// the request (`POST /v1/agents/{node}/jobs`; agents set it, tools do not).
    #[serde(default)]
    pub process: Option<Owner>,
}

impl JobRequest {
    /// Checks what can be checked without the topology: names, ranges, sizes.
    pub fn validate(&self) -> Result<(), WireError> {
        let bad = |m: String| Err(WireError::new(ErrorCode::BadRequest, m));
        check_name("job id", &self.id)?;
        if let Some(c) = self
            .id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "._:@+-".contains(*c)))
        {
            return bad(format!(
                "job id '{}': character {c:?} is not allowed (letters, digits and . _ : @ + -)",
                self.id
            ));
        }
        check_name("job owner", &self.owner)?;
        if let Some(l) = self.lease_ms {
            if l == 0 || l > MAX_LEASE_MS {
                return bad(format!("lease_ms must be 1..={MAX_LEASE_MS}"));
            }
        }
        if let Some(w) = self.wait_s {
            if w > MAX_WAIT_S {
                return bad(format!("wait_s must be 0..={MAX_WAIT_S}"));
            }
        }
        let rate_ok = |r: u64| {
            if r == 0 || r > MAX_BANDWIDTH {
                bad(format!("rate must be 1..={MAX_BANDWIDTH} bytes/s, not {r}"))
            } else {
                Ok(())
            }
        };
        let class_ok = |c: &str| {
            if c == "premium" {
                Ok(())
            } else {
                bad(format!(
                    "class '{c}': a job reserves bandwidth, so its class is premium \
                     (best-effort traffic needs no reservation)"
                ))
            }
        };
        match &self.body {
            JobBody::Pattern {
                nodes, rate, class, ..
            } => {
                class_ok(class)?;
                rate_ok(*rate)?;
                if nodes.len() < 2 || nodes.len() > MAX_JOB_NODES {
                    return bad(format!(
                        "a pattern needs 2 to {MAX_JOB_NODES} nodes, not {}",
                        nodes.len()
                    ));
                }
                let mut seen = std::collections::HashSet::with_capacity(nodes.len());
                for n in nodes {
                    check_name("node name", n)?;
                    if !seen.insert(n.as_str()) {
                        return bad(format!("node '{n}' is listed twice"));
                    }
                }
            }
            JobBody::Flows { flows } => {
                if flows.is_empty() || flows.len() > MAX_JOB_FLOWS {
                    return bad(format!(
                        "a job needs 1 to {MAX_JOB_FLOWS} flows, not {}",
                        flows.len()
                    ));
                }
                let mut seen = std::collections::HashSet::with_capacity(flows.len());
                for f in flows {
                    check_name("node name", &f.src)?;
                    check_name("node name", &f.dst)?;
                    class_ok(&f.class)?;
                    rate_ok(f.rate)?;
                    if f.src == f.dst {
                        return bad(format!(
                            "flow {} -> {}: source and destination are the same node",
                            f.src, f.dst
                        ));
                    }
                    if !seen.insert((f.src.as_str(), f.dst.as_str())) {
                        return bad(format!("flow {} -> {} is listed twice", f.src, f.dst));
                    }
                }
            }
        }
        Ok(())
    }
}

/// A job's first resource short, and by how much (thesis §3.3.1's criteria, over the
/// job's whole demand).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobShortfall {
    /// "switch s1 port 3", "node a send".
    pub resource: String,
    /// Reserved on it by others, bytes/s.
    pub reserved: u64,
    /// What the job would add there, bytes/s.
    pub requested: u64,
    /// Its capacity, bytes/s.
    pub capacity: u64,
    /// reserved + requested − capacity, bytes/s.
    pub short_by: u64,
    /// The job does not fit even with nothing else reserved: it never will.
    pub never_fits: bool,
}

/// The manager's answer to a job request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum JobDecision {
    /// Every flow reserved (durably, before this answer).
    Granted(JobInfo),
    /// Nothing reserved.
    Rejected {
        /// The job.
        id: String,
        /// The first resource short.
        short: JobShortfall,
        /// Milliseconds it waited for room.
        waited_ms: u64,
        /// The reason in one line.
        message: String,
    },
}

/// A job the manager holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInfo {
    /// Its id.
    pub id: String,
    /// Its holder.
    pub owner: String,
    /// What it reserves.
    #[serde(flatten)]
    pub body: JobBody,
    /// Its number of flows.
    pub flow_count: u64,
    /// Its lease, milliseconds.
    pub lease_ms: u64,
    /// The process holding it, if any (node, uid, pid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<(String, Owner)>,
}

/// `POST /v1/jobs/{id}/release` and `/renew`: who asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobOwnerRequest {
    /// Must be the job's owner.
    pub owner: String,
}
