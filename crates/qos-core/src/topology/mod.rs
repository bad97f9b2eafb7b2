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
//! [`build::cascade`], [`build::mesh`], or [`TopologyBuilder`] piece by piece), or load it
//! from TOML with [`file::load`] (format: `docs/topology.md`). A built [`Topology`] is
//! valid: every port it names exists and a route lookup costs O(route length).

pub mod build;
pub mod file;
mod routing;

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::units::{Bandwidth, Duration};

pub use build::TopologyBuilder;
pub use routing::RoutingKind;

/// A host, by index into [`Topology::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// A switch, by index into [`Topology::switches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SwitchId(pub u32);

/// A numbered port of a switch; on a route, the *output* port a packet leaves by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PortRef {
    /// The switch.
    pub switch: SwitchId,
    /// The port number, from 0.
    pub port: u16,
}

/// A NIC's rate-control parameters (thesis §3.2.2, §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateParams {
    /// The minimum time between two packet dispatches of an unregulated flow
    /// (96 LANai ticks = 48 µs in the thesis).
    pub t: Duration,
    /// The bandwidth of an uncontended, unregulated flow (81.8 MB/s in the thesis).
    pub bmax: Bandwidth,
}

impl RateParams {
    /// The thesis's LANai 4.3 / 4 KB-packet values: T = 48 µs (96 ticks of 0.5 µs),
    /// Bmax = 81.8 MB/s.
    pub fn thesis() -> Self {
        RateParams {
            t: Duration::from_us(48),
            bmax: Bandwidth::from_mb_per_sec(81.8),
        }
    }
}

/// Receive cost 1.0 in thousandths: an incoming byte costs as much as an outgoing one.
pub const FULL_COST: u16 = 1000;

/// What a node can carry (thesis §3.3.1 criteria 1 and 3, Fig 5.4). `None` means no
/// limit of that kind. Admission checks, at a flow's source and destination:
/// - `send` ≥ Σ premium bandwidth of flows originating at the node,
/// - `receive` ≥ Σ premium bandwidth of flows terminating at the node,
/// - `combined` ≥ Σ send + `receive_cost`/1000 · Σ receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCapacity {
    /// Limit on traffic the node sends.
    pub send: Option<Bandwidth>,
    /// Limit on traffic the node receives.
    pub receive: Option<Bandwidth>,
    /// Limit on sent plus weighted received traffic: the thesis's "peak capacity".
    pub combined: Option<Bandwidth>,
    /// Cost of a received byte in the combined limit, in thousandths of a sent byte
    /// (1000 = same cost; less models Fig 5.4's cheaper incoming packets).
    pub receive_cost_permille: u16,
    /// What the node shares among its best-effort flows at most (minus its premium
    /// reservations), when less than its capacity; admission ignores it. A best-effort
    /// flow alone on its whole path still sends at peak rate. The thesis's manager
    /// behaves so ([`NodeCapacity::THESIS_BEST_EFFORT`]; see `qos_core::besteffort`).
    #[serde(default)]
    pub best_effort: Option<Bandwidth>,
}

impl NodeCapacity {
    /// What the thesis's bandwidth manager shared among a node's best-effort flows, at
    /// most (thesis §4.3, §5.6). Calibrated against §5.6, the one place the thesis
    /// measures it: beside premium flows of 40, 40 + 20 and 20 MB/s on the node, its
    /// best-effort flows got about 38, 18 and 2 × 29 MB/s, and two best-effort flows
    /// alone 2 × 39 MB/s — 40 + 38 = 60 + 18 = 20 + 58 = 2 × 39 = 78 MB/s every time,
    /// below the 81.8 MB/s one unregulated flow reaches (§5.3; the same rule at Bmax
    /// would give 41.8, 21.8, 2 × 30.9 and 2 × 40.9). A best-effort flow alone on its
    /// path still sends at peak rate (§5.6). The thesis's cluster carries it in its
    /// topology ([`crate::topology::build::HostDefaults::thesis_cluster`],
    /// `examples/topologies/thesis-crossbar.toml`), so that the simulator, `clusterqos
    /// admit` and the manager service share the same number.
    pub const THESIS_BEST_EFFORT: Bandwidth = Bandwidth::from_bytes_per_sec(78_000_000);

    /// The thesis's criterion as written: every flow originating or terminating at the
    /// node counts fully against one peak capacity, and sending alone is capped at it.
    pub fn peak(bmax: Bandwidth) -> Self {
        NodeCapacity {
            send: Some(bmax),
            receive: None,
            combined: Some(bmax),
            receive_cost_permille: FULL_COST,
            best_effort: None,
        }
    }
}

/// A host: a NIC cabled to one switch port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Unique name ("n0", "a").
    pub name: String,
    /// T and Bmax of its NIC.
    pub rate: RateParams,
    /// Send / receive / combined limits.
    pub capacity: NodeCapacity,
    /// The switch port its cable plugs into.
    pub attach: PortRef,
    /// Capacity of the cable from the host into the switch (the switch-to-host
    /// direction is the capacity of output port `attach`).
    pub uplink: Bandwidth,
}

/// What is at the far end of a switch port's cable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Peer {
    /// A host.
    Node(NodeId),
    /// Another switch's port (where packets leaving by this port enter).
    Switch(PortRef),
}

/// A cabled switch port: where it leads and how fast packets leave by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortLink {
    /// The other end of the cable.
    pub peer: Peer,
    /// Capacity of the direction leaving the switch by this port.
    pub capacity: Bandwidth,
}

/// A crossbar switch with numbered ports, some of them cabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    /// Unique name ("s0").
    pub name: String,
    /// One entry per port number; `None` for an empty port.
    pub ports: Vec<Option<PortLink>>,
}

/// A deterministic source route: the switch output ports a packet leaves by, in order;
/// the last one is cabled to the destination host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Route {
    /// Output ports, first switch first.
    pub hops: Vec<PortRef>,
}

/// Why a route could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// A node index outside the topology.
    #[error("no node #{0} in the topology")]
    UnknownNode(u32),
    /// Source and destination are the same host: nothing crosses the network.
    #[error("source and destination are the same node '{0}'")]
    SameNode(String),
    /// The switches are not connected.
    #[error("no path from node '{from}' to node '{to}'")]
    Unreachable {
        /// Source host.
        from: String,
        /// Destination host.
        to: String,
    },
}

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
            let Some(port) = self.routing.next_port(self, here, to.switch) else {
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

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, h) in self.hops.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "s#{}:{}", h.switch.0, h.port)?;
        }
        Ok(())
    }
}
