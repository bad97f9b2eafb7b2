//! Flit-network scenario files: a [`FlitConfig`] under `[network]`, an optional load
//! sweep under `[sweep]`, parsed with `qos_core::source::parse_toml` (unknown keys and
//! bad values come out as `file:line: message`), and the report of a run: latency and
//! accepted throughput against offered load, with the saturation point.
//!
//! ```toml
//! name = "mesh8-reference"
//! [network]
//! topology = { kind = "mesh", k = 8 }
//! router = { buffer = 10, delays = "booksim" }
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
use serde::{Deserialize, Serialize};

use super::config::GraphLoadError;
use super::stats::RunResult;
use super::{simulate, FlitConfig, FlitError};
use crate::report::{Figure, Report, Series, Table};

/// A load sweep: the named class's rate takes each value in turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Class whose rate is swept.
    pub class: String,
    /// Packets per node per cycle.
    pub rates: Vec<f64>,
    /// Mean packet latency (cycles) above which a point counts as saturated
    /// (BookSim2's `latency_thres`, default 500).
    #[serde(default = "default_threshold")]
    pub latency_threshold: f64,
}

fn default_threshold() -> f64 {
    500.0
}

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlitScenario {
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

/// Why a scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Bad file.
    #[error(transparent)]
    Parse(#[from] Located),
    /// A graph's topology file could not be used.
    #[error(transparent)]
    Topology(#[from] GraphLoadError),
    /// Bad network or failed run (deadlock).
    #[error("{file}: {source}")]
    Run {
        /// File name.
        file: String,
        /// Cause.
        source: FlitError,
    },
}

/// Whether TOML `text` is a flit-network scenario (it has a `[network]` table), so
/// `clusterqos run` can send it here rather than to the cluster model.
pub fn is_flit_scenario(text: &str) -> bool {
    text.parse::<toml::Table>()
        .is_ok_and(|t| matches!(t.get("network"), Some(toml::Value::Table(_))))
}

impl FlitScenario {
    /// Shortens every phase tenfold (at least 1,000 measured cycles) for a quick look.
    pub fn quick(&mut self) {
        let p = &mut self.network.phases;
        p.warmup /= 10;
        p.measure = (p.measure / 10).max(1_000);
        p.drain_max = (p.drain_max / 10).max(1_000);
    }

    /// Parses and checks scenario `text` named `file`.
    pub fn parse(file: &str, text: &str) -> Result<FlitScenario, ScenarioError> {
        let mut s: FlitScenario = parse_toml(file, text)?;
        let dir = std::path::Path::new(file)
            .parent()
            .unwrap_or(std::path::Path::new(""));
        s.network.topology.load_graph(dir)?;
        let run = |e| ScenarioError::Run {
            file: file.to_string(),
            source: e,
        };
        s.network.validate().map_err(run)?;
        if let Some(sw) = &s.sweep {
            let at = |key: &str| {
                let off = text.find(key).unwrap_or(0);
                Located::at(file, text, off, String::new())
            };
            if !s.network.classes.iter().any(|c| c.name == sw.class) {
                let mut e = at("[sweep]");
                e.message = format!("sweep.class: no class named '{}'", sw.class);
                return Err(e.into());
            }
            if sw.rates.is_empty() || sw.rates.iter().any(|r| !(0.0..=1.0).contains(r)) {
                let mut e = at("rates");
                e.message = "sweep.rates: one or more rates in 0-1 packets/node/cycle".into();
                return Err(e.into());
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
                        if cl.name == sw.class {
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

/// Runs every point of `s` (file name `file` for errors), calling `progress(i, n)`
/// before each.
pub fn run_scenario(
    file: &str,
    s: &FlitScenario,
    mut progress: impl FnMut(usize, usize),
) -> Result<FlitRun, ScenarioError> {
    let pts = s.points();
    let mut points = Vec::new();
    for (i, (rate, cfg)) in pts.iter().enumerate() {
        progress(i, pts.len());
        let result = simulate(cfg).map_err(|e| ScenarioError::Run {
            file: file.to_string(),
            source: e,
        })?;
        points.push(Point {
            rate: *rate,
            result,
        });
    }
    let threshold = s.sweep.as_ref().map_or(500.0, |sw| sw.latency_threshold);
    let saturation = saturation(&points, threshold);
    Ok(FlitRun {
        name: s.name.clone(),
        points,
        saturation,
    })
}

/// The first point past saturation: measured packets did not drain, accepted
/// throughput fell below 95 % of offered, or mean latency exceeded `threshold` cycles
/// (BookSim2's rule for an unstable run).
pub fn saturation(points: &[Point], threshold: f64) -> Option<f64> {
    points
        .iter()
        .find(|p| {
            let t = &p.result.total;
            p.result.saturated || t.accepted < 0.95 * t.offered || t.latency.avg > threshold
        })
        .map(|p| p.rate)
}

/// The report of a run: a table of every point and latency / throughput figures.
pub fn report(run: &FlitRun, description: &str) -> Report {
    let mut rep = Report::new(format!("Flit network: {}", run.name));
    if !description.is_empty() {
        rep.summary.push(description.to_string());
    }
    rep.summary.push(match run.saturation {
        Some(r) => format!(
            "Saturation: first swept load past saturation is {r} packets/node/cycle; the last sustained load is {}.",
            run.points
                .iter()
                .rev()
                .find(|p| p.rate < r)
                .map_or("none".to_string(), |p| format!("{} packets/node/cycle", p.rate))
        ),
        None => "No swept load saturated the network.".into(),
    });
    let mut t = Table::new(
        "points",
        "Every point",
        [
            "rate (pkt/node/cycle)",
            "offered (flit/node/cycle)",
            "accepted (flit/node/cycle)",
            "latency avg",
            "p50",
            "p99",
            "max",
            "network latency",
            "link util avg",
            "link util max",
            "saturated",
        ],
    );
    for p in &run.points {
        let r = &p.result;
        t.push([
            format!("{}", p.rate),
            format!("{:.4}", r.total.offered),
            format!("{:.4}", r.total.accepted),
            format!("{:.2}", r.total.latency.avg),
            r.total.latency.p50.to_string(),
            r.total.latency.p99.to_string(),
            r.total.latency.max.to_string(),
            format!("{:.2}", r.total.network_latency),
            format!("{:.3}", r.link_utilisation_avg),
            format!("{:.3}", r.link_utilisation_max),
            r.saturated.to_string(),
        ]);
    }
    rep.tables.push(t);
    let classes: Vec<String> = run
        .points
        .first()
        .map(|p| p.result.classes.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let mut lat = Figure::new(
        "latency-vs-load",
        "Packet latency against offered load",
        "offered load (flits/node/cycle)",
        "average packet latency (cycles)",
    );
    let mut thr = Figure::new(
        "throughput-vs-load",
        "Accepted against offered throughput",
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
    rep
}
