//! The leases the master's books keep (see [`super::liveness`]): the agent process
//! holding each node, and each owner's lease on a node while it holds flows there.

use std::time::Instant;

/// The agent process holding a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Holder {
    /// Its instance number.
    pub(super) instance: u64,
    /// When it was last heard from (or, if `restored`, when the master started).
    pub(super) seen: Instant,
    /// Read back from the database and not heard from since the master started.
    pub(super) restored: bool,
}

/// An owner's lease on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ClientLease {
    /// When it was last granted a flow or listed alive by its agent.
    pub(super) seen: Instant,
    /// How many flows it holds there.
    pub(super) flows: u32,
}
