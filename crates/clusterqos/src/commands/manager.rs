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
use qos_runtime::manager::store::Sync;
use qos_runtime::manager::{self, Config};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster's topology (TOML, docs/topology.md): nodes with T and Bmax, switches, links.
    #[arg(long)]
    pub topology: PathBuf,
    /// The database holding granted flows (created if missing).
    #[arg(long, default_value = "clusterqos-manager.db")]
    pub db: PathBuf,
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

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let name = args.topology.display().to_string();
    let text = std::fs::read_to_string(&args.topology).with_context(|| name.clone())?;
    let topology = qos_core::topology::file::load(&name, &text)?;
    let secret = Secret::load(&args.secret)?;
    let lease = parse_lease(&args.lease)?;
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
            sync: match args.sync {
                SyncArg::Full => Sync::Full,
                SyncArg::Normal => Sync::Normal,
            },
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
