//! `clusterqos reproduce gulati`: every experiment of the rate-control thesis (chapter 5,
//! plus the cascaded-switch example of §2.3/§3.2) from the scenarios embedded in the
//! binary (`qos_experiments::gulati`). Prints one table (published against simulated,
//! each check a fit, a prediction or a bound) and the summary line, writes a report
//! directory, and exits 1 on a miss. With `--real`, the same experiments on a testbed of
//! network namespaces (`qos_experiments::gulati::real`). `clusterqos reproduce yum`:
//! Yum et al.'s experiments in the flit-level model (`qos_experiments::yum`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use qos_experiments::gulati::{self, real};
use qos_experiments::yum;
use qos_sim::report::check::Check;
use qos_sim::report::Table;
use qos_sim::scenario::Scenario;

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which paper: `gulati` (the rate-control thesis) or `yum` (QoS wormhole clusters).
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
    /// With --real: rate of every testbed link, each way.
    #[arg(long, default_value = "80Mbit/s", requires = "real")]
    pub link_rate: String,
    /// With --real: testbed directory (default: a fresh one under the temporary directory).
    #[arg(long, requires = "real")]
    pub testbed_dir: Option<PathBuf>,
    /// With --real: namespace prefix, 1-6 letters or digits (default: from the process id).
    #[arg(long, requires = "real")]
    pub prefix: Option<String>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.paper == "yum" {
        if args.real {
            bail!("--real runs the rate-control thesis only (clusterqos reproduce gulati --real)");
        }
        return run_yum(args);
    }
    if args.paper != "gulati" {
        bail!(
            "unknown paper '{}' (known: gulati — the rate-control thesis; yum — QoS wormhole clusters)",
            args.paper
        );
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

fn run_yum(args: Args) -> anyhow::Result<ExitCode> {
    let scenarios = yum::builtin_scenarios(args.only.as_deref())?;
    let runs: usize = scenarios
        .iter()
        .map(|s| s.cases.len() * s.loads().len())
        .sum();
    let out = args.out.unwrap_or_else(|| PathBuf::from("report-yum"));
    let start = Instant::now();
    let bar = progress(runs as u64, args.json);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sim = yum::simulate(&scenarios, args.quick, args.seed, threads, &|name| {
        bar.set_message(name.to_string());
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let wall = start.elapsed().as_secs_f64();
    yum::report(&sim)
        .write(&out)
        .context("writing the report")?;
    if args.json {
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
    let link_rate = args
        .link_rate
        .parse()
        .map_err(|e| anyhow::anyhow!("--link-rate: {e}"))?;
    real::catch_signals();
    let r = real::run(real::RealOptions {
        link_rate,
        dir: args.testbed_dir,
        prefix: args.prefix,
        quick: args.quick,
        only: args.only,
    })?;
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("report-gulati-real"));
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
