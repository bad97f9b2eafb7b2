//! `clusterqos sweep FILE --over KEY=V1,V2 --seeds 1..10 --workers N` (issue 16): one
//! scenario (a file or a shipped name, thesis or flit network) at every combination of
//! the given values and seeds, on N threads of this machine. The expansion and the runs
//! are `qos_experiments::sweep`; this parses, shows progress and prints one table
//! (a row per point or check), JSON or CSV. Results depend only on the scenario, the
//! values and the seeds, never on N.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use qos_experiments::sweep::{parse_seeds, Param, Source, Sweep};

use crate::output;

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
    let over = args
        .over
        .iter()
        .map(|a| Param::parse(a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(one_line)?;
    let seeds = args
        .seeds
        .as_deref()
        .map(parse_seeds)
        .transpose()
        .map_err(one_line)?;
    let workers = match args.workers {
        Some(0) => return Err(anyhow!("--workers must be at least 1")),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let sweep = Sweep {
        source: Source::resolve(&args.scenario).map_err(one_line)?,
        over,
        seeds,
        quick: args.quick,
    };
    let bar = ProgressBar::new(0);
    if args.json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
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
        let mut t = output::table(table.columns.clone());
        for row in &table.rows {
            t.add_row(row.clone());
        }
        output::align_numbers(&mut t, 0);
        println!("{t}");
        println!(
            "{} runs of {} on {workers} workers",
            result.runs.len(),
            result.scenario
        );
    }
    // Wall time on stderr: the JSON and the table depend only on the inputs.
    eprintln!("done in {:.1} s", start.elapsed().as_secs_f64());
    Ok(if result.misses() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The error's own message only: it already contains its causes (`file:line: ...`),
/// which `{:#}` would repeat.
fn one_line(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("{e}")
}
