//! Probe-based admission on the flit fabric (§4.1): the links of a crossbar or mesh
//! numbered for [`qos_core::admission::probe::ProbeLedger`] (node n's injection link
//! is n, router output port g is nodes + g), each connection's path with its lane on
//! every link, the hop a router is on that path, the VL arbiters the WRR weights of a
//! link give, and the per-port SL→VL tables ([`lane_map`]).

use qos_core::admission::probe::{LinkId, Path, ProbeLedger};
use qos_core::iba::Lanes;
use qos_core::units::Bandwidth;
use qos_core::vlarb::alloc::{LinkWeights, WeightPolicy};
use qos_core::vlarb::wrr::Entry;
use qos_core::vlarb::{AnyVlArbiter, VlArbConfig};

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::config::{ArbitrationSpec, IbaConfig, SlToVlSpec};
use crate::flit::topology::{Fabric, Link};

/// The SL→VL table of every router output port of `fab` (by global port), with
/// `network.sl_to_vl = "per_port"`: each a random permutation of the real-time lanes
/// among themselves and of the best-effort lanes among themselves, VL15 kept, drawn
/// from `seed`. A packet's injection lane stands for its service level. `None` with
/// `"identity"`.
pub fn lane_map(fab: &Fabric, cfg: &IbaConfig, seed: u64) -> Option<Vec<[u8; 16]>> {
    if cfg.network.sl_to_vl == SlToVlSpec::Identity {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x51_70_71_0D_5E_ED_00_01);
    let lanes = &cfg.network.lanes;
    Some(
        (0..fab.total_ports())
            .map(|_| {
                let mut t: [u8; 16] = std::array::from_fn(|v| v as u8);
                for class in [&lanes.real_time, &lanes.best_effort] {
                    let mut to = class.clone();
                    to.shuffle(&mut rng);
                    for (&from, &v) in class.iter().zip(&to) {
                        t[from as usize] = v;
                    }
                }
                t
            })
            .collect(),
    )
}

/// The fabric's links and the reservations on them.
#[derive(Debug, Clone)]
pub struct Admission {
    nodes: u32,
    port_base: Vec<u32>,
    /// The ports' SL→VL tables, when lanes change hop by hop.
    lane_map: Option<Vec<[u8; 16]>>,
    /// The ledger, with every link's WRR weights.
    pub ledger: ProbeLedger,
}

/// The IBA two-level table with equal weights and no limit: how real-time lanes are
/// served when nothing is admitted by probes.
pub fn unweighted(lanes: &Lanes, arb: &ArbitrationSpec) -> VlArbConfig {
    let e = |v: &Vec<u8>| v.iter().map(|&vl| Entry { vl, weight: 1 }).collect();
    VlArbConfig::Iba {
        high: e(&lanes.real_time),
        low: e(&lanes.best_effort),
        limit: 255,
        pointer: arb.pointer,
        exact_limit: None,
    }
}

impl Admission {
    /// The links of `fab`, all of `cfg`'s link bandwidth, with weights kept on every
    /// cabled link.
    pub fn new(fab: &Fabric, cfg: &IbaConfig) -> Admission {
        let nodes = fab.nodes;
        let total = nodes as usize + fab.total_ports();
        let link = cfg.network.link;
        let caps: Vec<Bandwidth> = (0..total)
            .map(|i| {
                if i < nodes as usize || !matches!(fab.link[i - nodes as usize], Link::None) {
                    link
                } else {
                    Bandwidth::ZERO
                }
            })
            .collect();
        let policy = WeightPolicy {
            frame: cfg.arbitration.frame,
            pointer: cfg.arbitration.pointer,
            share: cfg.arbitration.share,
            rt_lanes: cfg.network.lanes.real_time.clone(),
            be_lanes: cfg.network.lanes.best_effort.clone(),
            link,
            limit: cfg.arbitration.limit,
        };
        let ledger = ProbeLedger::new(&caps)
            .with_weights(|l| (caps[l.0 as usize] > Bandwidth::ZERO).then(|| policy.clone()))
            .expect("the configuration was validated");
        Admission {
            nodes,
            port_base: fab.port_base.clone(),
            lane_map: None,
            ledger,
        }
    }

    /// The link leaving local output `port` of `router`.
    pub fn output(&self, router: u32, port: u8) -> LinkId {
        LinkId(self.nodes + self.port_base[router as usize] + port as u32)
    }

    /// The router and local output port link `l` leaves (`None` for an injection
    /// link).
    pub fn router_port(&self, l: LinkId) -> Option<(u32, u8)> {
        let g = l.0.checked_sub(self.nodes)?;
        let r = self.port_base.partition_point(|&b| b <= g).checked_sub(1)?;
        Some((r as u32, (g - self.port_base[r]) as u8))
    }

    /// Node `n`'s injection link.
    pub fn injection(&self, n: u32) -> LinkId {
        LinkId(n)
    }

    /// Lanes change hop by hop by these SL→VL tables ([`lane_map`]).
    pub fn set_lane_map(&mut self, map: Option<Vec<[u8; 16]>>) {
        self.lane_map = map;
    }

    /// The path of a connection on `lane` (its injection lane, its SL) from `src` to
    /// `dst`, with its lane on every link.
    pub fn path_on(&self, fab: &Fabric, src: u32, dst: u32, lane: u8) -> Path {
        let mut p = self.path(fab, src, dst);
        if let Some(m) = &self.lane_map {
            p.lanes = p
                .links
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    if i == 0 {
                        lane
                    } else {
                        m[(l.0 - self.nodes) as usize][lane as usize & 15]
                    }
                })
                .collect();
        }
        p
    }

    /// The path from `src` to `dst` through `fab` (dimension-order or table routes).
    pub fn path(&self, fab: &Fabric, src: u32, dst: u32) -> Path {
        let mut links = vec![LinkId(src)];
        let mut r = fab.port_router[fab.hca_port[src as usize] as usize];
        loop {
            let p = fab.next_port(r, dst, 0);
            let g = fab.port_base[r as usize] + p as u32;
            links.push(LinkId(self.nodes + g));
            match fab.link[g as usize] {
                Link::Router(gi) => r = fab.port_router[gi as usize],
                _ => break,
            }
        }
        Path::new(links)
    }

    /// The hop of `path` whose output is `out` (router h sends on `links[h + 1]`).
    pub fn hop(path: &Path, out: LinkId) -> Option<usize> {
        path.links.iter().skip(1).position(|&l| l == out)
    }

    /// The VL arbiter the weights of link `l` give now.
    pub fn arbiter(&self, l: LinkId) -> Option<AnyVlArbiter> {
        let w: &LinkWeights = self.ledger.weights(l)?;
        w.arbitration().ok()?.build().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flit::topology;

    #[test]
    fn paths_on_a_mesh_follow_dimension_order_and_hops_are_found_by_their_output() {
        let fab = topology::grid(3, 2, false, topology::Ties::Plus);
        let cfg: IbaConfig = toml::from_str(
            "[network]\ntopology = { kind = \"mesh\", k = 3 }\n[workload]\nloads = [0.5]\nreal_time = { kind = \"mpeg\" }\n[run]\nwarmup = \"1ms\"\nmeasure = \"1ms\"\n",
        )
        .unwrap();
        let a = Admission::new(&fab, &cfg);
        // Node 0 (0,0) to node 8 (2,2): X twice, Y twice, then the host port: five
        // routers, six links.
        let p = a.path(&fab, 0, 8);
        assert_eq!(p.routers(), fab.routers_on_path(0, 8) as usize);
        assert_eq!(p.routers(), 5);
        assert_eq!(p.links[0], LinkId(0));
        for (h, &l) in p.links.iter().enumerate().skip(1) {
            assert_eq!(Admission::hop(&p, l), Some(h - 1));
        }
        // Every link of the path has the link's capacity.
        assert!(p
            .links
            .iter()
            .all(|&l| a.ledger.capacity(l) == cfg.network.link));
        // Mesh edge ports lead nowhere and carry nothing.
        let edge = (0..fab.total_ports())
            .find(|&g| matches!(fab.link[g], Link::None))
            .unwrap();
        assert_eq!(a.ledger.capacity(LinkId(9 + edge as u32)), Bandwidth::ZERO);
        // Every output link maps back to its router and port; injection links to none.
        for r in 0..fab.routers {
            for port in 0..fab.ports[r as usize] as u8 {
                assert_eq!(a.router_port(a.output(r, port)), Some((r, port)));
            }
        }
        assert_eq!(a.router_port(a.injection(4)), None);
    }

    #[test]
    fn per_port_tables_move_a_connection_between_lanes_of_its_class() {
        let fab = topology::grid(3, 2, false, topology::Ties::Plus);
        let mut cfg: IbaConfig = toml::from_str(
            "[network]\ntopology = { kind = \"mesh\", k = 3 }\n[workload]\nloads = [0.5]\nreal_time = { kind = \"mpeg\" }\n[run]\nwarmup = \"1ms\"\nmeasure = \"1ms\"\n",
        )
        .unwrap();
        let map = lane_map(&fab, &cfg, 7).unwrap();
        assert_eq!(map.len(), fab.total_ports());
        let rt: Vec<u8> = (0..11).collect();
        for t in &map {
            // A permutation within each class; VL15 kept.
            let mut got: Vec<u8> = rt.iter().map(|&v| t[v as usize]).collect();
            got.sort();
            assert_eq!(got, rt);
            let mut be: Vec<u8> = (11..15).map(|v| t[v]).collect();
            be.sort();
            assert_eq!(be, vec![11, 12, 13, 14]);
            assert_eq!(t[15], 15);
        }
        // The tables differ between ports, so a lane does not stay the same.
        assert!(map.windows(2).any(|w| w[0] != w[1]));
        let mut a = Admission::new(&fab, &cfg);
        a.set_lane_map(Some(map.clone()));
        let p = a.path_on(&fab, 0, 8, 3);
        assert_eq!(p.lanes.len(), p.links.len());
        assert_eq!(p.lanes[0], 3);
        for (l, &v) in p.links.iter().zip(&p.lanes).skip(1) {
            assert_eq!(v, map[(l.0 - 9) as usize][3]);
        }
        // "identity" keeps the injection lane.
        cfg.network.sl_to_vl = SlToVlSpec::Identity;
        assert!(lane_map(&fab, &cfg, 7).is_none());
        assert!(Admission::new(&fab, &cfg)
            .path_on(&fab, 0, 8, 3)
            .lanes
            .is_empty());
    }
}
