//! `clusterqos bench manager`: admission decisions per second and end-to-end decision
//! latency of the master. The benchmark is
//! `qos_experiments::bench::manager`; this parses its flags and prints the table.

use std::process::ExitCode;

use qos_experiments::bench::manager::{self, Options};

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub options: Options,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if std::env::var_os("RUST_LOG").is_some() {
        qos_runtime::logging::init();
    }
    let opts = args.options;
    let reports = manager::run(&opts)?;
    if args.json {
        output::print_json(&reports)?;
    } else {
        println!("{}", manager::headline(&reports, &opts));
        output::print_table(&manager::table(&reports), 1);
        for line in manager::etcd_accounts(&reports) {
            println!("{line}");
        }
        println!("{}", manager::LEGEND);
    }
    Ok(ExitCode::SUCCESS)
}
