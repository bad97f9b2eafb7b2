//! `clusterqos release`: gives back a flow this user owns (thesis §3.3).

use std::process::ExitCode;

use anyhow::Context;
use qos_runtime::client::Client;

use super::request::FlowArgs;
use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub flow: FlowArgs,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let flow = args.flow.flow()?;
    let mut c = Client::connect(&args.flow.socket)
        .with_context(|| format!("agent socket {}", args.flow.socket.display()))?;
    let released = c.release(&flow)?;
    if args.json {
        output::print_json(&serde_json::json!({ "released": released }))?;
    } else {
        println!("released: {released}");
    }
    Ok(ExitCode::SUCCESS)
}
