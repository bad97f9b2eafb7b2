//! `clusterqos agent`: runs a node's local manager (thesis §4.3): registers with the
//! master, keeps the node's IDT table, serves local applications on a Unix socket.
//! Given `--nodes` (every node's data address) it also runs the node's data plane — the
//! part that plays the NIC firmware (thesis §3.2.1, §4.2): user-level ports, rate control
//! with the IDTs the master pushes, reliable transport (docs/dataplane.md). With
//! `--backend kernel --interface IF` the grants are enforced by Linux traffic control on
//! IF instead, for unmodified programs (docs/kernel-backend.md, issue 14).

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
    /// Data-plane packet scheduler: "rate-control" (or "rate"), "virtual-clock" (Vtick
    /// from each flow's reservation), "round-robin" (whole messages in turn),
    /// "interleaved-round-robin" (one packet per flow in turn) or "gm" (GM's rotation,
    /// rate control off). See docs/dataplane.md.
    #[arg(long, default_value = "rate", requires = "nodes")]
    pub scheduler: String,
    /// Transport fault injection for tests, e.g. "drop=0.01,dup=0.01,reorder=0.02,seed=1".
    #[arg(long, default_value = "", requires = "nodes")]
    pub faults: String,
    /// Payload bytes per packet (default: from the path MTU, so no IP fragmentation).
    #[arg(long, requires = "nodes")]
    pub payload: Option<usize>,
    /// How grants are enforced: by the agent's own data plane, or by Linux traffic
    /// control on --interface.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// TLS towards an https:// manager.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Which users may reserve bandwidth here.
    #[command(flatten)]
    pub users: UsersArgs,
}

/// Which enforcement backend an agent runs.
#[derive(Debug, Clone, clap::Args)]
pub struct BackendArgs {
    /// "dataplane" (the agent's own ports, rate control, reliable UDP) or "kernel"
    /// (htb classes and u32 filters on --interface, for unmodified programs).
    #[arg(long, default_value = "dataplane", value_parser = ["dataplane", "kernel"])]
    pub backend: String,
    /// With --backend kernel: the interface this node's traffic leaves by.
    #[arg(long)]
    pub interface: Option<String>,
    /// The link's rate on the wire ("1Gbit/s"). With --backend kernel: the htb root's
    /// rate (default: the rate of a tbf shaper at the interface's root, or its speed).
    /// With the data plane: it sends no faster, so a backlog waits in its scheduler
    /// (default: no pacing).
    #[arg(long)]
    pub link_rate: Option<String>,
    /// With --backend kernel: what grants count — "tcp" payload (default), "udp"
    /// payload, or "wire" bytes.
    #[arg(long, default_value = "tcp", value_parser = ["tcp", "udp", "wire"])]
    pub rate_basis: String,
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
    if args.backend.backend == "kernel" {
        let Some(nodes) = args.nodes else {
            anyhow::bail!("--backend kernel needs --nodes (every node's address)");
        };
        return kernel(KernelArgs {
            node: args.node,
            manager: args.manager,
            secret: args.secret,
            nodes,
            socket: args.socket,
            backend: args.backend,
            tls: args.tls,
            users: args.users,
        });
    }
    if args.backend.interface.is_some() {
        anyhow::bail!("--interface is for --backend kernel");
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
            backend: args.backend,
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
    /// The packet scheduler (as `agent --scheduler`).
    #[arg(long, default_value = "rate")]
    pub scheduler: String,
    /// Transport faults, e.g. "drop=0.01,dup=0.01,reorder=0.02,seed=1".
    #[arg(long, default_value = "")]
    pub faults: String,
    /// Payload bytes per packet (default: from the path MTU).
    #[arg(long)]
    pub payload: Option<usize>,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub users: UsersArgs,
}

/// A node's agent with the kernel backend.
#[derive(Debug)]
pub struct KernelArgs {
    pub node: String,
    pub manager: String,
    pub secret: PathBuf,
    pub nodes: String,
    pub socket: PathBuf,
    pub backend: BackendArgs,
    pub tls: TlsArgs,
    pub users: UsersArgs,
}

/// Runs one node's agent with the kernel backend on `--interface`.
pub fn kernel(a: KernelArgs) -> anyhow::Result<ExitCode> {
    use qos_runtime::kernel::plan::{Addrs, RateBasis};
    use qos_runtime::kernel::KernelConfig;
    let Some(interface) = a.backend.interface.clone() else {
        anyhow::bail!(
            "--backend kernel needs --interface (the interface this node's traffic leaves by)"
        );
    };
    let addrs = Addrs::parse(&a.node, &a.nodes).map_err(anyhow::Error::msg)?;
    let basis = RateBasis::parse(&a.backend.rate_basis).ok_or_else(|| {
        anyhow::anyhow!(
            "--rate-basis must be tcp, udp or wire, not '{}'",
            a.backend.rate_basis
        )
    })?;
    let link_rate = a
        .backend
        .link_rate
        .as_deref()
        .map(|r| {
            r.parse::<qos_core::units::Bandwidth>()
                .map(|b| b.bytes_per_sec())
                .map_err(|e| anyhow::anyhow!("--link-rate: {e}"))
        })
        .transpose()?;
    let secret = Secret::load(&a.secret)?;
    qos_runtime::logging::init();
    let agent = Config {
        tls: a.tls.client_config()?,
        users: a.users.users(),
        ..Config::new(&a.node, &a.manager, secret, a.socket)
    };
    let kcfg = KernelConfig {
        basis,
        link_rate,
        ..KernelConfig::new(&interface, addrs)
    };
    qos_runtime::kernel::follow::run_agent_with_kernel(agent, kcfg)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs one node's agent with its data plane (or, `--backend kernel`, with the kernel
/// backend).
pub fn with_dataplane(a: NodeArgs) -> anyhow::Result<ExitCode> {
    if a.backend.backend == "kernel" {
        return kernel(KernelArgs {
            node: a.node,
            manager: a.manager,
            secret: a.secret,
            nodes: a.nodes,
            socket: a.socket,
            backend: a.backend,
            tls: a.tls,
            users: a.users,
        });
    }
    use qos_runtime::dataplane::engine::EngineConfig;
    use qos_runtime::dataplane::segment::{path_mtu, payload_for_mtu};
    use qos_runtime::dataplane::service::{scheduler_kind, DataPlaneConfig};
    use qos_runtime::shm::region::Layout;
    use qos_runtime::transport::link::Faults;

    let nodes = qos_runtime::testbed::services::parse_nodes(&a.nodes)?;
    let scheduler =
        scheduler_kind(&a.scheduler).map_err(|e| anyhow::anyhow!("--scheduler: {e}"))?;
    let link_rate = a
        .backend
        .link_rate
        .as_deref()
        .map(|r| r.parse().map_err(|e| anyhow::anyhow!("--link-rate: {e}")))
        .transpose()?;
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
            link_rate,
            ..EngineConfig::default()
        },
        faults,
        scheduler,
        layout: Layout::default(),
    };
    qos_runtime::dataplane::seam::run_agent_with_dataplane(agent, dp)?;
    Ok(ExitCode::SUCCESS)
}
