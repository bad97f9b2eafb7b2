//! SVIA (Nagar §3.1, Fig 2): the LCP does the whole sequence of a send — program the
//! descriptor DMA, wait, program the data DMA, wait, start NSDMA, wait, program the
//! status DMA, wait — or of a receive (fetch the receive descriptor, DMA the data up,
//! write the status) one operation after another, busy-waiting on each device. Between
//! sequences it polls the doorbell queue and NRDMA in turn. The only overlap is the one
//! of the public implementation the paper measured: while it waits for the host DMA it
//! also polls NRDMA, taking arrived messages off it (re-arming it) so that the network
//! is not held up, and processes them after the current sequence.

use std::collections::{BTreeMap, VecDeque};

use qos_core::topology::NodeId;
use qos_core::units::{Duration, Time};

use super::super::sram::{Buf, Sram};
use super::super::{Busy, Nic, NicConfig, Output, Outputs, Timer};
use super::poll::PollLoop;
use super::queue::{Hdma, Job, JobKind, Key};
use super::{Chan, LcpCosts, Msg, Stage, StageTimes, ViaCalibration};
use crate::myrinet::flow::xfer;
use crate::myrinet::ids::FlowKey;
use crate::myrinet::packet::{Body, Data, Packet};

const DOORBELL: usize = 0;
const NRDMA: usize = 1;

/// One LCP operation of a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Send doorbell: program the descriptor DMA.
    Doorbell(Buf),
    /// Arrival: program the receive descriptor DMA (and re-arm NRDMA unless done).
    Recv { msg: Buf, rearmed: bool },
    /// Program the first page of a data DMA; `pages`: the time of the others.
    DataProg {
        msg: Buf,
        recv: bool,
        pages: Duration,
    },
    /// Program the other pages.
    DataPages { msg: Buf, recv: bool },
    /// Start NSDMA.
    NsdmaStart(Buf),
    /// Program the status DMA.
    StatusProg { msg: Buf, recv: bool },
    /// Retire the message.
    StatusDone(Buf),
    /// Nothing (an event that vanished).
    Nothing,
}

/// What the LANai is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Polling the doorbell queue and NRDMA; nothing found yet.
    Spin,
    /// A visit will find an event of `device`; its operation starts at `at`.
    Check { device: usize, at: Time },
    /// Running `op` (of a sequence started from `device`) until `until`.
    Busy { device: usize, op: Op, until: Time },
    /// Busy-waiting for the host DMA.
    WaitHdma { device: usize },
    /// Busy-waiting for NSDMA.
    WaitNsdma { device: usize, msg: Buf },
}

/// The sequential LANai control program of one NIC.
#[derive(Debug)]
pub struct Svia {
    node: NodeId,
    cal: ViaCalibration,
    costs: LcpCosts,
    header: u64,
    channels: BTreeMap<FlowKey, Chan>,
    msgs: Sram<Msg>,
    doorbells: VecDeque<(Time, Buf)>,
    /// Arrived messages: (visible from, packet, NRDMA already re-armed).
    arrivals: VecDeque<(Time, Packet, bool)>,
    hdma: Hdma,
    lp: PollLoop<2>,
    state: State,
    seq: u64,
    stages: StageTimes,
    /// LANai time spent in operations (not in polling or busy-waiting).
    lanai: Duration,
}

impl Svia {
    /// An idle NIC of node `node`.
    pub fn new(node: NodeId, config: &NicConfig) -> Svia {
        let cal = config.via;
        Svia {
            node,
            cal,
            costs: cal.svia,
            header: config.calibration.network.header.get(),
            channels: BTreeMap::new(),
            msgs: Sram::default(),
            doorbells: VecDeque::new(),
            arrivals: VecDeque::new(),
            hdma: Hdma::default(),
            lp: PollLoop::new(cal.svia.poll),
            state: State::Spin,
            seq: 0,
            stages: StageTimes::default(),
            lanai: Duration::ZERO,
        }
    }

    fn stage(&mut self, stage: Stage, msg: Buf, now: Time) {
        let origin = self.msgs.get(msg).origin;
        self.stages.record(stage, now.saturating_since(origin));
    }

    fn submit(&mut self, now: Time, msg: Buf, kind: JobKind, programmed: Time, out: &mut Outputs) {
        let h = &self.cal.hdma;
        let m = self.msgs.get(msg);
        let (pages, last) = self.cal.pages(m.bytes);
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
                h.read_setup * u64::from(pages) + xfer(h.read, m.bytes),
                h.read_setup + xfer(h.read, last),
            ),
            JobKind::RecvData => (
                h.write_setup * u64::from(pages) + xfer(h.write, m.bytes),
                h.write_setup + xfer(h.write, last),
            ),
        };
        let job = Job {
            msg,
            kind,
            time,
            last,
            programmed,
        };
        self.hdma.submit(now, m.key, job, None, out);
    }

    fn pages_cost(&self, msg: Buf) -> Duration {
        let (pages, _) = self.cal.pages(self.msgs.get(msg).bytes);
        self.costs.per_page * u64::from(pages.saturating_sub(1))
    }

    fn refresh(&mut self) {
        self.lp
            .set_ready(DOORBELL, self.doorbells.front().map(|d| d.0));
        self.lp.set_ready(NRDMA, self.arrivals.front().map(|a| a.0));
    }

    fn kick(&mut self, now: Time, out: &mut Outputs) {
        self.refresh();
        if !matches!(self.state, State::Spin | State::Check { .. }) {
            return;
        }
        match self.lp.next() {
            Some((device, at)) => {
                let at = at.max(now);
                if self.state != (State::Check { device, at }) {
                    self.state = State::Check { device, at };
                    out.arm(at, Timer::Processor);
                }
            }
            None => self.state = State::Spin,
        }
    }

    fn run_op(&mut self, device: usize, op: Op, cost: Duration, now: Time, out: &mut Outputs) {
        self.lanai += cost;
        self.state = State::Busy {
            device,
            op,
            until: now + cost,
        };
        out.arm(now + cost, Timer::Processor);
    }

    /// The visit to `device` found an event: the first operation of its sequence.
    fn begin(&mut self, device: usize) -> (Op, Duration) {
        if device == DOORBELL {
            return match self.doorbells.pop_front() {
                Some((_, b)) => (Op::Doorbell(b), self.costs.doorbell),
                None => (Op::Nothing, Duration::ZERO),
            };
        }
        let Some((ready, p, rearmed)) = self.arrivals.pop_front() else {
            return (Op::Nothing, Duration::ZERO);
        };
        let Body::Data(d) = p.body else {
            return (Op::Nothing, Duration::ZERO);
        };
        self.seq += 1;
        let b = self.msgs.put(Msg {
            flow: d.flow,
            peer: p.src,
            bytes: d.len,
            key: Key {
                stamp: Time::NEVER,
                seq: self.seq,
            },
            origin: ready,
            negotiated: d.negotiated,
            seq: d.seq,
        });
        (Op::Recv { msg: b, rearmed }, self.costs.recv)
    }

    /// `op` of a sequence from `device` is over at `now`: what comes next.
    fn end(&mut self, device: usize, op: Op, now: Time, out: &mut Outputs) {
        match op {
            Op::Nothing => self.sequence_over(device, now, out),
            Op::Doorbell(b) => {
                self.submit(now, b, JobKind::SendDesc, now, out);
                self.stage(Stage::SendDescProg, b, now);
                self.state = State::WaitHdma { device };
            }
            Op::Recv { msg, rearmed } => {
                self.submit(now, msg, JobKind::RecvDesc, now, out);
                self.stage(Stage::RecvDescProg, msg, now);
                self.state = State::WaitHdma { device };
                if !rearmed {
                    out.push(Output::ReceiveBufferFreed);
                }
            }
            Op::DataProg { msg, recv, pages } => {
                let kind = if recv {
                    JobKind::RecvData
                } else {
                    JobKind::SendData
                };
                self.submit(now, msg, kind, now + pages, out);
                if pages.is_zero() {
                    self.end(device, Op::DataPages { msg, recv }, now, out);
                } else {
                    self.run_op(device, Op::DataPages { msg, recv }, pages, now, out);
                }
            }
            Op::DataPages { msg, recv } => {
                let s = if recv {
                    Stage::RecvDataProg
                } else {
                    Stage::SendDataProg
                };
                self.stage(s, msg, now);
                self.state = State::WaitHdma { device };
            }
            Op::NsdmaStart(b) => {
                let m = self.msgs.get(b);
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
                out.push(Output::Inject(packet));
                self.state = State::WaitNsdma { device, msg: b };
            }
            Op::StatusProg { msg, recv } => {
                let (kind, s) = if recv {
                    (JobKind::RecvStatus, Stage::RecvStatusProg)
                } else {
                    (JobKind::SendStatus, Stage::SendStatusProg)
                };
                self.submit(now, msg, kind, now, out);
                self.stage(s, msg, now);
                self.state = State::WaitHdma { device };
            }
            Op::StatusDone(b) => {
                self.msgs.take(b);
                self.sequence_over(device, now, out);
            }
        }
    }

    fn sequence_over(&mut self, device: usize, now: Time, out: &mut Outputs) {
        self.state = State::Spin;
        self.lp.resume_after(device, now);
        self.kick(now, out);
    }

    fn processor(&mut self, now: Time, out: &mut Outputs) {
        match self.state {
            State::Check { device, at } if at == now => {
                let (op, cost) = self.begin(device);
                self.run_op(device, op, cost, now, out);
            }
            State::Busy { device, op, until } if until == now => self.end(device, op, now, out),
            _ => {}
        }
    }

    /// The host DMA finished a request: the busy-waiting LCP sees it at once.
    fn host_dma(&mut self, now: Time, out: &mut Outputs) {
        let Some(job) = self.hdma.complete(now, out) else {
            return;
        };
        self.hdma.take_done();
        let m = self.msgs.get(job.msg);
        let c = self.costs;
        let State::WaitHdma { device } = self.state else {
            return;
        };
        let b = job.msg;
        match job.kind {
            JobKind::SendDesc => {
                self.stage(Stage::SendDescDown, b, now);
                let pages = self.pages_cost(b);
                self.run_op(
                    device,
                    Op::DataProg {
                        msg: b,
                        recv: false,
                        pages,
                    },
                    c.data_prog,
                    now,
                    out,
                );
            }
            JobKind::RecvDesc => {
                self.stage(Stage::RecvDescDown, b, now);
                let pages = self.pages_cost(b);
                self.run_op(
                    device,
                    Op::DataProg {
                        msg: b,
                        recv: true,
                        pages,
                    },
                    c.data_prog,
                    now,
                    out,
                );
            }
            JobKind::SendData => {
                self.stage(Stage::SendDataDown, b, now);
                self.run_op(device, Op::NsdmaStart(b), c.nsdma_start, now, out);
            }
            JobKind::RecvData => {
                self.stage(Stage::RecvDataUp, b, now);
                self.run_op(
                    device,
                    Op::StatusProg { msg: b, recv: true },
                    c.status_prog,
                    now,
                    out,
                );
            }
            JobKind::SendStatus => {
                out.push(Output::SendCompleted(m.flow));
                self.stage(Stage::SendStatusDone, b, now);
                self.run_op(device, Op::StatusDone(b), c.status_done, now, out);
            }
            JobKind::RecvStatus => {
                out.push(Output::ToHost {
                    flow: m.flow,
                    bytes: m.bytes,
                    last: true,
                });
                self.stage(Stage::RecvStatusDone, b, now);
                self.run_op(device, Op::StatusDone(b), c.status_done, now, out);
            }
        }
    }
}

impl Nic for Svia {
    fn open_flow(
        &mut self,
        _now: Time,
        flow: FlowKey,
        dst: NodeId,
        idt: Duration,
        _out: &mut Outputs,
    ) {
        let next_seq = self.channels.get(&flow).map_or(0, |c| c.next_seq);
        self.channels.insert(
            flow,
            Chan {
                dst,
                interval: idt,
                next_seq,
            },
        );
    }

    fn close_flow(&mut self, _now: Time, flow: FlowKey, _out: &mut Outputs) {
        self.channels.remove(&flow);
    }

    fn set_idt(&mut self, _now: Time, flow: FlowKey, idt: Duration, _out: &mut Outputs) {
        if let Some(c) = self.channels.get_mut(&flow) {
            c.interval = idt;
        }
    }

    fn host_post(&mut self, now: Time, flow: FlowKey, bytes: u64, out: &mut Outputs) {
        let Some(c) = self.channels.get_mut(&flow) else {
            return;
        };
        let (dst, interval, seq) = (c.dst, c.interval, c.next_seq);
        c.next_seq += 1;
        self.seq += 1;
        let b = self.msgs.put(Msg {
            flow,
            peer: dst,
            bytes,
            key: Key {
                stamp: Time::NEVER,
                seq: self.seq,
            },
            origin: now,
            negotiated: (!interval.is_zero()).then_some(interval),
            seq,
        });
        self.doorbells.push_back((now, b));
        self.kick(now, out);
    }

    fn packet_arrived(&mut self, now: Time, packet: Packet, out: &mut Outputs) {
        // Waiting on the host DMA, the LCP polls NRDMA too and re-arms it at once.
        let rearmed = matches!(self.state, State::WaitHdma { .. });
        if rearmed {
            out.push(Output::ReceiveBufferFreed);
        }
        self.arrivals
            .push_back((now + self.costs.rx_latency, packet, rearmed));
        self.kick(now, out);
    }

    fn tail_left(&mut self, now: Time, out: &mut Outputs) {
        if let State::WaitNsdma { device, msg } = self.state {
            self.stage(Stage::SendNsdmaDone, msg, now);
            let c = self.costs.status_prog;
            self.run_op(device, Op::StatusProg { msg, recv: false }, c, now, out);
        }
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
