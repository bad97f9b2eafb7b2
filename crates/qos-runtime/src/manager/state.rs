//! The master's in-memory state (thesis §3.3, §4.3): the reservation ledger of
//! `qos-core`, who owns each flow, the current best-effort shares, and what each
//! decision changes in the IDT table of every agent.
//!
//! Every decision goes through `qos_core::admission` (the three criteria, IDT =
//! T·Bmax/B_req) and `qos_core::besteffort` (thesis rule or weighted max-min); this
//! module keeps the books. Requests come in checked ([`AdmissionRequest`], built at
//! the edge from the protocol's request); refusals go out typed ([`BooksError`],
//! [`Refusal`]) for the HTTP layer to render.
//! It does no I/O and reads no clock: callers pass `now`, so it is tested directly.
//! Who may speak for a node and whose leases ran out is in [`liveness`]; who owns a
//! source port in [`ports`].

mod changes;
mod error;
mod job;
mod jobs;
mod lease;
mod liveness;
mod ports;
mod refusal;
mod request;

pub use changes::{Changes, DbOp, FlowRow, JobOutcome, JobVerdict, Outcome, Snapshot, Verdict};
pub use error::BooksError;
pub use job::{prepare as prepare_job, shortfall, HeldJob, JobRecord, PreparedJob};
pub use refusal::Refusal;
pub use request::{core_class, flow_key, node_id, AdmissionRequest};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use qos_core::admission::{AdmitError, Ledger, Resource};
use qos_core::besteffort::{self, Policy, Share, ThesisShares};
use qos_core::flow::FlowKey;
use qos_core::topology::{NodeId, Topology};
use qos_core::units::Duration;

use crate::protocol::{
    ClassSpec, FlowRequest, FlowSpec, IdtEntry, Owner, ResourceStatus, StatusReport,
};

/// The master's books.
#[derive(Debug)]
pub struct State {
    topo: Arc<Topology>,
    ledger: Ledger,
    policy: Policy,
    thesis: ThesisShares,
    shares: HashMap<FlowKey, Share>,
    rows: HashMap<FlowKey, FlowRow>,
    /// Each premium flow's IDT, as the ledger computed it when it admitted the flow.
    idts: HashMap<FlowKey, Duration>,
    /// Job reservations, by id.
    jobs: HashMap<String, HeldJob>,
    by_node: Vec<HashSet<FlowKey>>,
    agent_seen: Vec<Option<Instant>>,
    /// Per node, the agent process speaking for it.
    agent_instance: Vec<Option<lease::Holder>>,
    /// Per owner on a node: when it was last heard from and how many flows it holds.
    client_seen: HashMap<(NodeId, Owner), lease::ClientLease>,
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
            idts: HashMap::new(),
            jobs: HashMap::new(),
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

    /// A node's id by name.
    pub fn node(&self, name: &str) -> Result<NodeId, BooksError> {
        request::node_id(&self.topo, name)
    }

    /// The core's key for a wire flow (nodes must exist).
    pub fn key(&self, f: &FlowSpec) -> Result<FlowKey, BooksError> {
        request::flow_key(&self.topo, f)
    }

    /// Decides a checked request at `now`: checks that the requesting uid may use the
    /// source port, asks the ledger, recomputes best-effort shares, and says what
    /// changed. A grant starts its owner's lease afresh at `now` and carries the IDT
    /// the ledger computed.
    pub fn request(&mut self, req: AdmissionRequest, now: Instant) -> Result<Outcome, BooksError> {
        self.admit(req, now, true)
    }

    fn admit(
        &mut self,
        req: AdmissionRequest,
        now: Instant,
        check_port: bool,
    ) -> Result<Outcome, BooksError> {
        let key = req.flow.key;
        if check_port {
            self.ports
                .check(&self.topo, key.src, req.owner.uid)
                .map_err(BooksError::NotOwner)?;
        }
        let name = req.flow.name.clone();
        let premium = req.is_premium();
        let grant = match self.ledger.request(req.flow) {
            Ok(g) => g,
            Err(AdmitError::Rejected(r)) => {
                return Ok(Outcome::rejected(Refusal::Resource(*r)));
            }
            Err(e @ AdmitError::AboveBmax { .. }) => {
                let bmax = self.topo.node(key.src.node).rate.bmax;
                return Ok(Outcome::rejected(Refusal::AboveBmax {
                    node: req.spec.src.node.clone(),
                    requested: match req.class {
                        ClassSpec::Premium { bandwidth } => bandwidth,
                        ClassSpec::BestEffort { .. } => 0,
                    },
                    bmax: bmax.bytes_per_sec(),
                    message: e.to_string(),
                }));
            }
            Err(e @ AdmitError::Duplicate { .. }) => {
                return Err(BooksError::Conflict(e.to_string()))
            }
            Err(e) => return Err(BooksError::Invalid(e.to_string())),
        };
        let row = FlowRow {
            id: self.next_id,
            spec: req.spec,
            name,
            class: req.class,
            owner: req.owner,
        };
        self.next_id += 1;
        if let Some(idt) = grant.idt {
            self.idts.insert(key, idt);
        }
        self.rows.insert(key, row.clone());
        self.by_node[key.src.node.0 as usize].insert(key);
        self.ports.add(key.src, req.owner.uid);
        self.lease_granted(key.src.node, req.owner, now);
        let mut changes = self.reshare();
        let entry = self.entry(&key).expect("flow just granted");
        if premium {
            changes.upsert(&row.spec.src.node, entry.clone());
        }
        Ok(Outcome {
            decision: Verdict::Granted(entry),
            db: Some(DbOp::Insert(row)),
            changes,
        })
    }

    /// Releases `flow` for `owner` through the agent of node `agent`: only the source
    /// node's agent, and only a process of the owner's uid, may release it.
    pub fn release(
        &mut self,
        agent: &str,
        flow: &FlowSpec,
        by: Owner,
    ) -> Result<(DbOp, Changes), BooksError> {
        let key = self.key(flow)?;
        let row = self
            .rows
            .get(&key)
            .ok_or_else(|| BooksError::UnknownFlow(flow.clone()))?;
        if flow.src.node != agent || row.owner.uid != by.uid {
            return Err(BooksError::NotOwner(format!(
                "flow {flow} belongs to uid {} on node '{}'; uid {} on node '{agent}' may not release it",
                row.owner.uid, row.spec.src.node, by.uid
            )));
        }
        Ok(self.remove(key))
    }

    /// Removes a flow the books hold (release or lease expiry).
    fn remove(&mut self, key: FlowKey) -> (DbOp, Changes) {
        let row = self.rows.remove(&key).expect("caller checked");
        self.ledger.release(&key).expect("ledger and rows agree");
        self.by_node[key.src.node.0 as usize].remove(&key);
        self.shares.remove(&key);
        self.idts.remove(&key);
        self.ports.remove(key.src, row.owner.uid);
        self.lease_released(key.src.node, row.owner);
        let mut changes = self.reshare();
        changes.remove(&row.spec.src.node, row.spec.clone());
        (DbOp::Delete(row.id, row.spec), changes)
    }

    /// Re-admits a flow read back from the database at start-up (`now`: the start).
    /// A flow that no longer fits (the topology changed) is refused with the reason.
    pub fn restore(&mut self, row: FlowRow, now: Instant) -> Result<(), BooksError> {
        // Later grants number after every stored row, kept or dropped.
        self.next_id = self.next_id.max(row.id + 1);
        let agent = row.spec.src.node.clone();
        let req = AdmissionRequest::check(
            &self.topo,
            &agent,
            FlowRequest {
                flow: row.spec.clone(),
                name: Some(row.name.clone()),
                class: row.class,
                owner: row.owner,
            },
        )?;
        // Port ownership is not re-checked: the rows were granted under the rules of
        // their time.
        let out = self.admit(req, now, false)?;
        match out.decision {
            Verdict::Granted(_) => {
                // The row keeps its stored id.
                let key = self.key(&row.spec)?;
                if let Some(r) = self.rows.get_mut(&key) {
                    r.id = row.id;
                }
                Ok(())
            }
            Verdict::Rejected(r) => Err(BooksError::Conflict(r.to_string())),
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
        let (rate, idt, weight, class) = match row.class {
            ClassSpec::Premium { bandwidth } => {
                (bandwidth, self.idts.get(key).copied(), 0, "premium")
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

    /// `node`'s whole table for its agent's event stream: its flows, the jobs it
    /// follows, and the books' version.
    pub fn node_snapshot(&self, node: (NodeId, &str)) -> Snapshot {
        Snapshot {
            flows: self.snapshot(node.0),
            jobs: self.node_jobs(node.1),
            version: self.version,
        }
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

#[cfg(test)]
mod job_tests;
#[cfg(test)]
mod tests;
