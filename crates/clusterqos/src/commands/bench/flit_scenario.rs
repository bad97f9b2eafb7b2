//! `clusterqos run` for flit-network scenarios (`scenarios/flit/*.toml`, a `[network]`
//! table, Yum et al. §6.1): reads the files, hands them to `qos_sim::flit::runner`
//! with a reader for the topology files they name, shows progress (a bar on a
//! terminal, a line per point and every few seconds otherwise; nothing with `--json`,
//! issue 11 point 16) and prints a table of latency and throughput against offered
//! load with the saturation point, or JSON. Lives with the network benchmark because
//! both drive `qos_sim::flit`; `run` only dispatches here.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use indicatif::{ProgressBar, ProgressStyle};
use qos_sim::flit::runner::{FlitBatch, RunOptions};
use qos_sim::flit::scenario::Progress;

use crate::output;

/// Reads topology file `path`, as written in scenario file `scenario` (relative to it).
fn read_beside(scenario: &str, path: &str) -> Result<(String, String), String> {
    let full = Path::new(scenario)
        .parent()
        .unwrap_or(Path::new(""))
        .join(path);
    std::fs::read_to_string(&full)
        .map(|t| (full.display().to_string(), t))
        .map_err(|e| format!("cannot read topology {}: {e}", full.display()))
}

/// How progress is shown.
enum Display {
    Nothing,
    Bar(ProgressBar),
    Lines { last: Instant },
}

impl Display {
    fn new(json: bool) -> Display {
        if json {
            Display::Nothing
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(1);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{bar:30}] {pos}/{len} cycles {msg} ({elapsed}, {eta} left)",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            Display::Bar(bar)
        } else {
            Display::Lines {
                last: Instant::now(),
            }
        }
    }

    fn show(&mut self, name: &str, p: Progress) {
        let what = format!(
            "{name}: point {}/{} (rate {})",
            p.point + 1,
            p.points,
            p.rate
        );
        match self {
            Display::Nothing => {}
            Display::Bar(bar) => {
                if p.cycle == 0 {
                    bar.reset();
                    bar.set_length(p.planned);
                    bar.set_message(what);
                }
                bar.set_position(p.cycle.min(p.planned));
            }
            Display::Lines { last } => {
                if p.cycle == 0 {
                    eprintln!("{what}");
                    *last = Instant::now();
                } else if last.elapsed() >= Duration::from_secs(5) {
                    eprintln!("{what}: cycle {} of {}", p.cycle, p.planned);
                    *last = Instant::now();
                }
            }
        }
    }

    fn finish(&self) {
        if let Display::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// Runs `paths` if they are all flit scenarios (`None` if none is, or a file cannot be
/// read: the cluster path reports it). `out` is the report directory (default
/// `report-<name>`).
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
    let mut inputs = Vec::new();
    for p in paths {
        let Ok(t) = std::fs::read_to_string(p) else {
            return Ok(None);
        };
        inputs.push((p.clone(), t));
    }
    let Some(batch) = FlitBatch::load(inputs, &opts, read_beside).map_err(|e| anyhow!("{e}"))?
    else {
        return Ok(None);
    };
    let names: Vec<String> = batch.scenarios().map(|s| s.name.clone()).collect();
    let mut all = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut display = Display::new(json);
        let done = batch.run(i, |p| display.show(name, p));
        display.finish();
        let done = done.map_err(|e| anyhow!("{e}"))?;
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
                    match (p.result.unstable, p.result.saturated) {
                        (true, _) => "unstable",
                        (false, true) => "yes",
                        _ => "",
                    }
                    .to_string(),
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
