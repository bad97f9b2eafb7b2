//! The fabric as flat tables: routers and their ports, the link leaving each output
//! port, where each HCA attaches, and a routing table (router, destination) → output
//! port. Built for the N-port crossbar (Yum §6.1's 8-port cluster) and k×k meshes and
//! tori with dimension-order routing (X then Y); on a torus each dimension's wrap-around
//! link is its dateline, where packets move to the upper half of their class's lanes.
//! Graphs of qos-core's topology files carry source routes instead ([`super::graph`]).
//! This module knows nothing of configurations: [`super::config::TopologySpec::fabric`]
//! calls its builders.

use serde::{Deserialize, Serialize};

/// Where an output port leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Nowhere (a mesh edge).
    None,
    /// The global input port of another router.
    Router(u32),
    /// An HCA (ejection).
    Hca(u32),
}

/// No port.
pub const NO_PORT: u8 = u8::MAX;

/// Source routes: the local output port at each router for every (source, destination)
/// pair, `hops[start[s * nodes + d]..start[s * nodes + d + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRoutes {
    /// Offset of each pair's route in `hops` (one more entry than pairs).
    pub start: Vec<u32>,
    /// Output ports, route after route.
    pub hops: Vec<u8>,
}

/// Which way a packet goes on a torus ring when its destination is exactly half-way
/// round (k even).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Ties {
    /// Always the + way.
    #[default]
    Plus,
    /// Either way with probability ½, drawn per packet and dimension (BookSim2's
    /// `dim_order_torus`).
    Random,
}

/// Tie bit of the X dimension in a packet's tie bits: set = go the + way.
pub const TIE_X: u8 = 1;
/// Tie bit of the Y dimension.
pub const TIE_Y: u8 = 2;

/// A k×k mesh or torus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Routers per side.
    pub k: u32,
    /// Wrap-around links.
    pub torus: bool,
    /// Tie rule on a torus.
    pub ties: Ties,
}

impl Grid {
    /// Dimension-order (X then Y) output port at router `r` towards node `d`; on a torus
    /// the short way round, a packet half-way round going the + way under
    /// [`Ties::Plus`], or under [`Ties::Random`] if its tie bit for the dimension is set
    /// (`tie`: [`TIE_X`], [`TIE_Y`]). The choice is stable along
    /// the ring: one hop on, the destination is no longer half-way.
    #[inline]
    pub fn route(&self, r: u32, d: u32, tie: u8) -> u8 {
        let k = self.k;
        let step = |from: u32, to: u32, plus: u32, minus: u32, bit: u8| -> Option<u32> {
            if from == to {
                return None;
            }
            if self.torus {
                let fwd = (to + k - from) % k;
                let tie_plus = self.ties == Ties::Plus || tie & bit != 0;
                Some(if 2 * fwd < k || (2 * fwd == k && tie_plus) {
                    plus
                } else {
                    minus
                })
            } else {
                Some(if to > from { plus } else { minus })
            }
        };
        step(r % k, d % k, XP, XM, TIE_X)
            .or_else(|| step(r / k, d / k, YP, YM, TIE_Y))
            .unwrap_or(HOST) as u8
    }
}

/// Routers, ports, links and routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fabric {
    /// Number of routers.
    pub routers: u32,
    /// Number of HCAs (nodes).
    pub nodes: u32,
    /// First global port of each router.
    pub port_base: Vec<u32>,
    /// Ports of each router.
    pub ports: Vec<u32>,
    /// Router owning each global port.
    pub port_router: Vec<u32>,
    /// Link leaving each global output port.
    pub link: Vec<Link>,
    /// Global input port each HCA feeds.
    pub hca_port: Vec<u32>,
    /// Output port (local) at router r towards node d: `route[r * nodes + d]` (the
    /// crossbar; empty for grids, whose routes are computed, and graphs).
    pub route: Vec<u8>,
    /// Mesh or torus: dimension-order routes computed from coordinates, so memory
    /// stays linear in the number of routers.
    pub grid: Option<Grid>,
    /// Source routes, for graphs.
    pub source: Option<SourceRoutes>,
    /// Dimension of each global port (0 = x, 1 = y, `NO_PORT` = host port).
    pub dim: Vec<u8>,
    /// Output port crosses a dateline (torus wrap-around).
    pub wrap: Vec<bool>,
    /// Whether lanes are split into dateline classes.
    pub dateline: bool,
}

impl Fabric {
    /// Total ports.
    pub fn total_ports(&self) -> usize {
        self.link.len()
    }

    /// Output port (local) at router `r` towards node `dst` (table-routed fabrics) for a
    /// packet with tie bits `tie` (see [`Grid::route`]).
    #[inline]
    pub fn next_port(&self, r: u32, dst: u32, tie: u8) -> u8 {
        match &self.grid {
            Some(g) => g.route(r, dst, tie),
            None => self.route[(r * self.nodes + dst) as usize],
        }
    }

    /// Routers a packet from node `src` to node `dst` passes through.
    pub fn routers_on_path(&self, src: u32, dst: u32) -> u32 {
        if let Some(sr) = &self.source {
            let i = (src * self.nodes + dst) as usize;
            return sr.start[i + 1] - sr.start[i];
        }
        let mut r = self.port_router[self.hca_port[src as usize] as usize];
        let mut n = 1;
        loop {
            let p = self.next_port(r, dst, TIE_X | TIE_Y) as u32;
            match self.link[(self.port_base[r as usize] + p) as usize] {
                Link::Router(g) => {
                    r = self.port_router[g as usize];
                    n += 1;
                }
                _ => return n,
            }
        }
    }
}

/// One router with `n` ports and an HCA on each.
pub fn crossbar(n: u32) -> Fabric {
    let route = (0..n).map(|d| d as u8).collect();
    Fabric {
        routers: 1,
        nodes: n,
        port_base: vec![0],
        ports: vec![n],
        port_router: vec![0; n as usize],
        link: (0..n).map(Link::Hca).collect(),
        hca_port: (0..n).collect(),
        route,
        grid: None,
        source: None,
        dim: vec![NO_PORT; n as usize],
        wrap: vec![false; n as usize],
        dateline: false,
    }
}

/// Port numbering of a grid router.
const XP: u32 = 0;
const XM: u32 = 1;
const YP: u32 = 2;
const YM: u32 = 3;
const HOST: u32 = 4;

/// A k×k mesh or torus with dimension-order routes (`ties` on a torus).
pub fn grid(k: u32, torus: bool, ties: Ties) -> Fabric {
    let n = k * k;
    let np = 5;
    let total = (n * np) as usize;
    let mut link = vec![Link::None; total];
    let mut wrap = vec![false; total];
    let mut dim = vec![NO_PORT; total];
    let id = |x: u32, y: u32| y * k + x;
    for y in 0..k {
        for x in 0..k {
            let r = id(x, y);
            let g = |p: u32| (r * np + p) as usize;
            dim[g(XP)] = 0;
            dim[g(XM)] = 0;
            dim[g(YP)] = 1;
            dim[g(YM)] = 1;
            link[g(HOST)] = Link::Hca(r);
            // Neighbour in each direction; the input port at the far end is the
            // opposite direction's port (arriving from -x enters the XM port).
            let nb = [
                (XP, x + 1 < k, id((x + 1) % k, y), XM),
                (XM, x > 0, id((x + k - 1) % k, y), XP),
                (YP, y + 1 < k, id(x, (y + 1) % k), YM),
                (YM, y > 0, id(x, (y + k - 1) % k), YP),
            ];
            for (p, inside, to, in_port) in nb {
                if k > 1 && (inside || torus) {
                    link[g(p)] = Link::Router(to * np + in_port);
                    wrap[g(p)] = !inside;
                }
            }
        }
    }
    Fabric {
        routers: n,
        nodes: n,
        port_base: (0..n).map(|r| r * np).collect(),
        ports: vec![np; n as usize],
        port_router: (0..total as u32).map(|g| g / np).collect(),
        link,
        hca_port: (0..n).map(|r| r * np + HOST).collect(),
        route: Vec::new(),
        grid: Some(Grid { k, torus, ties }),
        source: None,
        dim,
        wrap,
        dateline: torus,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_dor_path_length_is_manhattan_distance_plus_one() {
        let f = grid(4, false, Ties::Plus);
        for s in 0..16u32 {
            for d in 0..16u32 {
                let man = (s % 4).abs_diff(d % 4) + (s / 4).abs_diff(d / 4);
                assert_eq!(f.routers_on_path(s, d), man + 1);
            }
        }
    }

    #[test]
    fn torus_dor_takes_the_short_way_round() {
        let f = grid(5, true, Ties::Plus);
        assert_eq!(f.routers_on_path(0, 4), 2);
        assert_eq!(f.routers_on_path(0, 24), 3);
    }

    #[test]
    fn torus_tie_bits_choose_the_direction_half_way_round_and_keep_it() {
        let plus = Grid {
            k: 4,
            torus: true,
            ties: Ties::Plus,
        };
        assert_eq!(plus.route(0, 2, 0) as u32, XP);
        assert_eq!(plus.route(0, 8, 0) as u32, YP);
        let g = Grid {
            ties: Ties::Random,
            ..plus
        };
        // Router 0 to node 2 is half-way round in X either way.
        assert_eq!(g.route(0, 2, TIE_X) as u32, XP);
        assert_eq!(g.route(0, 2, 0) as u32, XM);
        // One hop on, each way continues without looking at the bit.
        assert_eq!(g.route(1, 2, 0) as u32, XP);
        assert_eq!(g.route(3, 2, TIE_X) as u32, XM);
        // Y ties read the Y bit.
        assert_eq!(g.route(0, 8, TIE_Y) as u32, YP);
        assert_eq!(g.route(0, 8, TIE_X) as u32, YM);
        // Short ways ignore the bits.
        assert_eq!(g.route(0, 1, 0) as u32, XP);
        assert_eq!(g.route(0, 3, TIE_X) as u32, XM);
    }

    #[test]
    fn crossbar_path_is_one_router() {
        let f = crossbar(8);
        assert_eq!(f.routers_on_path(3, 5), 1);
    }
}
