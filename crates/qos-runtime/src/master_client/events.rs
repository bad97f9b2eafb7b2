//! The reader of the master's server-sent events (`GET /v1/agents/{node}/events`,
//! `docs/protocol.md`): one [`AgentEvent`] per `data:` block, keep-alives skipped, a
//! silent or oversized stream treated as broken.

use std::time::Duration;

use http_body_util::BodyExt;

use crate::protocol::AgentEvent;

/// A server-sent-events reader yielding [`AgentEvent`]s.
pub struct EventStream {
    pub(super) body: hyper::body::Incoming,
    pub(super) buf: Vec<u8>,
    /// The replica this stream comes from, and the client's belief of who leads:
    /// once its requests find another leader, this stream is from a deposed one and
    /// ends, so that the agent re-subscribes to the new leader.
    pub(super) from: usize,
    pub(super) leader: tokio::sync::watch::Receiver<usize>,
}

/// Silence on the event stream after which it counts as broken.
const STREAM_SILENCE: Duration = Duration::from_secs(45);

/// Largest event accepted from the master (a snapshot of many flows).
const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;

impl EventStream {
    /// The next event; `None` when the stream ends or breaks.
    pub async fn next(&mut self) -> Option<AgentEvent> {
        loop {
            if let Some(end) = find_blank_line(&self.buf) {
                let block: Vec<u8> = self.buf.drain(..end.1).collect();
                let text = String::from_utf8_lossy(&block[..end.0]);
                let mut data = String::new();
                for line in text.lines() {
                    if let Some(d) = line.strip_prefix("data:") {
                        if !data.is_empty() {
                            data.push('\n');
                        }
                        data.push_str(d.strip_prefix(' ').unwrap_or(d));
                    }
                }
                if data.is_empty() {
                    continue; // keep-alive comment
                }
                match serde_json::from_str(&data) {
                    Ok(ev) => return Some(ev),
                    Err(e) => {
                        tracing::warn!(error = %e, "undecodable event from the manager");
                        continue;
                    }
                }
            }
            if self.buf.len() > MAX_EVENT_BYTES {
                return None;
            }
            if *self.leader.borrow_and_update() != self.from {
                return None;
            }
            // The master sends a keep-alive every 15 s: longer silence is a dead link.
            let frame = tokio::select! {
                f = tokio::time::timeout(STREAM_SILENCE, self.body.frame()) => f,
                _ = self.leader.changed() => continue,
            };
            match frame {
                Ok(Some(Ok(frame))) => {
                    if let Some(chunk) = frame.data_ref() {
                        self.buf.extend_from_slice(chunk);
                    }
                }
                _ => return None,
            }
        }
    }
}

/// (end of block, end of separator) of the first blank line in `b`.
fn find_blank_line(b: &[u8]) -> Option<(usize, usize)> {
    let n = b.windows(2).position(|w| w == b"\n\n")?;
    Some((n, n + 2))
}
