//! `clusterqos request`: asks the local agent for a premium reservation or a best-effort
//! flow (thesis §3.3, §3.4) and prints the decision; exit 0 when granted, 1 when rejected.
//! The flow lives as long as the process it is attributed to: this command's caller (the
//! shell or script), or `--pid`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use qos_core::units::Bandwidth;
use qos_runtime::client::{Client, LocalFlow};
use qos_runtime::protocol::Decision;

use crate::output;

/// Arguments shared by `request` and `release`: which flow.
#[derive(Debug, clap::Args)]
pub struct FlowArgs {
    /// Destination NODE or NODE:PORT.
    #[arg(long)]
    pub to: String,
    /// Source port on this node.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Priority level.
    #[arg(long, default_value_t = 0)]
    pub priority: u8,
    /// The agent's Unix socket.
    #[arg(long, default_value = super::agent::DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

impl FlowArgs {
    /// The flow as the client library names it.
    pub fn flow(&self) -> anyhow::Result<LocalFlow> {
        Ok(LocalFlow::parse(self.port, &self.to, self.priority)?)
    }
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub flow: FlowArgs,
    /// Premium bandwidth to reserve ("40MB/s", "320Mbit/s").
    #[arg(
        long,
        conflicts_with = "best_effort",
        required_unless_present = "best_effort"
    )]
    pub bandwidth: Option<String>,
    /// Ask for a best-effort flow instead.
    #[arg(long)]
    pub best_effort: bool,
    /// Best-effort weight (max-min policy).
    #[arg(long, default_value_t = 1, requires = "best_effort")]
    pub weight: u32,
    /// A name for the flow.
    #[arg(long)]
    pub name: Option<String>,
    /// Attribute the flow to this process (default: the caller of this command).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Print the decision as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut flow = args.flow.flow()?;
    flow.name = args.name.clone();
    let mut c = Client::connect(&args.flow.socket)
        .with_context(|| format!("agent socket {}", args.flow.socket.display()))?;
    c.on_behalf_of(args.pid.unwrap_or_else(std::os::unix::process::parent_id));
    let decision = match &args.bandwidth {
        Some(b) => {
            let bw: Bandwidth = b.parse()?;
            c.request_bandwidth(&flow, bw.bytes_per_sec())?
        }
        None => c.best_effort(&flow, args.weight)?,
    };
    if args.json {
        output::print_json(&decision)?;
    } else {
        match &decision {
            Decision::Granted(g) => println!(
                "granted: {} ({}) rate {} IDT {}",
                g.flow,
                g.class,
                Bandwidth::from_bytes_per_sec(g.rate),
                g.idt_ps
                    .map(|p| qos_core::units::Duration::from_ps(p).to_string())
                    .unwrap_or_else(|| "none (zero share)".into())
            ),
            Decision::Rejected(r) => println!("rejected: {}", r.message),
        }
    }
    Ok(match decision {
        Decision::Granted(_) => ExitCode::SUCCESS,
        Decision::Rejected(_) => ExitCode::from(1),
    })
}
