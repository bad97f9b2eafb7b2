//! Running flit-network scenario files (Yum et al. §6.1 experiments) the way
//! `clusterqos run` does: decide whether the given files are flit scenarios (a
//! `[network]` table), apply `--quick` and `--seed`, run each sweep with progress
//! reports, choose its report directory and write the report (latency-vs-load and
//! throughput figures, CSV/JSON). The CLI only parses arguments and prints.

use std::path::{Path, PathBuf};

use super::scenario::{
    is_flit_scenario, report, run_scenario, FlitRun, FlitScenario, ScenarioError,
};
use crate::report::ReportError;

/// How to run a batch of flit scenarios.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Report directory (default `report-<name>`, or `report-flit` for several files).
    pub out: Option<PathBuf>,
    /// Reduced run lengths.
    pub quick: bool,
    /// Seed overriding the scenarios' own.
    pub seed: Option<u64>,
}

/// Why a batch could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Flit and cluster scenarios were given together.
    #[error(
        "flit-network scenarios cannot be run together with cluster scenarios; run them separately"
    )]
    Mixed,
    /// A scenario is malformed or its run failed.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// Flit scenarios loaded from files, ready to run one by one.
#[derive(Debug)]
pub struct FlitBatch {
    scenarios: Vec<(String, FlitScenario)>,
    out: Option<PathBuf>,
}

/// One finished scenario.
#[derive(Debug)]
pub struct Outcome {
    /// Results of every point of the sweep.
    pub run: FlitRun,
    /// Where the report was written.
    pub dir: PathBuf,
}

impl FlitBatch {
    /// Loads `paths`: `Ok(None)` if a file cannot be read or none is a flit scenario
    /// (the cluster model takes them), an error if flit and cluster scenarios are mixed
    /// or a flit scenario is malformed.
    pub fn load(paths: &[String], opts: &RunOptions) -> Result<Option<FlitBatch>, RunnerError> {
        let mut texts = Vec::new();
        for p in paths {
            let Ok(t) = std::fs::read_to_string(p) else {
                return Ok(None);
            };
            texts.push((p.clone(), t));
        }
        let flit = texts.iter().filter(|(_, t)| is_flit_scenario(t)).count();
        if flit == 0 {
            return Ok(None);
        }
        if flit != texts.len() {
            return Err(RunnerError::Mixed);
        }
        let mut scenarios = Vec::new();
        for (file, text) in texts {
            let mut s = FlitScenario::parse(&file, &text)?;
            if opts.quick {
                s.quick();
            }
            if let Some(seed) = opts.seed {
                s.network.seed = seed;
            }
            scenarios.push((file, s));
        }
        Ok(Some(FlitBatch {
            scenarios,
            out: opts.out.clone(),
        }))
    }

    /// The scenarios, in the order given.
    pub fn scenarios(&self) -> impl Iterator<Item = &FlitScenario> {
        self.scenarios.iter().map(|(_, s)| s)
    }

    /// Number of scenarios.
    pub fn len(&self) -> usize {
        self.scenarios.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.scenarios.is_empty()
    }

    /// Report directory of scenario `name`.
    fn dir(&self, name: &str) -> PathBuf {
        let several = self.scenarios.len() > 1;
        match &self.out {
            Some(out) if several => out.join(name),
            Some(out) => out.clone(),
            None if several => PathBuf::from("report-flit"),
            None => PathBuf::from(format!("report-{name}")),
        }
    }

    /// Runs scenario `i`, calling `progress(point, points)` before each point of its
    /// sweep, and writes its report.
    pub fn run(
        &self,
        i: usize,
        progress: impl FnMut(usize, usize),
    ) -> Result<Outcome, RunnerError> {
        let (file, s) = &self.scenarios[i];
        let run = run_scenario(file, s, progress)?;
        let dir = self.dir(&s.name);
        report(&run, &s.description).write(Path::new(&dir))?;
        Ok(Outcome { run, dir })
    }
}
