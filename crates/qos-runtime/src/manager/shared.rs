//! What every request handler of a master shares: its role (with the books of the
//! current term when it leads), its counters, the agents' secret, the lease, the
//! topology.

use std::sync::Arc;
use std::time::Duration;

use qos_core::admission::Ledger;
use qos_core::topology::Topology;

use super::queue::JobQueue;

use super::role::Role;
use crate::auth::Secret;
use crate::metrics::Metrics;

/// What every handler shares.
pub struct Shared {
    /// Leader (with the books of its term) or follower.
    pub role: Role,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The agents' secret.
    pub secret: Secret,
    /// The lease.
    pub lease: Duration,
    /// The cluster (immutable for the master's run): requests are checked against it
    /// before the books are locked.
    pub topology: Arc<Topology>,
    /// An empty ledger over the topology: its resource layout, to sum a job's demand
    /// before the books are locked.
    pub empty: Arc<Ledger>,
    /// Job requests waiting for room, first come first served.
    pub jobs_queue: JobQueue,
}
