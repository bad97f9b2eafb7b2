//! Liveness in the master's books (thesis §4.3 leaves it to the implementation): which agent process speaks for each node, and the leases that
//! release a flow when its owner or its node's agent falls silent.
//!
//! - A node is held by one agent *instance* (a random number per agent process). While
//!   the holder is heard from and streams its events, another instance is refused; a
//!   holder read back from the database after a master restart keeps the node for half
//!   a lease even before it reconnects, so a second agent for the same node cannot
//!   win the race to the restarted master.
//! - An owner's lease is counted only while it holds flows: a grant starts it afresh
//!   and the owner's last flow going ends it, so a time last seen before a release can
//!   never expire a later grant.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use qos_core::flow::FlowKey;
use qos_core::topology::NodeId;

use super::changes::{Changes, DbOp};
use super::error::BooksError;
use super::lease::{ClientLease, Holder};
use super::State;
use crate::protocol::Owner;

impl State {
    /// Lets the agent process `instance` speak for `node` at `now`. Each agent names
    /// itself with a random instance number. Another instance is refused while the
    /// holder (a) has been heard from within half the `lease` and holds the node's
    /// event stream (`holder_streaming`), or (b) was read back from the database at
    /// start-up and half a lease has not passed since. So two agents configured with
    /// the same node cannot both take its IDT pushes, not even across a master restart;
    /// a holder that crashed closes its stream, and its successor is accepted at once
    /// (after a master restart: half a lease after it). Calls that name no instance (tools, older agents) are not checked.
    ///
    /// Returns the write that records a new holder, to be made durable before the
    /// call is answered.
    pub fn claim(
        &mut self,
        node: NodeId,
        instance: Option<u64>,
        now: Instant,
        lease: Duration,
        holder_streaming: bool,
    ) -> Result<Option<DbOp>, BooksError> {
        let Some(me) = instance else { return Ok(None) };
        let takeover = lease / 2;
        let slot = &mut self.agent_instance[node.0 as usize];
        let mut changed = true;
        if let Some(h) = *slot {
            if h.instance == me {
                changed = false;
            } else {
                let quiet = now.saturating_duration_since(h.seen);
                let live = quiet < takeover && holder_streaming;
                // A holder read back at start-up keeps the node for half a lease: a live
                // one reconnects within its back-off (1 s at most), and a successor (the
                // holder died while the master was down) is in, and lists its owners,
                // before the node's leases, started afresh at the restart, run out.
                let reserved = h.restored && quiet < takeover;
                if live || reserved {
                    let wait = if reserved {
                        format!(
                            "it held the node before the manager restarted and has until {} ms \
                             after the restart to return",
                            takeover.as_millis()
                        )
                    } else {
                        format!(
                            "stop it, or wait {} ms after it goes quiet",
                            takeover.as_millis()
                        )
                    };
                    return Err(BooksError::Conflict(format!(
                            "node '{}' already has a live agent (instance {:016x}, heard from {} ms ago); {wait}",
                            self.topo.node(node).name,
                            h.instance,
                            quiet.as_millis(),
                    )));
                }
                tracing::warn!(node = %self.topo.node(node).name, old = h.instance, new = me, "agent instance replaced");
            }
        }
        *slot = Some(Holder {
            instance: me,
            seen: now,
            restored: false,
        });
        Ok(changed.then(|| DbOp::Holder(self.topo.node(node).name.clone(), me)))
    }

    /// At start-up: `instance` held `node` (by name) when the master stopped; it keeps
    /// the node for half a lease from `now` (see [`State::claim`]). Unknown names are
    /// ignored (the topology changed).
    pub fn restore_holder(&mut self, node: &str, instance: u64, now: Instant) {
        if let Some(id) = self.topo.node_id(node) {
            self.agent_instance[id.0 as usize] = Some(Holder {
                instance,
                seen: now,
                restored: true,
            });
        }
    }

    /// The agent of `node` was heard from at `now`.
    pub fn touch_agent(&mut self, node: NodeId, now: Instant) {
        self.agent_seen[node.0 as usize] = Some(now);
    }

    /// The agent of `node` reports these owners alive at `now`. Owners holding no
    /// flow are not tracked.
    pub fn touch_clients(&mut self, node: NodeId, live: &[Owner], now: Instant) {
        self.touch_agent(node, now);
        for o in live {
            if let Some(l) = self.client_seen.get_mut(&(node, *o)) {
                l.seen = now;
            }
        }
        if !self.jobs.is_empty() {
            let name = self.topo.node(node).name.clone();
            for o in live {
                self.renew_process_jobs(&name, *o, now);
            }
        }
    }

    /// A flow was granted to `owner` on `node` at `now`: its lease starts afresh.
    pub(super) fn lease_granted(&mut self, node: NodeId, owner: Owner, now: Instant) {
        let l = self
            .client_seen
            .entry((node, owner))
            .or_insert(ClientLease {
                seen: now,
                flows: 0,
            });
        l.seen = now;
        l.flows += 1;
    }

    /// One of `owner`'s flows on `node` went: with its last one, its lease ends.
    pub(super) fn lease_released(&mut self, node: NodeId, owner: Owner) {
        if let Some(l) = self.client_seen.get_mut(&(node, owner)) {
            l.flows -= 1;
            if l.flows == 0 {
                self.client_seen.remove(&(node, owner));
            }
        }
    }

    /// Starts every lease afresh (after a restart: agents get a full lease to return).
    pub fn reset_leases(&mut self, now: Instant) {
        for t in self.agent_seen.iter_mut() {
            *t = Some(now);
        }
        for l in self.client_seen.values_mut() {
            l.seen = now;
        }
    }

    /// Releases every flow whose owner, or whose node's agent, has been silent longer
    /// than `lease`; returns what to write and push, one entry per flow.
    pub fn expire(&mut self, now: Instant, lease: Duration) -> Vec<(DbOp, Changes)> {
        let stale = |t: Option<Instant>| match t {
            Some(t) => now.saturating_duration_since(t) > lease,
            None => true,
        };
        let dead_owners: HashSet<(NodeId, Owner)> = self
            .client_seen
            .iter()
            .filter(|(_, l)| stale(Some(l.seen)))
            .map(|(k, _)| *k)
            .collect();
        let dead: Vec<FlowKey> = self
            .rows
            .iter()
            .filter(|(k, row)| {
                stale(self.agent_seen[k.src.node.0 as usize])
                    || dead_owners.contains(&(k.src.node, row.owner))
            })
            .map(|(k, _)| *k)
            .collect();
        let mut out: Vec<(DbOp, Changes)> = dead.into_iter().map(|k| self.remove(k)).collect();
        out.extend(self.expire_jobs(now, lease));
        out
    }
}
