//! Flit-network scenario files (`model = "flit"`): a [`FlitConfig`] under `[network]`,
//! an optional load sweep under `[sweep]`, parsed with `qos_core::source::parse_toml`
//! (unknown keys and
//! bad values come out as `file:line: message`; values out of range too, located by
//! the key path the configuration's checks name), and the report of
//! a run: latency and accepted throughput against offered load, with the saturation
//! point. A graph topology's file is read through a reader the caller passes in, as
//! the cluster scenarios do: nothing here touches the file system.
//!
//! ```toml
//! model = "flit"
//! name = "mesh8-reference"
//! [network]
//! topology = { kind = "mesh", k = 8 }
//! router = { buffer = 10, delays = "reference" }
//! phases = { warmup = 10000, measure = 30000 }
//! [[network.classes]]
//! name = "data"
//! vls = [0, 1, 2, 3]
//! rate = 0.008
//! [sweep]
//! class = "data"
//! rates = [0.001, 0.002, 0.004, 0.008]
//! ```

use qos_core::source::{parse_toml, Located};
use qos_sim::flit::engine::Network;
use qos_sim::flit::stats::{RunResult, StopReason};
use qos_sim::flit::{FlitConfig, FlitError, TopologySpec};
use serde::{Deserialize, Serialize};

pub use crate::error::ScenarioError;
use crate::experiment::{open, Model};
use crate::locate;
use crate::report::{Cell, Figure, Report, Series, Table};

/// A load sweep: the named class's rate (or each of the named classes' rates) takes
/// each value in turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Class whose rate is swept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub class: String,
    /// Classes whose rates are all swept together, instead of `class` (BookSim2's
    /// `injection_rate` of one value with several classes: every class at that rate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
    /// Packets per node per cycle.
    pub rates: Vec<f64>,
    /// A point whose measured packets' mean latency exceeds this many cycles counts as
    /// saturated (absent: no such rule). BookSim2's `latency_thres` is another rule:
    /// `network.phases.abort_latency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mean_latency: Option<f64>,
}

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlitScenario {
    /// `"flit"`.
    pub model: Model,
    /// Name (report title).
    pub name: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// The network and its traffic.
    pub network: FlitConfig,
    /// Optional load sweep.
    pub sweep: Option<Sweep>,
}

/// `message` about the key at `path` of `text` (named `file`), at its line if the file
/// writes it or an enclosing key.
fn at_key(file: &str, text: &str, path: &str, message: String) -> Located {
    match locate::offset(text, path) {
        Some(o) => Located::at(file, text, o, message),
        None => Located::whole(file, message),
    }
}

impl FlitScenario {
    /// Shortens every phase tenfold (at least 1,000 measured cycles) for a quick look.
    pub fn quick(&mut self) {
        let p = &mut self.network.phases;
        p.warmup /= 10;
        p.measure = (p.measure / 10).max(1_000);
        p.drain_max = (p.drain_max / 10).max(1_000);
        p.sample_period = (p.sample_period / 10).max(100);
    }

    /// Parses and checks scenario `text` named `file`. A graph topology's file is
    /// fetched with `read`, called with the path as written (relative to the scenario)
    /// and returning the file's name and text, or a message reported at the line of
    /// `topology.file`. Every error names the file and line at fault.
    pub fn parse(
        file: &str,
        text: &str,
        read: impl FnOnce(&str) -> Result<(String, String), String>,
    ) -> Result<FlitScenario, ScenarioError> {
        let text: &str = &open(file, text, Model::Flit)?;
        let mut s: FlitScenario = parse_toml(file, text)?;
        if let TopologySpec::Graph { file: topo, graph } = &mut s.network.topology {
            let (name, body) = read(topo)
                .map_err(|m| at_key(file, text, "network.topology.file", format!("{topo}: {m}")))?;
            let t = qos_core::topology::file::load(&name, &body)?;
            let f = qos_sim::flit::graph::fabric(&t).map_err(|e| match e {
                FlitError::Config { message, .. } => Located::whole(&name, message),
                e => Located::whole(&name, e.to_string()),
            })?;
            *graph = Some(std::sync::Arc::new(f));
        }
        s.network.validate().map_err(|e| match e {
            FlitError::Config { key, message } => {
                at_key(file, text, &format!("network.{key}"), message)
            }
            e => Located::whole(file, e.to_string()),
        })?;
        if let Some(sw) = &s.sweep {
            match (sw.class.is_empty(), sw.classes.is_empty()) {
                (true, true) => {
                    let m = "sweep: name the class swept (class = \"...\") or the classes \
                             (classes = [...])"
                        .to_string();
                    return Err(at_key(file, text, "sweep", m).into());
                }
                (false, false) => {
                    let m = "sweep.classes: either class or classes, not both".to_string();
                    return Err(at_key(file, text, "sweep.classes", m).into());
                }
                _ => {}
            }
            let named = |n: &str| s.network.classes.iter().any(|c| c.name == n);
            if !sw.class.is_empty() && !named(&sw.class) {
                let m = format!("sweep.class: no class named '{}'", sw.class);
                return Err(at_key(file, text, "sweep.class", m).into());
            }
            for (i, n) in sw.classes.iter().enumerate() {
                if !named(n) {
                    let m = format!("sweep.classes[{i}]: no class named '{n}'");
                    return Err(at_key(file, text, &format!("sweep.classes[{i}]"), m).into());
                }
                if sw.classes[..i].contains(n) {
                    let m = format!("sweep.classes[{i}]: '{n}' is named twice");
                    return Err(at_key(file, text, &format!("sweep.classes[{i}]"), m).into());
                }
            }
            if let Some(i) = sw.rates.iter().position(|r| !(0.0..=1.0).contains(r)) {
                let m = format!(
                    "sweep.rates[{i}] = {}: rates must be 0-1 packets/node/cycle",
                    sw.rates[i]
                );
                return Err(at_key(file, text, &format!("sweep.rates[{i}]"), m).into());
            }
            if sw.rates.is_empty() {
                let m = "sweep.rates: at least one rate".to_string();
                return Err(at_key(file, text, "sweep.rates", m).into());
            }
            if let Some(l) = sw.max_mean_latency {
                if !(l.is_finite() && l > 0.0) {
                    let m = format!(
                        "sweep.max_mean_latency = {l}: must be a positive number of cycles"
                    );
                    return Err(at_key(file, text, "sweep.max_mean_latency", m).into());
                }
            }
        }
        Ok(s)
    }

    /// The configurations to run: one per sweep rate, or the network as written.
    pub fn points(&self) -> Vec<(f64, FlitConfig)> {
        match &self.sweep {
            None => {
                let r = self.network.classes.first().map_or(0.0, |c| c.rate);
                vec![(r, self.network.clone())]
            }
            Some(sw) => sw
                .rates
                .iter()
                .map(|&rate| {
                    let mut c = self.network.clone();
                    for cl in &mut c.classes {
                        if cl.name == sw.class || sw.classes.contains(&cl.name) {
                            cl.rate = rate;
                        }
                    }
                    (rate, c)
                })
                .collect(),
        }
    }
}

/// One point of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Swept rate, packets/node/cycle.
    pub rate: f64,
    /// Results.
    pub result: RunResult,
}

/// Results of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlitRun {
    /// Scenario name.
    pub name: String,
    /// Each point.
    pub points: Vec<Point>,
    /// First swept rate (packets/node/cycle) past saturation, if any.
    pub saturation: Option<f64>,
}

/// Where a scenario run is, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointProgress {
    /// Point being run (0-based) and number of points.
    pub point: usize,
    pub points: usize,
    /// Its swept rate.
    pub rate: f64,
    /// Cycles simulated so far in this point.
    pub cycle: u64,
    /// Warm-up and measurement cycles of this point (the drain may add some).
    pub planned: u64,
}

/// Runs every point of `s` (file name `file` for errors), calling `progress` when a
/// point starts and every [`qos_sim::flit::engine::PROGRESS_EVERY`] cycles of it.
pub fn run_scenario(
    file: &str,
    s: &FlitScenario,
    progress: impl FnMut(PointProgress),
) -> Result<FlitRun, ScenarioError> {
    run_scenario_on(file, s, None, progress)
}

/// [`run_scenario`], each point's network on `threads` threads if set
/// ([`Network::set_threads`]).
pub fn run_scenario_on(
    file: &str,
    s: &FlitScenario,
    threads: Option<usize>,
    mut progress: impl FnMut(PointProgress),
) -> Result<FlitRun, ScenarioError> {
    let pts = s.points();
    let mut points = Vec::new();
    for (i, (rate, cfg)) in pts.iter().enumerate() {
        let mut at = PointProgress {
            point: i,
            points: pts.len(),
            rate: *rate,
            cycle: 0,
            planned: cfg.planned_cycles(),
        };
        progress(at);
        let fail = |e| ScenarioError::Run {
            file: file.to_string(),
            source: e,
        };
        let mut net = Network::new(cfg).map_err(fail)?;
        if let Some(n) = threads {
            net.set_threads(n).map_err(fail)?;
        }
        let result = net
            .run_with_progress(&mut |cycle| {
                at.cycle = cycle;
                progress(at);
            })
            .map_err(fail)?;
        points.push(Point {
            rate: *rate,
            result,
        });
    }
    let limit = s.sweep.as_ref().and_then(|sw| sw.max_mean_latency);
    let rule = s.network.phases.abort_latency.is_some();
    let saturation = saturation(&points, limit, rule);
    Ok(FlitRun {
        name: s.name.clone(),
        points,
        saturation,
    })
}

/// The first point past saturation: with BookSim2's stability rule on (`booksim2_rule`,
/// `phases.abort_latency`), the first the rule found unstable or whose measured packets
/// did not drain, as BookSim2 would; without it, the first whose measured packets did
/// not drain or whose accepted throughput fell below 95 % of offered. Either way also
/// the first whose measured packets' mean latency exceeded `max_mean_latency` cycles.
pub fn saturation(
    points: &[Point],
    max_mean_latency: Option<f64>,
    booksim2_rule: bool,
) -> Option<f64> {
    points
        .iter()
        .find(|p| {
            let t = &p.result.total;
            p.result.saturated
                || p.result.unstable
                || (!booksim2_rule && t.accepted < 0.95 * t.offered)
                || max_mean_latency.is_some_and(|l| t.latency.avg > l)
        })
        .map(|p| p.rate)
}

/// Where a run's sweep saturated, in one sentence.
pub fn saturation_line(run: &FlitRun) -> String {
    match run.saturation {
        Some(r) => format!(
            "{}: saturation: the first swept load past saturation is {r} packets/node/cycle; the last sustained load is {}.",
            run.name,
            run.points
                .iter()
                .rev()
                .find(|p| p.rate < r)
                .map_or("none".to_string(), |p| format!("{} packets/node/cycle", p.rate))
        ),
        None => format!("{}: saturation: no swept load saturated the network.", run.name),
    }
}

/// What a run's summary says: its saturation, and each load at which the network
/// deadlocked (a run the stability rule ended as unstable on the watchdog).
pub fn summary_lines(run: &FlitRun) -> Vec<String> {
    let mut out = vec![saturation_line(run)];
    for p in &run.points {
        if let Some(s) = p.result.stop.filter(|s| s.reason == StopReason::Deadlock) {
            out.push(format!(
                "{}: at {} packets/node/cycle the network deadlocked (no flit moved while \
                 flits waited; stopped at cycle {}): unstable.",
                run.name, p.rate, s.at
            ));
        }
    }
    out
}

/// Every point of a run, one column per field (table `id`).
pub fn points_table(run: &FlitRun, id: &str) -> Table {
    let mut t = Table::new(
        id,
        format!("{}: every point", run.name),
        [
            "rate (pkt/node/cycle)",
            LOAD_COLUMNS[0],
            LOAD_COLUMNS[1],
            LOAD_COLUMNS[2],
            LOAD_COLUMNS[3],
            LOAD_COLUMNS[4],
            LOAD_COLUMNS[5],
            LOAD_COLUMNS[6],
            "link util avg",
            "link util max",
            "saturated",
            "unstable",
        ],
    );
    for p in &run.points {
        let r = &p.result;
        let mut row = vec![Cell::from(p.rate)];
        row.extend(load_cells(&r.total));
        row.extend([
            Cell::fixed(r.link_utilisation_avg, 3),
            Cell::fixed(r.link_utilisation_max, 3),
            Cell::from(r.saturated),
            Cell::from(r.unstable),
        ]);
        t.push(row);
    }
    t
}

/// The columns of what a class (or the whole run) offered and got at one load.
const LOAD_COLUMNS: [&str; 7] = [
    "offered (flit/node/cycle)",
    "accepted (flit/node/cycle)",
    "latency avg (cycles)",
    "p50",
    "p99",
    "max",
    "network latency (cycles)",
];

/// The cells of [`LOAD_COLUMNS`] for `c`.
fn load_cells(c: &qos_sim::flit::stats::ClassResult) -> [Cell; 7] {
    [
        Cell::fixed(c.offered, 4),
        Cell::fixed(c.accepted, 4),
        Cell::fixed(c.latency.avg, 2),
        Cell::from(c.latency.p50),
        Cell::from(c.latency.p99),
        Cell::from(c.latency.max),
        Cell::fixed(c.network_latency, 2),
    ]
}

/// With several traffic classes, each class at every point: what it offered and got and
/// its latency (None with one class, which `points_table` is).
pub fn classes_table(run: &FlitRun, id: &str) -> Option<Table> {
    if run.points.iter().all(|p| p.result.classes.len() < 2) {
        return None;
    }
    let mut t = Table::new(
        id,
        format!("{}: every class at every point", run.name),
        ["rate (pkt/node/cycle)", "class"]
            .into_iter()
            .chain(LOAD_COLUMNS),
    );
    for p in &run.points {
        for c in &p.result.classes {
            let mut row = vec![Cell::from(p.rate), Cell::from(c.name.as_str())];
            row.extend(load_cells(c));
            t.push(row);
        }
    }
    Some(t)
}

/// Adds a run to `rep`: its description and saturation, the table of every point (and
/// of every class, with several), and latency and throughput against offered load.
/// `prefix` keeps the ids of several runs in one report apart ("" for one run).
pub fn add_to_report(rep: &mut Report, run: &FlitRun, description: &str, prefix: &str) {
    if !description.is_empty() {
        rep.summary.push(format!("{}: {description}", run.name));
    }
    rep.summary.extend(summary_lines(run));
    rep.tables
        .push(points_table(run, &format!("{prefix}points")));
    rep.tables
        .extend(classes_table(run, &format!("{prefix}classes")));
    let classes: Vec<String> = run
        .points
        .first()
        .map(|p| p.result.classes.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let mut lat = Figure::new(
        format!("{prefix}latency-vs-load"),
        format!("{}: packet latency against offered load", run.name),
        "offered load (flits/node/cycle)",
        "average packet latency (cycles)",
    );
    let mut thr = Figure::new(
        format!("{prefix}throughput-vs-load"),
        format!("{}: accepted against offered throughput", run.name),
        "offered load (flits/node/cycle)",
        "accepted (flits/node/cycle)",
    );
    for (ci, name) in classes.iter().enumerate() {
        let pts = |f: &dyn Fn(&RunResult) -> f64| -> Vec<(f64, f64)> {
            run.points
                .iter()
                .map(|p| (p.result.classes[ci].offered, f(&p.result)))
                .collect()
        };
        lat = lat.with_series(Series::new(
            name.clone(),
            pts(&|r| r.classes[ci].latency.avg),
        ));
        thr = thr.with_series(Series::new(name.clone(), pts(&|r| r.classes[ci].accepted)));
    }
    rep.figures.push(lat);
    rep.figures.push(thr);
}

/// The report of one run: a table of every point and latency / throughput figures.
pub fn report(run: &FlitRun, description: &str) -> Report {
    let mut rep = Report::new(format!("Flit network: {}", run.name));
    add_to_report(&mut rep, run, description, "");
    rep
}
