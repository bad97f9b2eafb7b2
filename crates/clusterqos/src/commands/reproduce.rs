//! `clusterqos reproduce gulati` (the rate-control thesis, chapter 5; `--real` on a
//! testbed), `reproduce nagar` (QoS-aware VIA firmware; `--real`: Figs 3–4 on a testbed
//! under every packet scheduler) and `reproduce yum` (QoS
//! wormhole clusters, every run on all cores): runs the paper's experiments
//! (`qos_experiments::reproduce`), prints the checks against the published values and the
//! summary line, writes a report directory, and exits 1 on a miss.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::bail;
use qos_experiments::gulati::{self, real};
use qos_experiments::reproduce::{self, Outcome, Paper, ReproduceError};
use qos_experiments::{nagar, yum};

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which paper: `gulati` (the rate-control thesis) or `nagar` (QoS-aware VIA
    /// firmware).
    pub paper: String,
    /// Report directory (default: report-<paper>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Seed of every run (default: each scenario's own).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run only this scenario.
    #[arg(long)]
    pub only: Option<String>,
    /// Reduced run lengths (a quick look; published tolerances still apply).
    #[arg(long)]
    pub quick: bool,
    /// Run the experiments on real traffic: a testbed of network namespaces (needs
    /// root), side by side with the published and simulated values.
    #[arg(long)]
    pub real: bool,
    /// With --real: rate of every testbed link, each way (default 80Mbit/s; 40Mbit/s with
    /// --backend kernel).
    #[arg(long, requires = "real")]
    pub link_rate: Option<String>,
    /// With --real: testbed directory (default: a fresh one under the temporary directory).
    #[arg(long, requires = "real")]
    pub testbed_dir: Option<PathBuf>,
    /// With --real: namespace prefix, 1-6 letters or digits (default: from the process id).
    #[arg(long, requires = "real")]
    pub prefix: Option<String>,
    /// With --real: "dataplane" (the agents' data planes, every experiment) or "kernel"
    /// (the agents' kernel backend and a real MPI job: the MPI-level experiment, §5.5).
    #[arg(long, default_value = "dataplane", value_parser = ["dataplane", "kernel"], requires = "real")]
    pub backend: String,
    /// With --backend kernel: the MPI implementation, "openmpi" or "mpich".
    #[arg(long, default_value = "openmpi", value_parser = ["openmpi", "mpich"], requires = "real")]
    pub mpi: String,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let paper: Paper = args.paper.parse()?;
    let out = |name: &str| args.out.clone().unwrap_or_else(|| PathBuf::from(name));
    match (paper, args.real) {
        (Paper::Gulati, false) => {
            let scenarios = gulati::builtin_scenarios(args.only.as_deref())?;
            simulated(scenarios.len(), args.json, |progress| {
                let (title, notes) = (gulati::TITLE, gulati::NOTES);
                let out = out("report-gulati");
                reproduce::gulati(
                    &scenarios, args.quick, args.seed, &out, title, notes, progress,
                )
            })
        }
        (Paper::Nagar, false) => {
            let scenarios = nagar::builtin_scenarios(args.only.as_deref())?;
            let opt = nagar::Options {
                quick: args.quick,
                seed: args.seed,
            };
            simulated(scenarios.len(), args.json, |progress| {
                reproduce::nagar(&scenarios, opt, &out("report-nagar"), progress)
            })
        }
        (Paper::Yum, false) => {
            let scenarios = yum::builtin_scenarios(args.only.as_deref())?;
            let out = out("report-yum");
            simulated(reproduce::yum_runs(&scenarios), args.json, |progress| {
                reproduce::yum(&scenarios, args.quick, args.seed, &out, yum::TITLE, progress)
            })
        }
        (Paper::Yum, true) => bail!(
            "reproduce yum --real is not available: the wormhole cluster runs in the flit-level model only"
        ),
        (Paper::Nagar, true) => {
            if args.backend != "dataplane" {
                bail!("reproduce nagar --real runs on the agents' data planes only (--backend kernel is for gulati)");
            }
            if let Some(only) = args.only.as_deref().filter(|o| *o != "fig-3-4") {
                bail!("reproduce nagar --real runs fig-3-4 only, not '{only}'");
            }
            let backend = real::Backend::Dataplane;
            let link_rate = reproduce::real_link_rate(args.link_rate.as_deref(), backend)?;
            real::catch_signals();
            let o = nagar::real::RealOptions {
                link_rate,
                dir: args.testbed_dir,
                prefix: args.prefix,
                quick: args.quick,
                seed: args.seed.unwrap_or(1),
            };
            finish(&reproduce::nagar_real(o, args.out)?, args.json)
        }
        (Paper::Gulati, true) => {
            let backend = match args.backend.as_str() {
                "kernel" => real::Backend::Kernel,
                _ => real::Backend::Dataplane,
            };
            let link_rate = reproduce::real_link_rate(args.link_rate.as_deref(), backend)?;
            real::catch_signals();
            let o = real::RealOptions {
                link_rate,
                dir: args.testbed_dir,
                prefix: args.prefix,
                quick: args.quick,
                only: args.only,
                backend,
                mpi: args.mpi,
            };
            finish(&reproduce::real(o, args.out)?, args.json)
        }
    }
}

/// Runs a simulated reproduction of `len` scenarios with a progress bar, prints it, and
/// the wall time on stderr (so that the JSON and the report depend only on the
/// scenarios and the seed). Shared with `clusterqos run`.
pub fn simulated(
    len: usize,
    json: bool,
    run: impl FnOnce(&mut (dyn FnMut(&str) + Send)) -> Result<Outcome, ReproduceError>,
) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let bar = output::bar(
        len as u64,
        json,
        "{spinner} [{bar:30}] {pos}/{len} {msg} ({elapsed})",
    );
    let outcome = run(&mut |name| {
        bar.set_message(name.to_string());
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let code = finish(&outcome, json)?;
    let speed = outcome
        .speed
        .as_deref()
        .map_or(String::new(), |s| format!(" {s}"));
    eprintln!("done in {:.1} s{speed}", start.elapsed().as_secs_f64());
    Ok(code)
}

/// Prints the table (or JSON) and the summary line; exit 1 on a miss.
fn finish(o: &Outcome, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        output::print_json(&o.json)?;
    } else {
        for t in &o.before {
            output::print_table(t, 4);
        }
        output::print_table(&o.table, 4);
        println!("{}; report in {}", o.summary, o.out.display());
    }
    Ok(match o.misses {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}
