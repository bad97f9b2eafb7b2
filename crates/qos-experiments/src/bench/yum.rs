//! How fast the Yum et al. cluster simulates (`clusterqos bench yum`: the
//! speed, in cycles/s, of the 5×5 mesh with HCAs and admission). The configuration is the
//! shipped Fig 6 scenario (`scenarios/yum/fig6-mesh.toml`, case "A"):
//! a 5×5 mesh of Yum's routers, 16 VLs, HCAs with queue pairs and the prioritized QP
//! scheduler, probe-based admission in the routers (WRR weights reloaded on every
//! charge and release), ON/OFF real-time connections, Poisson best effort and control
//! traffic, at one load. Each run is single-threaded; the result is simulated cycles per
//! CPU second (and per wall second), flit-hops per second, the workload's connections
//! and refusals. `no_admission` measures the same cluster without admission control
//! (case "No A, No C"); `repeat` runs report the median.

use std::time::Instant;

use anyhow::{bail, Context};
use qos_core::units::Duration;
use qos_sim::iba::run;
use serde::Serialize;

use super::network::{cpu_seconds, median};
use crate::yum;

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Offered load per node, a fraction of the link.
    #[arg(long, default_value_t = 0.6)]
    pub load: f64,
    /// Warm-up, simulated milliseconds.
    #[arg(long, default_value_t = 10.0)]
    pub warmup_ms: f64,
    /// Measured, simulated milliseconds.
    #[arg(long, default_value_t = 60.0)]
    pub measure_ms: f64,
    /// Without admission control (case "No A, No C").
    #[arg(long)]
    pub no_admission: bool,
    /// Runs; the median time is reported.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Random seed.
    #[arg(long, default_value_t = 3)]
    pub seed: u64,
}

/// The measured speed.
#[derive(Debug, Serialize)]
pub struct Output {
    pub scenario: String,
    pub case: String,
    pub load: f64,
    pub routers: u32,
    pub cycles: u64,
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub cycles_per_s: f64,
    pub cycles_per_cpu_s: f64,
    pub flit_hops_per_cpu_s: f64,
    pub connections: usize,
    pub requested: u64,
    pub rejected: u64,
    /// CPU seconds of every run, in the order run.
    pub runs_cpu_seconds: Vec<f64>,
}

/// Runs the benchmark.
pub fn run(o: &Options) -> anyhow::Result<Output> {
    if !(o.load > 0.0 && o.load <= 1.0) {
        bail!("--load must be in (0, 1]");
    }
    for (name, v) in [("--warmup-ms", o.warmup_ms), ("--measure-ms", o.measure_ms)] {
        if !(v.is_finite() && (0.0..=10_000.0).contains(&v)) {
            bail!("{name} must be 0 to 10000 ms");
        }
    }
    if o.measure_ms <= 0.0 {
        bail!("--measure-ms must be above zero");
    }
    let scenario = yum::builtin_scenarios(Some("fig6-mesh"))?
        .pop()
        .context("the mesh scenario is shipped")?;
    let label = if o.no_admission { "No A, No C" } else { "A" };
    let (_, mut cfg) = scenario
        .cases
        .iter()
        .find(|(l, _)| l == label)
        .cloned()
        .context("the mesh scenario has cases A and No A, No C")?;
    let ms = |v: f64| Duration::from_ps((v * 1e9).round() as u64);
    cfg.run.warmup = ms(o.warmup_ms);
    cfg.run.measure = ms(o.measure_ms);
    cfg.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..o.repeat.max(1) {
        let t = Instant::now();
        let c0 = cpu_seconds();
        let r = run::run(&cfg, o.load, o.seed, &mut |_| {}).context("simulation")?;
        cpu.push((cpu_seconds() - c0).max(1e-9));
        wall.push(t.elapsed().as_secs_f64().max(1e-9));
        last = Some(r);
    }
    let r = last.context("no run")?;
    let (s, cpu_s) = (median(&wall), median(&cpu));
    Ok(Output {
        scenario: scenario.file.name.clone(),
        case: label.into(),
        load: o.load,
        routers: r.routers,
        cycles: r.cycles,
        seconds: s,
        cpu_seconds: cpu_s,
        cycles_per_s: r.cycles as f64 / s,
        cycles_per_cpu_s: r.cycles as f64 / cpu_s,
        flit_hops_per_cpu_s: r.flit_hops as f64 / cpu_s,
        connections: r.connections,
        requested: r.measures.requested,
        rejected: r.measures.rejected,
        runs_cpu_seconds: cpu,
    })
}

/// The two lines `clusterqos bench yum` prints.
pub fn summary(o: &Options, out: &Output) -> String {
    format!(
        "Yum cluster: 5x5 mesh, HCAs with queue pairs, {}, ON/OFF real time at load {} ({} \
         connections, {} of {} requests refused)\n  {} cycles in {:.3} s wall ({:.3} s CPU, \
         median of {}): {:.0} cycles/s CPU, {:.0} cycles/s wall, {:.3e} flit-hops/s CPU",
        if o.no_admission {
            "no admission control"
        } else {
            "probe-based admission"
        },
        o.load,
        out.connections,
        out.rejected,
        out.requested,
        out.cycles,
        out.seconds,
        out.cpu_seconds,
        out.runs_cpu_seconds.len(),
        out.cycles_per_cpu_s,
        out.cycles_per_s,
        out.flit_hops_per_cpu_s
    )
}
