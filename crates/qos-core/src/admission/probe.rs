//! Probe-based admission in the routers (Yum et al. §4.1): the bookkeeping each HCA and
//! router keeps, and what it decides when a probe, a release or a connection's final
//! data packet passes. The packets themselves travel in the simulator (`qos-sim`'s flit
//! network); this module is what their header hook calls, one hop at a time.
//!
//! - A connection's **path** is the directed links it crosses: the source HCA's
//!   injection link, then the output link of each router on its route, the last one
//!   leading to the destination HCA ([`Path`]). Router `h` of the path receives on
//!   `links[h]` and sends on `links[h + 1]`.
//! - The **source HCA** checks its own link first ([`ProbeLedger::at_source`]): if the
//!   solicited bandwidth fits it is charged and the probe leaves; otherwise the consumer
//!   gets a NACK at once and nothing is charged.
//! - Each **router** compares the bandwidth left on the output link the probe asks for
//!   with the solicited bandwidth ([`ProbeLedger::at_router`]). If it fits, the router
//!   adds it to that output link *and* to the incoming link the probe arrived on (the
//!   router's own view of its input port), recomputes the output's WRR weights
//!   ([`crate::vlarb::alloc::LinkWeights`]) and forwards the probe — or answers with an
//!   ACK when the output leads to the destination HCA. If it does not fit, the router
//!   charges nothing and answers with a NACK carrying its position on the path.
//! - On a NACK the source sends a **release** along the same path: the HCA and every
//!   router before the rejecting one subtract what they charged; the router next to the
//!   rejecting one stops the release ([`release_visits`]). The **final data packet**
//!   of a connection releases every hop as it passes.
//!
//! Only the output counters are checked; the input counters are bookkeeping that
//! follows them one hop later. Each check-and-charge is atomic at its router, so no
//! output link is ever over-committed whatever the interleaving of concurrent probes
//! (property-tested below). A probe that is refused downstream holds its upstream
//! reservations until its release passes, so concurrent probes may refuse each other
//! where a central ledger, deciding one request at a time, would have admitted one of
//! them; with probes that do not overlap in time the admitted set is exactly the
//! central ledger's ([`super::Ledger`]) on the same topology — when nodes carry no
//! receive or combined limit, which a wormhole network's HCAs do not have.
//!
//! The paper's peak power control (§5) adds a per-router power budget
//! checked and charged by the same probe; it plugs in beside the link counters here.

use serde::Serialize;

use crate::topology::{NodeId, PortRef, Route, Topology};
use crate::units::Bandwidth;
use crate::vlarb::alloc::{LinkWeights, Update, WeightError, WeightPolicy};

/// A directed link, by dense index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct LinkId(pub u32);

/// The links of a connection, source HCA's first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Path {
    /// Injection link, then each router's output link.
    pub links: Vec<LinkId>,
    /// The connection's lane on each link, where ports map its service level to lanes
    /// of their own (IBA's SL→VL tables); empty: the request's lane on every link.
    pub lanes: Vec<u8>,
}

impl Path {
    /// A path that keeps the request's lane on every link.
    pub fn new(links: Vec<LinkId>) -> Path {
        Path {
            links,
            lanes: Vec::new(),
        }
    }

    /// Routers on the path.
    pub fn routers(&self) -> usize {
        self.links.len().saturating_sub(1)
    }

    /// The lane of `req` on link `i` of the path.
    fn lane(&self, i: usize, req: &Request) -> u8 {
        self.lanes.get(i).copied().unwrap_or(req.lane)
    }
}

/// A connection's request as its probe, release and final packet carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Request {
    /// The connection.
    pub conn: u32,
    /// Solicited (average) bandwidth r_i.
    pub avg: Bandwidth,
    /// Peak rate p_i, for the Limit of High Priority.
    pub peak: Bandwidth,
    /// Its real-time lane.
    pub lane: u8,
}

/// Where a probe was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rejecter {
    /// The source HCA's own link.
    SourceHca,
    /// Router `h` of the path (0 = the source's router).
    Router(u16),
}

/// A refused probe: who refused and the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// Who refused.
    pub by: Rejecter,
    /// The link that had no room.
    pub link: LinkId,
    /// Already reserved on it.
    pub reserved: Bandwidth,
    /// Its capacity.
    pub capacity: Bandwidth,
}

/// What a router does with a probe it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeVerdict {
    /// Forward it to the next router.
    Forward,
    /// This router's output leads to the destination: answer with an ACK.
    Ack,
    /// Refused: answer with a NACK carrying the rejecter.
    Nack(Refusal),
}

/// Misuse of the ledger: a release of what was never charged, an unknown link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// A link index beyond the ledger.
    #[error("no link #{0}")]
    UnknownLink(u32),
    /// A hop beyond the path.
    #[error("hop {hop} is beyond a path of {routers} routers")]
    NoSuchHop {
        /// The hop asked for.
        hop: usize,
        /// Routers on the path.
        routers: usize,
    },
    /// A release of more than is charged.
    #[error("release of {released} B/s on link #{link} exceeds the {reserved} B/s charged")]
    Underflow {
        /// The link.
        link: u32,
        /// What was released.
        released: u64,
        /// What was charged.
        reserved: u64,
    },
    /// The link's WRR weights refused the update.
    #[error(transparent)]
    Weights(#[from] WeightError),
}

/// Whether router `hop` of the path gets the release sent after a refusal by `by`: the
/// routers before the rejecting one charged and must release; the rejecting router's
/// upstream neighbour stops the release there. After a refusal by the source HCA no
/// release is sent at all.
pub fn release_visits(hop: usize, by: Rejecter) -> bool {
    match by {
        Rejecter::SourceHca => false,
        Rejecter::Router(r) => hop < r as usize,
    }
}

/// Per-link reservations as the HCAs and routers keep them, with each output link's
/// WRR weights when a weight policy is given.
#[derive(Debug, Clone)]
pub struct ProbeLedger {
    cap: Vec<u64>,
    /// Charged by the link's sender (HCA port or router output), bytes/s. Checked.
    out: Vec<u64>,
    /// Charged by the link's receiving router (its input port), bytes/s.
    inn: Vec<u64>,
    weights: Vec<Option<LinkWeights>>,
}

impl ProbeLedger {
    /// Links of the given capacities, nothing reserved, no weights kept.
    pub fn new(capacities: &[Bandwidth]) -> Self {
        let n = capacities.len();
        ProbeLedger {
            cap: capacities.iter().map(|b| b.bytes_per_sec()).collect(),
            out: vec![0; n],
            inn: vec![0; n],
            weights: vec![None; n],
        }
    }

    /// Keeps WRR weights for every link `policy` gives a policy for.
    pub fn with_weights(
        mut self,
        mut policy: impl FnMut(LinkId) -> Option<WeightPolicy>,
    ) -> Result<Self, WeightError> {
        for (i, w) in self.weights.iter_mut().enumerate() {
            *w = policy(LinkId(i as u32)).map(LinkWeights::new).transpose()?;
        }
        Ok(self)
    }

    /// Number of links.
    pub fn len(&self) -> usize {
        self.cap.len()
    }

    /// Whether there are no links.
    pub fn is_empty(&self) -> bool {
        self.cap.is_empty()
    }

    fn idx(&self, l: LinkId) -> Result<usize, ProbeError> {
        let i = l.0 as usize;
        if i < self.cap.len() {
            Ok(i)
        } else {
            Err(ProbeError::UnknownLink(l.0))
        }
    }

    /// A link's capacity.
    pub fn capacity(&self, l: LinkId) -> Bandwidth {
        Bandwidth::from_bytes_per_sec(self.cap.get(l.0 as usize).copied().unwrap_or(0))
    }

    /// Bandwidth charged on a link by its sender (the checked counter).
    pub fn reserved(&self, l: LinkId) -> Bandwidth {
        Bandwidth::from_bytes_per_sec(self.out.get(l.0 as usize).copied().unwrap_or(0))
    }

    /// Bandwidth charged on a link by the router it enters.
    pub fn reserved_in(&self, l: LinkId) -> Bandwidth {
        Bandwidth::from_bytes_per_sec(self.inn.get(l.0 as usize).copied().unwrap_or(0))
    }

    /// The WRR weights of a link's sender, if kept.
    pub fn weights(&self, l: LinkId) -> Option<&LinkWeights> {
        self.weights.get(l.0 as usize).and_then(|w| w.as_ref())
    }

    /// Checks `out` for `req` and charges it (and `inn`, the link the probe arrived
    /// on, when a router charges). `None`: no room, nothing charged.
    fn charge(
        &mut self,
        inn: Option<LinkId>,
        out: LinkId,
        lane: u8,
        req: &Request,
    ) -> Result<Option<Update>, ProbeError> {
        let o = self.idx(out)?;
        let i = inn.map(|l| self.idx(l)).transpose()?;
        let a = req.avg.bytes_per_sec();
        if self.out[o] as u128 + a as u128 > self.cap[o] as u128 {
            return Ok(None);
        }
        let update = match &mut self.weights[o] {
            Some(w) => w.admit(lane, req.avg, req.peak)?,
            None => Update::default(),
        };
        self.out[o] += a;
        if let Some(i) = i {
            self.inn[i] += a;
        }
        Ok(Some(update))
    }

    /// Subtracts `req` from `out` (and `inn`).
    fn discharge(
        &mut self,
        inn: Option<LinkId>,
        out: LinkId,
        lane: u8,
        req: &Request,
    ) -> Result<Update, ProbeError> {
        let o = self.idx(out)?;
        let i = inn.map(|l| self.idx(l)).transpose()?;
        let a = req.avg.bytes_per_sec();
        let under = |link: usize, have: u64| ProbeError::Underflow {
            link: link as u32,
            released: a,
            reserved: have,
        };
        if a > self.out[o] {
            return Err(under(o, self.out[o]));
        }
        if let Some(i) = i {
            if a > self.inn[i] {
                return Err(under(i, self.inn[i]));
            }
        }
        let update = match &mut self.weights[o] {
            Some(w) => w.release(lane, req.avg, req.peak)?,
            None => Update::default(),
        };
        self.out[o] -= a;
        if let Some(i) = i {
            self.inn[i] -= a;
        }
        Ok(update)
    }

    /// The source HCA's check of its own link. `Ok(Err(refusal))`: NACK to the
    /// consumer, nothing charged.
    pub fn at_source(
        &mut self,
        path: &Path,
        req: &Request,
    ) -> Result<Result<Update, Refusal>, ProbeError> {
        let l = *path
            .links
            .first()
            .ok_or(ProbeError::NoSuchHop { hop: 0, routers: 0 })?;
        Ok(match self.charge(None, l, path.lane(0, req), req)? {
            Some(u) => Ok(u),
            None => Err(self.refusal(Rejecter::SourceHca, l)),
        })
    }

    /// Router `hop` of `path` sees the probe of `req`.
    pub fn at_router(
        &mut self,
        path: &Path,
        hop: usize,
        req: &Request,
    ) -> Result<(ProbeVerdict, Update), ProbeError> {
        let (inn, out) = self.hop(path, hop)?;
        Ok(
            match self.charge(Some(inn), out, path.lane(hop + 1, req), req)? {
                Some(u) if hop + 1 == path.routers() => (ProbeVerdict::Ack, u),
                Some(u) => (ProbeVerdict::Forward, u),
                None => (
                    ProbeVerdict::Nack(self.refusal(Rejecter::Router(hop as u16), out)),
                    Update::default(),
                ),
            },
        )
    }

    /// The source HCA releases its link (after a NACK from a router, or as the final
    /// data packet leaves).
    pub fn release_at_source(&mut self, path: &Path, req: &Request) -> Result<Update, ProbeError> {
        let l = *path
            .links
            .first()
            .ok_or(ProbeError::NoSuchHop { hop: 0, routers: 0 })?;
        self.discharge(None, l, path.lane(0, req), req)
    }

    /// Router `hop` releases what it charged for `req` (a release message or the
    /// final data packet passing).
    pub fn release_at_router(
        &mut self,
        path: &Path,
        hop: usize,
        req: &Request,
    ) -> Result<Update, ProbeError> {
        let (inn, out) = self.hop(path, hop)?;
        self.discharge(Some(inn), out, path.lane(hop + 1, req), req)
    }

    fn hop(&self, path: &Path, hop: usize) -> Result<(LinkId, LinkId), ProbeError> {
        if hop + 1 >= path.links.len() {
            return Err(ProbeError::NoSuchHop {
                hop,
                routers: path.routers(),
            });
        }
        Ok((path.links[hop], path.links[hop + 1]))
    }

    fn refusal(&self, by: Rejecter, l: LinkId) -> Refusal {
        Refusal {
            by,
            link: l,
            reserved: self.reserved(l),
            capacity: self.capacity(l),
        }
    }
}

/// How the links of a qos-core topology are numbered: node n's injection link (its
/// cable into the switch) is `n`; switch output port p is `nodes + port_index(p)`.
#[derive(Debug, Clone)]
pub struct TopologyLinks {
    nodes: u32,
    /// Capacity of every link.
    pub capacities: Vec<Bandwidth>,
}

impl TopologyLinks {
    /// The links of `t`: injection links at the node's uplink (capped by a send limit,
    /// as the central ledger caps it), output ports at their link's capacity (zero
    /// when uncabled).
    pub fn of(t: &Topology) -> Self {
        let mut capacities: Vec<Bandwidth> = t
            .nodes()
            .iter()
            .map(|n| n.capacity.send.map_or(n.uplink, |s| s.min(n.uplink)))
            .collect();
        for s in t.switches() {
            capacities.extend(
                s.ports
                    .iter()
                    .map(|p| p.as_ref().map_or(Bandwidth::ZERO, |l| l.capacity)),
            );
        }
        TopologyLinks {
            nodes: t.nodes().len() as u32,
            capacities,
        }
    }

    /// Node `n`'s injection link.
    pub fn injection(&self, n: NodeId) -> LinkId {
        LinkId(n.0)
    }

    /// Output port `p`'s link.
    pub fn port(&self, t: &Topology, p: PortRef) -> LinkId {
        LinkId(self.nodes + t.port_index(p) as u32)
    }

    /// The path of a connection from `src` along `route`.
    pub fn path(&self, t: &Topology, src: NodeId, route: &Route) -> Path {
        let mut links = Vec::with_capacity(route.hops.len() + 1);
        links.push(self.injection(src));
        links.extend(route.hops.iter().map(|&p| self.port(t, p)));
        Path::new(links)
    }
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;
