//! A reproduction as one command runs it (`clusterqos reproduce <paper>`, and
//! `clusterqos run` on scenario files): one generic path for every [`Experiment`] —
//! the scenarios run, the report directory written, and what is printed (the table of
//! checks and the summary line, or the JSON) gathered in an [`Outcome`]. A miss is a
//! result, not a failure: the command exits 0 unless asked to `--check`.

use std::path::{Path, PathBuf};

#[cfg(feature = "real")]
use qos_core::units::Bandwidth;
use serde_json::Value;

use crate::check::{Check, Summary};
use crate::experiment::{Experiment, Progress, RunOptions, Source};
#[cfg(feature = "real")]
use crate::gulati::real;
use crate::report::checks::checks_display;
use crate::report::{Report, ReportError, Table};
use crate::sensitivity::{self, Declared, Sensitivity, Tally};
use crate::Error;

/// The papers `clusterqos reproduce` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Paper {
    /// Gulati's rate-control thesis (2001).
    Gulati,
    /// Nagar et al.'s QoS-aware VIA firmware.
    Nagar,
    /// Yum et al.'s QoS wormhole clusters (admission, congestion and peak power control).
    Yum,
}

impl Paper {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Paper::Gulati => "gulati",
            Paper::Nagar => "nagar",
            Paper::Yum => "yum",
        }
    }
}

/// Why a reproduction could not run (a miss is not an error: it is in the outcome).
#[derive(Debug, thiserror::Error)]
pub enum ReproduceError {
    /// An option is wrong (the message names the flag).
    #[error("{0}")]
    Invalid(String),
    /// The experiments could not run.
    #[error(transparent)]
    Experiment(#[from] Error),
    /// The report directory could not be written.
    #[error("writing the report")]
    Report(#[source] ReportError),
}

/// What a reproduction produced, ready to print.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The `--json` form (with the report directory).
    pub json: Value,
    /// Tables printed before the checks (what the checks do not show).
    pub before: Vec<Table>,
    /// Every check against what the paper says (None: the experiment checks nothing).
    pub table: Option<Table>,
    /// Lines printed after the tables.
    pub lines: Vec<String>,
    /// The checks' counts.
    pub summary: Summary,
    /// The assumptions the scenarios declare.
    pub assumptions: Vec<Declared>,
    /// How the verdicts depend on them (with `--sensitivity`).
    pub sensitivity: Option<Sensitivity>,
    /// Where the report was written.
    pub out: PathBuf,
    /// How fast it ran, for stderr (kept out of the JSON and the report, which depend
    /// only on the scenarios and the seed).
    pub speed: Option<String>,
}

impl Outcome {
    /// Checks that failed.
    pub fn misses(&self) -> usize {
        self.summary.misses
    }

    /// The summary line: `N checks (…) …; report in DIR`.
    pub fn summary_line(&self) -> String {
        format!("{}; report in {}", self.summary, self.out.display())
    }
}

/// The scenarios a reproduction runs, with where they came from, and whether to run
/// each declared assumption at the ends of its range too.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a, S> {
    /// The scenarios, loaded.
    pub scenarios: &'a [S],
    /// Their sources, in the same order.
    pub sources: &'a [Source],
    /// Run the sensitivity of every verdict to the declared assumptions
    /// ([`crate::sensitivity`]).
    pub sensitivity: bool,
}

/// Runs `job` of `e` with `opt`, writes the report titled `title` into `out`, and
/// gathers what is printed. The one path of `reproduce` and `run`.
pub fn run_experiment<E: Experiment>(
    e: &E,
    job: &Job<'_, E::Scenario>,
    opt: &RunOptions,
    out: &Path,
    title: &str,
    progress: &dyn Progress,
) -> Result<Outcome, ReproduceError> {
    let trials = if job.sensitivity {
        Some(sensitivity::plan(e, job.scenarios, job.sources)?)
    } else {
        None
    };
    let total = e.units(job.scenarios, opt) + trials.as_ref().map_or(0, |t| t.units(e, opt));
    let tally = Tally::new(progress, total);
    let result = e.simulate(job.scenarios, opt, &tally.part(None))?;
    let checks: Vec<&Check> = e.checks(&result);
    let assumptions = sensitivity::declared(e, job.scenarios, job.sources)?;
    let sens = match trials {
        Some(t) => Some(sensitivity::run(e, t, &checks, opt, &tally)?),
        None => None,
    };
    let mut report = e.report(&result, title);
    add_assumptions(&mut report, &assumptions, sens.as_ref());
    report.write(out).map_err(ReproduceError::Report)?;
    let summary = Summary::of(checks.iter().copied());
    let mut json = e.json(&result);
    let report = Value::String(out.display().to_string());
    if !matches!(json, Value::Object(_)) {
        json = serde_json::json!({ "runs": json.take() });
    }
    if let Value::Object(m) = &mut json {
        m.insert("report".into(), report);
        m.insert(
            "assumptions".into(),
            serde_json::to_value(&assumptions).unwrap_or(Value::Null),
        );
        if let Some(s) = &sens {
            m.insert(
                "sensitivity".into(),
                serde_json::to_value(s).unwrap_or(Value::Null),
            );
        }
    }
    Ok(Outcome {
        json,
        before: e.printed(&result),
        table: (!checks.is_empty()).then(|| checks_display(&checks)),
        lines: e.lines(&result),
        summary,
        assumptions,
        sensitivity: sens,
        out: out.to_path_buf(),
        speed: e.speed(&result, opt),
    })
}

/// Puts the declared assumptions (and the sensitivity of each verdict to them) into
/// `report`, right after its table of checks.
fn add_assumptions(report: &mut Report, declared: &[Declared], sens: Option<&Sensitivity>) {
    let at = report
        .tables
        .iter()
        .position(|t| t.id == "checks")
        .map_or(0, |i| i + 1);
    let mut tables = Vec::new();
    if let Some(s) = sens {
        tables.push(s.checks_table());
        report.summary.push(s.paragraph());
    }
    if !declared.is_empty() {
        tables.push(sensitivity::assumptions_table(declared, sens));
    }
    report.tables.splice(at..at, tables);
}

/// `reproduce`: the shipped scenarios of `e` (all, or `only`), into `out` (default
/// `report-<paper>`), with the sensitivity to the declared assumptions when asked.
pub fn reproduce<E: Experiment>(
    e: &E,
    only: Option<&str>,
    opt: &RunOptions,
    sensitivity: bool,
    out: Option<PathBuf>,
    default_out: &str,
    progress: &dyn Progress,
) -> Result<Outcome, ReproduceError> {
    let sources = e.builtin_sources(only)?;
    let scenarios = e.load_sources(&sources)?;
    let out = out.unwrap_or_else(|| PathBuf::from(default_out));
    let job = Job {
        scenarios: &scenarios,
        sources: &sources,
        sensitivity,
    };
    run_experiment(e, &job, opt, &out, &e.title(), progress)
}

#[cfg(feature = "real")]
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

#[cfg(test)]
mod sensitivity_runs;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Silent;
    use crate::gulati::Gulati;

    #[test]
    fn papers_are_a_typed_value_with_their_names() {
        use clap::ValueEnum;
        let names: Vec<&str> = Paper::value_variants().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["gulati", "nagar", "yum"]);
        assert_eq!(Paper::from_str("yum", false).unwrap(), Paper::Yum);
        assert!(Paper::from_str("yum2", false).is_err());
    }

    #[test]
    #[cfg(feature = "real")]
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
        let opt = RunOptions {
            quick: true,
            ..RunOptions::default()
        };
        let o = reproduce(
            &Gulati,
            Some("best-effort-one"),
            &opt,
            false,
            Some(dir.path().to_path_buf()),
            "unused",
            &Silent,
        )
        .unwrap();
        assert_eq!(
            o.table.as_ref().unwrap().rows.len(),
            o.json["results"][0]["checks"].as_array().unwrap().len()
        );
        assert!(
            o.summary_line().contains(" checks ("),
            "{}",
            o.summary_line()
        );
        assert!(dir.path().join("index.html").exists());
        assert_eq!(o.json["report"], dir.path().display().to_string());
        let problems = crate::report::audit::audit(dir.path());
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
