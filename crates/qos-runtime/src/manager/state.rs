//! The master's in-memory state (thesis §3.3, §4.3): the reservation ledger of
//! `qos-core`, who owns each flow, the current best-effort shares, and what each
//! decision changes in the IDT table of every agent.
//!
//! Every decision goes through `qos_core::admission` (the three criteria, IDT =
//! T·Bmax/B_req) and `qos_core::besteffort` (thesis rule or weighted max-min); this
//! module only translates the wire's names into the core's ids and keeps the books.
//! It does no I/O and reads no clock: callers pass `now`, so it is tested directly.
//! Who may speak for a node and whose leases ran out is in [`liveness`]; who owns a
//! source port in [`ports`].

mod liveness;
mod ports;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

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
    /// The books' version after this change ([`State::version`]): a stream re-synced
    /// from a snapshot of version v skips changes of version ≤ v.
    pub version: u64,
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
    /// The agent instance now holding a node (by name), kept across master restarts
    /// so that a restarted master gives the node back to it.
    Holder(String, u64),
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
    /// Per node, the agent process speaking for it.
    agent_instance: Vec<Option<liveness::Holder>>,
    /// Per owner on a node: when it was last heard from and how many flows it holds.
    client_seen: HashMap<(NodeId, Owner), liveness::ClientLease>,
    /// Who holds each source port that has flows.
    ports: ports::PortHolders,
    next_id: i64,
    /// Incremented by every change of the flows or shares.
    version: u64,
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
            ports: ports::PortHolders::default(),
            next_id: 1,
            version: 0,
        }
    }

    /// The books' version: how many changes of flows or shares they have seen.
    pub fn version(&self) -> u64 {
        self.version
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

    /// Decides `req` from the agent of node `agent` at `now`: validates it at the
    /// edge, checks that the requesting uid may use the source port, asks the ledger,
    /// recomputes best-effort shares, and says what changed. A grant starts its
    /// owner's lease afresh at `now`.
    pub fn request(
        &mut self,
        agent: &str,
        req: FlowRequest,
        now: Instant,
    ) -> Result<Outcome, WireError> {
        self.admit(agent, req, now, true)
    }

    fn admit(
        &mut self,
        agent: &str,
        req: FlowRequest,
        now: Instant,
        check_port: bool,
    ) -> Result<Outcome, WireError> {
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
        if check_port {
            self.ports
                .check(&self.topo, key.src, req.owner.uid)
                .map_err(|e| WireError::new(ErrorCode::NotOwner, e))?;
        }
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
        self.ports.add(key.src, req.owner.uid);
        self.lease_granted(key.src.node, req.owner, now);
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
        self.ports.remove(key.src, row.owner.uid);
        self.lease_released(key.src.node, row.owner);
        let mut changes = self.reshare();
        changes.remove(&row.spec.src.node, row.spec.clone());
        (DbOp::Delete(row.id, row.spec), changes)
    }

    /// Re-admits a flow read back from the database at start-up (`now`: the start).
    /// A flow that no longer fits (the topology changed) is refused with the reason.
    pub fn restore(&mut self, row: FlowRow, now: Instant) -> Result<(), WireError> {
        // Later grants number after every stored row, kept or dropped.
        self.next_id = self.next_id.max(row.id + 1);
        let agent = row.spec.src.node.clone();
        // Port ownership is not re-checked: the rows were granted under the rules of
        // their time.
        let out = self.admit(
            &agent,
            FlowRequest {
                flow: row.spec.clone(),
                name: Some(row.name.clone()),
                class: row.class,
                owner: row.owner,
            },
            now,
            false,
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

    /// Recomputes best-effort shares and returns the rows that changed, stamped with
    /// the books' new version.
    fn reshare(&mut self) -> Changes {
        self.version += 1;
        let mut changes = Changes {
            version: self.version,
            ..Changes::default()
        };
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
