//! What `run` and `reproduce` share: their common flags ([`Common`]), the worker count,
//! and how a finished run is printed and turned into an exit code ([`finish`]). A leaf
//! of the commands: both use it, it uses neither.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::bail;
use qos_experiments::experiment::RunOptions;
use qos_experiments::reproduce::Outcome;

use crate::output;

/// The flags of every command that runs experiments and checks them.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// Report directory (default: report-<paper>, or report-<first scenario's name>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when a check misses (for CI); without it a run that completes exits 0,
    /// its misses shown in the table and the summary line.
    #[arg(long)]
    pub check: bool,
    /// Seed of every run (default: each scenario's own, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Reduced run lengths (a quick look; published tolerances still apply).
    #[arg(long)]
    pub quick: bool,
    /// Threads for independent runs (default: every core); the results do not depend
    /// on it.
    #[arg(long)]
    pub workers: Option<usize>,
}

impl Common {
    /// The run options these flags ask for, with `threads` per flit network run.
    pub fn run_options(&self, threads: Option<usize>) -> anyhow::Result<RunOptions> {
        if threads == Some(0) {
            bail!("--threads must be at least 1");
        }
        Ok(RunOptions {
            seed: self.seed,
            quick: self.quick,
            workers: workers(self.workers)?,
            threads,
        })
    }

    /// Prints `o` (table or JSON) and gives the exit code: 0 when the run completed, 1
    /// on a miss only with `--check`.
    pub fn finish(&self, o: &Outcome, start: Instant) -> anyhow::Result<ExitCode> {
        if self.json {
            output::print_json(&o.json)?;
        } else {
            print(o);
        }
        let speed = o
            .speed
            .as_deref()
            .map_or(String::new(), |s| format!(" {s}"));
        eprintln!("done in {:.1} s{speed}", start.elapsed().as_secs_f64());
        Ok(if self.check && o.misses() > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// The number of worker threads: `--workers`, else every core.
pub fn workers(asked: Option<usize>) -> anyhow::Result<usize> {
    match asked {
        Some(0) => bail!("--workers must be at least 1"),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// Prints a finished run as text: its tables, lines, sensitivity and summary.
fn print(o: &Outcome) {
    for t in &o.before {
        output::print_table(t, 2);
    }
    if let Some(t) = &o.table {
        output::print_table(t, 5);
    }
    for l in &o.lines {
        println!("{l}");
    }
    if let Some(s) = &o.sensitivity {
        let flips = s.flipped_table();
        if !flips.rows.is_empty() {
            output::print_table(&flips, 3);
        }
        println!("{}", s.counts);
    }
    if o.table.is_some() {
        println!("{}", o.summary_line());
    } else {
        println!("report in {}", o.out.display());
    }
}
