//! `clusterqos bench network`: how fast the flit-level network simulates (Yum et al.
//! §6.1). The benchmark and its options are
//! `qos_experiments::bench::network`; this prints its summary and scaling table, or JSON.

use std::process::ExitCode;

use qos_experiments::bench::network::{self, Options};

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
    let opts = a.options;
    let out = network::run(&opts)?;
    if a.json {
        output::print_json(&out)?;
    } else {
        print!("{}", out.summary(&opts));
        if let Some(t) = out.scaling_table(&opts) {
            println!("{}", t.title);
            output::print_table(&t, 1);
        }
    }
    Ok(ExitCode::SUCCESS)
}
