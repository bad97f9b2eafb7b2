//! `clusterqos run` for flit-network scenarios (`scenarios/flit/*.toml`, a `[network]`
//! table, Yum et al. §6.1): `qos_sim::flit::runner` loads, runs and writes the report;
//! this prints a progress line per point, a table of latency and throughput against
//! offered load with the saturation point, or JSON. Lives with the network benchmark
//! because both drive `qos_sim::flit`; `run` only dispatches here.

use std::path::Path;
use std::process::ExitCode;

use anyhow::anyhow;
use qos_sim::flit::runner::{FlitBatch, RunOptions};

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
    let opts = RunOptions {
        out: out.map(Path::to_path_buf),
        quick,
        seed,
    };
    let Some(batch) = FlitBatch::load(paths, &opts).map_err(|e| anyhow!("{e}"))? else {
        return Ok(None);
    };
    let names: Vec<String> = batch.scenarios().map(|s| s.name.clone()).collect();
    let mut all = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let done = batch
            .run(i, |p, n| {
                if !json {
                    eprintln!("{name}: point {}/{}", p + 1, n);
                }
            })
            .map_err(|e| anyhow!("{e}"))?;
        if !json {
            println!("{name} ({})", done.dir.display());
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
            for p in &done.run.points {
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
            match done.run.saturation {
                Some(r) => {
                    println!("saturation: first load past saturation {r} packets/node/cycle")
                }
                None => println!("saturation: not reached by the sweep"),
            }
        }
        all.push(done.run);
    }
    if json {
        output::print_json(&all)?;
    }
    Ok(Some(ExitCode::SUCCESS))
}
