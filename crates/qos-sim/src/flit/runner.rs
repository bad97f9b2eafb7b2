//! Running flit-network scenario files (Yum et al. §6.1 experiments) the way
//! `clusterqos run` does: decide whether the given texts are flit scenarios (a
//! `[network]` table), apply `--quick` and `--seed`, run each sweep with progress
//! reports, choose its report directory and write the report (latency-vs-load and
//! throughput figures, CSV/JSON). The caller reads the files and passes a reader for
//! the topology files they name; the CLI only reads, parses arguments and prints.

use std::path::{Path, PathBuf};

use super::scenario::{
    is_flit_scenario, report, run_scenario, FlitRun, FlitScenario, Progress, ScenarioError,
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
    /// Parses `inputs` (file name, text): `Ok(None)` if none is a flit scenario (the
    /// cluster model takes them), an error if flit and cluster scenarios are mixed or a
    /// flit scenario is malformed. `read(scenario, path)` fetches the topology file
    /// `path` a graph scenario names, as written in the scenario file `scenario`, and
    /// returns its name and text.
    pub fn load(
        inputs: Vec<(String, String)>,
        opts: &RunOptions,
        mut read: impl FnMut(&str, &str) -> Result<(String, String), String>,
    ) -> Result<Option<FlitBatch>, RunnerError> {
        let flit = inputs.iter().filter(|(_, t)| is_flit_scenario(t)).count();
        if flit == 0 {
            return Ok(None);
        }
        if flit != inputs.len() {
            return Err(RunnerError::Mixed);
        }
        let mut scenarios = Vec::new();
        for (file, text) in inputs {
            let mut s = FlitScenario::parse(&file, &text, |p| read(&file, p))?;
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

    /// Runs scenario `i`, calling `progress` as each point of its sweep starts and
    /// every few thousand cycles of it, and writes its report.
    pub fn run(&self, i: usize, progress: impl FnMut(Progress)) -> Result<Outcome, RunnerError> {
        let (file, s) = &self.scenarios[i];
        let run = run_scenario(file, s, progress)?;
        let dir = self.dir(&s.name);
        report(&run, &s.description).write(Path::new(&dir))?;
        Ok(Outcome { run, dir })
    }
}
