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

use std::collections::HashMap;
use std::sync::Arc;

use qos_core::admission::Ledger;
use qos_core::besteffort::ThesisShares;
use qos_core::flow::{Class, Endpoint, Flow, FlowKey, Weight};
use qos_core::topology::Topology;
use qos_core::units::Duration;

use super::{Cluster, Event, Rate};

/// IDT given to a best-effort flow whose share is zero: it must not send.
const STOPPED_IDT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
enum Msg {
    /// Local manager → master: allocate for application `app`.
    Request(u32),
    /// Local manager → master: release application `app`.
    Release(u32),
    /// Master → requester's local manager: the decision.
    Answer { app: u32, granted: bool },
    /// Master → a source node's local manager: new IDT for application `app`.
    SetIdt { app: u32, idt: Duration },
}

/// The master's state and the messages in flight.
#[derive(Debug)]
pub struct Manager {
    ledger: Ledger,
    shares: ThesisShares,
    latency: Duration,
    mailbox: Vec<Option<Msg>>,
    by_key: HashMap<FlowKey, u32>,
    /// Decisions taken, for reports: (app, granted).
    pub decisions: Vec<(u32, bool)>,
}

impl Manager {
    /// A master over `topo` whose messages take `latency`, sharing at most
    /// `best_effort_capacity` of a node among its best-effort flows.
    pub fn new(
        topo: Arc<Topology>,
        latency: Duration,
        best_effort_capacity: qos_core::units::Bandwidth,
    ) -> Manager {
        Manager {
            ledger: Ledger::new(topo),
            shares: ThesisShares::with_sharing_capacity(best_effort_capacity),
            latency,
            mailbox: Vec::new(),
            by_key: HashMap::new(),
            decisions: Vec::new(),
        }
    }
}

/// The flow key of application `app`: its own port on both ends.
fn key(c: &Cluster, app: u32) -> FlowKey {
    let s = &c.specs[app as usize];
    let port = app as u16;
    FlowKey {
        src: Endpoint { node: s.src, port },
        dst: Endpoint { node: s.dst, port },
        priority: 0,
    }
}

impl Cluster {
    fn send_control(&mut self, msg: Msg) {
        let m = &mut self.manager;
        m.mailbox.push(Some(msg));
        let i = m.mailbox.len() as u32 - 1;
        self.q.schedule_in(m.latency, Event::Control(i));
    }

    pub(crate) fn manager_request(&mut self, app: u32) {
        self.send_control(Msg::Request(app));
    }

    pub(crate) fn manager_release(&mut self, app: u32) {
        self.send_control(Msg::Release(app));
    }

    pub(crate) fn control(&mut self, i: u32) {
        let Some(msg) = self
            .manager
            .mailbox
            .get_mut(i as usize)
            .and_then(Option::take)
        else {
            return;
        };
        match msg {
            Msg::Request(app) => self.master_request(app),
            Msg::Release(app) => {
                let k = key(self, app);
                if self.manager.ledger.release(&k).is_ok() {
                    self.manager.by_key.remove(&k);
                    self.push_best_effort();
                }
            }
            Msg::Answer { app, granted } => {
                if granted {
                    self.app_activate(app);
                } else {
                    self.apps[app as usize].rejected = true;
                }
            }
            Msg::SetIdt { app, idt } => {
                let src = self.specs[app as usize].src.0;
                self.nics[src as usize].set_idt(2 * app, idt);
            }
        }
    }

    fn master_request(&mut self, app: u32) {
        let spec = &self.specs[app as usize];
        let k = key(self, app);
        let class = match spec.rate {
            Rate::Premium(bandwidth) => Class::Premium { bandwidth },
            _ => Class::BestEffort {
                weight: Weight::default(),
            },
        };
        let flow = Flow {
            key: k,
            name: spec.name.clone(),
            class,
        };
        match self.manager.ledger.request(flow) {
            Ok(grant) => {
                self.manager.by_key.insert(k, app);
                self.manager.decisions.push((app, true));
                if let Some(idt) = grant.idt {
                    self.send_control(Msg::SetIdt { app, idt });
                }
                self.push_best_effort();
                // The answer leaves after the IDT messages, so the NIC is set first.
                self.send_control(Msg::Answer { app, granted: true });
            }
            Err(_) => {
                self.manager.decisions.push((app, false));
                self.send_control(Msg::Answer {
                    app,
                    granted: false,
                });
            }
        }
    }

    /// Recomputes best-effort shares and pushes every changed IDT.
    fn push_best_effort(&mut self) {
        let changed = self.manager.shares.update(&mut self.manager.ledger);
        for s in changed {
            if let Some(&app) = self.manager.by_key.get(&s.key) {
                let idt = s.idt.unwrap_or(STOPPED_IDT);
                self.send_control(Msg::SetIdt { app, idt });
            }
        }
    }
}
