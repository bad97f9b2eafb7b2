//! `clusterqos agent`: runs a node's local manager (thesis §4.3): registers with the
//! master, keeps the node's IDT table, serves local applications on a Unix socket.

use std::path::PathBuf;
use std::process::ExitCode;

use qos_runtime::agent::{self, Config};
use qos_runtime::auth::Secret;

/// Default path of the agent's socket (also what `request`, `release`, `status` use).
pub const DEFAULT_SOCKET: &str = "/tmp/clusterqos-agent.sock";

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// This node's name in the master's topology.
    #[arg(long)]
    pub node: String,
    /// The master's URL, e.g. http://127.0.0.1:7400.
    #[arg(long)]
    pub manager: String,
    /// File holding the cluster's shared secret.
    #[arg(long)]
    pub secret: PathBuf,
    /// Unix socket for local applications.
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
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
    let secret = Secret::load(&args.secret)?;
    qos_runtime::logging::init();
    agent::run_blocking(Config {
        node: args.node,
        manager: args.manager,
        secret,
        socket: args.socket,
    })?;
    Ok(ExitCode::SUCCESS)
}
