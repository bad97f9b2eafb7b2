//! `clusterqos agent`: a node's local manager (thesis §4.3) and, given `--nodes`, its data
//! plane or (`--backend kernel`) Linux traffic control enforcing the grants. The options
//! are checked and the agent run by `qos_runtime::agent::launch`.

use std::path::PathBuf;
use std::process::ExitCode;

use qos_runtime::agent::launch::{self, Backend, BackendOptions, Options, TlsOptions};

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

/// Runs the command (also `testbed node`, which starts it in a testbed's host).
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let b = a.backend;
    launch::run(Options {
        node: a.node,
        manager: a.manager,
        secret: a.secret,
        socket: a.socket,
        nodes: a.nodes,
        dataplane_socket: a.dataplane_socket,
        scheduler: a.scheduler,
        faults: a.faults,
        payload: a.payload,
        backend: BackendOptions {
            backend: match b.backend.as_str() {
                "kernel" => Backend::Kernel,
                _ => Backend::Dataplane,
            },
            interface: b.interface,
            link_rate: b.link_rate,
            rate_basis: b.rate_basis,
        },
        tls: TlsOptions {
            ca: a.tls.tls_ca,
            identity: a.tls.tls_cert.zip(a.tls.tls_key),
        },
        allow_uids: a.users.allow_uid,
        allow_all_users: a.users.allow_all_users,
    })?;
    Ok(ExitCode::SUCCESS)
}
