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
//!   ordered pair of configured data addresses and protection, so a datagram is good
//!   only from the sender and to the receiver it was sealed for (no reflection, no
//!   redirection).
//! - Sealing ([`Protection`], chosen by the sender; a receiver opens both kinds, the
//!   header's authenticated flag says which): *authenticated* (the default) puts the
//!   whole datagram — header, payload, send time, nonce — under the tag as associated
//!   data and sends the payload in clear, read where it lies in shared memory;
//!   *encrypted* authenticates the header, send time and nonce and encrypts the payload
//!   out of shared memory into the agent's buffer. A 32-byte trailer carries the send
//!   time, the nonce and the tag.
//! - Freshness: the nonce is this process's random 4-byte boot id and a per-peer 64-bit
//!   sequence starting at the wall-clock time of start in ns (so a restarted sender
//!   starts above anything it sent before); the receiver keeps a 1,024-datagram sliding
//!   window per peer (RFC 4303 §3.4.3), and refuses a datagram whose send time is more
//!   than `max_skew` from its own clock (replays of recorded traffic older than that).
//! - Strangers: a datagram from an address that is not a configured peer is dropped
//!   before anything else; nothing is ever sent to such an address.
//!
//! AES-GCM comes from AWS-LC (`aws-lc-rs`, and `gcm` for sealing datagrams in pieces):
//! on CPUs with VAES and VPCLMULQDQ its AVX-512 code runs about 1.6 times as fast as
//! ring's, and its GHASH alone (authentication without encryption) twice as fast again
//! (docs/dataplane.md, "What authentication costs").
//!
//! What fails is dropped before the transport creates any state, and only counted.
//! docs/dataplane.md ("Authentication") says what the key protects and what it does not.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use aws_lc_rs::hkdf;

use super::link::{Body, Link};
use super::wire::{FLAG_ENCRYPTED, HEADER_LEN, MAX_PAYLOAD};
use crate::auth::{Secret, SecretError};

mod gcm;
use gcm::{Piece, Sealer, NONCE_LEN, TAG_LEN};

/// Bytes of the trailer: send time (u32 seconds), nonce (boot id u32, sequence u64), tag.
pub use super::wire::TRAILER_LEN;
const _: () = assert!(TRAILER_LEN == STAMP_LEN + TAG_LEN);
/// The trailer's authenticated part in front of the tag: send time and nonce.
const STAMP_LEN: usize = 4 + NONCE_LEN;
/// Byte of the header holding its flags.
const FLAGS_AT: usize = 5;
/// Datagrams remembered per peer for replay detection.
pub const REPLAY_WINDOW: u64 = 1024;
/// Default largest difference between a datagram's send time and the receiver's clock.
pub const DEFAULT_MAX_SKEW_SECS: u32 = 60;
/// Most refused datagrams read in one `recv_from` call before it returns (so a flood
/// cannot keep the agent from its other work).
const MAX_DROPS_PER_CALL: usize = 256;
const HKDF_SALT: &[u8] = b"clusterqos data plane, wire version 3, AES-128-GCM";

/// How an agent protects the datagrams it sends (a receiver opens either kind: the
/// header's flag says which, and is itself authenticated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
pub enum Protection {
    /// Authenticity, integrity and freshness: the tag covers the whole datagram, the
    /// payload travels in clear (GMAC; the cheaper one, docs/dataplane.md).
    #[default]
    Authenticated,
    /// The same, and the payload is encrypted (AES-128-GCM).
    Encrypted,
}

impl Protection {
    fn label(self) -> &'static [u8] {
        match self {
            Protection::Authenticated => b", authenticated",
            Protection::Encrypted => b", encrypted",
        }
    }
}

/// What a benchmark's control seals (see [`AuthLink::set_bench_seal`]); agents always
/// seal [`BenchSeal::Whole`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BenchSeal {
    /// As every agent: the whole datagram under the tag (or, encrypted, the payload
    /// encrypted).
    #[default]
    Whole,
    /// The header, send time and nonce under the tag, the payload neither
    /// authenticated nor encrypted: the same trailer, nonce, replay window and
    /// per-datagram set-up as `Whole`, without GHASH over the payload's bytes (with
    /// authenticated protection; encrypted protection seals as `Whole`). A control
    /// only: a key-less attacker on the path could alter payloads.
    HeadersOnly,
    /// Neither seals nor opens (no trailer either); strangers are still refused.
    Off,
}

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

/// HKDF output of AES-128's key length.
struct Aes128Len;

impl hkdf::KeyType for Aes128Len {
    fn len(&self) -> usize {
        16
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

    /// The AES-128 key for datagrams from `from` to `to` protected as `p` (each
    /// direction and each protection has a key of its own).
    fn pair(&self, from: SocketAddr, to: SocketAddr, p: Protection) -> [u8; 16] {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, HKDF_SALT).extract(&self.ikm);
        let (f, t) = (from.to_string(), to.to_string());
        let info: [&[u8]; 5] = [b"from ", f.as_bytes(), b" to ", t.as_bytes(), p.label()];
        let mut key = [0u8; 16];
        prk.expand(&info, Aes128Len)
            .and_then(|okm| okm.fill(&mut key))
            .expect("16 bytes is within HKDF-SHA256's output limit");
        key
    }

    fn opening(&self, from: SocketAddr, to: SocketAddr, p: Protection) -> LessSafeKey {
        let k = UnboundKey::new(&AES_128_GCM, &self.pair(from, to, p))
            .expect("a 16-byte key is AES-128's length");
        LessSafeKey::new(k)
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
    /// How this agent protects what it sends.
    pub protection: Protection,
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
    /// Seals what this agent sends to the peer, under the key of its protection.
    seal: Sealer,
    /// Open what the peer sends, authenticated only or encrypted.
    open_authenticated: LessSafeKey,
    open_encrypted: LessSafeKey,
    next_seq: u64,
    window: ReplayWindow,
}

impl Peer {
    /// The keys between this agent at `me` and the peer at `them`; sends start at
    /// sequence `next_seq`.
    fn new(key: &DataKey, me: SocketAddr, them: SocketAddr, p: Protection, next_seq: u64) -> Peer {
        Peer {
            seal: Sealer::new(&key.pair(me, them, p))
                .expect("AWS-LC sets up an AES-128-GCM context"),
            open_authenticated: key.opening(them, me, Protection::Authenticated),
            open_encrypted: key.opening(them, me, Protection::Encrypted),
            next_seq,
            window: ReplayWindow::default(),
        }
    }
}

/// A [`Link`] that seals what it sends and opens what it receives (see the module).
pub struct AuthLink<L> {
    inner: L,
    boot: [u8; 4],
    peers: HashMap<SocketAddr, Peer>,
    max_skew: u32,
    protection: Protection,
    /// Ciphertext of the payload being sent (encrypted protection only).
    scratch: Vec<u8>,
    /// Seconds added to the wall clock (tests of the skew rule; zero otherwise).
    clock_offset: i64,
    /// What this link seals: everything (every agent), or less as a benchmark's
    /// control. Set only by [`AuthLink::set_bench_seal`].
    bench_seal: BenchSeal,
    pub stats: AuthStats,
}

impl<L> std::fmt::Debug for AuthLink<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthLink")
            .field("peers", &self.peers.len())
            .field("protection", &self.protection)
            .field("stats", &self.stats)
            .finish()
    }
}

fn wall_clock() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// What GCM reads of a datagram's body.
fn piece(body: &Body<'_>) -> Piece {
    match body {
        Body::Local(b) => Piece::local(b),
        // SAFETY: a `SharedBytes` is readable for its length while it lives (its
        // constructor's contract), and the piece is used only within this borrow.
        Body::Shared(s) => unsafe { Piece::raw(s.as_ptr(), s.len()) },
    }
}

impl<L: Link> AuthLink<L> {
    pub fn new(inner: L, cfg: &AuthConfig) -> Self {
        let start = u64::try_from(wall_clock().as_nanos()).unwrap_or(u64::MAX / 2);
        let peers = cfg
            .peers
            .iter()
            .map(|&p| (p, Peer::new(&cfg.key, cfg.me, p, cfg.protection, start)))
            .collect();
        let scratch = match cfg.protection {
            Protection::Encrypted => vec![0u8; MAX_PAYLOAD],
            Protection::Authenticated => Vec::new(),
        };
        AuthLink {
            inner,
            boot: rand::random(),
            peers,
            max_skew: cfg.max_skew_secs,
            protection: cfg.protection,
            scratch,
            clock_offset: 0,
            bench_seal: BenchSeal::Whole,
            stats: AuthStats::default(),
        }
    }

    /// Seals less than every agent does, as a benchmark's control
    /// (`bench dataplane-overhead --data-protection off|headers-only` measures what
    /// sealing costs, and which part of it the payload's bytes cost, on the same data
    /// plane). No agent flag or configuration reaches it, and both ends of a link must
    /// use the same control.
    pub fn set_bench_seal(&mut self, seal: BenchSeal) {
        self.bench_seal = seal;
    }

    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// This agent's wall clock in seconds (shifted by `clock_offset` in tests).
    fn now_secs(&self) -> u32 {
        (wall_clock().as_secs() as i64 + self.clock_offset) as u32
    }

    /// Seals the datagram `head` + `body` for `to` and sends it with its trailer.
    /// `head` is the packet's header (or all of a datagram shorter than one).
    fn seal_and_send(&mut self, head: &[u8], body: Body<'_>, to: SocketAddr) -> io::Result<()> {
        let sent_at = self.now_secs();
        let Some(peer) = self.peers.get_mut(&to) else {
            self.stats.refused_sends += 1;
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{to} is not a configured peer"),
            ));
        };
        if self.bench_seal == BenchSeal::Off {
            return self.inner.send2(head, body, to);
        }
        let seq = peer.next_seq;
        peer.next_seq += 1;
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..4].copy_from_slice(&self.boot);
        nonce[4..].copy_from_slice(&seq.to_be_bytes());
        let mut h = [0u8; HEADER_LEN];
        let hl = head.len().min(HEADER_LEN);
        h[..hl].copy_from_slice(&head[..hl]);
        let encrypt = self.protection == Protection::Encrypted;
        let headers_only = self.bench_seal == BenchSeal::HeadersOnly && !encrypt;
        if hl > FLAGS_AT {
            h[FLAGS_AT] &= !FLAG_ENCRYPTED;
            if encrypt {
                h[FLAGS_AT] |= FLAG_ENCRYPTED;
            }
        }
        let head = &h[..hl];
        let mut trailer = [0u8; TRAILER_LEN];
        trailer[..4].copy_from_slice(&sent_at.to_be_bytes());
        trailer[4..STAMP_LEN].copy_from_slice(&nonce);
        let stamp = Piece::local(&trailer[..STAMP_LEN]);
        let too_long = || io::Error::other("datagram too long to seal");
        if encrypt {
            // Associated data: header and stamp; the body is encrypted out of place
            // (one read of shared memory) into the agent's own buffer.
            let out = self.scratch.get_mut(..body.len()).ok_or_else(too_long)?;
            let tag = peer
                .seal
                .seal(&nonce, &[Piece::local(head), stamp], piece(&body), out)
                .map_err(|_| too_long())?;
            trailer[STAMP_LEN..].copy_from_slice(&tag);
            let body = Body::Local(&self.scratch[..body.len()]);
            self.inner.send3(head, body, &trailer, to)
        } else {
            // Associated data: the whole datagram in front of the tag, read where it
            // lies (the benchmark's headers-only control leaves the body out); the
            // kernel gathers the same parts.
            let covered = if headers_only {
                Piece::local(&[])
            } else {
                piece(&body)
            };
            let tag = peer
                .seal
                .seal(
                    &nonce,
                    &[Piece::local(head), covered, stamp],
                    Piece::local(&[]),
                    &mut [],
                )
                .map_err(|_| too_long())?;
            trailer[STAMP_LEN..].copy_from_slice(&tag);
            self.inner.send3(head, body, &trailer, to)
        }
    }

    /// Checks and opens the datagram in `buf[..n]` from `from` in place; returns the
    /// length of the opened datagram, or `None` (counted) if it is refused.
    fn open(&mut self, buf: &mut [u8], n: usize, from: SocketAddr) -> Option<usize> {
        let now = self.now_secs();
        let Some(peer) = self.peers.get_mut(&from) else {
            self.stats.strangers += 1;
            return None;
        };
        if self.bench_seal == BenchSeal::Off {
            self.stats.accepted += 1;
            return Some(n);
        }
        if n < TRAILER_LEN {
            self.stats.truncated += 1;
            return None;
        }
        let body_end = n - TRAILER_LEN;
        let (datagram, tag) = buf[..n].split_at_mut(n - TAG_LEN);
        let stamp = &datagram[body_end..];
        let sent_at = u32::from_be_bytes([stamp[0], stamp[1], stamp[2], stamp[3]]);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&stamp[4..]);
        let seq = u64::from_be_bytes(nonce[4..].try_into().expect("8 bytes"));
        if !peer.window.fresh(seq) {
            self.stats.replayed += 1;
            return None;
        }
        let encrypted = body_end > FLAGS_AT && datagram[FLAGS_AT] & FLAG_ENCRYPTED != 0;
        let header_aad = encrypted || self.bench_seal == BenchSeal::HeadersOnly;
        let opened = if header_aad {
            let mut aad = [0u8; HEADER_LEN + STAMP_LEN];
            let head = body_end.min(HEADER_LEN);
            aad[..head].copy_from_slice(&datagram[..head]);
            aad[head..head + STAMP_LEN].copy_from_slice(stamp);
            let aad = Aad::from(&aad[..head + STAMP_LEN]);
            let nonce = Nonce::assume_unique_for_key(nonce);
            if encrypted {
                peer.open_encrypted
                    .open_in_place_separate_tag(nonce, aad, tag, &mut datagram[head..body_end])
                    .map(|_| ())
            } else {
                peer.open_authenticated
                    .open_in_place_separate_tag(nonce, aad, tag, &mut [])
                    .map(|_| ())
            }
        } else {
            peer.open_authenticated
                .open_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(&datagram[..]),
                    tag,
                    &mut [],
                )
                .map(|_| ())
        };
        if opened.is_err() {
            self.stats.forged += 1;
            return None;
        }
        // The transport sees the header as its sender emitted it.
        if encrypted {
            datagram[FLAGS_AT] &= !FLAG_ENCRYPTED;
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

impl<L: Link> Link for AuthLink<L> {
    fn send_to(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<()> {
        let (head, body) = buf.split_at(buf.len().min(HEADER_LEN));
        self.seal_and_send(head, Body::Local(body), to)
    }
    fn send2(&mut self, head: &[u8], body: Body<'_>, to: SocketAddr) -> io::Result<()> {
        self.seal_and_send(head, body, to)
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
