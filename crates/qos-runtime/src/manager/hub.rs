//! Pushing IDT updates to agents (thesis §4.3: "all relevant managers are apprised of
//! the updates in IDT values").
//!
//! Each agent holds one server-sent-events stream; the hub keeps one channel per node.
//! A change is delivered only to the nodes whose tables it touches. Every stream starts
//! with a snapshot of the node's whole table, so a reconnecting agent re-syncs without
//! help; updates after it carry increasing sequence numbers.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::state::Changes;
use crate::metrics::Metrics;
use crate::protocol::{AgentEvent, IdtEntry};

struct Subscriber {
    tx: mpsc::UnboundedSender<AgentEvent>,
}

/// The agents' event channels, by node name.
pub struct Hub {
    subs: Mutex<HashMap<String, Subscriber>>,
    seq: Mutex<HashMap<String, u64>>,
    metrics: Arc<Metrics>,
}

impl Hub {
    /// No subscribers yet.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Hub {
            subs: Mutex::new(HashMap::new()),
            seq: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    fn next_seq(&self, node: &str) -> u64 {
        let mut seq = self.seq.lock().expect("hub lock");
        let s = seq.entry(node.to_string()).or_insert(0);
        *s += 1;
        *s
    }

    /// Opens `node`'s stream (replacing an older one) starting with `snapshot`. Call
    /// with the master's books locked, so no decision falls between the snapshot and
    /// the subscription.
    pub fn subscribe(
        &self,
        node: &str,
        snapshot: Vec<IdtEntry>,
    ) -> mpsc::UnboundedReceiver<AgentEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        let seq = self.next_seq(node);
        let _ = tx.send(AgentEvent::Snapshot {
            seq,
            flows: snapshot,
        });
        self.subs
            .lock()
            .expect("hub lock")
            .insert(node.to_string(), Subscriber { tx });
        rx
    }

    /// Whether `node` has an event stream whose reader is still there.
    pub fn streaming(&self, node: &str) -> bool {
        self.subs
            .lock()
            .expect("hub lock")
            .get(node)
            .is_some_and(|s| !s.tx.is_closed())
    }

    /// Delivers `changes` to exactly the nodes they name that have a stream open.
    pub fn publish(&self, changes: Changes) {
        if changes.is_empty() {
            return;
        }
        let mut subs = self.subs.lock().expect("hub lock");
        for (node, (upsert, remove)) in changes.per_node {
            let Some(sub) = subs.get(&node) else { continue };
            let ev = AgentEvent::Update {
                seq: self.next_seq(&node),
                upsert,
                remove,
            };
            if sub.tx.send(ev).is_err() {
                subs.remove(&node);
            } else {
                self.metrics.pushes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
