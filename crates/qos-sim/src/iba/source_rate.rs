//! Gulati's source rate control in a Yum mesh, in place of credits (beyond
//! the paper): the bandwidth manager of the thesis (§3.3) gives every (source,
//! destination) best-effort flow a rate that the links of its path can carry, and each
//! HCA's DMA dispatches a flow's packets no closer than its Inter-packet Dispatch Time
//! (IDT), by its Next Dispatch Time (NDT) (thesis §3.2.2, §4.2.2).
//!
//! **The manager** ([`Allocation`]). The flit fabric becomes a `qos_core` topology —
//! a switch per router, a host per HCA, a cable per router link, and as each pair's
//! route the fabric's own path ([`Admission::path`]: dimension order on a mesh) — so
//! that `qos_core`'s ledger and best-effort allocator ([`qos_core::besteffort`]) do
//! the work. The resources are the links: each HCA's injection link (the node's send
//! limit), each router output port including the ejection to an HCA, every one with
//! `utilisation` × the link's bandwidth. The thesis's node criterion (§3.3.1: flows
//! originating *or terminating* at a node count against one peak capacity) is the
//! Myrinet NIC's shared processing; an IBA HCA's injection and ejection links are the
//! two directions of a full-duplex port, so here each direction has its own limit and
//! there is no combined one. Real-time connections reserve their solicited rates
//! first (one premium flow per (source, destination), the sum of its connections,
//! refused and left out if it does not fit); the best-effort flows — every node to
//! every other, the uniform traffic of the scenarios — share the surplus. How:
//! `share = "max-min"` (default) raises every flow's rate together until a link on its
//! path is full (water filling, equal weights: the thesis's best-effort flows have no
//! stated demand, so none gets more for asking more); `share = "thesis"` is the rule
//! the thesis implemented (§4.3: each link's surplus split equally among the flows on
//! it, a flow gets its smallest part), which it calls "sub-optimal in terms of overall
//! network utilization": it leaves capacity idle wherever a flow is held back
//! elsewhere. A flow never gets more than `utilisation` × the link (its Bmax).
//!
//! **The gate** ([`SourceRate`], the HCA firmware). Per flow a
//! [`qos_core::sched::rate::RateControl`] keeps its NDT by the thesis's rules: the
//! flow becomes valid (its next packet is at the head of its queue) with
//! `NDT = max(NDT, now)`, the packet may go once `NDT ≤ now`, and its dispatch
//! advances `NDT += IDT`, IDT = the packet's bits / the flow's rate (rounded up to the
//! picosecond, so no flow exceeds its rate). A dispatch that comes late (the HCA's
//! lane buffer was full) keeps the thesis's catch-up: the next NDT counts from the
//! old one. `burst` (default 1, the thesis) lets a flow that was idle catch up too: it
//! becomes valid with `NDT = max(NDT, now − (burst − 1)·IDT)`, so it may send `burst`
//! packets back to back. GM's SDMA keeps a queue per flow; Yum's HCA keeps a node's
//! best effort in one QP served in order, where a head that is not due would hold back
//! every packet behind it. So with source rate control each HCA gets a best-effort QP
//! per destination and its DMA serves the oldest head that may go
//! ([`super::hca::Adapters::best_effort_per_destination`]): among due flows, the one
//! whose packet waited longest (the thesis takes the smallest NDT, GM rotates among
//! connections; all serve every due flow within a few packet times). Real-time
//! packets are not held back (their connections are governed by the paper's admission
//! control and input regulator; the manager only keeps their rates out of the
//! best-effort shares); control packets never reach a gate.

use std::sync::Arc;

use qos_core::admission::Ledger;
use qos_core::besteffort;
use qos_core::flow::{Flow, FlowKey};
use qos_core::sched::rate::RateControl;
use qos_core::sched::{Decision, FlowId, FlowParams, Scheduler};
use qos_core::topology::build::TopologyBuilder;
use qos_core::topology::{NodeCapacity, NodeId, PortRef, RateParams, SwitchId};
use qos_core::units::{Bandwidth, Bytes, Duration, Time};

use super::admission::Admission;
use super::hca::DmaGate;
use super::traffic::TrafficClass;
use crate::flit::topology::{Fabric, Link};

pub use super::congestion::{SourceRateSpec, MAX_BURST};
pub use super::error::AllocError;

/// What the manager gave every flow.
#[derive(Debug, Clone)]
pub struct Allocation {
    nodes: u32,
    /// Best-effort rate per (source, destination), `src · nodes + dst`.
    rate: Vec<Bandwidth>,
    /// Real-time reservations per (source, destination) that did not fit.
    pub refused: Vec<(u32, u32)>,
}

impl Allocation {
    /// The best-effort rate of flow `src` → `dst`.
    pub fn rate(&self, src: u32, dst: u32) -> Bandwidth {
        self.rate[(src * self.nodes + dst) as usize]
    }

    /// The manager's rates in `fab`, every pair routed on its path through `fab`
    /// ([`Admission::path`] of `adm`): real-time flows `premium` (source, destination,
    /// rate; several per pair are summed) reserve first, then the best-effort flows of
    /// every pair share the rest as `spec` says; `link` is every link's bandwidth.
    pub fn new(
        fab: &Fabric,
        adm: &Admission,
        link: Bandwidth,
        spec: &SourceRateSpec,
        premium: &[(u32, u32, Bandwidth)],
    ) -> Result<Allocation, AllocError> {
        let cap = Bandwidth::from_bytes_per_sec(
            (link.bytes_per_sec() as f64 * spec.utilisation).floor() as u64,
        )
        .max(Bandwidth::from_bytes_per_sec(1));
        let port = |g: u32| {
            let r = fab.port_router[g as usize];
            PortRef {
                switch: SwitchId(r),
                port: (g - fab.port_base[r as usize]) as u16,
            }
        };
        let mut b = TopologyBuilder::new();
        for r in 0..fab.routers {
            b.add_switch(&format!("r{r}"), fab.ports[r as usize] as u16)?;
        }
        // T: one 64-byte unit at the link's rate; only Bmax matters here (IDTs are
        // computed per packet by the gate).
        let rate = RateParams {
            t: link
                .transfer_time(Bytes::new(64))
                .unwrap_or(Duration::from_ps(1)),
            bmax: cap,
        };
        let capacity = NodeCapacity {
            send: Some(cap),
            receive: None,
            combined: None,
            receive_cost_permille: qos_core::topology::FULL_COST,
            best_effort: None,
        };
        for n in 0..fab.nodes {
            b.add_host(
                &format!("n{n}"),
                rate,
                capacity,
                port(fab.hca_port[n as usize]),
                cap,
                cap,
            )?;
        }
        for (g, l) in fab.link.iter().enumerate() {
            if let Link::Router(gi) = *l {
                if !matches!(fab.link[gi as usize], Link::Router(back) if back == g as u32) {
                    return Err(AllocError::OneWay(g as u32));
                }
                if (g as u32) < gi {
                    b.connect(port(g as u32), port(gi), cap, cap)?;
                }
            }
        }
        let nodes = fab.nodes;
        for s in 0..nodes {
            for d in (0..nodes).filter(|&d| d != s) {
                let path = adm.path(fab, s, d);
                let hops = path.links[1..].iter().map(|l| port(l.0 - nodes)).collect();
                b.add_route(NodeId(s), NodeId(d), hops)?;
            }
        }
        let mut ledger = Ledger::new(Arc::new(b.build()?));
        // Real time first, summed per pair, at priority 1 (best effort at 0).
        let mut rt = vec![0u64; (nodes * nodes) as usize];
        for &(s, d, bw) in premium {
            if s != d && s < nodes && d < nodes {
                let i = (s * nodes + d) as usize;
                rt[i] = rt[i].saturating_add(bw.bytes_per_sec());
            }
        }
        let mut refused = Vec::new();
        for (i, &bw) in rt.iter().enumerate() {
            if bw == 0 {
                continue;
            }
            let (s, d) = (i as u32 / nodes, i as u32 % nodes);
            let key = FlowKey {
                priority: 1,
                ..FlowKey::between(NodeId(s), NodeId(d))
            };
            let f = Flow::premium(
                "rt",
                NodeId(s),
                NodeId(d),
                Bandwidth::from_bytes_per_sec(bw),
            )
            .with_key(key);
            if ledger.request(f).is_err() {
                refused.push((s, d));
            }
        }
        for s in 0..nodes {
            for d in (0..nodes).filter(|&d| d != s) {
                ledger.request(Flow::best_effort("be", NodeId(s), NodeId(d)))?;
            }
        }
        let mut rate = vec![Bandwidth::ZERO; (nodes * nodes) as usize];
        for sh in besteffort::allocate(&ledger, spec.share) {
            rate[(sh.key.src.node.0 * nodes + sh.key.dst.node.0) as usize] = sh.rate;
        }
        Ok(Allocation {
            nodes,
            rate,
            refused,
        })
    }
}

/// IDT of a packet of `bytes` at `rate`, rounded up to the picosecond (`None` at a
/// zero rate: the flow may not send).
pub fn idt(bytes: u64, rate: Bandwidth) -> Option<Duration> {
    rate.transfer_time(Bytes::new(bytes))
}

/// The source rate gate of every HCA.
#[derive(Debug, Clone)]
pub struct SourceRate {
    alloc: Allocation,
    cycle_ps: u64,
    burst: u32,
    /// Per flow (`src · nodes + dst`): its NDT and IDT, kept by the thesis's
    /// scheduler with the flow as its only flow.
    sched: Vec<RateControl>,
    /// Per flow: a packet of it was made valid and not taken yet.
    pending: Vec<bool>,
    last_held: Vec<u64>,
    /// Times a node's DMA was refused a best-effort packet (once per node and cycle).
    pub held: u64,
}

const FLOW: FlowId = FlowId(0);

impl SourceRate {
    /// Gates for `alloc` with `burst`, cycles of `cycle_ps`.
    pub fn new(alloc: Allocation, burst: u32, cycle_ps: u64) -> SourceRate {
        let nodes = alloc.nodes as usize;
        let sched = (0..nodes * nodes)
            .map(|_| {
                let mut rc = RateControl::new();
                rc.add_flow(FLOW, FlowParams::default());
                rc
            })
            .collect();
        SourceRate {
            alloc,
            cycle_ps,
            burst: burst.max(1),
            sched,
            pending: vec![false; nodes * nodes],
            last_held: vec![u64::MAX; nodes],
            held: 0,
        }
    }

    /// The allocation.
    pub fn allocation(&self) -> &Allocation {
        &self.alloc
    }

    /// Flow `node` → `dst`'s NDT in picoseconds.
    pub fn ndt(&self, node: u32, dst: u32) -> Option<Time> {
        self.sched
            .get((node * self.alloc.nodes + dst) as usize)?
            .ndt(FLOW)
    }
}

impl DmaGate for SourceRate {
    fn allows(&mut self, node: u32, dst: u32, class: u8, bytes: u64, now: u64) -> bool {
        let nodes = self.alloc.nodes;
        if class != TrafficClass::BestEffort as u8 || dst >= nodes || node >= nodes {
            return true;
        }
        let Some(idt) = idt(bytes, self.alloc.rate(node, dst)) else {
            return false;
        };
        let t = Time::from_ps(now.saturating_mul(self.cycle_ps));
        let f = (node * nodes + dst) as usize;
        let rc = &mut self.sched[f];
        if !self.pending[f] {
            // The flow's next packet is at the head of its queue: the flow becomes
            // valid, with NDT = max(NDT, now − (burst − 1)·IDT).
            let slack = idt.as_ps().saturating_mul(u64::from(self.burst - 1));
            rc.set_idt(FLOW, idt);
            rc.enqueue(Time::from_ps(t.as_ps().saturating_sub(slack)), FLOW, 1);
            self.pending[f] = true;
        }
        let due = rc.ndt(FLOW).is_some_and(|n| n <= t);
        if !due && self.last_held[node as usize] != now {
            self.last_held[node as usize] = now;
            self.held += 1;
        }
        due
    }

    fn taken(&mut self, node: u32, _pkt: u32, dst: u32, class: u8, bytes: u64, now: u64) {
        let nodes = self.alloc.nodes;
        if class != TrafficClass::BestEffort as u8 || dst >= nodes || node >= nodes {
            return;
        }
        let f = (node * nodes + dst) as usize;
        let rc = &mut self.sched[f];
        if let Some(idt) = idt(bytes, self.alloc.rate(node, dst)) {
            rc.set_idt(FLOW, idt);
        }
        // The flow is valid and due: the scheduler dispatches it, NDT += IDT.
        let d = rc.next(Time::from_ps(now.saturating_mul(self.cycle_ps)));
        debug_assert_eq!(d, Decision::Dispatch(FLOW));
        self.pending[f] = false;
    }
}

#[cfg(test)]
#[path = "source_rate_tests.rs"]
mod tests;
