//! Best-effort allocation (thesis §3.3.2, §4.3): what each best-effort flow may send,
//! given the premium reservations in a [`Ledger`], as a rate and an IDT.
//!
//! Two policies ([`Policy`]):
//! - **Thesis rule** (§4.3): "the surplus bandwidth at each node and switch port is
//!   fairly set aside for all such flows incident on the node or the port. The
//!   bandwidth allocated to a flow is the minimum of these values for all nodes and
//!   ports traversed by it." Surplus = capacity − premium reservations; every
//!   best-effort flow on a resource gets an equal part, whatever its weight. As the
//!   thesis notes, this leaves capacity idle where a flow is held back elsewhere.
//! - **Weighted max-min** (water-filling): all flows' rates rise in proportion to their
//!   weights; a flow stops when a resource on its path is full or it reaches Bmax. The
//!   result is feasible and max-min fair: every flow has a saturated bottleneck on which
//!   no flow has a larger rate per unit of weight.
//!
//! Under both, no flow exceeds its source's Bmax (its IDT is never below T): a lone
//! best-effort flow on an idle node sends at Bmax, the thesis's "peak rate", IDT = T.
//! Rates are exact integers rounded down, so shares never exceed any surplus.
//!
//! Cost: [`thesis_rule`] is O(U) and [`max_min`] O(U log U), U = Σ over best-effort
//! flows of the resources each uses (route length + 4). [`ThesisShares::update`]
//! recomputes only the flows incident on resources that changed since its last call:
//! O(Σ over changed resources of their best-effort flows × route length).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use crate::admission::{idt_for, Entry, Ledger, ResourceId};
use crate::flow::{Class, FlowKey, FlowMap, FlowSet};
use crate::topology::FULL_COST;
use crate::units::{Bandwidth, Duration};

/// How best-effort flows share the surplus (`--policy thesis|max-min` where the
/// `clap` feature is on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Equal parts of every resource's surplus, minimum along the path (thesis §4.3).
    #[default]
    Thesis,
    /// Weighted max-min fair shares (water-filling).
    MaxMin,
}

/// What limits a best-effort flow's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bottleneck {
    /// A resource on its path (its part of the surplus, or a saturated resource).
    Resource(ResourceId),
    /// The source NIC's Bmax (the flow sends at peak rate, IDT = T).
    Peak,
}

/// One best-effort flow's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Share {
    /// The flow.
    pub key: FlowKey,
    /// Its rate.
    pub rate: Bandwidth,
    /// T · Bmax / rate of its source NIC; `None` when the rate is zero or below the
    /// slowest rate the NIC can pace ([`crate::admission::min_rate`]): the flow must
    /// not send.
    pub idt: Option<Duration>,
    /// What holds it back.
    pub bottleneck: Bottleneck,
}

/// Shares under `policy`, in the ledger's flow order.
pub fn allocate(ledger: &Ledger, policy: Policy) -> Vec<Share> {
    match policy {
        Policy::Thesis => thesis_rule(ledger),
        Policy::MaxMin => max_min(ledger),
    }
}

fn weight(e: &Entry) -> u64 {
    match e.flow.class {
        Class::BestEffort { weight } => weight.0 as u64,
        Class::Premium { .. } => 0,
    }
}

fn share(ledger: &Ledger, e: &Entry, rate: Bandwidth, bottleneck: Bottleneck) -> Share {
    let rp = ledger.topology().node(e.flow.key.src.node).rate;
    Share {
        key: e.flow.key,
        rate,
        idt: idt_for(rp, rate),
        bottleneck,
    }
}

/// The best-effort sharing capacity of the node a resource belongs to, if it has one
/// ([`crate::topology::NodeCapacity::best_effort`]).
fn sharing_capacity(ledger: &Ledger, r: ResourceId) -> Option<Bandwidth> {
    use crate::admission::Resource;
    match ledger.resource(r) {
        Resource::NodeSend(n) | Resource::NodeReceive(n) | Resource::NodeCombined(n) => {
            ledger.topology().node(n).capacity.best_effort
        }
        Resource::Port(_) => None,
    }
}

/// A resource's equal part of its surplus per best-effort flow, in milli-bytes/s
/// (`None`: unlimited). A node with a best-effort capacity shares at most that capacity
/// minus its premium reservations.
fn thesis_part(ledger: &Ledger, r: ResourceId) -> Option<u64> {
    let mut surplus = ledger.surplus_milli(r)?;
    if let Some(cap) = sharing_capacity(ledger, r) {
        let cap_milli = cap.bytes_per_sec().saturating_mul(1000);
        let reserved = ledger.capacity_milli(r).saturating_sub(surplus);
        surplus = surplus.min(cap_milli.saturating_sub(reserved));
    }
    Some(surplus / (ledger.best_effort_count_on(r) as u64).max(1))
}

/// Whether a best-effort flow crosses a node with a best-effort capacity and is alone on
/// every resource of its path: no premium reservation and no other best-effort flow (it
/// then sends at peak rate, thesis §5.6, rather than at the capped share).
fn uncontended_but_capped(ledger: &Ledger, e: &Entry) -> bool {
    e.uses
        .iter()
        .any(|u| sharing_capacity(ledger, u.resource).is_some())
        && uncontended(ledger, e)
}

fn uncontended(ledger: &Ledger, e: &Entry) -> bool {
    e.uses.iter().all(|u| {
        ledger.best_effort_count_on(u.resource) <= 1
            && ledger
                .surplus_milli(u.resource)
                .is_none_or(|s| s == ledger.capacity_milli(u.resource))
    })
}

/// One flow's share under the thesis rule, given each resource's part. O(route length).
fn thesis_one(ledger: &Ledger, e: &Entry, part: impl Fn(ResourceId) -> Option<u64>) -> Share {
    let bmax = ledger.topology().node(e.flow.key.src.node).rate.bmax;
    let mut rate = bmax.bytes_per_sec();
    let mut bottleneck = Bottleneck::Peak;
    for u in &e.uses {
        let Some(p) = part(u.resource) else {
            continue;
        };
        // The part (in cost units) turned back into bytes/s of this flow.
        let r = if u.cost == FULL_COST {
            p / FULL_COST as u64
        } else {
            p / u.cost as u64
        };
        if r < rate {
            rate = r;
            bottleneck = Bottleneck::Resource(u.resource);
        }
    }
    share(ledger, e, Bandwidth::from_bytes_per_sec(rate), bottleneck)
}

/// The thesis rule (§4.3) for every best-effort flow. O(U).
pub fn thesis_rule(ledger: &Ledger) -> Vec<Share> {
    let part: Vec<Option<u64>> = (0..ledger.resource_count())
        .map(|r| thesis_part(ledger, ResourceId(r as u32)))
        .collect();
    ledger
        .flows()
        .filter(|e| !e.flow.class.is_premium())
        .map(|e| thesis_share(ledger, e, |r| part[r.0 as usize]))
        .collect()
}

/// [`thesis_one`], or peak rate for a lone flow through a node with a sharing capacity.
fn thesis_share(ledger: &Ledger, e: &Entry, part: impl Fn(ResourceId) -> Option<u64>) -> Share {
    if uncontended_but_capped(ledger, e) {
        let bmax = ledger.topology().node(e.flow.key.src.node).rate.bmax;
        share(ledger, e, bmax, Bottleneck::Peak)
    } else {
        thesis_one(ledger, e, part)
    }
}

/// Thesis-rule shares kept up to date incrementally: each call to [`Self::update`]
/// recomputes only the flows on resources that changed.
#[derive(Debug, Clone, Default)]
pub struct ThesisShares {
    shares: FlowMap<Share>,
    /// Per resource, [`thesis_part`] as of the last update (`u64::MAX`: unlimited).
    part: Vec<u64>,
}

impl ThesisShares {
    /// No shares yet; the first [`Self::update`] computes them all.
    pub fn new() -> Self {
        Self::default()
    }

    /// Brings the shares up to date with `ledger` and returns those that changed
    /// (new flows included); flows released from the ledger are dropped. Touches only
    /// the flows on resources changed since the last call ([`Ledger::take_changed`]),
    /// so call it after every change or batch of changes, and use one `ThesisShares`
    /// per ledger.
    pub fn update(&mut self, ledger: &mut Ledger) -> Vec<Share> {
        let changes = ledger.take_changed();
        let n = ledger.resource_count();
        let first = self.part.len() != n;
        if first {
            self.part = (0..n)
                .map(|r| thesis_part(ledger, ResourceId(r as u32)).unwrap_or(u64::MAX))
                .collect();
        } else {
            for &r in &changes.resources {
                self.part[r.0 as usize] = thesis_part(ledger, r).unwrap_or(u64::MAX);
            }
        }
        for k in &changes.released_best_effort {
            if !matches!(ledger.get(k), Some(e) if !e.flow.class.is_premium()) {
                self.shares.remove(k);
            }
        }
        let part = |r: ResourceId| Some(self.part[r.0 as usize]).filter(|&p| p != u64::MAX);
        let mut out = Vec::new();
        let mut consider = |e: &Entry, seen: &mut FlowSet| {
            if !seen.insert(e.flow.key) {
                return;
            }
            let s = thesis_share(ledger, e, part);
            if self.shares.get(&s.key) != Some(&s) {
                out.push(s);
            }
        };
        let mut seen = FlowSet::default();
        if first {
            for e in ledger.flows().filter(|e| !e.flow.class.is_premium()) {
                consider(e, &mut seen);
            }
        } else {
            for &r in &changes.resources {
                for e in ledger.best_effort_on(r) {
                    consider(e, &mut seen);
                }
            }
        }
        for s in &out {
            self.shares.insert(s.key, s.clone());
        }
        out
    }

    /// A flow's current share.
    pub fn get(&self, key: &FlowKey) -> Option<&Share> {
        self.shares.get(key)
    }

    /// All current shares, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Share> {
        self.shares.values()
    }
}

/// A water level as an exact fraction `num / den` (bytes/s per unit of weight).
#[derive(Debug, Clone, Copy)]
struct Level {
    num: u128,
    den: u128,
}

impl PartialEq for Level {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Level {}
impl PartialOrd for Level {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Level {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.num * o.den).cmp(&(o.num * self.den))
    }
}

/// A candidate event of the water-filling: a flow reaches Bmax, or a resource fills
/// up. Resource levels only rise, so an entry is a lower bound and is refreshed when
/// popped if flows froze elsewhere meanwhile. Ties go to Bmax (a flow at peak rate is reported as such), then to lower ids,
/// so results are deterministic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    level: Level,
    /// 0: flow at peak, 1: resource.
    kind: u8,
    id: u32,
}

/// The state of a water-filling run.
struct Fill<'a> {
    ledger: &'a Ledger,
    flows: Vec<&'a Entry>,
    /// Remaining surplus per resource (milli-bytes/s).
    remaining: Vec<u128>,
    /// Σ weight · cost of the flows still rising on each resource.
    wsum: Vec<u128>,
    heap: BinaryHeap<Reverse<Event>>,
    result: Vec<Option<Share>>,
}

impl Fill<'_> {
    /// The level at which resource `r` fills if nothing else changes.
    fn level(&self, r: usize) -> Level {
        Level {
            num: self.remaining[r],
            den: self.wsum[r],
        }
    }

    fn push_resource(&mut self, r: usize) {
        if self.wsum[r] > 0 {
            self.heap.push(Reverse(Event {
                level: self.level(r),
                kind: 1,
                id: r as u32,
            }));
        }
    }

    /// Stops flow `i` at `rate` and lowers what is left on its resources.
    fn freeze(&mut self, i: usize, rate: u64, bottleneck: Bottleneck) {
        let e = self.flows[i];
        for u in &e.uses {
            let r = u.resource.0 as usize;
            self.remaining[r] = self.remaining[r].saturating_sub(rate as u128 * u.cost as u128);
            // The resource's level can only rise; its heap entry is refreshed lazily
            // when popped, so a freeze costs no heap operation.
            self.wsum[r] -= (weight(e) * u.cost as u64) as u128;
        }
        let s = share(
            self.ledger,
            e,
            Bandwidth::from_bytes_per_sec(rate),
            bottleneck,
        );
        self.result[i] = Some(s);
    }
}

/// Weighted max-min fair shares by water-filling, in the ledger's flow order.
/// O(U log U).
pub fn max_min(ledger: &Ledger) -> Vec<Share> {
    let flows: Vec<&Entry> = ledger
        .flows()
        .filter(|e| !e.flow.class.is_premium())
        .collect();
    let index: FlowMap<u32> = flows
        .iter()
        .enumerate()
        .map(|(i, e)| (e.flow.key, i as u32))
        .collect();
    let nres = ledger.resource_count();
    let n = flows.len();
    let mut f = Fill {
        ledger,
        flows,
        remaining: vec![0; nres],
        wsum: vec![0; nres],
        heap: BinaryHeap::new(),
        result: vec![None; n],
    };
    for e in &f.flows {
        for u in &e.uses {
            f.wsum[u.resource.0 as usize] += (weight(e) * u.cost as u64) as u128;
        }
    }
    for r in 0..nres {
        if f.wsum[r] > 0 {
            f.remaining[r] = ledger.surplus_milli(ResourceId(r as u32)).unwrap_or(0) as u128;
            f.push_resource(r);
        }
    }
    for i in 0..n {
        let e = f.flows[i];
        let bmax = ledger.topology().node(e.flow.key.src.node).rate.bmax;
        f.heap.push(Reverse(Event {
            level: Level {
                num: bmax.bytes_per_sec() as u128,
                den: weight(e) as u128,
            },
            kind: 0,
            id: i as u32,
        }));
    }

    while let Some(Reverse(ev)) = f.heap.pop() {
        if ev.kind == 0 {
            let i = ev.id as usize;
            if f.result[i].is_none() {
                // Bmax, in bytes/s: the flow sends at peak rate.
                let rate = (weight(f.flows[i]) as u128 * ev.level.num / ev.level.den) as u64;
                f.freeze(i, rate, Bottleneck::Peak);
            }
            continue;
        }
        let r = ev.id as usize;
        if f.wsum[r] == 0 {
            continue;
        }
        if f.level(r) != ev.level {
            // Flows on r froze elsewhere since this entry was pushed: its level rose.
            f.push_resource(r);
            continue;
        }
        // Resource r fills at this level: every flow still rising on it stops here.
        let rid = ResourceId(r as u32);
        let members: Vec<usize> = ledger
            .best_effort_on(rid)
            .map(|e| index[&e.flow.key] as usize)
            .collect();
        for i in members {
            if f.result[i].is_none() {
                let rate = (weight(f.flows[i]) as u128 * ev.level.num / ev.level.den) as u64;
                f.freeze(i, rate, Bottleneck::Resource(rid));
            }
        }
    }
    f.result
        .into_iter()
        .map(|s| s.expect("every flow stops at Bmax at the latest"))
        .collect()
}

#[cfg(test)]
#[path = "besteffort_tests.rs"]
mod tests;
