//! The Myrinet/GM cluster model (thesis §4.1–4.3, calibrated against §5): hosts running
//! benchmark applications, LANai NICs running the MCP state machines, 16-port crossbar
//! switches with cut-through switching, and the bandwidth resource manager.
//!
//! The model is one [`Cluster`] driven by the [`crate::engine::EventQueue`]; its parts
//! live in their own files as `impl Cluster` blocks over their own state:
//! - [`nic`] — LANai processor, host DMA engine, SRAM buffers, SDMA/SEND/RECV/RDMA,
//!   acknowledgements, the packet scheduler (GM rotation or rate control).
//! - [`fabric`] — links and switch output ports, round-robin arbitration, backpressure.
//! - [`host`] — the applications: bandwidth pump, ping-pong, streams, MPI overhead.
//! - [`manager`] — the bandwidth resource manager (master + local managers).
//!
//! A [`Setup`] says what to build; [`Cluster::run`] runs it to a time limit and returns
//! [`Outcome`], the raw per-flow measurements.

pub mod calibration;
pub mod fabric;
pub mod host;
pub mod manager;
pub mod nic;

use std::sync::Arc;

use qos_core::sched::SchedulerKind;
use qos_core::topology::{NodeId, Topology};
use qos_core::units::{Bandwidth, Bytes, Duration, Time};
use serde::Serialize;

pub use calibration::Calibration;

use crate::engine::EventQueue;
use fabric::Fabric;
use host::FlowApp;
use manager::Manager;
use nic::Nic;

/// Which MCP the NICs run (thesis §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Firmware {
    /// Unmodified GM: connection/sub-port rotation, equal-size segmentation.
    Gm,
    /// GM with the thesis's rate control in SDMA, full-MTU segmentation.
    RateControl,
}

impl Firmware {
    /// The packet scheduler this firmware uses.
    pub fn scheduler(self) -> SchedulerKind {
        match self {
            Firmware::Gm => SchedulerKind::Gm,
            Firmware::RateControl => SchedulerKind::RateControl,
        }
    }
}

/// The programming interface a flow's application uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// GM directly.
    #[default]
    Gm,
    /// MPICH-GM (extra host work per message, thesis §4.4, §5.5).
    Mpi,
}

/// How a flow's bandwidth is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// A fixed IDT pushed to the NIC at start (zero: unregulated).
    Idt(Duration),
    /// A premium request to the bandwidth manager.
    Premium(Bandwidth),
    /// A best-effort flow registered with the manager.
    BestEffort,
}

/// What a flow's application does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Posts messages continuously while active (as many as its send tokens allow).
    Stream,
    /// The thesis's bandwidth test: pump `messages`, then the receiver sends a small
    /// acknowledgement message back; bandwidth = volume / elapsed (§5.1).
    Pump {
        /// Messages to pump.
        messages: u64,
    },
    /// The thesis's latency test: ping-pong `iterations` round trips (§5.1).
    PingPong {
        /// Round trips.
        iterations: u64,
    },
}

/// One flow of a setup.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    /// Name for tables.
    pub name: String,
    /// Source host.
    pub src: NodeId,
    /// Destination host.
    pub dst: NodeId,
    /// Message size.
    pub message: Bytes,
    /// How its rate is set.
    pub rate: Rate,
    /// What its application does.
    pub workload: Workload,
    /// GM or MPI.
    pub api: Api,
    /// When it starts.
    pub start: Time,
    /// When it stops posting (None: never).
    pub stop: Option<Time>,
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The cluster.
    pub topology: Arc<Topology>,
    /// The constants.
    pub calibration: Calibration,
    /// The MCP of every NIC.
    pub firmware: Firmware,
    /// The flows.
    pub flows: Vec<FlowSpec>,
    /// Latency of one bandwidth-manager control message (local ↔ master, master → NIC).
    pub control_latency: Duration,
    /// Where bandwidth is measured for streams: [from, to).
    pub window: (Time, Time),
    /// Bin width of the dispatch-frequency time series (None: not recorded).
    pub timeline_bin: Option<Duration>,
    /// Stop the run at this time even if work remains.
    pub until: Time,
    /// Seed of the random streams (jitter of host posting times).
    pub seed: u64,
}

/// What a run measured for one flow.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FlowOutcome {
    /// Name.
    pub name: String,
    /// Payload bytes delivered to the receiving host within the window.
    pub window_bytes: u64,
    /// Bandwidth in the window (MB/s), for streams.
    pub window_mb_s: f64,
    /// Pump: volume / elapsed (MB/s).
    pub pump_mb_s: Option<f64>,
    /// Ping-pong: half the mean round trip (µs).
    pub latency_us: Option<f64>,
    /// Messages delivered.
    pub messages: u64,
    /// Packets dispatched by the source NIC, per timeline bin.
    pub dispatches: Vec<u32>,
    /// IDT in force at the end (ticks), if regulated.
    pub idt_ticks: Option<f64>,
    /// Whether the manager refused the flow.
    pub rejected: bool,
}

/// What a run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    /// Per flow, in setup order.
    pub flows: Vec<FlowOutcome>,
    /// Simulated time at the end.
    pub end_us: f64,
    /// Events delivered.
    pub events: u64,
}

/// Everything that happens in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A NIC's processor finished its current handler.
    CpuDone(u32),
    /// A NIC's host DMA engine finished its current transfer.
    DmaDone(u32),
    /// A NIC's rate-control timer (an NDT was reached).
    SdmaWake(u32),
    /// A NIC's delayed acknowledgement to a peer node is due.
    AckTimer(u32, u32),
    /// The head of a packet reached the next switch.
    HeadArrive(u32),
    /// The tail of a packet left its source NIC.
    TailLeft(u32),
    /// The tail of a packet passed a channel, freeing it.
    ChannelFree(u32),
    /// A whole packet is in its destination NIC's receive buffer.
    TailArrive(u32),
    /// A host finished posting a send descriptor for a flow.
    Posted(u32),
    /// A host noticed a completed send of a flow.
    SendDone(u32),
    /// A host noticed a message delivered on a flow.
    Delivered(u32),
    /// A flow's start time.
    FlowStart(u32),
    /// A flow's stop time.
    FlowStop(u32),
    /// A manager message reached its destination (index into the manager's mailbox).
    Control(u32),
}

/// The whole simulated cluster.
pub struct Cluster {
    pub(crate) q: EventQueue<Event>,
    pub(crate) cal: Calibration,
    pub(crate) topo: Arc<Topology>,
    pub(crate) nics: Vec<Nic>,
    pub(crate) fabric: Fabric,
    pub(crate) apps: Vec<FlowApp>,
    pub(crate) specs: Vec<FlowSpec>,
    pub(crate) manager: Manager,
    pub(crate) window: (Time, Time),
    pub(crate) bin: Option<Duration>,
    pub(crate) until: Time,
}

impl Cluster {
    /// Builds the cluster of `setup`. Flows must name nodes of the topology (the
    /// scenario layer checks this and reports file:line); routes are looked up here.
    pub fn new(setup: Setup) -> Result<Cluster, String> {
        let cal = setup.calibration;
        let topo = setup.topology.clone();
        let nics = (0..topo.nodes().len())
            .map(|i| Nic::new(i as u32, setup.firmware, &cal, setup.seed))
            .collect();
        let fabric = Fabric::new(&topo, &cal);
        let mut c = Cluster {
            q: EventQueue::new(),
            cal,
            topo: topo.clone(),
            nics,
            fabric,
            apps: Vec::new(),
            specs: setup.flows.clone(),
            manager: Manager::new(
                topo,
                setup.control_latency,
                cal.manager.best_effort_capacity,
            ),
            window: setup.window,
            bin: setup.timeline_bin,
            until: setup.until,
        };
        for (i, f) in setup.flows.iter().enumerate() {
            for (a, b) in [(f.src, f.dst), (f.dst, f.src)] {
                c.topo
                    .route(a, b)
                    .map_err(|e| format!("flow {}: {e}", f.name))?;
            }
            c.apps.push(FlowApp::new(i as u32, f, &c.cal, setup.seed));
            c.q.schedule_at(f.start, Event::FlowStart(i as u32));
            if let Some(s) = f.stop {
                c.q.schedule_at(s, Event::FlowStop(i as u32));
            }
        }
        Ok(c)
    }

    /// Runs until every flow is finished or the time limit, and reports.
    pub fn run(mut self) -> Outcome {
        while let Some(t) = self.q.peek_time() {
            if t > self.until || self.all_done() {
                break;
            }
            let Some((_, ev)) = self.q.pop() else { break };
            self.handle(ev);
        }
        self.outcome()
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::CpuDone(n) => self.cpu_done(n),
            Event::DmaDone(n) => self.dma_done(n),
            Event::SdmaWake(n) => self.sdma_wake(n),
            Event::AckTimer(n, peer) => self.ack_timer(n, peer),
            Event::HeadArrive(p) => self.head_arrive(p),
            Event::TailLeft(p) => self.tail_left(p),
            Event::ChannelFree(ch) => self.channel_free(ch),
            Event::TailArrive(p) => self.tail_arrive(p),
            Event::Posted(f) => self.posted(f),
            Event::SendDone(f) => self.send_done(f),
            Event::Delivered(f) => self.delivered(f),
            Event::FlowStart(f) => self.flow_start(f),
            Event::FlowStop(f) => self.flow_stop(f),
            Event::Control(m) => self.control(m),
        }
    }

    /// The LANai RTC at `t`: time truncated to whole ticks.
    pub(crate) fn rtc(&self, t: Time) -> Time {
        let tick = self.cal.clock.tick.as_ps().max(1);
        Time::from_ps(t.as_ps() / tick * tick)
    }

    /// Time to move `len` bytes at `bw` (zero for a zero rate, which validation forbids).
    pub(crate) fn xfer(bw: Bandwidth, len: u64) -> Duration {
        bw.transfer_time(Bytes::new(len)).unwrap_or(Duration::ZERO)
    }

    fn outcome(&self) -> Outcome {
        let tick = self.cal.clock.tick;
        let flows = self
            .apps
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let nic = &self.nics[self.specs[i].src.0 as usize];
                let idt = nic.idt_of(i as u32);
                let mut o = a.outcome(&self.specs[i], self.window);
                o.dispatches = nic.timeline(i as u32);
                o.idt_ticks = idt.filter(|d| !d.is_zero()).map(|d| d.in_ticks_f64(tick));
                o
            })
            .collect();
        Outcome {
            flows,
            end_us: self.q.now().since_epoch().as_us_f64(),
            events: self.q.delivered(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qos_core::topology::build;

    fn setup(flows: Vec<FlowSpec>) -> Setup {
        Setup {
            topology: Arc::new(
                build::crossbar(4, &build::HostDefaults::thesis())
                    .and_then(|b| b.build())
                    .unwrap(),
            ),
            calibration: Calibration::thesis(),
            firmware: Firmware::RateControl,
            flows,
            control_latency: Duration::from_us(100),
            window: (Time::from_ps(2_000_000_000), Time::from_ps(12_000_000_000)),
            timeline_bin: None,
            until: Time::from_ps(12_000_000_000),
            seed: 3,
        }
    }

    fn stream(name: &str, src: u32, dst: u32, rate: Rate) -> FlowSpec {
        FlowSpec {
            name: name.into(),
            src: NodeId(src),
            dst: NodeId(dst),
            message: Bytes::kib(64),
            rate,
            workload: Workload::Stream,
            api: Api::Gm,
            start: Time::ZERO,
            stop: None,
        }
    }

    #[test]
    fn manager_rejects_a_premium_request_beyond_the_node_capacity() {
        let mb = Bandwidth::from_mb_per_sec;
        let o = Cluster::new(setup(vec![
            stream("a", 0, 1, Rate::Premium(mb(50.0))),
            stream("b", 0, 2, Rate::Premium(mb(50.0))),
        ]))
        .unwrap()
        .run();
        assert!(!o.flows[0].rejected);
        assert!(o.flows[1].rejected);
        assert_eq!(o.flows[1].window_bytes, 0);
        // The admitted flow gets about its reservation (IDT = T·Bmax/50 MB/s).
        assert!(
            (o.flows[0].window_mb_s - 52.0).abs() < 4.0,
            "{}",
            o.flows[0].window_mb_s
        );
    }

    #[test]
    fn an_unregulated_flow_is_limited_by_the_nic_not_the_link() {
        let o = Cluster::new(setup(vec![stream("a", 0, 1, Rate::Idt(Duration::ZERO))]))
            .unwrap()
            .run();
        let bw = o.flows[0].window_mb_s;
        assert!(bw > 78.0 && bw < 86.0, "{bw}");
    }

    #[test]
    fn runs_are_reproducible_for_a_seed() {
        let flows = vec![
            stream("a", 0, 2, Rate::Idt(Duration::from_us(96))),
            stream("b", 1, 2, Rate::Idt(Duration::ZERO)),
        ];
        let a = serde_json::to_string(&Cluster::new(setup(flows.clone())).unwrap().run()).unwrap();
        let b = serde_json::to_string(&Cluster::new(setup(flows)).unwrap().run()).unwrap();
        assert_eq!(a, b);
    }
}
