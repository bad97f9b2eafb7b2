//! How a topology picks the deterministic route between two switches (thesis §3.5:
//! "the underlying network uses deterministic source routing").
//!
//! - Shortest path: a next-port table computed once by a breadth-first search from
//!   every switch (O(S·(S+E)) time, S² entries of 2 bytes); ties go to the lowest port
//!   number, so routes never change between runs.
//! - Dimension-order (XY) on a k×k mesh built by [`super::build::mesh`]: first along x,
//!   then along y; computed on the fly, no table.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::elements::{Peer, Switch, SwitchId};

/// Which rule picks routes that were not given explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutingKind {
    /// Fewest switch hops, lowest port number first on ties.
    ShortestPath,
    /// X first, then Y, on a k×k mesh (only for meshes made by `build::mesh`).
    DimensionOrder,
}

/// Mesh port numbers used by `build::mesh` and dimension-order routing.
pub(crate) const MESH_HOST: u16 = 0;
pub(crate) const MESH_EAST: u16 = 1; // +x
pub(crate) const MESH_WEST: u16 = 2; // -x
pub(crate) const MESH_NORTH: u16 = 3; // +y
pub(crate) const MESH_SOUTH: u16 = 4; // -y

const NONE: u16 = u16::MAX;

#[derive(Debug, Clone)]
pub(crate) enum Routing {
    ShortestPath {
        /// `next[here * S + to]`: the output port at `here` toward switch `to`.
        next: Vec<u16>,
        switches: usize,
    },
    DimensionOrder {
        k: u32,
    },
}

impl Routing {
    pub(crate) fn kind(&self) -> RoutingKind {
        match self {
            Routing::ShortestPath { .. } => RoutingKind::ShortestPath,
            Routing::DimensionOrder { .. } => RoutingKind::DimensionOrder,
        }
    }

    /// The output port at `here` on the way to switch `to` (`here != to`).
    pub(crate) fn next_port(&self, here: SwitchId, to: SwitchId) -> Option<u16> {
        match self {
            Routing::ShortestPath { next, switches } => {
                let p = next[here.0 as usize * switches + to.0 as usize];
                (p != NONE).then_some(p)
            }
            Routing::DimensionOrder { k } => {
                let (hx, hy) = (here.0 % k, here.0 / k);
                let (tx, ty) = (to.0 % k, to.0 / k);
                Some(if hx < tx {
                    MESH_EAST
                } else if hx > tx {
                    MESH_WEST
                } else if hy < ty {
                    MESH_NORTH
                } else {
                    MESH_SOUTH
                })
            }
        }
    }

    /// The shortest-path table for `switches` and their cables.
    pub(crate) fn shortest_path(switches: &[Switch]) -> Routing {
        let s = switches.len();
        // Switch adjacency: (port, neighbour), ports ascending.
        let adj: Vec<Vec<(u16, usize)>> = switches
            .iter()
            .map(|sw| {
                sw.ports
                    .iter()
                    .enumerate()
                    .filter_map(|(p, l)| match l.as_ref()?.peer {
                        Peer::Switch(q) => Some((p as u16, q.switch.0 as usize)),
                        Peer::Node(_) => None,
                    })
                    .collect()
            })
            .collect();
        let mut next = vec![NONE; s * s];
        let mut dist = vec![u32::MAX; s];
        let mut queue = VecDeque::new();
        for to in 0..s {
            dist.iter_mut().for_each(|d| *d = u32::MAX);
            dist[to] = 0;
            queue.push_back(to);
            // Cables are two-way, so distances *to* `to` are distances *from* it.
            while let Some(u) = queue.pop_front() {
                for &(_, v) in &adj[u] {
                    if dist[v] == u32::MAX {
                        dist[v] = dist[u] + 1;
                        queue.push_back(v);
                    }
                }
            }
            for here in 0..s {
                if here == to || dist[here] == u32::MAX {
                    continue;
                }
                if let Some(&(p, _)) = adj[here].iter().find(|&&(_, v)| dist[v] == dist[here] - 1) {
                    next[here * s + to] = p;
                }
            }
        }
        Routing::ShortestPath { next, switches: s }
    }
}
