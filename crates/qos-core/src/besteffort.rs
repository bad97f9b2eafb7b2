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

/// How best-effort flows share the surplus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
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
    /// T · Bmax / rate of its source NIC; `None` when the rate is zero (the flow must
    /// not send).
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

/// A resource's equal part of its surplus per best-effort flow, in milli-bytes/s
/// (`None`: unlimited).
fn thesis_part(ledger: &Ledger, r: ResourceId) -> Option<u64> {
    let surplus = ledger.surplus_milli(r)?;
    Some(surplus / (ledger.best_effort_count_on(r) as u64).max(1))
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
        .map(|e| thesis_one(ledger, e, |r| part[r.0 as usize]))
        .collect()
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
            let s = thesis_one(ledger, e, part);
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
mod tests {
    //! Best-effort shares against thesis §5.6 and the feasibility / fairness
    //! invariants, under random sequences of premium and best-effort requests.

    use std::collections::HashMap;
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::flow::{Flow, Weight};
    use crate::topology::build::{cascade, crossbar, mesh, HostDefaults};
    use crate::topology::{NodeId, Topology};

    fn mbs(x: f64) -> Bandwidth {
        Bandwidth::from_mb_per_sec(x)
    }

    fn ledger(hosts: u16) -> Ledger {
        Ledger::new(Arc::new(
            crossbar(hosts, &HostDefaults::thesis())
                .unwrap()
                .build()
                .unwrap(),
        ))
    }

    fn be(name: &str, a: u32, b: u32) -> Flow {
        Flow::best_effort(name, NodeId(a), NodeId(b))
    }

    fn rate_of(shares: &[Share], f: &Flow) -> Bandwidth {
        shares.iter().find(|s| s.key == f.key).unwrap().rate
    }

    #[test]
    fn a_lone_best_effort_flow_sends_at_peak_rate() {
        let mut l = ledger(4);
        l.request(be("be", 0, 1)).unwrap();
        for policy in [Policy::Thesis, Policy::MaxMin] {
            let s = allocate(&l, policy);
            assert_eq!(s[0].rate, mbs(81.8));
            assert_eq!(s[0].idt, Some(Duration::from_us(48)), "IDT = T");
            assert_eq!(s[0].bottleneck, Bottleneck::Peak);
        }
    }

    #[test]
    fn premium_flows_on_the_node_shrink_the_best_effort_share_as_in_thesis_5_6() {
        // Fig 5.11: one best-effort flow, then premium 40 MB/s, then premium 20 MB/s.
        let mut l = ledger(4);
        let f = be("be", 0, 1);
        l.request(f.clone()).unwrap();
        let p1 = l
            .request(Flow::premium("p1", NodeId(0), NodeId(2), mbs(40.0)))
            .unwrap();
        assert_eq!(rate_of(&thesis_rule(&l), &f), mbs(41.8)); // measured ≈ 38
        let p2 = l
            .request(Flow::premium("p2", NodeId(0), NodeId(3), mbs(20.0)))
            .unwrap();
        assert_eq!(rate_of(&thesis_rule(&l), &f), mbs(21.8)); // measured ≈ 18
        assert_eq!(rate_of(&max_min(&l), &f), mbs(21.8));
        l.release(&p1.key).unwrap();
        l.release(&p2.key).unwrap();
        assert_eq!(rate_of(&thesis_rule(&l), &f), mbs(81.8));
    }

    #[test]
    fn two_best_effort_flows_split_the_surplus_equally_as_in_thesis_5_6() {
        // Fig 5.12: two best-effort flows get half the peak each (measured ≈ 39),
        // then share what a 20 MB/s premium flow leaves (measured: 58 MB/s shared).
        let mut l = ledger(4);
        let (a, b) = (be("a", 0, 1), be("b", 0, 2));
        l.request(a.clone()).unwrap();
        l.request(b.clone()).unwrap();
        let s = thesis_rule(&l);
        assert_eq!((rate_of(&s, &a), rate_of(&s, &b)), (mbs(40.9), mbs(40.9)));
        l.request(Flow::premium("p", NodeId(0), NodeId(3), mbs(20.0)))
            .unwrap();
        for s in [thesis_rule(&l), max_min(&l)] {
            assert_eq!((rate_of(&s, &a), rate_of(&s, &b)), (mbs(30.9), mbs(30.9)));
        }
    }

    #[test]
    fn max_min_hands_out_what_the_thesis_rule_leaves_idle() {
        let mut l = ledger(4);
        let (a, b) = (be("a", 0, 1), be("b", 0, 2));
        l.request(a.clone()).unwrap();
        l.request(b.clone()).unwrap();
        // A premium flow into n1 leaves 21.8 MB/s there, so `a` is held to 21.8.
        l.request(Flow::premium("p", NodeId(3), NodeId(1), mbs(60.0)))
            .unwrap();
        let t = thesis_rule(&l);
        assert_eq!((rate_of(&t, &a), rate_of(&t, &b)), (mbs(21.8), mbs(40.9)));
        let m = max_min(&l);
        assert_eq!((rate_of(&m, &a), rate_of(&m, &b)), (mbs(21.8), mbs(60.0)));
    }

    #[test]
    fn max_min_follows_the_weights() {
        let mut l = ledger(3);
        let a = be("a", 0, 1);
        let mut b = be("b", 0, 2);
        b.class = Class::BestEffort { weight: Weight(3) };
        l.request(a.clone()).unwrap();
        l.request(b.clone()).unwrap();
        let m = max_min(&l);
        assert_eq!((rate_of(&m, &a), rate_of(&m, &b)), (mbs(20.45), mbs(61.35)));
        // The thesis rule ignores weights.
        assert_eq!(rate_of(&thesis_rule(&l), &b), mbs(40.9));
    }

    #[test]
    fn a_full_resource_stops_best_effort_flows_with_no_idt() {
        let mut l = ledger(3);
        let f = be("be", 0, 1);
        l.request(f.clone()).unwrap();
        l.request(Flow::premium("p", NodeId(0), NodeId(2), mbs(81.8)))
            .unwrap();
        for s in [thesis_rule(&l), max_min(&l)] {
            assert_eq!(s[0].rate, Bandwidth::ZERO);
            assert_eq!(s[0].idt, None);
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Premium(u32, u32, u8, u32),
        BestEffort(u32, u32, u8, u32),
        Release(usize),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            2 => (0u32..64, 0u32..64, 0u8..3, 1u32..60).prop_map(|(a, b, p, m)| Op::Premium(a, b, p, m)),
            3 => (0u32..64, 0u32..64, 0u8..3, 1u32..5).prop_map(|(a, b, p, w)| Op::BestEffort(a, b, p, w)),
            1 => (0usize..64).prop_map(Op::Release),
        ];
        proptest::collection::vec(op, 1..60)
    }

    fn topologies() -> Vec<Arc<Topology>> {
        let d = HostDefaults::thesis();
        vec![
            Arc::new(cascade(2, 3, &d, mbs(100.0)).unwrap().build().unwrap()),
            Arc::new(mesh(3, &d).unwrap().build().unwrap()),
        ]
    }

    /// Applies `ops`, calling `check` after each one.
    fn replay(t: Arc<Topology>, ops: &[Op], mut check: impl FnMut(&mut Ledger)) {
        let n = t.nodes().len() as u32;
        let mut l = Ledger::new(t);
        let mut held = Vec::new();
        for op in ops {
            let flow = match *op {
                Op::Premium(a, b, p, m) => Some((
                    Flow::premium("p", NodeId(a % n), NodeId(b % n), mbs(m as f64)),
                    p,
                )),
                Op::BestEffort(a, b, p, w) => {
                    let mut f = be("b", a % n, b % n);
                    f.class = Class::BestEffort { weight: Weight(w) };
                    Some((f, p))
                }
                Op::Release(i) => {
                    if !held.is_empty() {
                        let k = held.swap_remove(i % held.len());
                        l.release(&k).unwrap();
                    }
                    None
                }
            };
            if let Some((mut f, p)) = flow {
                f.key.priority = p;
                if let Ok(g) = l.request(f) {
                    held.push(g.key);
                }
            }
            check(&mut l);
        }
    }

    /// Σ rate·cost per resource, in milli-bytes/s.
    fn loads(l: &Ledger, shares: &[Share]) -> Vec<u128> {
        let mut load = vec![0u128; l.resource_count()];
        for s in shares {
            for u in &l.get(&s.key).unwrap().uses {
                load[u.resource.0 as usize] += s.rate.bytes_per_sec() as u128 * u.cost as u128;
            }
        }
        load
    }

    fn assert_feasible(l: &Ledger, shares: &[Share]) {
        assert_eq!(shares.len(), l.best_effort_count());
        for (r, &x) in loads(l, shares).iter().enumerate() {
            if let Some(s) = l.surplus_milli(ResourceId(r as u32)) {
                assert!(
                    x <= s as u128,
                    "{} over its surplus",
                    l.label(ResourceId(r as u32))
                );
            }
        }
        for s in shares {
            let bmax = l.topology().node(s.key.src.node).rate.bmax;
            assert!(s.rate <= bmax, "above Bmax");
        }
    }

    fn w(l: &Ledger, s: &Share) -> u128 {
        match l.get(&s.key).unwrap().flow.class {
            Class::BestEffort { weight } => weight.0 as u128,
            Class::Premium { .. } => unreachable!(),
        }
    }

    /// Every flow is at Bmax or has a saturated resource on its path on which its
    /// rate per unit of weight is the largest (up to the rounding of rates to whole
    /// bytes/s).
    fn assert_max_min_fair(l: &Ledger, shares: &[Share]) {
        let load = loads(l, shares);
        let by_key: HashMap<FlowKey, &Share> = shares.iter().map(|s| (s.key, s)).collect();
        for s in shares {
            if s.rate == l.topology().node(s.key.src.node).rate.bmax {
                continue;
            }
            let e = l.get(&s.key).unwrap();
            let ok = e.uses.iter().any(|u| {
                let r = u.resource;
                let on: Vec<&Share> = l.best_effort_on(r).map(|o| by_key[&o.flow.key]).collect();
                let slack: u128 = l
                    .best_effort_on(r)
                    .map(|o| {
                        let c = o.uses.iter().find(|x| x.resource == r).unwrap().cost;
                        c as u128 * (w(l, by_key[&o.flow.key]) + 1)
                    })
                    .sum();
                let saturated = load[r.0 as usize] + slack >= l.surplus_milli(r).unwrap() as u128;
                // s.rate / w(s) >= o.rate / w(o) - 1, cross-multiplied.
                let maximal = on.iter().all(|o| {
                    (s.rate.bytes_per_sec() as u128 + w(l, s)) * w(l, o)
                        >= o.rate.bytes_per_sec() as u128 * w(l, s)
                });
                saturated && maximal
            });
            assert!(ok, "flow {:?} at {} has no bottleneck", s.key, s.rate);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn best_effort_shares_never_exceed_the_surplus(ops in ops()) {
            for t in topologies() {
                replay(t, &ops, |l| {
                    assert_feasible(l, &thesis_rule(l));
                    assert_feasible(l, &max_min(l));
                });
            }
        }

        #[test]
        fn max_min_shares_are_feasible_and_every_flow_has_a_bottleneck(ops in ops()) {
            for t in topologies() {
                replay(t, &ops, |l| {
                    let m = max_min(l);
                    assert_feasible(l, &m);
                    assert_max_min_fair(l, &m);
                });
            }
        }

        #[test]
        fn incremental_thesis_shares_match_a_full_recomputation(ops in ops()) {
            for t in topologies() {
                let mut inc = ThesisShares::new();
                replay(t, &ops, |l| {
                    inc.update(l);
                    let full = thesis_rule(l);
                    assert_eq!(inc.iter().count(), full.len());
                    for s in &full {
                        assert_eq!(inc.get(&s.key), Some(s));
                    }
                });
            }
        }
    }
}
