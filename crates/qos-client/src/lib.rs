//! The application's library for clusterqos (GM's library, thesis §4.1 and §4.2.1):
//! open a port on the node's agent, send and receive messages through shared memory,
//! and ask the bandwidth manager for a reservation.
//!
//! ```no_run
//! use qos_client::{Port, PortOptions};
//! let mut port = Port::open(PortOptions::new("/tmp/clusterqos-dataplane.sock")).unwrap();
//! port.send("node-b", 2, 0, b"hello").unwrap();
//! let msg = port.recv(std::time::Duration::from_secs(1)).unwrap();
//! ```
//!
//! A C ABI over the same API is in [`ffi`] (header `include/clusterqos.h`).

pub mod ffi;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use qos_runtime::client::{Client, LocalFlow};
use qos_runtime::protocol::Decision;
use qos_runtime::shm::client::{PortClient, PortError};
use qos_runtime::shm::region::{
    RecvDesc, SendDesc, CQ_ERROR, CQ_RECEIVED, CQ_SENT, ERR_PEER_RESTARTED, ERR_PEER_UNREACHABLE,
};

/// Errors of the client library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Port(#[from] PortError),
    #[error("unknown node `{0}`")]
    UnknownNode(String),
    #[error("message of {len} bytes exceeds the port's {max}-byte message size")]
    TooLarge { len: usize, max: usize },
    #[error("the agent rejected the send descriptor")]
    SendRejected,
    /// A message sent earlier to `node` may not have been delivered: the agent there
    /// restarted before its port took all of it. Later messages are sent afresh.
    #[error("a message to {node} may not have been delivered: the agent there restarted")]
    PeerRestarted { node: String },
    /// Messages sent earlier to `node` were given up on: its agent did not answer.
    #[error("a message to {node} was not delivered: its agent did not answer (gave up)")]
    PeerUnreachable { node: String },
    #[error("timed out")]
    Timeout,
    #[error("bandwidth manager: {0}")]
    Manager(String),
}

/// How to open a port.
#[derive(Debug, Clone)]
pub struct PortOptions {
    /// The agent's data-plane socket.
    pub socket: PathBuf,
    /// Port number; `None` lets the agent pick.
    pub port: Option<u16>,
    /// Largest message; the buffer area is cut into send and receive slots of this size.
    pub max_message: usize,
    /// The local manager's socket (for `request_bandwidth`, `release`).
    pub manager_socket: PathBuf,
}

impl PortOptions {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        PortOptions {
            socket: socket.into(),
            port: None,
            max_message: 64 * 1024,
            manager_socket: PathBuf::from("/tmp/clusterqos-agent.sock"),
        }
    }
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }
    pub fn max_message(mut self, bytes: usize) -> Self {
        self.max_message = bytes;
        self
    }
    pub fn manager_socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.manager_socket = path.into();
        self
    }
}

/// A received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub data: Vec<u8>,
    pub src_node: String,
    pub src_port: u16,
    pub priority: u8,
}

/// A reservation decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    Granted,
    Rejected(String),
}

/// An open port.
pub struct Port {
    inner: PortClient,
    opts: PortOptions,
    slot: u64,
    free_send: Vec<u64>,
    received: VecDeque<Message>,
    in_flight: usize,
}

impl Port {
    /// Opens a port on the agent.
    pub fn open(opts: PortOptions) -> Result<Port, Error> {
        let inner = PortClient::open(&opts.socket, opts.port)?;
        let slot = (opts.max_message.max(1) as u64).next_multiple_of(64);
        let total = inner.region().layout.buffer_bytes / slot;
        if total < 2 {
            return Err(Error::TooLarge {
                len: opts.max_message,
                max: (inner.region().layout.buffer_bytes / 2) as usize,
            });
        }
        let recv_slots = (total / 2).min(u64::from(inner.region().layout.recv_slots));
        let send_slots = (total - recv_slots).min(u64::from(inner.region().layout.send_slots));
        let p = Port {
            inner,
            opts,
            slot,
            free_send: (0..send_slots)
                .map(|i| (recv_slots + i) * slot)
                .rev()
                .collect(),
            received: VecDeque::new(),
            in_flight: 0,
        };
        for i in 0..recv_slots {
            p.inner.post_recv(RecvDesc {
                offset: i * slot,
                capacity: slot as u32,
                _pad: 0,
                cookie: i * slot,
            })?;
        }
        Ok(p)
    }

    /// This port's number.
    pub fn number(&self) -> u16 {
        self.inner.port
    }
    /// This node's name.
    pub fn node(&self) -> &str {
        &self.inner.node
    }
    /// Sends whose completion has not come back yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Queues a message for (`dst_node`, `dst_port`) at `priority`. Returns once the
    /// message is copied into the port's shared buffers (waiting for a free buffer if all
    /// are in flight); delivery is reliable and in order per flow.
    pub fn send(
        &mut self,
        dst_node: &str,
        dst_port: u16,
        priority: u8,
        data: &[u8],
    ) -> Result<(), Error> {
        if data.len() as u64 > self.slot {
            return Err(Error::TooLarge {
                len: data.len(),
                max: self.slot as usize,
            });
        }
        let node = self
            .inner
            .node_index(dst_node)
            .ok_or_else(|| Error::UnknownNode(dst_node.into()))?;
        let offset = loop {
            if let Some(o) = self.free_send.pop() {
                break o;
            }
            self.progress(Duration::from_secs(10))?;
        };
        self.inner.region().write(offset, data);
        let d = SendDesc {
            offset,
            len: data.len() as u32,
            dst_node: node,
            cookie: offset,
            dst_port,
            priority,
            _pad: [0; 5],
        };
        while !self.inner.post_send(d)? {
            self.progress(Duration::from_millis(10))?;
        }
        self.in_flight += 1;
        Ok(())
    }

    /// Waits until every send has completed.
    pub fn flush(&mut self, timeout: Duration) -> Result<(), Error> {
        self.wait_sends(0, timeout)
    }

    /// Waits until at most `at_most` sends are in flight (keeps a sender's queue short,
    /// so that stopping it stops its traffic soon).
    pub fn wait_sends(&mut self, at_most: usize, timeout: Duration) -> Result<(), Error> {
        let end = Instant::now() + timeout;
        while self.in_flight > at_most {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout);
            }
            self.progress(left)?;
        }
        Ok(())
    }

    /// Receives the next message, waiting up to `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> Result<Message, Error> {
        self.peek(timeout)?;
        Ok(self.received.pop_front().expect("peek found one"))
    }

    /// The next message, waiting up to `timeout`, left in place: the next `peek` or
    /// `recv` returns it again (what `cq_recv` uses to keep a message its caller's
    /// buffer cannot hold).
    pub fn peek(&mut self, timeout: Duration) -> Result<&Message, Error> {
        let end = Instant::now() + timeout;
        while self.received.is_empty() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout);
            }
            self.progress(left)?;
        }
        Ok(self.received.front().expect("not empty"))
    }

    /// Handles one completion (waiting up to `timeout` for it).
    fn progress(&mut self, timeout: Duration) -> Result<(), Error> {
        let Some(c) = self.inner.wait(timeout)? else {
            return Ok(());
        };
        match c.kind {
            CQ_SENT => {
                self.in_flight -= 1;
                self.free_send.push(c.cookie);
            }
            CQ_RECEIVED => {
                let mut data = vec![0u8; c.len as usize];
                self.inner.region().read(c.cookie, &mut data);
                let src_node = self
                    .inner
                    .nodes
                    .get(c.src_node as usize)
                    .cloned()
                    .unwrap_or_default();
                self.received.push_back(Message {
                    data,
                    src_node,
                    src_port: c.src_port,
                    priority: c.priority,
                });
                self.inner.post_recv(RecvDesc {
                    offset: c.cookie,
                    capacity: self.slot as u32,
                    _pad: 0,
                    cookie: c.cookie,
                })?;
            }
            CQ_ERROR => {
                self.in_flight = self.in_flight.saturating_sub(1);
                self.free_send.push(c.cookie);
                let node = || {
                    self.inner
                        .nodes
                        .get(c.src_node as usize)
                        .cloned()
                        .unwrap_or_else(|| format!("node #{}", c.src_node))
                };
                return Err(match c.len {
                    ERR_PEER_RESTARTED => Error::PeerRestarted { node: node() },
                    ERR_PEER_UNREACHABLE => Error::PeerUnreachable { node: node() },
                    _ => Error::SendRejected,
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn manager(&self) -> Result<Client, Error> {
        Client::connect(&self.opts.manager_socket).map_err(|e| Error::Manager(e.to_string()))
    }

    /// Asks the bandwidth manager for `bytes_per_sec` on the flow from this port to
    /// (`dst_node`, `dst_port`); blocks until decided.
    pub fn request_bandwidth(
        &self,
        dst_node: &str,
        dst_port: u16,
        bytes_per_sec: u64,
    ) -> Result<Grant, Error> {
        let flow = LocalFlow::new(self.number(), dst_node, dst_port);
        let d = self
            .manager()?
            .request_bandwidth(&flow, bytes_per_sec)
            .map_err(|e| Error::Manager(e.to_string()))?;
        Ok(match d {
            Decision::Granted(_) => Grant::Granted,
            Decision::Rejected(r) => Grant::Rejected(r.message),
        })
    }

    /// Registers this port's flow to (`dst_node`, `dst_port`) as best-effort with
    /// `weight`: always accepted; its rate follows the manager's current share.
    pub fn best_effort(&self, dst_node: &str, dst_port: u16, weight: u32) -> Result<(), Error> {
        let flow = LocalFlow::new(self.number(), dst_node, dst_port);
        match self
            .manager()?
            .best_effort(&flow, weight)
            .map_err(|e| Error::Manager(e.to_string()))?
        {
            Decision::Granted(_) => Ok(()),
            Decision::Rejected(r) => Err(Error::Manager(r.message)),
        }
    }

    /// Releases this port's flow to (`dst_node`, `dst_port`).
    pub fn release(&self, dst_node: &str, dst_port: u16) -> Result<(), Error> {
        let flow = LocalFlow::new(self.number(), dst_node, dst_port);
        self.manager()?
            .release(&flow)
            .map_err(|e| Error::Manager(e.to_string()))?;
        Ok(())
    }
}
