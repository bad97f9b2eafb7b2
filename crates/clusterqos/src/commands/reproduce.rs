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
//! status. With `--real`, Figs 3–4 on the testbed under every packet scheduler
//! (`qos_experiments::nagar::real`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use qos_experiments::gulati::{self, real};
use qos_experiments::nagar;
use qos_sim::report::check::Check;
use qos_sim::report::Table;
use qos_sim::scenario::Scenario;

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
    /// gulati --backend kernel).
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
        other => bail!(
            "unknown paper '{other}' (known: gulati — the rate-control thesis; nagar — QoS-aware VIA firmware)"
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
        return run_nagar_real(args);
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

fn run_nagar_real(args: Args) -> anyhow::Result<ExitCode> {
    use qos_experiments::nagar::real as nreal;
    if args.backend != "dataplane" {
        bail!("reproduce nagar --real runs on the agents' data planes only (--backend kernel is for gulati)");
    }
    if let Some(only) = args.only.as_deref().filter(|o| *o != "fig-3-4") {
        bail!("reproduce nagar --real runs fig-3-4 only, not '{only}'");
    }
    let link_rate = args
        .link_rate
        .as_deref()
        .unwrap_or("80Mbit/s")
        .parse()
        .map_err(|e| anyhow::anyhow!("--link-rate: {e}"))?;
    real::catch_signals();
    let r = nreal::run(nreal::RealOptions {
        link_rate,
        dir: args.testbed_dir,
        prefix: args.prefix,
        quick: args.quick,
        seed: args.seed.unwrap_or(1),
    })?;
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("report-nagar-real"));
    nreal::report(&r)
        .write(&out)
        .context("writing the report")?;
    if args.json {
        let mut v = serde_json::to_value(&r)?;
        v["report"] = serde_json::Value::String(out.display().to_string());
        output::print_json(&v)?;
    } else {
        print_table(&nreal::results_table(&r));
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
