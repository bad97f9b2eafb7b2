//! `clusterqos reproduce gulati`: runs every experiment of the rate-control thesis
//! (chapter 5, plus the cascaded-switch contention example of §2.3/§3.2) with the
//! scenarios embedded in the binary, prints one table (experiment, metric, published,
//! simulated, deviation, within tolerance) and writes a report directory. Exit status 1
//! when a check is out of tolerance. Also holds the rendering shared with `run`.
//! With `--real`, the same experiments on a testbed of network namespaces ([`real`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use qos_sim::report::{Report, Table};
use qos_sim::scenario::{self, builtin, run::Options, run::Results, Scenario};

use crate::output;

mod experiments;
pub mod overhead;
pub mod real;
mod timeline;
pub mod traffic;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which paper: `gulati` (the rate-control thesis).
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
    if args.paper != "gulati" {
        bail!(
            "unknown paper '{}' (known: gulati — the rate-control thesis)",
            args.paper
        );
    }
    if args.real {
        let link_rate = args
            .link_rate
            .parse()
            .map_err(|e| anyhow::anyhow!("--link-rate: {e}"))?;
        return real::run(real::RealOptions {
            link_rate,
            dir: args.testbed_dir,
            prefix: args.prefix,
            quick: args.quick,
            only: args.only,
            json: args.json,
            out: args
                .out
                .unwrap_or_else(|| PathBuf::from("report-gulati-real")),
        });
    }
    let mut list: Vec<(&str, &str)> = builtin::GULATI.to_vec();
    if let Some(only) = &args.only {
        list.retain(|(n, _)| n == only);
        if list.is_empty() {
            bail!(
                "no scenario '{only}' (known: {})",
                builtin::names().join(", ")
            );
        }
    }
    let mut scenarios = Vec::new();
    for (name, text) in &list {
        let s = scenario::load(&format!("{name}.toml"), text, |p| {
            Err(format!("embedded scenario cannot read '{p}'"))
        })
        .with_context(|| format!("embedded scenario {name}"))?;
        scenarios.push(s);
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("report-{}", args.paper)));
    let opt = Options {
        quick: args.quick,
        seed: args.seed,
    };
    run_all(
        &scenarios,
        opt,
        &out,
        args.json,
        "Reproduction of Gulati (2001), A Proportional Bandwidth Allocation Scheme for Myrinet Clusters",
        builtin::GULATI_NOTES,
    )
}

/// Runs scenarios with a progress bar, prints the table (or JSON), writes the report.
pub fn run_all(
    scenarios: &[Scenario],
    opt: Options,
    out: &Path,
    json: bool,
    title: &str,
    notes: &[&str],
) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let bar = ProgressBar::new(scenarios.len() as u64);
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut results: Vec<Results> = Vec::new();
    for s in scenarios {
        bar.set_message(s.file.name.clone());
        results.push(scenario::run::execute(s, opt));
        bar.inc(1);
    }
    bar.finish_and_clear();
    let wall = start.elapsed().as_secs_f64();

    let mut table = Table::new(
        "checks",
        "Published against simulated",
        [
            "experiment",
            "metric",
            "unit",
            "published",
            "simulated",
            "deviation",
            "within tolerance",
        ],
    );
    for r in &results {
        for c in &r.checks {
            table.push([
                c.experiment.clone(),
                c.metric.clone(),
                c.unit.clone(),
                fmt(c.published),
                fmt(c.simulated),
                if c.mode == "at-most" {
                    "bound".to_string()
                } else {
                    format!("{:+.1}%", 100.0 * c.deviation)
                },
                if c.ok { "yes" } else { "no" }.to_string(),
            ]);
        }
    }
    let failed = results
        .iter()
        .flat_map(|r| &r.checks)
        .filter(|c| !c.ok)
        .count();
    let total: usize = results.iter().map(|r| r.checks.len()).sum();

    let mut report = Report::new(title);
    report.summary.push(format!(
        "{} scenarios, {} checks, {} out of tolerance, {} simulated events.",
        results.len(),
        total,
        failed,
        results.iter().map(|r| r.events).sum::<u64>(),
    ));
    report.summary.push(
        "Every simulated value comes from running the calibrated Myrinet/GM model; \
         tolerances: 10 % on MB/s, 3 % on ratios, unless the scenario says otherwise."
            .into(),
    );
    report.tables.push(table.clone());
    for r in &results {
        report.figures.extend(r.figures.iter().cloned());
    }
    report.notes.push(
        "Calibration: crates/qos-sim/src/myrinet/calibration.toml (embedded); each value cites \
         the thesis section it is tuned against and states its assumptions."
            .into(),
    );
    report.notes.extend(notes.iter().map(|n| n.to_string()));
    report.write(out).context("writing the report")?;

    if json {
        output::print_json(&serde_json::json!({
            "results": results,
            "failed": failed,
            "checks": total,
            "report": out.display().to_string(),
        }))?;
    } else {
        let mut t = output::table(table.columns.clone());
        for row in &table.rows {
            t.add_row(row.clone());
        }
        output::align_numbers(&mut t, 3);
        println!("{t}");
        println!(
            "{total} checks, {failed} out of tolerance; report in {}",
            out.display()
        );
    }
    // Wall time goes to stderr so that the JSON and the report depend only on the
    // scenarios and the seed.
    eprintln!("done in {wall:.1} s");
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}
