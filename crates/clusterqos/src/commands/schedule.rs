//! `clusterqos schedule` — the rate-control dispatch table for a set of flows (thesis
//! §3.2.2, Fig 3.3, Table 3.1), computed by `qos_experiments::schedule`; with no
//! arguments the flows are A (IDT 2) and B (IDT 3) over 12 steps: thesis Table 3.1.

use std::process::ExitCode;

use anyhow::Context;
use qos_experiments::schedule::Schedule;

use crate::output;

/// Print the rate-control dispatch table for a set of flows (thesis Table 3.1).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "With no --flow, uses A=2 and B=3, which over 12 steps is thesis Table 3.1.\n\
                  Every flow is always backlogged; one decision is made per time unit."
)]
pub struct Args {
    /// A flow and its inter-packet dispatch time in time units, e.g. `--flow A=2`
    /// (repeatable; IDT a positive integer).
    #[arg(long = "flow", value_name = "NAME=IDT")]
    flows: Vec<String>,
    /// Number of time steps (decisions) to show [default: 12].
    #[arg(long, value_name = "N")]
    steps: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let s = Schedule::new(&args.flows, args.steps.as_deref())?;
    if args.json {
        output::print_json(&s.report()).context("writing JSON")?;
    } else {
        println!("{}", s.heading());
        output::print_table(&s.to_table(), if s.wide() { 1 } else { 0 });
        println!("{}", s.conclusion());
    }
    Ok(ExitCode::SUCCESS)
}
