//! The simulated cluster as wiring: one event queue and the
//! components — the fabric, the hosts' applications, the bandwidth manager and one
//! NIC per host — each driven only through its inputs, each answering with outputs
//! that [`Cluster`] applies in order, scheduling events or calling the component the
//! output is meant for (the fabric puts its own timing events in the queue itself,
//! through [`Schedule`], and returns what a NIC must hear). No component sees
//! another's state.

use qos_core::topology::{NodeId, RouteError};
use qos_core::units::{Duration, Time};

use super::fabric::{Fabric, FabricEvent, Notice};
use super::host::{HostEvent, HostOutput, Hosts};
use super::ids::{AppId, FlowKey};
use super::manager::{Manager, ManagerOutput, MsgId};
use super::nic::any::AnyNic;
use super::nic::{self, Nic, NicConfig, Outputs};
use super::setup::{Outcome, Setup};
use crate::engine::{EventQueue, Schedule};

/// Why a cluster could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// A flow's endpoints have no route between them (either way).
    #[error("flow {flow}: {source}")]
    Route {
        /// The flow's name.
        flow: String,
        /// Why.
        source: RouteError,
    },
    /// A calibration value makes the model meaningless.
    #[error("{0}")]
    Calibration(String),
    /// More flows than the model numbers.
    #[error("{0} flows: at most {max} are supported", max = u32::MAX / 2)]
    TooManyFlows(usize),
}

/// Everything that happens in the cluster, by the component it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// A NIC's timer.
    Nic(NodeId, nic::Timer),
    /// Inside the network.
    Fabric(FabricEvent),
    /// On the hosts.
    Host(HostEvent),
    /// A bandwidth-manager message arrives.
    Manager(MsgId),
}

/// The cluster's queue as the fabric sees it: fabric events, wrapped.
struct FabricClock<'a>(&'a mut EventQueue<Event>);

impl Schedule<FabricEvent> for FabricClock<'_> {
    #[inline]
    fn schedule_at(&mut self, at: Time, event: FabricEvent) {
        self.0.schedule_at(at, Event::Fabric(event));
    }
}

/// The whole simulated cluster.
pub struct Cluster {
    q: EventQueue<Event>,
    until: Time,
    /// The LANai RTC tick, to report IDTs in ticks.
    tick: Duration,
    /// Per application: the host whose NIC sources its forward flow.
    sources: Vec<NodeId>,
    fabric: Fabric,
    nics: Vec<AnyNic>,
    hosts: Hosts,
    manager: Manager,
    /// Output buffers, one per kind of component, reused from call to call (a call
    /// made while applying the outputs of the same kind finds its buffer taken and
    /// starts a new one).
    nic_out: Outputs,
    host_out: Vec<HostOutput>,
    manager_out: Vec<ManagerOutput>,
}

impl Cluster {
    /// Builds the cluster of `setup`. Flows must name nodes of the topology that have
    /// routes both ways (the scenario layer checks this first and reports file:line).
    pub fn new(setup: Setup) -> Result<Cluster, ClusterError> {
        let cal = setup.calibration;
        cal.check().map_err(ClusterError::Calibration)?;
        if setup.flows.len() > (u32::MAX / 2) as usize {
            return Err(ClusterError::TooManyFlows(setup.flows.len()));
        }
        let topo = setup.topology.clone();
        for f in &setup.flows {
            for (a, b) in [(f.src, f.dst), (f.dst, f.src)] {
                topo.route(a, b).map_err(|source| ClusterError::Route {
                    flow: f.name.clone(),
                    source,
                })?;
            }
        }
        let config = NicConfig {
            calibration: cal,
            timeline_bin: setup.timeline_bin,
            via: setup.via,
        };
        let nics: Vec<AnyNic> = (0..topo.nodes().len())
            .map(|i| AnyNic::new(setup.firmware, NodeId(i as u32), &config))
            .collect();
        let fabric = Fabric::new(topo.clone(), &cal, |n| nics[n.0 as usize].receive_buffers());
        let mut c = Cluster {
            q: EventQueue::new(),
            until: setup.until,
            tick: cal.clock.tick,
            sources: setup.flows.iter().map(|f| f.src).collect(),
            fabric,
            nics,
            hosts: Hosts::new(&setup.flows, &cal, setup.window, setup.seed),
            manager: Manager::new(topo, setup.control_latency, &setup.flows),
            nic_out: Outputs::new(),
            host_out: Vec::new(),
            manager_out: Vec::new(),
        };
        for (i, f) in setup.flows.iter().enumerate() {
            let app = AppId(i as u32);
            c.q.schedule_at(f.start, Event::Host(HostEvent::Start(app)));
            if let Some(s) = f.stop {
                c.q.schedule_at(s, Event::Host(HostEvent::Stop(app)));
            }
        }
        Ok(c)
    }

    /// Runs until every flow is finished or the time limit, and reports.
    pub fn run(mut self) -> Outcome {
        while let Some(t) = self.q.peek_time() {
            if t > self.until || self.hosts.all_done() {
                break;
            }
            let Some((_, ev)) = self.q.pop() else { break };
            match ev {
                Event::Nic(n, timer) => self.nic(n, |nic, now, out| nic.timer(now, timer, out)),
                Event::Fabric(e) => self.fabric(|f, now, out| f.handle(now, e, out)),
                Event::Host(e) => self.hosts(|h, now, out| h.handle(now, e, out)),
                Event::Manager(m) => self.manager(|m2, now, out| m2.deliver(now, m, out)),
            }
        }
        self.outcome()
    }

    /// Calls NIC `n` and applies its outputs.
    fn nic(&mut self, n: NodeId, call: impl FnOnce(&mut AnyNic, Time, &mut Outputs)) {
        let now = self.q.now();
        let mut out = std::mem::take(&mut self.nic_out);
        call(&mut self.nics[n.0 as usize], now, &mut out);
        self.apply_nic(n, &mut out);
        self.nic_out = out;
    }

    /// Applies a NIC's outputs in order (not generic, so that the calls between
    /// components do not instantiate each other without end).
    fn apply_nic(&mut self, n: NodeId, out: &mut Outputs) {
        for o in out.drain() {
            match o {
                nic::Output::Arm { at, timer } => self.q.schedule_at(at, Event::Nic(n, timer)),
                nic::Output::Inject(p) => self.fabric(|f, now, clock| {
                    f.inject(now, p, clock);
                    None
                }),
                nic::Output::ReceiveBufferFreed => self.fabric(|f, now, clock| {
                    f.receive_buffer_freed(now, n, clock);
                    None
                }),
                nic::Output::SendCompleted(flow) => {
                    self.hosts(|h, now, out| h.send_completed(now, flow, out))
                }
                nic::Output::ToHost { flow, bytes, last } => {
                    self.hosts(|h, now, out| h.received(now, flow, bytes, last, out))
                }
            }
        }
    }

    /// Calls the fabric (which schedules its own events) and passes its notice on.
    fn fabric(
        &mut self,
        call: impl FnOnce(&mut Fabric, Time, &mut FabricClock<'_>) -> Option<Notice>,
    ) {
        let now = self.q.now();
        let notice = call(&mut self.fabric, now, &mut FabricClock(&mut self.q));
        match notice {
            None => {}
            Some(Notice::TailLeft(src)) => self.nic(src, |nic, now, out| nic.tail_left(now, out)),
            Some(Notice::Arrived(p)) => {
                self.nic(p.dst, |nic, now, out| nic.packet_arrived(now, p, out))
            }
        }
    }

    /// Calls the hosts and applies their outputs.
    fn hosts(&mut self, call: impl FnOnce(&mut Hosts, Time, &mut Vec<HostOutput>)) {
        let now = self.q.now();
        let mut out = std::mem::take(&mut self.host_out);
        call(&mut self.hosts, now, &mut out);
        self.apply_hosts(&mut out);
        self.host_out = out;
    }

    fn apply_hosts(&mut self, out: &mut Vec<HostOutput>) {
        for o in out.drain(..) {
            match o {
                HostOutput::Schedule { at, event } => self.q.schedule_at(at, Event::Host(event)),
                HostOutput::Open {
                    node,
                    flow,
                    peer,
                    idt,
                } => self.nic(node, |nic, now, out| {
                    nic.open_flow(now, flow, peer, idt, out)
                }),
                HostOutput::Close { node, flow } => {
                    self.nic(node, |nic, now, out| nic.close_flow(now, flow, out))
                }
                HostOutput::Post { node, flow, bytes } => {
                    self.nic(node, |nic, now, out| nic.host_post(now, flow, bytes, out))
                }
                HostOutput::Request(app) => self.manager(|m, now, out| m.request(now, app, out)),
                HostOutput::Release(app) => self.manager(|m, now, out| m.release(now, app, out)),
            }
        }
    }

    /// Calls the manager and applies its outputs.
    fn manager(&mut self, call: impl FnOnce(&mut Manager, Time, &mut Vec<ManagerOutput>)) {
        let now = self.q.now();
        let mut out = std::mem::take(&mut self.manager_out);
        call(&mut self.manager, now, &mut out);
        self.apply_manager(&mut out);
        self.manager_out = out;
    }

    fn apply_manager(&mut self, out: &mut Vec<ManagerOutput>) {
        for o in out.drain(..) {
            match o {
                ManagerOutput::Schedule { at, msg } => self.q.schedule_at(at, Event::Manager(msg)),
                ManagerOutput::Answer { app, granted } => {
                    self.hosts(|h, now, out| h.answer(now, app, granted, out))
                }
                ManagerOutput::SetIdt { node, flow, idt } => {
                    self.nic(node, |nic, now, out| nic.set_idt(now, flow, idt, out))
                }
            }
        }
    }

    fn outcome(&self) -> Outcome {
        let flows = (self.sources.iter().enumerate())
            .map(|(i, src)| {
                let app = AppId(i as u32);
                let mut o = self.hosts.outcome(app);
                let nic = &self.nics[src.0 as usize];
                let flow = FlowKey::forward(app);
                o.dispatches = nic.dispatches(flow).to_vec();
                o.idt_ticks = nic
                    .idt(flow)
                    .filter(|d| !d.is_zero())
                    .map(|d| d.in_ticks_f64(self.tick));
                o
            })
            .collect();
        Outcome {
            flows,
            end_us: self.q.now().since_epoch().as_us_f64(),
            events: self.q.delivered(),
            stages: self.nics.iter().map(|n| n.stage_times().cloned()).collect(),
            busy: self.nics.iter().map(|n| n.busy()).collect(),
        }
    }
}
