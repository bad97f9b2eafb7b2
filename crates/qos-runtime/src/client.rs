//! The application's API to the bandwidth manager (thesis §3.4, §4.3: blocking
//! requests to the local manager): connect to the node's agent over its Unix socket and
//! ask for premium bandwidth, a best-effort share, a release, or the node's IDT table.
//!
//! ```no_run
//! use qos_runtime::client::{Client, LocalFlow};
//! use qos_runtime::protocol::Decision;
//! let mut c = Client::connect("/run/clusterqos/agent.sock").unwrap();
//! let flow = LocalFlow::new(1, "n1", 1);
//! match c.request_bandwidth(&flow, 40_000_000).unwrap() {
//!     Decision::Granted(g) => println!("IDT {} ps", g.idt_ps.unwrap_or(0)),
//!     Decision::Rejected(r) => println!("refused: {}", r.message),
//! }
//! ```
//!
//! The calls block; one [`Client`] is one connection, used by one thread at a time.

pub mod exec;
pub mod job;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::protocol::job::JobDecision;
use crate::protocol::{
    ClassSpec, Decision, EndpointSpec, ErrorCode, FlowSpec, IdtEntry, LocalJob, LocalOp,
    LocalReply, LocalRequest, LocalResult, StatusReport, WireError, PROTOCOL_VERSION,
};

/// What went wrong for the application.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The agent's socket.
    #[error("agent socket: {0}")]
    Io(#[from] std::io::Error),
    /// The agent or the master refused the request.
    #[error("{}", .0.message)]
    Refused(WireError),
    /// The agent answered something unexpected.
    #[error("unexpected reply from the agent: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The protocol error code, when the agent or master refused.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Refused(e) => Some(e.code),
            _ => None,
        }
    }
}

/// A destination `NODE:PORT` whose port is not a number.
#[derive(Debug, thiserror::Error)]
#[error("--to {to}: bad port '{port}'")]
pub struct BadDestination {
    /// As given.
    pub to: String,
    /// The port as given.
    pub port: String,
    /// Why it is not a port.
    #[source]
    pub source: std::num::ParseIntError,
}

/// A flow as an application on this node names it: its own source port, the
/// destination end-point, the priority, and a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalFlow {
    /// Source port on this node.
    pub src_port: u16,
    /// Destination end-point.
    pub dst: EndpointSpec,
    /// Priority.
    pub priority: u8,
    /// Name for people (optional).
    pub name: Option<String>,
}

impl LocalFlow {
    /// From port `src_port` here to port `dst_port` of node `dst`, priority 0.
    pub fn new(src_port: u16, dst: &str, dst_port: u16) -> Self {
        LocalFlow {
            src_port,
            dst: EndpointSpec {
                node: dst.to_string(),
                port: dst_port,
            },
            priority: 0,
            name: None,
        }
    }
    /// From port `src_port` here to `to`, written `NODE` or `NODE:PORT` (port 0 when
    /// not given), at `priority`.
    pub fn parse(src_port: u16, to: &str, priority: u8) -> Result<Self, BadDestination> {
        let (node, port) = match to.rsplit_once(':') {
            Some((n, p)) => (
                n,
                p.parse::<u16>().map_err(|source| BadDestination {
                    to: to.to_string(),
                    port: p.to_string(),
                    source,
                })?,
            ),
            None => (to, 0),
        };
        Ok(LocalFlow {
            priority,
            ..LocalFlow::new(src_port, node, port)
        })
    }
    /// With a name.
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }
}

/// A connection to the node's agent.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    pid: Option<u32>,
}

impl Client {
    /// Connects to the agent's socket at `path`.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Client {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
            pid: None,
        })
    }

    /// Attributes flows requested from now on to process `pid` (of the same user)
    /// instead of this one: they last as long as that process does.
    pub fn on_behalf_of(&mut self, pid: u32) {
        self.pid = Some(pid);
    }

    /// Sends one operation and reads its reply.
    pub fn call(&mut self, op: LocalOp) -> Result<LocalResult, ClientError> {
        let mut line = serde_json::to_vec(&LocalRequest {
            v: PROTOCOL_VERSION,
            op,
        })
        .map_err(|e| ClientError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.writer.write_all(&line)?;
        let mut reply = String::new();
        if self.reader.read_line(&mut reply)? == 0 {
            return Err(ClientError::Protocol("agent closed the connection".into()));
        }
        let r: LocalReply =
            serde_json::from_str(&reply).map_err(|e| ClientError::Protocol(e.to_string()))?;
        match (r.ok, r.result, r.error) {
            (true, Some(res), _) => Ok(res),
            (false, _, Some(e)) => Err(ClientError::Refused(e)),
            _ => Err(ClientError::Protocol(reply.trim().to_string())),
        }
    }

    fn request(&mut self, flow: &LocalFlow, class: ClassSpec) -> Result<Decision, ClientError> {
        match self.call(LocalOp::Request {
            src_port: flow.src_port,
            dst: flow.dst.clone(),
            priority: flow.priority,
            name: flow.name.clone(),
            class,
            pid: self.pid,
        })? {
            LocalResult::Decision { decision } => Ok(decision),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Asks for a premium reservation of `bytes_per_sec`; blocks until the master has
    /// decided (and, for a grant, written it to disk).
    pub fn request_bandwidth(
        &mut self,
        flow: &LocalFlow,
        bytes_per_sec: u64,
    ) -> Result<Decision, ClientError> {
        self.request(
            flow,
            ClassSpec::Premium {
                bandwidth: bytes_per_sec,
            },
        )
    }

    /// Registers a best-effort flow of `weight` (always granted; its rate follows the
    /// premium flows around it).
    pub fn best_effort(&mut self, flow: &LocalFlow, weight: u32) -> Result<Decision, ClientError> {
        self.request(flow, ClassSpec::BestEffort { weight })
    }

    /// Releases a flow this user owns.
    pub fn release(&mut self, flow: &LocalFlow) -> Result<FlowSpec, ClientError> {
        match self.call(LocalOp::Release {
            src_port: flow.src_port,
            dst: flow.dst.clone(),
            priority: flow.priority,
        })? {
            LocalResult::Released { flow } => Ok(flow),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The node's IDT table as the agent holds it.
    pub fn flows(&mut self) -> Result<Vec<IdtEntry>, ClientError> {
        match self.call(LocalOp::Flows {})? {
            LocalResult::Flows { flows, .. } => Ok(flows),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The name of the agent's node.
    pub fn node(&mut self) -> Result<String, ClientError> {
        match self.call(LocalOp::Node {})? {
            LocalResult::Node { node } => Ok(node),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Reserves `job`'s flows all or nothing, held by this process (or the one named
    /// by [`Client::on_behalf_of`]): released when it is, or one lease after that
    /// process ends. Blocks until decided (up to the job's `wait_s` in line).
    pub fn reserve_job(&mut self, job: LocalJob) -> Result<JobDecision, ClientError> {
        let wait = Duration::from_secs(u64::from(job.wait_s.unwrap_or(0)));
        self.writer
            .set_read_timeout(Some(wait + Duration::from_secs(30)))?;
        let r = self.call(LocalOp::ReserveJob { job, pid: self.pid });
        self.writer
            .set_read_timeout(Some(Duration::from_secs(30)))?;
        match r? {
            LocalResult::Job { decision } => Ok(decision),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Releases job `id`, reserved through this node's agent by this user.
    pub fn release_job(&mut self, id: &str) -> Result<(), ClientError> {
        match self.call(LocalOp::ReleaseJob { id: id.into() })? {
            LocalResult::JobReleased { .. } => Ok(()),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Puts process `pid` (0: this one) into the cgroup by which this node tells job
    /// `id`'s traffic; returns the cgroup's path in the hierarchy.
    pub fn join_job(&mut self, id: &str, pid: u32) -> Result<String, ClientError> {
        match self.call(LocalOp::JoinJob { id: id.into(), pid })? {
            LocalResult::JobJoined { cgroup, .. } => Ok(cgroup),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The master's per-resource status.
    pub fn status(&mut self) -> Result<StatusReport, ClientError> {
        match self.call(LocalOp::Status {})? {
            LocalResult::Status { status } => Ok(status),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_parse_with_and_without_a_port() {
        let f = LocalFlow::parse(3, "h1:91", 2).unwrap();
        assert_eq!(
            (f.src_port, f.dst.node.as_str(), f.dst.port, f.priority),
            (3, "h1", 91, 2)
        );
        assert_eq!(LocalFlow::parse(0, "h1", 0).unwrap().dst.port, 0);
        let e = LocalFlow::parse(0, "h1:x", 0).unwrap_err().to_string();
        assert_eq!(e, "--to h1:x: bad port 'x'");
    }
}
