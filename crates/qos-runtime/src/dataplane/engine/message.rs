//! What the data-plane engine exchanges with its ports (thesis §4.1: GM's send and
//! receive tokens): the bytes of a message to send, a posted receive buffer, a flow's
//! key, and the completions reported back.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::transport::link::Body;
use crate::transport::wire::FlowTag;

/// Bytes of a message to send, wherever they live (a `Vec`, a shared-memory buffer).
pub trait MessageBytes: Send + Sync {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes `offset..offset + len` (inside the message) for the link to send.
    fn body(&self, offset: usize, len: usize) -> Body<'_>;
}
impl MessageBytes for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn body(&self, offset: usize, len: usize) -> Body<'_> {
        Body::Local(&self[offset..offset + len])
    }
}
/// A message handed to the engine.
pub type Payload = Arc<dyn MessageBytes>;

/// A posted receive buffer, wherever it lives. Offsets and lengths given are inside it.
pub trait RecvTarget: Send {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `data` into the buffer at `offset`.
    fn write(&mut self, offset: usize, data: &[u8]);
    /// Copies the buffer at `offset` into `out`.
    fn read(&self, offset: usize, out: &mut [u8]);
}
impl RecvTarget for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn write(&mut self, offset: usize, data: &[u8]) {
        self[offset..offset + data.len()].copy_from_slice(data);
    }
    fn read(&self, offset: usize, out: &mut [u8]) {
        out.copy_from_slice(&self[offset..offset + out.len()]);
    }
}

/// A flow as the engine sees it: the peer agent and (source port, destination port, priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub peer: SocketAddr,
    pub tag: FlowTag,
}

/// Why a message may not have been delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendFailure {
    /// The peer agent lost the flow's state (it restarted) before acknowledging it all.
    PeerRestarted,
    /// The peer agent did not answer for the give-up time.
    PeerUnreachable,
}

/// Reported to the port owner.
pub enum Completion {
    /// Every packet of the message was acknowledged; its buffer may be reused.
    Sent { port: u16, cookie: u64 },
    /// The message may not have been delivered (the flow's connection was reset); its
    /// buffer may be reused.
    Failed {
        port: u16,
        cookie: u64,
        peer: SocketAddr,
        why: SendFailure,
    },
    /// A message was received into a posted buffer.
    Received {
        port: u16,
        cookie: u64,
        target: Box<dyn RecvTarget>,
        len: u32,
        from: SocketAddr,
        src_port: u16,
        priority: u8,
    },
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Completion::Sent { port, cookie } => write!(f, "Sent {{ port: {port}, cookie: {cookie} }}"),
            Completion::Failed { port, cookie, peer, why } => write!(
                f,
                "Failed {{ port: {port}, cookie: {cookie}, peer: {peer}, why: {why:?} }}"
            ),
            Completion::Received { port, cookie, len, from, src_port, priority, .. } => write!(
                f,
                "Received {{ port: {port}, cookie: {cookie}, len: {len}, from: {from}, src_port: {src_port}, priority: {priority} }}"
            ),
        }
    }
}
