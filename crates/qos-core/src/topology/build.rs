//! Building and validating a [`Topology`]: the piece-by-piece [`TopologyBuilder`] and
//! the ready-made shapes of the papers — a single crossbar (the thesis's 16-port
//! Myrinet switch, §5.1), cascaded switches (thesis Fig 1.3 / Fig 2.4) and a k×k mesh
//! of switches with one host each and dimension-order routing.
//!
//! Every check happens here, once: names are unique, ports exist and are cabled at
//! most once, capacities and T/Bmax are positive, explicit routes follow the cables
//! from the source's switch to the destination host.

use std::collections::HashMap;

use super::routing::{Routing, MESH_EAST, MESH_HOST, MESH_NORTH, MESH_SOUTH, MESH_WEST};
use super::{
    Node, NodeCapacity, NodeId, Peer, PortLink, PortRef, RateParams, Route, RoutingKind, Switch,
    SwitchId, Topology,
};
use crate::units::{Bandwidth, Duration};

/// The largest capacity accepted (1 PB/s): ledgers sum thousandths of bytes/s in u64.
pub const MAX_BANDWIDTH: Bandwidth = Bandwidth::from_bytes_per_sec(1_000_000_000_000_000);

/// The largest receive cost accepted, in thousandths (10.0).
pub const MAX_RECEIVE_COST: u16 = 10_000;

/// Most hosts a topology may have.
pub const MAX_NODES: usize = 1 << 20;
/// Most switch ports a topology may have, all switches together.
pub const MAX_PORTS: usize = 1 << 24;
/// Most switches for shortest-path routing (its table has one entry per pair of
/// switches); larger networks use dimension-order or explicit routes.
pub const MAX_SHORTEST_PATH_SWITCHES: usize = 4096;

/// The quantity a [`TopologyError::Zero`] or [`TopologyError::OutOfRange`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// A host's T.
    T,
    /// A host's Bmax.
    Bmax,
    /// A host's send capacity.
    Send,
    /// A host's receive capacity.
    Receive,
    /// A host's combined capacity.
    Combined,
    /// A host's receive cost.
    ReceiveCost,
    /// The capacity of a host's link to its switch.
    HostLink,
    /// A switch-to-switch link's capacity out of its first end (towards the second).
    LinkOutOfA,
    /// A switch-to-switch link's capacity out of its second end.
    LinkOutOfB,
    /// The tick length.
    Tick,
}

/// Why a topology is invalid. Messages name the thing at fault by its name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// Two hosts or two switches share a name.
    #[error("duplicate name '{0}'")]
    DuplicateName(String),
    /// A host name that was never declared.
    #[error("unknown node '{0}'")]
    UnknownNode(String),
    /// A switch name that was never declared.
    #[error("unknown switch '{0}'")]
    UnknownSwitch(String),
    /// A port number beyond the switch's port count.
    #[error("switch {switch} has no port {port} (it has ports 0..{ports})")]
    NoSuchPort {
        /// Switch name.
        switch: String,
        /// The missing port.
        port: u16,
        /// How many ports the switch has.
        ports: u16,
    },
    /// A port that would get a second cable.
    #[error("switch {switch} port {port} is used twice (already cabled to {other})")]
    PortInUse {
        /// Switch name.
        switch: String,
        /// The port.
        port: u16,
        /// What it is already cabled to.
        other: String,
    },
    /// A zero (or otherwise meaningless) capacity, T or Bmax.
    #[error("{what} must be greater than zero")]
    Zero {
        /// Which quantity, in words.
        what: String,
        /// Which quantity, as data (for pointing at the field of a file).
        quantity: Quantity,
    },
    /// A value beyond what the ledger can sum exactly.
    #[error("{what} is out of range ({limit})")]
    OutOfRange {
        /// Which quantity, in words.
        what: String,
        /// Which quantity, as data.
        quantity: Quantity,
        /// The accepted range.
        limit: String,
    },
    /// An explicit route that does not follow the cables.
    #[error("route {from} -> {to}: {why}")]
    BadRoute {
        /// Source host.
        from: String,
        /// Destination host.
        to: String,
        /// What is wrong with it.
        why: String,
        /// The index of the port at fault in the route, if one is.
        hop: Option<usize>,
    },
    /// A switch with no ports.
    #[error("switch {0} must have at least one port")]
    NoPorts(String),
    /// Dimension-order routing on something that is not a mesh from [`mesh`].
    #[error("dimension-order routing needs a mesh built by the mesh builder")]
    NotAMesh,
    /// Beyond the sizes this implementation handles.
    #[error("topology too large: {0}")]
    TooLarge(String),
}

/// Parameters shared by the hosts a builder makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostDefaults {
    /// T and Bmax.
    pub rate: RateParams,
    /// Send / receive / combined limits.
    pub capacity: NodeCapacity,
    /// Capacity of every cable, each direction.
    pub link: Bandwidth,
}

impl HostDefaults {
    /// The thesis's cluster (§5.1, §5.3): T = 48 µs, Bmax = 81.8 MB/s, a node's send
    /// and combined peak = Bmax, Myrinet cables of 1.28 Gbit/s = 160 MB/s.
    pub fn thesis() -> Self {
        let rate = RateParams::thesis();
        HostDefaults {
            rate,
            capacity: NodeCapacity::peak(rate.bmax),
            link: Bandwidth::from_mb_per_sec(160.0),
        }
    }

    /// The thesis's cluster as its bandwidth manager ran it (§5.6): [`Self::thesis`]
    /// with best-effort flows sharing at most [`NodeCapacity::THESIS_BEST_EFFORT`] of a
    /// node. `examples/topologies/thesis-crossbar.toml` describes the same hosts.
    pub fn thesis_cluster() -> Self {
        let mut d = Self::thesis();
        d.capacity.best_effort = Some(NodeCapacity::THESIS_BEST_EFFORT);
        d
    }
}

/// Assembles a topology piece by piece; each call checks what it can at once, so a
/// file loader can tie an error to the line that caused it.
#[derive(Debug, Clone, Default)]
pub struct TopologyBuilder {
    nodes: Vec<Node>,
    switches: Vec<Switch>,
    node_names: HashMap<String, NodeId>,
    switch_names: HashMap<String, SwitchId>,
    explicit: HashMap<(NodeId, NodeId), Route>,
    mesh_k: Option<u32>,
    routing: Option<RoutingKind>,
    tick: Option<Duration>,
    ports: usize,
}

fn positive(
    b: Bandwidth,
    quantity: Quantity,
    what: impl Fn() -> String,
) -> Result<(), TopologyError> {
    if b.is_zero() {
        return Err(TopologyError::Zero {
            what: what(),
            quantity,
        });
    }
    if b > MAX_BANDWIDTH {
        return Err(TopologyError::OutOfRange {
            what: what(),
            quantity,
            limit: "at most 1 PB/s".into(),
        });
    }
    Ok(())
}

impl TopologyBuilder {
    /// An empty topology.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the length of a tick (for printing IDTs in ticks).
    pub fn set_tick(&mut self, tick: Option<Duration>) -> Result<(), TopologyError> {
        if tick.is_some_and(|t| t.is_zero()) {
            return Err(TopologyError::Zero {
                what: "tick".into(),
                quantity: Quantity::Tick,
            });
        }
        self.tick = tick;
        Ok(())
    }

    /// Chooses the routing rule (shortest path unless set).
    pub fn set_routing(&mut self, kind: RoutingKind) -> Result<(), TopologyError> {
        if kind == RoutingKind::DimensionOrder && self.mesh_k.is_none() {
            return Err(TopologyError::NotAMesh);
        }
        self.routing = Some(kind);
        Ok(())
    }

    /// Adds a switch with ports numbered `0..ports`.
    pub fn add_switch(&mut self, name: &str, ports: u16) -> Result<SwitchId, TopologyError> {
        if ports == 0 {
            return Err(TopologyError::NoPorts(name.to_string()));
        }
        if self.switch_names.contains_key(name) || self.node_names.contains_key(name) {
            return Err(TopologyError::DuplicateName(name.to_string()));
        }
        self.ports += ports as usize;
        if self.ports > MAX_PORTS {
            return Err(TopologyError::TooLarge(format!(
                "more than {MAX_PORTS} switch ports"
            )));
        }
        let id = SwitchId(self.switches.len() as u32);
        self.switches.push(Switch {
            name: name.to_string(),
            ports: vec![None; ports as usize],
        });
        self.switch_names.insert(name.to_string(), id);
        Ok(id)
    }

    /// A switch by name.
    pub fn switch_id(&self, name: &str) -> Result<SwitchId, TopologyError> {
        self.switch_names
            .get(name)
            .copied()
            .ok_or_else(|| TopologyError::UnknownSwitch(name.to_string()))
    }

    /// A host by name.
    pub fn node_id(&self, name: &str) -> Result<NodeId, TopologyError> {
        self.node_names
            .get(name)
            .copied()
            .ok_or_else(|| TopologyError::UnknownNode(name.to_string()))
    }

    fn label(&self, p: PortRef) -> String {
        format!(
            "switch {} port {}",
            self.switches[p.switch.0 as usize].name, p.port
        )
    }

    fn peer_label(&self, peer: Peer) -> String {
        match peer {
            Peer::Node(n) => format!("node {}", self.nodes[n.0 as usize].name),
            Peer::Switch(p) => self.label(p),
        }
    }

    /// Checks that `p` exists and is free.
    fn free_port(&self, p: PortRef) -> Result<(), TopologyError> {
        let sw = &self.switches[p.switch.0 as usize];
        match sw.ports.get(p.port as usize) {
            None => Err(TopologyError::NoSuchPort {
                switch: sw.name.clone(),
                port: p.port,
                ports: sw.ports.len() as u16,
            }),
            Some(Some(l)) => Err(TopologyError::PortInUse {
                switch: sw.name.clone(),
                port: p.port,
                other: self.peer_label(l.peer),
            }),
            Some(None) => Ok(()),
        }
    }

    /// Adds a host cabled to switch port `attach`; `uplink` is the host-to-switch
    /// capacity and `downlink` the switch-to-host one (port `attach`'s output).
    pub fn add_host(
        &mut self,
        name: &str,
        rate: RateParams,
        capacity: NodeCapacity,
        attach: PortRef,
        uplink: Bandwidth,
        downlink: Bandwidth,
    ) -> Result<NodeId, TopologyError> {
        if self.switch_names.contains_key(name) || self.node_names.contains_key(name) {
            return Err(TopologyError::DuplicateName(name.to_string()));
        }
        if rate.t.is_zero() {
            return Err(TopologyError::Zero {
                what: format!("T of node {name}"),
                quantity: Quantity::T,
            });
        }
        positive(rate.bmax, Quantity::Bmax, || format!("Bmax of node {name}"))?;
        for (kind, quantity, cap) in [
            ("send", Quantity::Send, capacity.send),
            ("receive", Quantity::Receive, capacity.receive),
            ("combined", Quantity::Combined, capacity.combined),
        ] {
            if let Some(c) = cap {
                positive(c, quantity, || format!("{kind} capacity of node {name}"))?;
            }
        }
        if capacity.receive_cost_permille > MAX_RECEIVE_COST {
            return Err(TopologyError::OutOfRange {
                what: format!("receive_cost of node {name}"),
                quantity: Quantity::ReceiveCost,
                limit: "0 to 10".into(),
            });
        }
        positive(uplink, Quantity::HostLink, || {
            format!("link capacity of node {name}")
        })?;
        positive(downlink, Quantity::HostLink, || {
            format!("link capacity of node {name}")
        })?;
        self.free_port(attach)?;
        if self.nodes.len() >= MAX_NODES {
            return Err(TopologyError::TooLarge(format!(
                "more than {MAX_NODES} hosts"
            )));
        }
        let id = NodeId(self.nodes.len() as u32);
        self.switches[attach.switch.0 as usize].ports[attach.port as usize] = Some(PortLink {
            peer: Peer::Node(id),
            capacity: downlink,
        });
        self.nodes.push(Node {
            name: name.to_string(),
            rate,
            capacity,
            attach,
            uplink,
        });
        self.node_names.insert(name.to_string(), id);
        Ok(id)
    }

    /// Cables switch port `a` to switch port `b`; `a_to_b` is the capacity of packets
    /// leaving by `a` (arriving at `b`), `b_to_a` the other direction.
    pub fn connect(
        &mut self,
        a: PortRef,
        b: PortRef,
        a_to_b: Bandwidth,
        b_to_a: Bandwidth,
    ) -> Result<(), TopologyError> {
        self.free_port(a)?;
        self.free_port(b)?;
        if a == b {
            return Err(TopologyError::PortInUse {
                switch: self.switches[a.switch.0 as usize].name.clone(),
                port: a.port,
                other: "itself".into(),
            });
        }
        positive(a_to_b, Quantity::LinkOutOfA, || {
            format!("capacity of the link from {}", self.label(a))
        })?;
        positive(b_to_a, Quantity::LinkOutOfB, || {
            format!("capacity of the link from {}", self.label(b))
        })?;
        self.switches[a.switch.0 as usize].ports[a.port as usize] = Some(PortLink {
            peer: Peer::Switch(b),
            capacity: a_to_b,
        });
        self.switches[b.switch.0 as usize].ports[b.port as usize] = Some(PortLink {
            peer: Peer::Switch(a),
            capacity: b_to_a,
        });
        Ok(())
    }

    /// Fixes the route from `src` to `dst` to the given output ports, after checking
    /// that they follow the cables from `src`'s switch to `dst`.
    pub fn add_route(
        &mut self,
        src: NodeId,
        dst: NodeId,
        hops: Vec<PortRef>,
    ) -> Result<(), TopologyError> {
        let bad_at = |hop: Option<usize>, why: String| TopologyError::BadRoute {
            from: self.nodes[src.0 as usize].name.clone(),
            to: self.nodes[dst.0 as usize].name.clone(),
            why,
            hop,
        };
        let bad = |why: String| bad_at(None, why);
        if src == dst {
            return Err(bad("source and destination are the same node".into()));
        }
        if self.explicit.contains_key(&(src, dst)) {
            return Err(bad(
                "given twice: one route per pair of nodes (which one was meant?)".into(),
            ));
        }
        let Some(first) = hops.first() else {
            return Err(bad("a route needs at least one port".into()));
        };
        let start = self.nodes[src.0 as usize].attach.switch;
        if first.switch != start {
            return Err(bad_at(
                Some(0),
                format!(
                    "starts at switch {} but node {} is cabled to switch {}",
                    self.switches[first.switch.0 as usize].name,
                    self.nodes[src.0 as usize].name,
                    self.switches[start.0 as usize].name
                ),
            ));
        }
        for (i, &h) in hops.iter().enumerate() {
            let sw = &self.switches[h.switch.0 as usize];
            let link = match sw.ports.get(h.port as usize) {
                None => {
                    return Err(bad_at(
                        Some(i),
                        format!(
                            "switch {} has no port {} (it has ports 0..{})",
                            sw.name,
                            h.port,
                            sw.ports.len()
                        ),
                    ))
                }
                Some(None) => {
                    return Err(bad_at(Some(i), format!("{} is not cabled", self.label(h))))
                }
                Some(Some(l)) => l,
            };
            if hops[..i].contains(&h) {
                return Err(bad_at(Some(i), format!("{} is used twice", self.label(h))));
            }
            match (hops.get(i + 1), link.peer) {
                (Some(next), Peer::Switch(q)) if q.switch == next.switch => {}
                (Some(next), peer) => {
                    return Err(bad_at(
                        Some(i),
                        format!(
                            "{} leads to {}, not to switch {}",
                            self.label(h),
                            self.peer_label(peer),
                            self.switches[next.switch.0 as usize].name
                        ),
                    ))
                }
                (None, Peer::Node(n)) if n == dst => {}
                (None, peer) => {
                    return Err(bad_at(
                        Some(i),
                        format!(
                            "the last port, {}, leads to {}, not to node {}",
                            self.label(h),
                            self.peer_label(peer),
                            self.nodes[dst.0 as usize].name
                        ),
                    ))
                }
            }
        }
        self.explicit.insert((src, dst), Route { hops });
        Ok(())
    }

    /// Finishes the topology and computes its routing table.
    pub fn build(self) -> Result<Topology, TopologyError> {
        let mut port_base = Vec::with_capacity(self.switches.len() + 1);
        let mut acc = 0u32;
        port_base.push(0);
        for s in &self.switches {
            acc += s.ports.len() as u32;
            port_base.push(acc);
        }
        let mut t = Topology {
            nodes: self.nodes,
            switches: self.switches,
            port_base,
            node_names: self.node_names,
            switch_names: self.switch_names,
            routing: Routing::DimensionOrder { k: 0 },
            explicit: self.explicit,
            tick: self.tick,
        };
        t.routing = match (
            self.routing.unwrap_or(RoutingKind::ShortestPath),
            self.mesh_k,
        ) {
            (RoutingKind::DimensionOrder, Some(k)) => Routing::DimensionOrder { k },
            (RoutingKind::DimensionOrder, None) => return Err(TopologyError::NotAMesh),
            (RoutingKind::ShortestPath, _) => {
                if t.switches.len() > MAX_SHORTEST_PATH_SWITCHES {
                    return Err(TopologyError::TooLarge(format!(
                        "shortest-path routing handles at most {MAX_SHORTEST_PATH_SWITCHES} \
                         switches; give explicit routes or use a mesh"
                    )));
                }
                Routing::shortest_path(&t.switches)
            }
        };
        Ok(t)
    }
}

/// Adds hosts `names` on consecutive ports of `switch` from port 0.
fn add_hosts(
    b: &mut TopologyBuilder,
    switch: SwitchId,
    names: impl Iterator<Item = String>,
    d: &HostDefaults,
) -> Result<(), TopologyError> {
    for (port, name) in names.enumerate() {
        let attach = PortRef {
            switch,
            port: port as u16,
        };
        b.add_host(&name, d.rate, d.capacity, attach, d.link, d.link)?;
    }
    Ok(())
}

/// Hosts `n0..n{hosts-1}` on ports `0..hosts` of one crossbar switch `s0` with
/// `max(16, hosts)` ports: the thesis's test cluster (§5.1).
pub fn crossbar(hosts: u16, d: &HostDefaults) -> Result<TopologyBuilder, TopologyError> {
    let mut b = TopologyBuilder::new();
    let s = b.add_switch("s0", hosts.max(16))?;
    add_hosts(&mut b, s, (0..hosts).map(|i| format!("n{i}")), d)?;
    Ok(b)
}

/// `switches` switches `s0, s1, ...` in a chain, each with `hosts_per_switch` hosts on
/// ports `0..h` (hosts numbered `n0, n1, ...` across the chain); port `h` of each
/// switch is cabled to port `h + 1` of the next one (thesis Fig 1.3 and Fig 2.4 are
/// two such switches). `trunk` is the capacity of the switch-to-switch cables.
pub fn cascade(
    switches: u16,
    hosts_per_switch: u16,
    d: &HostDefaults,
    trunk: Bandwidth,
) -> Result<TopologyBuilder, TopologyError> {
    if switches as usize * hosts_per_switch as usize > MAX_NODES {
        return Err(TopologyError::TooLarge(format!(
            "more than {MAX_NODES} hosts"
        )));
    }
    let mut b = TopologyBuilder::new();
    let h = hosts_per_switch;
    let ports = (h + 2).max(16);
    for i in 0..switches {
        let s = b.add_switch(&format!("s{i}"), ports)?;
        let first = i as u32 * h as u32;
        add_hosts(
            &mut b,
            s,
            (0..h as u32).map(|j| format!("n{}", first + j)),
            d,
        )?;
        if i > 0 {
            let prev = PortRef {
                switch: SwitchId(i as u32 - 1),
                port: h,
            };
            b.connect(
                prev,
                PortRef {
                    switch: s,
                    port: h + 1,
                },
                trunk,
                trunk,
            )?;
        }
    }
    Ok(b)
}

/// A k×k mesh: switch `s{x}_{y}` at column x, row y has host `n{x}_{y}` on port 0 and
/// cables to its east (+x, port 1), west (port 2), north (+y, port 3) and south
/// (port 4) neighbours. Routing is dimension-order (X, then Y).
pub fn mesh(k: u16, d: &HostDefaults) -> Result<TopologyBuilder, TopologyError> {
    if k as usize * k as usize > MAX_NODES {
        return Err(TopologyError::TooLarge(format!(
            "more than {MAX_NODES} hosts"
        )));
    }
    let mut b = TopologyBuilder::new();
    let k32 = k as u32;
    for y in 0..k32 {
        for x in 0..k32 {
            b.add_switch(&format!("s{x}_{y}"), 5)?;
        }
    }
    for y in 0..k32 {
        for x in 0..k32 {
            let s = SwitchId(y * k32 + x);
            let attach = PortRef {
                switch: s,
                port: MESH_HOST,
            };
            b.add_host(
                &format!("n{x}_{y}"),
                d.rate,
                d.capacity,
                attach,
                d.link,
                d.link,
            )?;
            if x + 1 < k32 {
                let east = PortRef {
                    switch: s,
                    port: MESH_EAST,
                };
                let west = PortRef {
                    switch: SwitchId(s.0 + 1),
                    port: MESH_WEST,
                };
                b.connect(east, west, d.link, d.link)?;
            }
            if y + 1 < k32 {
                let north = PortRef {
                    switch: s,
                    port: MESH_NORTH,
                };
                let south = PortRef {
                    switch: SwitchId(s.0 + k32),
                    port: MESH_SOUTH,
                };
                b.connect(north, south, d.link, d.link)?;
            }
        }
    }
    b.mesh_k = Some(k32);
    b.routing = Some(RoutingKind::DimensionOrder);
    Ok(b)
}

#[cfg(test)]
#[path = "build_tests.rs"]
mod tests;
