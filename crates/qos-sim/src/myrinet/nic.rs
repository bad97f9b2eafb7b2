//! The LANai 4.3 NIC running the GM MCP (thesis §4.1, Fig 4.1–4.2, §4.2.2).
//!
//! - One **processor** runs the handlers of the four state machines one at a time,
//!   receive side first (RECV/RDMA, the network must be drained), then SEND, then SDMA;
//!   each handler costs the time given in the calibration.
//! - One **host DMA engine** moves packet data host → NIC (SDMA) and NIC → host (RDMA)
//!   over PCI, first come first served.
//! - **SRAM staging buffers**: a packet holds a send buffer from SDMA until its tail has
//!   left, and a receive buffer from the network until RDMA has copied it out.
//! - **SDMA** builds a send token per posted descriptor and, whenever a send buffer is
//!   free, asks the packet scheduler which flow sends next: GM's connection/sub-port
//!   rotation (unmodified GM) or the thesis's IDT/NDT rate control, both from
//!   `qos_core::sched`. Rate control compares NDTs with the RTC (0.5 µs ticks).
//! - Segmentation: unmodified GM cuts a message into equal chunks, the modified MCP
//!   sends full 4 KB packets and a shorter last one (§5.2).
//! - **Reliable, ordered delivery**: per-flow sequence numbers, cumulative delayed
//!   acknowledgements; a message completes (its send token returns to the host) when
//!   all its packets are acknowledged. The modelled network never drops or reorders,
//!   so no retransmission timer is needed (assumption).

use std::collections::{BTreeMap, VecDeque};

use qos_core::sched::{AnyScheduler, Decision, FlowId, FlowParams, Scheduler};
use qos_core::units::{Duration, Time};

use super::{Calibration, Cluster, Event, Firmware};

/// A data packet's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data {
    /// Scheduler flow id (2·app for the forward direction, 2·app + 1 for replies).
    pub flow: u32,
    /// Per-flow packet sequence number.
    pub seq: u64,
    /// Payload bytes.
    pub len: u64,
    /// Last packet of its message.
    pub last: bool,
}

/// What a packet carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Message data.
    Data(Data),
    /// A cumulative acknowledgement: per flow, every sequence number below `upto`.
    Ack(Vec<(u32, u64)>),
}

/// A processor handler waiting to run or running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// SDMA: a new send descriptor of `len` bytes for a flow.
    Token { flow: u32, len: u64 },
    /// SDMA: ask the scheduler for the next packet.
    SdmaPoll,
    /// SDMA decided: prepare this packet (then host DMA).
    SdmaPacket(u32),
    /// SEND: inject a packet.
    Send(u32),
    /// RECV: a data packet arrived.
    Recv(u32),
    /// RDMA: the packet is in host memory; finish its delivery.
    Rdma(u32),
    /// RECV: an acknowledgement arrived.
    AckRecv(u32),
}

impl Task {
    fn priority(self) -> usize {
        match self {
            Task::Recv(_) | Task::Rdma(_) | Task::AckRecv(_) => 0,
            Task::Send(_) => 1,
            Task::Token { .. } | Task::SdmaPoll | Task::SdmaPacket(_) => 2,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Dma {
    Read(u32),
    Write(u32),
}

#[derive(Debug, Clone)]
struct TxMsg {
    lens: Vec<u64>,
    sent: usize,
    first_seq: u64,
}

#[derive(Debug, Clone, Default)]
struct TxFlow {
    dst: u32,
    msgs: VecDeque<TxMsg>,
    next_seq: u64,
}

#[derive(Debug, Clone, Default)]
struct RxPeer {
    pending: BTreeMap<u32, u64>,
    timer: bool,
}

/// One NIC's state.
#[derive(Debug)]
pub struct Nic {
    id: u32,
    cal: Calibration,
    firmware: Firmware,
    sched: AnyScheduler,
    cpu: Option<Task>,
    /// A handler's effects are being applied: do not start another one meanwhile.
    in_handler: bool,
    queues: [VecDeque<Task>; 3],
    dma: Option<Dma>,
    dma_queue: VecDeque<Dma>,
    tx_free: u32,
    rx_free: u32,
    sdma_queued: bool,
    wake_at: Option<Time>,
    backlog: u64,
    send_ready: VecDeque<u32>,
    send_busy: bool,
    send_task: bool,
    tx: BTreeMap<u32, TxFlow>,
    rx: BTreeMap<u32, RxPeer>,
    rx_expect: BTreeMap<u32, u64>,
    idts: BTreeMap<u32, Duration>,
    timeline: BTreeMap<u32, Vec<u32>>,
}

impl Nic {
    /// An idle NIC.
    pub fn new(id: u32, firmware: Firmware, cal: &Calibration, _seed: u64) -> Nic {
        Nic {
            id,
            cal: *cal,
            firmware,
            sched: AnyScheduler::new(firmware.scheduler()),
            cpu: None,
            in_handler: false,
            queues: Default::default(),
            dma: None,
            dma_queue: VecDeque::new(),
            tx_free: cal.nic.send_buffers,
            rx_free: cal.nic.receive_buffers,
            sdma_queued: false,
            wake_at: None,
            backlog: 0,
            send_ready: VecDeque::new(),
            send_busy: false,
            send_task: false,
            tx: BTreeMap::new(),
            rx: BTreeMap::new(),
            rx_expect: BTreeMap::new(),
            idts: BTreeMap::new(),
            timeline: BTreeMap::new(),
        }
    }

    /// Free receive buffers.
    pub fn rx_free(&self) -> u32 {
        self.rx_free
    }

    /// Reserves a receive buffer for an arriving packet.
    pub fn take_rx_buffer(&mut self) {
        self.rx_free = self.rx_free.saturating_sub(1);
    }

    /// Registers a flow sourced here with the scheduler.
    pub fn add_flow(&mut self, flow: u32, dst: u32, idt: Duration) {
        self.sched.add_flow(
            FlowId(flow),
            FlowParams {
                idt,
                vtick: None,
                connection: dst,
                subport: flow,
            },
        );
        self.idts.insert(flow, idt);
        self.tx.entry(flow).or_default().dst = dst;
    }

    /// The application closed the flow: its queued, unsent packets are discarded (GM
    /// drops the sends of a closed port; assumption) and the scheduler forgets it.
    pub fn close_flow(&mut self, flow: u32) {
        let queued = self.sched.backlog(FlowId(flow));
        self.sched.remove_flow(FlowId(flow));
        self.backlog = self.backlog.saturating_sub(queued);
        if let Some(tx) = self.tx.get_mut(&flow) {
            // Messages with packets still unsent will never complete.
            tx.msgs.retain(|m| m.sent == m.lens.len());
        }
    }

    /// Changes a flow's IDT (pushed by the bandwidth manager).
    pub fn set_idt(&mut self, flow: u32, idt: Duration) {
        self.sched.set_idt(FlowId(flow), idt);
        self.idts.insert(flow, idt);
    }

    /// The IDT in force for a flow sourced here.
    pub fn idt_of(&self, app: u32) -> Option<Duration> {
        self.idts.get(&(2 * app)).copied()
    }

    /// Packets dispatched per timeline bin for an application's forward flow.
    pub fn timeline(&self, app: u32) -> Vec<u32> {
        self.timeline.get(&(2 * app)).cloned().unwrap_or_default()
    }

    /// Splits a message into packet payload sizes (§5.2).
    fn segment(&self, len: u64) -> Vec<u64> {
        let mtu = self.cal.packet.mtu.get().max(1);
        let n = len.div_ceil(mtu).max(1);
        match self.firmware {
            Firmware::RateControl => (0..n)
                .map(|i| if i + 1 < n { mtu } else { len - mtu * (n - 1) })
                .collect(),
            Firmware::Gm => {
                let (base, extra) = (len / n, len % n);
                (0..n).map(|i| base + u64::from(i < extra)).collect()
            }
        }
    }
}

impl Cluster {
    fn nic(&mut self, n: u32) -> &mut Nic {
        &mut self.nics[n as usize]
    }

    fn push_task(&mut self, n: u32, t: Task) {
        let nic = self.nic(n);
        nic.queues[t.priority()].push_back(t);
        if nic.cpu.is_none() && !nic.in_handler {
            self.cpu_start(n);
        }
    }

    /// Starts the next handler on an idle processor.
    fn cpu_start(&mut self, n: u32) {
        let nic = &mut self.nics[n as usize];
        let Some(task) = nic.queues.iter_mut().find_map(|q| q.pop_front()) else {
            return;
        };
        let lanai = self.cal.lanai;
        let (task, cost) = match task {
            Task::Token { .. } => (task, lanai.sdma_message),
            Task::SdmaPoll => self.sdma_decide(n),
            Task::Send(p) => {
                let cost = match &self.fabric.get(p).body {
                    Body::Data(d) => self.cal.out_packet_cost(d.len).1,
                    Body::Ack(_) => lanai.ack_send,
                };
                (task, cost)
            }
            Task::Recv(p) => {
                let len = match &self.fabric.get(p).body {
                    Body::Data(d) => d.len,
                    Body::Ack(_) => 0,
                };
                (task, self.cal.in_packet_cost(len).0)
            }
            Task::Rdma(p) => {
                let len = match &self.fabric.get(p).body {
                    Body::Data(d) => d.len,
                    Body::Ack(_) => 0,
                };
                (task, self.cal.in_packet_cost(len).1)
            }
            Task::AckRecv(p) => {
                let done = self.completions(n, p);
                (task, lanai.ack_recv + lanai.send_complete * done)
            }
            Task::SdmaPacket(_) => (task, Duration::ZERO),
        };
        self.nics[n as usize].cpu = Some(task);
        self.q.schedule_in(cost, Event::CpuDone(n));
    }

    /// SDMA asks the scheduler; returns the handler to run and its cost.
    fn sdma_decide(&mut self, n: u32) -> (Task, Duration) {
        let now = self.q.now();
        let rtc = self.rtc(now);
        let tick = self.cal.clock.tick;
        let rc = self.cal.lanai.rate_control;
        let nic = &mut self.nics[n as usize];
        nic.sdma_queued = false;
        match nic.sched.next(rtc) {
            Decision::Dispatch(FlowId(f)) => {
                nic.backlog = nic.backlog.saturating_sub(1);
                nic.tx_free = nic.tx_free.saturating_sub(1);
                let firmware = nic.firmware;
                let flow = nic.tx.entry(f).or_default();
                let dst = flow.dst;
                let Some(m) = flow.msgs.iter_mut().find(|m| m.sent < m.lens.len()) else {
                    // The scheduler and the token queues disagree: nothing to send.
                    nic.tx_free += 1;
                    return (Task::SdmaPoll, Duration::ZERO);
                };
                let len = m.lens[m.sent];
                let data = super::nic::Data {
                    flow: f,
                    seq: m.first_seq + m.sent as u64,
                    len,
                    last: m.sent + 1 == m.lens.len(),
                };
                m.sent += 1;
                let mut cost = self.cal.out_packet_cost(len).0;
                if firmware == Firmware::RateControl {
                    cost += rc;
                }
                let path = self.fabric.path(&self.topo, n, dst);
                let wire = len + self.cal.network.header.get();
                let p = self.fabric.alloc(n, dst, wire, Body::Data(data), path);
                (Task::SdmaPacket(p), cost)
            }
            Decision::WaitUntil(t) => {
                // Wake when the RTC reaches the NDT (at least one tick on).
                let t = t.max(rtc + tick);
                if nic.wake_at.is_none_or(|w| t < w) {
                    nic.wake_at = Some(t);
                    self.q.schedule_at(t, Event::SdmaWake(n));
                }
                (Task::SdmaPoll, Duration::ZERO)
            }
            Decision::Idle => (Task::SdmaPoll, Duration::ZERO),
        }
    }

    pub(crate) fn cpu_done(&mut self, n: u32) {
        let Some(task) = self.nics[n as usize].cpu.take() else {
            return;
        };
        self.nics[n as usize].in_handler = true;
        self.cpu_effects(n, task);
        self.nics[n as usize].in_handler = false;
        self.cpu_start(n);
    }

    fn cpu_effects(&mut self, n: u32, task: Task) {
        let now = self.q.now();
        match task {
            Task::Token { flow, len } => {
                let nic = &mut self.nics[n as usize];
                let lens = nic.segment(len);
                let count = lens.len() as u64;
                let tx = nic.tx.entry(flow).or_default();
                tx.msgs.push_back(TxMsg {
                    lens,
                    sent: 0,
                    first_seq: tx.next_seq,
                });
                tx.next_seq += count;
                nic.sched.enqueue(now, FlowId(flow), count as u32);
                nic.backlog += count;
                self.try_sdma(n);
            }
            Task::SdmaPoll => {}
            Task::SdmaPacket(p) => {
                self.dma_push(n, Dma::Read(p));
                self.try_sdma(n);
            }
            Task::Send(p) => {
                let nic = &mut self.nics[n as usize];
                nic.send_task = false;
                nic.send_busy = true;
                if let (Body::Data(d), Some(bin)) = (&self.fabric.get(p).body, self.bin) {
                    let i = (now.as_ps() / bin.as_ps().max(1)) as usize;
                    let v = nic.timeline.entry(d.flow).or_default();
                    if v.len() <= i {
                        v.resize(i + 1, 0);
                    }
                    v[i] += 1;
                }
                self.inject(p);
            }
            Task::Recv(p) => {
                let (src, d) = {
                    let pkt = self.fabric.get(p);
                    match pkt.body {
                        Body::Data(d) => (pkt.src, d),
                        Body::Ack(_) => return,
                    }
                };
                let nic = &mut self.nics[n as usize];
                let expect = nic.rx_expect.entry(d.flow).or_insert(0);
                debug_assert_eq!(*expect, d.seq, "GM delivers in order");
                *expect = d.seq + 1;
                let peer = nic.rx.entry(src).or_default();
                peer.pending.insert(d.flow, d.seq + 1);
                if !peer.timer {
                    peer.timer = true;
                    self.q
                        .schedule_in(self.cal.lanai.ack_delay, Event::AckTimer(n, src));
                }
                self.dma_push(n, Dma::Write(p));
            }
            Task::Rdma(p) => {
                let pkt = self.fabric.release(p);
                self.nics[n as usize].rx_free += 1;
                self.rx_buffer_freed(n);
                if let Body::Data(d) = pkt.body {
                    self.host_receive(d.flow, d.len, d.last);
                }
            }
            Task::AckRecv(p) => {
                let pkt = self.fabric.release(p);
                if let Body::Ack(entries) = pkt.body {
                    for (flow, upto) in entries {
                        self.complete_sends(n, flow, upto);
                    }
                }
            }
        }
    }

    /// Messages an acknowledgement completes (to cost the handler).
    fn completions(&self, n: u32, p: u32) -> u64 {
        let Body::Ack(entries) = &self.fabric.get(p).body else {
            return 0;
        };
        let nic = &self.nics[n as usize];
        entries
            .iter()
            .map(|&(flow, upto)| {
                nic.tx.get(&flow).map_or(0, |tx| {
                    tx.msgs
                        .iter()
                        .take_while(|m| {
                            m.sent == m.lens.len() && m.first_seq + m.lens.len() as u64 <= upto
                        })
                        .count() as u64
                })
            })
            .sum()
    }

    fn complete_sends(&mut self, n: u32, flow: u32, upto: u64) {
        let poll = self.cal.host.poll;
        let tx = self.nics[n as usize].tx.entry(flow).or_default();
        let mut done = 0;
        while tx
            .msgs
            .front()
            .is_some_and(|m| m.sent == m.lens.len() && m.first_seq + m.lens.len() as u64 <= upto)
        {
            tx.msgs.pop_front();
            done += 1;
        }
        for _ in 0..done {
            self.q.schedule_in(poll, Event::SendDone(flow));
        }
    }

    /// The host posted a send descriptor of `len` bytes for scheduler flow `flow`.
    pub(crate) fn nic_post(&mut self, n: u32, flow: u32, len: u64) {
        self.push_task(n, Task::Token { flow, len });
    }

    fn try_sdma(&mut self, n: u32) {
        let nic = &mut self.nics[n as usize];
        if nic.sdma_queued || nic.tx_free == 0 || nic.backlog == 0 {
            return;
        }
        nic.sdma_queued = true;
        self.push_task(n, Task::SdmaPoll);
    }

    pub(crate) fn sdma_wake(&mut self, n: u32) {
        let now = self.q.now();
        let nic = &mut self.nics[n as usize];
        if nic.wake_at == Some(now) {
            nic.wake_at = None;
        }
        self.try_sdma(n);
    }

    fn try_send(&mut self, n: u32) {
        let nic = &mut self.nics[n as usize];
        if nic.send_busy || nic.send_task {
            return;
        }
        let Some(p) = nic.send_ready.pop_front() else {
            return;
        };
        nic.send_task = true;
        self.push_task(n, Task::Send(p));
    }

    fn dma_push(&mut self, n: u32, job: Dma) {
        let nic = &mut self.nics[n as usize];
        nic.dma_queue.push_back(job);
        if nic.dma.is_none() {
            self.dma_start(n);
        }
    }

    fn dma_start(&mut self, n: u32) {
        let Some(job) = self.nics[n as usize].dma_queue.pop_front() else {
            return;
        };
        let (p, bw) = match job {
            Dma::Read(p) => (p, self.cal.pci.read),
            Dma::Write(p) => (p, self.cal.pci.write),
        };
        let len = match &self.fabric.get(p).body {
            Body::Data(d) => d.len,
            Body::Ack(_) => 0,
        };
        let t = self.cal.pci.setup + Cluster::xfer(bw, len);
        self.nics[n as usize].dma = Some(job);
        self.q.schedule_in(t, Event::DmaDone(n));
    }

    pub(crate) fn dma_done(&mut self, n: u32) {
        let Some(job) = self.nics[n as usize].dma.take() else {
            return;
        };
        match job {
            Dma::Read(p) => {
                self.nics[n as usize].send_ready.push_back(p);
                self.try_send(n);
            }
            Dma::Write(p) => self.push_task(n, Task::Rdma(p)),
        }
        self.dma_start(n);
    }

    pub(crate) fn ack_timer(&mut self, n: u32, peer: u32) {
        let nic = &mut self.nics[n as usize];
        let Some(rp) = nic.rx.get_mut(&peer) else {
            return;
        };
        rp.timer = false;
        let entries: Vec<(u32, u64)> = std::mem::take(&mut rp.pending).into_iter().collect();
        if entries.is_empty() {
            return;
        }
        let path = self.fabric.path(&self.topo, n, peer);
        let wire = self.cal.network.ack_size.get();
        let p = self.fabric.alloc(n, peer, wire, Body::Ack(entries), path);
        // Acknowledgements go before queued data.
        self.nics[n as usize].send_ready.push_front(p);
        self.try_send(n);
    }

    pub(crate) fn tail_left(&mut self, p: u32) {
        let (src, data) = {
            let pkt = self.fabric.get(p);
            (pkt.src, matches!(pkt.body, Body::Data(_)))
        };
        let nic = &mut self.nics[src as usize];
        nic.send_busy = false;
        if data {
            nic.tx_free += 1;
        }
        self.try_send(src);
        self.try_sdma(src);
    }

    pub(crate) fn tail_arrive(&mut self, p: u32) {
        let pkt = self.fabric.get(p);
        let dst = pkt.dst;
        let task = match pkt.body {
            Body::Data(_) => Task::Recv(p),
            Body::Ack(_) => Task::AckRecv(p),
        };
        debug_assert_eq!(self.nics[dst as usize].id, dst);
        self.push_task(dst, task);
    }
}
