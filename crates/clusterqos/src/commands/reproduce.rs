//! `clusterqos reproduce gulati`: every experiment of the rate-control thesis (chapter 5,
//! plus the cascaded-switch example of §2.3/§3.2) from the scenarios embedded in the
//! binary (`qos_experiments::gulati`). Prints one table (published against simulated,
//! each check a fit, a prediction or a bound) and the summary line, writes a report
//! directory, and exits 1 on a miss. With `--real`, the same experiments on a testbed of
//! network namespaces (`qos_experiments::gulati::real`).
//!
//! `clusterqos reproduce nagar`: Nagar et al.'s QoS-aware VIA firmware
//! (`qos_experiments::nagar`): Table 1 as the calibration, Table 2 and Figs 3–6 as
//! predictions, and the comparisons beyond the paper; same table, report, JSON and exit
//! status.
//!
//! `clusterqos reproduce yum`: Yum et al.'s QoS wormhole cluster in the flit-level model
//! (`qos_experiments::yum`): Table 2, Fig 5 and Fig 6/Table 4, every run of a scenario on
//! all cores; same table, report, JSON and exit status.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use qos_experiments::gulati::{self, real};
use qos_experiments::nagar;
use qos_experiments::yum;
use qos_sim::report::check::Check;
use qos_sim::report::Table;
use qos_sim::scenario::Scenario;

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which paper: `gulati` (the rate-control thesis), `nagar` (QoS-aware VIA
    /// firmware) or `yum` (QoS wormhole clusters).
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
    match args.paper.as_str() {
        "gulati" => {}
        "nagar" => return run_nagar(args),
        "yum" => return run_yum(args),
        other => bail!(
            "unknown paper '{other}' (known: gulati — the rate-control thesis; nagar — QoS-aware VIA firmware; yum — QoS wormhole clusters)"
        ),
    }
    if args.real {
        return run_real(args);
    }
    let scenarios = gulati::builtin_scenarios(args.only.as_deref())?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("report-{}", args.paper)));
    simulate_and_report(
        &scenarios,
        args.quick,
        args.seed,
        &out,
        args.json,
        gulati::TITLE,
        gulati::NOTES,
    )
}

/// Runs scenarios with a progress bar, prints the table (or JSON) and the summary line,
/// writes the report; exit 1 on a miss. Shared with `clusterqos run`.
pub fn simulate_and_report(
    scenarios: &[Scenario],
    quick: bool,
    seed: Option<u64>,
    out: &std::path::Path,
    json: bool,
    title: &str,
    notes: &[&str],
) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let bar = progress(scenarios.len() as u64, json);
    let sim = gulati::simulate(scenarios, quick, seed, &mut |name| {
        bar.set_message(name.to_string());
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let wall = start.elapsed().as_secs_f64();
    let report = gulati::report(&sim, title, notes);
    report.write(out).context("writing the report")?;
    if json {
        output::print_json(&serde_json::json!({
            "results": sim.results,
            "model": sim.model,
            "summary": sim.summary,
            "report": out.display().to_string(),
        }))?;
    } else {
        let checks: Vec<&Check> = sim.checks().collect();
        print_table(&gulati::checks_table(&checks));
        println!("{}; report in {}", sim.summary, out.display());
    }
    // Wall time goes to stderr so that the JSON and the report depend only on the
    // scenarios and the seed.
    eprintln!("done in {wall:.1} s");
    Ok(exit(sim.summary.misses))
}

fn run_nagar(args: Args) -> anyhow::Result<ExitCode> {
    if args.real {
        bail!("reproduce nagar --real is not available: the VIA experiments run in the simulator only");
    }
    let scenarios = nagar::builtin_scenarios(args.only.as_deref())?;
    let out = args.out.unwrap_or_else(|| PathBuf::from("report-nagar"));
    let start = Instant::now();
    let bar = progress(scenarios.len() as u64, args.json);
    let opt = nagar::Options {
        quick: args.quick,
        seed: args.seed,
    };
    let sim = nagar::simulate(&scenarios, opt, &mut |name| {
        bar.set_message(name.to_string());
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let wall = start.elapsed().as_secs_f64();
    nagar::report(&sim)
        .write(&out)
        .context("writing the report")?;
    if args.json {
        output::print_json(&serde_json::json!({
            "results": sim.results,
            "summary": sim.summary,
            "report": out.display().to_string(),
        }))?;
    } else {
        let checks: Vec<&Check> = sim.checks().collect();
        print_table(&qos_experiments::tables::checks_table(&checks));
        println!("{}; report in {}", sim.summary, out.display());
    }
    eprintln!("done in {wall:.1} s");
    Ok(exit(sim.summary.misses))
}

fn run_yum(args: Args) -> anyhow::Result<ExitCode> {
    if args.real {
        bail!("reproduce yum --real is not available: the wormhole cluster runs in the flit-level model only");
    }
    let scenarios = yum::builtin_scenarios(args.only.as_deref())?;
    let out = args.out.unwrap_or_else(|| PathBuf::from("report-yum"));
    yum_report(
        &scenarios,
        args.quick,
        args.seed,
        &out,
        args.json,
        yum::TITLE,
    )
}

/// Runs Yum scenarios on every core with a progress bar (one tick per case and load),
/// prints the table (or JSON) and the summary line, writes the report; exit 1 on a
/// miss. Shared with `clusterqos run` on a Yum scenario file.
pub fn yum_report(
    scenarios: &[yum::Scenario],
    quick: bool,
    seed: Option<u64>,
    out: &std::path::Path,
    json: bool,
    title: &str,
) -> anyhow::Result<ExitCode> {
    let runs: usize = scenarios
        .iter()
        .map(|s| s.cases.len() * s.loads().len())
        .sum();
    let start = Instant::now();
    let bar = progress(runs as u64, json);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sim = yum::simulate(scenarios, quick, seed, threads, &|name| {
        bar.set_message(name.to_string());
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let wall = start.elapsed().as_secs_f64();
    yum::report_titled(&sim, title)
        .write(out)
        .context("writing the report")?;
    if json {
        let mut v = serde_json::to_value(&sim)?;
        v["report"] = serde_json::Value::String(out.display().to_string());
        output::print_json(&v)?;
    } else {
        let checks: Vec<&Check> = sim.checks().collect();
        print_table(&yum::checks_table(&checks));
        println!("{}; report in {}", sim.summary, out.display());
    }
    // Wall time and simulation speed go to stderr: the JSON and the report depend only
    // on the scenarios and the seed.
    let busy: f64 = sim
        .results
        .iter()
        .flat_map(|r| &r.points)
        .map(|p| p.wall)
        .sum();
    let cycles: u64 = sim
        .results
        .iter()
        .flat_map(|r| &r.points)
        .map(|p| p.out.cycles)
        .sum();
    eprintln!(
        "done in {wall:.1} s on {threads} threads; {:.0} simulated cycles per second of a thread",
        cycles as f64 / busy.max(1e-9)
    );
    Ok(exit(sim.summary.misses))
}

fn run_real(args: Args) -> anyhow::Result<ExitCode> {
    let default_rate = if args.backend == "kernel" {
        "40Mbit/s"
    } else {
        "80Mbit/s"
    };
    let link_rate = args
        .link_rate
        .as_deref()
        .unwrap_or(default_rate)
        .parse()
        .map_err(|e| anyhow::anyhow!("--link-rate: {e}"))?;
    real::catch_signals();
    let kernel = args.backend == "kernel";
    let r = real::run(real::RealOptions {
        link_rate,
        dir: args.testbed_dir,
        prefix: args.prefix,
        quick: args.quick,
        only: args.only,
        backend: if kernel {
            real::Backend::Kernel
        } else {
            real::Backend::Dataplane
        },
        mpi: args.mpi,
    })?;
    let out = args.out.unwrap_or_else(|| {
        PathBuf::from(if kernel {
            "report-gulati-real-mpi"
        } else {
            "report-gulati-real"
        })
    });
    real::report(&r).write(&out).context("writing the report")?;
    if args.json {
        let mut v = serde_json::to_value(&r)?;
        v["report"] = serde_json::Value::String(out.display().to_string());
        output::print_json(&v)?;
    } else {
        print_table(&real::checks_table(&r.checks));
        println!("{}; report in {}", r.summary, out.display());
    }
    Ok(exit(r.summary.misses))
}

fn progress(len: u64, json: bool) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

fn print_table(table: &Table) {
    let mut t = output::table(table.columns.clone());
    for row in &table.rows {
        t.add_row(row.clone());
    }
    output::align_numbers(&mut t, 4);
    println!("{t}");
}

fn exit(misses: usize) -> ExitCode {
    if misses > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
