//! `clusterqos sweep FILE --over KEY=V1,V2 --seeds 1..10 --workers N`: one
//! scenario at every combination of the values and seeds on N threads
//! (`qos_experiments::sweep`); one table, JSON or CSV, independent of N.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, Context};
use qos_experiments::sweep::Sweep;

use qos_core::text::count;

use crate::output::{self, one_line};

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
    /// Also write the table as CSV to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let workers = match args.workers {
        Some(0) => return Err(anyhow!("--workers must be at least 1")),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let sweep = Sweep::parse(
        &args.scenario,
        &args.over,
        args.seeds.as_deref(),
        args.quick,
    )
    .map_err(one_line)?;
    let template = "{spinner} [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta})";
    let bar = output::bar(0, args.json, template);
    let start = Instant::now();
    let result = sweep
        .run(workers, &|done, n| {
            bar.set_length(n as u64);
            bar.set_position(done as u64);
        })
        .map_err(one_line)?;
    bar.finish_and_clear();
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
    Ok(ExitCode::from(u8::from(result.misses() > 0)))
}
