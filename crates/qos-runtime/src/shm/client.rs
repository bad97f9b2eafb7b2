//! The application's end of a port (GM library role, thesis §4.1): opens the port over
//! the agent's Unix socket, maps the shared region, then posts send and receive
//! descriptors and reads completions without system calls — except to ring a sleeping
//! agent's doorbell, or to sleep itself when it waits for a completion.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::fdpass;
use super::region::{notify, CompletionDesc, Doorbell, RecvDesc, Region, SendDesc};
use super::setup::{OpenReply, SETUP_VERSION};

/// Why a port operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("cannot reach the agent at {path}: {source}")]
    Connect { path: String, source: io::Error },
    #[error("the agent refused the port: {0}")]
    Refused(String),
    #[error("the agent went away (port closed); reopen the port when it is back")]
    AgentGone,
    #[error("set-up failed: {0}")]
    Setup(String),
    #[error("the port's shared queues are corrupt")]
    Corrupt,
}

/// An open port, low level: raw descriptors on the shared rings.
pub struct PortClient {
    conn: OwnedFd,
    region: Region,
    agent_bell: Doorbell,
    app_bell: Doorbell,
    /// Port number on this node.
    pub port: u16,
    /// This node's name.
    pub node: String,
    /// All node names; a send descriptor's `dst_node` indexes this list.
    pub nodes: Vec<String>,
    /// Payload bytes per packet the agent uses.
    pub packet_payload: usize,
}

impl PortClient {
    /// Opens a port on the agent listening at `socket` (`port: None` picks a free one).
    pub fn open(socket: &Path, port: Option<u16>) -> Result<PortClient, PortError> {
        let conn = fdpass::seqpacket(socket, false).map_err(|source| PortError::Connect {
            path: socket.display().to_string(),
            source,
        })?;
        let req = serde_json::json!({ "version": SETUP_VERSION, "op": "open", "port": port });
        fdpass::send_with_fds(&conn, req.to_string().as_bytes(), &[])
            .map_err(|e| PortError::Setup(e.to_string()))?;
        let mut buf = vec![0u8; 64 * 1024];
        let (n, mut fds) =
            fdpass::recv_with_fds(&conn, &mut buf).map_err(|e| PortError::Setup(e.to_string()))?;
        if n == 0 {
            return Err(PortError::Refused("connection closed by the agent".into()));
        }
        let reply: OpenReply = serde_json::from_slice(&buf[..n])
            .map_err(|e| PortError::Setup(format!("bad reply: {e}")))?;
        if !reply.ok {
            return Err(PortError::Refused(reply.error.unwrap_or_default()));
        }
        if fds.len() != 3 {
            return Err(PortError::Setup(format!(
                "expected 3 descriptors, got {}",
                fds.len()
            )));
        }
        let layout = reply
            .layout
            .ok_or_else(|| PortError::Setup("reply has no layout".into()))?;
        let app_bell = Doorbell::from_fd(fds.pop().expect("3 fds"));
        let agent_bell = Doorbell::from_fd(fds.pop().expect("3 fds"));
        let region = Region::map(fds.pop().expect("3 fds"), layout)
            .map_err(|e| PortError::Setup(e.to_string()))?;
        if !region.magic_ok() {
            return Err(PortError::Setup(
                "shared region has a bad magic number".into(),
            ));
        }
        Ok(PortClient {
            conn,
            region,
            agent_bell,
            app_bell,
            port: reply.port,
            node: reply.node,
            nodes: reply.nodes,
            packet_payload: reply.packet_payload,
        })
    }

    /// The shared region (buffer area access).
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// Index of a node by name.
    pub fn node_index(&self, name: &str) -> Option<u32> {
        self.nodes.iter().position(|n| n == name).map(|i| i as u32)
    }

    /// Posts a send descriptor; `Ok(false)` when the send queue is full.
    pub fn post_send(&self, d: SendDesc) -> Result<bool, PortError> {
        let ok = self
            .region
            .send_ring()
            .push(d)
            .map_err(|_| PortError::Corrupt)?;
        if ok {
            notify(self.region.agent_sleeping(), &self.agent_bell);
        }
        Ok(ok)
    }

    /// Posts a receive buffer; `Ok(false)` when the queue is full.
    pub fn post_recv(&self, d: RecvDesc) -> Result<bool, PortError> {
        let ok = self
            .region
            .recv_ring()
            .push(d)
            .map_err(|_| PortError::Corrupt)?;
        if ok {
            notify(self.region.agent_sleeping(), &self.agent_bell);
        }
        Ok(ok)
    }

    /// Takes a completion if one is waiting.
    pub fn poll(&self) -> Result<Option<CompletionDesc>, PortError> {
        self.region
            .completion_ring()
            .pop()
            .map_err(|_| PortError::Corrupt)
    }

    /// Waits up to `timeout` for a completion: spins briefly, then sleeps on the doorbell.
    /// Fails with [`PortError::AgentGone`] when the agent's end of the socket closes.
    pub fn wait(&self, timeout: Duration) -> Result<Option<CompletionDesc>, PortError> {
        let start = Instant::now();
        let spin_until = start + Duration::from_micros(50);
        loop {
            if let Some(c) = self.poll()? {
                return Ok(Some(c));
            }
            let now = Instant::now();
            if now >= start + timeout {
                return Ok(None);
            }
            if now < spin_until {
                std::hint::spin_loop();
                continue;
            }
            self.region.app_waiting().store(1, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            if let Some(c) = self.poll()? {
                self.region.app_waiting().store(0, Ordering::SeqCst);
                return Ok(Some(c));
            }
            let left = (start + timeout).saturating_duration_since(Instant::now());
            let ready = fdpass::wait_readable(
                &[self.app_bell.as_fd(), self.conn.as_fd()],
                Some(left.max(Duration::from_millis(1))),
            );
            self.region.app_waiting().store(0, Ordering::SeqCst);
            self.app_bell.clear();
            if ready[1] {
                // Drain whatever is left first, then report the loss.
                if let Some(c) = self.poll()? {
                    return Ok(Some(c));
                }
                return Err(PortError::AgentGone);
            }
        }
    }

    /// Whether the agent's end is still there.
    pub fn agent_alive(&self) -> bool {
        !fdpass::ready(&self.conn)
    }
}
