//! `clusterqos run` for flit-network scenarios (`scenarios/flit/*.toml`, a `[network]`
//! table, Yum et al. §6.1): runs each point of the sweep with a progress line, prints a
//! table of latency and throughput against offered load with the saturation point, and
//! writes the report (latency-vs-load and throughput figures, CSV/JSON). Lives with the
//! network benchmark because both drive `qos_sim::flit`; `run` only dispatches here.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use qos_sim::flit::scenario::{is_flit_scenario, report, run_scenario, FlitScenario};

use crate::output;

/// Runs `paths` if they are all flit scenarios (`None` if none is). `out` is the
/// report directory (default `report-<name>`).
pub fn run_if_flit(
    paths: &[String],
    out: Option<&Path>,
    json: bool,
    quick: bool,
    seed: Option<u64>,
) -> anyhow::Result<Option<ExitCode>> {
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
        return Err(anyhow!("flit-network scenarios cannot be run together with cluster scenarios; run them separately"));
    }
    let mut all = Vec::new();
    for (file, text) in &texts {
        let mut s = FlitScenario::parse(file, text).map_err(|e| anyhow!("{e}"))?;
        if quick {
            s.quick();
        }
        if let Some(seed) = seed {
            s.network.seed = seed;
        }
        let run = run_scenario(file, &s, |i, n| {
            if !json {
                eprintln!("{}: point {}/{}", s.name, i + 1, n);
            }
        })
        .map_err(|e| anyhow!("{e}"))?;
        let dir = out.map(Path::to_path_buf).unwrap_or_else(|| {
            if texts.len() == 1 {
                PathBuf::from(format!("report-{}", s.name))
            } else {
                PathBuf::from("report-flit")
            }
        });
        let dir = if texts.len() > 1 && out.is_some() {
            dir.join(&s.name)
        } else {
            dir
        };
        report(&run, &s.description)
            .write(&dir)
            .map_err(|e| anyhow!("{e}"))?;
        if !json {
            println!("{} ({})", s.name, dir.display());
            let mut t = output::table([
                "rate (pkt/node/cycle)",
                "offered (flit/node/cycle)",
                "accepted",
                "latency avg",
                "p50",
                "p99",
                "max",
                "saturated",
            ]);
            for p in &run.points {
                let r = &p.result.total;
                t.add_row([
                    format!("{}", p.rate),
                    format!("{:.4}", r.offered),
                    format!("{:.4}", r.accepted),
                    format!("{:.2}", r.latency.avg),
                    r.latency.p50.to_string(),
                    r.latency.p99.to_string(),
                    r.latency.max.to_string(),
                    if p.result.saturated { "yes" } else { "" }.to_string(),
                ]);
            }
            output::align_numbers(&mut t, 0);
            println!("{t}");
            match run.saturation {
                Some(r) => {
                    println!("saturation: first load past saturation {r} packets/node/cycle")
                }
                None => println!("saturation: not reached by the sweep"),
            }
        }
        all.push(run);
    }
    if json {
        output::print_json(&all)?;
    }
    Ok(Some(ExitCode::SUCCESS))
}
