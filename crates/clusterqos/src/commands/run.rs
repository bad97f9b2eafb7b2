//! `clusterqos run FILE.toml [NAME...]`: a user's scenarios, or shipped ones by name,
//! of any model — each file's `model` key says which (`qos_experiments::run`) — run
//! through the same path as `reproduce`: the table of checks (or of every point of a
//! flit sweep), the summary line, a report directory; progress on stderr. Scenario
//! errors print one `file:line` line and exit 2; a miss exits 1 only with `--check`.

use std::process::ExitCode;
use std::time::Instant;

use qos_experiments::experiment::Source;
use qos_experiments::flit::Flit;
use qos_experiments::gulati::Gulati;
use qos_experiments::nagar::Nagar;
use qos_experiments::reproduce::{run_experiment, Job};
use qos_experiments::run::{self as runs, Batch};
use qos_experiments::yum::Yum;

use super::experiment::Common;
use crate::output;
use crate::progress::Display;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario files, or names of shipped scenarios (e.g. `idt-sweep`).
    #[arg(required = true)]
    pub scenarios: Vec<String>,
    #[command(flatten)]
    pub common: Common,
    /// Threads of each flit network run (flit scenarios; blocks of router rows per
    /// thread): the same result for every count, and as without the flag.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Also run each assumption the scenarios declare at the ends of its range (one at a
    /// time, same seed) and report which verdicts it flips.
    #[arg(long)]
    pub sensitivity: bool,
    /// Set a declared assumption to another value for this run (repeatable):
    /// `--set knee-theta=0.05`, `--set frame-message=4KiB`.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let sets = args
        .set
        .iter()
        .map(|a| runs::parse_set(a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let (batch, sources) = runs::load_with(&args.scenarios, &sets).map_err(output::one_line)?;
    let out = runs::report_out(batch.names().into_iter(), args.common.out.clone());
    let opt = args.common.run_options(args.threads)?;
    let progress = Display::new("run", args.common.json);
    let title = "clusterqos run";
    fn job<'a, S>(scenarios: &'a [S], sources: &'a [Source], sensitivity: bool) -> Job<'a, S> {
        Job {
            scenarios,
            sources,
            sensitivity,
        }
    }
    let s = args.sensitivity;
    let outcome = match &batch {
        Batch::Gulati(l) => {
            run_experiment(&Gulati, &job(l, &sources, s), &opt, &out, title, &progress)
        }
        Batch::Flit(l) => run_experiment(&Flit, &job(l, &sources, s), &opt, &out, title, &progress),
        Batch::Yum(l) => run_experiment(&Yum, &job(l, &sources, s), &opt, &out, title, &progress),
        Batch::Nagar(l) => {
            run_experiment(&Nagar, &job(l, &sources, s), &opt, &out, title, &progress)
        }
    };
    progress.finish();
    args.common
        .finish(&outcome.map_err(output::one_line)?, start)
}
