//! The congestion-control baselines of Yum et al. §7.2 as a throttle on the HCAs'
//! injection gate: the HCA's DMA takes a data packet into the HCA's
//! buffer only while the throttle allows it (control packets always go). The paper
//! modifies both schemes "to include the status of the HCA buffer"; how is said below.
//!
//! - **ALO**, At-Least-One (López, Martínez and Duato, the paper's [16]): a node may
//!   inject a packet if at least one lane of its class is free on every *useful*
//!   channel of its router (an output on a minimal path to the destination) — and on
//!   the HCA's own buffer —, or if some channel of its router has all the class's
//!   lanes free. A lane is free when no packet holds it and the buffer at its far end
//!   is empty; an HCA buffer lane when it is empty. The channels looked at are the
//!   router's links to other routers (a single router's: its links to the other
//!   HCAs): its own HCA's ejection link would almost always be free and allow
//!   everything.
//! - **Self-Tuned** (Thottethodi, Lebeck and Mukherjee, the paper's [17]): every
//!   `gather_delay` cycles the number of full VL buffers of the network (router input
//!   lanes and HCA lane buffers holding as many flits as they can) is counted and,
//!   `gather_delay` cycles later, known at every node (the paper's exclusive side
//!   band); while it is at or above the threshold no node injects. Every
//!   `tuning_period` cycles the threshold climbs a hill on the delivered throughput:
//!   down by `decrease` of all buffers after a period whose throughput fell below
//!   `drop` times the previous one's, up by `increase` otherwise. The paper uses "the
//!   same parameters given in [17]" without restating them; the defaults of
//!   [`SelfTunedSpec`] are what this model assumes.

use std::collections::VecDeque;

use qos_core::iba::Lanes;

use super::congestion::{CongestionSpec, SelfTunedSpec};
use super::traffic::TrafficClass;
use crate::flit::hooks::{Net, Poster};
use crate::flit::topology::{Fabric, Link};

/// Per node and data class: what ALO looked at this cycle.
#[derive(Debug, Clone, Copy, Default)]
struct AloState {
    /// Local ports (of the node's router) with a free lane of the class.
    free: u64,
    /// Some channel has all the class's lanes free.
    all_free: bool,
    /// The HCA's buffer has an empty lane of the class.
    hca_free: bool,
}

#[derive(Debug, Clone)]
struct Tuned {
    spec: SelfTunedSpec,
    gather: u64,
    total: f64,
    threshold: f64,
    /// The count every node knows, and counts on their way: (cycle known, count).
    known: u32,
    on_way: VecDeque<(u64, u32)>,
    delivered: u64,
    last: Option<u64>,
    /// Next cycles of a gathering and of a tuning (cycles the network skips while
    /// empty are caught up at the next one).
    next_gather: u64,
    next_tune: u64,
}

#[derive(Debug, Clone)]
enum Scheme {
    Alo(Vec<AloState>),
    SelfTuned(Tuned),
}

/// The throttle of a run.
#[derive(Debug, Clone)]
pub struct Throttle {
    scheme: Scheme,
    nodes: u32,
    /// Each node's router.
    router: Vec<u32>,
    /// Each router's first global port and its channels looked at (local numbers).
    base: Vec<u32>,
    channels: Vec<Vec<u8>>,
    /// Per (source, destination): the useful local ports of the source's router.
    useful: Vec<u64>,
    /// Lane masks of the real-time and best-effort classes.
    lanes: [u32; 2],
    /// Global input ports fed by a link or an HCA (their lanes are counted as buffers).
    fed: Vec<u32>,
    /// Data packets the gate held back (one per node and cycle it asked).
    pub throttled: u64,
    /// Self-Tuned: the threshold at the end, in buffers.
    pub threshold: f64,
}

fn mask(v: &[u8]) -> u32 {
    v.iter().fold(0, |m, &l| m | 1 << l)
}

impl Throttle {
    /// The throttle of `spec` (ALO or Self-Tuned; `None` for other schemes) on `fab`
    /// with the classes' `lanes`.
    pub fn new(spec: &CongestionSpec, fab: &Fabric, lanes: &Lanes) -> Option<Throttle> {
        let routers = fab.routers as usize;
        let nodes = fab.nodes;
        let router: Vec<u32> = (0..nodes as usize)
            .map(|n| fab.port_router[fab.hca_port[n] as usize])
            .collect();
        // Router adjacency and hop distances (breadth first from each router).
        let mut next: Vec<Vec<(u8, u32)>> = vec![Vec::new(); routers];
        for (r, adj) in next.iter_mut().enumerate() {
            for p in 0..fab.ports[r] {
                let g = (fab.port_base[r] + p) as usize;
                if let Link::Router(gin) = fab.link[g] {
                    adj.push((p as u8, fab.port_router[gin as usize]));
                }
            }
        }
        let mut dist = vec![u32::MAX; routers * routers];
        for s in 0..routers {
            let mut q = VecDeque::from([s]);
            dist[s * routers + s] = 0;
            while let Some(r) = q.pop_front() {
                let d = dist[s * routers + r];
                for &(_, t) in &next[r] {
                    let t = t as usize;
                    if dist[s * routers + t] == u32::MAX {
                        dist[s * routers + t] = d + 1;
                        q.push_back(t);
                    }
                }
            }
        }
        let channels: Vec<Vec<u8>> = (0..routers)
            .map(|r| {
                let c: Vec<u8> = next[r].iter().map(|&(p, _)| p).collect();
                if c.is_empty() {
                    (0..fab.ports[r] as u8)
                        .filter(|&p| {
                            matches!(
                                fab.link[(fab.port_base[r] + p as u32) as usize],
                                Link::Hca(_)
                            )
                        })
                        .collect()
                } else {
                    c
                }
            })
            .collect();
        let mut useful = vec![0u64; (nodes * nodes) as usize];
        for s in 0..nodes {
            let r = router[s as usize] as usize;
            for d in 0..nodes {
                let t = router[d as usize] as usize;
                let mut m = 0u64;
                if r == t {
                    for p in 0..fab.ports[r] {
                        if fab.link[(fab.port_base[r] + p) as usize] == Link::Hca(d) {
                            m |= 1 << p;
                        }
                    }
                } else {
                    let here = dist[r * routers + t];
                    for &(p, u) in &next[r] {
                        if dist[u as usize * routers + t].saturating_add(1) == here {
                            m |= 1 << p;
                        }
                    }
                }
                useful[(s * nodes + d) as usize] = m;
            }
        }
        let mut fed: Vec<u32> = fab
            .link
            .iter()
            .filter_map(|l| match l {
                Link::Router(g) => Some(*g),
                _ => None,
            })
            .chain(fab.hca_port.iter().copied())
            .collect();
        fed.sort_unstable();
        fed.dedup();
        let data = (lanes.real_time.len() + lanes.best_effort.len()) as f64;
        let scheme = match spec {
            CongestionSpec::Alo => Scheme::Alo(vec![AloState::default(); nodes as usize * 2]),
            CongestionSpec::SelfTuned(s) => {
                let total = (fed.len() as f64 + nodes as f64) * data;
                let k = (routers as f64).sqrt().round() as u64;
                Scheme::SelfTuned(Tuned {
                    spec: *s,
                    gather: s.gather_delay.unwrap_or(2 * k.saturating_sub(1) + 1).max(1),
                    total,
                    threshold: (s.initial * total).max(1.0),
                    known: 0,
                    on_way: VecDeque::new(),
                    delivered: 0,
                    last: None,
                    next_gather: 0,
                    next_tune: s.tuning_period,
                })
            }
            _ => return None,
        };
        Some(Throttle {
            threshold: match &scheme {
                Scheme::SelfTuned(t) => t.threshold,
                Scheme::Alo(_) => 0.0,
            },
            scheme,
            nodes,
            router,
            base: fab.port_base.clone(),
            channels,
            useful,
            lanes: [mask(&lanes.real_time), mask(&lanes.best_effort)],
            fed,
            throttled: 0,
        })
    }

    /// Looks at the network at the start of cycle `now` (before the HCAs step).
    pub fn update<N: Net>(&mut self, now: u64, net: &Poster<'_, N>) {
        match &mut self.scheme {
            Scheme::Alo(st) => {
                for n in 0..self.nodes as usize {
                    let r = self.router[n] as usize;
                    for (c, &lanes) in self.lanes.iter().enumerate() {
                        let mut s = AloState::default();
                        for &p in &self.channels[r] {
                            let g = self.base[r] + p as u32;
                            let held = net.lanes_held(g);
                            let mut free = 0u32;
                            let mut m = lanes;
                            while m != 0 {
                                let l = m.trailing_zeros();
                                m &= m - 1;
                                if held & (1 << l) == 0 && net.downstream_flits(g, l as u8) == 0 {
                                    free |= 1 << l;
                                }
                            }
                            if free != 0 {
                                s.free |= 1 << p;
                            }
                            if free == lanes {
                                s.all_free = true;
                            }
                        }
                        let mut m = lanes;
                        while m != 0 {
                            let l = m.trailing_zeros();
                            m &= m - 1;
                            if net.hca_flits(n as u32, l as u8).0 == 0 {
                                s.hca_free = true;
                                break;
                            }
                        }
                        st[n * 2 + c] = s;
                    }
                }
            }
            Scheme::SelfTuned(t) => {
                while t.on_way.front().is_some_and(|&(at, _)| at <= now) {
                    t.known = t.on_way.pop_front().expect("checked").1;
                }
                if now >= t.next_gather {
                    t.next_gather = now - now % t.gather + t.gather;
                    let cap = net.vc_buffer();
                    let data = self.lanes[0] | self.lanes[1];
                    let mut full = 0u32;
                    for &g in &self.fed {
                        let mut m = data;
                        while m != 0 {
                            let l = m.trailing_zeros();
                            m &= m - 1;
                            if net.input_flits(g, l as u8) >= cap {
                                full += 1;
                            }
                        }
                    }
                    for n in 0..self.nodes {
                        let mut m = data;
                        while m != 0 {
                            let l = m.trailing_zeros();
                            m &= m - 1;
                            let (h, c) = net.hca_flits(n, l as u8);
                            if h >= c {
                                full += 1;
                            }
                        }
                    }
                    t.on_way.push_back((now + t.gather, full));
                }
                if now >= t.next_tune {
                    let p = t.spec.tuning_period;
                    t.next_tune = now - now % p + p;
                    let tp = std::mem::take(&mut t.delivered);
                    t.threshold = tune(&t.spec, t.total, t.threshold, t.last, tp);
                    t.last = Some(tp);
                    self.threshold = t.threshold;
                }
            }
        }
    }

    /// `flits` of data were delivered (Self-Tuned's throughput).
    pub fn delivered(&mut self, flits: u32) {
        if let Scheme::SelfTuned(t) = &mut self.scheme {
            t.delivered += flits as u64;
        }
    }

    /// Whether node `node` may take a data packet of `class` for `dst` into its HCA
    /// now (control packets are never held back).
    pub fn allows(&mut self, node: u32, dst: u32, class: u8) -> bool {
        let ok = match &self.scheme {
            _ if class == TrafficClass::Control as u8 => true,
            Scheme::Alo(st) => {
                let c = usize::from(class == TrafficClass::BestEffort as u8);
                let s = st[node as usize * 2 + c];
                let useful = self
                    .useful
                    .get((node * self.nodes + dst) as usize)
                    .copied()
                    .unwrap_or(0);
                (s.hca_free && useful & !s.free == 0) || s.all_free
            }
            Scheme::SelfTuned(t) => (t.known as f64) < t.threshold,
        };
        if !ok {
            self.throttled += 1;
        }
        ok
    }
}

impl super::hca::DmaGate for Throttle {
    fn allows(&mut self, node: u32, dst: u32, class: u8, _bytes: u64, _now: u64) -> bool {
        Throttle::allows(self, node, dst, class)
    }
}

/// One step of Self-Tuned's hill climbing: the threshold after a tuning period that
/// delivered `now` flits, the one before `last`, with `total` buffers.
pub fn tune(s: &SelfTunedSpec, total: f64, threshold: f64, last: Option<u64>, now: u64) -> f64 {
    let fell = last.is_some_and(|l| (now as f64) < s.drop * l as f64);
    let t = if fell {
        threshold - s.decrease * total
    } else {
        threshold + s.increase * total
    };
    t.clamp(1.0, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_climbs_while_throughput_holds_and_falls_when_it_drops() {
        let s = SelfTunedSpec::default();
        // 1000 buffers: +10 per period, −40 after a drop below 75 %.
        assert_eq!(tune(&s, 1000.0, 50.0, None, 100), 60.0);
        assert_eq!(tune(&s, 1000.0, 50.0, Some(100), 80), 60.0);
        assert_eq!(tune(&s, 1000.0, 50.0, Some(100), 74), 10.0);
        assert_eq!(tune(&s, 1000.0, 20.0, Some(100), 10), 1.0);
        assert_eq!(tune(&s, 1000.0, 995.0, Some(100), 100), 1000.0);
    }

    #[test]
    fn useful_channels_are_the_minimal_directions() {
        let fab = crate::flit::config::TopologySpec::mesh(4).fabric().unwrap();
        let t = Throttle::new(&CongestionSpec::Alo, &fab, &Lanes::yum()).unwrap();
        let ports = |s: u32, d: u32| t.useful[(s * 16 + d) as usize].count_ones();
        // Node 5 (1,1): to 6 (2,1) one direction, to 10 (2,2) two, to 15 (3,3) two.
        assert_eq!(ports(5, 6), 1);
        assert_eq!(ports(5, 10), 2);
        assert_eq!(ports(5, 15), 2);
        assert_eq!(ports(0, 3), 1);
        // A corner router's channels: two links.
        assert_eq!(t.channels[t.router[0] as usize].len(), 2);
        assert_eq!(t.channels[t.router[5] as usize].len(), 4);
        // The buffers counted: 48 router links and 16 HCA ports feed input lanes.
        assert_eq!(t.fed.len(), 64);
    }
}
