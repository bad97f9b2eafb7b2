//! The receive engine — what the MCP's RECV/RDMA state machines do (thesis §4.1):
//! datagrams are parsed once, data packets are put back in order per flow by the
//! transport and reassembled into a receive buffer the destination port has posted
//! (GM's receive tokens; with none posted the flow's window closes), acknowledgements
//! are sent once per round, and acks for our own flows go to the send engine.

use std::collections::VecDeque;
use std::io;

use qos_core::sched::Scheduler;
use qos_core::units::Time;

use super::{Completion, Engine, FlowKey, RecvTarget};
use crate::transport::link::Link;
use crate::transport::reliable::{Accepted, RecvFlow};
use crate::transport::wire::{Repr, HEADER_LEN, MAX_DATAGRAM};

pub(super) struct RxPacket {
    buf: Vec<u8>,
    msg_seq: u32,
    msg_len: u32,
    offset: u32,
    len: u32,
}

pub(super) struct Assembly {
    msg_seq: u32,
    msg_len: u32,
    cookie: u64,
    target: Option<Box<dyn RecvTarget>>,
}

pub(super) struct InFlow {
    recv: RecvFlow<RxPacket>,
    assembling: Option<Assembly>,
}

#[derive(Default)]
pub(super) struct LocalPort {
    pub(super) posted: VecDeque<(u64, usize, Box<dyn RecvTarget>)>,
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
                    self.pool.push(buf);
                    continue;
                }
            };
            match repr {
                Repr::Data {
                    tag,
                    seq,
                    msg_seq,
                    msg_len,
                    offset,
                    payload,
                } => {
                    let len = payload.len() as u32;
                    let key = FlowKey { peer: from, tag };
                    let window = self.cfg.window;
                    let flow = self.inflows.entry(key).or_insert_with(|| InFlow {
                        recv: RecvFlow::new(window),
                        assembling: None,
                    });
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
                        Accepted::Stored => {}
                        Accepted::Duplicate => self.stats.duplicates += 1,
                        Accepted::OutsideWindow => self.stats.outside_window += 1,
                    }
                    if !self.ack_dirty.contains(&key) {
                        self.ack_dirty.push(key);
                    }
                    self.reassemble(key);
                }
                Repr::Ack {
                    tag,
                    cum_ack,
                    window,
                    sack,
                } => {
                    self.on_ack(now, FlowKey { peer: from, tag }, cum_ack, window, sack);
                    self.pool.push(buf);
                }
                Repr::Probe { tag } => {
                    let key = FlowKey { peer: from, tag };
                    if let Some(f) = self.inflows.get_mut(&key) {
                        f.recv.on_probe();
                        if !self.ack_dirty.contains(&key) {
                            self.ack_dirty.push(key);
                        }
                    } else {
                        // Never heard of it: our window is the initial one.
                        let a = Repr::Ack {
                            tag,
                            cum_ack: 0,
                            window: self.cfg.window,
                            sack: 0,
                        };
                        let mut head = [0u8; HEADER_LEN];
                        let _ = a.emit(&mut head);
                        let _ = self.link.send_to(&head, from);
                    }
                    self.pool.push(buf);
                }
            }
        }
        Ok(true)
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
                        self.pool.push(p.buf);
                    }
                    continue;
                };
                if offset != 0 {
                    // The start of this message was discarded (port closed meanwhile).
                    if let Some(p) = flow.recv.pop() {
                        self.pool.push(p.buf);
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
                self.pool.push(p.buf);
                continue;
            }
            if let Some(t) = a.target.as_mut() {
                let dst = &mut t.buf_mut()[p.offset as usize..(p.offset + p.len) as usize];
                dst.copy_from_slice(&p.buf[HEADER_LEN..HEADER_LEN + p.len as usize]);
            }
            let done = p.offset + p.len == a.msg_len;
            self.pool.push(p.buf);
            if done {
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
            if let Some((cum_ack, window, sack)) = f.recv.take_ack() {
                let mut head = [0u8; HEADER_LEN];
                let _ = Repr::Ack {
                    tag: key.tag,
                    cum_ack,
                    window,
                    sack,
                }
                .emit(&mut head);
                if self.link.send_to(&head, key.peer).is_err() {
                    self.stats.send_would_block += 1;
                }
            }
        }
    }
}
