//! `clusterqos run FILE.toml [NAME...]`: runs a user's scenario (format of
//! `scenarios/gulati/*.toml`, or a shipped one by name) exactly as `reproduce` runs the
//! thesis's: progress bar, one table of published against simulated values, a report
//! directory, exit 1 when a check fails. Scenario errors print one `file:line` line and
//! exit 2. A Yum et al. scenario (`scenarios/yum/*.toml`) runs as `clusterqos reproduce
//! yum` runs the shipped ones.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use qos_experiments::yum;
use qos_sim::scenario::{self, builtin};

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
    // Yum et al. scenarios (a `[workload]` with `real_time` traffic) go to the Yum
    // cluster on the flit network.
    if let Some(code) = run_if_yum(&args)? {
        return Ok(code);
    }
    // Flit-network scenarios (a `[network]` table) go to the flit model.
    let flit = super::bench::flit_scenario::run_if_flit(
        &args.scenarios,
        args.out.as_deref(),
        args.json,
        args.quick,
        args.seed,
    )?;
    if let Some(code) = flit {
        return Ok(code);
    }
    let mut list = Vec::new();
    for s in &args.scenarios {
        let path = Path::new(s);
        let (name, text) = if path.exists() || s.ends_with(".toml") {
            let text = std::fs::read_to_string(path).map_err(|e| anyhow!("{s}: {e}"))?;
            (s.clone(), text)
        } else if let Some(t) = builtin::find(s) {
            (format!("{s}.toml"), t.to_string())
        } else {
            return Err(anyhow!(
                "{s}: no such file, and no shipped scenario of that name (known: {})",
                builtin::names().join(", ")
            ));
        };
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let sc = scenario::load(&name, &text, |p| {
            let full = dir.join(p);
            std::fs::read_to_string(&full)
                .map(|t| (full.display().to_string(), t))
                .map_err(|e| format!("cannot read topology {}: {e}", full.display()))
        })
        .map_err(|e| anyhow!("{e}"))?;
        list.push(sc);
    }
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "report-{}",
            list.first().map_or("run", |s| s.file.name.as_str())
        ))
    });
    super::reproduce::simulate_and_report(
        &list,
        args.quick,
        args.seed,
        &out,
        args.json,
        "clusterqos run",
        &[],
    )
}

/// Runs the files if they are all Yum scenarios (`scenarios/yum/`); `None` when none
/// is, an error when they are mixed.
fn run_if_yum(args: &Args) -> anyhow::Result<Option<ExitCode>> {
    let mut texts = Vec::new();
    for s in &args.scenarios {
        match std::fs::read_to_string(s) {
            Ok(t) => texts.push((s.clone(), t)),
            Err(_) => return Ok(None),
        }
    }
    let yum: Vec<bool> = texts
        .iter()
        .map(|(_, t)| yum::scenario::is_yum_scenario(t))
        .collect();
    if !yum.iter().any(|&y| y) {
        return Ok(None);
    }
    if let Some(i) = yum.iter().position(|&y| !y) {
        return Err(anyhow!(
            "{}: not a Yum scenario, and {} is: run them separately",
            texts[i].0,
            texts[yum.iter().position(|&y| y).unwrap_or(0)].0
        ));
    }
    let mut list = Vec::new();
    for (name, text) in &texts {
        let dir = Path::new(name)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let read = |p: &str| {
            let full = dir.join(p);
            std::fs::read_to_string(&full)
                .map(|t| (full.display().to_string(), t))
                .map_err(|e| format!("cannot read trace {}: {e}", full.display()))
        };
        list.push(yum::scenario::load_with(name, text, &read).map_err(|e| anyhow!("{e}"))?);
    }
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "report-{}",
            list.first().map_or("run", |s| s.file.name.as_str())
        ))
    });
    super::reproduce::yum_report(
        &list,
        args.quick,
        args.seed,
        &out,
        args.json,
        "clusterqos run (Yum et al. cluster)",
    )
    .map(Some)
}
