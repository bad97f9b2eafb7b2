//! The resources a flow uses, as admission control and best-effort allocation count
//! them (thesis §3.3.1): per node a send, a receive and a combined limit, and every
//! cabled switch output port.
//!
//! Amounts are kept in *milli-bytes per second* (bytes/s × 1000) so that a received
//! byte can cost a fraction of a sent one in a node's combined limit (thesis Fig 5.4)
//! while every sum stays an exact integer.

use serde::{Deserialize, Serialize};

use crate::topology::{NodeId, PortRef, Route, Topology, FULL_COST};
use crate::units::Bandwidth;

/// A resource, by dense index: node `n` has `3n` (send), `3n+1` (receive) and `3n+2`
/// (combined); switch port `p` is `3·nodes + topology.port_index(p)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceId(pub u32);

/// What a [`ResourceId`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Resource {
    /// Traffic a node sends (capped by its send limit and its cable into the switch).
    NodeSend(NodeId),
    /// Traffic a node receives.
    NodeReceive(NodeId),
    /// Sent plus cost-weighted received traffic of a node (its "peak capacity").
    NodeCombined(NodeId),
    /// A switch output port (the link leaving by it).
    Port(PortRef),
}

/// One resource a flow uses and what one byte/s of the flow costs on it, in
/// thousandths (1000 everywhere except a destination's combined limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Use {
    /// The resource.
    pub resource: ResourceId,
    /// Cost per byte/s, in thousandths.
    pub cost: u16,
}

/// An amount of no limit.
pub(crate) const UNLIMITED: u64 = u64::MAX;

/// Milli-bytes/s of a bandwidth.
pub(crate) fn milli(b: Bandwidth) -> u64 {
    b.bytes_per_sec().saturating_mul(1000)
}

/// Index arithmetic and capacities of the resources of one topology.
#[derive(Debug, Clone)]
pub(crate) struct Resources {
    nodes: u32,
    /// Capacity per resource in milli-bytes/s; [`UNLIMITED`] for none.
    pub(crate) cap: Vec<u64>,
}

impl Resources {
    pub(crate) fn new(t: &Topology) -> Self {
        let nodes = t.nodes().len() as u32;
        let mut cap = Vec::with_capacity(3 * nodes as usize + t.port_count());
        for n in t.nodes() {
            let lim = |b: Option<Bandwidth>| b.map_or(UNLIMITED, milli);
            // The cable into the switch caps what a node can send.
            cap.push(milli(n.uplink).min(lim(n.capacity.send)));
            cap.push(lim(n.capacity.receive));
            cap.push(lim(n.capacity.combined));
        }
        for s in t.switches() {
            cap.extend(
                s.ports
                    .iter()
                    .map(|p| p.as_ref().map_or(0, |l| milli(l.capacity))),
            );
        }
        Resources { nodes, cap }
    }

    pub(crate) fn len(&self) -> usize {
        self.cap.len()
    }

    pub(crate) fn send(n: NodeId) -> ResourceId {
        ResourceId(3 * n.0)
    }
    pub(crate) fn receive(n: NodeId) -> ResourceId {
        ResourceId(3 * n.0 + 1)
    }
    pub(crate) fn combined(n: NodeId) -> ResourceId {
        ResourceId(3 * n.0 + 2)
    }
    pub(crate) fn port(&self, t: &Topology, p: PortRef) -> ResourceId {
        ResourceId(3 * self.nodes + t.port_index(p) as u32)
    }

    /// What a resource id stands for.
    pub(crate) fn resource(&self, t: &Topology, r: ResourceId) -> Resource {
        if r.0 < 3 * self.nodes {
            let n = NodeId(r.0 / 3);
            return match r.0 % 3 {
                0 => Resource::NodeSend(n),
                1 => Resource::NodeReceive(n),
                _ => Resource::NodeCombined(n),
            };
        }
        let i = (r.0 - 3 * self.nodes) as usize;
        // port_index is monotone in (switch, port): find the switch by bisection.
        let s = t.port_base.partition_point(|&b| b as usize <= i) - 1;
        Resource::Port(PortRef {
            switch: crate::topology::SwitchId(s as u32),
            port: (i - t.port_base[s] as usize) as u16,
        })
    }

    /// "switch s1 port 3", "node a send", "node b send + 0.5 × receive".
    pub(crate) fn label(&self, t: &Topology, r: ResourceId) -> String {
        match self.resource(t, r) {
            Resource::NodeSend(n) => format!("node {} send", t.node(n).name),
            Resource::NodeReceive(n) => format!("node {} receive", t.node(n).name),
            Resource::NodeCombined(n) => {
                let node = t.node(n);
                match node.capacity.receive_cost_permille {
                    FULL_COST => format!("node {} send + receive", node.name),
                    c => format!("node {} send + {} × receive", node.name, c as f64 / 1000.0),
                }
            }
            Resource::Port(p) => t.port_label(p),
        }
    }

    /// The resources a flow from `src` to `dst` along `route` uses, in the order the
    /// thesis's criteria check them: source node (1), switch ports (2), destination
    /// node (3). Resources without a limit are left out.
    pub(crate) fn uses(&self, t: &Topology, src: NodeId, dst: NodeId, route: &Route) -> Vec<Use> {
        let mut v = Vec::with_capacity(route.hops.len() + 4);
        let mut push = |resource: ResourceId, cost: u16| {
            if self.cap[resource.0 as usize] != UNLIMITED && cost > 0 {
                v.push(Use { resource, cost });
            }
        };
        push(Self::send(src), FULL_COST);
        push(Self::combined(src), FULL_COST);
        for &h in &route.hops {
            push(self.port(t, h), FULL_COST);
        }
        push(Self::receive(dst), FULL_COST);
        push(
            Self::combined(dst),
            t.node(dst).capacity.receive_cost_permille,
        );
        v
    }
}

/// Milli-bytes/s back to a bandwidth (rounded down).
pub(super) fn from_milli(m: u64) -> Bandwidth {
    Bandwidth::from_bytes_per_sec(m / 1000)
}

/// The total a set of premium flows reserves on each resource it uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Demand {
    /// (resource, milli-bytes/s), in the order the flows first use them.
    pub amounts: Vec<(ResourceId, u64)>,
    /// How many flows were summed.
    pub flows: u64,
}

impl Demand {
    /// The amount on `r`, bytes/s (0 if the set does not use it).
    pub fn on(&self, r: ResourceId) -> Bandwidth {
        self.amounts
            .iter()
            .find(|(x, _)| *x == r)
            .map_or(Bandwidth::ZERO, |&(_, m)| from_milli(m))
    }
}

/// Milli-bytes/s of a bandwidth, for callers that build demands by hand.
pub fn milli_of(b: Bandwidth) -> u64 {
    milli(b)
}
