//! `clusterqos sweep FILE --over KEY=V1,V2 --seeds 1..10 --workers N`: one
//! scenario at every combination of the values and seeds on N threads
//! (`qos_experiments::sweep`); one table, JSON or CSV, independent of N.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use qos_core::text::count;
use qos_experiments::experiment::Progress;
use qos_experiments::sweep::Sweep;

use crate::output::{self, one_line};
use crate::progress::Display;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario file, or the name of a shipped thesis scenario (e.g. `idt-sweep`).
    pub scenario: String,
    /// A key of the scenario and the values it takes: `network.router.buffer=4,8`,
    /// `network.classes.data.rate=0.002,0.004` (array elements by index or `name`),
    /// `message=4KiB,64KiB`. Repeat for more keys; every combination runs.
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub over: Vec<String>,
    /// Seeds of every combination: `1..10` (1 to 10), `1..=10`, `1,2,5` or `7`
    /// (default: the scenario's own seed).
    #[arg(long)]
    pub seeds: Option<String>,
    /// Worker threads (default: every core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Reduced run lengths.
    #[arg(long)]
    pub quick: bool,
    /// Print every run's results as JSON (each as `clusterqos run --json` prints it).
    #[arg(long)]
    pub json: bool,
    /// Also write the table as CSV to this file (numbers in full, one column per field).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Exit 1 when a check misses in any run (for CI).
    #[arg(long)]
    pub check: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let workers = super::experiment::workers(args.workers)?;
    let sweep = Sweep::parse(
        &args.scenario,
        &args.over,
        args.seeds.as_deref(),
        args.quick,
    )
    .map_err(one_line)?;
    let progress = Display::new(format!("sweep {}", args.scenario), args.json);
    let planned = std::sync::Once::new();
    let start = Instant::now();
    let result = sweep
        .run(workers, &|done, n| {
            planned.call_once(|| progress.plan(n as u64));
            progress.done(&format!("run {done} of {n}"));
        })
        .map_err(one_line)?;
    progress.finish();
    let table = result.table();
    if let Some(path) = &args.csv {
        std::fs::write(path, table.to_csv())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        output::print_json(&result)?;
    } else {
        output::print_table(&table, 0);
        let (n, scenario) = (result.runs.len(), &result.scenario);
        println!(
            "{} of {scenario} on {}",
            count(n, "run"),
            count(workers, "worker")
        );
    }
    // Wall time on stderr: the JSON and the table depend only on the inputs.
    eprintln!("done in {:.1} s", start.elapsed().as_secs_f64());
    Ok(ExitCode::from(u8::from(args.check && result.misses() > 0)))
}
