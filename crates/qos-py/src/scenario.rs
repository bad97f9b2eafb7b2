//! Scenarios from Python: resolve a file or shipped name, validate, write
//! sweep values in, run (as `clusterqos run FILE --seed S --json`), expand a sweep into
//! its tasks, run `reproduce gulati`. Inputs and outputs are strings (TOML text, JSON);
//! the interpreter is released while anything is simulated, so threads run in parallel.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::wrap_pyfunction;
use qos_experiments::experiment::{Experiment, Progress, RunOptions};
use qos_experiments::gulati::{self, Gulati};
use qos_experiments::report::Figure;
use qos_experiments::sensitivity::{self, Declared};
use qos_experiments::sweep::{self, params, Assignment, Outcome, Param, Source, Sweep};
use serde::Serialize;

use crate::errors;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(model, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(with_params, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(tasks, m)?)?;
    m.add_function(wrap_pyfunction!(parse_over, m)?)?;
    m.add_function(wrap_pyfunction!(parse_seeds, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_names, m)?)?;
    m.add_function(wrap_pyfunction!(json_to_toml, m)?)?;
    m.add_function(wrap_pyfunction!(toml_to_json, m)?)?;
    Ok(())
}

/// `[[key, value], ...]`: one point's values.
type Pairs = Vec<(String, serde_json::Value)>;

fn json_err(what: &str, e: serde_json::Error) -> PyErr {
    errors::input(format!("{what}: {e}"))
}

/// `[[key, value], ...]` (JSON) as an assignment.
fn assignment(params_json: &str) -> PyResult<Assignment> {
    let pairs: Pairs =
        serde_json::from_str(params_json).map_err(|e| json_err("sweep parameters", e))?;
    Ok(Assignment(pairs))
}

/// (file, text) of a scenario file or a shipped scenario's name.
#[pyfunction]
fn resolve(arg: &str) -> PyResult<(String, String)> {
    let s = Source::resolve(arg).map_err(errors::sweep)?;
    Ok((s.file, s.text))
}

/// "flit" or "cluster".
#[pyfunction]
fn model(text: &str) -> &'static str {
    match Source::new("", text).model() {
        sweep::Model::Flit => "flit",
        sweep::Model::Cluster => "cluster",
    }
}

/// Loads the scenario (raises `ScenarioError` with file:line if it is wrong).
#[pyfunction]
fn validate(py: Python<'_>, file: &str, text: &str) -> PyResult<()> {
    let s = Source::new(file, text);
    py.detach(|| s.load().map(|_| ())).map_err(errors::sweep)
}

/// The text with `params` (JSON `[[key, value], ...]`) written in.
#[pyfunction]
fn with_params(file: &str, text: &str, params: &str) -> PyResult<String> {
    let a = assignment(params)?;
    Source::new(file, text)
        .with(&a)
        .map(|s| s.text)
        .map_err(errors::sweep)
}

#[derive(Serialize)]
struct RunOut<'a> {
    model: sweep::Model,
    seed: u64,
    params: &'a [(String, serde_json::Value)],
    /// What `clusterqos run --json` prints for it.
    output: &'a Outcome,
    figures: Vec<Figure>,
}

/// Runs the scenario with `params` written in, at `seed`: JSON `{model, seed, params,
/// output, figures}` where `output` is what `clusterqos run FILE --json` prints (a flit
/// run's object; a cluster run's `{results, model, summary}`). Writes the report to
/// `report` when given. A pure function of its arguments: the task of every sweep.
#[pyfunction]
#[pyo3(signature = (file, text, params="[]", seed=None, quick=false, report=None))]
fn run(
    py: Python<'_>,
    file: &str,
    text: &str,
    params: &str,
    seed: Option<u64>,
    quick: bool,
    report: Option<PathBuf>,
) -> PyResult<String> {
    let a = assignment(params)?;
    let source = Source::new(file, text);
    py.detach(|| -> Result<String, sweep::SweepError> {
        let out = sweep::run_point(&source, &a, seed, quick)?;
        let rep = out.report();
        if let Some(dir) = &report {
            rep.write(dir)?;
        }
        Ok(serde_json::to_string(&RunOut {
            model: out.model(),
            seed: out.seed(),
            params: &a.0,
            output: &out,
            figures: rep.figures,
        })
        .unwrap_or_default())
    })
    .map_err(errors::sweep)
}

/// The sweep's tasks, in order, after writing every combination in and loading it
/// once: JSON `[[params, seed], ...]` with params as `[[key, value], ...]`.
#[pyfunction]
#[pyo3(signature = (file, text, over, seeds=None))]
fn tasks(
    py: Python<'_>,
    file: &str,
    text: &str,
    over: &str,
    seeds: Option<Vec<u64>>,
) -> PyResult<String> {
    let over: Vec<(String, Vec<serde_json::Value>)> =
        serde_json::from_str(over).map_err(|e| json_err("over", e))?;
    let s = Sweep {
        source: Source::new(file, text),
        over: over
            .into_iter()
            .map(|(key, values)| Param { key, values })
            .collect(),
        seeds,
        quick: false,
    };
    let tasks = py.detach(|| s.tasks()).map_err(errors::sweep)?;
    let list: Vec<(&Pairs, Option<u64>)> = tasks.iter().map(|t| (&t.params.0, t.seed)).collect();
    Ok(serde_json::to_string(&list).unwrap_or_default())
}

/// `KEY=V1,V2` as `clusterqos sweep --over` reads it: JSON `[key, [values]]`.
#[pyfunction]
fn parse_over(arg: &str) -> PyResult<String> {
    let p = Param::parse(arg).map_err(|e| errors::sweep(e.into()))?;
    Ok(serde_json::to_string(&(p.key, p.values)).unwrap_or_default())
}

/// Seeds as `clusterqos sweep --seeds` reads them (`1..10` is 1 to 10).
#[pyfunction]
fn parse_seeds(arg: &str) -> PyResult<Vec<u64>> {
    params::parse_seeds(arg).map_err(|e| errors::sweep(e.into()))
}

#[derive(Serialize)]
struct Reproduced<'a> {
    #[serde(flatten)]
    sim: &'a gulati::Simulated,
    assumptions: &'a [Declared],
    figures: Vec<Figure>,
}

/// `reproduce gulati [--only NAME] [--seed S] [--quick]`: JSON `{results, model,
/// summary, assumptions, figures}` (the command's `--json` and the report's figures).
/// `progress(name)` is called as each scenario starts.
#[pyfunction]
#[pyo3(signature = (only=None, seed=None, quick=false, report=None, progress=None))]
fn reproduce(
    py: Python<'_>,
    only: Option<&str>,
    seed: Option<u64>,
    quick: bool,
    report: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let sources = Gulati.builtin_sources(only).map_err(errors::experiment)?;
    let scenarios = Gulati.load_sources(&sources).map_err(errors::experiment)?;
    let assumptions =
        sensitivity::declared(&Gulati, &scenarios, &sources).map_err(errors::experiment)?;
    let mut callback_error = None;
    let out = py.detach(|| -> Result<String, sweep::SweepError> {
        let sink = Callback {
            progress: progress.as_ref(),
            error: std::sync::Mutex::new(None),
        };
        let opt = RunOptions {
            seed,
            quick,
            workers: 1,
            threads: None,
        };
        let sim = gulati::simulate(&scenarios, &opt, &sink);
        callback_error = sink.error.into_inner().ok().flatten();
        let sim = sim?;
        let rep = gulati::report(&sim, gulati::TITLE, gulati::NOTES);
        if let Some(dir) = &report {
            rep.write(dir)?;
        }
        Ok(serde_json::to_string(&Reproduced {
            sim: &sim,
            assumptions: &assumptions,
            figures: rep.figures,
        })
        .unwrap_or_default())
    });
    if let Some(e) = callback_error {
        return Err(e);
    }
    out.map_err(errors::sweep)
}

/// A Python callable that hears each scenario as it finishes; its first exception is
/// kept and raised when the run returns.
struct Callback<'a> {
    progress: Option<&'a Py<PyAny>>,
    error: std::sync::Mutex<Option<PyErr>>,
}

impl Progress for Callback<'_> {
    fn plan(&self, _: u64) {}
    fn done(&self, name: &str) {
        if let Some(cb) = self.progress {
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (name,)) {
                    if let Ok(mut slot) = self.error.lock() {
                        slot.get_or_insert(e);
                    }
                }
            });
        }
    }
}

/// Names of the shipped thesis scenarios.
#[pyfunction]
fn builtin_names() -> Vec<&'static str> {
    qos_experiments::gulati::builtin::names()
}

/// A JSON object as TOML text (a scenario given as a dict).
#[pyfunction]
fn json_to_toml(json: &str) -> PyResult<String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| json_err("scenario", e))?;
    if !v.is_object() {
        return Err(errors::input("a scenario must be a dict (a TOML table)"));
    }
    toml::to_string(&v).map_err(|e| errors::input(format!("the scenario has no TOML form: {e}")))
}

/// TOML text as JSON (a scenario as a dict).
#[pyfunction]
fn toml_to_json(file: &str, text: &str) -> PyResult<String> {
    let t: toml::Table =
        qos_core::source::parse_toml(file, text).map_err(|e| errors::input(e.to_string()))?;
    serde_json::to_string(&t).map_err(|e| json_err(file, e))
}
