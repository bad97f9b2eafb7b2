//! `clusterqos calibrate`: measures a node's rate-control parameters T and Bmax the way
//! thesis §5.3 does and writes them into the manager's topology file
//! (`qos_experiments::calibrate`): on loopback, or with `--testbed DIR` between the
//! testbed's hosts h0 → h1 (through its shaped links).

use std::path::PathBuf;
use std::process::ExitCode;

use qos_experiments::calibrate::{self, Options};

use crate::output;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run between the testbed's hosts h0 and h1 (directory of `testbed up`).
    #[arg(long)]
    pub testbed: Option<PathBuf>,
    /// Message size.
    #[arg(long, default_value = "64KiB")]
    pub message_size: String,
    /// Messages per sweep point.
    #[arg(long, default_value_t = 300)]
    pub messages: usize,
    /// Payload bytes per packet (default: from the path MTU).
    #[arg(long)]
    pub payload: Option<usize>,
    /// Topology file of the manager to write T and Bmax into.
    #[arg(long)]
    pub topology: Option<PathBuf>,
    /// Write into this `[[host]]` entry instead of `[defaults]`.
    #[arg(long)]
    pub node: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let c = calibrate::run(&Options {
        testbed: args.testbed,
        message_size: args.message_size,
        messages: args.messages,
        payload: args.payload,
        topology: args.topology.clone(),
        node: args.node,
    })?;
    if args.json {
        output::print_json(&c.calibration)?;
    } else {
        output::print_table(&c.sweep_table(), 0);
        println!("{}", c.summary());
        if let Some(p) = &args.topology {
            println!(
                "wrote t = \"{}\", bmax = \"{}\" into {}",
                c.t,
                c.bmax,
                p.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
