//! The master's in-memory state (thesis §3.3, §4.3): the reservation ledger of
//! `qos-core`, who owns each flow, the current best-effort shares, and what each
//! decision changes in the IDT table of every agent.
//!
//! Every decision goes through `qos_core::admission` (the three criteria, IDT =
//! T·Bmax/B_req) and `qos_core::besteffort` (thesis rule or weighted max-min); this
//! module only translates the wire's names into the core's ids and keeps the books.
//! It does no I/O and reads no clock: callers pass `now`, so it is tested directly.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use qos_core::admission::{idt_for, AdmitError, Ledger, Resource};
use qos_core::besteffort::{self, Policy, Share, ThesisShares};
use qos_core::flow::{Class, Endpoint, Flow, FlowKey, Weight};
use qos_core::topology::{NodeId, Topology};
use qos_core::units::Bandwidth;

use crate::protocol::{
    check_name, ClassSpec, Decision, EndpointSpec, ErrorCode, FlowRequest, FlowSpec, IdtEntry,
    Owner, RejectionInfo, ResourceStatus, StatusReport, WireError,
};

/// A flow as the master keeps it besides the ledger: its wire form and its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRow {
    /// The database row id: granted flows are numbered in grant order, so inserts
    /// append to the table and deletes find their row by id (no secondary index).
    pub id: i64,
    /// The flow's identity, with node names.
    pub spec: FlowSpec,
    /// Name for people.
    pub name: String,
    /// Premium or best-effort.
    pub class: ClassSpec,
    /// The owning process.
    pub owner: Owner,
}

/// What a change does to the agents' IDT tables: per source node, rows to upsert and
/// flows to remove. Pushed only to the nodes listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Per node (by name): (upserts, removals).
    pub per_node: BTreeMap<String, (Vec<IdtEntry>, Vec<FlowSpec>)>,
}

impl Changes {
    fn upsert(&mut self, node: &str, e: IdtEntry) {
        self.per_node.entry(node.to_string()).or_default().0.push(e);
    }
    fn remove(&mut self, node: &str, f: FlowSpec) {
        self.per_node.entry(node.to_string()).or_default().1.push(f);
    }
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.per_node.is_empty()
    }
}

/// A durable change to write before acknowledging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbOp {
    /// A granted flow.
    Insert(FlowRow),
    /// A released flow: its row id, and its identity for the log.
    Delete(i64, FlowSpec),
}

/// The outcome of a request: the decision, what to write, what to push.
#[derive(Debug)]
pub struct Outcome {
    /// Granted or rejected.
    pub decision: Decision,
    /// Nothing for a rejection.
    pub db: Option<DbOp>,
    /// IDT table changes.
    pub changes: Changes,
}

/// The master's books.
#[derive(Debug)]
pub struct State {
    topo: Arc<Topology>,
    ledger: Ledger,
    policy: Policy,
    thesis: ThesisShares,
    shares: HashMap<FlowKey, Share>,
    rows: HashMap<FlowKey, FlowRow>,
    by_node: Vec<HashSet<FlowKey>>,
    agent_seen: Vec<Option<Instant>>,
    /// Per node, the agent process speaking for it (its instance number) and when it
    /// was last heard from.
    agent_instance: Vec<Option<(u64, Instant)>>,
    client_seen: HashMap<(NodeId, Owner), Instant>,
    next_id: i64,
}

impl State {
    /// Empty books over `topo`, sharing the surplus by `policy`.
    pub fn new(topo: Arc<Topology>, policy: Policy) -> Self {
        let n = topo.nodes().len();
        State {
            ledger: Ledger::new(topo.clone()),
            topo,
            policy,
            thesis: ThesisShares::new(),
            shares: HashMap::new(),
            rows: HashMap::new(),
            by_node: vec![HashSet::new(); n],
            agent_seen: vec![None; n],
            agent_instance: vec![None; n],
            client_seen: HashMap::new(),
            next_id: 1,
        }
    }

    /// The topology.
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }

    /// The best-effort policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Number of flows held.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no flow is held.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// A node's id by name, or a `not_found` error.
    pub fn node(&self, name: &str) -> Result<NodeId, WireError> {
        self.topo.node_id(name).ok_or_else(|| {
            WireError::new(
                ErrorCode::NotFound,
                format!("no node '{name}' in the topology"),
            )
        })
    }

    fn endpoint(&self, e: &EndpointSpec) -> Result<Endpoint, WireError> {
        Ok(Endpoint {
            node: self.node(&e.node)?,
            port: e.port,
        })
    }

    /// The core's key for a wire flow (nodes must exist).
    pub fn key(&self, f: &FlowSpec) -> Result<FlowKey, WireError> {
        f.validate()?;
        Ok(FlowKey {
            src: self.endpoint(&f.src)?,
            dst: self.endpoint(&f.dst)?,
            priority: f.priority,
        })
    }

    /// Decides `req` from the agent of node `agent`: validates it at the edge, asks
    /// the ledger, recomputes best-effort shares, and says what changed.
    pub fn request(&mut self, agent: &str, req: FlowRequest) -> Result<Outcome, WireError> {
        req.class.validate()?;
        if let Some(n) = &req.name {
            check_name("flow name", n)?;
        }
        if req.flow.src.node != agent {
            return Err(WireError::new(
                ErrorCode::BadRequest,
                format!(
                    "the agent of node '{agent}' may only request flows sourced at '{agent}', not at '{}'",
                    req.flow.src.node
                ),
            ));
        }
        let key = self.key(&req.flow)?;
        let name = req.name.clone().unwrap_or_else(|| req.flow.to_string());
        let class = match req.class {
            ClassSpec::Premium { bandwidth } => Class::Premium {
                bandwidth: Bandwidth::from_bytes_per_sec(bandwidth),
            },
            ClassSpec::BestEffort { weight } => Class::BestEffort {
                weight: Weight(weight),
            },
        };
        let flow = Flow {
            key,
            name: name.clone(),
            class,
        };
        match self.ledger.request(flow) {
            Ok(_) => {}
            Err(AdmitError::Rejected(r)) => {
                let info = RejectionInfo {
                    criterion: r.criterion.number(),
                    criterion_name: serde_json::to_value(r.criterion)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    resource: r.resource.clone(),
                    reserved: r.reserved.bytes_per_sec(),
                    requested: r.requested.bytes_per_sec(),
                    capacity: r.capacity.bytes_per_sec(),
                    message: r.to_string(),
                };
                return Ok(self.rejected(info));
            }
            Err(e @ AdmitError::AboveBmax { .. }) => {
                let bmax = self.topo.node(key.src.node).rate.bmax.bytes_per_sec();
                let info = RejectionInfo {
                    criterion: 0,
                    criterion_name: "bmax".into(),
                    resource: format!("node {} nic", req.flow.src.node),
                    reserved: 0,
                    requested: match req.class {
                        ClassSpec::Premium { bandwidth } => bandwidth,
                        ClassSpec::BestEffort { .. } => 0,
                    },
                    capacity: bmax,
                    message: e.to_string(),
                };
                return Ok(self.rejected(info));
            }
            Err(e @ AdmitError::Duplicate { .. }) => {
                return Err(WireError::new(ErrorCode::Conflict, e.to_string()))
            }
            Err(e) => return Err(WireError::new(ErrorCode::BadRequest, e.to_string())),
        }
        let row = FlowRow {
            id: self.next_id,
            spec: req.flow.clone(),
            name,
            class: req.class,
            owner: req.owner,
        };
        self.next_id += 1;
        self.rows.insert(key, row.clone());
        self.by_node[key.src.node.0 as usize].insert(key);
        self.client_seen
            .entry((key.src.node, req.owner))
            .or_insert_with(Instant::now);
        let mut changes = self.reshare();
        let entry = self.entry(&key).expect("flow just granted");
        if req.class_is_premium() {
            changes.upsert(&row.spec.src.node, entry.clone());
        }
        Ok(Outcome {
            decision: Decision::Granted(entry),
            db: Some(DbOp::Insert(row)),
            changes,
        })
    }

    fn rejected(&self, info: RejectionInfo) -> Outcome {
        Outcome {
            decision: Decision::Rejected(info),
            db: None,
            changes: Changes::default(),
        }
    }

    /// Releases `flow` for `owner` through the agent of node `agent`: only the source
    /// node's agent, and only a process of the owner's uid, may release it.
    pub fn release(
        &mut self,
        agent: &str,
        flow: &FlowSpec,
        by: Owner,
    ) -> Result<(DbOp, Changes), WireError> {
        let key = self.key(flow)?;
        let row = self
            .rows
            .get(&key)
            .ok_or_else(|| WireError::new(ErrorCode::NotFound, format!("no such flow: {flow}")))?;
        if flow.src.node != agent || row.owner.uid != by.uid {
            return Err(WireError::new(
                ErrorCode::NotOwner,
                format!(
                    "flow {flow} belongs to uid {} on node '{}'; uid {} on node '{agent}' may not release it",
                    row.owner.uid, row.spec.src.node, by.uid
                ),
            ));
        }
        Ok(self.remove(key))
    }

    /// Removes a flow the books hold (release or lease expiry).
    fn remove(&mut self, key: FlowKey) -> (DbOp, Changes) {
        let row = self.rows.remove(&key).expect("caller checked");
        self.ledger.release(&key).expect("ledger and rows agree");
        self.by_node[key.src.node.0 as usize].remove(&key);
        self.shares.remove(&key);
        let mut changes = self.reshare();
        changes.remove(&row.spec.src.node, row.spec.clone());
        (DbOp::Delete(row.id, row.spec), changes)
    }

    /// Re-admits a flow read back from the database at start-up. A flow that no
    /// longer fits (the topology changed) is refused with the reason.
    pub fn restore(&mut self, row: FlowRow) -> Result<(), WireError> {
        // Later grants number after every stored row, kept or dropped.
        self.next_id = self.next_id.max(row.id + 1);
        let agent = row.spec.src.node.clone();
        let out = self.request(
            &agent,
            FlowRequest {
                flow: row.spec.clone(),
                name: Some(row.name.clone()),
                class: row.class,
                owner: row.owner,
            },
        )?;
        match out.decision {
            Decision::Granted(_) => {
                // The row keeps its stored id.
                let key = self.key(&row.spec)?;
                if let Some(r) = self.rows.get_mut(&key) {
                    r.id = row.id;
                }
                Ok(())
            }
            Decision::Rejected(r) => Err(WireError::new(ErrorCode::Conflict, r.message)),
        }
    }

    /// Recomputes best-effort shares and returns the rows that changed.
    fn reshare(&mut self) -> Changes {
        let mut changes = Changes::default();
        let changed: Vec<Share> = match self.policy {
            Policy::Thesis => self.thesis.update(&mut self.ledger),
            Policy::MaxMin => {
                self.ledger.take_changed();
                if self.ledger.best_effort_count() == 0 {
                    Vec::new()
                } else {
                    besteffort::allocate(&self.ledger, Policy::MaxMin)
                        .into_iter()
                        .filter(|s| self.shares.get(&s.key) != Some(s))
                        .collect()
                }
            }
        };
        for s in changed {
            let key = s.key;
            self.shares.insert(key, s);
            if let Some(e) = self.entry(&key) {
                let node = self.topo.node(key.src.node).name.clone();
                changes.upsert(&node, e);
            }
        }
        changes
    }

    /// A flow's IDT-table row.
    pub fn entry(&self, key: &FlowKey) -> Option<IdtEntry> {
        let row = self.rows.get(key)?;
        let rp = self.topo.node(key.src.node).rate;
        let (rate, idt, weight, class) = match row.class {
            ClassSpec::Premium { bandwidth } => {
                let b = Bandwidth::from_bytes_per_sec(bandwidth);
                (bandwidth, idt_for(rp, b), 0, "premium")
            }
            ClassSpec::BestEffort { weight } => match self.shares.get(key) {
                Some(s) => (s.rate.bytes_per_sec(), s.idt, weight, "best_effort"),
                None => (0, None, weight, "best_effort"),
            },
        };
        Some(IdtEntry {
            flow: row.spec.clone(),
            name: row.name.clone(),
            class: class.into(),
            rate,
            idt_ps: idt.map(|d| d.as_ps()),
            weight,
            owner: row.owner,
        })
    }

    /// Every flow sourced at `node`: the agent's whole table.
    pub fn snapshot(&self, node: NodeId) -> Vec<IdtEntry> {
        let mut v: Vec<IdtEntry> = self.by_node[node.0 as usize]
            .iter()
            .filter_map(|k| self.entry(k))
            .collect();
        v.sort_by(|a, b| a.flow.cmp(&b.flow));
        v
    }

    /// Every flow.
    pub fn all_flows(&self) -> Vec<IdtEntry> {
        let mut v: Vec<IdtEntry> = self.rows.keys().filter_map(|k| self.entry(k)).collect();
        v.sort_by(|a, b| a.flow.cmp(&b.flow));
        v
    }

    // -----------------------------------------------------------------------------------
    // liveness
    // -----------------------------------------------------------------------------------

    /// Lets the agent process `instance` speak for `node`. Each agent names itself with
    /// a random instance number; while one instance has been heard from within
    /// `takeover` and holds the node's event stream (`holder_streaming`), another is
    /// refused, so two agents configured with the same node cannot both take its IDT
    /// pushes. A holder that crashed goes quiet and loses the node after `takeover`.
    /// Calls that name no instance (tools, older agents) are not checked.
    pub fn claim(
        &mut self,
        node: NodeId,
        instance: Option<u64>,
        now: Instant,
        takeover: StdDuration,
        holder_streaming: bool,
    ) -> Result<(), WireError> {
        let Some(me) = instance else { return Ok(()) };
        let slot = &mut self.agent_instance[node.0 as usize];
        if let Some((holder, seen)) = *slot {
            if holder != me {
                let quiet = now.saturating_duration_since(seen);
                if quiet < takeover && holder_streaming {
                    return Err(WireError::new(
                        ErrorCode::Conflict,
                        format!(
                            "node '{}' already has a live agent (instance {holder:016x}, heard from {} ms ago); \
                             stop it, or wait {} ms after it goes quiet",
                            self.topo.node(node).name,
                            quiet.as_millis(),
                            takeover.as_millis()
                        ),
                    ));
                }
                tracing::warn!(node = %self.topo.node(node).name, old = holder, new = me, "agent instance replaced");
            }
        }
        *slot = Some((me, now));
        Ok(())
    }

    /// The agent of `node` was heard from at `now`.
    pub fn touch_agent(&mut self, node: NodeId, now: Instant) {
        self.agent_seen[node.0 as usize] = Some(now);
    }

    /// The agent of `node` reports these owners alive at `now`.
    pub fn touch_clients(&mut self, node: NodeId, live: &[Owner], now: Instant) {
        self.touch_agent(node, now);
        for o in live {
            if let Some(t) = self.client_seen.get_mut(&(node, *o)) {
                *t = now;
            }
        }
    }

    /// Starts every lease afresh (after a restart: agents get a full lease to return).
    pub fn reset_leases(&mut self, now: Instant) {
        for t in self.agent_seen.iter_mut() {
            *t = Some(now);
        }
        for t in self.client_seen.values_mut() {
            *t = now;
        }
    }

    /// Releases every flow whose owner, or whose node's agent, has been silent longer
    /// than `lease`; returns what to write and push, one entry per flow.
    pub fn expire(&mut self, now: Instant, lease: StdDuration) -> Vec<(DbOp, Changes)> {
        let stale = |t: Option<&Instant>| match t {
            Some(t) => now.saturating_duration_since(*t) > lease,
            None => true,
        };
        let dead: Vec<FlowKey> = self
            .rows
            .iter()
            .filter(|(k, row)| {
                stale(self.agent_seen[k.src.node.0 as usize].as_ref())
                    || stale(self.client_seen.get(&(k.src.node, row.owner)))
            })
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::with_capacity(dead.len());
        for k in dead {
            out.push(self.remove(k));
        }
        if !out.is_empty() {
            let owners: HashSet<(NodeId, Owner)> = self
                .rows
                .iter()
                .map(|(k, r)| (k.src.node, r.owner))
                .collect();
            self.client_seen.retain(|c, _| owners.contains(c));
        }
        out
    }

    // -----------------------------------------------------------------------------------
    // status
    // -----------------------------------------------------------------------------------

    /// Per node and per switch port: capacity, reserved, best-effort and free.
    pub fn status(&self) -> StatusReport {
        let n = self.ledger.resource_count();
        let mut be = vec![0u64; n];
        for s in self.shares.values() {
            if let Some(e) = self.ledger.get(&s.key) {
                for u in &e.uses {
                    be[u.resource.0 as usize] += s.rate.bytes_per_sec() * u.cost as u64 / 1000;
                }
            }
        }
        let mut resources = Vec::with_capacity(n);
        for (i, &best_effort) in be.iter().enumerate() {
            let r = qos_core::admission::ResourceId(i as u32);
            let (kind, name, direction) = match self.ledger.resource(r) {
                Resource::NodeSend(id) => ("node", self.topo.node(id).name.clone(), "send"),
                Resource::NodeReceive(id) => ("node", self.topo.node(id).name.clone(), "receive"),
                Resource::NodeCombined(id) => ("node", self.topo.node(id).name.clone(), "combined"),
                Resource::Port(p) => {
                    if self.topo.port(p).is_none() {
                        continue;
                    }
                    (
                        "port",
                        format!("{}/{}", self.topo.switch(p.switch).name, p.port),
                        "out",
                    )
                }
            };
            let capacity = self.ledger.capacity(r).map(|b| b.bytes_per_sec());
            let reserved = self.ledger.reserved(r).bytes_per_sec();
            resources.push(ResourceStatus {
                kind: kind.into(),
                name,
                direction: direction.into(),
                capacity,
                reserved,
                best_effort,
                free: capacity.map(|c| c.saturating_sub(reserved).saturating_sub(best_effort)),
            });
        }
        let premium = self
            .rows
            .values()
            .filter(|r| matches!(r.class, ClassSpec::Premium { .. }))
            .count();
        StatusReport {
            policy: match self.policy {
                Policy::Thesis => "thesis".into(),
                Policy::MaxMin => "max-min".into(),
            },
            premium_flows: premium,
            best_effort_flows: self.rows.len() - premium,
            resources,
        }
    }
}

impl FlowRequest {
    fn class_is_premium(&self) -> bool {
        matches!(self.class, ClassSpec::Premium { .. })
    }
}

#[cfg(test)]
mod tests;
