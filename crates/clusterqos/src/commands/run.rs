//! `clusterqos run FILE.toml [NAME...]`: a user's scenarios (`qos_experiments::run`):
//! thesis scenarios as `reproduce` runs the thesis's, or flit-network ones with progress (a
//! bar on a terminal, lines otherwise, nothing with `--json`) and a
//! latency-vs-load table each, or Yum et al. scenarios as `reproduce yum` runs the
//! shipped ones. Scenario errors print one `file:line` line and exit 2.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use qos_experiments::reproduce;
use qos_experiments::run::{self as runs, Batch};
use qos_sim::flit::runner::{FlitBatch, RunOptions};
use qos_sim::flit::scenario::Progress;

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario files, or names of shipped scenarios (e.g. `idt-sweep`).
    #[arg(required = true)]
    pub scenarios: Vec<String>,
    /// Report directory (default: report-<first scenario name>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Seed (default: the scenario's own, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Reduced run lengths.
    #[arg(long)]
    pub quick: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let opts = RunOptions {
        out: args.out.clone(),
        quick: args.quick,
        seed: args.seed,
    };
    match runs::load(&args.scenarios, &opts).map_err(output::one_line)? {
        Batch::Flit(batch) => run_flit(&batch, args.json),
        Batch::Yum(list) => {
            let out = runs::report_out(list.iter().map(|s| s.file.name.as_str()), args.out);
            let (quick, seed) = (args.quick, args.seed);
            let title = "clusterqos run (Yum et al. cluster)";
            super::reproduce::simulated(reproduce::yum_runs(&list), args.json, |progress| {
                reproduce::yum(&list, quick, seed, &out, title, progress)
            })
        }
        Batch::Cluster(list) => {
            let out = runs::report_out(list.iter().map(|s| s.file.name.as_str()), args.out);
            let (quick, seed) = (args.quick, args.seed);
            super::reproduce::simulated(list.len(), args.json, |progress| {
                reproduce::gulati(&list, quick, seed, &out, "clusterqos run", &[], progress)
            })
        }
    }
}

/// Runs flit scenarios one by one, each with its progress display and table.
fn run_flit(batch: &FlitBatch, json: bool) -> anyhow::Result<ExitCode> {
    let names: Vec<String> = batch.scenarios().map(|s| s.name.clone()).collect();
    let mut all = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut display = Display::new(json);
        let done = batch.run(i, |p| display.show(name, p));
        display.bar.finish_and_clear();
        let done = done.map_err(output::one_line)?;
        if !json {
            println!("{name} ({})", done.dir.display());
            output::print_table(&runs::flit_table(&done.run), 0);
            println!("{}", runs::saturation_line(&done.run));
        }
        all.push(done.run);
    }
    if json {
        output::print_json(&all)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A flit run's progress: a bar on a terminal; otherwise a line as each point starts
/// and every 5 s; nothing with `--json`.
struct Display {
    bar: ProgressBar,
    lines: bool,
    last: Instant,
}

impl Display {
    fn new(json: bool) -> Display {
        let template = "{spinner} [{bar:30}] {pos}/{len} cycles {msg} ({elapsed}, {eta} left)";
        Display {
            bar: output::bar(1, json, template),
            lines: !json && !std::io::stderr().is_terminal(),
            last: Instant::now(),
        }
    }

    fn show(&mut self, name: &str, p: Progress) {
        let what = format!(
            "{name}: point {}/{} (rate {})",
            p.point + 1,
            p.points,
            p.rate
        );
        if p.cycle == 0 {
            self.bar.reset();
            self.bar.set_length(p.planned);
            self.bar.set_message(what.clone());
        }
        self.bar.set_position(p.cycle.min(p.planned));
        if self.lines && p.cycle == 0 {
            eprintln!("{what}");
            self.last = Instant::now();
        } else if self.lines && self.last.elapsed() >= Duration::from_secs(5) {
            eprintln!("{what}: cycle {} of {}", p.cycle, p.planned);
            self.last = Instant::now();
        }
    }
}
