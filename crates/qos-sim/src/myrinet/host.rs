//! The hosts: one application per flow, written like the thesis's benchmarks (§5.1).
//!
//! - **Stream**: posts messages as long as it holds send tokens, while active; its
//!   bandwidth is what the receiver gets within the measurement window.
//! - **Pump** (bandwidth test): posts N messages; the receiver answers the N-th with a
//!   4-byte message; bandwidth = volume / (answer time − first post).
//! - **Ping-pong** (latency test): one message each way per round; latency = mean
//!   round trip / 2.
//! - **Timed emissions** (Nagar §4): one message per emission of a CBR, Poisson or MPEG
//!   source, posted at its time whatever is outstanding (VIA has no flow control); the
//!   receiving application records when each arrives, for the jitter fraction θ and
//!   the one-way latency.
//! - **Ping-bulk** (Nagar Table 2): a window of messages one way, then one back.
//!
//! Every message costs the host the GM post time; at the MPI level it also costs a
//! fixed per-message time and a copy at the MPI copy rate, done before the GM post
//! (assumption standing for MPICH-GM's overhead, §4.4, §5.5). A host prepares one
//! message of a flow at a time. Posting times get a tiny seeded jitter (≤ 0.1 µs) so
//! that the seed matters and runs stay reproducible. Noticing a completion or a
//! delivered message costs the host its polling time.
//!
//! Application `i` sends on [`FlowKey::forward`] from its source host; the answers of
//! the pump and ping-pong go back on [`FlowKey::reply`] from the destination.
//!
//! [`Hosts`] is a component: it is told of time events it scheduled ([`HostEvent`]),
//! of its NICs' notifications and of the manager's answers, and asks for things with
//! [`HostOutput`]s.

#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use qos_core::topology::NodeId;
use qos_core::units::{Duration, Time};

use super::calibration::Calibration;
use super::flow::{xfer, Api, FlowOutcome, FlowSpec, Rate, Workload};
use super::ids::{AppId, Direction, FlowKey};
use crate::engine::SimRng;
use crate::workload::spec::Emissions;
use crate::workload::Emission;

/// Size of the pump's final answer (§5.1 "a small-sized acknowledgement").
pub const ANSWER_BYTES: u64 = 4;

/// What happens on the hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostEvent {
    /// A host finished posting a send descriptor for a flow.
    Posted(FlowKey),
    /// A host noticed a completed send of a flow.
    SendDone(FlowKey),
    /// A host noticed a message delivered on a flow.
    Delivered(FlowKey),
    /// An application's start time.
    Start(AppId),
    /// An application's stop time.
    Stop(AppId),
    /// A timed source emits its next message.
    Emit(AppId),
}

/// What the hosts ask of the cluster, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostOutput {
    /// Call [`Hosts::handle`] with `event` at `at`.
    Schedule {
        /// When.
        at: Time,
        /// What.
        event: HostEvent,
    },
    /// Open `flow` on `node`'s NIC towards `peer` with this IDT (zero: unregulated).
    Open {
        /// The NIC.
        node: NodeId,
        /// The flow.
        flow: FlowKey,
        /// Where its packets go.
        peer: NodeId,
        /// Its initial IDT.
        idt: Duration,
    },
    /// Close `flow` on `node`'s NIC.
    Close {
        /// The NIC.
        node: NodeId,
        /// The flow.
        flow: FlowKey,
    },
    /// Post a send descriptor of `bytes` for `flow` to `node`'s NIC.
    Post {
        /// The NIC.
        node: NodeId,
        /// The flow.
        flow: FlowKey,
        /// Message size.
        bytes: u64,
    },
    /// Ask the bandwidth manager to admit an application's flow (blocking call).
    Request(AppId),
    /// Tell the bandwidth manager an application's flow ended.
    Release(AppId),
}

/// One flow's application, both ends.
#[derive(Debug)]
struct FlowApp {
    name: String,
    src: NodeId,
    dst: NodeId,
    len: u64,
    rate: Rate,
    workload: Workload,
    /// Allowed to post (started, granted, not stopped).
    active: bool,
    /// The manager refused it.
    rejected: bool,
    tokens: u32,
    posting: bool,
    posted: u64,
    rx_msgs: u64,
    rx_window: u64,
    start: Option<Time>,
    end: Option<Time>,
    rounds: u64,
    rng: SimRng,
    mpi_cost: Duration,
    /// Timed sources: what comes next.
    emitter: Option<Emissions>,
    next_emit: Option<Emission>,
    /// Emitted, not yet posted: (emission time, bytes, last message of its emission).
    to_post: VecDeque<(Time, u64, bool)>,
    /// Posted, not yet received: emission times in order, and whether the message is
    /// the last of its emission.
    in_flight: VecDeque<(Time, bool)>,
    /// (emitted, received) of timed messages within the window.
    pairs: Vec<(Time, Time)>,
    /// Ping-bulk: messages still to post this way / back, replies received.
    bulk_left: u32,
    reply_left: u32,
    replies: u64,
    seed: u64,
}

impl FlowApp {
    fn new(id: AppId, f: &FlowSpec, cal: &Calibration, seed: u64) -> FlowApp {
        let len = f.message.get();
        let mpi_cost = match f.api {
            Api::Gm => Duration::ZERO,
            Api::Mpi => cal.mpi.per_message + xfer(cal.mpi.copy_bandwidth, len),
        };
        FlowApp {
            name: f.name.clone(),
            src: f.src,
            dst: f.dst,
            len,
            rate: f.rate,
            workload: f.workload,
            active: false,
            rejected: false,
            tokens: cal.host.send_tokens,
            posting: false,
            posted: 0,
            rx_msgs: 0,
            rx_window: 0,
            start: None,
            end: None,
            rounds: 0,
            rng: SimRng::stream(seed, id.0 as u64 + 1),
            mpi_cost,
            emitter: None,
            next_emit: None,
            to_post: VecDeque::new(),
            in_flight: VecDeque::new(),
            pairs: Vec::new(),
            bulk_left: 0,
            reply_left: 0,
            replies: 0,
            seed: seed ^ (u64::from(id.0) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        }
    }

    /// Whether the application has nothing more to measure.
    fn finished(&self) -> bool {
        self.rejected || self.end.is_some()
    }

    fn is_stream(&self) -> bool {
        matches!(self.workload, Workload::Stream | Workload::Emit(_))
    }
}

/// The applications of every host.
#[derive(Debug)]
pub struct Hosts {
    apps: Vec<FlowApp>,
    window: (Time, Time),
    post: Duration,
    poll: Duration,
}

impl Hosts {
    /// The applications of `flows` (application `i` runs flow `i`), measuring stream
    /// bandwidth within `window`.
    pub fn new(flows: &[FlowSpec], cal: &Calibration, window: (Time, Time), seed: u64) -> Hosts {
        Hosts {
            apps: flows
                .iter()
                .enumerate()
                .map(|(i, f)| FlowApp::new(AppId(i as u32), f, cal, seed))
                .collect(),
            window,
            post: cal.host.post,
            poll: cal.host.poll,
        }
    }

    /// Whether every application has finished (streams run to the time limit unless
    /// refused; the other benchmarks end by themselves).
    pub fn all_done(&self) -> bool {
        self.apps
            .iter()
            .all(|a| a.finished() || (a.is_stream() && a.rejected))
    }

    /// Whether the manager refused an application.
    pub fn rejected(&self, app: AppId) -> bool {
        self.apps[app.index()].rejected
    }

    /// An event scheduled through [`HostOutput::Schedule`] is due.
    pub fn handle(&mut self, now: Time, ev: HostEvent, out: &mut Vec<HostOutput>) {
        match ev {
            HostEvent::Posted(flow) => self.posted(now, flow, out),
            HostEvent::SendDone(flow) => self.send_done(now, flow, out),
            HostEvent::Delivered(flow) => self.delivered(now, flow, out),
            HostEvent::Start(app) => self.start(now, app, out),
            HostEvent::Stop(app) => self.stop(app, out),
            HostEvent::Emit(app) => self.emit(now, app, out),
        }
    }

    /// A NIC reports a posted message of `flow` complete: the host notices it after its
    /// polling time.
    pub fn send_completed(&mut self, now: Time, flow: FlowKey, out: &mut Vec<HostOutput>) {
        out.push(HostOutput::Schedule {
            at: now.saturating_add(self.poll),
            event: HostEvent::SendDone(flow),
        });
    }

    /// A NIC wrote `bytes` of `flow` into host memory; `last` completes a message,
    /// which the host notices after its polling time.
    pub fn received(
        &mut self,
        now: Time,
        flow: FlowKey,
        bytes: u64,
        last: bool,
        out: &mut Vec<HostOutput>,
    ) {
        if flow.direction == Direction::Forward && now >= self.window.0 && now < self.window.1 {
            self.apps[flow.app.index()].rx_window += bytes;
        }
        if last {
            out.push(HostOutput::Schedule {
                at: now.saturating_add(self.poll),
                event: HostEvent::Delivered(flow),
            });
        }
    }

    /// The manager's answer reached the application.
    pub fn answer(&mut self, now: Time, app: AppId, granted: bool, out: &mut Vec<HostOutput>) {
        if granted {
            self.activate(now, app, out);
        } else {
            self.apps[app.index()].rejected = true;
        }
    }

    fn start(&mut self, now: Time, app: AppId, out: &mut Vec<HostOutput>) {
        let a = &self.apps[app.index()];
        let idt = match a.rate {
            Rate::Idt(d) => d,
            // Until the manager answers, nothing is sent anyway.
            Rate::Premium(_) | Rate::BestEffort => Duration::ZERO,
        };
        out.push(HostOutput::Open {
            node: a.src,
            flow: FlowKey::forward(app),
            peer: a.dst,
            idt,
        });
        out.push(HostOutput::Open {
            node: a.dst,
            flow: FlowKey::reply(app),
            peer: a.src,
            idt: Duration::ZERO,
        });
        match a.rate {
            Rate::Idt(_) => self.activate(now, app, out),
            Rate::Premium(_) | Rate::BestEffort => out.push(HostOutput::Request(app)),
        }
    }

    /// The flow may send (started, and granted if it asked the manager).
    fn activate(&mut self, now: Time, app: AppId, out: &mut Vec<HostOutput>) {
        let a = &mut self.apps[app.index()];
        a.active = true;
        if a.start.is_none() {
            a.start = Some(now);
        }
        match a.workload {
            Workload::PingPong { .. } => self.post(now, FlowKey::forward(app), out),
            Workload::Stream | Workload::Pump { .. } => self.try_post(now, app, out),
            Workload::Emit(spec) => {
                if a.emitter.is_none() {
                    let mut it = spec.emissions(now, qos_core::units::Bytes::new(a.len), a.seed);
                    a.next_emit = it.as_mut().and_then(Iterator::next);
                    a.emitter = it;
                    if let Some(e) = a.next_emit {
                        out.push(HostOutput::Schedule {
                            at: e.at.max(now),
                            event: HostEvent::Emit(app),
                        });
                    }
                }
            }
            Workload::PingBulk { window, .. } => {
                a.bulk_left = window.max(1);
                self.post(now, FlowKey::forward(app), out);
            }
        }
    }

    /// A timed source's emission is due: queue it for posting, schedule the next.
    fn emit(&mut self, now: Time, app: AppId, out: &mut Vec<HostOutput>) {
        let a = &mut self.apps[app.index()];
        if !a.active {
            return;
        }
        let Some(e) = a.next_emit.take() else {
            return;
        };
        // An emission larger than the message size is cut into messages of that size
        // (the last one shorter), posted back to back.
        let mut left = e.size.get();
        let cut = a.len.max(1);
        while left > cut {
            a.to_post.push_back((e.at, cut, false));
            left -= cut;
        }
        a.to_post.push_back((e.at, left, true));
        a.next_emit = a.emitter.as_mut().and_then(Iterator::next);
        if let Some(n) = a.next_emit {
            out.push(HostOutput::Schedule {
                at: n.at.max(now),
                event: HostEvent::Emit(app),
            });
        }
        if !a.posting {
            self.post(now, FlowKey::forward(app), out);
        }
    }

    fn stop(&mut self, app: AppId, out: &mut Vec<HostOutput>) {
        let a = &mut self.apps[app.index()];
        let was = a.active;
        a.active = false;
        out.push(HostOutput::Close {
            node: a.src,
            flow: FlowKey::forward(app),
        });
        if was && !matches!(a.rate, Rate::Idt(_)) {
            out.push(HostOutput::Release(app));
        }
    }

    fn try_post(&mut self, now: Time, app: AppId, out: &mut Vec<HostOutput>) {
        let a = &self.apps[app.index()];
        if !a.active || a.posting || a.tokens == 0 {
            return;
        }
        let more = match a.workload {
            Workload::Stream => true,
            Workload::Pump { messages } => a.posted < messages,
            Workload::PingPong { .. } | Workload::Emit(_) | Workload::PingBulk { .. } => false,
        };
        if more {
            self.post(now, FlowKey::forward(app), out);
        }
    }

    /// Starts posting one message of `flow`: the application's next message, or its
    /// answer back.
    fn post(&mut self, now: Time, flow: FlowKey, out: &mut Vec<HostOutput>) {
        let a = &mut self.apps[flow.app.index()];
        let jitter = a.rng.jitter(Duration::from_ns(100));
        let mut cost = self.post + jitter;
        if flow.direction == Direction::Forward {
            a.posting = true;
            cost += a.mpi_cost;
        }
        out.push(HostOutput::Schedule {
            at: now.saturating_add(cost),
            event: HostEvent::Posted(flow),
        });
    }

    fn posted(&mut self, now: Time, flow: FlowKey, out: &mut Vec<HostOutput>) {
        let a = &mut self.apps[flow.app.index()];
        if flow.direction == Direction::Reply {
            let bytes = match a.workload {
                Workload::PingPong { .. } | Workload::PingBulk { .. } => a.len,
                _ => ANSWER_BYTES,
            };
            out.push(HostOutput::Post {
                node: a.dst,
                flow,
                bytes,
            });
            if matches!(a.workload, Workload::PingBulk { .. }) {
                a.reply_left = a.reply_left.saturating_sub(1);
                if a.reply_left > 0 {
                    self.post(now, flow, out);
                }
            }
            return;
        }
        a.posting = false;
        match a.workload {
            Workload::Emit(_) => {
                let Some((emitted, bytes, last)) = a.to_post.pop_front() else {
                    return;
                };
                a.posted += 1;
                a.in_flight.push_back((emitted, last));
                out.push(HostOutput::Post {
                    node: a.src,
                    flow,
                    bytes,
                });
                if !a.to_post.is_empty() {
                    self.post(now, flow, out);
                }
                return;
            }
            Workload::PingBulk { .. } => {
                a.posted += 1;
                a.bulk_left = a.bulk_left.saturating_sub(1);
                out.push(HostOutput::Post {
                    node: a.src,
                    flow,
                    bytes: a.len,
                });
                if a.bulk_left > 0 {
                    self.post(now, flow, out);
                }
                return;
            }
            _ => {}
        }
        a.tokens = a.tokens.saturating_sub(1);
        a.posted += 1;
        out.push(HostOutput::Post {
            node: a.src,
            flow,
            bytes: a.len,
        });
        self.try_post(now, flow.app, out);
    }

    fn send_done(&mut self, now: Time, flow: FlowKey, out: &mut Vec<HostOutput>) {
        if flow.direction == Direction::Forward {
            self.apps[flow.app.index()].tokens += 1;
            self.try_post(now, flow.app, out);
        }
    }

    fn delivered(&mut self, now: Time, flow: FlowKey, out: &mut Vec<HostOutput>) {
        let app = flow.app;
        let a = &mut self.apps[app.index()];
        if flow.direction == Direction::Forward {
            a.rx_msgs += 1;
            match a.workload {
                Workload::Pump { messages } if a.rx_msgs == messages => {
                    self.post(now, FlowKey::reply(app), out)
                }
                Workload::PingPong { .. } => self.post(now, FlowKey::reply(app), out),
                Workload::Emit(_) => {
                    // An emission is received with its last message.
                    if let Some((emitted, true)) = a.in_flight.pop_front() {
                        if emitted >= self.window.0 && now < self.window.1 {
                            a.pairs.push((emitted, now));
                        }
                    }
                }
                Workload::PingBulk { window, .. }
                    if a.rx_msgs.is_multiple_of(u64::from(window.max(1))) =>
                {
                    a.reply_left = window.max(1);
                    self.post(now, FlowKey::reply(app), out);
                }
                _ => {}
            }
            return;
        }
        match a.workload {
            Workload::Pump { .. } => a.end = Some(now),
            Workload::PingPong { iterations } => {
                a.rounds += 1;
                if a.rounds >= iterations {
                    a.end = Some(now);
                } else if a.active {
                    self.post(now, FlowKey::forward(app), out);
                }
            }
            Workload::PingBulk { window, rounds } => {
                a.replies += 1;
                if a.replies.is_multiple_of(u64::from(window.max(1))) {
                    a.rounds += 1;
                    if a.rounds >= rounds {
                        a.end = Some(now);
                    } else if a.active {
                        a.bulk_left = window.max(1);
                        self.post(now, FlowKey::forward(app), out);
                    }
                }
            }
            Workload::Stream | Workload::Emit(_) => {}
        }
    }

    /// What an application measured (dispatch counts and IDT are the NIC's, filled in
    /// by the cluster).
    pub fn outcome(&self, app: AppId) -> FlowOutcome {
        let a = &self.apps[app.index()];
        let span = self.window.1.saturating_since(self.window.0).as_secs_f64();
        let elapsed = match (a.start, a.end) {
            (Some(s), Some(e)) if e > s => Some((e - s).as_secs_f64()),
            _ => None,
        };
        FlowOutcome {
            name: a.name.clone(),
            window_bytes: a.rx_window,
            window_mb_s: if span > 0.0 {
                a.rx_window as f64 / span / 1e6
            } else {
                0.0
            },
            pump_mb_s: match a.workload {
                Workload::Pump { messages } => elapsed.map(|e| (messages * a.len) as f64 / e / 1e6),
                _ => None,
            },
            latency_us: match a.workload {
                Workload::PingPong { iterations } => {
                    elapsed.map(|e| e * 1e6 / iterations.max(1) as f64 / 2.0)
                }
                Workload::PingBulk { window, rounds } => elapsed
                    .map(|e| e * 1e6 / (2.0 * f64::from(window.max(1)) * rounds.max(1) as f64)),
                _ => None,
            },
            jitter: match a.workload {
                Workload::Emit(spec) => spec
                    .mean_interval()
                    .map(|n| qos_core::stream_metrics::jitter_against(&a.pairs, n)),
                _ => None,
            },
            mean_latency_us: match a.workload {
                Workload::Emit(_) if !a.pairs.is_empty() => Some(
                    a.pairs
                        .iter()
                        .map(|(e, r)| r.saturating_since(*e).as_us_f64())
                        .sum::<f64>()
                        / a.pairs.len() as f64,
                ),
                _ => None,
            },
            messages: a.rx_msgs,
            dispatches: Vec::new(),
            idt_ticks: None,
            rejected: a.rejected,
        }
    }
}
