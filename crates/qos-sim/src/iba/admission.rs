//! Probe-based admission on the flit fabric (§4.1): the links of a crossbar or mesh
//! numbered for [`qos_core::admission::probe::ProbeLedger`] (node n's injection link
//! is n, router output port g is nodes + g), each connection's path, the hop a router
//! is on that path, and the VL arbiters the WRR weights of a link give.

use qos_core::admission::probe::{LinkId, Path, ProbeLedger};
use qos_core::iba::Lanes;
use qos_core::units::Bandwidth;
use qos_core::vlarb::alloc::{LinkWeights, WeightPolicy};
use qos_core::vlarb::wrr::Entry;
use qos_core::vlarb::{AnyVlArbiter, VlArbConfig};

use super::config::{ArbitrationSpec, IbaConfig};
use crate::flit::topology::{Fabric, Link};

/// The fabric's links and the reservations on them.
#[derive(Debug, Clone)]
pub struct Admission {
    nodes: u32,
    port_base: Vec<u32>,
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
        Path { links }
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
        let fab = topology::grid(3, false, topology::Ties::Plus);
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
}
