//! The elements of a topology: hosts and switches by index, ports, what a port leads
//! to, the hosts' rate-control parameters and capacities, routes and why a route could
//! not be found. A leaf, so the builders and the routing rules use them without
//! importing the topology back.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::units::{Bandwidth, Duration};

/// A host, by index into [`super::Topology::nodes`].
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
