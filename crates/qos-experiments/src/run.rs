//! A user's scenarios for `clusterqos run FILE... [--quick] [--seed S]`: files or
//! shipped thesis scenarios by name, either all flit-network scenarios (a `[network]`
//! table, Yum et al. §6.1: run by [`qos_sim::flit::runner`], a latency-vs-load table
//! each) or all cluster scenarios (the thesis's format, `scenarios/gulati/*.toml`:
//! simulated and checked as `reproduce gulati` does, [`crate::gulati::simulate`]) or
//! all Yum et al. scenarios (`scenarios/yum/*.toml`, a `[workload]` with `real_time`
//! traffic: run and checked as `reproduce yum` does, [`crate::yum::simulate`]; trace
//! files beside the scenario).
//! Topology files a scenario names are read relative to it. Errors name `file:line`.

use std::path::PathBuf;

use qos_sim::flit::runner::{FlitBatch, RunOptions, RunnerError};
use qos_sim::flit::scenario::FlitRun;
use qos_sim::report::Table;
use qos_sim::scenario::{self, Scenario};

use crate::sweep::{read_beside, Source, SweepError};
use crate::yum;

/// Scenarios loaded for one run.
#[derive(Debug)]
pub enum Batch {
    /// Flit-network scenarios, run one by one with their own reports.
    Flit(FlitBatch),
    /// Cluster scenarios, simulated together into one report.
    Cluster(Vec<Scenario>),
    /// Yum et al. scenarios, simulated together into one report.
    Yum(Vec<yum::Scenario>),
}

/// Why the scenarios could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A cluster scenario is missing or malformed.
    #[error(transparent)]
    Cluster(#[from] SweepError),
    /// Flit and cluster scenarios mixed, or a flit scenario malformed.
    #[error(transparent)]
    Flit(#[from] RunnerError),
    /// A Yum scenario (or one of its trace files) is malformed.
    #[error(transparent)]
    Yum(#[from] qos_core::source::Located),
    /// Yum scenarios mixed with others.
    #[error("{other}: not a Yum scenario, and {yum} is: run them separately")]
    MixedYum {
        /// The first file that is not a Yum scenario.
        other: String,
        /// The first that is.
        yum: String,
    },
}

/// Loads `names` (files, or shipped scenario names). They are flit scenarios if every
/// one is a readable file and one has a `[network]` table (then all must); otherwise
/// cluster scenarios, the first missing or malformed one reported. `opts` applies to
/// flit scenarios; cluster ones take `--quick` and `--seed` when simulated.
pub fn load(names: &[String], opts: &RunOptions) -> Result<Batch, LoadError> {
    let files: Option<Vec<(String, String)>> = names
        .iter()
        .map(|p| std::fs::read_to_string(p).ok().map(|t| (p.clone(), t)))
        .collect();
    if let Some(files) = files {
        if let Some(list) = load_yum(&files)? {
            return Ok(Batch::Yum(list));
        }
        if let Some(batch) = FlitBatch::load(files, opts, read_beside)? {
            return Ok(Batch::Flit(batch));
        }
    }
    let mut list = Vec::new();
    for name in names {
        let src = Source::resolve(name)?;
        let s = scenario::load(&src.file, &src.text, |p| read_beside(&src.file, p))
            .map_err(SweepError::from)?;
        list.push(s);
    }
    Ok(Batch::Cluster(list))
}

/// The files as Yum scenarios if they all are one (`None` when none is; mixed: an
/// error). Trace files are read beside their scenario.
fn load_yum(files: &[(String, String)]) -> Result<Option<Vec<yum::Scenario>>, LoadError> {
    let is: Vec<bool> = files
        .iter()
        .map(|(_, t)| yum::scenario::is_yum_scenario(t))
        .collect();
    let Some(first) = is.iter().position(|&y| y) else {
        return Ok(None);
    };
    if let Some(i) = is.iter().position(|&y| !y) {
        return Err(LoadError::MixedYum {
            other: files[i].0.clone(),
            yum: files[first].0.clone(),
        });
    }
    let mut list = Vec::new();
    for (name, text) in files {
        let read = |p: &str| {
            read_beside(name, p).map_err(|e| e.replace("cannot read topology", "cannot read trace"))
        };
        list.push(yum::scenario::load_with(name, text, &read)?);
    }
    Ok(Some(list))
}

/// The report directory of scenarios named `names`: `out`, else `report-<first name>`.
pub fn report_out<'a>(mut names: impl Iterator<Item = &'a str>, out: Option<PathBuf>) -> PathBuf {
    out.unwrap_or_else(|| PathBuf::from(format!("report-{}", names.next().unwrap_or("run"))))
}

/// A flit scenario's sweep: latency and throughput against offered load.
pub fn flit_table(run: &FlitRun) -> Table {
    let mut t = Table::new(
        "points",
        &run.name,
        [
            "rate (pkt/node/cycle)",
            "offered (flit/node/cycle)",
            "accepted",
            "latency avg",
            "p50",
            "p99",
            "max",
            "saturated",
        ],
    );
    for p in &run.points {
        let r = &p.result.total;
        t.push([
            format!("{}", p.rate),
            format!("{:.4}", r.offered),
            format!("{:.4}", r.accepted),
            format!("{:.2}", r.latency.avg),
            r.latency.p50.to_string(),
            r.latency.p99.to_string(),
            r.latency.max.to_string(),
            match (p.result.unstable, p.result.saturated) {
                (true, _) => "unstable",
                (false, true) => "yes",
                _ => "",
            }
            .to_string(),
        ]);
    }
    t
}

/// Where a flit scenario's sweep saturated.
pub fn saturation_line(run: &FlitRun) -> String {
    match run.saturation {
        Some(r) => format!("saturation: first load past saturation {r} packets/node/cycle"),
        None => "saturation: not reached by the sweep".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = "name = \"tiny\"\n[network]\ntopology = { kind = \"mesh\", k = 2 }\n\
        router = { buffer = 4 }\nphases = { warmup = 50, measure = 200 }\n\
        [[network.classes]]\nname = \"d\"\nvls = [0]\n[sweep]\nclass = \"d\"\nrates = [0.001]\n";

    #[test]
    fn files_of_either_model_load_and_mixing_them_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let flit = dir.path().join("tiny.toml");
        std::fs::write(&flit, TINY).unwrap();
        let flit = flit.display().to_string();
        let opts = RunOptions::default();
        assert!(
            matches!(load(std::slice::from_ref(&flit), &opts), Ok(Batch::Flit(b)) if b.len() == 1)
        );
        let cluster = dir.path().join("idt.toml");
        std::fs::write(
            &cluster,
            qos_sim::scenario::builtin::find("idt-sweep").unwrap(),
        )
        .unwrap();
        let cluster = cluster.display().to_string();
        let Ok(Batch::Cluster(list)) = load(&[cluster.clone(), "idt-sweep".into()], &opts) else {
            panic!("cluster scenarios")
        };
        assert_eq!(list.len(), 2);
        assert_eq!(
            report_out(list.iter().map(|s| s.file.name.as_str()), None),
            PathBuf::from("report-idt-sweep")
        );
        let e = load(&[flit, cluster], &opts).unwrap_err().to_string();
        assert!(e.contains("cannot be run together"), "{e}");
        let e = load(&["no-such-thing".into()], &opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no shipped scenario"), "{e}");
    }
}
