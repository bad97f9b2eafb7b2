//! `clusterqos exec`: runs an unmodified program under a flow
//! (`qos_runtime::client::exec`). Exit status: the program's (128 + N when signal N ended
//! it); 1 when the request is rejected (the program is not run); 2 on an error (nothing
//! granted is left behind). SIGINT, SIGTERM and SIGHUP are passed on to the program.

use std::process::ExitCode;

use qos_core::units::Bandwidth;
use qos_runtime::client::exec::{self, Ended, Want};

use super::request::FlowArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(trailing_var_arg = true)]
pub struct Args {
    #[command(flatten)]
    pub flow: FlowArgs,
    /// Premium bandwidth to reserve ("10MB/s"); without it the flow is best-effort.
    #[arg(long)]
    pub bandwidth: Option<String>,
    /// Best-effort weight (max-min policy).
    #[arg(long, default_value_t = 1, conflicts_with = "bandwidth")]
    pub weight: u32,
    /// A name for the flow.
    #[arg(long)]
    pub name: Option<String>,
    /// The program and its arguments (after `--`).
    #[arg(required = true, num_args = 1.., value_name = "CMD")]
    pub command: Vec<String>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut flow = args.flow.flow()?;
    flow.name = args.name.clone();
    let want = match args.bandwidth.as_deref() {
        Some(b) => Want::Premium(
            b.parse::<Bandwidth>()
                .map_err(|e| anyhow::anyhow!("--bandwidth: {e}"))?
                .bytes_per_sec(),
        ),
        None => Want::BestEffort(args.weight),
    };
    let ended = exec::run(&args.flow.socket, &flow, want, &args.command, |g| {
        eprintln!(
            "clusterqos exec: {} {} at {}",
            g.flow,
            g.class,
            Bandwidth::from_bytes_per_sec(g.rate)
        )
    })?;
    Ok(match ended {
        Ended::Rejected(r) => {
            eprintln!("clusterqos exec: rejected: {}", r.message);
            ExitCode::from(1)
        }
        Ended::Exited(code) => ExitCode::from(code),
    })
}
