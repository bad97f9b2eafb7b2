//! `clusterqos bench yum`: how fast the Yum et al. cluster simulates; the measurement and
//! its options are [`qos_experiments::bench::yum`].

use std::process::ExitCode;

use qos_experiments::bench::yum::{self, Options};

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    options: Options,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let out = yum::run(&a.options)?;
    if a.json {
        output::print_json(&out)?;
    } else {
        println!("{}", yum::summary(&a.options, &out));
    }
    Ok(ExitCode::SUCCESS)
}
