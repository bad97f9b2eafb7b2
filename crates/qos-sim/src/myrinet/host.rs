//! The hosts: one application per flow, written like the thesis's benchmarks (§5.1).
//!
//! - **Stream**: posts messages as long as it holds send tokens, while active; its
//!   bandwidth is what the receiver gets within the measurement window.
//! - **Pump** (bandwidth test): posts N messages; the receiver answers the N-th with a
//!   4-byte message; bandwidth = volume / (answer time − first post).
//! - **Ping-pong** (latency test): one message each way per round; latency = mean
//!   round trip / 2.
//!
//! Every message costs the host the GM post time; at the MPI level it also costs a
//! fixed per-message time and a copy at the MPI copy rate, done before the GM post
//! (assumption standing for MPICH-GM's overhead, §4.4, §5.5). A host prepares one
//! message of a flow at a time. Posting times get a tiny seeded jitter (≤ 0.1 µs) so
//! that the seed matters and runs stay reproducible.
//!
//! Scheduler flow ids: application `i` sends on flow `2i` from its source NIC; the
//! answers of the pump and ping-pong go back on flow `2i + 1` from the destination.

use qos_core::units::{Duration, Time};

use super::{Api, Calibration, Cluster, Event, FlowOutcome, FlowSpec, Rate, Workload};
use crate::engine::SimRng;

/// Size of the pump's final answer (§5.1 "a small-sized acknowledgement").
const ANSWER_BYTES: u64 = 4;

/// One flow's application, both ends.
#[derive(Debug)]
pub struct FlowApp {
    src: u32,
    dst: u32,
    len: u64,
    workload: Workload,
    /// Allowed to post (started, granted, not stopped).
    active: bool,
    /// The manager refused it.
    pub(crate) rejected: bool,
    tokens: u32,
    posting: bool,
    posted: u64,
    rx_msgs: u64,
    rx_window: u64,
    start: Option<Time>,
    end: Option<Time>,
    rounds: u64,
    rng: SimRng,
    post_cost: Duration,
    mpi_cost: Duration,
}

impl FlowApp {
    /// The application of flow `id`.
    pub fn new(id: u32, f: &FlowSpec, cal: &Calibration, seed: u64) -> FlowApp {
        let len = f.message.get();
        let mpi_cost = match f.api {
            Api::Gm => Duration::ZERO,
            Api::Mpi => cal.mpi.per_message + Cluster::xfer(cal.mpi.copy_bandwidth, len),
        };
        FlowApp {
            src: f.src.0,
            dst: f.dst.0,
            len,
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
            rng: SimRng::stream(seed, id as u64 + 1),
            post_cost: cal.host.post,
            mpi_cost,
        }
    }

    /// Whether the application has nothing more to measure.
    pub fn finished(&self) -> bool {
        self.rejected || self.end.is_some()
    }

    fn is_stream(&self) -> bool {
        matches!(self.workload, Workload::Stream)
    }

    /// The measurements.
    pub fn outcome(&self, spec: &FlowSpec, window: (Time, Time)) -> FlowOutcome {
        let span = window.1.saturating_since(window.0).as_secs_f64();
        let elapsed = match (self.start, self.end) {
            (Some(s), Some(e)) if e > s => Some((e - s).as_secs_f64()),
            _ => None,
        };
        FlowOutcome {
            name: spec.name.clone(),
            window_bytes: self.rx_window,
            window_mb_s: if span > 0.0 {
                self.rx_window as f64 / span / 1e6
            } else {
                0.0
            },
            pump_mb_s: match self.workload {
                Workload::Pump { messages } => {
                    elapsed.map(|e| (messages * self.len) as f64 / e / 1e6)
                }
                _ => None,
            },
            latency_us: match self.workload {
                Workload::PingPong { iterations } => {
                    elapsed.map(|e| e * 1e6 / iterations.max(1) as f64 / 2.0)
                }
                _ => None,
            },
            messages: self.rx_msgs,
            dispatches: Vec::new(),
            idt_ticks: None,
            rejected: self.rejected,
        }
    }
}

impl Cluster {
    pub(crate) fn all_done(&self) -> bool {
        // Streams run to the time limit; the other benchmarks end by themselves.
        self.apps
            .iter()
            .all(|a| a.finished() || (a.is_stream() && a.rejected))
    }

    pub(crate) fn flow_start(&mut self, f: u32) {
        let spec = self.specs[f as usize].clone();
        let (src, dst) = (spec.src.0, spec.dst.0);
        let idt = match spec.rate {
            Rate::Idt(d) => d,
            // Until the manager answers, nothing is sent anyway.
            Rate::Premium(_) | Rate::BestEffort => Duration::ZERO,
        };
        self.nics[src as usize].add_flow(2 * f, dst, idt);
        self.nics[dst as usize].add_flow(2 * f + 1, src, Duration::ZERO);
        match spec.rate {
            Rate::Idt(_) => self.app_activate(f),
            Rate::Premium(_) | Rate::BestEffort => self.manager_request(f),
        }
    }

    /// The flow may send (started, and granted if it asked the manager).
    pub(crate) fn app_activate(&mut self, f: u32) {
        let now = self.q.now();
        let a = &mut self.apps[f as usize];
        a.active = true;
        if a.start.is_none() {
            a.start = Some(now);
        }
        match a.workload {
            Workload::PingPong { .. } => self.post(f, false),
            Workload::Stream | Workload::Pump { .. } => self.try_post(f),
        }
    }

    pub(crate) fn flow_stop(&mut self, f: u32) {
        let a = &mut self.apps[f as usize];
        let was = a.active;
        a.active = false;
        let src = a.src;
        self.nics[src as usize].close_flow(2 * f);
        if was && !matches!(self.specs[f as usize].rate, Rate::Idt(_)) {
            self.manager_release(f);
        }
    }

    fn try_post(&mut self, f: u32) {
        let a = &self.apps[f as usize];
        if !a.active || a.posting || a.tokens == 0 {
            return;
        }
        let more = match a.workload {
            Workload::Stream => true,
            Workload::Pump { messages } => a.posted < messages,
            Workload::PingPong { .. } => false,
        };
        if more {
            self.post(f, false);
        }
    }

    /// Starts posting one message: forward (`reply` false) or the answer back.
    fn post(&mut self, f: u32, reply: bool) {
        let a = &mut self.apps[f as usize];
        let jitter = a.rng.jitter(Duration::from_ns(100));
        let mut cost = a.post_cost + jitter;
        if !reply {
            a.posting = true;
            cost += a.mpi_cost;
        }
        let flow = 2 * f + u32::from(reply);
        self.q.schedule_in(cost, Event::Posted(flow));
    }

    pub(crate) fn posted(&mut self, flow: u32) {
        let f = flow / 2;
        let a = &mut self.apps[f as usize];
        if flow % 2 == 1 {
            let len = match a.workload {
                Workload::PingPong { .. } => a.len,
                _ => ANSWER_BYTES,
            };
            let dst = a.dst;
            self.nic_post(dst, flow, len);
            return;
        }
        a.posting = false;
        a.tokens = a.tokens.saturating_sub(1);
        a.posted += 1;
        let (src, len) = (a.src, a.len);
        self.nic_post(src, flow, len);
        self.try_post(f);
    }

    pub(crate) fn send_done(&mut self, flow: u32) {
        if flow.is_multiple_of(2) {
            let f = flow / 2;
            self.apps[f as usize].tokens += 1;
            self.try_post(f);
        }
    }

    /// RDMA put `len` bytes of scheduler flow `flow` in host memory.
    pub(crate) fn host_receive(&mut self, flow: u32, len: u64, last: bool) {
        let now = self.q.now();
        if flow.is_multiple_of(2) && now >= self.window.0 && now < self.window.1 {
            self.apps[(flow / 2) as usize].rx_window += len;
        }
        if last {
            self.q
                .schedule_in(self.cal.host.poll, Event::Delivered(flow));
        }
    }

    pub(crate) fn delivered(&mut self, flow: u32) {
        let now = self.q.now();
        let f = flow / 2;
        let a = &mut self.apps[f as usize];
        if flow.is_multiple_of(2) {
            a.rx_msgs += 1;
            match a.workload {
                Workload::Pump { messages } if a.rx_msgs == messages => self.post(f, true),
                Workload::PingPong { .. } => self.post(f, true),
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
                    self.post(f, false);
                }
            }
            Workload::Stream => {}
        }
    }
}
