//! `clusterqos manager`: runs the master bandwidth resource manager (thesis §3.3, §4.3)
//! — admission, IDT assignment, best-effort shares, durable state, the agents' API.
//! The options are checked and the master run by `qos_runtime::manager::launch`.

use std::path::PathBuf;
use std::process::ExitCode;

use qos_core::besteffort::Policy;
use qos_runtime::manager::launch::{self, Options};
use qos_runtime::manager::store::Sync;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster's topology (TOML, docs/topology.md): nodes with T and Bmax, switches, links.
    #[arg(long)]
    pub topology: PathBuf,
    /// The SQLite database holding granted flows (created if missing); the same as
    /// `--store sqlite:PATH`.
    #[arg(
        long,
        default_value = "clusterqos-manager.db",
        conflicts_with = "store"
    )]
    pub db: PathBuf,
    /// Where the books are kept: `sqlite:PATH` (one manager), or
    /// `etcd://HOST:PORT[,HOST:PORT...][/PREFIX]` (replicas sharing etcd elect one
    /// leader; docs/ha-manager.md). Default: sqlite:clusterqos-manager.db.
    #[arg(long)]
    pub store: Option<String>,
    /// etcd store: the URL agents reach this replica at, which followers name when they
    /// redirect (default: http(s)://the --listen address).
    #[arg(long)]
    pub advertise: Option<String>,
    /// etcd store: how long a leader that vanished without resigning keeps the
    /// election (etcd rounds it up to whole seconds and to its own minimum).
    #[arg(long, default_value = "2s")]
    pub election_ttl: String,
    /// etcd store: CA certificate (PEM) of the etcd members; makes the client use TLS.
    #[arg(long)]
    pub etcd_ca: Option<PathBuf>,
    /// etcd store: client certificate (PEM) when etcd asks for one.
    #[arg(long, requires = "etcd_key")]
    pub etcd_cert: Option<PathBuf>,
    /// etcd store: the private key (PEM) of --etcd-cert.
    #[arg(long, requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,
    /// etcd store: user name, when etcd has authentication on.
    #[arg(long, requires = "etcd_password_file")]
    pub etcd_user: Option<String>,
    /// etcd store: file holding the password of --etcd-user.
    #[arg(long, requires = "etcd_user")]
    pub etcd_password_file: Option<PathBuf>,
    /// etcd store: the members' --max-txn-ops (writes per transaction).
    #[arg(long, default_value_t = 128)]
    pub etcd_max_txn_ops: usize,
    /// etcd store: transactions in flight at once. 1 is group commit (decisions made
    /// while a transaction is in flight all go in the next); more pipelines them, but
    /// a transaction that reaches etcd before its predecessor is refused and sent
    /// again, which measured slower on one machine.
    #[arg(long, default_value_t = 1)]
    pub etcd_pipeline: usize,
    /// etcd store: while leading, compact etcd's history this often (up to the revision
    /// seen one period before); "0s" leaves compaction to etcd
    /// (--auto-compaction-retention) or to whoever else owns it.
    #[arg(long, default_value = "300s")]
    pub etcd_compact: String,
    /// etcd store: this replica's witness file, recording the last transaction it
    /// committed; a store found behind it (etcd restored from an older snapshot) or
    /// another store is refused.
    #[arg(long)]
    pub witness: Option<PathBuf>,
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub listen: String,
    /// File holding the agents' shared secret (at least 16 printable characters).
    #[arg(long)]
    pub secret: PathBuf,
    /// How best-effort flows share the surplus: the thesis rule or weighted max-min.
    #[arg(long, value_enum, default_value = "thesis")]
    pub policy: PolicyArg,
    /// Silence after which a client's or an agent's flows are released ("10s", "500ms").
    #[arg(long, default_value = "10s")]
    pub lease: String,
    /// Commit mode: `full` flushes every group commit to the device (survives power
    /// loss); `normal` writes it to the OS without fsync (survives a crash of the
    /// manager, not of the machine).
    #[arg(long, value_enum, default_value = "full")]
    pub sync: SyncArg,
    /// Serve https:// with this certificate chain (PEM); agents then need --tls-ca.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: agents must present a certificate issued by this CA (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Start even if granted flows in the database do not fit the topology, releasing
    /// them (each is logged). Without it such a start is refused, naming them.
    #[arg(long)]
    pub drop_unfit_grants: bool,
    /// Most connections held at once (default: from the descriptor limit, which is
    /// raised to its hard limit); beyond it new connections are answered 503.
    #[arg(long)]
    pub max_connections: Option<usize>,
}

/// `--sync` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SyncArg {
    /// fsync at every (group) commit.
    Full,
    /// Commit to the OS page cache.
    Normal,
}

/// `--policy` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PolicyArg {
    /// Equal parts of each resource's surplus, minimum along the path (thesis §4.3).
    Thesis,
    /// Weighted max-min fair shares.
    MaxMin,
}

/// Runs the command.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    launch::run(&Options {
        topology: a.topology,
        db: a.db,
        store: a.store,
        advertise: a.advertise,
        election_ttl: a.election_ttl,
        etcd_ca: a.etcd_ca,
        etcd_identity: a.etcd_cert.zip(a.etcd_key),
        etcd_auth: a.etcd_user.zip(a.etcd_password_file),
        etcd_max_txn_ops: a.etcd_max_txn_ops,
        etcd_pipeline: a.etcd_pipeline,
        etcd_compact: a.etcd_compact,
        witness: a.witness,
        listen: a.listen,
        secret: a.secret,
        policy: match a.policy {
            PolicyArg::Thesis => Policy::Thesis,
            PolicyArg::MaxMin => Policy::MaxMin,
        },
        lease: a.lease,
        sync: match a.sync {
            SyncArg::Full => Sync::Full,
            SyncArg::Normal => Sync::Normal,
        },
        tls: a.tls_cert.zip(a.tls_key),
        tls_client_ca: a.tls_client_ca,
        drop_unfit_grants: a.drop_unfit_grants,
        max_connections: a.max_connections,
    })?;
    Ok(ExitCode::SUCCESS)
}
