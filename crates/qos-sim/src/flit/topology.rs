//! The fabric as flat tables: routers and their ports, the link leaving each output
//! port, where each HCA attaches, and a routing table (router, destination) → output
//! port. Built for the N-port crossbar (Yum §6.1's 8-port cluster) and k-ary n-cubes —
//! meshes and tori of n dimensions, k routers per side — with dimension-order routing
//! (dimension 0, X, first, as BookSim2's `dor`/`dim_order`); on a torus each dimension's
//! wrap-around link is its dateline, where packets move to the upper half of their
//! class's lanes.
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

/// Tie bit of the X dimension (dimension 0) in a packet's tie bits: set = go the + way.
/// Dimension `i`'s bit is `1 << i`.
pub const TIE_X: u8 = 1;
/// Tie bit of the Y dimension (dimension 1).
pub const TIE_Y: u8 = 2;

/// Most dimensions of a mesh or torus (one tie bit each in a byte).
pub const MAX_DIMS: u32 = 8;

/// A mesh or torus of `n` dimensions, `k` routers per side (a k-ary n-cube). Router
/// (and node) `r` sits at coordinates `r / k^i mod k`, dimension 0 the least significant
/// digit, as BookSim2 numbers its `KNCube`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Routers per side.
    pub k: u32,
    /// Dimensions (1–[`MAX_DIMS`]).
    pub n: u32,
    /// Wrap-around links.
    pub torus: bool,
    /// Tie rule on a torus.
    pub ties: Ties,
    /// Mesh only: a packet whose route bit [`ROUTE_YX`] is set goes in descending
    /// dimension order (Y before X), the others in ascending order (BookSim2's
    /// `xy_yx_mesh`; the routers set the bit and split the lanes).
    pub xy_yx: bool,
}

/// A packet's route bit on a mesh with [`Grid::xy_yx`]: descending dimension order.
pub const ROUTE_YX: u8 = 1;

impl Grid {
    /// Dimension-order output port at router `r` towards node `d` (the lowest dimension
    /// whose coordinates differ first: X, then Y, then Z, ...); port `2i` goes + in
    /// dimension `i`, `2i + 1` goes −, port `2n` is the host. On a torus the short way
    /// round, a packet half-way round going the + way under [`Ties::Plus`], or under
    /// [`Ties::Random`] if its tie bit for the dimension (`1 << i`) is set. The choice is
    /// stable along the ring: one hop on, the destination is no longer half-way.
    #[inline]
    pub fn route(&self, r: u32, d: u32, tie: u8) -> u8 {
        let k = self.k;
        let step = |from: u32, to: u32, dim: u32| -> u8 {
            let (plus, minus) = ((2 * dim) as u8, (2 * dim + 1) as u8);
            if self.torus {
                let fwd = (to + k - from) % k;
                let tie_plus = self.ties == Ties::Plus || tie & (1 << dim) != 0;
                if 2 * fwd < k || (2 * fwd == k && tie_plus) {
                    plus
                } else {
                    minus
                }
            } else if to > from {
                plus
            } else {
                minus
            }
        };
        let (mut r, mut d) = (r, d);
        let last = self.n - 1;
        if self.xy_yx && tie & ROUTE_YX != 0 {
            // The highest dimension whose coordinates differ first.
            for dim in (0..self.n).rev() {
                let p = self.k.pow(dim);
                let (a, b) = (r / p % k, d / p % k);
                if a != b {
                    return step(a, b, dim);
                }
            }
            return (2 * self.n) as u8;
        }
        for dim in 0..last {
            let (a, b) = (r % k, d % k);
            if a != b {
                return step(a, b, dim);
            }
            r /= k;
            d /= k;
        }
        // The last dimension's coordinate is what is left of the number.
        if r != d {
            return step(r, d, last);
        }
        (2 * self.n) as u8
    }

    /// Coordinate of router (or node) `r` in dimension `dim`.
    #[inline]
    pub fn coord(&self, r: u32, dim: u32) -> u32 {
        r / self.k.pow(dim) % self.k
    }

    /// Routers (and nodes): k^n.
    pub fn routers(&self) -> u32 {
        self.k.pow(self.n)
    }
}

/// Most stages of a butterfly (2^16 nodes at k = 2).
pub const MAX_STAGES: usize = 16;

/// A k-ary n-fly (butterfly): `n` stages of k^(n-1) routers of `k` ports, node `a·k + p`
/// injecting into port `p` of stage 0's router `a` and ejected from port `p` of the last
/// stage's router `a`. Router `s·k^(n-1) + a` is stage `s`'s router `a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fly {
    /// Ports per router (the radix).
    pub k: u32,
    /// Routers per stage: k^(n-1).
    pub per_stage: u32,
    /// Per stage s, the weight of the destination digit it routes on: k^(n-1-s).
    pub weight: [u32; MAX_STAGES],
}

impl Fly {
    /// A k-ary n-fly's routing.
    pub fn new(k: u32, n: u32) -> Fly {
        assert!((1..=MAX_STAGES as u32).contains(&n), "{k}-ary {n}-fly");
        let mut weight = [0; MAX_STAGES];
        for (s, w) in weight.iter_mut().enumerate().take(n as usize) {
            *w = k.pow(n - 1 - s as u32);
        }
        Fly {
            k,
            per_stage: k.pow(n - 1),
            weight,
        }
    }

    /// BookSim2's `dest_tag_fly`: at stage `s` the output port is the destination's
    /// digit `n - 1 - s` (base k, the most significant first).
    #[inline]
    pub fn route(&self, r: u32, d: u32) -> u8 {
        let stage = (r / self.per_stage) as usize;
        (d / self.weight[stage % MAX_STAGES] % self.k) as u8
    }
}

/// A k-ary n-tree (BookSim2's `fattree`): `n` levels of k^(n-1) routers, level 0 the
/// top; router `l·k^(n-1) + p` is level `l`'s router `p`. A router's ports 0..k lead
/// down (a leaf's to its k HCAs, node `p·k + i` on port `i`), ports k..2k up (the top
/// level has none). Nearest-common-ancestor routing (BookSim2's `nca`): down towards the
/// destination once it lies below, else up through one of the k up ports at random.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FatTree {
    /// Down (and up) ports per router.
    pub k: u32,
    /// Levels.
    pub n: u32,
    /// Routers per level: k^(n-1).
    pub per_level: u32,
    /// k^i for i = 0..=n (k^n nodes).
    pub pow: [u32; MAX_STAGES + 1],
}

impl FatTree {
    /// A k-ary n-tree's routing.
    pub fn new(k: u32, n: u32) -> FatTree {
        assert!(
            k >= 2 && (1..=MAX_STAGES as u32).contains(&n),
            "{k}-ary {n}-tree"
        );
        let mut pow = [0; MAX_STAGES + 1];
        for (i, w) in pow.iter_mut().enumerate().take(n as usize + 1) {
            *w = k.pow(i as u32);
        }
        FatTree {
            k,
            n,
            per_level: pow[n as usize - 1],
            pow,
        }
    }

    /// BookSim2's `fattree_nca` at router `r` towards node `d`: the down port towards
    /// `d` if `d` lies below `r`, else up port `k + u`, `u` the packet's draw `word`'s
    /// base-k digit of weight k^level (so each level's choice is uniform and the levels'
    /// choices independent, as BookSim2 draws one per hop; fixed per packet and level,
    /// so a header routed again takes the same port).
    #[inline]
    pub fn route(&self, r: u32, d: u32, word: u32) -> u8 {
        let level = (r / self.per_level) as usize % self.n as usize;
        let pos = r % self.per_level;
        // The subtree below `r` holds the k^(n-level) nodes of number d / span == pos
        // / k^(n-level-1).
        let span = self.pow[self.n as usize - level];
        let below = self.pow[self.n as usize - level - 1];
        if d / span == pos / below {
            (d % span / below) as u8
        } else {
            (self.k + word / self.pow[level] % self.k) as u8
        }
    }

    /// [`FatTree::route`] taking the first up port: a path of the same length as any
    /// draw's (the engine routes headers with their packet's draw). Out of line, so that
    /// [`Fabric::next_port`] stays small enough to inline where grids route headers.
    #[cold]
    #[inline(never)]
    pub fn first_up(&self, r: u32, d: u32) -> u8 {
        self.route(r, d, 0)
    }
}

/// Nodes per router of a concentrated mesh (BookSim2's `cmesh` asserts `c = 4`): a
/// 2×2 block of the node grid.
pub const CMESH_C: u32 = 4;

/// A concentrated mesh (BookSim2's `cmesh`): a k×k mesh of routers, each serving a 2×2
/// block of a 2k×2k grid of nodes. Router `r = y·k + x`; node `a` sits in the node grid at
/// (`a mod 2k`, `a div 2k`), so router (x, y) serves nodes (2x + i, 2y + j), i, j ∈ {0, 1},
/// on ports 2j + i. Ports `CMESH_C..CMESH_C + 4` lead +x, −x, +y, −y, as a mesh's 0..4.
/// Routing is BookSim2's `dor_no_express` (X, then Y) or, with the grid's `xy_yx`, its
/// `xy_yx_no_express` between routers; a packet at its destination's router leaves
/// through that node's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CMesh {
    /// The mesh of routers (k per side, two dimensions, no wrap-around).
    pub grid: Grid,
    /// Dimension order over the edges' express channels (BookSim2's `dor_cmesh`,
    /// [`CMesh::express_port`]).
    pub express: bool,
}

impl CMesh {
    /// Router serving node `a` (BookSim2's `CMesh::NodeToRouter`).
    #[inline]
    pub fn node_router(&self, a: u32) -> u32 {
        let side = 2 * self.grid.k;
        (a / side / 2) * self.grid.k + a % side / 2
    }

    /// Port of node `a` at its router (BookSim2's `CMesh::NodeToPort`).
    #[inline]
    pub fn node_port(&self, a: u32) -> u8 {
        (((a / (2 * self.grid.k)) & 1) * 2 + (a & 1)) as u8
    }

    /// Output port at router `r` towards node `d` for a packet with route bits `tie`
    /// (see [`Grid::route`]).
    #[inline]
    pub fn route(&self, r: u32, d: u32, tie: u8) -> u8 {
        let to = self.node_router(d);
        if to == r {
            self.node_port(d)
        } else if self.express {
            self.express_port(r, to)
        } else {
            CMESH_C as u8 + self.grid.route(r, to, tie)
        }
    }

    /// BookSim2's `cmesh_next` from router `r` towards router `to`: X, then Y; a packet
    /// on an edge router (y = 0 or k − 1 for an X move, x = 0 or k − 1 for a Y move)
    /// more than k/2 − 1 routers from its target coordinate takes that edge's outward
    /// port, the express channel k/2 routers along the edge.
    #[cold]
    #[inline(never)]
    pub fn express_port(&self, r: u32, to: u32) -> u8 {
        let k = self.grid.k;
        let (x, y, tx, ty) = (r % k, r / k, to % k, to / k);
        let far = |a: u32, b: u32| a.abs_diff(b) > k / 2 - 1;
        // Ports: +x, −x, +y, −y.
        let (xp, xm, yp, ym) = (CMESH_C, CMESH_C + 1, CMESH_C + 2, CMESH_C + 3);
        let edge = |c: u32, low: u32, high: u32| {
            if c == 0 {
                Some(low)
            } else if c == k - 1 {
                Some(high)
            } else {
                None
            }
        };
        let p = if x != tx {
            let step = if tx > x { xp } else { xm };
            if far(x, tx) {
                edge(y, ym, yp).unwrap_or(step)
            } else {
                step
            }
        } else {
            let step = if ty > y { yp } else { ym };
            if far(y, ty) {
                edge(x, xm, xp).unwrap_or(step)
            } else {
                step
            }
        };
        p as u8
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
    /// What feeds each global input port: the output port of another router, or an
    /// HCA. On meshes, tori, the crossbar and graphs, whose links come in pairs, the
    /// same as `link`; not on a butterfly.
    pub from: Vec<Link>,
    /// Global input port each HCA feeds.
    pub hca_port: Vec<u32>,
    /// Output port (local) at router r towards node d: `route[r * nodes + d]` (the
    /// crossbar; empty for grids, whose routes are computed, and graphs).
    pub route: Vec<u8>,
    /// The same for a packet whose route bit [`ROUTE_YX`] is set, where a table routes
    /// in two orders (a flattened butterfly's Y then X); empty otherwise.
    pub route_yx: Vec<u8>,
    /// Mesh or torus: dimension-order routes computed from coordinates, so memory
    /// stays linear in the number of routers.
    pub grid: Option<Grid>,
    /// Source routes, for graphs.
    pub source: Option<SourceRoutes>,
    /// Butterfly: destination-tag routes computed from the router's stage.
    pub fly: Option<Fly>,
    /// Fat tree: nearest-common-ancestor routes, the up port drawn per packet
    /// ([`FatTree::route`]).
    pub fat_tree: Option<FatTree>,
    /// Concentrated mesh: dimension-order routes between routers, each node's own port
    /// at its router ([`CMesh::route`]).
    pub cmesh: Option<CMesh>,
    /// Dimension of each global port (0 = x, 1 = y, 2 = z, ...; `NO_PORT` = host port).
    pub dim: Vec<u8>,
    /// Output port crosses a dateline (torus wrap-around).
    pub wrap: Vec<bool>,
    /// Whether lanes are split into dateline classes.
    pub dateline: bool,
    /// Channel latency of each global output port's router link, where links differ in
    /// length (a flattened butterfly's, BookSim2's `use_noc_latency`); empty: every
    /// router link takes the latency the delays give it.
    pub latency: Vec<u8>,
}

/// The inverse of `link` and `hca_port`: what feeds each input port.
pub fn feeders(link: &[Link], hca_port: &[u32]) -> Vec<Link> {
    let mut from = vec![Link::None; link.len()];
    for (g, l) in link.iter().enumerate() {
        if let Link::Router(to) = *l {
            from[to as usize] = Link::Router(g as u32);
        }
    }
    for (n, &g) in hca_port.iter().enumerate() {
        from[g as usize] = Link::Hca(n as u32);
    }
    from
}

impl Fabric {
    /// A fabric routed by a rule computed from router and destination (a butterfly's, a
    /// fat tree's: the caller sets which), of `nodes` HCAs and routers with `ports[r]`
    /// ports from global port `port_base[r]` on, `link` leaving each output port,
    /// `hca_port` the input port each HCA feeds; no dimensions, datelines or tables.
    pub(super) fn computed(
        nodes: u32,
        port_base: Vec<u32>,
        ports: Vec<u32>,
        link: Vec<Link>,
        hca_port: Vec<u32>,
    ) -> Fabric {
        let total = link.len();
        let mut port_router = vec![0; total];
        for (r, (&base, &n)) in port_base.iter().zip(&ports).enumerate() {
            port_router[base as usize..(base + n) as usize].fill(r as u32);
        }
        Fabric {
            routers: ports.len() as u32,
            nodes,
            port_base,
            ports,
            port_router,
            from: feeders(&link, &hca_port),
            link,
            hca_port,
            route: Vec::new(),
            route_yx: Vec::new(),
            grid: None,
            source: None,
            fly: None,
            fat_tree: None,
            cmesh: None,
            dim: vec![NO_PORT; total],
            wrap: vec![false; total],
            dateline: false,
            latency: Vec::new(),
        }
    }

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
            None => match &self.fly {
                Some(f) => f.route(r, dst),
                None => match &self.fat_tree {
                    Some(t) => t.first_up(r, dst),
                    None => match &self.cmesh {
                        Some(c) => c.route(r, dst, tie),
                        None if tie & ROUTE_YX != 0 && !self.route_yx.is_empty() => {
                            self.route_yx[(r * self.nodes + dst) as usize]
                        }
                        None => self.route[(r * self.nodes + dst) as usize],
                    },
                },
            },
        }
    }

    /// The router node `a` is attached to.
    #[inline]
    pub fn node_router(&self, a: u32) -> u32 {
        self.port_router[self.hca_port[a as usize] as usize]
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
            let p = self.next_port(r, dst, u8::MAX) as u32;
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
    let link: Vec<Link> = (0..n).map(Link::Hca).collect();
    let hca_port: Vec<u32> = (0..n).collect();
    Fabric {
        routers: 1,
        nodes: n,
        port_base: vec![0],
        ports: vec![n],
        port_router: vec![0; n as usize],
        from: feeders(&link, &hca_port),
        link,
        hca_port,
        route,
        route_yx: Vec::new(),
        grid: None,
        source: None,
        fly: None,
        fat_tree: None,
        cmesh: None,
        dim: vec![NO_PORT; n as usize],
        wrap: vec![false; n as usize],
        dateline: false,
        latency: Vec::new(),
    }
}

/// A mesh or torus of `n` dimensions, `k` routers per side, with dimension-order routes
/// (`ties` on a torus). Router `r`'s port `2i` leads + in dimension `i` (to the router
/// `k^i` higher, wrapping on a torus), port `2i + 1` leads −, and port `2n` is its HCA's;
/// a link arriving from − enters the far router's − port, as BookSim2 wires its
/// `KNCube`.
pub fn grid(k: u32, n: u32, torus: bool, ties: Ties) -> Fabric {
    assert!((1..=MAX_DIMS).contains(&n), "grid of {n} dimensions");
    let g = Grid {
        k,
        n,
        torus,
        ties,
        xy_yx: false,
    };
    let routers = g.routers();
    let np = 2 * n + 1;
    let total = (routers * np) as usize;
    let mut link = vec![Link::None; total];
    let mut wrap = vec![false; total];
    let mut dim = vec![NO_PORT; total];
    for r in 0..routers {
        let at = |p: u32| (r * np + p) as usize;
        link[at(2 * n)] = Link::Hca(r);
        let mut stride = 1;
        for i in 0..n {
            let c = r / stride % k;
            let (plus, minus) = (2 * i, 2 * i + 1);
            dim[at(plus)] = i as u8;
            dim[at(minus)] = i as u8;
            // Neighbour each way; the input port at the far end is the opposite
            // direction's port (arriving from - enters the - port).
            let nb = [
                (
                    plus,
                    c + 1 < k,
                    r - c * stride + (c + 1) % k * stride,
                    minus,
                ),
                (
                    minus,
                    c > 0,
                    r - c * stride + (c + k - 1) % k * stride,
                    plus,
                ),
            ];
            for (p, inside, to, in_port) in nb {
                if k > 1 && (inside || torus) {
                    link[at(p)] = Link::Router(to * np + in_port);
                    wrap[at(p)] = !inside;
                }
            }
            stride *= k;
        }
    }
    let hca_port: Vec<u32> = (0..routers).map(|r| r * np + 2 * n).collect();
    Fabric {
        routers,
        nodes: routers,
        port_base: (0..routers).map(|r| r * np).collect(),
        ports: vec![np; routers as usize],
        port_router: (0..total as u32).map(|p| p / np).collect(),
        from: feeders(&link, &hca_port),
        link,
        hca_port,
        route: Vec::new(),
        route_yx: Vec::new(),
        grid: Some(g),
        source: None,
        fly: None,
        fat_tree: None,
        cmesh: None,
        dim,
        wrap,
        dateline: torus,
        latency: Vec::new(),
    }
}

/// A k-ary n-fly wired as BookSim2's `KNFly`: stage `s`'s router `a`, output port `p`
/// leads to stage `s + 1`'s router `b` — `a` with its digit of weight k^(n-s-2) replaced
/// by `p` — at input port `q`, `a`'s digit there. With `n = 1` it is one k-port crossbar.
pub fn fly(k: u32, n: u32) -> Fabric {
    assert!(k >= 2, "{k}-ary {n}-fly");
    let f = Fly::new(k, n);
    let per_stage = f.per_stage;
    let nodes = k.pow(n);
    let routers = n * per_stage;
    let total = (routers * k) as usize;
    let mut link = vec![Link::None; total];
    for s in 0..n {
        for a in 0..per_stage {
            let r = s * per_stage + a;
            for p in 0..k {
                link[(r * k + p) as usize] = if s == n - 1 {
                    Link::Hca(a * k + p)
                } else {
                    let shift = f.weight[s as usize + 1];
                    let digit = a / shift % k;
                    let b = a - digit * shift + p * shift;
                    Link::Router(((s + 1) * per_stage + b) * k + digit)
                };
            }
        }
    }
    // Stage 0's router a, port p: router a's global port a·k + p = the node's number.
    let hca_port: Vec<u32> = (0..nodes).collect();
    Fabric {
        fly: Some(f),
        ..Fabric::computed(
            nodes,
            (0..routers).map(|r| r * k).collect(),
            vec![k; routers as usize],
            link,
            hca_port,
        )
    }
}

/// A k-ary n-tree wired as BookSim2's `FatTree` ([`FatTree`]): level `l`'s router `p`,
/// down port `i` leads to level `l + 1`'s router `p` with its base-k digit of weight
/// k^(n-l-2) replaced by `i`, entering at up port `k + `(`p`'s digit there), so the
/// subtree below a router is a block of consecutive nodes.
pub fn fat_tree(k: u32, n: u32) -> Fabric {
    let t = FatTree::new(k, n);
    let per = t.per_level;
    let routers = n * per;
    // The top level's routers have k ports (down only), the others 2k.
    let ports: Vec<u32> = (0..routers)
        .map(|r| if r < per { k } else { 2 * k })
        .collect();
    let mut port_base = Vec::with_capacity(routers as usize);
    let mut total = 0;
    for &p in &ports {
        port_base.push(total);
        total += p;
    }
    let mut link = vec![Link::None; total as usize];
    let at = |level: u32, pos: u32, port: u32| port_base[(level * per + pos) as usize] + port;
    for level in 0..n - 1 {
        // Below a level-`level` router hang k subtrees, each under one router of the
        // next level: the one whose digit of weight k^(n-level-2) is the down port.
        let w = t.pow[(n - level - 2) as usize];
        for pos in 0..per {
            let digit = pos / w % k;
            for i in 0..k {
                let child = pos - digit * w + i * w;
                link[at(level, pos, i) as usize] = Link::Router(at(level + 1, child, k + digit));
                link[at(level + 1, child, k + digit) as usize] = Link::Router(at(level, pos, i));
            }
        }
    }
    let mut hca_port = Vec::with_capacity((per * k) as usize);
    for pos in 0..per {
        for i in 0..k {
            let g = at(n - 1, pos, i);
            link[g as usize] = Link::Hca(pos * k + i);
            hca_port.push(g);
        }
    }
    Fabric {
        fat_tree: Some(t),
        ..Fabric::computed(per * k, port_base, ports, link, hca_port)
    }
}

/// A concentrated mesh wired as BookSim2's `CMesh` ([`CMesh`]): router (x, y) =
/// `y·k + x` has its four nodes on ports 0..4 and its +x, −x, +y, −y links on ports
/// 4..8, a link arriving from − entering the far router's − port. With k even, each
/// edge router's outward port is BookSim2's express channel to the router k/2 along the
/// same edge, entering at that router's outward port, taken by `express` routing
/// (BookSim2's `dor_cmesh`, [`CMesh::express_port`]; links of latency 2 and the express
/// channels of k in [`Fabric::latency`]) and by no other; with k odd BookSim2 wires them
/// inconsistently, so they are left unconnected.
pub fn cmesh(k: u32, xy_yx: bool, express: bool) -> Fabric {
    assert!(k >= 2, "concentrated mesh of side {k}");
    let grid = Grid {
        k,
        n: 2,
        torus: false,
        ties: Ties::Plus,
        xy_yx,
    };
    let c = CMESH_C;
    let np = c + 4;
    let routers = k * k;
    let total = (routers * np) as usize;
    let at = |x: u32, y: u32, p: u32| (y * k + x) * np + p;
    let mut link = vec![Link::None; total];
    let mut dim = vec![NO_PORT; total];
    let mut hca_port = vec![0; (routers * c) as usize];
    let half = |v: u32| (v + k / 2) % k;
    let wired = k.is_multiple_of(2);
    for y in 0..k {
        for x in 0..k {
            for p in 0..c {
                let node = 2 * k * (2 * y + p / 2) + 2 * x + p % 2;
                link[at(x, y, p) as usize] = Link::Hca(node);
                hca_port[node as usize] = at(x, y, p);
            }
            let (xp, xm, yp, ym) = (c, c + 1, c + 2, c + 3);
            let out = [
                (
                    xp,
                    if x + 1 < k {
                        Some(at(x + 1, y, xm))
                    } else {
                        wired.then(|| at(x, half(y), xp))
                    },
                ),
                (
                    xm,
                    if x > 0 {
                        Some(at(x - 1, y, xp))
                    } else {
                        wired.then(|| at(x, half(y), xm))
                    },
                ),
                (
                    yp,
                    if y + 1 < k {
                        Some(at(x, y + 1, ym))
                    } else {
                        wired.then(|| at(half(x), y, yp))
                    },
                ),
                (
                    ym,
                    if y > 0 {
                        Some(at(x, y - 1, yp))
                    } else {
                        wired.then(|| at(half(x), y, ym))
                    },
                ),
            ];
            for (p, to) in out {
                dim[at(x, y, p) as usize] = ((p - c) / 2) as u8;
                if let Some(g) = to {
                    link[at(x, y, p) as usize] = Link::Router(g);
                }
            }
        }
    }
    let mut f = Fabric::computed(
        routers * c,
        (0..routers).map(|r| r * np).collect(),
        vec![np; routers as usize],
        link,
        hca_port,
    );
    if express {
        // BookSim2's channel latencies under `use_noc_latency`: two nodes' width between
        // neighbours, k/2 routers of it on an express channel.
        f.latency = vec![1; f.link.len()];
        for r in 0..routers {
            let (x, y) = (r % k, r / k);
            for (p, outward) in [
                (c, x == k - 1),
                (c + 1, x == 0),
                (c + 2, y == k - 1),
                (c + 3, y == 0),
            ] {
                f.latency[(r * np + p) as usize] =
                    if outward { 2 * (k / 2) } else { 2 }.min(255) as u8;
            }
        }
    }
    f.dim = dim;
    f.cmesh = Some(CMesh { grid, express });
    f
}

/// A two-dimensional flattened butterfly wired as BookSim2's `FlatFlyOnChip`
/// (`flatfly` with n = 2, x = y = k and c = xr·yr, xr = yr): k×k routers, router `y·k +
/// x`, each linked to every other router of its row and of its column. Nodes sit on a
/// grid of side k·xr as on a concentrated mesh: node `a` at (`a mod k·xr`, `a div
/// k·xr`) belongs to router (gx div xr, gy div xr), on its port (gy mod xr)·xr + gx mod
/// xr. A router's output ports are its c nodes', then one per other router of its row
/// (X, by column), then one per other router of its column (Y, by row); its input
/// ports are its c nodes', then one per neighbour in ascending router number — the
/// orders in which BookSim2 adds the channels. Routes are BookSim2's `min_flatfly`
/// (`ran_min`), deterministic despite the name: X first, then Y, one hop per dimension
/// (a table, [`Fabric::route`]); with `xy_yx`, also Y first, then X, for packets whose
/// route bit [`ROUTE_YX`] is set (its `flatfly_outport_yx`, [`Fabric::route_yx`]). With
/// `long` (BookSim2's `use_noc_latency`) a link between routers `dx` columns and `dy`
/// rows apart takes xr·(dx + dy) cycles, else 1 ([`Fabric::latency`]).
pub fn flatfly(k: u32, xr: u32, long: bool, xy_yx: bool) -> Fabric {
    assert!(
        k >= 2 && xr >= 1,
        "flattened butterfly of side {k}, {xr} nodes per row"
    );
    let c = xr * xr;
    let np = c + 2 * (k - 1);
    let routers = k * k;
    let side = k * xr;
    let nodes = routers * c;
    let node_router = |a: u32| (a / side / xr) * k + a % side / xr;
    let node_port = |a: u32| (a / side % xr) * xr + a % side % xr;
    // Output port of router r towards router s of its row or column.
    let out_port = |r: u32, s: u32| {
        let (rx, ry, sx, sy) = (r % k, r / k, s % k, s / k);
        if ry == sy {
            c + sx - (sx > rx) as u32
        } else {
            c + (k - 1) + sy - (sy > ry) as u32
        }
    };
    // Input port of router r fed by its neighbour s: c + the rank of s among r's
    // neighbours in ascending number (its column below it, its row, its column above).
    let in_port = |r: u32, s: u32| {
        let (rx, ry, sx, sy) = (r % k, r / k, s % k, s / k);
        c + if sy < ry {
            sy
        } else if sy == ry {
            ry + sx - (sx > rx) as u32
        } else {
            ry + (k - 1) + (sy - ry - 1)
        }
    };
    let total = (routers * np) as usize;
    let mut link = vec![Link::None; total];
    let mut latency = vec![1u8; total];
    let mut dim = vec![NO_PORT; total];
    let mut hca_port = vec![0; nodes as usize];
    for a in 0..nodes {
        let g = node_router(a) * np + node_port(a);
        link[g as usize] = Link::Hca(a);
        hca_port[a as usize] = g;
    }
    for r in 0..routers {
        let (rx, ry) = (r % k, r / k);
        let others = (0..k)
            .filter(|&x| x != rx)
            .map(|x| (ry * k + x, 0u8))
            .chain((0..k).filter(|&y| y != ry).map(|y| (y * k + rx, 1u8)));
        for (s, d) in others {
            let g = (r * np + out_port(r, s)) as usize;
            link[g] = Link::Router(s * np + in_port(s, r));
            dim[g] = d;
            if long {
                let len = xr * ((s % k).abs_diff(rx) + (s / k).abs_diff(ry));
                latency[g] = u8::try_from(len).unwrap_or(u8::MAX);
            }
        }
    }
    let mut route = vec![0u8; (routers * nodes) as usize];
    let mut route_yx = vec![0u8; if xy_yx { route.len() } else { 0 }];
    for r in 0..routers {
        for d in 0..nodes {
            let to = node_router(d);
            let i = (r * nodes + d) as usize;
            route[i] = if to == r {
                node_port(d)
            } else if to % k != r % k {
                out_port(r, r / k * k + to % k)
            } else {
                out_port(r, to)
            } as u8;
            if xy_yx {
                route_yx[i] = if to == r {
                    node_port(d)
                } else if to / k != r / k {
                    out_port(r, to / k * k + r % k)
                } else {
                    out_port(r, to)
                } as u8;
            }
        }
    }
    let mut f = Fabric::computed(
        nodes,
        (0..routers).map(|r| r * np).collect(),
        vec![np; routers as usize],
        link,
        hca_port,
    );
    f.route = route;
    f.route_yx = route_yx;
    f.dim = dim;
    f.latency = latency;
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    const XP: u32 = 0;
    const XM: u32 = 1;
    const YP: u32 = 2;
    const YM: u32 = 3;

    #[test]
    fn mesh_dor_path_length_is_manhattan_distance_plus_one() {
        let f = grid(4, 2, false, Ties::Plus);
        for s in 0..16u32 {
            for d in 0..16u32 {
                let man = (s % 4).abs_diff(d % 4) + (s / 4).abs_diff(d / 4);
                assert_eq!(f.routers_on_path(s, d), man + 1);
            }
        }
    }

    #[test]
    fn torus_dor_takes_the_short_way_round() {
        let f = grid(5, 2, true, Ties::Plus);
        assert_eq!(f.routers_on_path(0, 4), 2);
        assert_eq!(f.routers_on_path(0, 24), 3);
    }

    #[test]
    fn torus_tie_bits_choose_the_direction_half_way_round_and_keep_it() {
        let plus = Grid {
            k: 4,
            n: 2,
            torus: true,
            ties: Ties::Plus,
            xy_yx: false,
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

    /// A k-ary n-cube: every link has its reverse (the far router's opposite port
    /// leads back), ports 2i/2i+1 move coordinate i by +1/-1 (wrapping on a torus only),
    /// and dimension-order paths are as long as the per-dimension distances.
    #[test]
    fn k_ary_n_cubes_are_wired_and_routed_by_coordinates() {
        for (k, n, torus) in [
            (3, 3, false),
            (4, 3, true),
            (3, 4, true),
            (5, 1, true),
            (2, 3, false),
        ] {
            let f = grid(k, n, torus, Ties::Plus);
            assert_eq!(f.from, f.link, "links come in pairs");
            let g = f.grid.unwrap();
            let np = 2 * n + 1;
            assert_eq!(f.routers, k.pow(n));
            for r in 0..f.routers {
                assert_eq!(f.link[(r * np + 2 * n) as usize], Link::Hca(r));
                for i in 0..n {
                    for (p, step) in [(2 * i, 1), (2 * i + 1, k - 1)] {
                        let c = g.coord(r, i);
                        let inside = if p % 2 == 0 { c + 1 < k } else { c > 0 };
                        match f.link[(r * np + p) as usize] {
                            Link::Router(to) => {
                                assert!(inside || torus);
                                let far = to / np;
                                assert_eq!(g.coord(far, i), (c + step) % k);
                                for j in (0..n).filter(|&j| j != i) {
                                    assert_eq!(g.coord(far, j), g.coord(r, j));
                                }
                                // The far end's opposite port leads back here.
                                assert_eq!(to % np, p ^ 1);
                                assert_eq!(
                                    f.link[(far * np + (p ^ 1)) as usize],
                                    Link::Router(r * np + p)
                                );
                                assert_eq!(f.wrap[(r * np + p) as usize], !inside);
                            }
                            _ => assert!(!(inside || torus) || k == 1),
                        }
                    }
                }
            }
            for s in 0..f.routers {
                for d in 0..f.routers {
                    let dist: u32 = (0..n)
                        .map(|i| {
                            let (a, b) = (g.coord(s, i), g.coord(d, i));
                            let m = a.abs_diff(b);
                            if torus {
                                m.min(k - m)
                            } else {
                                m
                            }
                        })
                        .sum();
                    assert_eq!(f.routers_on_path(s, d), dist + 1, "k {k} n {n} {s}->{d}");
                }
            }
        }
    }

    /// Dimension order: the lowest differing dimension first, the host port 2n last.
    #[test]
    fn a_three_dimensional_route_takes_x_then_y_then_z() {
        let g = Grid {
            k: 4,
            n: 3,
            torus: false,
            ties: Ties::Plus,
            xy_yx: false,
        };
        // Node 0 (0,0,0) to node 16 + 4 + 1 = 21 (1,1,1). (It read 4*16 + 4 + 1 = 69,
        // beyond the 64 routers, which dimension order alone did not notice.)
        assert_eq!(g.route(0, 21, 0), 0);
        assert_eq!(g.route(1, 21, 0), 2);
        assert_eq!(g.route(5, 21, 0), 4);
        assert_eq!(g.route(21, 21, 0), 6);
        assert_eq!(g.route(21, 5, 0), 5);
        // BookSim2's xy_yx_mesh: the route bit set, Z then Y then X (the route bit
        // changes nothing without xy_yx). Node 21 is (1,1,1), 16 is (0,0,1), 20 is
        // (0,1,1).
        assert_eq!(g.route(0, 21, ROUTE_YX), 0);
        let yx = Grid { xy_yx: true, ..g };
        assert_eq!(yx.route(0, 21, 0), 0);
        assert_eq!(yx.route(0, 21, ROUTE_YX), 4);
        assert_eq!(yx.route(16, 21, ROUTE_YX), 2);
        assert_eq!(yx.route(20, 21, ROUTE_YX), 0);
        assert_eq!(yx.route(21, 21, ROUTE_YX), 6);
        assert_eq!(yx.route(21, 0, ROUTE_YX), 5);
        let t = Grid {
            torus: true,
            ties: Ties::Random,
            ..g
        };
        // Half-way round in Z: the Z tie bit (4) chooses.
        assert_eq!(t.route(0, 32, 4), 4);
        assert_eq!(t.route(0, 32, 3), 5);
    }

    /// Follows `route` (the output port at each router) from node `s`'s router and
    /// asserts that it ends at node `d`'s HCA; returns the routers passed through.
    fn walk(f: &Fabric, s: u32, d: u32, route: impl Fn(u32) -> u8) -> u32 {
        let mut r = f.port_router[f.hca_port[s as usize] as usize];
        let mut routers = 1;
        loop {
            let p = route(r) as u32;
            match f.link[(f.port_base[r as usize] + p) as usize] {
                Link::Router(g) => {
                    r = f.port_router[g as usize];
                    routers += 1;
                }
                Link::Hca(h) => {
                    assert_eq!(h, d, "{s}->{d}");
                    return routers;
                }
                Link::None => panic!("{s}->{d}: a dead end at router {r}"),
            }
        }
    }

    /// Every packet of a butterfly crosses all n stages and leaves at its destination
    /// (BookSim2's `dest_tag_fly` on `KNFly`'s wiring), every input port is fed once, and
    /// a 1-fly is the crossbar.
    #[test]
    fn a_butterfly_delivers_every_pair_through_all_its_stages() {
        for (k, n) in [(2, 1), (4, 1), (2, 3), (3, 3), (4, 2), (2, 5)] {
            let f = fly(k, n);
            let mut fed = vec![0; f.total_ports()];
            for l in &f.link {
                if let Link::Router(g) = *l {
                    fed[g as usize] += 1;
                }
            }
            for &g in &f.hca_port {
                fed[g as usize] += 1;
            }
            assert!(fed.iter().all(|&c| c == 1), "{k}-ary {n}-fly: {fed:?}");
            // Each input port's feeder leads to it.
            for (g, l) in f.from.iter().enumerate() {
                match *l {
                    Link::Router(up) => assert_eq!(f.link[up as usize], Link::Router(g as u32)),
                    Link::Hca(h) => assert_eq!(f.hca_port[h as usize], g as u32),
                    Link::None => panic!("input port {g} unfed"),
                }
            }
            assert_eq!(n == 1, f.from == f.link, "{k}-ary {n}-fly");
            for s in 0..f.nodes {
                for d in 0..f.nodes {
                    let routers = walk(&f, s, d, |r| f.next_port(r, d, 0));
                    assert_eq!(routers, n, "{k}-ary {n}-fly {s}->{d}");
                    assert_eq!(f.routers_on_path(s, d), n);
                }
            }
        }
        let (x, c) = (fly(6, 1), crossbar(6));
        assert_eq!((x.link, x.hca_port), (c.link, c.hca_port));
    }

    /// A fat tree's wiring is BookSim2's `FatTree` (its channel arithmetic, transcribed
    /// below from fattree.cpp's loops, gives the same port pairs), every input port is
    /// fed once, and `nca` takes every packet up to the lowest level whose subtree holds
    /// both ends and down to its destination, any draw of up ports.
    /// BookSim2's `CMesh::_BuildNet` transcribed: each router's inputs and outputs in
    /// the order it adds them (its four nodes, then +x, −x, +y, −y), channel numbers as
    /// it computes them, the edges' express channels included (k even).
    #[test]
    fn a_cmesh_is_wired_as_booksim2s() {
        for k in 2..=8u32 {
            let f = cmesh(k, false, false);
            assert_eq!((f.routers, f.nodes), (k * k, 4 * k * k));
            let (cx, cy) = (2u32, 2u32);
            let off = (k * k) as i64;
            let (k_, cx_) = (k as i64, cx as i64);
            let mut outs = std::collections::HashMap::new();
            let mut ins = std::collections::HashMap::new();
            for node in 0..k * k {
                let (yi, xi) = ((node / k) as i64, (node % k) as i64);
                for y in 0..cy as i64 {
                    for x in 0..cx as i64 {
                        let link = (k_ * cx_) * (cy as i64 * yi + y) + (cx_ * xi + x);
                        let port = (y * cx_ + x) as u32;
                        let g = f.port_base[node as usize] + port;
                        assert_eq!(f.link[g as usize], Link::Hca(link as u32), "k {k} eject");
                        assert_eq!(f.hca_port[link as usize], g, "k {k} inject");
                    }
                }
                let (x, y) = (xi, yi);
                let (px_out, nx_out) = (k_ * y + x, k_ * y + x + off);
                let (py_out, ny_out) = (k_ * y + x + 2 * off, k_ * y + x + 3 * off);
                let mut px_in = k_ * y + (x + 1) + off;
                let mut nx_in = k_ * y + (x - 1);
                let mut py_in = k_ * (y + 1) + x + 3 * off;
                let mut ny_in = k_ * (y - 1) + x + 2 * off;
                let h = k_ / 2;
                if x == 0 {
                    nx_in = if y < h {
                        k_ * (y + h) + x + off
                    } else {
                        k_ * (y - h) + x + off
                    };
                }
                if x == k_ - 1 {
                    px_in = if y < h {
                        k_ * (y + h) + x
                    } else {
                        k_ * (y - h) + x
                    };
                }
                if y == 0 {
                    ny_in = if x < h {
                        k_ * y + (x + h) + 3 * off
                    } else {
                        k_ * y + (x - h) + 3 * off
                    };
                }
                if y == k_ - 1 {
                    py_in = if x < h {
                        k_ * y + (x + h) + 2 * off
                    } else {
                        k_ * y + (x - h) + 2 * off
                    };
                }
                for (i, (o, n)) in [
                    (px_out, px_in),
                    (nx_out, nx_in),
                    (py_out, py_in),
                    (ny_out, ny_in),
                ]
                .into_iter()
                .enumerate()
                {
                    outs.insert(o, (node, CMESH_C + i as u32));
                    ins.insert(n, (node, CMESH_C + i as u32));
                }
            }
            let global = |(r, p): (u32, u32)| f.port_base[r as usize] + p;
            for (c, &o) in &outs {
                let g = global(o) as usize;
                let (r, p) = o;
                let edge = match p - CMESH_C {
                    0 => r % k == k - 1,
                    1 => r % k == 0,
                    2 => r / k == k - 1,
                    _ => r / k == 0,
                };
                if edge && k % 2 == 1 {
                    // BookSim2 feeds one router's express channel into two routers and
                    // another's into none: left unconnected.
                    assert_eq!(f.link[g], Link::None, "k {k} channel {c}");
                } else {
                    assert_eq!(f.link[g], Link::Router(global(ins[c])), "k {k} channel {c}");
                }
                assert_eq!(f.dim[g], ((p - CMESH_C) / 2) as u8);
            }
        }
    }

    /// BookSim2's `dor_no_express_cmesh` and `xy_yx_no_express_cmesh` transcribed
    /// (`NodeToRouter`, `NodeToPort`, `cmesh_next_no_express` / `cmesh_xy_no_express`,
    /// `cmesh_yx_no_express`), and every path as long as the routers' distance.
    #[test]
    fn a_cmesh_routes_over_its_express_channels_as_booksim2s_dor_cmesh() {
        // cmesh.cpp's `cmesh_next` transcribed (ports past the four nodes': +x, −x, +y,
        // −y), and the channel latencies of `_BuildNet` under `use_noc_latency`.
        for k in [2u32, 4, 6, 8] {
            let f = cmesh(k, false, true);
            let half = k as i64 / 2 - 1;
            for r in 0..k * k {
                for d in 0..4 * k * k {
                    let c = f.cmesh.unwrap();
                    let dest = c.node_router(d);
                    let (cx, cy) = ((r % k) as i64, (r / k) as i64);
                    let (dx, dy) = ((dest % k) as i64, (dest / k) as i64);
                    let last = k as i64 - 1;
                    let want = if dest == r {
                        c.node_port(d) as u32
                    } else if cx < dx {
                        if dx - cx > half && cy == 0 {
                            7
                        } else if dx - cx > half && cy == last {
                            6
                        } else {
                            4
                        }
                    } else if cx > dx {
                        if cx - dx > half && cy == 0 {
                            7
                        } else if cx - dx > half && cy == last {
                            6
                        } else {
                            5
                        }
                    } else if cy < dy {
                        if dy - cy > half && cx == 0 {
                            5
                        } else if dy - cy > half && cx == last {
                            4
                        } else {
                            6
                        }
                    } else if cy - dy > half && cx == 0 {
                        5
                    } else if cy - dy > half && cx == last {
                        4
                    } else {
                        7
                    };
                    assert_eq!(
                        f.next_port(r, d, 0) as u32,
                        want,
                        "k {k} router {r} node {d}"
                    );
                }
                let (x, y) = (r % k, r / k);
                for (p, lat) in [
                    (4, if x == k - 1 { k } else { 2 }),
                    (5, if x == 0 { k } else { 2 }),
                    (6, if y == k - 1 { k } else { 2 }),
                    (7, if y == 0 { k } else { 2 }),
                ] {
                    assert_eq!(
                        f.latency[(r * 8 + p) as usize] as u32,
                        lat,
                        "k {k} router {r} port {p}"
                    );
                }
            }
            // Every packet arrives (the jumps never loop).
            for s in 0..4 * k * k {
                for d in 0..4 * k * k {
                    assert!(f.routers_on_path(s, d) <= 2 * k);
                }
            }
        }
    }

    #[test]
    fn a_cmesh_routes_as_booksim2s_no_express_routings() {
        for k in [2u32, 3, 4, 8] {
            let c = cmesh(k, true, false).cmesh.unwrap();
            let f = cmesh(k, false, false);
            let node_router = |a: u32| (a / (2 * k)) / 2 * k + (a % (2 * k)) / 2;
            let node_port = |a: u32| (4 / 2) * ((a / (2 * k)) & 1) + (a & 1);
            for d in 0..4 * k * k {
                assert_eq!(c.node_router(d), node_router(d));
                assert_eq!(c.node_port(d) as u32, node_port(d));
                for r in 0..k * k {
                    let dr = node_router(d);
                    let (cx, cy, dx, dy) = (r % k, r / k, dr % k, dr / k);
                    let xy = if cx < dx {
                        4
                    } else if cx > dx {
                        5
                    } else if cy < dy {
                        6
                    } else {
                        7
                    };
                    let yx = if cy < dy {
                        6
                    } else if cy > dy {
                        7
                    } else if cx < dx {
                        4
                    } else {
                        5
                    };
                    let (want_xy, want_yx) = if dr == r {
                        (node_port(d), node_port(d))
                    } else {
                        (xy, yx)
                    };
                    assert_eq!(c.route(r, d, 0) as u32, want_xy, "k {k} r {r} d {d}");
                    assert_eq!(c.route(r, d, ROUTE_YX) as u32, want_yx, "k {k} r {r} d {d}");
                    assert_eq!(f.next_port(r, d, 0) as u32, want_xy);
                }
            }
            for s in 0..4 * k * k {
                for d in 0..4 * k * k {
                    let (a, b) = (node_router(s), node_router(d));
                    let hops = (a % k).abs_diff(b % k) + (a / k).abs_diff(b / k);
                    assert_eq!(f.routers_on_path(s, d), hops + 1);
                }
            }
        }
    }

    #[test]
    fn a_fat_tree_is_wired_as_booksim2s_and_routes_through_the_nearest_common_ancestor() {
        for (k, n) in [
            (2, 1),
            (4, 1),
            (2, 2),
            (2, 3),
            (3, 3),
            (4, 3),
            (2, 4),
            (3, 2),
        ] {
            let f = fat_tree(k, n);
            let per = k.pow(n - 1);
            assert_eq!((f.routers, f.nodes), (n * per, k.pow(n)));
            // BookSim2: channel c leaves (router, output port) and enters (router,
            // input port), ports numbered in the order the loops add them.
            let (cpd, cpl) = (k * per, 2 * k * per);
            let mut outs = std::collections::HashMap::new();
            let mut ins = std::collections::HashMap::new();
            for level in 0..n.saturating_sub(1) {
                for pos in 0..per {
                    for port in 0..k {
                        outs.insert(level * cpl + pos * k + port, (level * per + pos, port));
                    }
                }
            }
            for level in 1..n {
                for pos in 0..per {
                    for port in 0..k {
                        outs.insert(
                            level * cpl - cpd + pos * k + port,
                            (level * per + pos, k + port),
                        );
                    }
                }
            }
            for (levels, up) in [(0..n.saturating_sub(1), false), (1..n, true)] {
                for level in levels {
                    let (l, base) = if up {
                        (level - 1, level - 1)
                    } else {
                        (level, level + 1)
                    };
                    let rpn = k.pow(n - 1 - l);
                    let rpb = rpn / k;
                    let first = if up { base * cpl } else { base * cpl - cpd };
                    for pos in 0..per {
                        let (nb, np) = (pos / rpn, pos % rpn);
                        for port in 0..k {
                            let c = first + nb * rpn * k + port * rpb * k + np % rpb * k + np / rpb;
                            let local = if up { k + port } else { port };
                            ins.insert(c, (level * per + pos, local));
                        }
                    }
                }
            }
            assert_eq!(outs.len(), ins.len());
            let global = |(r, p): (u32, u32)| f.port_base[r as usize] + p;
            for (c, &o) in &outs {
                assert_eq!(
                    f.link[global(o) as usize],
                    Link::Router(global(ins[c])),
                    "{k}-ary {n}-tree channel {c}"
                );
            }
            let mut fed = vec![0; f.total_ports()];
            for l in f.link.iter().chain(&f.from) {
                if let Link::Router(g) = *l {
                    fed[g as usize] += 1;
                }
            }
            // A port between routers is fed and feeds once; a leaf's HCA port both ways
            // is its HCA's.
            for (g, &c) in fed.iter().enumerate() {
                let hca = matches!(f.link[g], Link::Hca(_)) && matches!(f.from[g], Link::Hca(_));
                assert_eq!(c, if hca { 0 } else { 2 }, "{k}-ary {n}-tree port {g}");
            }
            let t = f.fat_tree.unwrap();
            for s in 0..f.nodes {
                for d in 0..f.nodes {
                    // The lowest common level: the most significant base-k digits shared.
                    let mut up = 0;
                    while s / k.pow(up + 1) != d / k.pow(up + 1) && up + 1 < n {
                        up += 1;
                    }
                    if s / k != d / k {
                        up = up.max(1);
                    }
                    for word in [0, 1, 7, 12345, u32::MAX] {
                        let routers = walk(&f, s, d, |r| t.route(r, d, word));
                        assert_eq!(routers, 2 * up + 1, "{k}-ary {n}-tree {s}->{d}");
                    }
                    assert_eq!(f.routers_on_path(s, d), 2 * up + 1);
                }
            }
        }
    }

    /// Each level's up port is the draw's own base-k digit: uniform over the k ports,
    /// and independent of the other levels'.
    #[test]
    fn a_fat_trees_up_ports_are_uniform_and_independent_per_level() {
        let t = FatTree::new(4, 3);
        // A leaf (level 2) and its parent (level 1), routing to a node outside both.
        let (leaf, mid) = (2 * 16, 16);
        let mut count = [[0u32; 4]; 4];
        let mut x = 0x2545_f491_u64;
        for _ in 0..64_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let w = x as u32;
            let a = t.route(leaf, 63, w) as usize - 4;
            let b = t.route(mid, 63, w) as usize - 4;
            count[a][b] += 1;
        }
        for row in count {
            for c in row {
                assert!((3_600..4_400).contains(&c), "{count:?}");
            }
        }
    }

    #[test]
    fn crossbar_path_is_one_router() {
        let f = crossbar(8);
        assert_eq!(f.routers_on_path(3, 5), 1);
    }

    /// BookSim2's `FlatFlyOnChip::_BuildNet` (two dimensions, x = y = k, xr = yr)
    /// transcribed: the channel numbers it gives, the order in which each router adds
    /// its input and output channels, their lengths, and `min_flatfly`'s output port
    /// (`flatfly_transformation`, then `flatfly_outport`).
    #[test]
    fn a_flatfly_is_wired_and_routed_as_booksim2s() {
        for k in 2..=6u32 {
            for xr in 1..=3u32 {
                let (c, n) = (xr * xr, 2u32);
                let routers = k * k;
                let nodes = routers * c;
                let f = flatfly(k, xr, true, true);
                let np = c + (k - 1) * n;
                // Per router, the channels in the order it adds them: injection and
                // ejection channels (node numbers), then router channels (numbers
                // offset past the nodes).
                let mut ins: Vec<Vec<u32>> = vec![Vec::new(); routers as usize];
                let mut outs: Vec<Vec<u32>> = vec![Vec::new(); routers as usize];
                let mut length = std::collections::HashMap::new();
                for node in 0..routers {
                    let (yi, xi) = (node / k, node % k);
                    for y in 0..xr {
                        for x in 0..xr {
                            let link = (k * xr) * (xr * yi + y) + (xr * xi + x);
                            ins[node as usize].push(link);
                            outs[node as usize].push(link);
                        }
                    }
                }
                for node in 0..routers {
                    for dim in 0..n {
                        let (xcurr, ycurr) = (node % k, node / k);
                        for cnt in 0..k {
                            let other = if dim == 0 {
                                ycurr * k + cnt
                            } else {
                                cnt * k + xcurr
                            };
                            if other == node {
                                continue;
                            }
                            let oned = (node % k).abs_diff(other % k);
                            let twod = (node / k).abs_diff(other / k);
                            let offset = if node < other { 1 } else { 0 };
                            let out = (k - 1) * n * node + (k - 1) * dim + cnt - offset;
                            let ch = nodes + out;
                            length.insert(ch, xr * oned + xr * twod);
                            outs[node as usize].push(ch);
                            ins[other as usize].push(ch);
                        }
                    }
                }
                for r in 0..routers {
                    assert_eq!(outs[r as usize].len() as u32, np);
                    assert_eq!(ins[r as usize].len() as u32, np);
                    for (p, &ch) in outs[r as usize].iter().enumerate() {
                        let g = (r * np) as usize + p;
                        if ch < nodes {
                            assert_eq!(
                                f.link[g],
                                Link::Hca(ch),
                                "k {k} xr {xr} router {r} port {p}"
                            );
                            assert_eq!(f.hca_port[ch as usize], g as u32);
                            continue;
                        }
                        let (s, q) = (0..routers)
                            .find_map(|s| {
                                ins[s as usize]
                                    .iter()
                                    .position(|&i| i == ch)
                                    .map(|q| (s, q as u32))
                            })
                            .expect("every channel enters a router");
                        assert_eq!(
                            f.link[g],
                            Link::Router(s * np + q),
                            "k {k} xr {xr} router {r} port {p}"
                        );
                        assert_eq!(
                            f.latency[g] as u32, length[&ch],
                            "k {k} xr {xr} router {r} port {p}"
                        );
                    }
                }
                // The port `flatfly_outport` and `flatfly_outport_yx` give for a move in
                // dimension `dim` from coordinate `sid` to `did`.
                let port =
                    |dim: u32, did: u32, sid: u32| c + (k - 1) * dim - 1 + did + (did < sid) as u32;
                for r in 0..routers {
                    for d in 0..nodes {
                        let side = k * xr;
                        let (h, hr) = (d % side / xr, d % side % xr);
                        let (v, vr) = (d / side / xr, d / side % xr);
                        let dest = (v * k + h) * c + xr * vr + hr;
                        // min_flatfly's output port at router r towards node d: the
                        // lowest dimension that differs, digits base k.
                        let (mut dr, mut sr) = (dest / c, r);
                        let mut want = dest % c;
                        for dim in 0..n {
                            if dr % k != sr % k {
                                want = port(dim, dr % k, sr % k);
                                break;
                            }
                            dr /= k;
                            sr /= k;
                        }
                        assert_eq!(
                            f.next_port(r, d, 0) as u32,
                            want,
                            "k {k} xr {xr} router {r} node {d}"
                        );
                        // flatfly_outport_yx (`xyyx`, Y first): the highest dimension
                        // that differs, by powers of k.
                        let (mut dr, mut sr) = (dest / c, r);
                        let mut want_yx = dest % c;
                        for dim in (0..n).rev() {
                            let power = k.pow(dim);
                            if dr / power != sr / power {
                                want_yx = port(dim, dr / power, sr / power);
                                break;
                            }
                            dr %= power;
                            sr %= power;
                        }
                        assert_eq!(
                            f.next_port(r, d, ROUTE_YX) as u32,
                            want_yx,
                            "Y first: k {k} xr {xr} router {r} node {d}"
                        );
                    }
                }
                let short = flatfly(k, xr, false, false);
                assert!(short.latency.iter().all(|&l| l == 1));
            }
        }
    }
}
