//! Starting a node's agent from its command-line options (`clusterqos agent`, and
//! `clusterqos testbed node` inside a testbed namespace; thesis §4.3): the options are
//! checked (every error names its flag), turned into the agent's [`Config`] and — with
//! `nodes`, every node's data address — the configuration of the backend that enforces
//! the grants: the agent's own data plane (user-level ports, rate control with the IDTs
//! the master pushes, reliable transport; thesis §3.2.1, §4.2, docs/dataplane.md) or,
//! [`Backend::Kernel`], Linux traffic control on an interface for unmodified programs
//! (docs/kernel-backend.md). Then the agent runs until it is stopped.

use std::path::PathBuf;
use std::sync::Arc;

use super::serve::{serve, ServeError};
use crate::agent::enforcer::Enforcer;
use crate::agent::socket::Users;
use crate::agent::Config;
use crate::auth::{Secret, SecretError};
use crate::dataplane::engine::EngineConfig;
use crate::dataplane::seam::DataPlaneEnforcer;
use crate::dataplane::segment::{path_mtu, payload_for_mtu};
use crate::dataplane::service::{scheduler_kind, DataPlaneConfig, PortLimits};
use crate::kernel::enforcer::KernelEnforcer;
use crate::kernel::plan::{Addrs, RateBasis};
use crate::kernel::{KernelConfig, KernelError};
use crate::shm::region::Layout;
use crate::testbed::TestbedError;
use crate::tls::{ClientConfig, TlsError};
use crate::transport::auth::DataKey;
use crate::transport::link::Faults;

/// Default path of the agent's socket (also what `request`, `release`, `status` use).
pub const DEFAULT_SOCKET: &str = "/tmp/clusterqos-agent.sock";

/// Default path of the data plane's port socket (what `qos_client::Port::open` uses).
pub const DEFAULT_DATAPLANE_SOCKET: &str = "/tmp/clusterqos-dataplane.sock";

pub use crate::agent::enforcer::Backend;

/// Which enforcement backend an agent runs.
#[derive(Debug, Clone, clap::Args)]
pub struct BackendOptions {
    /// "dataplane" (the agent's own ports, rate control, reliable UDP) or "kernel"
    /// (htb classes and u32 filters on --interface, for unmodified programs).
    #[arg(long, value_enum, default_value = "dataplane")]
    pub backend: Backend,
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

/// TLS towards an `https://` manager.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsOptions {
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

/// Everything an agent is started with: `clusterqos agent`'s options (and `testbed
/// node`'s), parsed by clap.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
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
    /// agent also enforces the grants (data plane or kernel backend); without it, the
    /// control plane only.
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
    /// File holding the data plane's own key material (at least 16 printable
    /// characters), the same on every node; default: derived from --secret. Every
    /// datagram between agents is sealed with a key derived from it.
    #[arg(long, requires = "nodes")]
    pub data_key: Option<PathBuf>,
    /// Largest difference, in seconds, between a datagram's send time and this node's
    /// clock: older datagrams are refused as replays (the nodes' clocks must agree
    /// this well).
    #[arg(long, default_value_t = crate::transport::auth::DEFAULT_MAX_SKEW_SECS, requires = "nodes")]
    pub max_clock_skew: u32,
    /// What sealing adds to the datagrams this node sends: "authenticated" (a tag over
    /// the whole datagram, payload in clear) or "encrypted" (the payload encrypted
    /// too, at a higher CPU cost; see docs/dataplane.md). Nodes may differ: each opens
    /// both kinds.
    #[arg(long, value_enum, default_value_t = crate::transport::auth::Protection::Authenticated, requires = "nodes")]
    pub data_protection: crate::transport::auth::Protection,
    /// Data-plane ports one user may hold open at once on this node.
    #[arg(long, default_value_t = PortLimits::default().per_uid, requires = "nodes")]
    pub max_ports_per_uid: usize,
    /// Data-plane ports one process may hold open at once on this node.
    #[arg(long, default_value_t = PortLimits::default().per_process, requires = "nodes")]
    pub max_ports_per_process: usize,
    /// How grants are enforced: by the agent's own data plane, or by Linux traffic
    /// control on --interface.
    #[command(flatten)]
    pub backend: BackendOptions,
    /// TLS towards an https:// manager.
    #[command(flatten)]
    pub tls: TlsOptions,
    /// A uid that may reserve bandwidth (and so own ports) on this node, besides the
    /// agent's own uid and root; repeat for more.
    #[arg(long = "allow-uid", value_name = "UID")]
    pub allow_uids: Vec<u32>,
    /// Let every local user reserve bandwidth (a port, once reserved, still belongs to
    /// its user).
    #[arg(long, conflicts_with = "allow_uids")]
    pub allow_all_users: bool,
}

/// Why an agent could not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// An option is wrong (the message names the flag).
    #[error("{0}")]
    Invalid(String),
    /// The secret file.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The TLS files.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The node list.
    #[error(transparent)]
    Nodes(#[from] TestbedError),
    /// The kernel backend could not be installed.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The data plane could not bind its sockets.
    #[error("data plane: {0}")]
    DataPlane(std::io::Error),
    /// The agent, or its enforcement backend, failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

fn invalid<T>(message: impl Into<String>) -> Result<T, LaunchError> {
    Err(LaunchError::Invalid(message.into()))
}

impl Options {
    /// The users who may reserve bandwidth (and so own ports) through the agent.
    pub fn users(&self) -> Users {
        if self.allow_all_users {
            return Users::Anyone;
        }
        let mut v = match Users::default() {
            Users::Only(v) => v,
            Users::Anyone => Vec::new(),
        };
        v.extend(&self.allow_uids);
        Users::Only(v)
    }

    /// The TLS client settings, if a CA is given.
    pub fn tls_config(&self) -> Result<Option<Arc<ClientConfig>>, TlsError> {
        let Some(ca) = &self.tls.tls_ca else {
            return Ok(None);
        };
        let identity = (self.tls.tls_cert.as_deref()).zip(self.tls.tls_key.as_deref());
        Ok(Some(crate::tls::client_config(ca, identity)?))
    }

    /// The agent's configuration (reads the secret and the TLS files).
    fn agent_config(&self) -> Result<Config, LaunchError> {
        let secret = Secret::load(&self.secret)?;
        crate::logging::init();
        Ok(Config {
            tls: self.tls_config()?,
            users: self.users(),
            ..Config::new(&self.node, &self.manager, secret, self.socket.clone())
        })
    }
}

/// Runs the agent the options describe: checks the node name, the manager's URL and
/// TLS, then runs the control plane alone, or with the data plane or the kernel backend
/// when `nodes` is given; returns when the agent stops.
pub fn run(o: Options) -> Result<(), LaunchError> {
    crate::protocol::check_name("node name", &o.node)
        .or_else(|e| invalid(format!("--node: {}", e.message)))?;
    if !(o.manager.starts_with("http://") || o.manager.starts_with("https://")) {
        return invalid(format!(
            "--manager must be a URL such as http://127.0.0.1:7400, not '{}'",
            o.manager
        ));
    }
    if o.manager.starts_with("https://") != o.tls.tls_ca.is_some() {
        return invalid(
            "an https:// --manager needs --tls-ca, and --tls-ca needs an https:// --manager",
        );
    }
    if o.backend.backend == Backend::Kernel {
        let Some(nodes) = &o.nodes else {
            return invalid("--backend kernel needs --nodes (every node's address)");
        };
        return kernel(&o, nodes);
    }
    if o.backend.interface.is_some() {
        return invalid("--interface is for --backend kernel");
    }
    if let Some(nodes) = &o.nodes {
        return dataplane(&o, nodes);
    }
    let cfg = o.agent_config()?;
    serve(cfg, None)?;
    Ok(())
}

/// The agent with the kernel backend on the interface.
fn kernel(o: &Options, nodes: &str) -> Result<(), LaunchError> {
    let Some(interface) = o.backend.interface.clone() else {
        return invalid(
            "--backend kernel needs --interface (the interface this node's traffic leaves by)",
        );
    };
    let addrs = Addrs::parse(&o.node, nodes).map_err(LaunchError::Invalid)?;
    let Some(basis) = RateBasis::parse(&o.backend.rate_basis) else {
        return invalid(format!(
            "--rate-basis must be tcp, udp or wire, not '{}'",
            o.backend.rate_basis
        ));
    };
    let link_rate = match o.backend.link_rate.as_deref() {
        Some(r) => match r.parse::<qos_core::units::Bandwidth>() {
            Ok(b) => Some(b.bytes_per_sec()),
            Err(e) => return invalid(format!("--link-rate: {e}")),
        },
        None => None,
    };
    let agent = o.agent_config()?;
    let kcfg = KernelConfig {
        basis,
        link_rate,
        ..KernelConfig::new(&interface, addrs)
    };
    let enforcer: Box<dyn Enforcer> = Box::new(KernelEnforcer::install(kcfg)?);
    serve(agent, Some(enforcer))?;
    Ok(())
}

/// The agent with its data plane.
fn dataplane(o: &Options, nodes: &str) -> Result<(), LaunchError> {
    let nodes = crate::testbed::services::parse_nodes(nodes)?;
    let scheduler =
        scheduler_kind(&o.scheduler).or_else(|e| invalid(format!("--scheduler: {e}")))?;
    let link_rate = match o.backend.link_rate.as_deref() {
        Some(r) => Some(
            r.parse()
                .or_else(|e| invalid(format!("--link-rate: {e}")))?,
        ),
        None => None,
    };
    let faults = Faults::parse(&o.faults).or_else(|e| invalid(format!("--faults: {e}")))?;
    let payload = o.payload.unwrap_or_else(|| {
        let other = nodes.iter().find(|(n, _)| *n != o.node).map(|(_, x)| *x);
        payload_for_mtu(other.and_then(path_mtu).unwrap_or(1500))
    });
    let agent = o.agent_config()?;
    let key = match &o.data_key {
        Some(path) => DataKey::load(path)?,
        None => DataKey::from_secret(&agent.secret),
    };
    // The same users may reserve bandwidth as may open data-plane ports (the data
    // plane's default `allowed_uids`: the agent's own uid and root, plus the allowed).
    let allowed_uids = match &agent.users {
        Users::Only(v) => v.iter().copied().chain([0]).collect(),
        Users::Anyone => vec![],
    };
    let dp = DataPlaneConfig {
        node: o.node.clone(),
        nodes,
        socket: o.dataplane_socket.clone(),
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
        key,
        max_clock_skew_secs: o.max_clock_skew,
        protection: o.data_protection,
        limits: PortLimits {
            per_uid: o.max_ports_per_uid,
            per_process: o.max_ports_per_process,
            ..PortLimits::default()
        },
    };
    let enforcer = DataPlaneEnforcer::bind(dp).map_err(LaunchError::DataPlane)?;
    serve(agent, Some(Box::new(enforcer)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            node: "n0".into(),
            manager: "http://127.0.0.1:1".into(),
            secret: PathBuf::from("/nonexistent/secret"),
            socket: PathBuf::from("/nonexistent/agent.sock"),
            nodes: None,
            dataplane_socket: PathBuf::from("/nonexistent/dp.sock"),
            scheduler: "rate".into(),
            faults: String::new(),
            payload: None,
            data_key: None,
            max_clock_skew: crate::transport::auth::DEFAULT_MAX_SKEW_SECS,
            data_protection: Default::default(),
            max_ports_per_uid: PortLimits::default().per_uid,
            max_ports_per_process: PortLimits::default().per_process,
            backend: BackendOptions {
                backend: Backend::Dataplane,
                interface: None,
                link_rate: None,
                rate_basis: "tcp".into(),
            },
            tls: TlsOptions::default(),
            allow_uids: vec![],
            allow_all_users: false,
        }
    }

    /// The error `run` gives for `o`: every case here fails before anything starts.
    fn error(o: Options) -> String {
        run(o).unwrap_err().to_string()
    }

    #[test]
    fn bad_options_are_refused_naming_their_flag_before_anything_starts() {
        let kernel = |o: &mut Options| o.backend.backend = Backend::Kernel;
        type Spoil = fn(&mut Options);
        let cases: [(Spoil, &str); 10] = [
            (|o| o.node = String::new(), "--node: "),
            (
                |o| o.manager = "127.0.0.1:7400".into(),
                "--manager must be a URL",
            ),
            (
                |o| o.manager = "https://m:1".into(),
                "an https:// --manager needs --tls-ca",
            ),
            (kernel, "--backend kernel needs --nodes"),
            (
                |o| {
                    o.backend.backend = Backend::Kernel;
                    o.nodes = Some("n0=10.0.0.1:7500".into());
                },
                "--backend kernel needs --interface",
            ),
            (
                |o| o.backend.interface = Some("eth0".into()),
                "--interface is for --backend kernel",
            ),
            (
                |o| o.nodes = Some("n0".into()),
                "--nodes: `n0` is not name=address:port",
            ),
            (
                |o| {
                    o.nodes = Some("n0=127.0.0.1:7500".into());
                    o.scheduler = "fifo".into();
                },
                "--scheduler: unknown scheduler 'fifo'",
            ),
            (
                |o| {
                    o.nodes = Some("n0=127.0.0.1:7500".into());
                    o.faults = "drop".into();
                },
                "--faults: ",
            ),
            (|_| {}, "secret file /nonexistent/secret"),
        ];
        for (spoil, expected) in cases {
            let mut o = opts();
            spoil(&mut o);
            let e = error(o);
            assert!(e.starts_with(expected), "{expected:?}: {e}");
        }
    }

    #[test]
    fn kernel_backend_options_are_checked_in_order() {
        let mut o = opts();
        o.backend.backend = Backend::Kernel;
        o.backend.interface = Some("eth0".into());
        o.nodes = Some("n0=10.0.0.1:7500".into());
        o.backend.rate_basis = "frames".into();
        assert!(error(o.clone()).starts_with("--rate-basis must be tcp, udp or wire"));
        o.backend.rate_basis = "udp".into();
        o.backend.link_rate = Some("fast".into());
        assert!(error(o.clone()).starts_with("--link-rate: "));
        o.backend.link_rate = Some("1Gbit/s".into());
        // Everything checked; the secret is read next.
        assert!(error(o).starts_with("secret file "));
    }

    #[test]
    fn the_command_line_fills_the_options_and_refuses_what_does_not_go_together() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            o: Options,
        }
        let parse = |args: &str| {
            let words = ["agent"].into_iter().chain(args.split_whitespace());
            <Cli as clap::Parser>::try_parse_from(words).map(|c| c.o)
        };
        let o = parse("--node n0 --manager http://m:1 --secret s").unwrap();
        assert_eq!(o.socket, PathBuf::from(DEFAULT_SOCKET));
        assert_eq!(
            (o.backend.backend, o.scheduler.as_str()),
            (Backend::Dataplane, "rate")
        );
        let o = parse(
            "--node n0 --manager https://m:1 --secret s --nodes n0=10.0.0.1:7500 \
             --backend kernel --interface eth0 --tls-ca ca --tls-cert c --tls-key k \
             --allow-uid 7 --allow-uid 8",
        )
        .unwrap();
        assert_eq!(o.backend.backend, Backend::Kernel);
        assert_eq!(o.tls.tls_key, Some(PathBuf::from("k")));
        assert_eq!(o.allow_uids, [7, 8]);
        for bad in [
            "--node n0 --manager http://m:1 --secret s --tls-cert c --tls-key k",
            "--node n0 --manager http://m:1 --secret s --scheduler gm",
            "--node n0 --manager http://m:1 --secret s --allow-uid 7 --allow-all-users",
            "--node n0 --manager http://m:1 --secret s --backend tc",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn users_are_the_agents_own_plus_the_allowed_or_anyone() {
        let mut o = opts();
        o.allow_uids = vec![4242];
        let Users::Only(v) = o.users() else {
            panic!("only some users")
        };
        assert!(v.contains(&4242) && v.len() == 2, "{v:?}");
        o.allow_all_users = true;
        assert_eq!(o.users(), Users::Anyone);
    }
}
