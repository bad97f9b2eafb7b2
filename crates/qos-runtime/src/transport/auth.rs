//! The authenticated datagram layer between agents: a [`Link`] middleware that seals
//! every outgoing datagram with AES-128-GCM under a key for the (sender, receiver)
//! pair and opens every incoming one before the transport sees it.
//!
//! The thesis trusts every node (§3.5); on a commodity network anyone who can reach an
//! agent's UDP port could otherwise create flow state in it, feed an application forged
//! messages and make the agent answer strangers. Here:
//!
//! - Keys: the cluster's agents share input key material (derived from the cluster's
//!   secret, or read from a key file of its own); HKDF-SHA256 turns it into one key per
//!   ordered pair of configured data addresses, so a datagram is good only from the
//!   sender and to the receiver it was sealed for (no reflection, no redirection).
//! - Sealing: the 40-byte header is authenticated (associated data), the payload is
//!   encrypted; a 32-byte trailer carries the send time, the nonce and the tag.
//! - Freshness: the nonce is this process's random 4-byte boot id and a per-peer 64-bit
//!   sequence starting at the wall-clock time of start in ns (so a restarted sender
//!   starts above anything it sent before); the receiver keeps a 1,024-datagram sliding
//!   window per peer (RFC 4303 §3.4.3), and refuses a datagram whose send time is more
//!   than `max_skew` from its own clock (replays of recorded traffic older than that).
//! - Strangers: a datagram from an address that is not a configured peer is dropped
//!   before anything else; nothing is ever sent to such an address.
//!
//! What fails is dropped before the transport creates any state, and only counted.
//! docs/dataplane.md ("Authentication") says what the key protects and what it does not.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_128_GCM};
use ring::hkdf;

use super::link::{Body, Link};
use super::wire::HEADER_LEN;
use crate::auth::{Secret, SecretError};

/// Bytes of the trailer: send time (u32 seconds), nonce (boot id u32, sequence u64), tag.
pub use super::wire::TRAILER_LEN;
const _: () = assert!(TRAILER_LEN == 4 + NONCE_LEN + TAG_LEN);
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// Datagrams remembered per peer for replay detection.
pub const REPLAY_WINDOW: u64 = 1024;
/// Default largest difference between a datagram's send time and the receiver's clock.
pub const DEFAULT_MAX_SKEW_SECS: u32 = 60;
/// Most refused datagrams read in one `recv_from` call before it returns (so a flood
/// cannot keep the agent from its other work).
const MAX_DROPS_PER_CALL: usize = 256;
const HKDF_SALT: &[u8] = b"clusterqos data plane, wire version 2, AES-128-GCM";

/// The input key material the cluster's agents share (never printed).
#[derive(Clone)]
pub struct DataKey {
    ikm: Arc<Vec<u8>>,
}

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(..)")
    }
}

impl DataKey {
    /// The key derived from the cluster's secret (the one agents present to the master).
    pub fn from_secret(secret: &Secret) -> DataKey {
        DataKey::from_bytes(secret.expose().as_bytes())
    }

    /// A key file of its own (the same rules as a secret file: at least 16 printable
    /// characters on one line).
    pub fn load(path: &std::path::Path) -> Result<DataKey, SecretError> {
        Secret::load(path).map(|s| DataKey::from_bytes(s.expose().as_bytes()))
    }

    /// Key material given directly (tests, in-process harnesses).
    pub fn from_bytes(ikm: &[u8]) -> DataKey {
        DataKey {
            ikm: Arc::new(ikm.to_vec()),
        }
    }

    /// A fresh random key (data planes that only talk among themselves in one process).
    pub fn random() -> DataKey {
        DataKey::from_bytes(&rand::random::<[u8; 32]>())
    }

    /// The key for datagrams from `from` to `to`.
    fn pair(&self, from: SocketAddr, to: SocketAddr) -> LessSafeKey {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, HKDF_SALT).extract(&self.ikm);
        let (f, t) = (from.to_string(), to.to_string());
        let info: [&[u8]; 4] = [b"from ", f.as_bytes(), b" to ", t.as_bytes()];
        let okm = prk
            .expand(&info, &AES_128_GCM)
            .expect("16 bytes is within HKDF-SHA256's output limit");
        LessSafeKey::new(UnboundKey::from(okm))
    }
}

/// How the authenticated link is set up.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    pub key: DataKey,
    /// This agent's configured data address (what its peers seal for).
    pub me: SocketAddr,
    /// Every configured peer's data address (this agent's may be among them).
    pub peers: Vec<SocketAddr>,
    /// Largest difference, in seconds, between a datagram's send time and this
    /// agent's clock (the agents' clocks must agree this well).
    pub max_skew_secs: u32,
}

/// What the authenticated link refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct AuthStats {
    /// Datagrams from an address that is not a configured peer.
    pub strangers: u64,
    /// Datagrams too short to carry a trailer.
    pub truncated: u64,
    /// Datagrams whose tag did not verify (wrong key, altered, forged).
    pub forged: u64,
    /// Datagrams seen before, or older than the replay window.
    pub replayed: u64,
    /// Datagrams whose send time is too far from this agent's clock.
    pub stale_clock: u64,
    /// Sends refused because the address is not a configured peer.
    pub refused_sends: u64,
    /// Datagrams that verified.
    pub accepted: u64,
}

/// Sliding window over a peer's sequence numbers (RFC 4303 §3.4.3, RFC 6479's bitmap).
#[derive(Debug, Clone, Default)]
struct ReplayWindow {
    /// One above the highest sequence accepted (0: none yet).
    top: u64,
    bits: [u64; (REPLAY_WINDOW / 64) as usize],
}

impl ReplayWindow {
    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % REPLAY_WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Whether `seq` may be accepted (not seen, not older than the window).
    fn fresh(&self, seq: u64) -> bool {
        if self.top == 0 || seq >= self.top {
            return true;
        }
        if self.top - seq > REPLAY_WINDOW {
            return false;
        }
        let (w, m) = Self::bit(seq);
        self.bits[w] & m == 0
    }

    /// Records `seq` as accepted (call only after [`ReplayWindow::fresh`] and the tag).
    fn mark(&mut self, seq: u64) {
        if seq >= self.top {
            let advance = seq + 1 - self.top;
            if self.top == 0 || advance >= REPLAY_WINDOW {
                self.bits = Default::default();
            } else {
                for s in self.top..=seq {
                    let (w, m) = Self::bit(s);
                    self.bits[w] &= !m;
                }
            }
            self.top = seq + 1;
        }
        let (w, m) = Self::bit(seq);
        self.bits[w] |= m;
    }
}

struct Peer {
    seal: LessSafeKey,
    open: LessSafeKey,
    next_seq: u64,
    window: ReplayWindow,
}

/// A [`Link`] that seals what it sends and opens what it receives (see the module).
pub struct AuthLink<L> {
    inner: L,
    boot: [u8; 4],
    peers: HashMap<SocketAddr, Peer>,
    max_skew: u32,
    scratch: Vec<u8>,
    /// Seconds added to the wall clock (tests of the skew rule; zero otherwise).
    clock_offset: i64,
    pub stats: AuthStats,
}

impl<L> std::fmt::Debug for AuthLink<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthLink")
            .field("peers", &self.peers.len())
            .field("stats", &self.stats)
            .finish()
    }
}

fn wall_clock() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

impl<L: Link> AuthLink<L> {
    pub fn new(inner: L, cfg: &AuthConfig) -> Self {
        let start = u64::try_from(wall_clock().as_nanos()).unwrap_or(u64::MAX / 2);
        let peers = cfg
            .peers
            .iter()
            .map(|&p| {
                let peer = Peer {
                    seal: cfg.key.pair(cfg.me, p),
                    open: cfg.key.pair(p, cfg.me),
                    next_seq: start,
                    window: ReplayWindow::default(),
                };
                (p, peer)
            })
            .collect();
        AuthLink {
            inner,
            boot: rand::random(),
            peers,
            max_skew: cfg.max_skew_secs,
            scratch: Vec::new(),
            clock_offset: 0,
            stats: AuthStats::default(),
        }
    }

    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// This agent's wall clock in seconds (shifted by `clock_offset` in tests).
    fn now_secs(&self) -> u32 {
        (wall_clock().as_secs() as i64 + self.clock_offset) as u32
    }

    /// Seals the datagram in `self.scratch` for `to` and sends it.
    fn seal_and_send(&mut self, to: SocketAddr) -> io::Result<()> {
        let sent_at = self.now_secs();
        let Some(peer) = self.peers.get_mut(&to) else {
            self.stats.refused_sends += 1;
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{to} is not a configured peer"),
            ));
        };
        let seq = peer.next_seq;
        peer.next_seq += 1;
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..4].copy_from_slice(&self.boot);
        nonce[4..].copy_from_slice(&seq.to_be_bytes());
        let head = self.scratch.len().min(HEADER_LEN);
        let aad = associated_data(&self.scratch[..head], sent_at, &nonce);
        let tag = peer
            .seal
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&aad[..head + 4 + NONCE_LEN]),
                &mut self.scratch[head..],
            )
            .map_err(|_| io::Error::other("datagram too long to seal"))?;
        self.scratch.extend_from_slice(&sent_at.to_be_bytes());
        self.scratch.extend_from_slice(&nonce);
        self.scratch.extend_from_slice(tag.as_ref());
        self.inner.send_to(&self.scratch, to)
    }

    /// Checks and opens the datagram in `buf[..n]` from `from` in place; returns the
    /// length of the opened datagram, or `None` (counted) if it is refused.
    fn open(&mut self, buf: &mut [u8], n: usize, from: SocketAddr) -> Option<usize> {
        let now = self.now_secs();
        let Some(peer) = self.peers.get_mut(&from) else {
            self.stats.strangers += 1;
            return None;
        };
        if n < TRAILER_LEN {
            self.stats.truncated += 1;
            return None;
        }
        let body_end = n - TRAILER_LEN;
        let t = &buf[body_end..n];
        let sent_at = u32::from_be_bytes([t[0], t[1], t[2], t[3]]);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&t[4..4 + NONCE_LEN]);
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&t[4 + NONCE_LEN..]);
        let seq = u64::from_be_bytes(nonce[4..].try_into().expect("8 bytes"));
        if !peer.window.fresh(seq) {
            self.stats.replayed += 1;
            return None;
        }
        let head = body_end.min(HEADER_LEN);
        let aad = associated_data(&buf[..head], sent_at, &nonce);
        let opened = peer.open.open_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(&aad[..head + 4 + NONCE_LEN]),
            Tag::from(tag),
            &mut buf[head..body_end],
            0..,
        );
        if opened.is_err() {
            self.stats.forged += 1;
            return None;
        }
        // Only a datagram that verified is judged by its time, so the warning below
        // names a real peer's clock, never a forger's.
        if now.abs_diff(sent_at) > self.max_skew {
            self.stats.stale_clock += 1;
            if self.stats.stale_clock.is_power_of_two() {
                tracing::warn!(
                    %from,
                    skew_secs = i64::from(sent_at) - i64::from(now),
                    "datagrams refused: their send time is too far from this agent's clock \
                     (are the nodes' clocks synchronised?)"
                );
            }
            return None;
        }
        peer.window.mark(seq);
        self.stats.accepted += 1;
        Some(body_end)
    }
}

/// The associated data: the header as sent, the send time and the nonce (the first
/// `head + 16` bytes of the result).
fn associated_data(head: &[u8], sent_at: u32, nonce: &[u8; NONCE_LEN]) -> [u8; HEADER_LEN + 16] {
    let mut aad = [0u8; HEADER_LEN + 16];
    aad[..head.len()].copy_from_slice(head);
    aad[head.len()..head.len() + 4].copy_from_slice(&sent_at.to_be_bytes());
    aad[head.len() + 4..head.len() + 16].copy_from_slice(nonce);
    aad
}

impl<L: Link> Link for AuthLink<L> {
    fn send_to(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<()> {
        self.scratch.clear();
        self.scratch.extend_from_slice(buf);
        self.seal_and_send(to)
    }
    fn send2(&mut self, head: &[u8], body: Body<'_>, to: SocketAddr) -> io::Result<()> {
        // The body is copied out of shared memory first: what is sealed is exactly what
        // is sent, whatever the application writes meanwhile.
        self.scratch.clear();
        self.scratch.reserve(head.len() + body.len() + TRAILER_LEN);
        self.scratch.extend_from_slice(head);
        body.copy_into(&mut self.scratch);
        self.seal_and_send(to)
    }
    fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        for _ in 0..MAX_DROPS_PER_CALL {
            let Some((n, from)) = self.inner.recv_from(buf)? else {
                return Ok(None);
            };
            if let Some(len) = self.open(buf, n, from) {
                return Ok(Some((len, from)));
            }
        }
        Ok(None)
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.fd()
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

#[cfg(test)]
mod tests;
