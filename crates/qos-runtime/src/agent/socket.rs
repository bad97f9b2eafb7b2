//! The agent's Unix socket: applications on the node ask for, release and list flows
//! here (thesis §4.3: blocking requests "issued to the local manager", which forwards
//! them to the master). JSON Lines, one [`LocalRequest`] per line, one [`LocalReply`]
//! per request; the caller is identified by the socket's peer credentials
//! (`SO_PEERCRED`: uid and pid), which is what flow ownership is checked against.
//!
//! Every line is size-limited and validated before anything is forwarded; a malformed
//! line gets an error reply, and a line over the limit closes the connection (framing
//! cannot be trusted after it).
//!
//! Port ownership: the socket is open to every local user, but only
//! the users allowed on the node ([`Users`]: by default the agent's own uid and root,
//! the same users the data plane lets open ports) may reserve bandwidth; any other
//! user's request is refused before it reaches the master. The master then lets only
//! the user holding a port's reservations (or root) reserve more from it.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{watch, Notify};

use super::ports::PortOwners;
use super::table::{process_alive, IdtTable};
use crate::master_client::MasterClient;
use crate::protocol::job::{JobDecision, JobRequest};
use crate::protocol::{
    Decision, EndpointSpec, ErrorCode, FlowRequest, FlowSpec, LocalOp, LocalReply, LocalRequest,
    LocalResult, Owner, WireError, MAX_JOB_LINE_BYTES,
};

/// Why the socket could not be served.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Binding the socket.
    #[error("cannot listen on socket {path}: {source}")]
    Bind {
        /// The socket path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// The local users who may reserve bandwidth through the agent: only they can own
/// the node's ports. Root always may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Users {
    /// These uids (and root).
    Only(Vec<u32>),
    /// Every local user (the agent then trusts every user of the machine; ports are
    /// still guarded by the master against other users once reserved).
    Anyone,
}

impl Default for Users {
    /// The agent's own uid and root: the users a data plane's default
    /// `allowed_uids` lets open ports.
    fn default() -> Self {
        // SAFETY: getuid has no preconditions and never fails.
        Users::Only(vec![unsafe { libc::getuid() }])
    }
}

impl Users {
    /// Whether `uid` may reserve bandwidth.
    pub fn allows(&self, uid: u32) -> bool {
        match self {
            Users::Anyone => true,
            Users::Only(v) => uid == 0 || v.contains(&uid),
        }
    }

    fn refusal(&self, uid: u32, node: &str) -> WireError {
        let list = match self {
            Users::Only(v) => {
                let mut v: Vec<String> = v.iter().chain([&0]).map(u32::to_string).collect();
                v.sort();
                v.dedup();
                v.join(", ")
            }
            Users::Anyone => String::new(),
        };
        WireError::new(
            ErrorCode::NotOwner,
            format!(
                "uid {uid} may not reserve bandwidth on node '{node}': its ports belong to \
                 uids {list} (the agent's --allow-uid)"
            ),
        )
    }
}

/// How the socket serves: who may reserve, and what enforcement to wait for.
#[derive(Debug)]
pub struct Serving {
    /// Who may reserve bandwidth.
    pub users: Users,
    /// The table generation the enforcement backend holds (see
    /// [`super::Config::enforced`]).
    pub enforced: Option<watch::Receiver<u64>>,
    /// The data plane's open ports and who opened them (see [`super::Config::ports`]).
    pub ports: Option<PortOwners>,
    /// The jobs' cgroups (see [`super::Config::job_cgroups`]).
    pub job_cgroups: Option<super::cgroup::JobCgroups>,
}

/// The owner a job reserved through an agent is held by: the caller's user on the
/// agent's node. Only that user, through that node's agent (or anyone with the
/// cluster's secret, by `/v1/jobs`), may release it.
pub fn job_owner(uid: u32, node: &str) -> String {
    format!("uid:{uid}@{node}")
}

/// Binds `path` (replacing a stale socket file), readable and writable by every local
/// user: ownership is enforced per request from the peer credentials.
pub fn bind(path: &Path) -> Result<UnixListener, SocketError> {
    let err = |source| SocketError::Bind {
        path: path.display().to_string(),
        source,
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if meta.file_type().is_socket() {
            let _ = std::fs::remove_file(path);
        }
    }
    let l = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(err)?;
    Ok(l)
}

/// Accepts connections forever, one task each.
pub async fn serve(
    listener: UnixListener,
    master: MasterClient,
    table: watch::Receiver<Arc<IdtTable>>,
    serving: Arc<Serving>,
    nudge: Arc<Notify>,
) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let (m, t, u, n) = (
                    master.clone(),
                    table.clone(),
                    serving.clone(),
                    nudge.clone(),
                );
                tokio::spawn(async move {
                    if let Err(e) = connection(stream, m, t, &u, &n).await {
                        tracing::debug!(error = %e, "client connection ended");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

async fn connection(
    stream: UnixStream,
    master: MasterClient,
    table: watch::Receiver<Arc<IdtTable>>,
    serving: &Serving,
    nudge: &Notify,
) -> std::io::Result<()> {
    let cred = stream.peer_cred()?;
    let peer = Owner {
        uid: cred.uid(),
        pid: cred.pid().and_then(|p| u32::try_from(p).ok()).unwrap_or(0),
    };
    let (r, mut w) = stream.into_split();
    let mut reader = BufReader::new(r);
    let mut line = Vec::with_capacity(512);
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_JOB_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Ok(());
        }
        let complete = line.last() == Some(&b'\n');
        if !complete && line.len() > MAX_JOB_LINE_BYTES {
            let reply = LocalReply::err(WireError::new(
                ErrorCode::TooLarge,
                format!("request line over {MAX_JOB_LINE_BYTES} bytes; closing"),
            ));
            write_reply(&mut w, &reply).await?;
            return Ok(());
        }
        let body = if complete {
            &line[..line.len() - 1]
        } else {
            &line[..]
        };
        if body.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let reply = match LocalRequest::parse(body) {
            Ok(req) => match handle(req.op, peer, &master, &table, serving, nudge).await {
                Ok(r) => LocalReply::ok(r),
                Err(e) => LocalReply::err(e),
            },
            Err(e) => LocalReply::err(e),
        };
        write_reply(&mut w, &reply).await?;
        if !complete {
            return Ok(()); // truncated last line: answered, and the peer is gone
        }
    }
}

async fn write_reply(
    w: &mut tokio::net::unix::OwnedWriteHalf,
    reply: &LocalReply,
) -> std::io::Result<()> {
    let mut out = serde_json::to_vec(reply).expect("replies serialize");
    out.push(b'\n');
    w.write_all(&out).await
}

/// Waits (briefly) until the master's push has reached this node's table, so that
/// when a request returns the data plane already enforces the new IDT. The push was
/// sent before the reply; if the stream is down the table re-syncs later.
async fn settle(
    table: &watch::Receiver<Arc<IdtTable>>,
    serving: &Serving,
    done: impl FnMut(&Arc<IdtTable>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    let mut rx = table.clone();
    let generation = match tokio::time::timeout_at(deadline, rx.wait_for(done)).await {
        Ok(Ok(t)) => t.generation(),
        _ => return,
    };
    if let Some(enforced) = &serving.enforced {
        let mut e = enforced.clone();
        let _ = tokio::time::timeout_at(deadline, e.wait_for(|g| *g >= generation)).await;
    }
}

/// A master answered while the table is not synced: a leader serves again (after a
/// failover, or the master's restart), so the link retries now rather than after its
/// back-off, and the push this request waits for comes sooner.
fn relink(table: &watch::Receiver<Arc<IdtTable>>, nudge: &Notify) {
    if !table.borrow().synced {
        nudge.notify_one();
    }
}

/// Longest wait for a push to arrive before answering anyway.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// Checks that `pid` may be named as a flow's owner by `peer`: it exists and runs
/// under the same uid (root may name any process).
fn check_pid(peer: Owner, pid: u32) -> Result<(), WireError> {
    if pid == peer.pid {
        return Ok(());
    }
    let meta = std::fs::metadata(format!("/proc/{pid}"));
    match meta {
        Ok(m) if process_alive(pid) && (m.uid() == peer.uid || peer.uid == 0) => Ok(()),
        Ok(_) => Err(WireError::new(
            ErrorCode::NotOwner,
            format!("process {pid} belongs to another user"),
        )),
        Err(_) => Err(WireError::new(
            ErrorCode::BadRequest,
            format!("no process {pid} on this node"),
        )),
    }
}

async fn handle(
    op: LocalOp,
    peer: Owner,
    master: &MasterClient,
    table: &watch::Receiver<Arc<IdtTable>>,
    serving: &Serving,
    nudge: &Notify,
) -> Result<LocalResult, WireError> {
    let users = &serving.users;
    let node = master.node().to_string();
    let spec = |src_port: u16, dst: EndpointSpec, priority: u8| FlowSpec {
        src: EndpointSpec {
            node: node.clone(),
            port: src_port,
        },
        dst,
        priority,
    };
    match op {
        LocalOp::Request {
            src_port,
            dst,
            priority,
            name,
            class,
            pid,
        } => {
            if !users.allows(peer.uid) {
                return Err(users.refusal(peer.uid, &node));
            }
            if let Some(Err(opener)) = serving
                .ports
                .as_ref()
                .map(|p| p.may_reserve(src_port, peer.uid))
            {
                return Err(WireError::new(
                    ErrorCode::NotOwner,
                    format!(
                        "port {src_port} on node '{node}' is open by uid {opener}; uid {} \
                         may not reserve bandwidth for it (only the port's owner or root may)",
                        peer.uid
                    ),
                ));
            }
            let owner = match pid {
                Some(p) => {
                    check_pid(peer, p)?;
                    Owner {
                        uid: peer.uid,
                        pid: p,
                    }
                }
                None => peer,
            };
            let flow = spec(src_port, dst, priority);
            flow.validate()?;
            let decision = master
                .request(&FlowRequest {
                    flow,
                    name,
                    class,
                    owner,
                })
                .await?;
            relink(table, nudge);
            if let Decision::Granted(e) = &decision {
                settle(table, serving, |t| t.flows.contains_key(&e.flow)).await;
            }
            Ok(LocalResult::Decision { decision })
        }
        LocalOp::Release {
            src_port,
            dst,
            priority,
        } => {
            let flow = spec(src_port, dst, priority);
            flow.validate()?;
            master.release(flow.clone(), peer).await?;
            relink(table, nudge);
            settle(table, serving, |t| !t.flows.contains_key(&flow)).await;
            Ok(LocalResult::Released { flow })
        }
        LocalOp::Flows {} => {
            let t = table.borrow().clone();
            Ok(LocalResult::Flows {
                synced: t.synced,
                seq: t.seq,
                updates: t.updates,
                flows: t.flows.values().cloned().collect(),
            })
        }
        LocalOp::Status {} => Ok(LocalResult::Status {
            status: master.status().await?,
        }),
        LocalOp::Node {} => Ok(LocalResult::Node { node }),
        LocalOp::ReserveJob { job, pid } => {
            if !users.allows(peer.uid) {
                return Err(users.refusal(peer.uid, &node));
            }
            let owner = match pid {
                Some(p) => {
                    check_pid(peer, p)?;
                    Owner {
                        uid: peer.uid,
                        pid: p,
                    }
                }
                None => peer,
            };
            let req = JobRequest {
                id: job.id,
                owner: job_owner(peer.uid, &node),
                body: job.body,
                lease_ms: job.lease_ms,
                wait_s: job.wait_s,
                process: Some(owner),
            };
            req.validate()?;
            let decision = master.reserve_job_for_process(&req).await?;
            relink(table, nudge);
            if let JobDecision::Granted(info) = &decision {
                settle(table, serving, |t| t.jobs.contains_key(&info.id)).await;
            }
            Ok(LocalResult::Job { decision })
        }
        LocalOp::ReleaseJob { id } => {
            master.release_job(&id, &job_owner(peer.uid, &node)).await?;
            relink(table, nudge);
            settle(table, serving, |t| !t.jobs.contains_key(&id)).await;
            Ok(LocalResult::JobReleased { id })
        }
        LocalOp::JoinJob { id, pid } => {
            if !users.allows(peer.uid) {
                return Err(users.refusal(peer.uid, &node));
            }
            let pid = if pid == 0 {
                peer.pid
            } else {
                check_pid(peer, pid)?;
                pid
            };
            let Some(cgroups) = &serving.job_cgroups else {
                return Err(WireError::new(
                    ErrorCode::BadRequest,
                    format!(
                        "the agent of node '{node}' does not tell jobs' traffic by cgroup \
                         (only its kernel backend does)"
                    ),
                ));
            };
            // A job granted a moment ago (by a scheduler's controller) may not have
            // reached this node yet.
            let mut rx = table.clone();
            let known = tokio::time::timeout(
                SETTLE,
                rx.wait_for(|t| t.jobs.get(&id).is_some_and(|j| j.body.names(&node))),
            )
            .await;
            if !matches!(known, Ok(Ok(_))) {
                return Err(WireError::new(
                    ErrorCode::NotFound,
                    format!("no job '{id}' naming node '{node}' is held"),
                ));
            }
            let cgroup = cgroups
                .join(&id, pid)
                .map_err(|e| WireError::new(ErrorCode::Internal, format!("job '{id}': {e}")))?;
            tracing::info!(job = %id, pid, cgroup = %cgroup, "process joined its job's cgroup");
            Ok(LocalResult::JobJoined { id, cgroup })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allowed_users_and_root_may_reserve() {
        let u = Users::Only(vec![1000]);
        assert!(u.allows(1000) && u.allows(0) && !u.allows(1001));
        let e = u.refusal(1001, "h1");
        assert_eq!(e.code, ErrorCode::NotOwner);
        assert!(
            e.message
                .contains("uid 1001 may not reserve bandwidth on node 'h1'")
                && e.message.contains("uids 0, 1000"),
            "{}",
            e.message
        );
        assert!(Users::Anyone.allows(4242));
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        assert!(Users::default().allows(me) && Users::default().allows(0));
    }
}
