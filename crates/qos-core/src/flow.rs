//! Communication flows and their service classes (thesis §2.1, §3.3, §4.2.1).
//!
//! A flow is a message stream from one communication end-point to another. As in the
//! thesis's GM implementation (§4.2.1) it is identified by the ordered triple
//! (source port, target port, priority), where a port is an end-point on a node: that
//! triple is a [`FlowKey`]. A [`Flow`] adds a user-facing name and a [`Class`]: premium
//! flows ask for a bandwidth and go through admission control (thesis §3.3.1);
//! best-effort flows carry only a weight and share what premium flows leave (§3.3.2).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::topology::NodeId;
use crate::units::Bandwidth;

/// A communication end-point: a port on a node (a GM port, a VIA VI, a queue pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Endpoint {
    /// The node (host) the end-point lives on.
    pub node: NodeId,
    /// The port number on that node.
    pub port: u16,
}

/// The identity of a flow: (source end-point, destination end-point, priority), the
/// thesis's (source port, target port, priority) of §4.2.1. Two flows with the same key
/// are the same flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FlowKey {
    /// Where the flow's packets come from.
    pub src: Endpoint,
    /// Where they go.
    pub dst: Endpoint,
    /// GM priority level (GM has two; any `u8` is accepted).
    pub priority: u8,
}

impl FlowKey {
    /// A key between port 0 of two nodes at priority 0 (the usual case in examples).
    pub fn between(src: NodeId, dst: NodeId) -> Self {
        FlowKey {
            src: Endpoint { node: src, port: 0 },
            dst: Endpoint { node: dst, port: 0 },
            priority: 0,
        }
    }
}

/// A best-effort flow's weight in weighted max-min sharing (the thesis rule ignores it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Weight(pub u32);

impl Weight {
    /// The largest weight accepted (keeps exact integer arithmetic in range).
    pub const MAX: Weight = Weight(1_000_000);
}

impl Default for Weight {
    fn default() -> Self {
        Weight(1)
    }
}

/// The service a flow asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A reserved bandwidth, admitted only if every resource on the path can carry it.
    Premium {
        /// The requested bandwidth, B_req.
        bandwidth: Bandwidth,
    },
    /// No reservation: a share of the surplus left by premium flows.
    BestEffort {
        /// Relative weight under weighted max-min sharing (1 by default).
        weight: Weight,
    },
}

impl Class {
    /// Whether this is a premium class.
    pub fn is_premium(&self) -> bool {
        matches!(self, Class::Premium { .. })
    }
}

/// A flow as a request names it: identity, a name for people, and a class.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Flow {
    /// The identity (source end-point, destination end-point, priority).
    pub key: FlowKey,
    /// A name for messages and tables ("video", "flow 2").
    pub name: String,
    /// Premium with a bandwidth or best-effort with a weight.
    pub class: Class,
}

impl Flow {
    /// A premium flow between port 0 of two nodes.
    pub fn premium(name: &str, src: NodeId, dst: NodeId, bandwidth: Bandwidth) -> Self {
        Flow {
            key: FlowKey::between(src, dst),
            name: name.to_string(),
            class: Class::Premium { bandwidth },
        }
    }
    /// A best-effort flow of weight 1 between port 0 of two nodes.
    pub fn best_effort(name: &str, src: NodeId, dst: NodeId) -> Self {
        Flow {
            key: FlowKey::between(src, dst),
            name: name.to_string(),
            class: Class::BestEffort {
                weight: Weight::default(),
            },
        }
    }
    /// The same flow with another key (to set ports or priority).
    pub fn with_key(mut self, key: FlowKey) -> Self {
        self.key = key;
        self
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node#{}:{} -> node#{}:{} prio {}",
            self.src.node.0, self.src.port, self.dst.node.0, self.dst.port, self.priority
        )
    }
}

/// A fast hasher for [`FlowKey`]s (a multiply-rotate over the key's words): flow
/// tables are looked up on every admission decision, and keys come from the cluster's
/// own, trusted nodes (thesis §3.5), so SipHash's flood resistance is not needed.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlowKeyHasher(u64);

impl std::hash::Hasher for FlowKeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(n as u64);
    }
    fn write_u16(&mut self, n: u16) {
        self.write_u64(n as u64);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A hash map keyed by [`FlowKey`] with [`FlowKeyHasher`].
pub type FlowMap<V> =
    std::collections::HashMap<FlowKey, V, std::hash::BuildHasherDefault<FlowKeyHasher>>;

/// A hash set of [`FlowKey`]s with [`FlowKeyHasher`].
pub type FlowSet = std::collections::HashSet<FlowKey, std::hash::BuildHasherDefault<FlowKeyHasher>>;
