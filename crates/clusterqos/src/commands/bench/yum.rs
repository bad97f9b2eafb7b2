//! `clusterqos bench yum`: how fast the Yum et al. cluster simulates; the measurement is
//! [`qos_experiments::bench::yum`].

use std::process::ExitCode;

use qos_experiments::bench::yum::{self, Options};

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Offered load per node, a fraction of the link.
    #[arg(long, default_value_t = 0.6)]
    load: f64,
    /// Warm-up, simulated milliseconds (the scenario's is 10).
    #[arg(long, default_value_t = 10.0)]
    warmup_ms: f64,
    /// Measured, simulated milliseconds (the scenario's is 60).
    #[arg(long, default_value_t = 60.0)]
    measure_ms: f64,
    /// Without admission control (case "No A").
    #[arg(long)]
    no_admission: bool,
    /// Runs; the median time is reported.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Random seed.
    #[arg(long, default_value_t = 3)]
    seed: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let o = Options {
        load: a.load,
        warmup_ms: a.warmup_ms,
        measure_ms: a.measure_ms,
        no_admission: a.no_admission,
        repeat: a.repeat,
        seed: a.seed,
    };
    let out = yum::run(&o)?;
    if a.json {
        output::print_json(&out)?;
    } else {
        println!("{}", yum::summary(&o, &out));
    }
    Ok(ExitCode::SUCCESS)
}
