//! `clusterqos reproduce gulati` (the rate-control thesis, chapter 5; `--real` on a
//! testbed), `reproduce nagar` (QoS-aware VIA firmware; `--real`: Figs 3–4 on a testbed
//! under every packet scheduler) and `reproduce yum` (QoS wormhole clusters): one path
//! for every paper (`qos_experiments::reproduce`) — runs the paper's experiments, prints
//! the checks against what the paper says and the summary line, writes a report
//! directory. A miss is a result: the command exits 0 when it ran, and 1 on a miss only
//! with `--check` (for CI).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use qos_experiments::experiment::RunOptions;
use qos_experiments::gulati::Gulati;
use qos_experiments::nagar::Nagar;
use qos_experiments::reproduce::{self, Outcome, Paper, ReproduceError};
use qos_experiments::yum::Yum;

use super::experiment::Common;
use crate::output;
use crate::progress::Display;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which paper.
    #[arg(value_enum)]
    pub paper: Paper,
    #[command(flatten)]
    pub common: Common,
    /// Run only this scenario.
    #[arg(long)]
    pub only: Option<String>,
    /// Also run each declared assumption (a value the paper leaves open) at the ends of
    /// its range, one at a time with the same seed, and report per check whether its
    /// verdict holds over the whole range and which assumption flips it.
    #[arg(long, conflicts_with = "real")]
    pub sensitivity: bool,
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
    /// With nagar --real: instead of the sweep, run VirtualClock and fcfs with this many
    /// seeds at each load and run length, and report whether their θ are told apart.
    #[arg(long, requires = "real")]
    pub replicates: Option<u32>,
    /// With --replicates: run lengths in seconds, measured after the warm-up.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "3,12",
        requires = "replicates"
    )]
    pub run_secs: Vec<f64>,
    /// With --replicates: loads, channels per class, "+be" beside the best-effort channel.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "5,25,25+be",
        requires = "replicates"
    )]
    pub replicate_loads: Vec<String>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let opt = args.common.run_options(None)?;
    let only = args.only.as_deref();
    let progress = Display::new(format!("reproduce {}", args.paper.name()), args.common.json);
    let out = args.common.out.clone();
    let sens = args.sensitivity;
    let outcome = match (args.paper, args.real) {
        (Paper::Gulati, false) => {
            reproduce::reproduce(&Gulati, only, &opt, sens, out, "report-gulati", &progress)
        }
        (Paper::Nagar, false) => {
            reproduce::reproduce(&Nagar, only, &opt, sens, out, "report-nagar", &progress)
        }
        (Paper::Yum, false) => {
            reproduce::reproduce(&Yum, only, &opt, sens, out, "report-yum", &progress)
        }
        (paper, true) => real_outcome(paper, &args, only, &opt, out, &progress),
    };
    progress.finish();
    args.common
        .finish(&outcome.map_err(output::one_line)?, start)
}

/// `reproduce PAPER --real`: the paper's experiments on a testbed of network
/// namespaces, through the same path as the simulated ones.
#[cfg(feature = "runtime")]
fn real_outcome(
    paper: Paper,
    args: &Args,
    only: Option<&str>,
    opt: &RunOptions,
    out: Option<PathBuf>,
    progress: &Display,
) -> Result<Outcome, ReproduceError> {
    use qos_experiments::gulati::real::{self, GulatiReal};
    use qos_experiments::nagar::real::{replicates, NagarReal};
    match paper {
        Paper::Yum => Err(ReproduceError::Invalid(
            "reproduce yum --real is not available: the wormhole cluster runs in the flit-level model only".into(),
        )),
        Paper::Nagar => {
            if args.backend != "dataplane" {
                return Err(ReproduceError::Invalid("reproduce nagar --real runs on the agents' data planes only (--backend kernel is for gulati)".into()));
            }
            if let Some(only) = only.filter(|o| *o != "fig-3-4") {
                return Err(ReproduceError::Invalid(format!("reproduce nagar --real runs fig-3-4 only, not '{only}'")));
            }
            let backend = real::Backend::Dataplane;
            let replicates = match args.replicates {
                None => None,
                Some(0) => {
                    return Err(ReproduceError::Invalid(
                        "--replicates must be at least 1".into(),
                    ))
                }
                Some(seeds) => {
                    if let Some(s) = args.run_secs.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
                        return Err(ReproduceError::Invalid(format!(
                            "--run-secs: {s} is not a positive number of seconds"
                        )));
                    }
                    let loads = args
                        .replicate_loads
                        .iter()
                        .map(|l| {
                            replicates::parse_load(l).ok_or_else(|| {
                                ReproduceError::Invalid(format!(
                                    "--replicate-loads: '{l}' is not a number of channels per class (\"25\", \"25+be\")"
                                ))
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    Some(replicates::Plan {
                        seeds,
                        secs: args.run_secs.clone(),
                        loads,
                    })
                }
            };
            let e = NagarReal {
                place: placement(args, backend)?,
                replicates,
            };
            real::catch_signals();
            reproduce::reproduce(&e, None, opt, false, out, "report-nagar-real", progress)
        }
        Paper::Gulati => {
            let backend = match args.backend.as_str() {
                "kernel" => real::Backend::Kernel,
                _ => real::Backend::Dataplane,
            };
            if let Some(only) = only.filter(|o| {
                backend == real::Backend::Kernel && *o != real::mpi::EXPERIMENT
            }) {
                return Err(ReproduceError::Invalid(format!(
                    "--backend kernel runs the MPI-level experiment only ('{}'), not '{only}'",
                    real::mpi::EXPERIMENT
                )));
            }
            let e = GulatiReal {
                place: placement(args, backend)?,
                backend,
                mpi: args.mpi.clone(),
            };
            let default_out = match backend {
                real::Backend::Kernel => "report-gulati-real-mpi",
                real::Backend::Dataplane => "report-gulati-real",
            };
            real::catch_signals();
            reproduce::reproduce(&e, only, opt, false, out, default_out, progress)
        }
    }
}

/// Where `--real` puts its testbed (`--link-rate`, `--testbed-dir`, `--prefix`).
#[cfg(feature = "runtime")]
fn placement(
    args: &Args,
    backend: qos_experiments::gulati::real::Backend,
) -> Result<qos_experiments::gulati::real::Placement, ReproduceError> {
    Ok(qos_experiments::gulati::real::Placement {
        link_rate: reproduce::real_link_rate(args.link_rate.as_deref(), backend)?,
        dir: args.testbed_dir.clone(),
        prefix: args.prefix.clone(),
    })
}

/// `reproduce PAPER --real` in a build without the runtime.
#[cfg(not(feature = "runtime"))]
fn real_outcome(
    paper: Paper,
    _args: &Args,
    _only: Option<&str>,
    _opt: &RunOptions,
    _out: Option<PathBuf>,
    _progress: &Display,
) -> Result<Outcome, ReproduceError> {
    Err(ReproduceError::Invalid(format!(
        "reproduce {} --real needs the runtime: this clusterqos was built without it \
         (--no-default-features); `cargo build --release -p clusterqos` builds it",
        paper.name()
    )))
}
