//! The flit network's load sweeps as an experiment (Yum et al. §6.1; the
//! BookSim2-equivalent networks, `scenarios/flit/`): a scenario file is a network and a
//! sweep of one class's rate ([`scenario`]); running it gives latency and throughput at
//! every load and the saturation point. No paper prints these numbers, so there are no
//! checks: the report is the table of every point and the two figures per scenario.

pub mod booksim;
#[cfg(test)]
mod booksim_tests;
pub mod scenario;
#[cfg(test)]
mod tests;

use qos_core::source::Located;
use serde::Serialize;

use crate::check::Check;
use crate::experiment::{Experiment, Model, Progress, ReadFile, RunOptions};
use crate::report::{Report, Table};
use crate::Error;

pub use scenario::{FlitRun, FlitScenario};

/// The shipped flit scenarios, in the order the documentation gives them.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "mesh8-reference",
        include_str!("../../../../scenarios/flit/mesh8-reference.toml"),
    ),
    (
        "crossbar8-wrr",
        include_str!("../../../../scenarios/flit/crossbar8-wrr.toml"),
    ),
    (
        "torus8-dateline",
        include_str!("../../../../scenarios/flit/torus8-dateline.toml"),
    ),
    (
        "mesh4-booksim2",
        include_str!("../../../../scenarios/flit/mesh4-booksim2.toml"),
    ),
    (
        "mesh8-booksim2",
        include_str!("../../../../scenarios/flit/mesh8-booksim2.toml"),
    ),
    (
        "mesh8-short-booksim2",
        include_str!("../../../../scenarios/flit/mesh8-short-booksim2.toml"),
    ),
    (
        "mesh8-transpose-booksim2",
        include_str!("../../../../scenarios/flit/mesh8-transpose-booksim2.toml"),
    ),
    (
        "torus4-booksim2",
        include_str!("../../../../scenarios/flit/torus4-booksim2.toml"),
    ),
    (
        "torus8-booksim2",
        include_str!("../../../../scenarios/flit/torus8-booksim2.toml"),
    ),
];

/// What running flit scenarios produced: one run each, in order.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct FlitRuns {
    /// Each scenario's run.
    pub runs: Vec<FlitRun>,
    /// Each scenario's description (report text).
    #[serde(skip)]
    pub descriptions: Vec<String>,
}

/// The flit network's load sweeps.
#[derive(Debug, Clone, Copy, Default)]
pub struct Flit;

/// `scenarios` as `opt` runs them: shortened with `quick`, at its seed.
fn prepare(scenarios: &[(String, FlitScenario)], opt: &RunOptions) -> Vec<(String, FlitScenario)> {
    scenarios
        .iter()
        .map(|(f, s)| {
            let mut s = s.clone();
            if opt.quick {
                s.quick();
            }
            if let Some(seed) = opt.seed {
                s.network.seed = seed;
            }
            (f.clone(), s)
        })
        .collect()
}

impl Experiment for Flit {
    type Scenario = (String, FlitScenario);
    type Output = FlitRuns;

    fn model(&self) -> Model {
        Model::Flit
    }
    fn title(&self) -> String {
        "Flit network: latency and throughput against offered load".into()
    }
    fn builtin(&self) -> Vec<(&'static str, &'static str)> {
        BUILTIN.to_vec()
    }
    fn load(
        &self,
        file: &str,
        text: &str,
        read: &ReadFile<'_>,
    ) -> Result<(String, FlitScenario), Located> {
        match FlitScenario::parse(file, text, read) {
            Ok(s) => Ok((file.to_string(), s)),
            Err(scenario::ScenarioError::Parse(l)) => Err(l),
            Err(e) => Err(Located::whole(file, e.to_string())),
        }
    }
    fn name<'a>(&self, s: &'a (String, FlitScenario)) -> &'a str {
        &s.1.name
    }
    /// One unit per point (rate) of every scenario, as `opt` shortens it.
    fn units(&self, scenarios: &[(String, FlitScenario)], opt: &RunOptions) -> u64 {
        prepare(scenarios, opt)
            .iter()
            .map(|(_, s)| s.points().len() as u64)
            .sum()
    }
    fn simulate(
        &self,
        scenarios: &[(String, FlitScenario)],
        opt: &RunOptions,
        progress: &dyn Progress,
    ) -> Result<FlitRuns, Error> {
        let prepared = prepare(scenarios, opt);
        progress.plan(prepared.iter().map(|(_, s)| s.points().len() as u64).sum());
        let mut runs = Vec::new();
        for (file, s) in &prepared {
            let run = scenario::run_scenario_on(file, s, opt.threads, |p| {
                let what = format!("{} rate {}", s.name, p.rate);
                if p.cycle == 0 && p.point > 0 {
                    progress.done(&format!("{} point {}", s.name, p.point));
                }
                progress.within(&what, p.cycle, p.planned);
            })
            .map_err(Error::Flit)?;
            progress.done(&format!("{} point {}", s.name, run.points.len()));
            runs.push(run);
        }
        Ok(FlitRuns {
            runs,
            descriptions: prepared.into_iter().map(|(_, s)| s.description).collect(),
        })
    }
    fn checks<'a>(&self, _out: &'a FlitRuns) -> Vec<&'a Check> {
        Vec::new()
    }
    fn report(&self, out: &FlitRuns, title: &str) -> Report {
        if let ([run], [d]) = (&out.runs[..], &out.descriptions[..]) {
            return scenario::report(run, d);
        }
        let mut rep = Report::new(title);
        for (run, d) in out.runs.iter().zip(&out.descriptions) {
            scenario::add_to_report(&mut rep, run, d, &format!("{}-", run.name));
        }
        rep
    }
    fn printed(&self, out: &FlitRuns) -> Vec<Table> {
        out.runs
            .iter()
            .flat_map(|r| {
                std::iter::once(scenario::points_table(r, "points"))
                    .chain(scenario::classes_table(r, "classes"))
            })
            .collect()
    }
    fn lines(&self, out: &FlitRuns) -> Vec<String> {
        out.runs.iter().flat_map(scenario::summary_lines).collect()
    }
}
