//! Tests of the authenticated link: what verifies, and every way a datagram is refused
//! (stranger, wrong key, altered, replayed, stale clock), over an in-memory wire that
//! keeps a copy of everything sent so a test can replay or alter it.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use super::*;
use crate::transport::wire::{AckInfo, ConnIds, FlowTag, Repr};

type Wire = Rc<RefCell<Net>>;

#[derive(Default)]
struct Net {
    queues: HashMap<SocketAddr, VecDeque<(Vec<u8>, SocketAddr)>>,
    /// Every datagram sent: (from, to, bytes).
    log: Vec<(SocketAddr, SocketAddr, Vec<u8>)>,
}

struct Pipe {
    net: Wire,
    me: SocketAddr,
}

impl Link for Pipe {
    fn send_to(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<()> {
        let mut n = self.net.borrow_mut();
        n.log.push((self.me, to, buf.to_vec()));
        n.queues
            .entry(to)
            .or_default()
            .push_back((buf.to_vec(), self.me));
        Ok(())
    }
    fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        let mut n = self.net.borrow_mut();
        let Some((d, from)) = n.queues.entry(self.me).or_default().pop_front() else {
            return Ok(None);
        };
        buf[..d.len()].copy_from_slice(&d);
        Ok(Some((d.len(), from)))
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.me)
    }
}

const A: &str = "10.0.0.1:7500";
const B: &str = "10.0.0.2:7500";
const STRANGER: &str = "10.0.0.66:7500";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn link(net: &Wire, me: &str, key: &DataKey) -> AuthLink<Pipe> {
    link_with(net, me, key, Protection::Authenticated)
}

fn link_with(net: &Wire, me: &str, key: &DataKey, protection: Protection) -> AuthLink<Pipe> {
    let cfg = AuthConfig {
        key: key.clone(),
        me: addr(me),
        peers: vec![addr(A), addr(B)],
        max_skew_secs: DEFAULT_MAX_SKEW_SECS,
        protection,
    };
    AuthLink::new(
        Pipe {
            net: net.clone(),
            me: addr(me),
        },
        &cfg,
    )
}

fn data(payload: &[u8]) -> Vec<u8> {
    let r = Repr::Data {
        tag: FlowTag {
            src_port: 1,
            dst_port: 2,
            priority: 0,
        },
        ids: ConnIds { conn: 9, rid: 0 },
        seq: 0,
        msg_seq: 0,
        msg_len: payload.len() as u32,
        offset: 0,
        payload,
    };
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut buf).unwrap();
    buf
}

/// Puts `bytes` on the wire to `to` as if `from` had sent them (a replay or forgery).
fn inject(net: &Wire, to: &str, bytes: Vec<u8>, from: &str) {
    net.borrow_mut()
        .queues
        .entry(addr(to))
        .or_default()
        .push_back((bytes, addr(from)));
}

fn recv(l: &mut AuthLink<Pipe>) -> Option<(Vec<u8>, SocketAddr)> {
    let mut buf = vec![0u8; 70_000];
    let (n, from) = l.recv_from(&mut buf).unwrap()?;
    Some((buf[..n].to_vec(), from))
}

fn key() -> DataKey {
    DataKey::from_bytes(b"0123456789abcdef-cluster")
}

fn ack() -> [u8; HEADER_LEN] {
    let mut ack = [0u8; HEADER_LEN];
    Repr::Ack {
        tag: FlowTag {
            src_port: 1,
            dst_port: 2,
            priority: 0,
        },
        ids: ConnIds { conn: 9, rid: 4 },
        ack: AckInfo::default(),
    }
    .emit(&mut ack)
    .unwrap();
    ack
}

#[test]
fn an_authenticated_datagram_opens_at_its_peer_with_the_payload_in_clear_on_the_wire() {
    let net = Wire::default();
    let (mut a, mut b) = (link(&net, A, &key()), link(&net, B, &key()));
    let d = data(b"the payload of a message, in clear at both ends");
    a.send_to(&d, addr(B)).unwrap();
    let wire = net.borrow().log[0].2.clone();
    assert_eq!(wire.len(), d.len() + TRAILER_LEN);
    assert_eq!(
        wire[..d.len()],
        d[..],
        "header and payload travel as emitted"
    );
    assert_eq!(recv(&mut b), Some((d, addr(A))));
    // An ack (header only) too, the other way.
    b.send_to(&ack(), addr(A)).unwrap();
    assert_eq!(recv(&mut a), Some((ack().to_vec(), addr(B))));
    assert_eq!(a.stats.accepted + b.stats.accepted, 2);
}

#[test]
fn an_encrypted_datagram_opens_at_its_peer_with_the_payload_hidden_on_the_wire() {
    let net = Wire::default();
    let a = &mut link_with(&net, A, &key(), Protection::Encrypted);
    let b = &mut link(&net, B, &key());
    let d = data(b"the payload of a message, in clear at both ends");
    a.send_to(&d, addr(B)).unwrap();
    let wire = net.borrow().log[0].2.clone();
    assert_eq!(wire.len(), d.len() + TRAILER_LEN);
    assert_eq!(wire[FLAGS_AT], d[FLAGS_AT] | FLAG_ENCRYPTED, "flagged");
    let mut unflagged = wire[..HEADER_LEN].to_vec();
    unflagged[FLAGS_AT] = d[FLAGS_AT];
    assert_eq!(unflagged, d[..HEADER_LEN], "the header travels in clear");
    assert_ne!(
        wire[HEADER_LEN..d.len()],
        d[HEADER_LEN..],
        "the payload does not"
    );
    // B sends authenticated only, A encrypted: each opens the other's kind, and hands
    // the transport the header as emitted (flag cleared).
    assert_eq!(recv(b), Some((d, addr(A))));
    b.send_to(&ack(), addr(A)).unwrap();
    assert_eq!(recv(a), Some((ack().to_vec(), addr(B))));
    a.send_to(&ack(), addr(B)).unwrap();
    assert_eq!(recv(b), Some((ack().to_vec(), addr(A))));
}

#[test]
fn an_unsealed_benchmark_link_sends_bare_datagrams_and_still_refuses_strangers() {
    // The agent's `--data-protection` has no "off": only a benchmark unseals.
    use clap::ValueEnum;
    assert_eq!(
        Protection::value_variants(),
        &[Protection::Authenticated, Protection::Encrypted]
    );
    let net = Wire::default();
    let (mut a, mut b) = (link(&net, A, &key()), link(&net, B, &key()));
    a.set_bench_seal(BenchSeal::Off);
    b.set_bench_seal(BenchSeal::Off);
    let d = data(b"no trailer");
    a.send_to(&d, addr(B)).unwrap();
    assert_eq!(net.borrow().log[0].2, d, "sent as the transport made it");
    assert_eq!(recv(&mut b), Some((d.clone(), addr(A))));
    let mut s = link(&net, STRANGER, &key());
    s.set_bench_seal(BenchSeal::Off);
    s.peers.insert(
        addr(B),
        Peer::new(
            &key(),
            addr(STRANGER),
            addr(B),
            Protection::Authenticated,
            1,
        ),
    );
    s.send_to(&d, addr(B)).unwrap();
    assert_eq!(recv(&mut b), None);
    assert_eq!(b.stats.strangers, 1);
    assert!(
        b.send_to(&d, addr(STRANGER)).is_err(),
        "nothing to a stranger"
    );
}

/// Sends `d` from `a` to `b` with byte `at` of the wire copy flipped; whether `b`
/// accepts it.
fn altered_in_flight(
    net: &Wire,
    a: &mut AuthLink<Pipe>,
    b: &mut AuthLink<Pipe>,
    d: &[u8],
    at: usize,
) -> bool {
    a.send_to(d, addr(B)).unwrap();
    let mut q = net.borrow_mut();
    let wire = q.queues.get_mut(&addr(B)).unwrap().back_mut().unwrap();
    wire.0[at] ^= 0x40;
    drop(q);
    recv(b).is_some()
}

#[test]
fn the_headers_only_control_leaves_the_payload_outside_the_tag_and_nothing_else() {
    // What `bench dataplane-overhead --data-protection headers-only` runs: the same
    // trailer, nonce and replay window as the agents' sealing, the payload not under
    // the tag. An altered payload byte is what tells the two apart: refused when the
    // whole datagram is sealed, accepted by the control.
    let d = data(b"a payload the control leaves outside the tag");
    let payload_byte = HEADER_LEN + 3;
    for (seal, payload_ok) in [(BenchSeal::Whole, false), (BenchSeal::HeadersOnly, true)] {
        let net = Wire::default();
        let (mut a, mut b) = (link(&net, A, &key()), link(&net, B, &key()));
        a.set_bench_seal(seal);
        b.set_bench_seal(seal);
        a.send_to(&d, addr(B)).unwrap();
        let wire = net.borrow().log[0].2.clone();
        assert_eq!(
            wire.len(),
            d.len() + TRAILER_LEN,
            "{seal:?}: the same trailer"
        );
        assert_eq!(recv(&mut b), Some((d.clone(), addr(A))), "{seal:?}");
        assert_eq!(
            altered_in_flight(&net, &mut a, &mut b, &d, payload_byte),
            payload_ok,
            "{seal:?}: an altered payload byte"
        );
        assert!(
            !altered_in_flight(&net, &mut a, &mut b, &d, 2),
            "{seal:?}: an altered header byte is refused"
        );
        assert!(
            !altered_in_flight(&net, &mut a, &mut b, &d, d.len() + 1),
            "{seal:?}: an altered send time is refused"
        );
        // Replays are refused either way.
        let first = net.borrow().log[0].2.clone();
        inject(&net, B, first, A);
        assert_eq!(recv(&mut b), None, "{seal:?}: a replay");
    }
    // The control and the agents' sealing do not open each other's datagrams.
    let net = Wire::default();
    let (mut a, mut b) = (link(&net, A, &key()), link(&net, B, &key()));
    a.set_bench_seal(BenchSeal::HeadersOnly);
    a.send_to(&d, addr(B)).unwrap();
    assert_eq!(recv(&mut b), None);
    assert_eq!(b.stats.forged, 1);
}

#[test]
fn the_protection_flag_cannot_be_flipped() {
    for p in [Protection::Authenticated, Protection::Encrypted] {
        let net = Wire::default();
        let (mut a, mut b) = (link_with(&net, A, &key(), p), link(&net, B, &key()));
        a.send_to(&data(b"either way"), addr(B)).unwrap();
        let mut wire = net
            .borrow_mut()
            .queues
            .get_mut(&addr(B))
            .unwrap()
            .pop_front()
            .unwrap();
        wire.0[FLAGS_AT] ^= FLAG_ENCRYPTED;
        net.borrow_mut()
            .queues
            .get_mut(&addr(B))
            .unwrap()
            .push_back(wire);
        assert_eq!(recv(&mut b), None, "{p:?}");
        assert_eq!(b.stats.forged, 1);
    }
}

#[test]
fn strangers_are_neither_heard_nor_answered() {
    let net = Wire::default();
    let mut b = link(&net, B, &key());
    // A stranger holding the right key is still not a configured peer.
    let mut s = link(&net, STRANGER, &key());
    s.peers.insert(
        addr(B),
        Peer::new(
            &key(),
            addr(STRANGER),
            addr(B),
            Protection::Authenticated,
            1,
        ),
    );
    s.send_to(&data(b"hello"), addr(B)).unwrap();
    assert_eq!(recv(&mut b), None);
    assert_eq!(b.stats.strangers, 1);
    let e = b.send_to(&data(b"x"), addr(STRANGER)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    assert_eq!(b.stats.refused_sends, 1);
    assert!(
        net.borrow()
            .log
            .iter()
            .all(|(_, to, _)| *to != addr(STRANGER)),
        "nothing was put on the wire to the stranger"
    );
}

#[test]
fn a_wrong_key_an_altered_byte_or_a_short_datagram_is_refused() {
    for p in [Protection::Authenticated, Protection::Encrypted] {
        wrong_key_altered_or_short(p);
    }
}

fn wrong_key_altered_or_short(p: Protection) {
    let net = Wire::default();
    let mut a = link_with(&net, A, &DataKey::from_bytes(b"another-cluster-secret"), p);
    let mut b = link(&net, B, &key());
    a.send_to(&data(b"forged"), addr(B)).unwrap();
    assert_eq!(recv(&mut b), None);
    assert_eq!(b.stats.forged, 1);

    let mut a = link_with(&net, A, &key(), p);
    a.send_to(&data(b"genuine"), addr(B)).unwrap();
    let wire = net.borrow().log.last().unwrap().2.clone();
    // Every byte matters: header, payload, send time, nonce, tag. The altered copies
    // arrive before the genuine one (after it, the replay window would refuse most).
    let mut queue: VecDeque<(Vec<u8>, SocketAddr)> = VecDeque::new();
    for at in [
        3,
        20,
        HEADER_LEN + 2,
        wire.len() - 30,
        wire.len() - 20,
        wire.len() - 1,
    ] {
        let mut bad = wire.clone();
        bad[at] ^= 0x40;
        queue.push_back((bad, addr(A)));
    }
    queue.push_back((wire[..TRAILER_LEN - 1].to_vec(), addr(A)));
    queue.push_back((wire, addr(A)));
    net.borrow_mut().queues.insert(addr(B), queue);
    assert_eq!(recv(&mut b), Some((data(b"genuine"), addr(A))));
    assert_eq!((b.stats.forged, b.stats.truncated), (1 + 6, 1));
}

#[test]
fn a_replayed_datagram_is_refused_and_a_reordered_one_is_not() {
    let net = Wire::default();
    let (mut a, mut b) = (link(&net, A, &key()), link(&net, B, &key()));
    for i in 0..3u8 {
        a.send_to(&data(&[i]), addr(B)).unwrap();
    }
    // Deliver 2, 0, 1 (reordered), then 0 and 2 again (replayed).
    let log: Vec<Vec<u8>> = net.borrow().log.iter().map(|l| l.2.clone()).collect();
    {
        let mut n = net.borrow_mut();
        let q = n.queues.get_mut(&addr(B)).unwrap();
        q.clear();
        for i in [2, 0, 1, 0, 2] {
            q.push_back((log[i].clone(), addr(A)));
        }
    }
    let got: Vec<u8> = std::iter::from_fn(|| recv(&mut b))
        .map(|(d, _)| d[HEADER_LEN])
        .collect();
    assert_eq!(got, [2, 0, 1]);
    assert_eq!(b.stats.replayed, 2);
}

#[test]
fn a_restarted_sender_is_heard_and_its_old_datagrams_are_not() {
    let net = Wire::default();
    let mut b = link(&net, B, &key());
    let mut a = link(&net, A, &key());
    a.send_to(&data(b"old"), addr(B)).unwrap();
    let old = net.borrow().log[0].2.clone();
    assert!(recv(&mut b).is_some());
    std::thread::sleep(std::time::Duration::from_millis(2));
    let mut a = link(&net, A, &key());
    for _ in 0..(REPLAY_WINDOW + 10) {
        a.send_to(&data(b"new"), addr(B)).unwrap();
        assert!(recv(&mut b).is_some());
    }
    inject(&net, B, old, A);
    assert_eq!(recv(&mut b), None);
    assert_eq!(b.stats.replayed, 1);
}

#[test]
fn a_datagram_from_a_clock_too_far_away_is_refused() {
    let net = Wire::default();
    let (mut a, mut b) = (link(&net, A, &key()), link(&net, B, &key()));
    a.clock_offset = i64::from(DEFAULT_MAX_SKEW_SECS) + 5;
    a.send_to(&data(b"late"), addr(B)).unwrap();
    assert_eq!(recv(&mut b), None);
    assert_eq!(b.stats.stale_clock, 1);
    a.clock_offset = i64::from(DEFAULT_MAX_SKEW_SECS) - 5;
    a.send_to(&data(b"on time"), addr(B)).unwrap();
    assert!(recv(&mut b).is_some());
}

#[test]
fn keys_are_per_direction_so_a_datagram_cannot_be_reflected() {
    let net = Wire::default();
    let (mut a, mut b) = (link(&net, A, &key()), link(&net, B, &key()));
    a.send_to(&data(b"to b"), addr(B)).unwrap();
    let wire = net.borrow().log[0].2.clone();
    // Sent back to A as if B had sent it.
    inject(&net, A, wire, B);
    assert_eq!(recv(&mut a), None);
    assert_eq!(a.stats.forged, 1);
    assert!(recv(&mut b).is_some());
}

#[test]
fn a_flood_is_dropped_in_bounded_batches() {
    let net = Wire::default();
    let mut b = link(&net, B, &key());
    {
        let mut n = net.borrow_mut();
        let q = n.queues.entry(addr(B)).or_default();
        for i in 0..1000u32 {
            let mut junk = data(&i.to_be_bytes());
            junk.extend_from_slice(&[i as u8; TRAILER_LEN]);
            q.push_back((junk, addr(A)));
        }
    }
    let mut calls = 0;
    while !net.borrow().queues[&addr(B)].is_empty() {
        assert_eq!(recv(&mut b), None);
        calls += 1;
    }
    assert_eq!(calls, 1000_usize.div_ceil(MAX_DROPS_PER_CALL));
    assert_eq!(b.stats.forged + b.stats.replayed, 1000);
    assert_eq!(b.stats.accepted, 0);
}

#[test]
fn the_replay_window_slides() {
    let mut w = ReplayWindow::default();
    assert!(w.fresh(5));
    w.mark(5);
    assert!(!w.fresh(5));
    assert!(w.fresh(4) && w.fresh(6));
    w.mark(5 + REPLAY_WINDOW - 1);
    assert!(!w.fresh(5), "still inside the window, and seen");
    assert!(w.fresh(6), "inside the window, not seen");
    w.mark(5 + REPLAY_WINDOW + 1);
    assert!(!w.fresh(5) && !w.fresh(6), "fell out of the window");
    assert!(w.fresh(5 + REPLAY_WINDOW) && !w.fresh(6 + REPLAY_WINDOW));
    w.mark(u64::MAX / 2);
    assert!(!w.fresh(5 + REPLAY_WINDOW + 1));
}
