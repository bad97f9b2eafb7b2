//! The agent's Unix socket: applications on the node ask for, release and list flows
//! here (thesis §4.3: blocking requests "issued to the local manager", which forwards
//! them to the master). JSON Lines, one [`LocalRequest`] per line, one [`LocalReply`]
//! per request; the caller is identified by the socket's peer credentials
//! (`SO_PEERCRED`: uid and pid), which is what flow ownership is checked against.
//!
//! Every line is size-limited and validated before anything is forwarded; a malformed
//! line gets an error reply, and a line over the limit closes the connection (framing
//! cannot be trusted after it).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

use super::{process_alive, IdtTable};
use crate::master_client::MasterClient;
use crate::protocol::{
    Decision, EndpointSpec, ErrorCode, FlowRequest, FlowSpec, LocalOp, LocalReply, LocalRequest,
    LocalResult, Owner, WireError, MAX_LINE_BYTES,
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
) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let (m, t) = (master.clone(), table.clone());
                tokio::spawn(async move {
                    if let Err(e) = connection(stream, m, t).await {
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
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Ok(());
        }
        let complete = line.last() == Some(&b'\n');
        if !complete && line.len() > MAX_LINE_BYTES {
            let reply = LocalReply::err(WireError::new(
                ErrorCode::TooLarge,
                format!("request line over {MAX_LINE_BYTES} bytes; closing"),
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
            Ok(req) => match handle(req.op, peer, &master, &table).await {
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
async fn settle(table: &watch::Receiver<Arc<IdtTable>>, done: impl FnMut(&Arc<IdtTable>) -> bool) {
    let mut rx = table.clone();
    let _ = tokio::time::timeout(SETTLE, rx.wait_for(done)).await;
}

/// Longest wait for a push to arrive before answering anyway.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

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
) -> Result<LocalResult, WireError> {
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
            if let Decision::Granted(e) = &decision {
                settle(table, |t| t.flows.contains_key(&e.flow)).await;
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
            settle(table, |t| !t.flows.contains_key(&flow)).await;
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
    }
}
