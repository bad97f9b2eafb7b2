//! How to reach the etcd store: plain settings, kept apart from the etcd
//! client ([`super::etcd`], built with the `etcd` feature) so that the command line
//! and the master's configuration name an etcd store whether or not this build can
//! open one.

use std::path::PathBuf;
use std::time::Duration;

/// TLS towards etcd: the CA that signed the members' certificates, and this
/// replica's certificate and key if etcd asks for client certificates.
#[derive(Debug, Clone, Default)]
pub struct EtcdTls {
    /// CA certificate (PEM); the system's roots are not used.
    pub ca: Option<PathBuf>,
    /// Client certificate and key (PEM).
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// etcd's user name and password (etcd's authentication).
#[derive(Clone)]
pub struct EtcdAuth {
    /// User.
    pub user: String,
    /// Password.
    pub password: String,
}

impl std::fmt::Debug for EtcdAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EtcdAuth({}, <password>)", self.user)
    }
}

/// How to reach the store.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// `host:port` of each member.
    pub endpoints: Vec<String>,
    /// Every key starts with it (ends with `/`).
    pub prefix: String,
    /// TLS, if etcd serves https.
    pub tls: Option<EtcdTls>,
    /// Authentication, if etcd has it on.
    pub auth: Option<EtcdAuth>,
    /// etcd's `--max-txn-ops` (128 unless changed): a commit holds at most this many
    /// writes, the meta key's included.
    pub max_txn_ops: usize,
    /// Transactions in flight at once. 1 (the default) is group commit alone: while
    /// one transaction is in flight every decision made meanwhile waits, and all of
    /// them go in the next. More lets transactions overtake each other on their way
    /// to etcd (concurrent gRPC calls are not proposed in the order sent); one that
    /// arrives before its predecessor fails its guard and is sent again, with every
    /// one behind it. On one 2-core machine 4 in flight gave 0.2 to 0.7 times the
    /// decisions per second of 1 (`clusterqos bench manager --etcd-pipeline`).
    pub pipeline: usize,
    /// How long a free writer, while fewer decisions wait than its last commit
    /// suggests, waits for the next one before it sends what waits (and at most four
    /// times this from the oldest; zero: never hold). Clients that all got their
    /// answers from one commit send their next requests one after the other within a
    /// millisecond or so; without the wait the first of them goes alone and the rest
    /// wait for it, so transactions alternate between one decision and all the others,
    /// and etcd pays for twice as many (`clusterqos bench manager --etcd-gather`,
    /// docs/ha-manager.md). A lone client never waits: the last transaction carried
    /// one.
    pub gather: Duration,
    /// Whether the writer commits through its own connection to etcd's Raft leader
    /// (found when its term begins; every member after the first failure) rather
    /// than through the connection balanced over every member. A follower forwards
    /// a write to the leader and answers only once it applied it: a hop and a wait
    /// more per commit (`clusterqos bench manager --etcd-commit-via`).
    pub commit_via_leader: bool,
    /// How granted flows lie in etcd's keys: one key per flow (the default), or one
    /// per transaction's grants. A store written either way opens either way.
    pub flow_keys: FlowKeys,
    /// The witness file of this replica, if any: what it last saw committed.
    pub witness: Option<PathBuf>,
    /// While leading, compact etcd's history this often, up to the revision seen one
    /// period before (`etcd::compactor`); `None` leaves compaction to etcd or its owner.
    pub compact_every: Option<Duration>,
}

/// How the etcd writer lays granted flows out in keys (`manager --etcd-flow-keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FlowKeys {
    /// One key per flow: a grant is a put, a release a delete.
    #[default]
    PerFlow,
    /// One key per transaction (at most 16 flows), holding the flows it granted that
    /// are not released yet: a commit's grants are one put, but a release rewrites
    /// its key with the flows left. Measured on one 2-core machine: etcd's CPU per
    /// grant ~14 % lower, per release ~31 % higher (docs/ha-manager.md).
    Grouped,
}

/// Where the etcd writer sends its commits (`manager --etcd-commit-via`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum CommitVia {
    /// etcd's Raft leader, on a connection of its own.
    #[default]
    Leader,
    /// Any member: the connection balanced over every member.
    Any,
}

impl EtcdConfig {
    /// The writer's gathering wait unless configured (`gather`).
    pub const DEFAULT_GATHER: Duration = Duration::from_micros(500);

    /// The store at `endpoints` under `prefix`, plain HTTP, no authentication,
    /// etcd's default transaction size, one transaction in flight, commits through
    /// etcd's Raft leader, one key per flow, no witness,
    /// history compacted every 5 minutes.
    pub fn new(endpoints: Vec<String>, prefix: &str) -> EtcdConfig {
        EtcdConfig {
            endpoints,
            prefix: prefix.to_string(),
            tls: None,
            auth: None,
            max_txn_ops: 128,
            pipeline: 1,
            gather: Self::DEFAULT_GATHER,
            commit_via_leader: true,
            flow_keys: FlowKeys::PerFlow,
            witness: None,
            compact_every: Some(Duration::from_secs(300)),
        }
    }

    /// "host:port,host:port/prefix", for messages.
    pub fn name(&self) -> String {
        format!(
            "{}{}",
            self.endpoints.join(","),
            self.prefix.trim_end_matches('/')
        )
    }
}
