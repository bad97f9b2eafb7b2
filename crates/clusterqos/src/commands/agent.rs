//! `clusterqos agent`: runs a node's local manager (thesis §4.3): registers with the
//! master, keeps the node's IDT table, serves local applications on a Unix socket.
//! Given `--nodes` (every node's data address) it also runs the node's data plane — the
//! part that plays the NIC firmware (thesis §3.2.1, §4.2): user-level ports, rate control
//! with the IDTs the master pushes, reliable transport (docs/dataplane.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use qos_runtime::agent::{self, Config};
use qos_runtime::auth::Secret;

/// Default path of the agent's socket (also what `request`, `release`, `status` use).
pub const DEFAULT_SOCKET: &str = "/tmp/clusterqos-agent.sock";

/// Default path of the data plane's port socket (what `qos_client::Port::open` uses).
pub const DEFAULT_DATAPLANE_SOCKET: &str = "/tmp/clusterqos-dataplane.sock";

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// This node's name in the master's topology.
    #[arg(long)]
    pub node: String,
    /// The master's URL, e.g. http://127.0.0.1:7400; with replicas (etcd store), every
    /// replica's URL separated by commas: the agent follows the leader.
    #[arg(long)]
    pub manager: String,
    /// File holding the cluster's shared secret.
    #[arg(long)]
    pub secret: PathBuf,
    /// Unix socket for local applications.
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Every node's data address, e.g. "h0=10.77.0.1:7500,h1=10.77.0.2:7500". With it the
    /// agent also runs this node's data plane; without it, the control plane only.
    #[arg(long)]
    pub nodes: Option<String>,
    /// Unix socket on which applications open data-plane ports.
    #[arg(long, default_value = DEFAULT_DATAPLANE_SOCKET, requires = "nodes")]
    pub dataplane_socket: PathBuf,
    /// Data-plane scheduler: "rate" (rate control) or "gm" (rate control off, for comparison).
    #[arg(long, default_value = "rate", requires = "nodes")]
    pub scheduler: String,
    /// Transport fault injection for tests, e.g. "drop=0.01,dup=0.01,reorder=0.02,seed=1".
    #[arg(long, default_value = "", requires = "nodes")]
    pub faults: String,
    /// Payload bytes per packet (default: from the path MTU, so no IP fragmentation).
    #[arg(long, requires = "nodes")]
    pub payload: Option<usize>,
    /// TLS towards an https:// manager.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Which users may reserve bandwidth here.
    #[command(flatten)]
    pub users: UsersArgs,
}

/// Which local users an agent serves reservations to.
#[derive(Debug, Clone, clap::Args)]
pub struct UsersArgs {
    /// A uid that may reserve bandwidth (and so own ports) on this node, besides the
    /// agent's own uid and root; repeat for more.
    #[arg(long = "allow-uid", value_name = "UID")]
    pub allow_uid: Vec<u32>,
    /// Let every local user reserve bandwidth (a port, once reserved, still belongs to
    /// its user).
    #[arg(long, conflicts_with = "allow_uid")]
    pub allow_all_users: bool,
}

impl UsersArgs {
    /// The agent's setting.
    pub fn users(&self) -> qos_runtime::agent::socket::Users {
        use qos_runtime::agent::socket::Users;
        if self.allow_all_users {
            return Users::Anyone;
        }
        let Users::Only(mut v) = Users::default() else {
            unreachable!("the default names users")
        };
        v.extend(&self.allow_uid);
        Users::Only(v)
    }
}

/// TLS options of an agent, for an `https://` manager.
#[derive(Debug, Clone, clap::Args)]
pub struct TlsArgs {
    /// The CA certificate (PEM) the manager's certificate must chain to.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// This agent's certificate (PEM), for a manager that requires mutual TLS.
    #[arg(long, requires = "tls_ca", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The TLS client settings, if --tls-ca is given.
    pub fn client_config(&self) -> anyhow::Result<Option<Arc<qos_runtime::tls::ClientConfig>>> {
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        let identity = self.tls_cert.as_deref().zip(self.tls_key.as_deref());
        Ok(Some(qos_runtime::tls::client_config(ca, identity)?))
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    qos_runtime::protocol::check_name("node name", &args.node)
        .map_err(|e| anyhow::anyhow!("--node: {}", e.message))?;
    if !(args.manager.starts_with("http://") || args.manager.starts_with("https://")) {
        anyhow::bail!(
            "--manager must be a URL such as http://127.0.0.1:7400, not '{}'",
            args.manager
        );
    }
    if args.manager.starts_with("https://") != args.tls.tls_ca.is_some() {
        anyhow::bail!(
            "an https:// --manager needs --tls-ca, and --tls-ca needs an https:// --manager"
        );
    }
    if let Some(nodes) = args.nodes {
        return with_dataplane(NodeArgs {
            node: args.node,
            manager: args.manager,
            secret: args.secret,
            nodes,
            socket: args.socket,
            dataplane_socket: args.dataplane_socket,
            scheduler: args.scheduler,
            faults: args.faults,
            payload: args.payload,
            tls: args.tls,
            users: args.users,
        });
    }
    let secret = Secret::load(&args.secret)?;
    qos_runtime::logging::init();
    agent::run_blocking(Config {
        tls: args.tls.client_config()?,
        users: args.users.users(),
        ..Config::new(&args.node, &args.manager, secret, args.socket)
    })?;
    Ok(ExitCode::SUCCESS)
}

/// A node's agent with its data plane (`agent --nodes`, and `testbed node` inside a
/// testbed namespace).
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    #[arg(long)]
    pub node: String,
    #[arg(long)]
    pub manager: String,
    #[arg(long)]
    pub secret: PathBuf,
    /// Every node's data address: "h0=10.77.0.1:7500,h1=10.77.0.2:7500".
    #[arg(long)]
    pub nodes: String,
    /// The local manager's socket.
    #[arg(long)]
    pub socket: PathBuf,
    /// The data plane's port socket.
    #[arg(long)]
    pub dataplane_socket: PathBuf,
    /// "rate" (rate control) or "gm" (rate control off).
    #[arg(long, default_value = "rate")]
    pub scheduler: String,
    /// Transport faults, e.g. "drop=0.01,dup=0.01,reorder=0.02,seed=1".
    #[arg(long, default_value = "")]
    pub faults: String,
    /// Payload bytes per packet (default: from the path MTU).
    #[arg(long)]
    pub payload: Option<usize>,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub users: UsersArgs,
}

/// Runs one node's agent with its data plane.
pub fn with_dataplane(a: NodeArgs) -> anyhow::Result<ExitCode> {
    use qos_runtime::dataplane::engine::EngineConfig;
    use qos_runtime::dataplane::segment::{path_mtu, payload_for_mtu};
    use qos_runtime::dataplane::service::{scheduler_kind, DataPlaneConfig};
    use qos_runtime::shm::region::Layout;
    use qos_runtime::transport::link::Faults;

    let nodes = qos_runtime::testbed::services::parse_nodes(&a.nodes)?;
    let scheduler = scheduler_kind(&a.scheduler).ok_or_else(|| {
        anyhow::anyhow!("--scheduler must be `rate` or `gm`, not '{}'", a.scheduler)
    })?;
    let faults = Faults::parse(&a.faults).map_err(|e| anyhow::anyhow!("--faults: {e}"))?;
    let payload = match a.payload {
        Some(p) => p,
        None => {
            let other = nodes.iter().find(|(n, _)| *n != a.node).map(|(_, x)| *x);
            payload_for_mtu(other.and_then(path_mtu).unwrap_or(1500))
        }
    };
    let secret = Secret::load(&a.secret)?;
    qos_runtime::logging::init();
    // The same users may reserve bandwidth as may open data-plane ports (the data
    // plane's default `allowed_uids`: the agent's own uid and root, plus --allow-uid).
    let users = a.users.users();
    let allowed_uids = match &users {
        qos_runtime::agent::socket::Users::Only(v) => {
            let mut v = v.clone();
            v.push(0);
            v
        }
        qos_runtime::agent::socket::Users::Anyone => vec![],
    };
    let agent = Config {
        tls: a.tls.client_config()?,
        users,
        ..Config::new(&a.node, &a.manager, secret, a.socket)
    };
    let dp = DataPlaneConfig {
        node: a.node,
        nodes,
        socket: a.dataplane_socket,
        socket_mode: 0o660,
        allowed_uids,
        engine: EngineConfig {
            payload,
            ..EngineConfig::default()
        },
        faults,
        scheduler,
        layout: Layout::default(),
    };
    qos_runtime::dataplane::seam::run_agent_with_dataplane(agent, dp)?;
    Ok(ExitCode::SUCCESS)
}
