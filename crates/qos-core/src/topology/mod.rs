//! The cluster as admission control and the simulator see it (thesis §1.1 Fig 1.3,
//! §2.3 Fig 2.4, §3.3.1, §3.5, §5.3 Fig 5.4).
//!
//! - **Hosts** ([`Node`]) carry the rate-control parameters of their NIC, `T` and `Bmax`
//!   ([`RateParams`], thesis §5.3), and a [`NodeCapacity`] with separate send, receive
//!   and combined limits: a NIC does less work per incoming packet than per outgoing
//!   one, so a node receiving at 16.37 MB/s can still send ≈ 65 MB/s (thesis Fig 5.4).
//!   Each host is cabled to one switch port.
//! - **Switches** have numbered ports; each cabled port is an *output port* with the
//!   capacity of the link direction leaving the switch through it. Links may have a
//!   different capacity in each direction.
//! - **Routes** are deterministic source routes (thesis §3.5): the list of switch output
//!   ports a packet traverses, the last one leading to the destination host. They come
//!   from explicit entries, or from the topology's [`RoutingKind`]: shortest path with
//!   the lowest port number breaking ties, or dimension-order (XY) on a mesh.
//!
//! Build a topology with the builders in [`build`] ([`build::crossbar`],
//! [`build::cascade`], [`build::mesh`], or [`build::TopologyBuilder`] piece by piece), or load it
//! from TOML with [`file::load`] (format: `docs/topology.md`). A built [`Topology`] is
//! valid: every port it names exists and a route lookup costs O(route length).

pub mod build;
pub mod elements;
pub mod file;
mod routing;

use std::collections::HashMap;

use crate::units::{Bandwidth, Duration};

pub use elements::{
    Node, NodeCapacity, NodeId, Peer, PortLink, PortRef, RateParams, Route, RouteError, Switch,
    SwitchId, FULL_COST,
};
pub use routing::RoutingKind;

/// A validated cluster: hosts, switches, cables, and how routes are chosen.
#[derive(Debug, Clone)]
pub struct Topology {
    pub(crate) nodes: Vec<Node>,
    pub(crate) switches: Vec<Switch>,
    /// Dense index of port (s, 0) among all switch ports: `port_base[s] + port`.
    pub(crate) port_base: Vec<u32>,
    pub(crate) node_names: HashMap<String, NodeId>,
    pub(crate) switch_names: HashMap<String, SwitchId>,
    pub(crate) routing: routing::Routing,
    pub(crate) explicit: HashMap<(NodeId, NodeId), Route>,
    pub(crate) tick: Option<Duration>,
}

impl Topology {
    /// All hosts; a [`NodeId`] indexes this slice.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// All switches; a [`SwitchId`] indexes this slice.
    pub fn switches(&self) -> &[Switch] {
        &self.switches
    }
    /// One host. Panics on an id not from this topology.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }
    /// One switch. Panics on an id not from this topology.
    pub fn switch(&self, id: SwitchId) -> &Switch {
        &self.switches[id.0 as usize]
    }
    /// A host by name.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_names.get(name).copied()
    }
    /// A switch by name.
    pub fn switch_id(&self, name: &str) -> Option<SwitchId> {
        self.switch_names.get(name).copied()
    }
    /// The cable at a switch port, if the port exists and is cabled.
    pub fn port(&self, p: PortRef) -> Option<&PortLink> {
        self.switches
            .get(p.switch.0 as usize)?
            .ports
            .get(p.port as usize)?
            .as_ref()
    }
    /// Total number of switch ports (cabled or not): the range of [`Self::port_index`].
    pub fn port_count(&self) -> usize {
        self.port_base.last().map_or(0, |&b| b as usize)
    }
    /// A dense index in `0..port_count()` for a switch port, for per-port arrays.
    pub fn port_index(&self, p: PortRef) -> usize {
        self.port_base[p.switch.0 as usize] as usize + p.port as usize
    }
    /// The length of one LANai-style tick, if the topology file gave one
    /// (lets "96ticks" be parsed and IDTs be printed in ticks).
    pub fn tick(&self) -> Option<Duration> {
        self.tick
    }
    /// How routes without an explicit entry are chosen.
    pub fn routing_kind(&self) -> RoutingKind {
        self.routing.kind()
    }
    /// "switch s1 port 3": how messages name a port.
    pub fn port_label(&self, p: PortRef) -> String {
        format!("switch {} port {}", self.switch(p.switch).name, p.port)
    }

    /// The same cluster with every host's T and Bmax replaced by `rate`, as after the
    /// calibration of thesis §5.3 (the manager computes IDTs from measured values). A
    /// host whose capacity is the thesis's single peak capacity of its old Bmax
    /// ([`NodeCapacity::peak`]) gets the peak capacity of the new Bmax; other capacities
    /// were written explicitly and are kept.
    pub fn with_rate(&self, rate: RateParams) -> Topology {
        let mut t = self.clone();
        for n in &mut t.nodes {
            let best_effort = n.capacity.best_effort;
            if n.capacity
                == (NodeCapacity {
                    best_effort,
                    ..NodeCapacity::peak(n.rate.bmax)
                })
            {
                n.capacity = NodeCapacity {
                    best_effort,
                    ..NodeCapacity::peak(rate.bmax)
                };
            }
            n.rate = rate;
        }
        t
    }

    /// The same cluster with every host sharing at most `cap` among its best-effort
    /// flows ([`NodeCapacity::best_effort`]).
    pub fn with_best_effort_capacity(&self, cap: Option<Bandwidth>) -> Topology {
        let mut t = self.clone();
        for n in &mut t.nodes {
            n.capacity.best_effort = cap;
        }
        t
    }

    /// The deterministic route from `src` to `dst`: an explicit route if one was given,
    /// else the one the routing kind computes. Costs O(route length) plus one
    /// allocation.
    pub fn route(&self, src: NodeId, dst: NodeId) -> Result<Route, RouteError> {
        let mut hops = Vec::with_capacity(4);
        self.route_into(src, dst, &mut hops)?;
        Ok(Route { hops })
    }

    /// [`Topology::route`]'s hops into `hops` (cleared first), without allocating once
    /// `hops` is large enough: for callers that walk many routes.
    pub fn route_into(
        &self,
        src: NodeId,
        dst: NodeId,
        hops: &mut Vec<PortRef>,
    ) -> Result<(), RouteError> {
        hops.clear();
        let n = self.nodes.len() as u32;
        for id in [src, dst] {
            if id.0 >= n {
                return Err(RouteError::UnknownNode(id.0));
            }
        }
        if src == dst {
            return Err(RouteError::SameNode(self.node(src).name.clone()));
        }
        if !self.explicit.is_empty() {
            if let Some(r) = self.explicit.get(&(src, dst)) {
                hops.extend_from_slice(&r.hops);
                return Ok(());
            }
        }
        let from = self.node(src).attach.switch;
        let to = self.node(dst).attach;
        let mut here = from;
        // A route never visits more switches than exist; the bound guards against a
        // routing table that would loop.
        for _ in 0..=self.switches.len() {
            if here == to.switch {
                hops.push(to);
                return Ok(());
            }
            let Some(port) = self.routing.next_port(here, to.switch) else {
                break;
            };
            let out = PortRef { switch: here, port };
            hops.push(out);
            match self.port(out).map(|l| l.peer) {
                Some(Peer::Switch(next)) => here = next.switch,
                _ => break,
            }
        }
        Err(RouteError::Unreachable {
            from: self.node(src).name.clone(),
            to: self.node(dst).name.clone(),
        })
    }
}
