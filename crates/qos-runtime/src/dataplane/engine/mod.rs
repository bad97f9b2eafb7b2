//! The node agent's send and receive engines — what the MCP's SDMA/SEND and RECV/RDMA
//! state machines do in the thesis (§4.1, §4.2.2), over UDP.
//!
//! Send side: a posted message is segmented into packets; the packet scheduler (qos-core
//! rate control, IDTs from the manager) picks which flow's next packet goes out when; the
//! transport keeps it in flight until acknowledged, and a send completion is reported
//! when every packet of the message is acknowledged.
//!
//! Every data packet on the wire, first copy or resend, leaves through the scheduler:
//! a flow holds one scheduler packet ("token") for each packet it may
//! put on the wire now — each retransmission the transport has marked, and each new
//! packet inside the receiver's window — and a dispatch sends the oldest marked resend,
//! else the next new packet. A flow whose window is closed holds no token, so it is not
//! valid to rate control, and when the window opens rate control's `NDT = max(NDT, now)`
//! paces it from then on: no burst. (A token whose resend was acknowledged meanwhile
//! is spent on nothing: the flow loses that slot, it never gains one.)
//!
//! Connections (`transport::reliable`): when the peer turns out to
//! have lost its state (restarted), or has not answered for the give-up time, the flow
//! starts a new connection and every message that may have been lost gets a
//! [`Completion::Failed`] saying why; messages not yet begun go on the new connection. Receive side: packets are put back
//! in order per flow and reassembled into a receive buffer the destination port has
//! posted; with none posted the flow's window closes (GM's receive tokens).
//!
//! Which flow goes next is the configured scheduler's choice (`SchedulerKind`):
//! every flow is registered with what each kind needs — its IDT (rate control), its
//! VirtualClock tick (`Vtick`, from its reserved bandwidth; none for best-effort), and
//! GM's connection (the peer, numbered densely) and sub-port (source port and priority).
//! With a link rate configured the engine also paces its whole output to the wire (a
//! NIC cannot send faster than its link): the backlog then waits in the scheduler,
//! where its order is decided, instead of in a FIFO queue below it (the kernel's).
//!
//! Time is passed in; the engine reads no clock (the agent loop does, see `clock`).
//! The receive side is in [`receive`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;

use qos_core::sched::{Decision, FlowId, FlowParams, Scheduler};
use qos_core::units::{Bandwidth, Duration, Time};

use crate::dataplane::segment::packet_count;
use crate::transport::link::Link;
use crate::transport::reliable::{fresh_id, AckInfo, AckVerdict, RetxConfig, SendFlow};
use crate::transport::wire::{ConnIds, DataHeader, Repr, HEADER_LEN};

mod inbound;
mod message;
mod pacer;
mod receive;
use inbound::{InFlow, LocalPort};
pub use message::{Completion, FlowKey, MessageBytes, Payload, RecvTarget, SendFailure};
pub use pacer::{wire_bytes, LinkPacer, ETHERNET_HEADER, LINK_BURST};

/// Engine settings.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// Payload bytes per packet (see `segment::payload_for_mtu`).
    pub payload: usize,
    /// Receive window per flow, in packets.
    pub window: u32,
    pub retx: RetxConfig,
    /// Most packets sent or received per call before doing the other side's work.
    pub max_batch: usize,
    /// The link's rate on the wire (Ethernet frames: payload, our header, UDP, IP and
    /// Ethernet headers): data packets leave no faster, so a backlog queues in the
    /// scheduler, not below it. `None`: as fast as the socket takes them.
    pub link_rate: Option<Bandwidth>,
    /// Most flows this engine keeps receive state for, in all and from one peer: a
    /// packet that would start one more is dropped (its sender retries).
    pub max_flows: usize,
    pub max_flows_per_peer: usize,
    /// Most bytes of received packets held (out of order, or waiting for the port to
    /// post a buffer): a packet past it is dropped as if lost (its sender resends).
    pub max_held_bytes: usize,
    /// A flow's receive state heard from for this long is reclaimed; a sending flow
    /// idle for half of it starts its next message on a new connection, so the peer
    /// having reclaimed it costs nothing.
    pub idle_flow: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            payload: 8192,
            window: 64,
            retx: RetxConfig::default(),
            max_batch: 256,
            link_rate: None,
            max_flows: 8192,
            max_flows_per_peer: 4096,
            max_held_bytes: 256 << 20,
            idle_flow: Duration::from_secs(60),
        }
    }
}

/// A VirtualClock tick for a flow reserved `reserved`: the time one full packet of
/// `payload` bytes takes at that rate (the ideal spacing of its packets, Nagar §3.3).
/// `None` for best-effort (no reservation, or a zero one).
pub fn vtick_for(payload: usize, reserved: Option<Bandwidth>) -> Option<Duration> {
    reserved?.transfer_time(qos_core::units::Bytes::new(payload as u64))
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub retransmits: u64,
    pub packets_received: u64,
    pub malformed: u64,
    pub duplicates: u64,
    pub outside_window: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub unknown_port: u64,
    pub send_would_block: u64,
    /// Dispatches spent on nothing (the resend they were for was acknowledged first).
    pub idle_dispatches: u64,
    /// Connections reset because the peer lost its state.
    pub peer_restarts: u64,
    /// Connections given up because the peer did not answer.
    pub give_ups: u64,
    /// Packets of retired connections dropped.
    pub stale: u64,
    /// Resets sent for connections this receiver holds no state for.
    pub resets_sent: u64,
    /// Messages reported as failed.
    pub messages_failed: u64,
    /// Dispatch rounds that ended with rate control holding a packet back (an IDT
    /// that bound; zero when pacing never throttled).
    pub held_back: u64,
    /// Dispatch rounds that ended because the link was busy (with a link rate).
    pub link_paced: u64,
    /// Packets dropped because they would have started a flow past `max_flows` or
    /// `max_flows_per_peer`.
    pub flow_cap: u64,
    /// Packets dropped because holding them would pass `max_held_bytes`.
    pub over_budget: u64,
    /// Receive states reclaimed after `idle_flow` without a packet.
    pub reclaimed: u64,
}

#[derive(Clone)]
struct Frag {
    msg_seq: u32,
    msg_len: u32,
    offset: u32,
    len: u32,
    data: Payload,
}

struct OutMsg {
    msg_seq: u32,
    data: Payload,
    next_offset: u32,
    cut: u32,
    packets: u32,
}

struct OutFlow {
    key: FlowKey,
    send: SendFlow<Frag>,
    to_cut: VecDeque<OutMsg>,
    /// Packets of `to_cut` not yet cut.
    uncut: u64,
    /// Packets the scheduler holds for this flow: each one lets one packet go.
    tokens: u64,
    /// Messages not yet acknowledged whole: message sequence → (cookie, packets left).
    awaiting: BTreeMap<u32, (u64, u32)>,
    next_msg_seq: u32,
    /// Current IDT (kept across a port close so a reopened port keeps its rate).
    idt: Duration,
    /// VirtualClock tick (`None`: best-effort).
    vtick: Option<Duration>,
    /// GM's connection (the peer's number) and sub-port (source port and priority).
    connection: u32,
    subport: u32,
    /// When the flow last sent or heard an ack.
    last_active: Time,
}

impl OutFlow {
    /// What the scheduler is told about this flow.
    fn params(&self) -> FlowParams {
        FlowParams {
            idt: self.idt,
            vtick: self.vtick,
            connection: self.connection,
            subport: self.subport,
        }
    }
}

impl OutFlow {
    /// Packets the flow may put on the wire now: marked resends, and new packets inside
    /// the receiver's window.
    fn sendable(&self) -> u64 {
        self.send.resends_pending() as u64 + self.uncut.min(u64::from(self.send.room()))
    }
}

/// Why an engine call was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    #[error("port {0} is not open on this agent")]
    NoSuchPort(u16),
    #[error("port {0} is already open")]
    PortInUse(u16),
    #[error("message of {0} bytes exceeds the 4 GiB limit of the wire format")]
    TooLong(usize),
}

/// The data-plane engine of one agent.
pub struct Engine<L, S> {
    cfg: EngineConfig,
    link: L,
    sched: S,
    out: Vec<OutFlow>,
    out_index: HashMap<FlowKey, usize>,
    /// GM connection number of every peer a flow goes to, in order of first use.
    connections: HashMap<SocketAddr, u32>,
    /// Paces data packets to the link rate, if one is configured.
    pacer: Option<LinkPacer>,
    inflows: HashMap<FlowKey, InFlow>,
    /// Receive states per peer (for `max_flows_per_peer`).
    inflows_per_peer: HashMap<SocketAddr, usize>,
    /// Bytes of received packets held by the receive states.
    held_bytes: usize,
    next_reclaim: Time,
    ports: HashMap<u16, LocalPort>,
    completions: VecDeque<Completion>,
    pool: Vec<Vec<u8>>,
    ack_dirty: Vec<FlowKey>,
    next_timer_scan: Time,
    release_at: Option<Time>,
    pub stats: EngineStats,
}

impl<L: Link, S: Scheduler> Engine<L, S> {
    pub fn new(cfg: EngineConfig, link: L, sched: S) -> Self {
        Engine {
            cfg,
            link,
            sched,
            out: Vec::new(),
            out_index: HashMap::new(),
            connections: HashMap::new(),
            pacer: cfg.link_rate.map(|r| LinkPacer::new(r, cfg.payload)),
            inflows: HashMap::new(),
            inflows_per_peer: HashMap::new(),
            held_bytes: 0,
            next_reclaim: Time::ZERO,
            ports: HashMap::new(),
            completions: VecDeque::new(),
            pool: Vec::new(),
            ack_dirty: Vec::new(),
            next_timer_scan: Time::ZERO,
            release_at: None,
            stats: EngineStats::default(),
        }
    }

    pub fn link(&self) -> &L {
        &self.link
    }
    pub fn link_mut(&mut self) -> &mut L {
        &mut self.link
    }
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    /// The packet scheduler.
    pub fn scheduler(&self) -> &S {
        &self.sched
    }

    /// Replaces the packet scheduler at `now` and returns the old one: rate control on
    /// or off in the same agent (the overhead comparison, thesis §5.2). Every flow is
    /// added to `sched` with its current parameters (IDT, Vtick, GM connection and
    /// sub-port), and the packets the old one held for it
    /// follow it (as one message; meant for switching between blocks of traffic, when
    /// queues are short). Transport state, ports and posted buffers are untouched.
    pub fn replace_scheduler(&mut self, now: Time, sched: S) -> S {
        let old = std::mem::replace(&mut self.sched, sched);
        for (i, f) in self.out.iter().enumerate() {
            let id = FlowId(i as u32);
            self.sched.add_flow(id, f.params());
            let queued = old.backlog(id);
            if queued > 0 {
                self.sched
                    .enqueue(now, id, u32::try_from(queued).unwrap_or(u32::MAX));
            }
        }
        // Whatever the old scheduler was holding back is the new one's to release.
        self.release_at = Some(now);
        old
    }

    /// Opens a port: it may now post receive buffers and send.
    pub fn open_port(&mut self, port: u16) -> Result<(), EngineError> {
        if self.ports.contains_key(&port) {
            return Err(EngineError::PortInUse(port));
        }
        self.ports.insert(port, LocalPort::default());
        Ok(())
    }

    /// Closes a port; its posted buffers are dropped and its unsent messages forgotten.
    /// A flow left in the middle of a message starts a new connection, so the peer drops
    /// the part it holds; a flow whose messages were all acknowledged keeps its
    /// connection (and its sequence numbers, for a reopened port).
    pub fn close_port(&mut self, port: u16) {
        self.ports.remove(&port);
        let flows: Vec<usize> = self
            .out_index
            .iter()
            .filter(|(k, _)| k.tag.src_port == port)
            .map(|(_, &i)| i)
            .collect();
        for i in flows {
            let f = &mut self.out[i];
            let unfinished = !f.awaiting.is_empty();
            f.to_cut.clear();
            f.uncut = 0;
            f.awaiting.clear();
            if unfinished {
                f.send = SendFlow::new(self.cfg.retx, self.cfg.window, fresh_id());
            }
        }
    }

    /// Posts a receive buffer of `target`'s size for `port`.
    pub fn post_recv(
        &mut self,
        port: u16,
        cookie: u64,
        target: Box<dyn RecvTarget>,
    ) -> Result<(), EngineError> {
        let p = self
            .ports
            .get_mut(&port)
            .ok_or(EngineError::NoSuchPort(port))?;
        let cap = target.len();
        p.posted.push_back((cookie, cap, target));
        Ok(())
    }

    fn flow_index(&mut self, key: FlowKey) -> usize {
        if let Some(&i) = self.out_index.get(&key) {
            return i;
        }
        let i = self.out.len();
        let next = self.connections.len() as u32;
        let connection = *self.connections.entry(key.peer).or_insert(next);
        self.out.push(OutFlow {
            key,
            send: SendFlow::new(self.cfg.retx, self.cfg.window, fresh_id()),
            to_cut: VecDeque::new(),
            uncut: 0,
            tokens: 0,
            awaiting: BTreeMap::new(),
            next_msg_seq: 0,
            idt: Duration::ZERO,
            vtick: None,
            connection,
            subport: (u32::from(key.tag.src_port) << 8) | u32::from(key.tag.priority),
            last_active: Time::ZERO,
        });
        self.out_index.insert(key, i);
        self.sched.add_flow(FlowId(i as u32), self.out[i].params());
        i
    }

    /// Sets a flow's inter-packet dispatch time (from the manager); zero is unregulated.
    pub fn set_idt(&mut self, key: FlowKey, idt: Duration) {
        let i = self.flow_index(key);
        self.out[i].idt = idt;
        self.sched.set_idt(FlowId(i as u32), idt);
    }

    /// Sets a flow's VirtualClock tick (from its reserved bandwidth, [`vtick_for`];
    /// `None`: best-effort). Packets queued keep their stamps; later ones use the new
    /// tick. Schedulers other than VirtualClock ignore it.
    pub fn set_vtick(&mut self, key: FlowKey, vtick: Option<Duration>) {
        let i = self.flow_index(key);
        if self.out[i].vtick != vtick {
            self.out[i].vtick = vtick;
            self.sched.add_flow(FlowId(i as u32), self.out[i].params());
        }
    }

    /// Posts a message on a flow at `now`.
    pub fn send(
        &mut self,
        now: Time,
        key: FlowKey,
        data: Payload,
        cookie: u64,
    ) -> Result<(), EngineError> {
        if !self.ports.contains_key(&key.tag.src_port) {
            return Err(EngineError::NoSuchPort(key.tag.src_port));
        }
        let len = data.len();
        u32::try_from(len).map_err(|_| EngineError::TooLong(len))?;
        let packets = packet_count(len, self.cfg.payload);
        let i = self.flow_index(key);
        let f = &mut self.out[i];
        let quiet = f.send.in_flight() == 0 && f.awaiting.is_empty() && f.uncut == 0;
        if quiet && now.saturating_since(f.last_active) > self.cfg.idle_flow / 2 {
            // The peer may have reclaimed this flow's receive state: a new connection
            // starts it again there instead of drawing a reset.
            f.send = SendFlow::new(self.cfg.retx, self.cfg.window, fresh_id());
        }
        f.last_active = now;
        let msg_seq = f.next_msg_seq;
        f.next_msg_seq = f.next_msg_seq.wrapping_add(1);
        f.awaiting.insert(msg_seq, (cookie, packets));
        f.to_cut.push_back(OutMsg {
            msg_seq,
            data,
            next_offset: 0,
            cut: 0,
            packets,
        });
        f.uncut += u64::from(packets);
        self.refill(i, now);
        Ok(())
    }

    /// Gives the scheduler a packet for each packet flow `i` may now put on the wire and
    /// it does not hold one for yet.
    fn refill(&mut self, i: usize, now: Time) {
        let f = &mut self.out[i];
        let want = f.sendable();
        if want > f.tokens {
            let more = u32::try_from(want - f.tokens).unwrap_or(u32::MAX);
            f.tokens += u64::from(more);
            self.sched.enqueue(now, FlowId(i as u32), more);
        }
    }

    /// Receive state held: flows with receive state, and bytes of packets held by them.
    pub fn receive_state(&self) -> (usize, usize) {
        (self.inflows.len(), self.held_bytes)
    }

    /// Takes the next completion, if any.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// Queued (not yet dispatched) packets of a flow.
    pub fn backlog(&self, key: &FlowKey) -> u64 {
        self.out_index
            .get(key)
            .map_or(0, |&i| self.sched.backlog(FlowId(i as u32)))
    }

    /// Does one round of work at `now`: receive, timers, dispatch, acks. Returns the
    /// earliest time the engine wants to run again without new input (`None`: only on input).
    pub fn poll(&mut self, now: Time) -> io::Result<Option<Time>> {
        if now >= self.next_reclaim {
            self.next_reclaim = now + Duration::from_secs(1);
            self.reclaim_idle(now);
        }
        let more_rx = self.receive(now)?;
        let timers = self.timers(now);
        self.dispatch(now);
        self.flush_acks();
        let mut next = if more_rx { Some(now) } else { self.release_at };
        if let Some(t) = timers {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        Ok(next)
    }

    fn dispatch(&mut self, now: Time) {
        self.release_at = None;
        for _ in 0..self.cfg.max_batch {
            if let Some(at) = self.pacer.as_ref().and_then(|p| p.busy_until(now)) {
                // The link is busy beyond the burst allowed: come back when it is not
                // (the backlog waits in the scheduler, in its order).
                self.stats.link_paced += 1;
                self.release_at = Some(at);
                return;
            }
            match self.sched.next(now) {
                Decision::Dispatch(FlowId(i)) => {
                    let bytes = self.transmit_one(i as usize, now);
                    if let (Some(p), Some(b)) = (self.pacer.as_mut(), bytes) {
                        p.sent(now, b);
                    }
                }
                Decision::WaitUntil(t) => {
                    self.stats.held_back += 1;
                    self.release_at = Some(t);
                    return;
                }
                Decision::Idle => return,
            }
        }
        // Batch full: come back at once.
        self.release_at = Some(now);
    }

    /// The scheduler granted flow `i` one packet: the oldest resend, else a new packet.
    /// Returns the payload bytes put on the wire, if any.
    fn transmit_one(&mut self, i: usize, now: Time) -> Option<usize> {
        let f = &mut self.out[i];
        f.tokens = f.tokens.saturating_sub(1);
        if let Some((seq, frag)) = f.send.next_resend(now) {
            self.stats.retransmits += 1;
            send_data(
                &mut self.link,
                &mut self.stats,
                f.key,
                f.send.ids(),
                seq,
                &frag,
            );
            return Some(frag.len as usize);
        }
        if f.send.can_send() {
            if let Some(frag) = cut_next(f, self.cfg.payload) {
                f.uncut -= 1;
                let seq = f.send.on_send(now, frag.clone());
                send_data(
                    &mut self.link,
                    &mut self.stats,
                    f.key,
                    f.send.ids(),
                    seq,
                    &frag,
                );
                return Some(frag.len as usize);
            }
        }
        self.stats.idle_dispatches += 1;
        None
    }

    fn timers(&mut self, now: Time) -> Option<Time> {
        let scan_every = Duration::from_ms(1);
        if now < self.next_timer_scan {
            return Some(self.next_timer_scan);
        }
        self.next_timer_scan = now + scan_every;
        let mut any = false;
        for i in 0..self.out.len() {
            let f = &mut self.out[i];
            if f.send.in_flight() == 0 && f.uncut == 0 {
                continue;
            }
            any = true;
            let probe = match f.send.due_retransmits(now) {
                Ok(_) => f.send.probe_due(now, f.uncut > 0),
                Err(e) => Err(e),
            };
            match probe {
                Ok(true) => {
                    let mut head = [0u8; HEADER_LEN];
                    let ids = f.send.ids();
                    let _ = Repr::Probe {
                        tag: f.key.tag,
                        ids,
                    }
                    .emit(&mut head);
                    let _ = self.link.send_to(&head, f.key.peer);
                }
                Ok(false) => {}
                Err(_) => {
                    self.stats.give_ups += 1;
                    self.reset_flow(i, now, SendFailure::PeerUnreachable);
                }
            }
            self.refill(i, now);
        }
        any.then_some(self.next_timer_scan)
    }

    fn on_ack(&mut self, now: Time, key: FlowKey, ids: ConnIds, ack: AckInfo) {
        let Some(&i) = self.out_index.get(&key) else {
            return;
        };
        let f = &mut self.out[i];
        let (awaiting, completions, stats) =
            (&mut f.awaiting, &mut self.completions, &mut self.stats);
        let port = key.tag.src_port;
        f.last_active = now;
        let verdict = f.send.on_ack(now, ids, ack, |frag| {
            if let Some(e) = awaiting.get_mut(&frag.msg_seq) {
                e.1 -= 1;
                if e.1 == 0 {
                    let cookie = e.0;
                    awaiting.remove(&frag.msg_seq);
                    stats.messages_sent += 1;
                    completions.push_back(Completion::Sent { port, cookie });
                }
            }
        });
        match verdict {
            AckVerdict::Applied => self.refill(i, now),
            AckVerdict::Stale => {}
            AckVerdict::PeerRestarted => self.on_peer_restarted(i, now),
        }
    }

    /// A reset came for flow `key`'s connection `ids`: the receiver holds no state for it.
    fn on_reset(&mut self, now: Time, key: FlowKey, ids: ConnIds) {
        let Some(&i) = self.out_index.get(&key) else {
            return;
        };
        if self.out[i].send.ids() == ids {
            self.on_peer_restarted(i, now);
        }
    }

    fn on_peer_restarted(&mut self, i: usize, now: Time) {
        self.stats.peer_restarts += 1;
        self.reset_flow(i, now, SendFailure::PeerRestarted);
    }

    /// Starts flow `i` on a new connection. When the peer restarted, every message with
    /// a packet on the wire and not acknowledged whole fails (the peer may or may not
    /// have delivered it) and messages not yet begun go on; when it is unreachable,
    /// every message fails.
    fn reset_flow(&mut self, i: usize, now: Time, why: SendFailure) {
        let f = &mut self.out[i];
        f.send = SendFlow::new(self.cfg.retx, self.cfg.window, fresh_id());
        let keep: Vec<u32> = match why {
            SendFailure::PeerRestarted => f
                .to_cut
                .iter()
                .filter(|m| m.cut == 0)
                .map(|m| m.msg_seq)
                .collect(),
            SendFailure::PeerUnreachable => Vec::new(),
        };
        f.to_cut.retain(|m| keep.contains(&m.msg_seq));
        f.uncut = f.to_cut.iter().map(|m| u64::from(m.packets)).sum();
        let (port, peer) = (f.key.tag.src_port, f.key.peer);
        let (completions, stats) = (&mut self.completions, &mut self.stats);
        // Messages kept are whole (none of their packets cut): their counts stand.
        f.awaiting.retain(|msg_seq, &mut (cookie, _)| {
            if keep.contains(msg_seq) {
                return true;
            }
            stats.messages_failed += 1;
            completions.push_back(Completion::Failed {
                port,
                cookie,
                peer,
                why,
            });
            false
        });
        tracing::info!(%peer, port, ?why, "flow starts a new connection");
        self.refill(i, now);
    }
}

fn cut_next(f: &mut OutFlow, payload: usize) -> Option<Frag> {
    let m = f.to_cut.front_mut()?;
    let total = m.data.len() as u32;
    let len = (total - m.next_offset).min(payload as u32);
    let frag = Frag {
        msg_seq: m.msg_seq,
        msg_len: total,
        offset: m.next_offset,
        len,
        data: m.data.clone(),
    };
    m.next_offset += len;
    m.cut += 1;
    if m.cut >= m.packets {
        f.to_cut.pop_front();
    }
    Some(frag)
}

fn send_data<L: Link>(
    link: &mut L,
    stats: &mut EngineStats,
    key: FlowKey,
    ids: ConnIds,
    seq: u32,
    frag: &Frag,
) {
    let body = frag.data.body(frag.offset as usize, frag.len as usize);
    let header = DataHeader {
        tag: key.tag,
        ids,
        seq,
        msg_seq: frag.msg_seq,
        msg_len: frag.msg_len,
        offset: frag.offset,
        len: frag.len,
    };
    let mut head = [0u8; HEADER_LEN];
    let _ = header.emit(&mut head);
    match link.send2(&head, body, key.peer) {
        Ok(()) => {
            stats.packets_sent += 1;
            stats.bytes_sent += u64::from(frag.len);
        }
        // Lost locally: the retransmission timer recovers it like a network loss.
        Err(_) => stats.send_would_block += 1,
    }
}
