//! The wire protocol of the bandwidth resource manager (thesis §3.3, §4.3), version 1:
//! the JSON messages exchanged between applications, their local agent and the master.
//! `docs/protocol.md` is the reference a third party writes a client from; this module
//! is its Rust form, shared by the master, the agent and the client library.
//!
//! Two transports carry these messages:
//! - **agent ↔ master**: HTTP/1.1 + JSON under the path prefix `/v1`, every request
//!   carrying the header [`VERSION_HEADER`] and an `Authorization: Bearer` token; the
//!   master pushes IDT updates to each agent over a server-sent-events stream;
//! - **application ↔ agent**: JSON Lines on a Unix socket — one [`LocalRequest`] per
//!   line, one [`LocalReply`] line back — the application identified by the socket's
//!   peer credentials.
//!
//! Quantities are integers: bandwidths in bytes per second, IDTs in picoseconds. Every
//! message is validated once here ([`FlowSpec::validate`], [`LocalRequest::parse`]);
//! the rest of the runtime works on checked values.

mod base;
pub mod job;

pub use self::base::{
    check_name, ErrorCode, Owner, WireError, MAX_BANDWIDTH, MAX_NAME_LEN, MAX_PID, MAX_UID,
};

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use self::job::{JobBody, JobDecision, JobInfo};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// The HTTP header carrying the protocol version on every `/v1` request.
pub const VERSION_HEADER: &str = "clusterqos-protocol";

/// Header naming the agent process (16 hex digits, random per process) on the agent
/// endpoints; see `State::claim` in the master.
pub const INSTANCE_HEADER: &str = "clusterqos-agent-instance";

/// Header of a follower's `503` naming the leader's URL: the client may
/// send the request there.
pub const LEADER_HEADER: &str = "clusterqos-leader";
/// Largest HTTP request body the master accepts.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Largest line (request) the agent accepts on its Unix socket, but for a job's.
pub const MAX_LINE_BYTES: usize = 16 * 1024;
/// Largest line holding a job reservation (`reserve_job`): a job's body as
/// `POST /v1/jobs` takes it, and a little.
pub const MAX_JOB_LINE_BYTES: usize = job::MAX_JOB_BODY_BYTES + 1024;
/// Largest best-effort weight.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// One end of a flow: a port on a node, the node by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSpec {
    /// Node (host) name as in the topology file.
    pub node: String,
    /// Port number on that node.
    #[serde(default)]
    pub port: u16,
}

/// A flow's identity on the wire: (source end-point, destination end-point, priority),
/// the thesis's (source port, target port, priority) of §4.2.1.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Where the flow's packets come from.
    pub src: EndpointSpec,
    /// Where they go.
    pub dst: EndpointSpec,
    /// Priority level.
    #[serde(default)]
    pub priority: u8,
}

impl FlowSpec {
    /// Checks what can be checked without the topology: names non-empty, printable and
    /// short, source and destination different.
    pub fn validate(&self) -> Result<(), WireError> {
        for n in [&self.src.node, &self.dst.node] {
            check_name("node name", n)?;
        }
        if self.src == self.dst {
            return Err(WireError::new(
                ErrorCode::BadRequest,
                "source and destination end-points are the same",
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for FlowSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{} -> {}:{} prio {}",
            self.src.node, self.src.port, self.dst.node, self.dst.port, self.priority
        )
    }
}

/// The service asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClassSpec {
    /// A reservation of `bandwidth` bytes per second (admission control, §3.3.1).
    Premium {
        /// Bytes per second, 1..=10^15.
        bandwidth: u64,
    },
    /// A share of the surplus (§3.3.2), weighted under max-min.
    BestEffort {
        /// 1..=1,000,000.
        #[serde(default = "one")]
        weight: u32,
    },
}

fn one() -> u32 {
    1
}

impl ClassSpec {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), WireError> {
        match *self {
            ClassSpec::Premium { bandwidth } if bandwidth == 0 || bandwidth > MAX_BANDWIDTH => {
                Err(WireError::new(
                    ErrorCode::BadRequest,
                    format!("premium bandwidth must be 1..={MAX_BANDWIDTH} bytes/s"),
                ))
            }
            ClassSpec::BestEffort { weight } if weight == 0 || weight > MAX_WEIGHT => {
                Err(WireError::new(
                    ErrorCode::BadRequest,
                    format!("weight must be 1..={MAX_WEIGHT}"),
                ))
            }
            _ => Ok(()),
        }
    }
}

// ---------------------------------------------------------------------------------------
// agent -> master (HTTP bodies)
// ---------------------------------------------------------------------------------------

/// `POST /v1/agents/{node}/flows`: a request for a new flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowRequest {
    /// The flow; its source node must be the agent's node.
    pub flow: FlowSpec,
    /// A name for people (defaults to the flow key).
    #[serde(default)]
    pub name: Option<String>,
    /// Premium or best-effort.
    pub class: ClassSpec,
    /// The requesting process.
    pub owner: Owner,
}

/// `POST /v1/agents/{node}/flows/release`: give a flow back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The flow.
    pub flow: FlowSpec,
    /// The releasing process; must have the owner's uid.
    pub owner: Owner,
}

/// `POST /v1/agents/{node}/heartbeat`: the agent is alive, and so are these clients.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// Processes on the node that own flows and are still running.
    #[serde(default)]
    pub live: Vec<Owner>,
}

/// Reply to `register`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registered {
    /// The node's name, as the master knows it.
    pub node: String,
    /// The lease, in milliseconds: silence longer than this releases the node's flows.
    pub lease_ms: u64,
    /// How often the agent should send a heartbeat, in milliseconds.
    pub heartbeat_ms: u64,
}

/// The master's decision on a [`FlowRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Admitted (premium) or registered (best-effort).
    Granted(IdtEntry),
    /// Refused by one of the three criteria.
    Rejected(RejectionInfo),
}

/// Why a premium request was refused (thesis §3.3.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectionInfo {
    /// 1 (source node), 2 (switch output port) or 3 (destination node); 0 when the
    /// request exceeds the source NIC's Bmax on its own.
    pub criterion: u8,
    /// "source-node", "switch-port", "destination-node" or "bmax".
    pub criterion_name: String,
    /// The resource at fault ("switch s1 port 3", "node a send").
    pub resource: String,
    /// Reserved on it before this request, bytes/s.
    pub reserved: u64,
    /// What the request would add, bytes/s.
    pub requested: u64,
    /// Its capacity, bytes/s.
    pub capacity: u64,
    /// The whole reason in one line.
    pub message: String,
}

/// One flow as its source agent must schedule it: the IDT table's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdtEntry {
    /// The flow.
    pub flow: FlowSpec,
    /// Its name.
    pub name: String,
    /// "premium" or "best_effort".
    pub class: String,
    /// Reserved (premium) or currently allotted (best-effort) rate, bytes/s.
    pub rate: u64,
    /// Inter-packet dispatch time in picoseconds; `null` = must not send (zero share).
    pub idt_ps: Option<u64>,
    /// Best-effort weight (premium: 0).
    #[serde(default)]
    pub weight: u32,
    /// The owning process.
    pub owner: Owner,
}

/// An event on `GET /v1/agents/{node}/events` (server-sent events; `event:` is the
/// variant name, `data:` this JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The node's whole table; sent first on every connection (re-sync).
    Snapshot {
        /// Event sequence number for this node (increasing within a master run).
        seq: u64,
        /// Every flow sourced at the node.
        flows: Vec<IdtEntry>,
        /// Every job that names the node or whose holding process runs on it
        /// (`docs/jobs.md`): the node enforces its part, and reports its process alive.
        #[serde(default)]
        jobs: Vec<Arc<JobInfo>>,
    },
    /// Changes since the previous event.
    Update {
        /// Sequence number.
        seq: u64,
        /// New or changed rows.
        upsert: Vec<IdtEntry>,
        /// Flows gone.
        remove: Vec<FlowSpec>,
        /// Jobs granted that concern the node.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        jobs: Vec<Arc<JobInfo>>,
        /// Jobs released (ids).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        jobs_gone: Vec<String>,
    },
}

/// One resource's line in the status report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceStatus {
    /// "node" or "port".
    pub kind: String,
    /// Node name, or "switch/port".
    pub name: String,
    /// "send", "receive", "combined" for nodes; "out" for ports.
    pub direction: String,
    /// Capacity, bytes/s (`null`: unlimited).
    pub capacity: Option<u64>,
    /// Premium reservations, bytes/s (cost-weighted for a combined limit).
    pub reserved: u64,
    /// Sum of best-effort shares crossing it, bytes/s.
    pub best_effort: u64,
    /// Capacity − reserved − best-effort (`null`: unlimited).
    pub free: Option<u64>,
}

/// `GET /v1/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReport {
    /// "thesis" or "max-min".
    pub policy: String,
    /// Number of premium flows.
    pub premium_flows: usize,
    /// Number of best-effort flows.
    pub best_effort_flows: usize,
    /// Every limited resource.
    pub resources: Vec<ResourceStatus>,
}

/// `GET /v1/leader`: which replica leads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderInfo {
    /// "leader" or "follower".
    pub role: String,
    /// The leader's URL as this replica knows it (its own when it leads).
    pub leader: Option<String>,
    /// This replica's own URL (`manager --advertise`), if given.
    pub this: Option<String>,
    /// Terms of leadership this replica has begun.
    pub terms: u64,
}

/// `GET /v1/version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// Protocol version spoken.
    pub protocol: u32,
    /// Software and version.
    pub server: String,
}

// ---------------------------------------------------------------------------------------
// application -> agent (JSON Lines on the Unix socket)
// ---------------------------------------------------------------------------------------

/// One request line on the agent's Unix socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocalRequest {
    /// Protocol version; must be [`PROTOCOL_VERSION`].
    pub v: u32,
    /// What to do.
    #[serde(flatten)]
    pub op: LocalOp,
}

/// The operations an application may ask of its agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum LocalOp {
    /// Ask for a flow (source node is the agent's node).
    Request {
        /// Source port on this node.
        src_port: u16,
        /// Destination end-point.
        dst: EndpointSpec,
        /// Priority.
        #[serde(default)]
        priority: u8,
        /// Name for people.
        #[serde(default)]
        name: Option<String>,
        /// Premium or best-effort.
        class: ClassSpec,
        /// Attribute the flow to this process instead of the caller (same uid only).
        #[serde(default)]
        pid: Option<u32>,
    },
    /// Give a flow back.
    Release {
        /// Source port on this node.
        src_port: u16,
        /// Destination end-point.
        dst: EndpointSpec,
        /// Priority.
        #[serde(default)]
        priority: u8,
    },
    /// This node's IDT table.
    Flows {},
    /// The master's per-resource status.
    Status {},
    /// The name of the agent's node (how MPI ranks learn where they run).
    Node {},
    /// Reserve a job's flows all or nothing (`docs/jobs.md`), held by the caller's
    /// process (or `pid`'s, of the same user): the job lasts while that process lives.
    ReserveJob {
        /// The job.
        job: LocalJob,
        /// Attribute the job to this process instead of the caller (same uid only).
        #[serde(default)]
        pid: Option<u32>,
    },
    /// Release a job reserved through this node's agent by the same user.
    ReleaseJob {
        /// Its id.
        id: String,
    },
    /// Put process `pid` (the caller's, or any for root) into the cgroup by which this
    /// node tells job `id`'s traffic; the job must be held and name this node.
    JoinJob {
        /// The job.
        id: String,
        /// The process (0: the caller).
        #[serde(default)]
        pid: u32,
    },
}

/// A job as an application asks its agent for it: `POST /v1/jobs`'s body without the
/// owner (the agent names the caller's user) or the process (the caller's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalJob {
    /// The job's id (idempotent retries, as on `/v1/jobs`).
    pub id: String,
    /// What it reserves.
    #[serde(flatten)]
    pub body: JobBody,
    /// Its lease, milliseconds (default: the manager's).
    #[serde(default)]
    pub lease_ms: Option<u64>,
    /// Wait up to this many seconds for room.
    #[serde(default)]
    pub wait_s: Option<u32>,
}

impl LocalRequest {
    /// Parses and checks one line; the error says what is wrong.
    pub fn parse(line: &[u8]) -> Result<LocalRequest, WireError> {
        if line.len() > MAX_JOB_LINE_BYTES {
            return Err(WireError::new(
                ErrorCode::TooLarge,
                format!("request over {MAX_LINE_BYTES} bytes"),
            ));
        }
        // Check the version before the shape so an old or new client learns why.
        let mut value: serde_json::Value = serde_json::from_slice(line)
            .map_err(|e| WireError::new(ErrorCode::BadRequest, format!("malformed JSON: {e}")))?;
        match value.get("v").and_then(|v| v.as_u64()) {
            Some(v) if v == PROTOCOL_VERSION as u64 => {}
            Some(v) => {
                return Err(WireError::new(
                    ErrorCode::VersionMismatch,
                    format!(
                        "protocol version {v} not supported (this agent speaks {PROTOCOL_VERSION})"
                    ),
                ))
            }
            None => {
                return Err(WireError::new(
                    ErrorCode::VersionMismatch,
                    format!(
                    "missing protocol version field \"v\" (this agent speaks {PROTOCOL_VERSION})"
                ),
                ))
            }
        }
        if line.len() > MAX_LINE_BYTES
            && value.get("op").and_then(|o| o.as_str()) != Some("reserve_job")
        {
            return Err(WireError::new(
                ErrorCode::TooLarge,
                format!("request over {MAX_LINE_BYTES} bytes"),
            ));
        }
        if let Some(obj) = value.as_object_mut() {
            obj.remove("v");
        }
        let op: LocalOp = serde_json::from_value(value)
            .map_err(|e| WireError::new(ErrorCode::BadRequest, format!("bad request: {e}")))?;
        let req = LocalRequest {
            v: PROTOCOL_VERSION,
            op,
        };
        match &req.op {
            LocalOp::Request {
                dst, name, class, ..
            } => {
                check_name("node name", &dst.node)?;
                if let Some(n) = name {
                    check_name("flow name", n)?;
                }
                class.validate()?;
            }
            LocalOp::Release { dst, .. } => check_name("node name", &dst.node)?,
            LocalOp::ReleaseJob { id } | LocalOp::JoinJob { id, .. } => check_name("job id", id)?,
            LocalOp::ReserveJob { .. } => {} // checked as a JobRequest by the agent
            LocalOp::Flows {} | LocalOp::Status {} | LocalOp::Node {} => {}
        }

        Ok(req)
    }
}

/// One reply line on the agent's Unix socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalReply {
    /// Protocol version of the agent.
    pub v: u32,
    /// Whether the operation succeeded (a rejection is a success: the decision).
    pub ok: bool,
    /// The result, when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<LocalResult>,
    /// The error, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
}

/// What a successful local operation returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LocalResult {
    /// The master's decision on a request.
    Decision {
        /// Granted or rejected.
        decision: Decision,
    },
    /// A flow was released.
    Released {
        /// Which.
        flow: FlowSpec,
    },
    /// The node's IDT table.
    Flows {
        /// Whether the agent is currently in sync with the master.
        synced: bool,
        /// Sequence number of the last event applied.
        seq: u64,
        /// Update events received since the agent started.
        updates: u64,
        /// Rows.
        flows: Vec<IdtEntry>,
    },
    /// The master's status report.
    Status {
        /// The report.
        status: StatusReport,
    },
    /// The agent's node.
    Node {
        /// Its name in the topology.
        node: String,
    },
    /// The manager's decision on a job.
    Job {
        /// Granted or rejected.
        decision: JobDecision,
    },
    /// A job was released.
    JobReleased {
        /// Its id.
        id: String,
    },
    /// A process joined a job's cgroup.
    JobJoined {
        /// The job.
        id: String,
        /// The cgroup (its path under the cgroup2 hierarchy).
        cgroup: String,
    },
}

impl LocalReply {
    /// A successful reply.
    pub fn ok(result: LocalResult) -> Self {
        LocalReply {
            v: PROTOCOL_VERSION,
            ok: true,
            result: Some(result),
            error: None,
        }
    }
    /// An error reply.
    pub fn err(error: WireError) -> Self {
        LocalReply {
            v: PROTOCOL_VERSION,
            ok: false,
            result: None,
            error: Some(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_request_round_trips_and_checks_version() {
        let line = br#"{"v":1,"op":"request","src_port":1,"dst":{"node":"b","port":2},"class":{"type":"premium","bandwidth":40000000}}"#;
        let r = LocalRequest::parse(line).unwrap();
        assert!(matches!(r.op, LocalOp::Request { src_port: 1, .. }));
        let e = LocalRequest::parse(br#"{"v":2,"op":"flows"}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::VersionMismatch);
        let e = LocalRequest::parse(br#"{"op":"flows"}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::VersionMismatch);
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let zero = br#"{"v":1,"op":"request","src_port":1,"dst":{"node":"b"},"class":{"type":"premium","bandwidth":0}}"#;
        assert_eq!(
            LocalRequest::parse(zero).unwrap_err().code,
            ErrorCode::BadRequest
        );
        let w = br#"{"v":1,"op":"request","src_port":1,"dst":{"node":"b"},"class":{"type":"best_effort","weight":0}}"#;
        assert_eq!(
            LocalRequest::parse(w).unwrap_err().code,
            ErrorCode::BadRequest
        );
        let port = br#"{"v":1,"op":"release","src_port":70000,"dst":{"node":"b"}}"#;
        assert_eq!(
            LocalRequest::parse(port).unwrap_err().code,
            ErrorCode::BadRequest
        );
        let extra = br#"{"v":1,"op":"flows","evil":1}"#;
        assert_eq!(
            LocalRequest::parse(extra).unwrap_err().code,
            ErrorCode::BadRequest
        );
    }
}
