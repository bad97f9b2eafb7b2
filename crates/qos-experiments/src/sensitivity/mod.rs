//! How much each verdict depends on the choices the papers leave open
//! (`reproduce PAPER --sensitivity`): every declared assumption ([`crate::assume`]) of
//! a scenario is set, one at a time, to each end of its range (or each alternative);
//! the scenario runs again with the same seed, and each check's verdict is compared
//! with the main run's. A check *holds* when its verdict is the same at every end of
//! every assumption of its scenario; otherwise the assumptions and values that flip it
//! are named. The runs are independent and run in parallel (`--workers`).

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::assume::{self, show, Assumption};
use crate::check::{Check, Kind, MetricId, Summary, Verdict};
use crate::experiment::{Experiment, Progress, RunOptions, Source};
use crate::report::{Cell, Table};
use crate::Error;

/// An assumption as a scenario declares it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Declared {
    /// The scenario (its name).
    pub experiment: String,
    /// The file that declares it.
    pub file: String,
    /// The declaration.
    #[serde(flatten)]
    pub assumption: Assumption,
}

/// The assumptions declared by `sources` (loaded as `scenarios`, same order).
pub fn declared<E: Experiment>(
    e: &E,
    scenarios: &[E::Scenario],
    sources: &[Source],
) -> Result<Vec<Declared>, Error> {
    let mut out = Vec::new();
    for (s, src) in scenarios.iter().zip(sources) {
        for a in assume::declared(&src.file, &src.text)? {
            out.push(Declared {
                experiment: e.name(s).to_string(),
                file: src.file.clone(),
                assumption: a,
            });
        }
    }
    Ok(out)
}

/// One run with one assumption at another value.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    /// The scenario.
    pub experiment: String,
    /// The assumption changed.
    pub assumption: String,
    /// Its value in this run.
    pub value: toml::Value,
    /// The counts of its checks.
    pub summary: Summary,
    /// Its checks.
    #[serde(skip)]
    pub checks: Vec<Check>,
}

/// A verdict that changed at one end of one assumption.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flip {
    /// The assumption.
    pub assumption: String,
    /// Its value in the run.
    pub value: toml::Value,
    /// The check's verdict there (None: the run has no such check).
    pub verdict: Option<Verdict>,
    /// Its measured value there.
    pub measured: Option<f64>,
}

/// One check of the main run over the ranges of its scenario's assumptions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRange {
    /// What is compared.
    pub id: MetricId,
    /// Its label.
    pub label: String,
    /// Value, bound or ordering.
    pub kind: Kind,
    /// The main run's verdict.
    pub verdict: Verdict,
    /// The main run's measured value.
    pub measured: f64,
    /// Runs of its scenario with an assumption changed.
    pub trials: usize,
    /// Whether its verdict is the same in every one (None: its scenario declares no
    /// assumption).
    pub holds: Option<bool>,
    /// The runs where it is not.
    pub flips: Vec<Flip>,
    /// The lowest measured value over the main run and the trials.
    pub low: f64,
    /// The highest.
    pub high: f64,
}

/// Counts for the sensitivity line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Assumptions declared.
    pub assumptions: usize,
    /// Runs with one changed.
    pub trials: usize,
    /// Checks whose scenario declares assumptions.
    pub tested: usize,
    /// Of those, checks whose verdict is the same over every range.
    pub held: usize,
    /// Checks some end of some assumption flips.
    pub flipped: usize,
    /// Checks of scenarios that declare none.
    pub untested: usize,
}

impl std::fmt::Display for Counts {
    /// `sensitivity: A assumptions, T runs; H of C checks hold over every range, F
    /// flip; U in scenarios that declare none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::check::count;
        write!(
            f,
            "sensitivity: {}, {}; {} of {} hold over every range, {} {}; {} in scenarios that declare none",
            count(self.assumptions, "assumption", "assumptions"),
            count(self.trials, "run", "runs"),
            self.held,
            count(self.tested, "check", "checks"),
            self.flipped,
            if self.flipped == 1 { "flips" } else { "flip" },
            self.untested
        )
    }
}

/// What a sensitivity run found.
#[derive(Debug, Clone, Serialize)]
pub struct Sensitivity {
    /// Every declared assumption.
    pub assumptions: Vec<Declared>,
    /// Every run with one changed.
    pub trials: Vec<Trial>,
    /// Every check of the main run (shown values excluded: they claim nothing).
    pub checks: Vec<CheckRange>,
    /// The counts.
    pub counts: Counts,
}

/// The key matching a check across runs: what it compares, its kind, and which of the
/// checks with the same two it is.
type Key = (MetricId, Kind, usize);

fn keyed<'a>(checks: impl IntoIterator<Item = &'a Check>) -> HashMap<Key, &'a Check> {
    let mut seen: HashMap<(MetricId, Kind), usize> = HashMap::new();
    let mut out = HashMap::new();
    for c in checks {
        let n = seen.entry((c.id.clone(), c.kind)).or_insert(0);
        out.insert((c.id.clone(), c.kind, *n), c);
        *n += 1;
    }
    out
}

/// A progress sink for several runs, planned all at once (their units summed before
/// the first starts, so the total does not grow as they go), that names the run in
/// each unit.
pub struct Tally<'a> {
    outer: &'a dyn Progress,
    total: u64,
    /// What the runs planned themselves so far: were it ever more than `total` (an
    /// experiment that miscounts its units), the larger figure is shown.
    planned: AtomicU64,
}

impl<'a> Tally<'a> {
    /// A tally reporting to `outer` the `total` units of every run it will hear.
    pub fn new(outer: &'a dyn Progress, total: u64) -> Self {
        outer.plan(total);
        Tally {
            outer,
            total,
            planned: AtomicU64::new(0),
        }
    }
    /// A sink for one run, its units named after `label` (none: as they are).
    pub fn part(&'a self, label: Option<String>) -> Part<'a> {
        Part { tally: self, label }
    }
}

/// One run's sink of a [`Tally`].
pub struct Part<'a> {
    tally: &'a Tally<'a>,
    label: Option<String>,
}

impl Part<'_> {
    fn name(&self, what: &str) -> String {
        match &self.label {
            Some(l) => format!("{l}: {what}"),
            None => what.to_string(),
        }
    }
}

impl Progress for Part<'_> {
    fn plan(&self, total: u64) {
        let all = self.tally.planned.fetch_add(total, Ordering::Relaxed) + total;
        if all > self.tally.total {
            self.tally.outer.plan(all);
        }
    }
    fn done(&self, what: &str) {
        self.tally.outer.done(&self.name(what));
    }
    fn within(&self, what: &str, at: u64, of: u64) {
        self.tally.outer.within(&self.name(what), at, of);
    }
}

/// One run to make: a scenario with one assumption at `value`.
struct Plan<S> {
    experiment: String,
    assumption: String,
    value: toml::Value,
    scenario: S,
}

/// The runs of a sensitivity analysis, loaded before any runs: every declared
/// assumption of the scenarios at each end of its range.
pub struct Trials<S> {
    assumptions: Vec<Declared>,
    plans: Vec<Plan<S>>,
}

impl<S> Trials<S> {
    /// How many units their runs report to a progress sink.
    pub fn units<E: Experiment<Scenario = S>>(&self, e: &E, opt: &RunOptions) -> u64 {
        self.plans
            .iter()
            .map(|p| e.units(std::slice::from_ref(&p.scenario), opt))
            .sum()
    }
}

/// Loads every assumption of `scenarios` (loaded from `sources`, same order) at the
/// ends of its range, one at a time: an end that does not load is an error before
/// anything runs.
pub fn plan<E: Experiment>(
    e: &E,
    scenarios: &[E::Scenario],
    sources: &[Source],
) -> Result<Trials<E::Scenario>, Error> {
    let assumptions = declared(e, scenarios, sources)?;
    let mut plans = Vec::new();
    for (s, src) in scenarios.iter().zip(sources) {
        for a in assume::declared(&src.file, &src.text)? {
            for v in a.ends() {
                let text = assume::with_value(&src.file, &src.text, &a.name, &v)?;
                let scenario = e
                    .load(&src.file, &text, &|p| src.read(p))
                    .map_err(|mut l| {
                        l.message =
                            format!("with assumption `{}` = {}: {}", a.name, show(&v), l.message);
                        l
                    })?;
                plans.push(Plan {
                    experiment: e.name(s).to_string(),
                    assumption: a.name.clone(),
                    value: v,
                    scenario,
                });
            }
        }
    }
    Ok(Trials { assumptions, plans })
}

/// Runs `trials` with the options of the main run (`opt`: seed, run lengths) on
/// `opt.workers` threads, and compares each check with `main`, the main run's checks.
pub fn run<E: Experiment>(
    e: &E,
    trials: Trials<E::Scenario>,
    main: &[&Check],
    opt: &RunOptions,
    tally: &Tally<'_>,
) -> Result<Sensitivity, Error> {
    let Trials { assumptions, plans } = trials;
    let trials = run_plans(e, plans, opt, tally)?;
    let checks = compare(main, &assumptions, &trials);
    let tested: Vec<&CheckRange> = checks.iter().filter(|c| c.holds.is_some()).collect();
    let counts = Counts {
        assumptions: assumptions.len(),
        trials: trials.len(),
        tested: tested.len(),
        held: tested.iter().filter(|c| c.holds == Some(true)).count(),
        flipped: tested.iter().filter(|c| c.holds == Some(false)).count(),
        untested: checks.len() - tested.len(),
    };
    Ok(Sensitivity {
        assumptions,
        trials,
        checks,
        counts,
    })
}

/// Runs `plans` on `opt.workers` threads (each run gets a share of the threads when
/// there are fewer runs than threads), in the order given.
fn run_plans<E: Experiment>(
    e: &E,
    plans: Vec<Plan<E::Scenario>>,
    opt: &RunOptions,
    tally: &Tally<'_>,
) -> Result<Vec<Trial>, Error> {
    let workers = opt.workers.max(1);
    let threads = workers.min(plans.len()).max(1);
    let inner = RunOptions {
        workers: (workers / threads).max(1),
        ..*opt
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Trial, Error>>>> =
        Mutex::new((0..plans.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = plans.get(i) else { break };
                let part = tally.part(Some(format!("{} = {}", p.assumption, show(&p.value))));
                let r = e
                    .simulate(std::slice::from_ref(&p.scenario), &inner, &part)
                    .map(|out| {
                        let checks: Vec<Check> = e.checks(&out).into_iter().cloned().collect();
                        Trial {
                            experiment: p.experiment.clone(),
                            assumption: p.assumption.clone(),
                            value: p.value.clone(),
                            summary: Summary::of(&checks),
                            checks,
                        }
                    });
                let failed = r.is_err();
                if let Ok(mut all) = results.lock() {
                    all[i] = Some(r);
                }
                if failed {
                    // Stop taking work: the first error is reported.
                    next.store(plans.len(), Ordering::Relaxed);
                }
            });
        }
    });
    let all = results.into_inner().unwrap_or_default();
    let mut out = Vec::new();
    for r in all.into_iter().flatten() {
        out.push(r?);
    }
    Ok(out)
}

/// Each check of `main` against the trials of its scenario.
fn compare(main: &[&Check], assumptions: &[Declared], trials: &[Trial]) -> Vec<CheckRange> {
    let keyed_trials: Vec<HashMap<Key, &Check>> = trials.iter().map(|t| keyed(&t.checks)).collect();
    let mut seen: HashMap<(MetricId, Kind), usize> = HashMap::new();
    let mut out = Vec::new();
    for c in main {
        let n = seen.entry((c.id.clone(), c.kind)).or_insert(0);
        let key = (c.id.clone(), c.kind, *n);
        *n += 1;
        if c.kind == Kind::Shown {
            continue;
        }
        let declares = assumptions.iter().any(|a| a.experiment == c.id.experiment);
        let mut r = CheckRange {
            id: c.id.clone(),
            label: c.label.clone(),
            kind: c.kind,
            verdict: c.verdict,
            measured: c.measured,
            trials: 0,
            holds: declares.then_some(true),
            flips: Vec::new(),
            low: c.measured,
            high: c.measured,
        };
        for (t, k) in trials.iter().zip(&keyed_trials) {
            if t.experiment != c.id.experiment {
                continue;
            }
            r.trials += 1;
            let other = k.get(&key);
            if let Some(o) = other {
                if o.measured.is_finite() {
                    r.low = r.low.min(o.measured);
                    r.high = r.high.max(o.measured);
                }
            }
            if other.map(|o| o.verdict) != Some(c.verdict) {
                r.holds = Some(false);
                r.flips.push(Flip {
                    assumption: t.assumption.clone(),
                    value: t.value.clone(),
                    verdict: other.map(|o| o.verdict),
                    measured: other.map(|o| o.measured),
                });
            }
        }
        out.push(r);
    }
    out
}

impl Flip {
    /// "knee-margin = 10: not differentiated".
    pub fn text(&self) -> String {
        format!(
            "{} = {}: {}",
            self.assumption,
            show(&self.value),
            self.verdict.map_or("no such check", |v| v.name())
        )
    }
}

impl Sensitivity {
    /// Per check: its verdict, whether it holds over every range, what flips it, and
    /// the range of its measured value (the report's table beside the checks).
    pub fn checks_table(&self) -> Table {
        let mut t = Table::new(
            "sensitivity",
            "Sensitivity: each verdict over the ranges of the declared assumptions",
            [
                "experiment",
                "label",
                "kind",
                "verdict",
                "runs",
                "holds",
                "flipped by",
                "measured",
                "lowest",
                "highest",
            ],
        );
        for c in &self.checks {
            t.push([
                Cell::from(&c.id.experiment),
                Cell::from(&c.label),
                Cell::from(c.kind.name()),
                Cell::from(c.verdict.name()),
                Cell::from(c.trials as u64),
                Cell::from(match c.holds {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "no assumption",
                }),
                if c.flips.is_empty() {
                    Cell::Empty
                } else {
                    Cell::Text(
                        c.flips
                            .iter()
                            .map(Flip::text)
                            .collect::<Vec<_>>()
                            .join("; "),
                    )
                },
                Cell::from(c.measured),
                Cell::from(c.low),
                Cell::from(c.high),
            ]);
        }
        t
    }

    /// The checks some assumption flips (for the terminal).
    pub fn flipped_table(&self) -> Table {
        let mut t = Table::new(
            "sensitivity-flips",
            "Verdicts an assumption flips",
            ["experiment", "check", "verdict", "flipped by"],
        );
        for c in self.checks.iter().filter(|c| c.holds == Some(false)) {
            t.push([
                Cell::from(&c.id.experiment),
                Cell::from(&c.label),
                Cell::from(c.verdict.name()),
                Cell::Text(
                    c.flips
                        .iter()
                        .map(Flip::text)
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
            ]);
        }
        t
    }

    /// The sentence under the table: the counts and what they mean.
    pub fn paragraph(&self) -> String {
        format!(
            "{}. Each declared assumption was set, one at a time, to each end of its range \
             (or each alternative) and its scenario run again with the same seed; a check \
             holds when its verdict is the same in every such run.",
            self.counts
        )
    }
}

/// Every declared assumption: its value, what the paper leaves open, why, the paper's
/// words, and (after a sensitivity run) how many verdicts it flips.
pub fn assumptions_table(declared: &[Declared], sens: Option<&Sensitivity>) -> Table {
    let mut t = Table::new(
        "assumptions",
        "Declared assumptions: what the papers leave open",
        [
            "experiment",
            "assumption",
            "value",
            "low",
            "high",
            "setting",
            "open",
            "cite",
            "quote",
            "why",
            "uses",
            "flips",
        ],
    );
    for d in declared {
        let a = &d.assumption;
        let num = |v: &toml::Value| match v {
            toml::Value::Integer(i) => Cell::fixed(*i as f64, 0),
            toml::Value::Float(f) => Cell::from(*f),
            _ => Cell::Empty,
        };
        let (low, high) = match &a.open {
            assume::Open::Range(lo, hi) => (num(lo), num(hi)),
            assume::Open::Alternatives(_) => (Cell::Empty, Cell::Empty),
        };
        let value = num(&a.value);
        let setting = if value.is_number() {
            Cell::Empty
        } else {
            Cell::Text(show(&a.value))
        };
        let flips = sens.map_or(Cell::Empty, |s| {
            let n = s
                .checks
                .iter()
                .filter(|c| {
                    c.id.experiment == d.experiment
                        && c.flips.iter().any(|f| f.assumption == a.name)
                })
                .count();
            Cell::from(n as u64)
        });
        t.push([
            Cell::from(&d.experiment),
            Cell::from(&a.name),
            value,
            low,
            high,
            setting,
            Cell::Text(a.open_text()),
            Cell::from(&a.cite),
            Cell::from(&a.quote),
            Cell::from(&a.why),
            Cell::from(a.uses as u64),
            flips,
        ]);
    }
    t
}
