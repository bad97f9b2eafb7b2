//! A reproduction as one command runs it (`clusterqos reproduce <paper>`, and
//! `clusterqos run` on thesis scenarios): the experiments run, the report directory
//! written, and what is printed — the table of checks, the summary line `N checks: P
//! predictions, F fits, B bounds, M misses`, or the JSON — gathered in an [`Outcome`],
//! whose misses decide the exit status. The same for every paper: the thesis simulated
//! ([`gulati`]) or on a testbed ([`real`]), Nagar et al.'s VIA firmware ([`nagar`]) and
//! Yum et al.'s QoS wormhole cluster ([`yum`]).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use qos_core::units::Bandwidth;
use qos_sim::report::check::Check;
use qos_sim::report::{Report, ReportError, Table};
use qos_sim::scenario::Scenario;
use serde_json::{json, Value};

use crate::gulati::{self, real};
use crate::{nagar, tables, yum, Error};

/// The papers `clusterqos reproduce` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paper {
    /// Gulati's rate-control thesis.
    Gulati,
    /// Nagar et al.'s QoS-aware VIA firmware.
    Nagar,
    /// Yum et al.'s QoS wormhole clusters (admission, congestion and peak power control).
    Yum,
}

/// Why a reproduction could not run (a miss is not an error: it is in the outcome).
#[derive(Debug, thiserror::Error)]
pub enum ReproduceError {
    /// No paper of that name.
    #[error("unknown paper '{0}' (known: gulati — the rate-control thesis; nagar — QoS-aware VIA firmware; yum — QoS wormhole clusters)")]
    UnknownPaper(String),
    /// An option is wrong (the message names the flag).
    #[error("{0}")]
    Invalid(String),
    /// The experiments could not run.
    #[error(transparent)]
    Experiment(#[from] Error),
    /// Yum et al.'s experiments could not run.
    #[error(transparent)]
    Yum(#[from] yum::YumError),
    /// The report directory could not be written.
    #[error("writing the report")]
    Report(#[source] ReportError),
    /// The results could not be turned into JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl std::str::FromStr for Paper {
    type Err = ReproduceError;
    fn from_str(name: &str) -> Result<Paper, ReproduceError> {
        match name {
            "gulati" => Ok(Paper::Gulati),
            "nagar" => Ok(Paper::Nagar),
            "yum" => Ok(Paper::Yum),
            other => Err(ReproduceError::UnknownPaper(other.to_string())),
        }
    }
}

/// What a reproduction produced, ready to print.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The `--json` form (with the report directory).
    pub json: Value,
    /// Tables printed before the checks (the measured values, where the checks do not
    /// show them all).
    pub before: Vec<Table>,
    /// Every check against its published value.
    pub table: Table,
    /// The summary line's counts.
    pub summary: String,
    /// Checks that failed.
    pub misses: usize,
    /// Where the report was written.
    pub out: PathBuf,
    /// How fast it ran, for stderr (kept out of the JSON and the report, which depend
    /// only on the scenarios and the seed).
    pub speed: Option<String>,
}

fn write(report: Report, out: &Path) -> Result<(), ReproduceError> {
    report.write(out).map_err(ReproduceError::Report)?;
    Ok(())
}

/// Simulates thesis scenarios (the shipped ones, [`gulati::builtin_scenarios`], or a
/// user's) and writes the report titled `title` with `notes` into `out`; `progress`
/// hears each scenario's name as it starts.
pub fn gulati(
    scenarios: &[Scenario],
    quick: bool,
    seed: Option<u64>,
    out: &Path,
    title: &str,
    notes: &[&str],
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome, ReproduceError> {
    let sim = gulati::simulate(scenarios, quick, seed, progress)?;
    write(gulati::report(&sim, title, notes), out)?;
    let checks: Vec<&Check> = sim.checks().collect();
    Ok(Outcome {
        json: json!({
            "results": sim.results,
            "model": sim.model,
            "summary": sim.summary,
            "report": out.display().to_string(),
        }),
        before: Vec::new(),
        table: gulati::checks_table(&checks),
        summary: sim.summary.to_string(),
        misses: sim.summary.misses,
        out: out.to_path_buf(),
        speed: None,
    })
}

/// Simulates Nagar et al.'s experiments (`scenarios` from
/// [`nagar::builtin_scenarios`]) and writes the report into `out`.
pub fn nagar(
    scenarios: &[nagar::Scenario],
    opt: nagar::Options,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome, ReproduceError> {
    let sim = nagar::simulate(scenarios, opt, progress)?;
    write(nagar::report(&sim), out)?;
    let checks: Vec<&Check> = sim.checks().collect();
    Ok(Outcome {
        json: json!({
            "results": sim.results,
            "summary": sim.summary,
            "report": out.display().to_string(),
        }),
        before: Vec::new(),
        table: tables::checks_table(&checks),
        summary: sim.summary.to_string(),
        misses: sim.summary.misses,
        out: out.to_path_buf(),
        speed: None,
    })
}

/// Runs Nagar et al.'s Figs 3–4 on a testbed under every packet scheduler
/// ([`nagar::real::run`]; needs root) and writes the report into `out` (default
/// `report-nagar-real`).
pub fn nagar_real(
    o: nagar::real::RealOptions,
    out: Option<PathBuf>,
) -> Result<Outcome, ReproduceError> {
    let out = out.unwrap_or_else(|| PathBuf::from("report-nagar-real"));
    let r = nagar::real::run(o)?;
    write(nagar::real::report(&r), &out)?;
    let mut json = serde_json::to_value(&r)?;
    json["report"] = Value::String(out.display().to_string());
    Ok(Outcome {
        json,
        before: vec![nagar::real::results_table(&r)],
        table: real::checks_table(&r.checks),
        summary: r.summary.to_string(),
        misses: r.summary.misses,
        out,
        speed: None,
    })
}

/// Runs of Yum scenarios: one per case and load (the progress callback's ticks).
pub fn yum_runs(scenarios: &[yum::Scenario]) -> usize {
    scenarios
        .iter()
        .map(|s| s.cases.len() * s.loads().len())
        .sum()
}

/// Simulates Yum et al.'s experiments (the shipped [`yum::builtin_scenarios`] or a
/// user's) on every core and writes the report titled `title` into `out`; `progress`
/// hears each run (case and load) as it finishes.
pub fn yum(
    scenarios: &[yum::Scenario],
    quick: bool,
    seed: Option<u64>,
    out: &Path,
    title: &str,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Outcome, ReproduceError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let progress = Mutex::new(progress);
    let sim = yum::simulate(scenarios, quick, seed, threads, &|name| {
        if let Ok(mut p) = progress.lock() {
            p(name)
        }
    })?;
    write(yum::report_titled(&sim, title), out)?;
    let checks: Vec<&Check> = sim.checks().collect();
    let mut json = serde_json::to_value(&sim)?;
    json["report"] = Value::String(out.display().to_string());
    let points = || sim.results.iter().flat_map(|r| &r.points);
    let busy: f64 = points().map(|p| p.wall).sum();
    let cycles: u64 = points().map(|p| p.out.cycles).sum();
    Ok(Outcome {
        json,
        before: Vec::new(),
        table: yum::checks_table(&checks),
        summary: sim.summary.to_string(),
        misses: sim.summary.misses,
        out: out.to_path_buf(),
        speed: Some(format!(
            "on {threads} threads; {:.0} simulated cycles per second of a thread",
            cycles as f64 / busy.max(1e-9)
        )),
    })
}

/// The link rate of a real reproduction: `text`, else 80 Mbit/s (40 Mbit/s with the
/// kernel backend).
pub fn real_link_rate(
    text: Option<&str>,
    backend: real::Backend,
) -> Result<Bandwidth, ReproduceError> {
    let default = match backend {
        real::Backend::Kernel => "40Mbit/s",
        real::Backend::Dataplane => "80Mbit/s",
    };
    text.unwrap_or(default)
        .parse()
        .map_err(|e| ReproduceError::Invalid(format!("--link-rate: {e}")))
}

/// Runs the thesis's experiments on a testbed ([`real::run`]; needs root) and writes
/// the report into `out` (default `report-gulati-real`, `report-gulati-real-mpi` with
/// the kernel backend).
pub fn real(o: real::RealOptions, out: Option<PathBuf>) -> Result<Outcome, ReproduceError> {
    let out = out.unwrap_or_else(|| {
        PathBuf::from(match o.backend {
            real::Backend::Kernel => "report-gulati-real-mpi",
            real::Backend::Dataplane => "report-gulati-real",
        })
    });
    let r = real::run(o)?;
    write(real::report(&r), &out)?;
    let mut json = serde_json::to_value(&r)?;
    json["report"] = Value::String(out.display().to_string());
    Ok(Outcome {
        json,
        before: Vec::new(),
        table: real::checks_table(&r.checks),
        summary: r.summary.to_string(),
        misses: r.summary.misses,
        out,
        speed: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn papers_by_name_and_an_unknown_one_lists_the_known() {
        assert_eq!("gulati".parse::<Paper>().unwrap(), Paper::Gulati);
        assert_eq!("nagar".parse::<Paper>().unwrap(), Paper::Nagar);
        assert_eq!("yum".parse::<Paper>().unwrap(), Paper::Yum);
        let e = "yum2".parse::<Paper>().unwrap_err().to_string();
        assert!(
            e.contains("unknown paper 'yum2'") && e.contains("gulati") && e.contains("yum —"),
            "{e}"
        );
    }

    #[test]
    fn real_link_rate_defaults_by_backend_and_names_the_flag() {
        let d = real_link_rate(None, real::Backend::Dataplane).unwrap();
        let k = real_link_rate(None, real::Backend::Kernel).unwrap();
        assert_eq!(d.bytes_per_sec(), 2 * k.bytes_per_sec());
        let e = real_link_rate(Some("fast"), real::Backend::Kernel).unwrap_err();
        assert!(e.to_string().starts_with("--link-rate: "), "{e}");
    }

    #[test]
    fn a_quick_thesis_scenario_gives_its_table_summary_and_report() {
        let dir = tempfile::tempdir().unwrap();
        let scenarios = gulati::builtin_scenarios(Some("best-effort-one")).unwrap();
        let mut seen = Vec::new();
        let o = gulati(
            &scenarios,
            true,
            None,
            dir.path(),
            gulati::TITLE,
            gulati::NOTES,
            &mut |n| seen.push(n.to_string()),
        )
        .unwrap();
        assert_eq!(seen, ["best-effort-one"]);
        assert_eq!(
            o.table.rows.len(),
            o.json["results"][0]["checks"].as_array().unwrap().len()
        );
        assert!(o.summary.contains(" checks: "), "{}", o.summary);
        assert!(dir.path().join("index.html").exists());
    }
}
