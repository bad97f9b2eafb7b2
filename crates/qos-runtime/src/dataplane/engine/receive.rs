//! The receive engine — what the MCP's RECV/RDMA state machines do (thesis §4.1):
//! datagrams are parsed once, data packets are put back in order per flow by the
//! transport and reassembled into a receive buffer the destination port has posted
//! (GM's receive tokens; with none posted the flow's window closes), acknowledgements
//! are sent once per round, and acks for our own flows go to the send engine.

use std::io;

use qos_core::sched::Scheduler;
use qos_core::units::Time;

use super::inbound::{Assembly, InFlow, RxPacket};
use super::message::{Completion, FlowKey};
use super::Engine;
use crate::transport::link::Link;
use crate::transport::reliable::{fresh_id, Accepted, ConnVerdict, RecvConn, RecvFlow};
use crate::transport::wire::{ConnIds, Repr, HEADER_LEN, MAX_DATAGRAM};

/// Receive buffers kept for reuse, at most (each `MAX_DATAGRAM` bytes).
const POOL_MAX: usize = 64;

/// A datagram this short is copied into a buffer of its own size before it is held, so
/// a held packet never pins a whole `MAX_DATAGRAM` buffer for a few bytes.
const RIGHT_SIZE_BELOW: usize = MAX_DATAGRAM / 4;

/// Keeps a receive buffer for reuse (if it is a whole one and the pool has room).
fn recycle(pool: &mut Vec<Vec<u8>>, buf: Vec<u8>) {
    if buf.len() == MAX_DATAGRAM && pool.len() < POOL_MAX {
        pool.push(buf);
    }
}

/// A held packet's buffer leaves its flow: no longer counted, kept for reuse.
fn release(pool: &mut Vec<Vec<u8>>, held: &mut usize, buf: Vec<u8>) {
    *held -= buf.capacity();
    recycle(pool, buf);
}

/// What to do with a packet of a flow, given its connection.
enum Admit {
    Accept,
    Drop,
    Reset,
}

impl<L: Link, S: Scheduler> Engine<L, S> {
    /// Returns true when the batch filled up (more may be waiting).
    pub(super) fn receive(&mut self, now: Time) -> io::Result<bool> {
        for _ in 0..self.cfg.max_batch {
            let mut buf = self.pool.pop().unwrap_or_else(|| vec![0u8; MAX_DATAGRAM]);
            let Some((n, from)) = self.link.recv_from(&mut buf)? else {
                self.pool.push(buf);
                return Ok(false);
            };
            self.stats.packets_received += 1;
            let repr = match Repr::parse_bytes(&buf[..n]) {
                Ok(r) => r,
                Err(_) => {
                    self.stats.malformed += 1;
                    recycle(&mut self.pool, buf);
                    continue;
                }
            };
            match repr {
                Repr::Data {
                    tag,
                    ids,
                    seq,
                    msg_seq,
                    msg_len,
                    offset,
                    payload,
                } => {
                    let len = payload.len() as u32;
                    let key = FlowKey { peer: from, tag };
                    match self.admit(now, key, ids) {
                        Admit::Accept => {}
                        Admit::Drop => {
                            recycle(&mut self.pool, buf);
                            continue;
                        }
                        Admit::Reset => {
                            self.send_reset(key, ids);
                            recycle(&mut self.pool, buf);
                            continue;
                        }
                    }
                    let buf = if n < RIGHT_SIZE_BELOW {
                        let small = buf[..n].to_vec();
                        recycle(&mut self.pool, buf);
                        small
                    } else {
                        buf
                    };
                    let cost = buf.capacity();
                    if self.held_bytes + cost > self.cfg.max_held_bytes {
                        // As if lost: the sender resends once memory is free again.
                        self.stats.over_budget += 1;
                        recycle(&mut self.pool, buf);
                        continue;
                    }
                    let flow = self.inflows.get_mut(&key).expect("admitted");
                    match flow.recv.on_data(
                        seq,
                        RxPacket {
                            buf,
                            msg_seq,
                            msg_len,
                            offset,
                            len,
                        },
                    ) {
                        Accepted::Stored => self.held_bytes += cost,
                        Accepted::Duplicate => self.stats.duplicates += 1,
                        Accepted::OutsideWindow => self.stats.outside_window += 1,
                    }
                    if !self.ack_dirty.contains(&key) {
                        self.ack_dirty.push(key);
                    }
                    self.reassemble(key);
                }
                Repr::Ack { tag, ids, ack } => {
                    recycle(&mut self.pool, buf);
                    self.on_ack(now, FlowKey { peer: from, tag }, ids, ack);
                }
                Repr::Probe { tag, ids } => {
                    recycle(&mut self.pool, buf);
                    let key = FlowKey { peer: from, tag };
                    match self.admit(now, key, ids) {
                        Admit::Accept => {
                            let f = self.inflows.get_mut(&key).expect("admitted");
                            f.recv.on_probe();
                            if !self.ack_dirty.contains(&key) {
                                self.ack_dirty.push(key);
                            }
                        }
                        Admit::Drop => {}
                        Admit::Reset => self.send_reset(key, ids),
                    }
                }
                Repr::Reset { tag, ids } => {
                    recycle(&mut self.pool, buf);
                    self.on_reset(now, FlowKey { peer: from, tag }, ids);
                }
            }
        }
        Ok(true)
    }

    /// Decides what to do with a packet of flow `key` naming connection `ids`, creating
    /// or restarting the flow's receive state when the sender starts a connection.
    fn admit(&mut self, now: Time, key: FlowKey, ids: ConnIds) -> Admit {
        let window = self.cfg.window;
        let Some(flow) = self.inflows.get_mut(&key) else {
            if !RecvConn::may_start(ids) {
                return Admit::Reset;
            }
            let of_peer = self.inflows_per_peer.entry(key.peer).or_default();
            if self.inflows.len() >= self.cfg.max_flows || *of_peer >= self.cfg.max_flows_per_peer {
                self.stats.flow_cap += 1;
                return Admit::Drop;
            }
            *of_peer += 1;
            self.inflows.insert(
                key,
                InFlow {
                    recv: RecvFlow::new(window),
                    assembling: None,
                    conn: RecvConn::new(ids.conn, fresh_id()),
                    last_heard: now,
                },
            );
            return Admit::Accept;
        };
        flow.last_heard = now;
        match flow.conn.classify(ids) {
            ConnVerdict::Current => Admit::Accept,
            ConnVerdict::Stale => {
                self.stats.stale += 1;
                Admit::Drop
            }
            ConnVerdict::Refuse => Admit::Reset,
            ConnVerdict::New => {
                // The sender started afresh (restarted, or gave up on us): what the old
                // connection left here is dropped, a buffer it was filling is posted again.
                let (pool, held) = (&mut self.pool, &mut self.held_bytes);
                flow.recv.restart(|p| release(pool, held, p.buf));
                if let Some(a) = flow.assembling.take() {
                    if let (Some(target), Some(port)) =
                        (a.target, self.ports.get_mut(&key.tag.dst_port))
                    {
                        let cap = target.len();
                        port.posted.push_front((a.cookie, cap, target));
                    }
                }
                flow.conn.switch(ids.conn, fresh_id());
                Admit::Accept
            }
        }
    }

    /// Tells the sender of flow `key` that this receiver holds no state for `ids`.
    fn send_reset(&mut self, key: FlowKey, ids: ConnIds) {
        let mut head = [0u8; HEADER_LEN];
        let _ = Repr::Reset { tag: key.tag, ids }.emit(&mut head);
        if self.link.send_to(&head, key.peer).is_ok() {
            self.stats.resets_sent += 1;
        }
    }

    fn reassemble(&mut self, key: FlowKey) {
        let Some(flow) = self.inflows.get_mut(&key) else {
            return;
        };
        let port_no = key.tag.dst_port;
        while let Some(front) = flow.recv.front() {
            if flow.assembling.is_none() {
                let (msg_seq, msg_len, offset) = (front.msg_seq, front.msg_len, front.offset);
                let Some(port) = self.ports.get_mut(&port_no) else {
                    // Nobody listens: discard so the sender is not stalled forever.
                    self.stats.unknown_port += 1;
                    if let Some(p) = flow.recv.pop() {
                        release(&mut self.pool, &mut self.held_bytes, p.buf);
                    }
                    continue;
                };
                if offset != 0 {
                    // The start of this message was discarded (port closed meanwhile).
                    if let Some(p) = flow.recv.pop() {
                        release(&mut self.pool, &mut self.held_bytes, p.buf);
                    }
                    continue;
                }
                let Some(pos) = port
                    .posted
                    .iter()
                    .position(|(_, cap, _)| *cap >= msg_len as usize)
                else {
                    break; // no buffer posted: hold, the window closes
                };
                let (cookie, _, target) = port.posted.remove(pos).expect("position found");
                flow.assembling = Some(Assembly {
                    msg_seq,
                    msg_len,
                    cookie,
                    target: Some(target),
                });
            }
            let p = flow.recv.pop().expect("front exists");
            let a = flow.assembling.as_mut().expect("set above");
            if p.msg_seq != a.msg_seq || p.msg_len != a.msg_len {
                self.stats.malformed += 1;
                release(&mut self.pool, &mut self.held_bytes, p.buf);
                continue;
            }
            if let Some(t) = a.target.as_mut() {
                t.write(
                    p.offset as usize,
                    &p.buf[HEADER_LEN..HEADER_LEN + p.len as usize],
                );
            }
            let done = p.offset + p.len == a.msg_len;
            release(&mut self.pool, &mut self.held_bytes, p.buf);
            if done {
                // Its sender completes the message on hearing the port took it.
                flow.recv.ack_soon();
                let a = flow.assembling.take().expect("assembling");
                self.stats.messages_received += 1;
                self.completions.push_back(Completion::Received {
                    port: port_no,
                    cookie: a.cookie,
                    target: a.target.expect("target"),
                    len: a.msg_len,
                    from: key.peer,
                    src_port: key.tag.src_port,
                    priority: key.tag.priority,
                });
            }
        }
    }

    /// Drops the receive state of every flow not heard from for `idle_flow`: its held
    /// packets are freed and a buffer it was filling is posted again.
    pub(super) fn reclaim_idle(&mut self, now: Time) {
        let idle = self.cfg.idle_flow;
        let stale: Vec<FlowKey> = self
            .inflows
            .iter()
            .filter(|(_, f)| now.saturating_since(f.last_heard) > idle)
            .map(|(k, _)| *k)
            .collect();
        for key in stale {
            let Some(mut flow) = self.inflows.remove(&key) else {
                continue;
            };
            let (pool, held) = (&mut self.pool, &mut self.held_bytes);
            flow.recv.restart(|p| release(pool, held, p.buf));
            if let Some(a) = flow.assembling.take() {
                if let (Some(target), Some(port)) =
                    (a.target, self.ports.get_mut(&key.tag.dst_port))
                {
                    let cap = target.len();
                    port.posted.push_front((a.cookie, cap, target));
                }
            }
            if let Some(n) = self.inflows_per_peer.get_mut(&key.peer) {
                *n -= 1;
                if *n == 0 {
                    self.inflows_per_peer.remove(&key.peer);
                }
            }
            self.ack_dirty.retain(|k| *k != key);
            self.stats.reclaimed += 1;
        }
    }

    /// Re-tries reassembly on every flow to `port` (after it posted buffers).
    pub fn kick_port(&mut self, port: u16) {
        let keys: Vec<FlowKey> = self
            .inflows
            .keys()
            .filter(|k| k.tag.dst_port == port)
            .copied()
            .collect();
        for k in keys {
            self.reassemble(k);
            if !self.ack_dirty.contains(&k) {
                self.ack_dirty.push(k);
            }
        }
    }

    pub(super) fn flush_acks(&mut self) {
        for key in std::mem::take(&mut self.ack_dirty) {
            let Some(f) = self.inflows.get_mut(&key) else {
                continue;
            };
            if let Some(ack) = f.recv.take_ack() {
                let mut head = [0u8; HEADER_LEN];
                let _ = Repr::Ack {
                    tag: key.tag,
                    ids: f.conn.ids(),
                    ack,
                }
                .emit(&mut head);
                if self.link.send_to(&head, key.peer).is_err() {
                    self.stats.send_would_block += 1;
                }
            }
        }
    }
}
