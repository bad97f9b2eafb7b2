//! Probe-based admission (Yum §4.1): exact reservations after each event on a small
//! mesh, no over-commitment under any interleaving of concurrent probes, releases and
//! final packets, and the central ledger's decisions for probes that do not overlap.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::admission::{AdmitError, Ledger, Resource};
use crate::flow::{Flow, FlowKey};
use crate::topology::build::{mesh, HostDefaults};
use crate::topology::{NodeCapacity, RateParams};
use crate::units::Duration;
use crate::vlarb::alloc::RtShare;
use crate::vlarb::wrr::{Frame, Pointer};

fn bw(b: u64) -> Bandwidth {
    Bandwidth::from_bytes_per_sec(b)
}

/// A k×k mesh of `link` B/s cables, hosts with no limit but their cable.
fn mesh_topology(k: u16, link: u64) -> Arc<Topology> {
    let d = HostDefaults {
        rate: RateParams {
            t: Duration::from_us(1),
            bmax: bw(link),
        },
        capacity: NodeCapacity {
            send: None,
            receive: None,
            combined: None,
            receive_cost_permille: 1000,
            best_effort: None,
        },
        link: bw(link),
    };
    Arc::new(mesh(k, &d).unwrap().build().unwrap())
}

fn path(t: &Topology, links: &TopologyLinks, from: &str, to: &str) -> Path {
    let (s, d) = (t.node_id(from).unwrap(), t.node_id(to).unwrap());
    links.path(t, s, &t.route(s, d).unwrap())
}

fn req(conn: u32, avg: u64) -> Request {
    Request {
        conn,
        avg: bw(avg),
        peak: bw(avg),
        lane: 0,
    }
}

/// (out, in) charged on every link, as numbers.
fn state(l: &ProbeLedger) -> Vec<(u64, u64)> {
    (0..l.len() as u32)
        .map(|i| {
            (
                l.reserved(LinkId(i)).bytes_per_sec(),
                l.reserved_in(LinkId(i)).bytes_per_sec(),
            )
        })
        .collect()
}

#[test]
fn reservations_on_every_link_follow_each_probe_nack_release_and_final_packet() {
    // 2×2 mesh, 100 B/s links. A: n0_0 → n1_1, 70 B/s (east, then north: routers
    // s0_0, s1_0 and the destination's s1_1; 4 links).
    let t = mesh_topology(2, 100);
    let links = TopologyLinks::of(&t);
    let mut l = ProbeLedger::new(&links.capacities);
    let pa = path(&t, &links, "n0_0", "n1_1");
    assert_eq!(pa.routers(), 3);
    let (a, b) = (req(1, 70), req(2, 60));
    let mut want = vec![(0u64, 0u64); l.len()];
    let idx = |x: LinkId| x.0 as usize;

    // A: the HCA charges its link; each router its output and the link it came in on.
    l.at_source(&pa, &a).unwrap().unwrap();
    want[idx(pa.links[0])].0 += 70;
    assert_eq!(state(&l), want);
    for h in 0..3 {
        let (v, _) = l.at_router(&pa, h, &a).unwrap();
        assert_eq!(
            v,
            if h == 2 {
                ProbeVerdict::Ack
            } else {
                ProbeVerdict::Forward
            }
        );
        want[idx(pa.links[h + 1])].0 += 70;
        want[idx(pa.links[h])].1 += 70;
        assert_eq!(state(&l), want, "after router {h}");
    }

    // B, 60 B/s from n0_1 → n1_1, shares only A's last link: refused by its router 1
    // (the destination's router), after its HCA and router 0 charged.
    let pb = path(&t, &links, "n0_1", "n1_1");
    assert_eq!(pb.routers(), 2);
    assert_eq!(pb.links[2], pa.links[3]);
    l.at_source(&pb, &b).unwrap().unwrap();
    let (v, _) = l.at_router(&pb, 0, &b).unwrap();
    assert_eq!(v, ProbeVerdict::Forward);
    let (v, _) = l.at_router(&pb, 1, &b).unwrap();
    let ProbeVerdict::Nack(refusal) = v else {
        panic!("B admitted: {v:?}");
    };
    assert_eq!(refusal.by, Rejecter::Router(1));
    assert_eq!(refusal.link, pa.links[3]);
    assert_eq!((refusal.reserved, refusal.capacity), (bw(70), bw(100)));
    want[idx(pb.links[0])].0 += 60;
    want[idx(pb.links[1])].0 += 60;
    want[idx(pb.links[0])].1 += 60;
    assert_eq!(
        state(&l),
        want,
        "B holds its upstream hops until the release"
    );

    // The release: the HCA, then router 0; router 0's neighbour rejected, so it stops.
    l.release_at_source(&pb, &b).unwrap();
    assert!(release_visits(0, refusal.by));
    l.release_at_router(&pb, 0, &b).unwrap();
    assert!(!release_visits(1, refusal.by));
    want[idx(pb.links[0])] = (0, 0);
    want[idx(pb.links[1])].0 -= 60;
    assert_eq!(state(&l), want);

    // A's final data packet releases every hop.
    l.release_at_source(&pa, &a).unwrap();
    for h in 0..3 {
        l.release_at_router(&pa, h, &a).unwrap();
    }
    assert!(state(&l).iter().all(|&s| s == (0, 0)), "{:?}", state(&l));

    // Releasing again is an error, not a wrap-around.
    assert!(matches!(
        l.release_at_source(&pa, &a),
        Err(ProbeError::Underflow { .. })
    ));
}

#[test]
fn a_source_hca_without_room_refuses_at_once_and_sends_no_release() {
    let t = mesh_topology(2, 100);
    let links = TopologyLinks::of(&t);
    let mut l = ProbeLedger::new(&links.capacities);
    let p = path(&t, &links, "n0_0", "n1_0");
    l.at_source(&p, &req(1, 80)).unwrap().unwrap();
    let r = l.at_source(&p, &req(2, 30)).unwrap().unwrap_err();
    assert_eq!(r.by, Rejecter::SourceHca);
    assert_eq!(l.reserved(p.links[0]), bw(80));
    assert!(!release_visits(0, r.by));
}

#[test]
fn routers_recompute_the_weights_of_the_output_a_probe_charges() {
    let t = mesh_topology(2, 1000);
    let links = TopologyLinks::of(&t);
    let policy = |_| {
        Some(WeightPolicy {
            frame: Frame::Fixed(3),
            pointer: Pointer::Fast,
            share: RtShare::Reserved,
            rt_lanes: vec![0, 1],
            be_lanes: vec![2],
            link: bw(1000),
            limit: Default::default(),
        })
    };
    let mut l = ProbeLedger::new(&links.capacities)
        .with_weights(policy)
        .unwrap();
    let p = path(&t, &links, "n0_0", "n1_0");
    let mut r = req(1, 100);
    l.at_source(&p, &r).unwrap().unwrap();
    l.at_router(&p, 0, &r).unwrap();
    r = Request {
        conn: 2,
        avg: bw(200),
        peak: bw(200),
        lane: 1,
    };
    l.at_source(&p, &r).unwrap().unwrap();
    let (_, u) = l.at_router(&p, 0, &r).unwrap();
    assert!(u.changed);
    // The paper's example on the router's output: R = 100, 200 and F = 3 give 1, 2.
    let w = l.weights(p.links[1]).unwrap();
    assert_eq!(w.weights()[..2], [1, 2]);
    // The next router has seen neither probe.
    assert_eq!(l.weights(p.links[2]).unwrap().weights()[..2], [0, 0]);
    // A lane the link does not serve for real time is refused as misuse, uncharged.
    let bad = Request { lane: 2, ..r };
    assert!(l.at_router(&p, 1, &bad).is_err());
    assert_eq!(l.reserved(p.links[2]), Bandwidth::ZERO);
}

/// One in-flight message of the probe protocol, in the test's model of the network:
/// which step of which connection happens next.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// The source HCA checks its link.
    Start,
    /// The probe at router `h`.
    Probe(usize),
    /// The ACK on its way back.
    Ack,
    /// The NACK on its way back.
    Nack(Rejecter),
    /// The release at router `h`.
    Release(usize, Rejecter),
    /// The final data packet at the source HCA (`None`) or router `h`.
    Final(Option<usize>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pending,
    Admitted,
    Refused,
    Closed,
}

/// Connections driven one step at a time, in an order the caller picks.
struct Model {
    ledger: ProbeLedger,
    paths: Vec<Path>,
    reqs: Vec<Request>,
    steps: Vec<Option<Step>>,
    outcome: Vec<Outcome>,
}

impl Model {
    fn new(ledger: ProbeLedger, conns: Vec<(Path, Request)>) -> Self {
        let n = conns.len();
        let (paths, reqs) = conns.into_iter().unzip();
        Model {
            ledger,
            paths,
            reqs,
            steps: vec![Some(Step::Start); n],
            outcome: vec![Outcome::Pending; n],
        }
    }

    /// Advances connection `c` by one step.
    fn advance(&mut self, c: usize) {
        let (p, r) = (&self.paths[c], &self.reqs[c]);
        let l = &mut self.ledger;
        let next = match self.steps[c].take() {
            None => None,
            Some(Step::Start) => match l.at_source(p, r).unwrap() {
                Ok(_) => Some(Step::Probe(0)),
                Err(_) => {
                    self.outcome[c] = Outcome::Refused;
                    None
                }
            },
            Some(Step::Probe(h)) => match l.at_router(p, h, r).unwrap().0 {
                ProbeVerdict::Forward => Some(Step::Probe(h + 1)),
                ProbeVerdict::Ack => Some(Step::Ack),
                ProbeVerdict::Nack(f) => Some(Step::Nack(f.by)),
            },
            Some(Step::Ack) => {
                self.outcome[c] = Outcome::Admitted;
                None
            }
            Some(Step::Nack(by)) => {
                l.release_at_source(p, r).unwrap();
                self.outcome[c] = Outcome::Refused;
                release_visits(0, by).then_some(Step::Release(0, by))
            }
            Some(Step::Release(h, by)) => {
                l.release_at_router(p, h, r).unwrap();
                release_visits(h + 1, by).then_some(Step::Release(h + 1, by))
            }
            Some(Step::Final(None)) => {
                l.release_at_source(p, r).unwrap();
                Some(Step::Final(Some(0)))
            }
            Some(Step::Final(Some(h))) => {
                l.release_at_router(p, h, r).unwrap();
                if h + 1 < p.routers() {
                    Some(Step::Final(Some(h + 1)))
                } else {
                    self.outcome[c] = Outcome::Closed;
                    None
                }
            }
        };
        self.steps[c] = next;
    }

    /// Connections with a step to take.
    fn active(&self) -> Vec<usize> {
        (0..self.steps.len())
            .filter(|&c| self.steps[c].is_some())
            .collect()
    }

    /// Runs connection `c` to the end of its setup (or teardown).
    fn finish(&mut self, c: usize) {
        while self.steps[c].is_some() {
            self.advance(c);
        }
    }

    fn close(&mut self, c: usize) {
        assert_eq!(self.outcome[c], Outcome::Admitted);
        self.steps[c] = Some(Step::Final(None));
    }

    fn assert_never_over_committed(&self) {
        for i in 0..self.ledger.len() as u32 {
            let l = LinkId(i);
            assert!(
                self.ledger.reserved(l) <= self.ledger.capacity(l),
                "link {i}: {} > {}",
                self.ledger.reserved(l),
                self.ledger.capacity(l)
            );
        }
    }

    /// With no message in flight, every link carries exactly the admitted connections.
    fn assert_exact(&self) {
        let mut out = vec![0u64; self.ledger.len()];
        let mut inn = vec![0u64; self.ledger.len()];
        for c in 0..self.paths.len() {
            if self.outcome[c] == Outcome::Admitted {
                let links = &self.paths[c].links;
                for (j, l) in links.iter().enumerate() {
                    out[l.0 as usize] += self.reqs[c].avg.bytes_per_sec();
                    if j + 1 < links.len() {
                        inn[l.0 as usize] += self.reqs[c].avg.bytes_per_sec();
                    }
                }
            }
        }
        assert_eq!(
            state(&self.ledger),
            out.into_iter().zip(inn).collect::<Vec<_>>()
        );
    }
}

/// Connections between random hosts of a 3×3 mesh.
fn conns(t: &Topology, links: &TopologyLinks, spec: &[(u8, u8, u64)]) -> Vec<(Path, Request)> {
    let n = t.nodes().len() as u32;
    spec.iter()
        .enumerate()
        .filter_map(|(i, &(s, d, a))| {
            let (s, d) = (NodeId(s as u32 % n), NodeId(d as u32 % n));
            (s != d).then(|| (links.path(t, s, &t.route(s, d).unwrap()), req(i as u32, a)))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Probes, ACKs, NACKs, releases and final packets of many connections advance in
    /// any interleaving: no link is ever charged beyond its capacity, the links carry
    /// exactly the admitted connections once nothing is in flight, and nothing is left
    /// once every admitted connection has closed.
    #[test]
    fn concurrent_probes_never_over_commit_a_link(
        spec in prop::collection::vec((0u8..9, 0u8..9, 1u64..=60), 1..40),
        order in prop::collection::vec(any::<prop::sample::Index>(), 0..2000),
        close_after in any::<prop::sample::Index>(),
    ) {
        let t = mesh_topology(3, 100);
        let links = TopologyLinks::of(&t);
        let mut m = Model::new(ProbeLedger::new(&links.capacities), conns(&t, &links, &spec));
        let closing = close_after.index(order.len().max(1));
        for (k, pick) in order.iter().enumerate() {
            let active = m.active();
            if active.is_empty() {
                break;
            }
            m.advance(active[pick.index(active.len())]);
            m.assert_never_over_committed();
            if k == closing {
                // Some admitted connections end while others are still probing.
                for c in 0..m.outcome.len() {
                    if m.outcome[c] == Outcome::Admitted && c % 2 == 0 {
                        m.close(c);
                    }
                }
            }
        }
        for c in 0..m.outcome.len() {
            m.finish(c);
            m.assert_never_over_committed();
        }
        m.assert_exact();
        for c in 0..m.outcome.len() {
            if m.outcome[c] == Outcome::Admitted {
                m.close(c);
                m.finish(c);
            }
        }
        prop_assert!(state(&m.ledger).iter().all(|&s| s == (0, 0)));
    }

    /// Probes that do not overlap in time (each connection's setup, or teardown,
    /// completes before the next starts) admit exactly what the central ledger admits
    /// for the same requests in the same order, and leave the same reservations.
    #[test]
    fn sequential_probes_admit_what_the_central_ledger_admits(
        spec in prop::collection::vec((0u8..9, 0u8..9, 1u64..=60), 1..40),
        closes in prop::collection::vec(any::<bool>(), 40),
    ) {
        let t = mesh_topology(3, 100);
        let links = TopologyLinks::of(&t);
        let list = conns(&t, &links, &spec);
        let mut central = Ledger::new(t.clone());
        let mut m = Model::new(ProbeLedger::new(&links.capacities), list.clone());
        let flows: Vec<Flow> = spec
            .iter()
            .filter_map(|&(s, d, a)| {
                let (s, d) = (NodeId(s as u32 % 9), NodeId(d as u32 % 9));
                (s != d).then_some((s, d, a))
            })
            .enumerate()
            .map(|(i, (s, d, a))| {
                let mut k = FlowKey::between(s, d);
                k.src.port = i as u16;
                Flow::premium(&format!("c{i}"), s, d, bw(a)).with_key(k)
            })
            .collect();
        prop_assert_eq!(flows.len(), list.len());
        for c in 0..list.len() {
            m.finish(c);
            let probe = m.outcome[c] == Outcome::Admitted;
            let decision = central.request(flows[c].clone());
            prop_assert!(
                matches!(decision, Ok(_) | Err(AdmitError::Rejected(_))),
                "{:?}", decision
            );
            prop_assert_eq!(probe, decision.is_ok(), "connection {}", c);
            // Some admitted connections close before the next request.
            if probe && closes[c] {
                m.close(c);
                m.finish(c);
                central.release(&flows[c].key).unwrap();
            }
            for r in 0..central.resource_count() {
                let r = crate::admission::ResourceId(r as u32);
                let link = match central.resource(r) {
                    Resource::NodeSend(n) => links.injection(n),
                    Resource::Port(p) => links.port(&t, p),
                    _ => continue,
                };
                prop_assert_eq!(central.reserved(r), m.ledger.reserved(link));
            }
        }
    }
}
