//! The GM Myrinet Control Program on a LANai 4.3 NIC (thesis §4.1, Fig 4.1–4.2,
//! §4.2.2): the machinery unmodified GM and the thesis's rate-control MCP share,
//! generic over what differs between them ([`SdmaPolicy`]).
//!
//! - One **processor** runs the handlers of the four state machines one at a time,
//!   receive side first (RECV/RDMA, the network must be drained), then SEND, then SDMA;
//!   each handler costs the time given in the calibration.
//! - One **host DMA engine** moves packet data host → NIC (SDMA) and NIC → host (RDMA)
//!   over PCI, first come first served.
//! - **SRAM staging buffers**: a packet holds a send buffer from SDMA until its tail has
//!   left, and a receive buffer from the network until RDMA has copied it out (the
//!   fabric counts the free ones; this NIC reports each one it frees).
//! - **SDMA** builds a send token per posted descriptor and, whenever a send buffer is
//!   free, asks the packet scheduler which flow sends next; rate control compares NDTs
//!   with the RTC (time truncated to 0.5 µs ticks).
//! - **Reliable, ordered delivery**: per-flow sequence numbers, cumulative delayed
//!   acknowledgements (one per peer, `ack_delay` after the first unacknowledged
//!   packet); a message completes (its send token returns to the host) when all its
//!   packets are acknowledged. The modelled network never drops or reorders, so no
//!   retransmission timer is needed (assumption).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::marker::PhantomData;

use qos_core::sched::{Decision, FlowId, FlowParams, Scheduler};
use qos_core::topology::NodeId;
use qos_core::units::{Duration, Time};

use super::sram::{Buf, Sram};
use super::{Busy, Nic, NicConfig, Output, Outputs, Timer};
use crate::myrinet::calibration::Calibration;
use crate::myrinet::calibration::{Lanai, Segmentation};
use crate::myrinet::flow::xfer;
use crate::myrinet::ids::FlowKey;
use crate::myrinet::packet::{Body, Data, Packet};

/// What the SDMA state machine does differently in one MCP version.
pub trait SdmaPolicy: fmt::Debug {
    /// The packet scheduler SDMA asks which flow sends next.
    type Scheduler: Scheduler + Default + fmt::Debug;

    /// Payload sizes of the packets a message of `len` bytes is cut into (at least
    /// one packet, none larger than `mtu`).
    fn segment(len: u64, mtu: u64) -> Vec<u64>;

    /// Processor time SDMA spends per dispatch on top of preparing the packet.
    fn dispatch_overhead(lanai: &Lanai) -> Duration;
}

/// A processor handler waiting to run or running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// SDMA: a new send descriptor of `len` bytes for a flow.
    Token { flow: FlowKey, len: u64 },
    /// SDMA: ask the scheduler for the next packet.
    SdmaPoll,
    /// SDMA decided: prepare this packet (then host DMA).
    SdmaPacket(Buf),
    /// SEND: inject a packet.
    Send(Buf),
    /// RECV: a data packet arrived.
    Recv(Buf),
    /// RDMA: the packet is in host memory; finish its delivery.
    Rdma(Buf),
    /// RECV: an acknowledgement arrived.
    AckRecv(Buf),
}

impl Task {
    /// Queue index: receive side first, then SEND, then SDMA.
    fn priority(self) -> usize {
        match self {
            Task::Recv(_) | Task::Rdma(_) | Task::AckRecv(_) => 0,
            Task::Send(_) => 1,
            Task::Token { .. } | Task::SdmaPoll | Task::SdmaPacket(_) => 2,
        }
    }
}

/// A host DMA transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dma {
    /// Host → NIC: a prepared packet's data.
    Read(Buf),
    /// NIC → host: a received packet's data.
    Write(Buf),
}

/// A posted message of a flow sourced here.
#[derive(Debug, Clone)]
struct TxMsg {
    lens: Vec<u64>,
    sent: usize,
    first_seq: u64,
}

impl TxMsg {
    /// All packets sent and every one acknowledged below `upto`.
    fn done_by(&self, upto: u64) -> bool {
        self.sent == self.lens.len() && self.first_seq + self.lens.len() as u64 <= upto
    }
}

#[derive(Debug, Clone)]
struct TxFlow {
    key: FlowKey,
    dst: NodeId,
    msgs: VecDeque<TxMsg>,
    next_seq: u64,
}

/// Acknowledgement state towards one peer.
#[derive(Debug, Clone, Default)]
struct RxPeer {
    /// Per flow: the sequence number to acknowledge up to (exclusive).
    pending: BTreeMap<FlowKey, u64>,
    /// An acknowledgement timer is armed.
    timer: bool,
}

/// The GM MCP of one NIC, with SDMA behaving as `P` says.
#[derive(Debug)]
pub struct Mcp<P: SdmaPolicy> {
    node: NodeId,
    cal: Calibration,
    bin: Option<Duration>,
    sched: P::Scheduler,
    cpu: Option<Task>,
    /// A handler's effects are being applied: do not start another one meanwhile.
    in_handler: bool,
    queues: [VecDeque<Task>; 3],
    dma: Option<Dma>,
    dma_queue: VecDeque<Dma>,
    tx_free: u32,
    sdma_queued: bool,
    wake_at: Option<Time>,
    backlog: u64,
    send_ready: VecDeque<Buf>,
    sram: Sram,
    /// A packet is being injected; whether it is data (it holds a send buffer).
    sending: Option<bool>,
    send_task: bool,
    /// Flows sourced here, by [`FlowKey::dense`].
    tx: Vec<Option<TxFlow>>,
    rx: BTreeMap<NodeId, RxPeer>,
    rx_expect: BTreeMap<FlowKey, u64>,
    idts: BTreeMap<FlowKey, Duration>,
    timeline: BTreeMap<FlowKey, Vec<u32>>,
    busy: Busy,
    /// Since when the processor has had nothing to run, and whether every send buffer
    /// was taken then.
    idle_since: Option<(Time, bool)>,
    policy: PhantomData<P>,
}

impl<P: SdmaPolicy> Mcp<P> {
    /// An idle NIC of node `node`.
    pub fn new(node: NodeId, config: &NicConfig) -> Mcp<P> {
        let cal = config.calibration;
        Mcp {
            node,
            cal,
            bin: config.timeline_bin,
            sched: P::Scheduler::default(),
            cpu: None,
            in_handler: false,
            queues: Default::default(),
            dma: None,
            dma_queue: VecDeque::new(),
            tx_free: cal.nic.send_buffers,
            sdma_queued: false,
            wake_at: None,
            backlog: 0,
            send_ready: VecDeque::new(),
            sram: Sram::default(),
            sending: None,
            send_task: false,
            tx: Vec::new(),
            rx: BTreeMap::new(),
            rx_expect: BTreeMap::new(),
            idts: BTreeMap::new(),
            timeline: BTreeMap::new(),
            busy: Busy::default(),
            idle_since: None,
            policy: PhantomData,
        }
    }

    /// The packet scheduler (for tests and reports).
    pub fn scheduler(&self) -> &P::Scheduler {
        &self.sched
    }

    fn tx_flow(&mut self, flow: FlowKey) -> Option<&mut TxFlow> {
        self.tx
            .get_mut(flow.dense() as usize)
            .and_then(Option::as_mut)
    }

    /// The LANai RTC at `t`: time truncated to whole ticks.
    fn rtc(&self, t: Time) -> Time {
        let tick = self.cal.clock.tick.as_ps().max(1);
        Time::from_ps(t.as_ps() / tick * tick)
    }

    fn push_task(&mut self, now: Time, t: Task, out: &mut Outputs) {
        self.queues[t.priority()].push_back(t);
        if self.cpu.is_none() && !self.in_handler {
            self.cpu_start(now, out);
        }
    }

    /// Starts the next handler on an idle processor.
    fn cpu_start(&mut self, now: Time, out: &mut Outputs) {
        let Some(task) = self.queues.iter_mut().find_map(VecDeque::pop_front) else {
            if self.idle_since.is_none() {
                self.idle_since = Some((now, self.tx_free == 0 && self.backlog > 0));
            }
            return;
        };
        if let Some((since, full)) = self.idle_since.take() {
            if full {
                self.busy.idle_send_buffers_full += now.saturating_since(since);
            }
        }
        let lanai = self.cal.lanai;
        let (task, cost) = match task {
            Task::Token { .. } => (task, lanai.sdma_message),
            Task::SdmaPoll => self.sdma_decide(now, out),
            Task::Send(b) => {
                let cost = match &self.sram.get(b).body {
                    Body::Data(d) => self.cal.out_packet_cost(d.len).1,
                    Body::Ack(_) => lanai.ack_send,
                };
                (task, cost)
            }
            Task::Recv(b) => (task, self.cal.in_packet_cost(self.sram.get(b).payload()).0),
            Task::Rdma(b) => (task, self.cal.in_packet_cost(self.sram.get(b).payload()).1),
            Task::AckRecv(b) => {
                let done = self.completions(self.sram.get(b));
                (task, lanai.ack_recv + lanai.send_complete * done)
            }
            Task::SdmaPacket(_) => (task, Duration::ZERO),
        };
        self.cpu = Some(task);
        self.busy.processor += cost;
        out.arm(now.saturating_add(cost), Timer::Processor);
    }

    /// SDMA asks the scheduler; returns the handler to run and its cost.
    fn sdma_decide(&mut self, now: Time, out: &mut Outputs) -> (Task, Duration) {
        let rtc = self.rtc(now);
        let tick = self.cal.clock.tick;
        self.sdma_queued = false;
        match self.sched.next(rtc) {
            Decision::Dispatch(id) => {
                self.backlog = self.backlog.saturating_sub(1);
                self.tx_free = self.tx_free.saturating_sub(1);
                let Some(Some(tx)) = self.tx.get_mut(id.0 as usize) else {
                    // The scheduler and the token queues disagree: nothing to send.
                    self.tx_free += 1;
                    return (Task::SdmaPoll, Duration::ZERO);
                };
                let (flow, dst) = (tx.key, tx.dst);
                let Some(m) = tx.msgs.iter_mut().find(|m| m.sent < m.lens.len()) else {
                    self.tx_free += 1;
                    return (Task::SdmaPoll, Duration::ZERO);
                };
                let len = m.lens[m.sent];
                let data = Data {
                    flow,
                    seq: m.first_seq + m.sent as u64,
                    len,
                    last: m.sent + 1 == m.lens.len(),
                    negotiated: None,
                };
                m.sent += 1;
                let cost = self.cal.out_packet_cost(len).0 + P::dispatch_overhead(&self.cal.lanai);
                let packet = Packet {
                    src: self.node,
                    dst,
                    wire: len + self.cal.network.header.get(),
                    body: Body::Data(data),
                };
                (Task::SdmaPacket(self.sram.put(packet)), cost)
            }
            Decision::WaitUntil(t) => {
                // Wake when the RTC reaches the NDT (at least one tick on).
                let t = t.max(rtc + tick);
                if self.wake_at.is_none_or(|w| t < w) {
                    self.wake_at = Some(t);
                    out.arm(t, Timer::Wake);
                }
                (Task::SdmaPoll, Duration::ZERO)
            }
            Decision::Idle => (Task::SdmaPoll, Duration::ZERO),
        }
    }

    fn cpu_done(&mut self, now: Time, out: &mut Outputs) {
        let Some(task) = self.cpu.take() else {
            return;
        };
        self.in_handler = true;
        self.cpu_effects(now, task, out);
        self.in_handler = false;
        self.cpu_start(now, out);
    }

    fn cpu_effects(&mut self, now: Time, task: Task, out: &mut Outputs) {
        match task {
            Task::Token { flow, len } => {
                let mtu = self.cal.packet.mtu.get().max(1);
                let lens = match self.cal.packet.segmentation {
                    Segmentation::Firmware => P::segment(len, mtu),
                    rule => rule.cut(len, mtu),
                };
                let count = lens.len() as u64;
                let Some(tx) = self.tx_flow(flow) else {
                    // A descriptor for a flow that was never opened: GM rejects it.
                    return;
                };
                tx.msgs.push_back(TxMsg {
                    lens,
                    sent: 0,
                    first_seq: tx.next_seq,
                });
                tx.next_seq += count;
                self.sched.enqueue(now, FlowId(flow.dense()), count as u32);
                self.backlog += count;
                self.try_sdma(now, out);
            }
            Task::SdmaPoll => {}
            Task::SdmaPacket(b) => {
                self.dma_push(now, Dma::Read(b), out);
                self.try_sdma(now, out);
            }
            Task::Send(b) => {
                let p = self.sram.take(b);
                self.send_task = false;
                self.sending = Some(p.needs_receive_buffer());
                if let (Body::Data(d), Some(bin)) = (&p.body, self.bin) {
                    let i = (now.as_ps() / bin.as_ps().max(1)) as usize;
                    let v = self.timeline.entry(d.flow).or_default();
                    if v.len() <= i {
                        v.resize(i + 1, 0);
                    }
                    v[i] += 1;
                }
                out.push(Output::Inject(p));
            }
            Task::Recv(b) => {
                let p = self.sram.get(b);
                // Only data packets get a RECV handler (acknowledgements get AckRecv).
                let Body::Data(d) = p.body else {
                    return;
                };
                let src = p.src;
                let expect = self.rx_expect.entry(d.flow).or_insert(0);
                debug_assert_eq!(*expect, d.seq, "GM delivers in order");
                *expect = d.seq + 1;
                let peer = self.rx.entry(src).or_default();
                peer.pending.insert(d.flow, d.seq + 1);
                if !peer.timer {
                    peer.timer = true;
                    out.arm(
                        now.saturating_add(self.cal.lanai.ack_delay),
                        Timer::Ack(src),
                    );
                }
                self.dma_push(now, Dma::Write(b), out);
            }
            Task::Rdma(b) => {
                let p = self.sram.take(b);
                out.push(Output::ReceiveBufferFreed);
                if let Body::Data(d) = p.body {
                    out.push(Output::ToHost {
                        flow: d.flow,
                        bytes: d.len,
                        last: d.last,
                    });
                }
            }
            Task::AckRecv(b) => {
                if let Body::Ack(entries) = self.sram.take(b).body {
                    for (flow, upto) in entries {
                        self.complete_sends(flow, upto, out);
                    }
                }
            }
        }
    }

    /// Messages an acknowledgement completes (to cost the handler).
    fn completions(&self, p: &Packet) -> u64 {
        let Body::Ack(entries) = &p.body else {
            return 0;
        };
        entries
            .iter()
            .map(|&(flow, upto)| {
                self.tx
                    .get(flow.dense() as usize)
                    .and_then(Option::as_ref)
                    .map_or(0, |tx| {
                        tx.msgs.iter().take_while(|m| m.done_by(upto)).count() as u64
                    })
            })
            .sum()
    }

    fn complete_sends(&mut self, flow: FlowKey, upto: u64, out: &mut Outputs) {
        let Some(tx) = self.tx_flow(flow) else {
            return;
        };
        while tx.msgs.front().is_some_and(|m| m.done_by(upto)) {
            tx.msgs.pop_front();
            out.push(Output::SendCompleted(flow));
        }
    }

    fn try_sdma(&mut self, now: Time, out: &mut Outputs) {
        if self.sdma_queued || self.tx_free == 0 || self.backlog == 0 {
            return;
        }
        self.sdma_queued = true;
        self.push_task(now, Task::SdmaPoll, out);
    }

    fn try_send(&mut self, now: Time, out: &mut Outputs) {
        if self.sending.is_some() || self.send_task {
            return;
        }
        let Some(p) = self.send_ready.pop_front() else {
            return;
        };
        self.send_task = true;
        self.push_task(now, Task::Send(p), out);
    }

    fn dma_push(&mut self, now: Time, job: Dma, out: &mut Outputs) {
        self.dma_queue.push_back(job);
        if self.dma.is_none() {
            self.dma_start(now, out);
        }
    }

    fn dma_start(&mut self, now: Time, out: &mut Outputs) {
        let Some(job) = self.dma_queue.pop_front() else {
            return;
        };
        let (len, bw) = match job {
            Dma::Read(b) => (self.sram.get(b).payload(), self.cal.pci.read),
            Dma::Write(b) => (self.sram.get(b).payload(), self.cal.pci.write),
        };
        let t = self.cal.pci.setup + xfer(bw, len);
        self.busy.host_dma += t;
        self.dma = Some(job);
        out.arm(now.saturating_add(t), Timer::HostDma);
    }

    fn dma_done(&mut self, now: Time, out: &mut Outputs) {
        let Some(job) = self.dma.take() else {
            return;
        };
        match job {
            Dma::Read(p) => {
                self.send_ready.push_back(p);
                self.try_send(now, out);
            }
            Dma::Write(p) => self.push_task(now, Task::Rdma(p), out),
        }
        self.dma_start(now, out);
    }

    fn ack_due(&mut self, now: Time, peer: NodeId, out: &mut Outputs) {
        let Some(rp) = self.rx.get_mut(&peer) else {
            return;
        };
        rp.timer = false;
        let entries: Vec<(FlowKey, u64)> = std::mem::take(&mut rp.pending).into_iter().collect();
        if entries.is_empty() {
            return;
        }
        let ack = Packet {
            src: self.node,
            dst: peer,
            wire: self.cal.network.ack_size.get(),
            body: Body::Ack(entries),
        };
        // Acknowledgements go before queued data.
        let b = self.sram.put(ack);
        self.send_ready.push_front(b);
        self.try_send(now, out);
    }

    fn wake(&mut self, now: Time, out: &mut Outputs) {
        if self.wake_at == Some(now) {
            self.wake_at = None;
        }
        self.try_sdma(now, out);
    }
}

impl<P: SdmaPolicy> Nic for Mcp<P> {
    fn open_flow(
        &mut self,
        _now: Time,
        flow: FlowKey,
        dst: NodeId,
        idt: Duration,
        _out: &mut Outputs,
    ) {
        self.sched.add_flow(
            FlowId(flow.dense()),
            FlowParams {
                idt,
                vtick: None,
                connection: dst.0,
                subport: flow.dense(),
            },
        );
        self.idts.insert(flow, idt);
        let i = flow.dense() as usize;
        if self.tx.len() <= i {
            self.tx.resize_with(i + 1, || None);
        }
        match &mut self.tx[i] {
            Some(tx) => tx.dst = dst,
            slot => {
                *slot = Some(TxFlow {
                    key: flow,
                    dst,
                    msgs: VecDeque::new(),
                    next_seq: 0,
                })
            }
        }
    }

    /// Queued, unsent packets are discarded (GM drops the sends of a closed port;
    /// assumption) and the scheduler forgets the flow; packets already prepared still go.
    fn close_flow(&mut self, _now: Time, flow: FlowKey, _out: &mut Outputs) {
        let id = FlowId(flow.dense());
        let queued = self.sched.backlog(id);
        self.sched.remove_flow(id);
        self.backlog = self.backlog.saturating_sub(queued);
        if let Some(tx) = self.tx_flow(flow) {
            // Messages with packets still unsent will never complete.
            tx.msgs.retain(|m| m.sent == m.lens.len());
        }
    }

    /// The new IDT applies from the flow's next dispatch; SDMA sees it at its next
    /// decision (a pending wake-up is not moved). GM's rotation ignores IDTs, but the
    /// MCP records them for reports either way.
    fn set_idt(&mut self, _now: Time, flow: FlowKey, idt: Duration, _out: &mut Outputs) {
        self.sched.set_idt(FlowId(flow.dense()), idt);
        self.idts.insert(flow, idt);
    }

    fn host_post(&mut self, now: Time, flow: FlowKey, bytes: u64, out: &mut Outputs) {
        self.push_task(now, Task::Token { flow, len: bytes }, out);
    }

    fn packet_arrived(&mut self, now: Time, packet: Packet, out: &mut Outputs) {
        let data = matches!(packet.body, Body::Data(_));
        let b = self.sram.put(packet);
        let task = if data {
            Task::Recv(b)
        } else {
            Task::AckRecv(b)
        };
        self.push_task(now, task, out);
    }

    fn tail_left(&mut self, now: Time, out: &mut Outputs) {
        if self.sending.take() == Some(true) {
            self.tx_free += 1;
        }
        self.try_send(now, out);
        self.try_sdma(now, out);
    }

    fn timer(&mut self, now: Time, timer: Timer, out: &mut Outputs) {
        match timer {
            Timer::Processor => self.cpu_done(now, out),
            Timer::HostDma => self.dma_done(now, out),
            Timer::Wake => self.wake(now, out),
            Timer::Ack(peer) => self.ack_due(now, peer, out),
        }
    }

    fn receive_buffers(&self) -> u32 {
        self.cal.nic.receive_buffers
    }

    fn idt(&self, flow: FlowKey) -> Option<Duration> {
        self.idts.get(&flow).copied()
    }

    fn dispatches(&self, flow: FlowKey) -> &[u32] {
        self.timeline.get(&flow).map_or(&[], Vec::as_slice)
    }

    fn busy(&self) -> Busy {
        self.busy
    }
}
