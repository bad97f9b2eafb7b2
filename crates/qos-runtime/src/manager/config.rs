//! How a master runs (thesis §4.3's bandwidth resource manager as a service): its
//! topology, where its books are kept, its secret, policy, lease, TLS and limits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use qos_core::besteffort::Policy;
use qos_core::topology::Topology;

use super::hub;
use super::serve;
use super::store;
use super::store::etcd_config::EtcdConfig;
use crate::auth::Secret;

/// Where the master keeps its books.
// One value per master, built once at start: the size of the etcd variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum StoreConfig {
    /// An SQLite database file beside this master (one master, no failover).
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// How far a grant's commit goes before it is acknowledged.
        sync: store::Sync,
    },
    /// etcd, shared with the other replicas; the one elected leads.
    Etcd(EtcdConfig),
}

impl StoreConfig {
    /// The store, for messages.
    pub fn name(&self) -> String {
        match self {
            StoreConfig::Sqlite { path, .. } => path.display().to_string(),
            StoreConfig::Etcd(e) => format!("etcd://{}", e.name()),
        }
    }
}

/// How the master runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The cluster.
    pub topology: Arc<Topology>,
    /// Where the books are kept.
    pub store: StoreConfig,
    /// The agents' shared secret.
    pub secret: Secret,
    /// How best-effort flows share the surplus.
    pub policy: Policy,
    /// Silence after which a client's or an agent's flows are released.
    pub lease: Duration,
    /// Serve `https://` with this (certificate, key, and the client CA for mutual
    /// TLS); plain HTTP when `None`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Start even if stored grants do not fit the topology, releasing them (each is
    /// logged); without it such a start is refused, naming them.
    pub drop_unfit: bool,
    /// Limits on connections.
    pub conns: serve::ConnLimits,
    /// How far an agent's event stream may fall behind before it is re-synced.
    pub hub: hub::HubLimits,
    /// The URL agents reach this replica at (etcd store): what followers name when
    /// they redirect to it. Default: the scheme and the address it listens on.
    pub advertise: Option<String>,
    /// Time to live of the leader's election lease (etcd store): how long a leader
    /// that vanished without resigning (killed, paused, cut off) holds the election
    /// before another replica takes over. etcd rounds it up to whole seconds and to
    /// its minimum (1.5 × its election timeout).
    pub election_ttl: Duration,
    /// How often a follower connects to the leader's advertised address to learn
    /// whether its process died (etcd store; `None`: never, the TTL alone decides).
    /// See `leader_watch`.
    pub leader_probe: Option<Duration>,
}

impl Config {
    /// A master over `topology` keeping its books in the SQLite database `db`, with
    /// the defaults: thesis policy, 10 s lease, fsync at every commit, plain HTTP,
    /// refusing unfit grants, connection limits from the descriptor limit.
    pub fn new(topology: Arc<Topology>, db: PathBuf, secret: Secret) -> Config {
        Config {
            topology,
            store: StoreConfig::Sqlite {
                path: db,
                sync: store::Sync::Full,
            },
            secret,
            policy: Policy::Thesis,
            lease: Duration::from_secs(10),
            tls: None,
            drop_unfit: false,
            conns: serve::ConnLimits::default(),
            hub: hub::HubLimits::default(),
            advertise: None,
            election_ttl: Duration::from_secs(2),
            leader_probe: Some(Duration::from_millis(100)),
        }
    }
}
