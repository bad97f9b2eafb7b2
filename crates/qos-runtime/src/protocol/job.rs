//! Job reservations on the wire (`/v1/jobs`, `docs/jobs.md`): one request reserves
//! every flow of a parallel job at once, all or nothing — admission (thesis §3.3.1)
//! applied to the job's whole set of flows.
//!
//! A job names its flows compactly: a pattern over a node list (every flow at the same
//! rate, expanded on the topology's routes by the manager) or an explicit list.

use serde::{Deserialize, Serialize};

use super::base::{check_name, ErrorCode, Owner, WireError, MAX_BANDWIDTH};

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

pub use qos_core::pattern::Pattern;

/// One flow of an explicit list: node to node, bytes/s — or, with ports, the traffic of
/// one process to another (an MPI rank's to a peer's: packets from `src_port` or to
/// `dst_port`, as a flow's ports classify them in `docs/kernel-backend.md`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFlow {
    /// Source node.
    pub src: String,
    /// Destination node.
    pub dst: String,
    /// Bytes per second.
    pub rate: u64,
    /// Source TCP/UDP port on `src` (0: the job's traffic is told by its cgroup).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub src_port: u16,
    /// Destination TCP/UDP port on `dst` (0: as for `src_port`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dst_port: u16,
    /// The service class: only "premium" (a job reserves bandwidth).
    #[serde(default = "premium")]
    pub class: String,
}

fn premium() -> String {
    "premium".into()
}

fn is_zero(p: &u16) -> bool {
    *p == 0
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
        if self.id.chars().all(|c| c == '.') {
            return bad(format!("job id '{}' is not allowed", self.id));
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
                    if (f.src_port == 0) != (f.dst_port == 0) {
                        return bad(format!(
                            "flow {} -> {}: give both ports or neither",
                            f.src, f.dst
                        ));
                    }
                    if !seen.insert((f.src.as_str(), f.src_port, f.dst.as_str(), f.dst_port)) {
                        return bad(format!(
                            "flow {}:{} -> {}:{} is listed twice",
                            f.src, f.src_port, f.dst, f.dst_port
                        ));
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

impl JobInfo {
    /// Whether `node`'s agent follows the job: it names the node, or its holding
    /// process runs there.
    pub fn concerns(&self, node: &str) -> bool {
        self.process.as_ref().is_some_and(|(n, _)| n == node) || self.body.names(node)
    }

    /// The nodes whose agents follow the job ([`JobInfo::concerns`]), each once.
    pub fn followers(&self) -> Vec<&str> {
        let mut v = self.body.nodes();
        if let Some((n, _)) = &self.process {
            if !v.contains(&n.as_str()) {
                v.push(n);
            }
        }
        v
    }
}

/// `POST /v1/jobs/{id}/release` and `/renew`: who asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobOwnerRequest {
    /// Must be the job's owner.
    pub owner: String,
}

impl JobBody {
    /// The distinct nodes it names, in the order first named.
    pub fn nodes(&self) -> Vec<&str> {
        match self {
            JobBody::Pattern { nodes, .. } => nodes.iter().map(String::as_str).collect(),
            JobBody::Flows { flows } => {
                let mut seen = std::collections::HashSet::new();
                flows
                    .iter()
                    .flat_map(|f| [f.src.as_str(), f.dst.as_str()])
                    .filter(|n| seen.insert(*n))
                    .collect()
            }
        }
    }

    /// Whether it names node `node`.
    pub fn names(&self, node: &str) -> bool {
        match self {
            JobBody::Pattern { nodes, .. } => nodes.iter().any(|n| n == node),
            JobBody::Flows { flows } => flows.iter().any(|f| f.src == node || f.dst == node),
        }
    }

    /// The part of the job that leaves node `me`: per destination node and way its
    /// packets are told (ports, or the job's cgroup), the rate summed over the job's
    /// flows, in destination order (a destination with both: the ports' row first).
    /// What a node enforces for the job.
    pub fn part(&self, me: &str) -> Vec<JobRow> {
        type Rows<'a> = std::collections::BTreeMap<(&'a str, bool), JobRow>;
        fn add<'a>(rows: &mut Rows<'a>, dst: &'a str, rate: u64, ports: Option<(u16, u16)>) {
            let r = rows
                .entry((dst, ports.is_none()))
                .or_insert_with(|| JobRow {
                    dst: dst.to_string(),
                    rate: 0,
                    ports: Vec::new(),
                    by_cgroup: false,
                });
            r.rate = r.rate.saturating_add(rate);
            match ports {
                Some(p) => {
                    if !r.ports.contains(&p) {
                        r.ports.push(p);
                    }
                }
                None => r.by_cgroup = true,
            }
        }
        let mut rows = std::collections::BTreeMap::new();
        match self {
            JobBody::Pattern {
                pattern,
                nodes,
                rate,
                ..
            } => {
                if let Some(i) = nodes.iter().position(|n| n == me) {
                    for b in pattern.from(i, nodes.len()) {
                        add(&mut rows, &nodes[b], *rate, None);
                    }
                }
            }
            JobBody::Flows { flows } => {
                for f in flows.iter().filter(|f| f.src == me) {
                    let ports = (f.src_port != 0).then_some((f.src_port, f.dst_port));
                    add(&mut rows, &f.dst, f.rate, ports);
                }
            }
        }
        rows.into_values().collect()
    }
}

/// A job's traffic from one node to one destination node ([`JobBody::part`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    /// Destination node.
    pub dst: String,
    /// Bytes per second, summed over the job's flows to it.
    pub rate: u64,
    /// (source port here, destination port there) of its flows, told by their ports
    /// (empty when `by_cgroup`).
    pub ports: Vec<(u16, u16)>,
    /// Its flows are told by the job's cgroup (they name no ports).
    pub by_cgroup: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: &str, dst: &str, rate: u64, ports: (u16, u16)) -> JobFlow {
        JobFlow {
            src: src.into(),
            dst: dst.into(),
            rate,
            src_port: ports.0,
            dst_port: ports.1,
            class: "premium".into(),
        }
    }

    #[test]
    fn a_node_s_part_sums_its_flows_per_destination() {
        let body = JobBody::Pattern {
            pattern: Pattern::AllToAll,
            nodes: vec!["a".into(), "b".into(), "c".into()],
            rate: 5,
            class: "premium".into(),
        };
        let part = body.part("b");
        assert_eq!(part.len(), 2);
        assert!(part
            .iter()
            .all(|r| r.rate == 5 && r.by_cgroup && r.ports.is_empty()));
        assert_eq!((part[0].dst.as_str(), part[1].dst.as_str()), ("a", "c"));
        assert!(body.part("z").is_empty());
        assert!(body.names("c") && !body.names("z"));
        let body = JobBody::Flows {
            flows: vec![
                flow("a", "b", 3, (100, 200)),
                flow("a", "b", 4, (101, 200)),
                flow("a", "c", 1, (0, 0)),
                flow("b", "a", 9, (200, 100)),
                flow("a", "b", 2, (0, 0)),
            ],
        };
        let part = body.part("a");
        assert_eq!(part.len(), 3);
        assert_eq!(
            (part[0].rate, &part[0].ports, part[0].by_cgroup),
            (7, &vec![(100, 200), (101, 200)], false)
        );
        // The same destination's flows without ports: a row of their own.
        assert_eq!(
            (
                part[1].dst.as_str(),
                part[1].rate,
                part[1].ports.len(),
                part[1].by_cgroup
            ),
            ("b", 2, 0, true)
        );
        assert_eq!((part[2].rate, part[2].by_cgroup), (1, true));
        assert_eq!(body.nodes(), ["a", "b", "c"]);
    }

    #[test]
    fn flows_with_ports_are_distinct_by_their_ports_and_need_both() {
        let req = |flows| JobRequest {
            id: "j".into(),
            owner: "o".into(),
            body: JobBody::Flows { flows },
            lease_ms: None,
            wait_s: None,
            process: None,
        };
        assert!(
            req(vec![flow("a", "b", 1, (1, 2)), flow("a", "b", 1, (3, 2))])
                .validate()
                .is_ok()
        );
        let e = req(vec![flow("a", "b", 1, (1, 2)), flow("a", "b", 1, (1, 2))])
            .validate()
            .unwrap_err();
        assert_eq!(e.message, "flow a:1 -> b:2 is listed twice");
        let e = req(vec![flow("a", "b", 1, (1, 0))]).validate().unwrap_err();
        assert_eq!(e.message, "flow a -> b: give both ports or neither");
    }
}
