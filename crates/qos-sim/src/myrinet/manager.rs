//! The bandwidth resource manager inside the simulation (thesis §3.3, §4.3): one local
//! manager per node and a master.
//!
//! An application's allocate call is blocking: its local manager forwards the request
//! to the master (one control latency), the master decides with `qos_core`'s admission
//! ledger (criteria of §3.3.1, IDT = T·Bmax/B_req) and recomputes the best-effort shares
//! (`qos_core::besteffort`, thesis rule of §4.3), then sends the decision back to the
//! requester and every new IDT to the local manager of the node whose NIC sources the
//! flow (one control latency each), which writes it into the NIC. The application
//! starts sending when its answer arrives. Releases travel the same way and also
//! trigger a best-effort recomputation. The master's own computing time is neglected
//! (assumption); only the messages cost time.
//!
//! [`Manager`] is a component: requests and releases come in from the hosts, control
//! messages it scheduled come back through [`Manager::deliver`], and it answers with
//! [`ManagerOutput`]s (messages to schedule, answers for the applications, IDTs for
//! the NICs).

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use qos_core::admission::Ledger;
use qos_core::besteffort::ThesisShares;
use qos_core::flow::{Class, Endpoint, Flow, FlowKey as LedgerKey, Weight};
use qos_core::topology::{NodeId, Topology};
use qos_core::units::Duration;
use qos_core::units::Time;

use super::flow::{FlowSpec, Rate};
use super::ids::{AppId, FlowKey};

/// IDT given to a best-effort flow whose share is zero: it must not send.
pub const STOPPED_IDT: Duration = Duration::from_secs(1);

/// A control message in flight (an index into the manager's mailbox).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgId(pub u32);

#[derive(Debug, Clone)]
enum Msg {
    /// Local manager → master: allocate for an application.
    Request(AppId),
    /// Local manager → master: release an application.
    Release(AppId),
    /// Master → requester's local manager: the decision.
    Answer { app: AppId, granted: bool },
    /// Master → a source node's local manager: new IDT for an application.
    SetIdt { app: AppId, idt: Duration },
}

/// What the manager asks of the cluster, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManagerOutput {
    /// Call [`Manager::deliver`] with `msg` at `at`.
    Schedule {
        /// When the message arrives.
        at: Time,
        /// Which.
        msg: MsgId,
    },
    /// The application's blocking allocate call returns.
    Answer {
        /// The application.
        app: AppId,
        /// Whether it was admitted.
        granted: bool,
    },
    /// A local manager writes a flow's IDT into its node's NIC.
    SetIdt {
        /// The NIC.
        node: NodeId,
        /// The flow.
        flow: FlowKey,
        /// The new IDT.
        idt: Duration,
    },
}

/// What the manager knows of an application.
#[derive(Debug, Clone)]
struct Managed {
    name: String,
    src: NodeId,
    dst: NodeId,
    rate: Rate,
}

/// The master's state and the messages in flight.
#[derive(Debug)]
pub struct Manager {
    ledger: Ledger,
    shares: ThesisShares,
    latency: Duration,
    apps: Vec<Managed>,
    mailbox: Vec<Option<Msg>>,
    by_key: HashMap<LedgerKey, AppId>,
    decisions: Vec<(AppId, bool)>,
}

impl Manager {
    /// A master over `topo` for the applications of `flows`, whose messages take
    /// `latency`. A node shares among its best-effort flows at most what its topology
    /// says ([`qos_core::topology::NodeCapacity::best_effort`]).
    pub fn new(topo: Arc<Topology>, latency: Duration, flows: &[FlowSpec]) -> Manager {
        Manager {
            ledger: Ledger::new(topo),
            shares: ThesisShares::new(),
            latency,
            apps: flows
                .iter()
                .map(|f| Managed {
                    name: f.name.clone(),
                    src: f.src,
                    dst: f.dst,
                    rate: f.rate,
                })
                .collect(),
            mailbox: Vec::new(),
            by_key: HashMap::new(),
            decisions: Vec::new(),
        }
    }

    /// Admission decisions taken so far, in order: (application, granted).
    pub fn decisions(&self) -> &[(AppId, bool)] {
        &self.decisions
    }

    /// An application asks its local manager for its reservation.
    pub fn request(&mut self, now: Time, app: AppId, out: &mut Vec<ManagerOutput>) {
        self.send(now, Msg::Request(app), out);
    }

    /// An application tells its local manager it is done.
    pub fn release(&mut self, now: Time, app: AppId, out: &mut Vec<ManagerOutput>) {
        self.send(now, Msg::Release(app), out);
    }

    /// A message scheduled through [`ManagerOutput::Schedule`] arrives.
    pub fn deliver(&mut self, now: Time, msg: MsgId, out: &mut Vec<ManagerOutput>) {
        let Some(msg) = self.mailbox.get_mut(msg.0 as usize).and_then(Option::take) else {
            return;
        };
        match msg {
            Msg::Request(app) => self.decide(now, app, out),
            Msg::Release(app) => {
                let k = self.key(app);
                if self.ledger.release(&k).is_ok() {
                    self.by_key.remove(&k);
                    self.push_best_effort(now, out);
                }
            }
            Msg::Answer { app, granted } => out.push(ManagerOutput::Answer { app, granted }),
            Msg::SetIdt { app, idt } => out.push(ManagerOutput::SetIdt {
                node: self.apps[app.index()].src,
                flow: FlowKey::forward(app),
                idt,
            }),
        }
    }

    fn send(&mut self, now: Time, msg: Msg, out: &mut Vec<ManagerOutput>) {
        self.mailbox.push(Some(msg));
        let id = MsgId(self.mailbox.len() as u32 - 1);
        out.push(ManagerOutput::Schedule {
            at: now.saturating_add(self.latency),
            msg: id,
        });
    }

    /// The ledger key of an application: its own port on both ends.
    fn key(&self, app: AppId) -> LedgerKey {
        let a = &self.apps[app.index()];
        let port = app.0 as u16;
        LedgerKey {
            src: Endpoint { node: a.src, port },
            dst: Endpoint { node: a.dst, port },
            priority: 0,
        }
    }

    /// The master decides on a request.
    fn decide(&mut self, now: Time, app: AppId, out: &mut Vec<ManagerOutput>) {
        let a = &self.apps[app.index()];
        let class = match a.rate {
            Rate::Premium(bandwidth) => Class::Premium { bandwidth },
            _ => Class::BestEffort {
                weight: Weight::default(),
            },
        };
        let key = self.key(app);
        let flow = Flow {
            key,
            name: a.name.clone(),
            class,
        };
        match self.ledger.request(flow) {
            Ok(grant) => {
                self.by_key.insert(key, app);
                self.decisions.push((app, true));
                if let Some(idt) = grant.idt {
                    self.send(now, Msg::SetIdt { app, idt }, out);
                }
                self.push_best_effort(now, out);
                // The answer leaves after the IDT messages, so the NIC is set first.
                self.send(now, Msg::Answer { app, granted: true }, out);
            }
            Err(_) => {
                self.decisions.push((app, false));
                self.send(
                    now,
                    Msg::Answer {
                        app,
                        granted: false,
                    },
                    out,
                );
            }
        }
    }

    /// Recomputes best-effort shares and sends every changed IDT.
    fn push_best_effort(&mut self, now: Time, out: &mut Vec<ManagerOutput>) {
        let changed = self.shares.update(&mut self.ledger);
        for s in changed {
            if let Some(&app) = self.by_key.get(&s.key) {
                let idt = s.idt.unwrap_or(STOPPED_IDT);
                self.send(now, Msg::SetIdt { app, idt }, out);
            }
        }
    }
}
