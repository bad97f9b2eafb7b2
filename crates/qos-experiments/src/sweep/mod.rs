//! Scenario sweeps: one scenario file — a thesis scenario
//! (`scenarios/gulati/`) or a flit-network scenario (`scenarios/flit/`) — run at every
//! combination of some of its values and at several seeds, each run a pure task
//! (scenario text and seed in, results out) whose results depend only on them. Used by
//! `clusterqos sweep` (runs on a thread pool here) and by the Python package (runs the
//! same tasks on a process pool, Dask or Ray, [`run_point`]).
//!
//! Map of the module:
//! - [`params`] — `--over key=v1,v2` and `--seeds 1..10`, and writing one point's
//!   values into the scenario's TOML (the rest of the file kept as written, so errors
//!   still name the user's lines).
//! - [`Source`] — a scenario as text, read from a file or a shipped name, runnable
//!   once ([`Source::run`]) exactly as `clusterqos run FILE --seed S --json` runs it.
//! - [`Sweep`] — expansion into [`Task`]s and the thread pool.

pub mod params;

use std::sync::atomic::{AtomicUsize, Ordering};

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::experiment::{Experiment, RunOptions, Silent};
use crate::flit::scenario::{self as flit, FlitRun, FlitScenario};
use crate::gulati::scenario::{self, Scenario};
use crate::gulati::Gulati;
use crate::gulati::{self, Simulated};
use crate::report::{Cell, Figure, Report, Table};
use crate::sensitivity::Declared;
pub use params::{parse_seeds, Assignment, Param, ParamError};

/// Why a scenario or a sweep could not run.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Read {
        /// As given.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Neither a file nor a shipped scenario, or not readable.
    #[error(transparent)]
    Resolve(#[from] crate::run::LoadError),
    /// A cluster (thesis) scenario is malformed (`file:line: message`).
    #[error(transparent)]
    Scenario(#[from] qos_core::source::Located),
    /// A flit scenario is malformed or its run failed (`file:line: message`).
    #[error(transparent)]
    Flit(#[from] flit::ScenarioError),
    /// A cluster scenario could not run.
    #[error(transparent)]
    Experiment(#[from] crate::Error),
    /// The sweep's parameters are unusable.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// The report could not be written.
    #[error("writing the report: {0}")]
    Report(#[from] crate::report::ReportError),
    /// One run of a sweep failed.
    #[error("at {params} seed {seed}: {source}")]
    At {
        /// Its parameters.
        params: String,
        /// Its seed.
        seed: String,
        /// Cause.
        source: Box<SweepError>,
    },
    /// The thread pool could not start.
    #[error("cannot start {workers} workers: {why}")]
    Pool {
        /// Asked for.
        workers: usize,
        /// Cause.
        why: String,
    },
}

/// Which model a scenario is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// The Myrinet/GM cluster model (thesis scenarios, `kind = ...`).
    Cluster,
    /// The flit-level network (a `[network]` table).
    Flit,
}

/// The scenario a sweep varies: the one type of a scenario's text and name
/// ([`crate::experiment::Source`]), with what a sweep does with it below.
pub use crate::experiment::Source;

pub use crate::run::read_beside;

/// A loaded, validated scenario.
#[derive(Debug, Clone)]
pub enum Loaded {
    /// Thesis scenario.
    Cluster(Box<Scenario>),
    /// Flit-network scenario.
    Flit(Box<FlitScenario>),
}

/// What a sweep does with a scenario's text.
impl Source {
    /// A file, or a shipped scenario by name (`idt-sweep`), as `clusterqos run` finds it.
    pub fn resolve(arg: &str) -> Result<Source, SweepError> {
        Ok(crate::run::resolve(arg)?)
    }

    /// Which model it is for: its `model` key (a scenario of any other model than the
    /// flit network's is loaded as a thesis scenario, which names what is wrong).
    pub fn model(&self) -> Model {
        match crate::experiment::Model::of(&self.file, &self.text) {
            Ok(crate::experiment::Model::Flit) => Model::Flit,
            _ => Model::Cluster,
        }
    }

    /// The same scenario with one point's values written in.
    pub fn with(&self, assignment: &Assignment) -> Result<Source, SweepError> {
        Ok(Source {
            text: params::apply(&self.text, assignment)?,
            ..self.clone()
        })
    }

    /// Parses and validates it.
    pub fn load(&self) -> Result<Loaded, SweepError> {
        crate::experiment::Model::of(&self.file, &self.text)?;
        match self.model() {
            Model::Flit => Ok(Loaded::Flit(Box::new(FlitScenario::parse(
                &self.file,
                &self.text,
                |p| self.read(p),
            )?))),
            Model::Cluster => {
                let s = scenario::load(&self.file, &self.text, |p| self.read(p))?;
                Ok(Loaded::Cluster(Box::new(s)))
            }
        }
    }

    /// Runs it as `clusterqos run FILE [--seed S] [--quick]` does.
    pub fn run(&self, seed: Option<u64>, quick: bool) -> Result<Outcome, SweepError> {
        match self.load()? {
            Loaded::Flit(mut s) => {
                if quick {
                    s.quick();
                }
                if let Some(seed) = seed {
                    s.network.seed = seed;
                }
                let run = flit::run_scenario(&self.file, &s, |_| {})?;
                Ok(Outcome::Flit {
                    seed: s.network.seed,
                    run,
                    description: s.description.clone(),
                })
            }
            Loaded::Cluster(s) => {
                let opt = RunOptions {
                    seed,
                    quick,
                    workers: 1,
                    threads: None,
                };
                let used = opt.seed_for(s.file.seed);
                let sim = gulati::simulate(std::slice::from_ref(&*s), &opt, &Silent)?;
                let assumptions = crate::assume::declared(&self.file, &self.text)?
                    .into_iter()
                    .map(|assumption| Declared {
                        experiment: Gulati.name(&s).to_string(),
                        file: self.file.clone(),
                        assumption,
                    })
                    .collect();
                Ok(Outcome::Cluster {
                    seed: used,
                    sim,
                    assumptions,
                })
            }
        }
    }
}

/// What one run produced. Serialises as `clusterqos run --json` prints it: a flit
/// run's object (the one element of its array), or a cluster run's
/// `{results, model, summary, assumptions}` (without the report directory).
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A flit-network run.
    Flit {
        /// Seed used.
        seed: u64,
        /// Its points.
        run: FlitRun,
        /// The scenario's description (report text).
        description: String,
    },
    /// A thesis-scenario run.
    Cluster {
        /// Seed used.
        seed: u64,
        /// Its results and checks.
        sim: Simulated,
        /// The assumptions the scenario declares (as `run --json` lists them).
        assumptions: Vec<Declared>,
    },
}

/// A cluster run as `clusterqos run --json` prints it.
#[derive(Serialize)]
struct ClusterJson<'a> {
    #[serde(flatten)]
    sim: &'a Simulated,
    assumptions: &'a [Declared],
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Outcome::Flit { run, .. } => run.serialize(s),
            Outcome::Cluster {
                sim, assumptions, ..
            } => ClusterJson { sim, assumptions }.serialize(s),
        }
    }
}

impl Outcome {
    /// The seed the run used.
    pub fn seed(&self) -> u64 {
        match self {
            Outcome::Flit { seed, .. } | Outcome::Cluster { seed, .. } => *seed,
        }
    }

    /// Which model ran.
    pub fn model(&self) -> Model {
        match self {
            Outcome::Flit { .. } => Model::Flit,
            Outcome::Cluster { .. } => Model::Cluster,
        }
    }

    /// The report `clusterqos run` writes for it.
    pub fn report(&self) -> Report {
        match self {
            Outcome::Flit {
                run, description, ..
            } => flit::report(run, description),
            Outcome::Cluster { sim, .. } => gulati::report(sim, "clusterqos run", gulati::NOTES),
        }
    }

    /// The report's figures.
    pub fn figures(&self) -> Vec<Figure> {
        self.report().figures
    }
}

/// One run of a sweep: its parameters and seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Position in the sweep (results come back in this order).
    pub index: usize,
    /// The values written into the scenario.
    pub params: Assignment,
    /// The seed (None: the scenario's own).
    pub seed: Option<u64>,
}

/// Runs one point of a sweep: `source` with `params` written in, at `seed`. A pure
/// function of its arguments: the task every engine runs.
pub fn run_point(
    source: &Source,
    params: &Assignment,
    seed: Option<u64>,
    quick: bool,
) -> Result<Outcome, SweepError> {
    source.with(params)?.run(seed, quick)
}

/// A sweep: a scenario, the values to vary and the seeds.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The scenario as written.
    pub source: Source,
    /// Keys and their values (every combination is run).
    pub over: Vec<Param>,
    /// Seeds of every combination (None: the scenario's own seed, once).
    pub seeds: Option<Vec<u64>>,
    /// Reduced run lengths.
    pub quick: bool,
}

/// One finished run.
#[derive(Debug, Clone)]
pub struct Record {
    /// Its parameters.
    pub params: Assignment,
    /// Its results.
    pub outcome: Outcome,
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("params", &Ordered(&self.params))?;
        m.serialize_entry("seed", &self.outcome.seed())?;
        m.serialize_entry("result", &self.outcome)?;
        m.end()
    }
}

/// An assignment as a JSON object in sweep order.
struct Ordered<'a>(&'a Assignment);

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0 .0.len()))?;
        for (k, v) in &self.0 .0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Every run of a sweep, in task order.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRun {
    /// The scenario's file.
    pub scenario: String,
    /// Its model.
    pub model: Model,
    /// What was varied.
    pub over: Vec<Param>,
    /// The runs.
    pub runs: Vec<Record>,
}

impl Sweep {
    /// A sweep as `clusterqos sweep` is given it: the scenario (a file or a shipped
    /// name), the `--over` texts (`KEY=V1,V2,...`) and the `--seeds` text.
    pub fn parse(
        scenario: &str,
        over: &[String],
        seeds: Option<&str>,
        quick: bool,
    ) -> Result<Sweep, SweepError> {
        let over = over
            .iter()
            .map(|a| Param::parse(a))
            .collect::<Result<Vec<_>, _>>()?;
        let seeds = seeds.map(parse_seeds).transpose()?;
        Ok(Sweep {
            source: Source::resolve(scenario)?,
            over,
            seeds,
            quick,
        })
    }

    /// The runs, in order: every combination of `over` (the first key varying slowest),
    /// each at every seed. Every combination is written into the scenario and loaded
    /// once first, so a bad key or value is reported before anything runs.
    pub fn tasks(&self) -> Result<Vec<Task>, SweepError> {
        let combos = params::combinations(&self.over)?;
        let seeds: Vec<Option<u64>> = match &self.seeds {
            Some(s) => s.iter().copied().map(Some).collect(),
            None => vec![None],
        };
        let total = combos.len() as u128 * seeds.len() as u128;
        if total > params::MAX_TASKS as u128 {
            return Err(ParamError::TooMany(total).into());
        }
        let mut tasks = Vec::new();
        for c in combos {
            self.source
                .with(&c)
                .and_then(|s| s.load())
                .map_err(|e| SweepError::At {
                    params: c.to_string(),
                    seed: "(any)".into(),
                    source: Box::new(e),
                })?;
            for &seed in &seeds {
                tasks.push(Task {
                    index: tasks.len(),
                    params: c.clone(),
                    seed,
                });
            }
        }
        Ok(tasks)
    }

    /// Runs task `t`.
    pub fn run_task(&self, t: &Task) -> Result<Record, SweepError> {
        let outcome =
            run_point(&self.source, &t.params, t.seed, self.quick).map_err(|e| SweepError::At {
                params: t.params.to_string(),
                seed: t.seed.map_or("(scenario's)".into(), |s| s.to_string()),
                source: Box::new(e),
            })?;
        Ok(Record {
            params: t.params.clone(),
            outcome,
        })
    }

    /// Runs every task on `workers` threads; `progress(done, total)` hears each
    /// finished run. Results are in task order whatever the number of workers; the
    /// first failure stops the sweep.
    pub fn run(
        &self,
        workers: usize,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<SweepRun, SweepError> {
        use rayon::prelude::*;
        let tasks = self.tasks()?;
        let workers = workers.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("sweep-{i}"))
            .build()
            .map_err(|e| SweepError::Pool {
                workers,
                why: e.to_string(),
            })?;
        let done = AtomicUsize::new(0);
        let n = tasks.len();
        let runs = pool.install(|| {
            tasks
                .par_iter()
                .map(|t| {
                    let r = self.run_task(t);
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, n);
                    r
                })
                .collect::<Result<Vec<_>, _>>()
        })?;
        Ok(SweepRun {
            scenario: self.source.file.clone(),
            model: self.source.model(),
            over: self.over.clone(),
            runs,
        })
    }
}

impl SweepRun {
    /// One row per point (flit) or per check (cluster), the parameters and seed first;
    /// numbers in full in the CSV.
    pub fn table(&self) -> Table {
        let mut cols: Vec<String> = self.over.iter().map(|p| p.key.clone()).collect();
        cols.push("seed".into());
        let rest: &[&str] = match self.model {
            Model::Flit => &[
                "rate (pkt/node/cycle)",
                "offered (flit/node/cycle)",
                "accepted (flit/node/cycle)",
                "latency avg (cycles)",
                "p99 (cycles)",
                "saturated",
            ],
            Model::Cluster => &[
                "experiment",
                "metric",
                "kind",
                "published",
                "measured",
                "deviation",
                "verdict",
            ],
        };
        cols.extend(rest.iter().map(|c| c.to_string()));
        let mut t = Table::new("sweep", format!("Sweep of {}", self.scenario), cols);
        for r in &self.runs {
            let mut lead: Vec<Cell> = r.params.0.iter().map(params::cell).collect();
            lead.push(Cell::from(r.outcome.seed()));
            match &r.outcome {
                Outcome::Flit { run, .. } => {
                    for p in &run.points {
                        let t_ = &p.result.total;
                        let mut row = lead.clone();
                        row.extend([
                            Cell::from(p.rate),
                            Cell::fixed(t_.offered, 4),
                            Cell::fixed(t_.accepted, 4),
                            Cell::fixed(t_.latency.avg, 2),
                            Cell::from(t_.latency.p99),
                            Cell::from(p.result.saturated),
                        ]);
                        t.push(row);
                    }
                }
                Outcome::Cluster { sim, .. } => {
                    for c in sim.checks() {
                        let mut row = lead.clone();
                        row.extend([
                            Cell::from(&c.id.experiment),
                            Cell::from(&c.label),
                            Cell::from(c.kind.name()),
                            Cell::maybe(c.published.as_ref().map(|p| p.value)),
                            Cell::from(c.measured),
                            if c.published.is_some() {
                                Cell::fixed(c.deviation, 4)
                            } else {
                                Cell::Empty
                            },
                            Cell::from(c.verdict.name()),
                        ]);
                        t.push(row);
                    }
                }
            }
        }
        t
    }

    /// Checks that missed, over every run.
    pub fn misses(&self) -> usize {
        self.runs
            .iter()
            .map(|r| match &r.outcome {
                Outcome::Cluster { sim, .. } => sim.summary.misses,
                Outcome::Flit { .. } => 0,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests;
