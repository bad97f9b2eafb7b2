//! PVIA and QoSVIA (Nagar §3.2–3.3): the LCP as a polling state machine. It visits the
//! doorbell queue, HDMA, NSDMA and NRDMA in turn ([`super::poll::PollLoop`]); at each
//! visit that finds an event it runs one handler — which activates the next device of
//! the pipeline or queues the request for it (HDMA's hardware queue, NSDMA's software
//! queue) — and moves on, never waiting for a device.
//!
//! Send: doorbell → descriptor DMA → data DMA (one request per page) → NSDMA → status
//! DMA. Receive (descriptors pre-posted, already in SRAM): NRDMA → data DMA up → status
//! DMA. What differs between the control programs is the [`Discipline`] of the queues:
//!
//! - [`Discipline::Fcfs`] (PVIA): requests join the tail of each queue.
//! - [`Discipline::VirtualClock`] (QoSVIA): each send doorbell is stamped with
//!   `auxVC ← max(now, auxVC) + Vtick` (qos-core's [`VirtualClock::stamp`]; Vtick is the
//!   channel's negotiated inter-arrival time, infinite for best-effort), and the HDMA
//!   and NSDMA queues are kept in stamp order — except that an insertion never passes
//!   the `guard` requests next to the HDMA queue head. Received messages are stamped
//!   the same way with the receiving channel's Vtick before their DMA up. Stamping and
//!   mid-queue insertion cost LCP time (`timestamp`, `insert`, `scan` per request
//!   passed). With `ordered_completions` (an assumption of this model) the LCP also
//!   takes finished host DMA requests by stamp, so that best-effort work waits when the
//!   LANai itself is the bottleneck.
//! - [`Discipline::RateControl`] (beyond the paper: Gulati's IDT/NDT rate control in
//!   place of VirtualClock): a doorbell is held until its channel's next dispatch time
//!   (qos-core's [`RateControl`] against the LANai RTC) before its descriptor DMA is
//!   queued, first come first served. Costs: PVIA's, plus the thesis's rate-control
//!   bookkeeping (`lanai.rate_control` of the GM calibration, find the minimum NDT and
//!   add the IDT) per doorbell and per release (assumption).

use std::collections::{BTreeMap, VecDeque};

use qos_core::sched::rate::RateControl;
use qos_core::sched::virtual_clock::VirtualClock;
use qos_core::sched::{Decision, FlowId, FlowParams, Scheduler};
use qos_core::topology::NodeId;
use qos_core::units::{Duration, Time};

use super::super::sram::{Buf, Sram};
use super::super::{Busy, Nic, NicConfig, Output, Outputs, Timer};
use super::poll::PollLoop;
use super::queue::{Hdma, Job, JobKind, Key, OrderedQueue};
use super::{Chan, LcpCosts, Msg, QosCosts, Stage, StageTimes, ViaCalibration};
use crate::myrinet::flow::xfer;
use crate::myrinet::ids::FlowKey;
use crate::myrinet::packet::{Body, Data, Packet};

/// How the queues of the state machine are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discipline {
    /// PVIA: first come, first served.
    Fcfs,
    /// QoSVIA: VirtualClock stamps.
    VirtualClock,
    /// PVIA with Gulati's rate control holding doorbells (beyond the paper).
    RateControl,
}

const DOORBELL: usize = 0;
const HDMA: usize = 1;
const NSDMA: usize = 2;
const NRDMA: usize = 3;

/// A handler of the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// A send doorbell: program the descriptor DMA (rate control: hold it).
    Doorbell(Buf),
    /// Rate control: a held doorbell's time has come; program its descriptor DMA.
    Release(Buf),
    /// Rate control: nothing was due.
    Nothing,
    /// Program the first page of a data DMA (send after the descriptor, receive after
    /// NRDMA); `pages` is the time of the remaining pages.
    DataProg {
        msg: Buf,
        recv: bool,
        pages: Duration,
    },
    /// Program the remaining pages.
    DataPages { msg: Buf, recv: bool },
    /// The send data is down: NSDMA.
    DataDown(Buf),
    /// NSDMA finished: program the status, start the next transmission.
    NsdmaDone(Buf),
    /// Receive data is up: program the status.
    RecvDataUp(Buf),
    /// A status write is done: retire the message.
    StatusDone(Buf),
}

/// What the LANai is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lcp {
    /// Spinning: no device has an event.
    Spin,
    /// A visit will find an event of `device`; its handler starts at `at`.
    Check { device: usize, at: Time },
    /// Running a handler of `device` until `until`.
    Busy {
        device: usize,
        task: Task,
        until: Time,
    },
}

/// The PVIA family of LANai control programs on one NIC.
#[derive(Debug)]
pub struct Pvia {
    node: NodeId,
    cal: ViaCalibration,
    costs: LcpCosts,
    qos: QosCosts,
    /// Rate control's NDT bookkeeping per doorbell and per release.
    ndt_cost: Duration,
    header: u64,
    tick: Duration,
    discipline: Discipline,
    vc_send: VirtualClock,
    vc_recv: VirtualClock,
    rate: RateControl,
    channels: BTreeMap<FlowKey, Chan>,
    msgs: Sram<Msg>,
    doorbells: VecDeque<(Time, Buf)>,
    held: BTreeMap<FlowKey, VecDeque<Buf>>,
    release_at: Option<Time>,
    hdma: Hdma,
    nsdma_q: OrderedQueue<Buf>,
    nsdma: Option<Buf>,
    nsdma_done: Option<Time>,
    arrivals: VecDeque<(Time, Packet)>,
    lp: PollLoop<4>,
    lcp: Lcp,
    seq: u64,
    stages: StageTimes,
    /// LANai time spent in handlers (not in polling).
    lanai: Duration,
}

impl Pvia {
    /// An idle NIC of node `node` whose queues follow `discipline`.
    pub fn new(node: NodeId, config: &NicConfig, discipline: Discipline) -> Pvia {
        let cal = config.via;
        let costs = cal.pvia;
        Pvia {
            node,
            cal,
            costs,
            qos: cal.qosvia,
            ndt_cost: config.calibration.lanai.rate_control,
            header: config.calibration.network.header.get(),
            tick: config.calibration.clock.tick,
            discipline,
            vc_send: VirtualClock::new(),
            vc_recv: VirtualClock::new(),
            rate: RateControl::default(),
            channels: BTreeMap::new(),
            msgs: Sram::default(),
            doorbells: VecDeque::new(),
            held: BTreeMap::new(),
            release_at: None,
            hdma: Hdma::new(
                discipline == Discipline::VirtualClock && cal.qosvia.ordered_completions,
            ),
            nsdma_q: OrderedQueue::default(),
            nsdma: None,
            nsdma_done: None,
            arrivals: VecDeque::new(),
            lp: PollLoop::new(costs.poll),
            lcp: Lcp::Spin,
            seq: 0,
            stages: StageTimes::default(),
            lanai: Duration::ZERO,
        }
    }

    /// The queue discipline.
    pub fn discipline(&self) -> Discipline {
        self.discipline
    }

    /// The HDMA requests not yet started, head first: (message flow, stamp).
    pub fn hdma_queue(&self) -> Vec<(FlowKey, Time)> {
        self.hdma
            .queue
            .iter()
            .map(|(k, j)| (self.msgs.get(j.msg).flow, k.stamp))
            .collect()
    }

    /// The messages waiting for NSDMA, head first: (flow, stamp).
    pub fn nsdma_queue(&self) -> Vec<(FlowKey, Time)> {
        self.nsdma_q
            .iter()
            .map(|(k, b)| (self.msgs.get(*b).flow, k.stamp))
            .collect()
    }

    fn guard(&self) -> Option<usize> {
        (self.discipline == Discipline::VirtualClock).then_some(self.qos.guard as usize)
    }

    /// LCP time of one insertion into an ordered queue that passes `passed` requests:
    /// a scan, plus the fixed `insert` for a descriptor or data request put into the
    /// middle of the hardware HDMA queue (`mid`). Table 1 shows no extra QoSVIA cost on
    /// the NSDMA and status steps, so those insertions cost only their scan.
    fn insertion(&self, passed: usize, mid: bool) -> Duration {
        match self.discipline {
            Discipline::VirtualClock => {
                let fixed = if mid { self.qos.insert } else { Duration::ZERO };
                fixed + self.qos.scan * passed as u64
            }
            Discipline::Fcfs | Discipline::RateControl => Duration::ZERO,
        }
    }

    fn hdma_insertion(&self, key: Key, mid: bool) -> Duration {
        match self.guard() {
            Some(g) => self.insertion(passed(self.hdma.queue.position(key, g), key), mid),
            None => Duration::ZERO,
        }
    }

    fn next_key(&mut self, stamp: Option<Time>) -> Key {
        self.seq += 1;
        Key {
            stamp: stamp.unwrap_or(Time::NEVER),
            seq: self.seq,
        }
    }

    fn stage(&mut self, stage: Stage, msg: Buf, now: Time) {
        let origin = self.msgs.get(msg).origin;
        self.stages.record(stage, now.saturating_since(origin));
    }

    /// The host DMA request of `kind` for `msg`; data requests are programmed until
    /// `programmed`.
    fn job(&self, msg: Buf, kind: JobKind, programmed: Time) -> Job {
        let h = &self.cal.hdma;
        let bytes = self.msgs.get(msg).bytes;
        let (pages, last) = self.cal.pages(bytes);
        let (time, last) = match kind {
            JobKind::SendDesc | JobKind::RecvDesc => {
                let t = h.read_setup + xfer(h.read, h.descriptor.get());
                (t, t)
            }
            JobKind::SendStatus | JobKind::RecvStatus => {
                let t = h.write_setup + xfer(h.write, h.status.get());
                (t, t)
            }
            JobKind::SendData => (
                h.read_setup * u64::from(pages) + xfer(h.read, bytes),
                h.read_setup + xfer(h.read, last),
            ),
            JobKind::RecvData => (
                h.write_setup * u64::from(pages) + xfer(h.write, bytes),
                h.write_setup + xfer(h.write, last),
            ),
        };
        Job {
            msg,
            kind,
            time,
            last,
            programmed,
        }
    }

    fn submit(&mut self, now: Time, msg: Buf, kind: JobKind, programmed: Time, out: &mut Outputs) {
        let job = self.job(msg, kind, programmed);
        let key = self.msgs.get(msg).key;
        let guard = self.guard();
        self.hdma.submit(now, key, job, guard, out);
    }

    /// LCP time of programming the pages after the first of a data DMA.
    fn pages_cost(&self, msg: Buf, per_insert: Duration) -> Duration {
        let (pages, _) = self.cal.pages(self.msgs.get(msg).bytes);
        (self.costs.per_page + per_insert) * u64::from(pages.saturating_sub(1))
    }

    fn transmit(&mut self, msg: Buf, out: &mut Outputs) {
        let m = self.msgs.get(msg);
        let packet = Packet {
            src: self.node,
            dst: m.peer,
            wire: m.bytes + self.header,
            body: Body::Data(Data {
                flow: m.flow,
                seq: m.seq,
                len: m.bytes,
                last: true,
                negotiated: m.negotiated,
            }),
        };
        self.nsdma = Some(msg);
        out.push(Output::Inject(packet));
    }

    fn refresh(&mut self) {
        let db = self.doorbells.front().map(|d| d.0);
        let db = match (db, self.release_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.lp.set_ready(DOORBELL, db);
        self.lp.set_ready(HDMA, self.hdma.done_since());
        self.lp.set_ready(NSDMA, self.nsdma_done);
        self.lp.set_ready(NRDMA, self.arrivals.front().map(|a| a.0));
    }

    /// Lets the loop find the next event, unless a handler is running.
    fn kick(&mut self, now: Time, out: &mut Outputs) {
        self.refresh();
        if matches!(self.lcp, Lcp::Busy { .. }) {
            return;
        }
        match self.lp.next() {
            Some((device, at)) => {
                let at = at.max(now);
                if self.lcp != (Lcp::Check { device, at }) {
                    self.lcp = Lcp::Check { device, at };
                    out.arm(at, Timer::Processor);
                }
            }
            None => self.lcp = Lcp::Spin,
        }
    }

    /// The visit to `device` found an event at `now`: which handler, and its cost.
    fn begin(&mut self, device: usize, now: Time) -> (Task, Duration) {
        let c = self.costs;
        match device {
            DOORBELL => {
                // Rate control: a held doorbell whose time has come goes before new
                // ones (else a flood of doorbells would hold every release back).
                if self.release_at.is_some_and(|t| t <= now) || self.doorbells.is_empty() {
                    return self.release(now);
                }
                match self.doorbells.pop_front() {
                    Some((_, b)) => self.doorbell(b, now),
                    None => (Task::Nothing, Duration::ZERO),
                }
            }
            HDMA => {
                let Some(job) = self.hdma.take_done() else {
                    return (Task::Nothing, Duration::ZERO);
                };
                let b = job.msg;
                match job.kind {
                    JobKind::SendDesc => {
                        self.stage(Stage::SendDescDown, b, now);
                        let ins = self.hdma_insertion(self.msgs.get(b).key, true);
                        let pages = self.pages_cost(b, ins);
                        (
                            Task::DataProg {
                                msg: b,
                                recv: false,
                                pages,
                            },
                            c.data_prog + ins,
                        )
                    }
                    JobKind::SendData => {
                        self.stage(Stage::SendDataDown, b, now);
                        let ins = match self.guard() {
                            Some(_) => {
                                let key = self.msgs.get(b).key;
                                self.insertion(passed(self.nsdma_q.position(key, 0), key), false)
                            }
                            None => Duration::ZERO,
                        };
                        (Task::DataDown(b), c.nsdma_start + ins)
                    }
                    JobKind::RecvData => {
                        self.stage(Stage::RecvDataUp, b, now);
                        let ins = self.hdma_insertion(self.msgs.get(b).key, false);
                        (Task::RecvDataUp(b), c.status_prog + ins)
                    }
                    JobKind::SendStatus => {
                        self.stage(Stage::SendStatusDone, b, now);
                        (Task::StatusDone(b), c.status_done)
                    }
                    JobKind::RecvStatus => {
                        self.stage(Stage::RecvStatusDone, b, now);
                        (Task::StatusDone(b), c.status_done)
                    }
                    // PVIA's receive descriptors are already in SRAM.
                    JobKind::RecvDesc => (Task::Nothing, Duration::ZERO),
                }
            }
            NSDMA => {
                let (Some(_), Some(b)) = (self.nsdma_done.take(), self.nsdma) else {
                    return (Task::Nothing, Duration::ZERO);
                };
                self.stage(Stage::SendNsdmaDone, b, now);
                let ins = self.hdma_insertion(self.msgs.get(b).key, false);
                let next = if self.nsdma_q.is_empty() {
                    Duration::ZERO
                } else {
                    c.nsdma_start
                };
                (Task::NsdmaDone(b), c.status_prog + ins + next)
            }
            _ => {
                let Some((ready, p)) = self.arrivals.pop_front() else {
                    return (Task::Nothing, Duration::ZERO);
                };
                let Body::Data(d) = p.body else {
                    return (Task::Nothing, Duration::ZERO);
                };
                let stamp = match self.discipline {
                    Discipline::VirtualClock => {
                        let id = FlowId(d.flow.dense());
                        if self.vc_recv.aux_vc(id).is_none() {
                            self.vc_recv.add_flow(
                                id,
                                FlowParams {
                                    vtick: d.negotiated,
                                    ..FlowParams::default()
                                },
                            );
                        }
                        self.vc_recv.stamp(now, id)
                    }
                    Discipline::Fcfs | Discipline::RateControl => None,
                };
                let key = self.next_key(stamp);
                let b = self.msgs.put(Msg {
                    flow: d.flow,
                    peer: p.src,
                    bytes: d.len,
                    key,
                    origin: ready,
                    negotiated: d.negotiated,
                    seq: d.seq,
                });
                // The receive descriptor was pre-posted and fetched before the message
                // came: those two stages are over when it arrives.
                self.stage(Stage::RecvDescProg, b, ready);
                self.stage(Stage::RecvDescDown, b, ready);
                let ins = self.hdma_insertion(key, true);
                let pages = self.pages_cost(b, ins);
                (
                    Task::DataProg {
                        msg: b,
                        recv: true,
                        pages,
                    },
                    c.recv + ins,
                )
            }
        }
    }

    fn doorbell(&mut self, b: Buf, now: Time) -> (Task, Duration) {
        let c = self.costs;
        match self.discipline {
            Discipline::Fcfs => (Task::Doorbell(b), c.doorbell),
            Discipline::VirtualClock => {
                let flow = self.msgs.get(b).flow;
                let stamp = self.vc_send.stamp(now, FlowId(flow.dense()));
                let seq = self.msgs.get(b).key.seq;
                let key = Key {
                    stamp: stamp.unwrap_or(Time::NEVER),
                    seq,
                };
                self.msgs.get_mut(b).key = key;
                let ins = self.hdma_insertion(key, true);
                (Task::Doorbell(b), c.doorbell + self.qos.timestamp + ins)
            }
            Discipline::RateControl => (Task::Doorbell(b), c.doorbell + self.ndt_cost),
        }
    }

    /// Rate control: asks the scheduler whether a held doorbell may go now.
    fn release(&mut self, now: Time) -> (Task, Duration) {
        let check = self.ndt_cost;
        if self.release_at.is_none_or(|t| t > now) {
            return (Task::Nothing, Duration::ZERO);
        }
        let tick = self.tick.as_ps().max(1);
        let rtc = Time::from_ps(now.as_ps() / tick * tick);
        match self.rate.next(rtc) {
            Decision::Dispatch(id) => {
                let flow = self
                    .held
                    .iter()
                    .find(|(f, q)| f.dense() == id.0 && !q.is_empty())
                    .map(|(f, _)| *f);
                match flow.and_then(|f| self.held.get_mut(&f)?.pop_front()) {
                    Some(b) => (Task::Release(b), check),
                    None => (Task::Nothing, check),
                }
            }
            Decision::WaitUntil(t) => {
                self.release_at = Some(t.max(rtc + self.tick));
                (Task::Nothing, check)
            }
            Decision::Idle => {
                self.release_at = None;
                (Task::Nothing, check)
            }
        }
    }

    /// The handler `task` ends at `now`; returns a follow-on handler of the same visit.
    fn finish(&mut self, task: Task, now: Time, out: &mut Outputs) -> Option<(Task, Duration)> {
        match task {
            Task::Nothing => {}
            Task::Doorbell(b) => {
                if self.discipline == Discipline::RateControl {
                    let flow = self.msgs.get(b).flow;
                    self.rate.enqueue(now, FlowId(flow.dense()), 1);
                    self.held.entry(flow).or_default().push_back(b);
                    self.release_at = Some(now);
                } else {
                    self.submit(now, b, JobKind::SendDesc, now, out);
                    self.stage(Stage::SendDescProg, b, now);
                }
            }
            Task::Release(b) => {
                self.submit(now, b, JobKind::SendDesc, now, out);
                self.stage(Stage::SendDescProg, b, now);
                self.release_at = Some(now);
            }
            Task::DataProg { msg, recv, pages } => {
                let kind = if recv {
                    JobKind::RecvData
                } else {
                    JobKind::SendData
                };
                self.submit(now, msg, kind, now + pages, out);
                if recv {
                    out.push(Output::ReceiveBufferFreed);
                }
                if !pages.is_zero() {
                    return Some((Task::DataPages { msg, recv }, pages));
                }
                return self.finish(Task::DataPages { msg, recv }, now, out);
            }
            Task::DataPages { msg, recv } => {
                let s = if recv {
                    Stage::RecvDataProg
                } else {
                    Stage::SendDataProg
                };
                self.stage(s, msg, now);
            }
            Task::DataDown(b) => {
                if self.nsdma.is_none() {
                    self.transmit(b, out);
                } else {
                    let key = self.msgs.get(b).key;
                    match self.guard() {
                        Some(_) => {
                            self.nsdma_q.insert(key, b, 0);
                        }
                        None => self.nsdma_q.push_back(key, b),
                    }
                }
            }
            Task::NsdmaDone(b) => {
                self.nsdma = None;
                if let Some((_, next)) = self.nsdma_q.pop_front() {
                    self.transmit(next, out);
                }
                self.submit(now, b, JobKind::SendStatus, now, out);
                self.stage(Stage::SendStatusProg, b, now);
            }
            Task::RecvDataUp(b) => {
                self.submit(now, b, JobKind::RecvStatus, now, out);
                self.stage(Stage::RecvStatusProg, b, now);
            }
            Task::StatusDone(b) => {
                self.msgs.take(b);
            }
        }
        None
    }

    fn processor(&mut self, now: Time, out: &mut Outputs) {
        match self.lcp {
            Lcp::Check { device, at } if at == now => {
                let (task, cost) = self.begin(device, now);
                self.lanai += cost;
                self.lcp = Lcp::Busy {
                    device,
                    task,
                    until: now + cost,
                };
                out.arm(now + cost, Timer::Processor);
            }
            Lcp::Busy {
                device,
                task,
                until,
            } if until == now => {
                self.lcp = Lcp::Spin;
                match self.finish(task, now, out) {
                    Some((task, cost)) => {
                        self.lanai += cost;
                        self.lcp = Lcp::Busy {
                            device,
                            task,
                            until: now + cost,
                        };
                        out.arm(now + cost, Timer::Processor);
                    }
                    None => {
                        self.lp.resume_after(device, now);
                        self.kick(now, out);
                    }
                }
            }
            _ => {}
        }
    }

    fn host_dma(&mut self, now: Time, out: &mut Outputs) {
        if let Some(job) = self.hdma.complete(now, out) {
            let m = self.msgs.get(job.msg);
            match job.kind {
                JobKind::SendStatus => out.push(Output::SendCompleted(m.flow)),
                JobKind::RecvStatus => out.push(Output::ToHost {
                    flow: m.flow,
                    bytes: m.bytes,
                    last: true,
                }),
                _ => {}
            }
        }
        self.kick(now, out);
    }
}

/// Requests an insertion at `position` scans: those ahead of it, from the head; a
/// best-effort request (infinite stamp) is appended at the tail without a scan.
fn passed(position: usize, key: Key) -> usize {
    if key.stamp == Time::NEVER {
        0
    } else {
        position
    }
}

fn vtick(interval: Duration) -> Option<Duration> {
    (!interval.is_zero()).then_some(interval)
}

impl Nic for Pvia {
    fn open_flow(
        &mut self,
        _now: Time,
        flow: FlowKey,
        dst: NodeId,
        idt: Duration,
        _out: &mut Outputs,
    ) {
        let id = FlowId(flow.dense());
        let next_seq = self.channels.get(&flow).map_or(0, |c| c.next_seq);
        self.channels.insert(
            flow,
            Chan {
                dst,
                interval: idt,
                next_seq,
            },
        );
        self.vc_send.add_flow(
            id,
            FlowParams {
                vtick: vtick(idt),
                ..FlowParams::default()
            },
        );
        self.rate.add_flow(
            id,
            FlowParams {
                idt,
                ..FlowParams::default()
            },
        );
    }

    /// Doorbells already rung still go; held ones (rate control) are dropped.
    fn close_flow(&mut self, _now: Time, flow: FlowKey, _out: &mut Outputs) {
        self.channels.remove(&flow);
        self.rate.remove_flow(FlowId(flow.dense()));
        for b in self.held.remove(&flow).unwrap_or_default() {
            self.msgs.take(b);
        }
    }

    fn set_idt(&mut self, _now: Time, flow: FlowKey, idt: Duration, _out: &mut Outputs) {
        let Some(c) = self.channels.get_mut(&flow) else {
            return;
        };
        c.interval = idt;
        let id = FlowId(flow.dense());
        self.vc_send.add_flow(
            id,
            FlowParams {
                vtick: vtick(idt),
                ..FlowParams::default()
            },
        );
        self.rate.set_idt(id, idt);
    }

    fn host_post(&mut self, now: Time, flow: FlowKey, bytes: u64, out: &mut Outputs) {
        let Some(c) = self.channels.get_mut(&flow) else {
            // A doorbell on a channel that is not open: the LCP ignores it.
            return;
        };
        let (dst, interval, seq) = (c.dst, c.interval, c.next_seq);
        c.next_seq += 1;
        let key = self.next_key(None);
        let b = self.msgs.put(Msg {
            flow,
            peer: dst,
            bytes,
            key,
            origin: now,
            negotiated: vtick(interval),
            seq,
        });
        self.doorbells.push_back((now, b));
        self.kick(now, out);
    }

    fn packet_arrived(&mut self, now: Time, packet: Packet, out: &mut Outputs) {
        self.arrivals
            .push_back((now + self.costs.rx_latency, packet));
        self.kick(now, out);
    }

    fn tail_left(&mut self, now: Time, out: &mut Outputs) {
        if self.nsdma.is_some() {
            self.nsdma_done = Some(now);
        }
        self.kick(now, out);
    }

    fn timer(&mut self, now: Time, timer: Timer, out: &mut Outputs) {
        match timer {
            Timer::Processor => self.processor(now, out),
            Timer::HostDma => self.host_dma(now, out),
            Timer::Wake | Timer::Ack(_) => self.kick(now, out),
        }
    }

    fn receive_buffers(&self) -> u32 {
        self.cal.nic.receive_buffers
    }

    fn idt(&self, flow: FlowKey) -> Option<Duration> {
        self.channels.get(&flow).map(|c| c.interval)
    }

    fn stage_times(&self) -> Option<&StageTimes> {
        Some(&self.stages)
    }

    fn busy(&self) -> Busy {
        Busy {
            processor: self.lanai,
            host_dma: self.hdma.occupied,
            ..Busy::default()
        }
    }
}
