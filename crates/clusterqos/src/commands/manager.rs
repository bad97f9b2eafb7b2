//! `clusterqos manager`: runs the master bandwidth resource manager (thesis §3.3, §4.3)
//! — admission, IDT assignment, best-effort shares, durable state, the agents' API.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use qos_core::besteffort::Policy;
use qos_core::units::Duration;
use qos_runtime::auth::Secret;
use qos_runtime::manager::serve::ConnLimits;
use qos_runtime::manager::store::etcd_config::{EtcdAuth, EtcdConfig, EtcdTls};
use qos_runtime::manager::store::{Location, Sync};
use qos_runtime::manager::{self, Config, StoreConfig};

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
    /// etcd store: transactions in flight at once (1: each waits for the previous).
    #[arg(long, default_value_t = 4)]
    pub etcd_pipeline: usize,
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

/// Parses a lease: a positive duration.
pub fn parse_lease(text: &str) -> anyhow::Result<std::time::Duration> {
    let d: Duration = text.parse().with_context(|| format!("--lease {text}"))?;
    if d.is_zero() {
        anyhow::bail!("--lease must be longer than zero");
    }
    Ok(std::time::Duration::from_nanos(d.as_ns()))
}

/// The store the arguments name.
fn store(args: &Args) -> anyhow::Result<StoreConfig> {
    let sync = match args.sync {
        SyncArg::Full => Sync::Full,
        SyncArg::Normal => Sync::Normal,
    };
    let location = match &args.store {
        Some(s) => s
            .parse::<Location>()
            .map_err(|e| anyhow::anyhow!("--store: {e}"))?,
        None => Location::Sqlite(args.db.clone()),
    };
    let etcd_only = [
        ("--advertise", args.advertise.is_some()),
        ("--etcd-ca", args.etcd_ca.is_some()),
        ("--etcd-cert", args.etcd_cert.is_some()),
        ("--etcd-user", args.etcd_user.is_some()),
        ("--witness", args.witness.is_some()),
    ];
    match location {
        Location::Sqlite(path) => {
            if let Some((flag, _)) = etcd_only.iter().find(|(_, set)| *set) {
                anyhow::bail!("{flag} applies to an etcd store (--store etcd://...) only");
            }
            Ok(StoreConfig::Sqlite { path, sync })
        }
        Location::Etcd { endpoints, prefix } => {
            if args.etcd_max_txn_ops < 2 || args.etcd_pipeline == 0 {
                anyhow::bail!(
                    "--etcd-max-txn-ops must be at least 2 and --etcd-pipeline at least 1"
                );
            }
            let tls = (args.etcd_ca.is_some() || args.etcd_cert.is_some()).then(|| EtcdTls {
                ca: args.etcd_ca.clone(),
                identity: args.etcd_cert.clone().zip(args.etcd_key.clone()),
            });
            let auth = match (&args.etcd_user, &args.etcd_password_file) {
                (Some(user), Some(file)) => {
                    let password = std::fs::read_to_string(file)
                        .with_context(|| format!("--etcd-password-file {}", file.display()))?;
                    Some(EtcdAuth {
                        user: user.clone(),
                        password: password.trim_end_matches(['\n', '\r']).to_string(),
                    })
                }
                _ => None,
            };
            Ok(StoreConfig::Etcd(EtcdConfig {
                tls,
                auth,
                max_txn_ops: args.etcd_max_txn_ops,
                pipeline: args.etcd_pipeline,
                witness: args.witness.clone(),
                ..EtcdConfig::new(endpoints, &prefix)
            }))
        }
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let name = args.topology.display().to_string();
    let text = std::fs::read_to_string(&args.topology).with_context(|| name.clone())?;
    let topology = qos_core::topology::file::load(&name, &text)?;
    let secret = Secret::load(&args.secret)?;
    let lease = parse_lease(&args.lease)?;
    let store = store(&args)?;
    let election_ttl: Duration = args
        .election_ttl
        .parse()
        .with_context(|| format!("--election-ttl {}", args.election_ttl))?;
    if election_ttl.is_zero() {
        anyhow::bail!("--election-ttl must be longer than zero");
    }
    if let Some(a) = &args.advertise {
        if !(a.starts_with("http://") || a.starts_with("https://")) || a.contains(',') {
            anyhow::bail!("--advertise {a}: expected one http://HOST:PORT or https://HOST:PORT");
        }
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(qos_runtime::tls::server_config(
            cert,
            key,
            args.tls_client_ca.as_deref(),
        )?),
        _ => None,
    };
    let mut conns = ConnLimits::default();
    if let Some(max) = args.max_connections {
        if max < 16 {
            anyhow::bail!("--max-connections must be at least 16");
        }
        conns = ConnLimits {
            max_connections: max,
            max_unauthenticated: (max / 4).clamp(4, 1024),
            ..conns
        };
    }
    qos_runtime::logging::init();
    manager::run_blocking(
        Config {
            policy: match args.policy {
                PolicyArg::Thesis => Policy::Thesis,
                PolicyArg::MaxMin => Policy::MaxMin,
            },
            lease,
            store,
            advertise: args.advertise.clone(),
            election_ttl: std::time::Duration::from_nanos(election_ttl.as_ns()),
            tls,
            drop_unfit: args.drop_unfit_grants,
            conns,
            ..Config::new(Arc::new(topology), args.db, secret)
        },
        &args.listen,
    )
    .map_err(|e| match e {
        // Name the topology the grants do not fit.
        e @ manager::ManagerError::Unfit { .. } => anyhow::anyhow!("{name}: {e}"),
        e => e.into(),
    })?;
    Ok(ExitCode::SUCCESS)
}
