//! Call admission control: the bandwidth resource manager's reservation ledger
//! (thesis §3.3, §3.3.1, §4.3).
//!
//! A premium request is granted only if, afterwards,
//! 1. the reservations of all flows originating or terminating at the *source node*
//!    stay within its capacity (send, receive and combined limits),
//! 2. every *switch output port* on the flow's route stays within its link capacity,
//! 3. the same as (1) holds at the *destination node*;
//!
//! and its inter-packet dispatch time is then IDT = T · Bmax / B_req, with T and Bmax
//! of the source node's NIC (rounded up to the picosecond, so the flow never exceeds
//! B_req). Best-effort flows are registered without reserving anything; their shares
//! come from [`crate::besteffort`].
//!
//! [`probe`] is the distributed counterpart of Yum et al. §4.1: the same decision taken
//! hop by hop by the HCAs and routers a probe packet crosses, each keeping its own
//! links' reservations.
//!
//! Cost: a request or a release touches only the resources on the flow's path —
//! O(route length), no scan over other flows. The ledger also keeps, per resource, the
//! best-effort flows incident on it and the set of resources changed since the last
//! best-effort computation, so that recomputing shares can be limited to the flows
//! whose resources changed ([`crate::besteffort::ThesisShares::update`]).

mod demand;
pub mod probe;
mod resources;

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use resources::{from_milli, Resources, UNLIMITED};
pub use resources::{milli_of, Demand, Resource, ResourceId, Use};

use crate::flow::{Class, Flow, FlowKey, FlowMap};
use crate::topology::{build::MAX_BANDWIDTH, RateParams, Route, RouteError, Topology};
use crate::units::{Bandwidth, Duration};

/// IDT = T · Bmax / B_req (thesis §3.3.1), rounded up to the picosecond. `None` for a
/// zero bandwidth, and for a bandwidth below [`min_rate`]: its IDT would not fit in a
/// [`Duration`] (2^64 − 1 ps, about 213 days), so the rate cannot be paced (it must
/// not saturate silently). Premium requests below it are refused
/// ([`AdmitError::BelowMinRate`]); a best-effort share below it must not send.
pub fn idt_for(rate: RateParams, bandwidth: Bandwidth) -> Option<Duration> {
    if bandwidth.is_zero() {
        return None;
    }
    let num = rate.t.as_ps() as u128 * rate.bmax.bytes_per_sec() as u128;
    let ps = num.div_ceil(bandwidth.bytes_per_sec() as u128);
    u64::try_from(ps).ok().map(Duration::from_ps)
}

/// The slowest rate a NIC with `rate` can pace: the smallest bandwidth whose IDT
/// T · Bmax / B fits in a [`Duration`]. 1 B/s for every realistic NIC.
pub fn min_rate(rate: RateParams) -> Bandwidth {
    let num = rate.t.as_ps() as u128 * rate.bmax.bytes_per_sec() as u128;
    // The smallest b with ceil(num / b) <= u64::MAX: b = ceil(num / u64::MAX).
    let b = num.div_ceil(u64::MAX as u128).max(1);
    Bandwidth::from_bytes_per_sec(u64::try_from(b).unwrap_or(u64::MAX))
}

/// Which of the thesis's three admission criteria (§3.3.1) a rejection broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Criterion {
    /// 1: the source node's capacity.
    SourceNode,
    /// 2: a switch output port on the route.
    SwitchPort,
    /// 3: the destination node's capacity.
    DestinationNode,
}

impl Criterion {
    /// The criterion's number in the thesis.
    pub fn number(self) -> u8 {
        match self {
            Criterion::SourceNode => 1,
            Criterion::SwitchPort => 2,
            Criterion::DestinationNode => 3,
        }
    }
}

impl fmt::Display for Criterion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            Criterion::SourceNode => "source node",
            Criterion::SwitchPort => "switch output port",
            Criterion::DestinationNode => "destination node",
        };
        write!(f, "criterion {}: {what}", self.number())
    }
}

/// Prints a bandwidth as the papers do: "130 MB/s", "81.8 MB/s".
pub fn mb(b: Bandwidth) -> String {
    let s = format!("{:.3}", b.mb_per_sec());
    format!("{} MB/s", s.trim_end_matches('0').trim_end_matches('.'))
}

/// Why a premium request was refused: the resource and the numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// The broken criterion.
    pub criterion: Criterion,
    /// The resource, as a label ("switch s1 port 3").
    pub resource: String,
    /// Its id.
    pub resource_id: ResourceId,
    /// Already reserved on it (cost-weighted for a combined limit).
    pub reserved: Bandwidth,
    /// What the request would add (cost-weighted for a combined limit).
    pub requested: Bandwidth,
    /// Its capacity.
    pub capacity: Bandwidth,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} reserved + {} requested > {} ({})",
            self.resource,
            mb(self.reserved),
            mb(self.requested),
            mb(self.capacity),
            self.criterion
        )
    }
}

/// Why a request could not be granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmitError {
    /// The request does not fit (thesis §3.3.1).
    #[error("rejected: {0}")]
    Rejected(Box<Rejection>),
    /// A premium request for nothing.
    #[error("a premium flow must request more than 0 MB/s")]
    ZeroBandwidth,
    /// More than one unregulated flow can send: IDT would be below T.
    #[error("rejected: {requested} requested > Bmax {bmax} of node {node} (IDT would be below T)")]
    AboveBmax {
        /// Source node name.
        node: String,
        /// The request, formatted.
        requested: String,
        /// Bmax, formatted.
        bmax: String,
    },
    /// A premium request so small that its IDT T · Bmax / B_req does not fit in a
    /// [`Duration`]: the NIC cannot pace it.
    #[error("{requested} is below {minimum}, the slowest rate node {node} can pace (its IDT T·Bmax/B would exceed 2^64-1 ps)")]
    BelowMinRate {
        /// Source node name.
        node: String,
        /// The request, in bytes/s.
        requested: String,
        /// [`min_rate`] of the node, in bytes/s.
        minimum: String,
    },
    /// A best-effort weight of zero or above [`crate::flow::Weight::MAX`].
    #[error("a best-effort weight must be between 1 and 1000000")]
    BadWeight,
    /// A flow with this key is already in the ledger.
    #[error("flow '{name}' already exists (same source port, destination port and priority as '{existing}')")]
    Duplicate {
        /// The new flow's name.
        name: String,
        /// The name of the flow holding the key.
        existing: String,
    },
    /// No route (unknown or same node, disconnected switches).
    #[error(transparent)]
    Route(#[from] RouteError),
}

/// Releasing a flow the ledger does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no such flow: {0}")]
pub struct UnknownFlow(pub FlowKey);

/// A granted request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// The flow's key.
    pub key: FlowKey,
    /// The IDT for a premium flow; `None` for best-effort (see [`crate::besteffort`]).
    pub idt: Option<Duration>,
}

/// A flow the ledger holds.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The flow as requested.
    pub flow: Flow,
    /// Its route.
    pub route: Route,
    /// The limited resources it uses and its cost on each.
    pub uses: Vec<Use>,
    /// For best-effort flows: position in each used resource's incidence list.
    be_pos: Vec<u32>,
}

/// The reservation ledger over nodes and switch output ports.
#[derive(Debug, Clone)]
pub struct Ledger {
    topo: Arc<Topology>,
    res: Resources,
    /// Premium reservations per resource, milli-bytes/s (cost-weighted).
    reserved: Vec<u64>,
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    by_key: FlowMap<u32>,
    /// Per resource: the slots of best-effort flows using it.
    be_on: Vec<Vec<u32>>,
    best_effort: usize,
    dirty: Vec<ResourceId>,
    is_dirty: Vec<bool>,
    released_be: Vec<FlowKey>,
}

/// What changed in a ledger since the last [`Ledger::take_changed`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Resources whose premium reservations or best-effort flows changed.
    pub resources: Vec<ResourceId>,
    /// Best-effort flows released.
    pub released_best_effort: Vec<FlowKey>,
}

impl Ledger {
    /// An empty ledger over `topo`.
    pub fn new(topo: Arc<Topology>) -> Self {
        let res = Resources::new(&topo);
        let n = res.len();
        Ledger {
            topo,
            res,
            reserved: vec![0; n],
            slots: Vec::new(),
            free: Vec::new(),
            by_key: FlowMap::default(),
            be_on: vec![Vec::new(); n],
            best_effort: 0,
            dirty: Vec::new(),
            is_dirty: vec![false; n],
            released_be: Vec::new(),
        }
    }

    /// The topology.
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }

    /// Decides a request: a premium flow is granted if it fits (criteria 1–3) and
    /// gets its IDT; a best-effort flow is always registered. O(route length).
    pub fn request(&mut self, flow: Flow) -> Result<Grant, AdmitError> {
        let (route, uses) = self.check(&flow)?;
        let key = flow.key;
        let premium = match flow.class {
            Class::Premium { bandwidth } => Some(bandwidth),
            Class::BestEffort { .. } => None,
        };
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.slots.len() as u32 - 1
            }
        };
        let mut be_pos = Vec::new();
        if let Some(b) = premium {
            for u in &uses {
                self.reserved[u.resource.0 as usize] += b.bytes_per_sec() * u.cost as u64;
            }
        } else {
            self.best_effort += 1;
            for u in &uses {
                let list = &mut self.be_on[u.resource.0 as usize];
                be_pos.push(list.len() as u32);
                list.push(slot);
            }
        }
        for u in &uses {
            self.mark(u.resource);
        }
        let idt = premium.and_then(|b| idt_for(self.topo.node(key.src.node).rate, b));
        self.slots[slot as usize] = Some(Entry {
            flow,
            route,
            uses,
            be_pos,
        });
        self.by_key.insert(key, slot);
        Ok(Grant { key, idt })
    }

    /// Whether `flow` would be granted now, without granting it; on success the route
    /// and the resources it would use.
    pub fn check(&self, flow: &Flow) -> Result<(Route, Vec<Use>), AdmitError> {
        if let Some(&s) = self.by_key.get(&flow.key) {
            return Err(AdmitError::Duplicate {
                name: flow.name.clone(),
                existing: self.entry(s).flow.name.clone(),
            });
        }
        let (src, dst) = (flow.key.src.node, flow.key.dst.node);
        let route = self.topo.route(src, dst)?;
        let uses = self.res.uses(&self.topo, src, dst, &route);
        match flow.class {
            Class::BestEffort { weight } => {
                if weight.0 == 0 || weight > crate::flow::Weight::MAX {
                    return Err(AdmitError::BadWeight);
                }
            }
            Class::Premium { bandwidth } => {
                if bandwidth.is_zero() {
                    return Err(AdmitError::ZeroBandwidth);
                }
                let node = self.topo.node(src);
                if bandwidth > node.rate.bmax || bandwidth > MAX_BANDWIDTH {
                    return Err(AdmitError::AboveBmax {
                        node: node.name.clone(),
                        requested: mb(bandwidth),
                        bmax: mb(node.rate.bmax),
                    });
                }
                let minimum = min_rate(node.rate);
                if bandwidth < minimum {
                    return Err(AdmitError::BelowMinRate {
                        node: node.name.clone(),
                        requested: format!("{} B/s", bandwidth.bytes_per_sec()),
                        minimum: format!("{} B/s", minimum.bytes_per_sec()),
                    });
                }
                for u in &uses {
                    let r = u.resource.0 as usize;
                    let add = bandwidth.bytes_per_sec() * u.cost as u64;
                    let cap = self.res.cap[r];
                    if self.reserved[r] as u128 + add as u128 > cap as u128 {
                        return Err(AdmitError::Rejected(Box::new(
                            self.rejection(flow, u.resource, add),
                        )));
                    }
                }
            }
        }
        Ok((route, uses))
    }

    fn rejection(&self, flow: &Flow, r: ResourceId, add: u64) -> Rejection {
        let criterion = match self.res.resource(&self.topo, r) {
            Resource::Port(_) => Criterion::SwitchPort,
            Resource::NodeSend(n) | Resource::NodeReceive(n) | Resource::NodeCombined(n)
                if n == flow.key.src.node =>
            {
                Criterion::SourceNode
            }
            _ => Criterion::DestinationNode,
        };
        Rejection {
            criterion,
            resource: self.res.label(&self.topo, r),
            resource_id: r,
            reserved: from_milli(self.reserved[r.0 as usize]),
            requested: from_milli(add),
            capacity: from_milli(self.res.cap[r.0 as usize]),
        }
    }

    /// Removes a flow and returns its capacity. O(route length).
    pub fn release(&mut self, key: &FlowKey) -> Result<Flow, UnknownFlow> {
        let slot = self.by_key.remove(key).ok_or(UnknownFlow(*key))?;
        let e = self.slots[slot as usize]
            .take()
            .expect("indexed slot is live");
        match e.flow.class {
            Class::Premium { bandwidth } => {
                for u in &e.uses {
                    self.reserved[u.resource.0 as usize] -=
                        bandwidth.bytes_per_sec() * u.cost as u64;
                }
            }
            Class::BestEffort { .. } => {
                self.best_effort -= 1;
                self.released_be.push(*key);
                for (u, &pos) in e.uses.iter().zip(&e.be_pos) {
                    let r = u.resource.0 as usize;
                    let list = &mut self.be_on[r];
                    list.swap_remove(pos as usize);
                    if let Some(&moved) = list.get(pos as usize) {
                        let m = self.slots[moved as usize].as_mut().expect("live");
                        let i = m.uses.iter().position(|x| x.resource == u.resource);
                        m.be_pos[i.expect("listed flow uses the resource")] = pos;
                    }
                }
            }
        }
        for u in &e.uses {
            self.mark(u.resource);
        }
        self.free.push(slot);
        Ok(e.flow)
    }

    fn mark(&mut self, r: ResourceId) {
        if !self.is_dirty[r.0 as usize] {
            self.is_dirty[r.0 as usize] = true;
            self.dirty.push(r);
        }
    }

    /// What changed since the last call (and forgets it): the resources whose
    /// reservations or best-effort flows changed, and the best-effort flows released.
    pub fn take_changed(&mut self) -> Changes {
        for r in &self.dirty {
            self.is_dirty[r.0 as usize] = false;
        }
        Changes {
            resources: std::mem::take(&mut self.dirty),
            released_best_effort: std::mem::take(&mut self.released_be),
        }
    }

    fn entry(&self, slot: u32) -> &Entry {
        self.slots[slot as usize]
            .as_ref()
            .expect("indexed slot is live")
    }

    /// A flow the ledger holds.
    pub fn get(&self, key: &FlowKey) -> Option<&Entry> {
        self.by_key.get(key).map(|&s| self.entry(s))
    }

    /// All flows, in no particular order.
    pub fn flows(&self) -> impl Iterator<Item = &Entry> {
        self.slots.iter().flatten()
    }

    /// Number of flows held (premium and best-effort).
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether the ledger holds no flow.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Number of best-effort flows held.
    pub fn best_effort_count(&self) -> usize {
        self.best_effort
    }

    /// Best-effort flows using resource `r`.
    pub fn best_effort_on(&self, r: ResourceId) -> impl Iterator<Item = &Entry> {
        self.be_on[r.0 as usize].iter().map(|&s| self.entry(s))
    }

    /// How many best-effort flows use resource `r`.
    pub fn best_effort_count_on(&self, r: ResourceId) -> usize {
        self.be_on[r.0 as usize].len()
    }

    /// Number of resources ([`ResourceId`]s are `0..resource_count()`).
    pub fn resource_count(&self) -> usize {
        self.res.len()
    }

    /// What a resource id stands for.
    pub fn resource(&self, r: ResourceId) -> Resource {
        self.res.resource(&self.topo, r)
    }

    /// How messages name a resource ("switch s1 port 3", "node a send").
    pub fn label(&self, r: ResourceId) -> String {
        self.res.label(&self.topo, r)
    }

    /// A resource's capacity (`None`: unlimited or an uncabled port's zero).
    pub fn capacity(&self, r: ResourceId) -> Option<Bandwidth> {
        let c = self.res.cap[r.0 as usize];
        (c != UNLIMITED).then(|| from_milli(c))
    }

    /// Premium bandwidth reserved on a resource (cost-weighted for a combined limit).
    pub fn reserved(&self, r: ResourceId) -> Bandwidth {
        from_milli(self.reserved[r.0 as usize])
    }

    /// Capacity in milli-bytes/s (`u64::MAX`: unlimited).
    pub fn capacity_milli(&self, r: ResourceId) -> u64 {
        self.res.cap[r.0 as usize]
    }

    /// Capacity minus premium reservations, in milli-bytes/s (`None`: unlimited).
    pub fn surplus_milli(&self, r: ResourceId) -> Option<u64> {
        let c = self.res.cap[r.0 as usize];
        (c != UNLIMITED).then(|| c - self.reserved[r.0 as usize])
    }
}

#[cfg(test)]
mod tests;
