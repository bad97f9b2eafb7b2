//! Who owns a source port: a port from which flows are reserved
//! belongs to the users holding them, and only they, or root, may reserve more from
//! it. Without this any local user could reserve a trickle on another user's flow key
//! and so throttle it ("already exists" for the owner, and its packets paced at the
//! intruder's rate).
//!
//! The master holds the authoritative books, and decides under one lock, so the rule
//! holds without races between agents or across agent restarts. The agent adds the
//! node's own rule (which users may hold ports at all), see `agent::socket`.

use std::collections::HashMap;

use qos_core::flow::Endpoint;
use qos_core::topology::{NodeId, Topology};

/// The root user, who may reserve from any port.
const ROOT: u32 = 0;

/// Per (node, source port) with flows: the uids holding them and how many each.
#[derive(Debug, Default)]
pub(super) struct PortHolders {
    by_port: HashMap<(NodeId, u16), Vec<(u32, u32)>>,
}

impl PortHolders {
    /// Whether `uid` may reserve from `src`: the port holds no flow of another user,
    /// or `uid` is root. The refusal says who holds the port.
    pub(super) fn check(&self, topo: &Topology, src: Endpoint, uid: u32) -> Result<(), String> {
        if uid == ROOT {
            return Ok(());
        }
        let Some(holders) = self.by_port.get(&(src.node, src.port)) else {
            return Ok(());
        };
        match holders.iter().find(|(u, _)| *u != uid) {
            None => Ok(()),
            Some((other, _)) => Err(format!(
                "port {} on node '{}' belongs to uid {other}, who holds reservations from it; \
                 uid {uid} may not reserve bandwidth for it (only the port's owner or root may)",
                src.port,
                topo.node(src.node).name
            )),
        }
    }

    /// A flow of `uid` from `src` was granted.
    pub(super) fn add(&mut self, src: Endpoint, uid: u32) {
        let holders = self.by_port.entry((src.node, src.port)).or_default();
        match holders.iter_mut().find(|(u, _)| *u == uid) {
            Some((_, n)) => *n += 1,
            None => holders.push((uid, 1)),
        }
    }

    /// A flow of `uid` from `src` went.
    pub(super) fn remove(&mut self, src: Endpoint, uid: u32) {
        let key = (src.node, src.port);
        let Some(holders) = self.by_port.get_mut(&key) else {
            return;
        };
        if let Some(i) = holders.iter().position(|(u, _)| *u == uid) {
            holders[i].1 -= 1;
            if holders[i].1 == 0 {
                holders.swap_remove(i);
            }
        }
        if holders.is_empty() {
            self.by_port.remove(&key);
        }
    }
}
