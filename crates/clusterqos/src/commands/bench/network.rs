//! `clusterqos bench network`: how fast the flit-level network simulates (issue
//! "flit network", Yum et al. §6.1). The reference configuration — 8×8 mesh, DOR, 4 VLs
//! × 10-flit buffers, 40-flit packets, uniform traffic at 0.008 packets/node/cycle,
//! the BookSim2-equivalent router, 10,000 warm-up and 30,000 measured cycles — is run
//! single-threaded; the command prints simulated cycles per wall-clock second,
//! flit-hops (crossbar traversals) per second and the process's peak resident memory.
//! `--sizes 8,16,32` adds a mesh-size scaling table at `--scaling-rate` packets per node
//! per cycle (default 0.002, below saturation up to 32×32): cycles/s, ns per node-cycle
//! and ns per flit-hop (mean hop count grows with k at a fixed per-node rate, so the
//! work per node-cycle does too) and the peak resident memory of each size;
//! `--scale-rate` runs each size at the same fraction of its bisection bound instead.
//! `--preset booksim2` runs the BookSim2-equivalent configuration instead
//! ([`FlitConfig::booksim2`], scenarios/flit/booksim/). `--repeat N` runs each point N
//! times and reports the median time (issue 10 point 9), with every run's CPU time in
//! the JSON.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use qos_sim::flit::{FlitConfig, Network, TopologySpec};
use serde::Serialize;

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Mesh side k of the reference run.
    #[arg(long, default_value_t = 8)]
    k: u32,
    /// Injection rate, packets per node per cycle.
    #[arg(long, default_value_t = 0.008)]
    rate: f64,
    /// Warm-up cycles.
    #[arg(long, default_value_t = 10_000)]
    warmup: u64,
    /// Measured cycles.
    #[arg(long, default_value_t = 30_000)]
    measure: u64,
    /// Also run these mesh sides (comma-separated) for the scaling table.
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<u32>,
    /// Injection rate of the scaling table, packets per node per cycle.
    #[arg(long, default_value_t = 0.002)]
    scaling_rate: f64,
    /// Scale the scaling table's rate by 8/k: every size then runs at the same fraction
    /// of its bisection bound (4/k flits/node/cycle) as 8×8 at `--scaling-rate`, so the
    /// flit-hops per node-cycle stay about constant.
    #[arg(long)]
    scale_rate: bool,
    /// Runs per point; the median time is reported.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Configuration: `reference` (Yum's router with BookSim2's stage delays) or
    /// `booksim2` (BookSim2's router and terminal cycle for cycle).
    #[arg(long, value_enum, default_value_t = Preset::Reference)]
    preset: Preset,
    /// Another simulator's cycles per CPU-second on the same configuration, to print
    /// the ratio.
    #[arg(long)]
    compare: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Which configuration is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Preset {
    /// [`FlitConfig::reference`].
    Reference,
    /// [`FlitConfig::booksim2`] on a mesh.
    Booksim2,
}

/// One measured point (median of its runs).
#[derive(Debug, Serialize)]
struct Point {
    k: u32,
    nodes: u32,
    rate: f64,
    cycles: u64,
    seconds: f64,
    cpu_seconds: f64,
    cycles_per_s: f64,
    cycles_per_cpu_s: f64,
    flit_hops_per_s: f64,
    flit_hops_per_node_cycle: f64,
    ns_per_node_cycle: f64,
    ns_per_flit_hop: f64,
    peak_mb: f64,
    latency_avg: f64,
    accepted_flits_per_node_cycle: f64,
    saturated: bool,
    /// CPU seconds of every run, in the order run.
    runs_cpu_seconds: Vec<f64>,
}

/// Median of `v` (the mean of the two middle values for an even count).
pub(super) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

#[derive(Debug, Serialize)]
struct Output {
    reference: Point,
    peak_mb: f64,
    ratio: Option<f64>,
    scaling: Vec<Point>,
}

fn measure(k: u32, rate: f64, a: &Args) -> anyhow::Result<Point> {
    let mut cfg = match a.preset {
        Preset::Reference => FlitConfig::reference(k, rate),
        Preset::Booksim2 => FlitConfig::booksim2(TopologySpec::Mesh { k }, rate),
    };
    cfg.phases.warmup = a.warmup;
    cfg.phases.measure = a.measure;
    cfg.seed = a.seed;
    let (mut wall, mut cpu, mut peak) = (Vec::new(), Vec::new(), 0.0f64);
    let mut last = None;
    for _ in 0..a.repeat.max(1) {
        reset_peak();
        let mut net = Network::new(&cfg).context("benchmark configuration")?;
        let t = Instant::now();
        let c0 = cpu_seconds();
        let r = net.run().context("simulation")?;
        cpu.push((cpu_seconds() - c0).max(1e-9));
        wall.push(t.elapsed().as_secs_f64().max(1e-9));
        peak = peak.max(peak_mb());
        last = Some(r);
    }
    let r = last.context("no run")?;
    let (s, cpu_s) = (median(&wall), median(&cpu));
    let node_cycles = r.cycles as f64 * (k * k) as f64;
    Ok(Point {
        k,
        nodes: k * k,
        rate,
        cycles: r.cycles,
        seconds: s,
        cpu_seconds: cpu_s,
        cycles_per_s: r.cycles as f64 / s,
        cycles_per_cpu_s: r.cycles as f64 / cpu_s,
        flit_hops_per_s: r.flit_hops as f64 / s,
        flit_hops_per_node_cycle: r.flit_hops as f64 / node_cycles,
        ns_per_node_cycle: cpu_s * 1e9 / node_cycles,
        ns_per_flit_hop: cpu_s * 1e9 / r.flit_hops.max(1) as f64,
        peak_mb: peak,
        latency_avg: r.total.latency.avg,
        accepted_flits_per_node_cycle: r.total.accepted,
        saturated: r.saturated,
        runs_cpu_seconds: cpu,
    })
}

/// CPU time this thread has run, in seconds (Linux `/proc/thread-self/schedstat`,
/// nanoseconds on the CPU); wall-clock elsewhere. On a shared machine CPU time is the
/// fair measure: it leaves out time the process waited for a core.
pub(super) fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or_else(
            || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64())
            },
            |ns| ns / 1e9,
        )
}

/// Starts a new peak-memory measurement (Linux: resets `VmHWM` to the current
/// resident set; elsewhere nothing, and peaks are since the start).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set of this process in MB (Linux `VmHWM`), 0 where unknown.
fn peak_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if !(a.rate > 0.0 && a.rate <= 1.0) {
        anyhow::bail!("--rate must be in (0, 1] packets/node/cycle");
    }
    if a.measure == 0 {
        anyhow::bail!("--measure must be at least 1 cycle");
    }
    if !(a.scaling_rate > 0.0 && a.scaling_rate <= 1.0) {
        anyhow::bail!("--scaling-rate must be in (0, 1] packets/node/cycle");
    }
    if let Some(&k) = a.sizes.iter().find(|&&k| !(1..=256).contains(&k)) {
        anyhow::bail!("--sizes: mesh side {k} out of range 1-256");
    }
    let reference = measure(a.k, a.rate, &a)?;
    let peak = reference.peak_mb;
    let mut scaling = Vec::new();
    for &k in &a.sizes {
        let rate = if a.scale_rate {
            (a.scaling_rate * 8.0 / k as f64).min(1.0)
        } else {
            a.scaling_rate
        };
        scaling.push(measure(k, rate, &a)?);
    }
    let ratio = a.compare.map(|c| reference.cycles_per_cpu_s / c);
    let out = Output {
        reference,
        peak_mb: peak,
        ratio,
        scaling,
    };
    if a.json {
        output::print_json(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let r = &out.reference;
    println!(
        "flit network {}x{} mesh, DOR, 4 VLs x 10 flits, 40-flit packets, uniform {} packets/node/cycle, {}",
        r.k,
        r.k,
        r.rate,
        match a.preset {
            Preset::Reference => "Yum's router with BookSim2's stage delays",
            Preset::Booksim2 => "BookSim2-equivalent router and terminal",
        }
    );
    println!(
        "  {} cycles in {:.3} s wall ({:.3} s CPU, median of {}): {:.0} cycles/s wall, {:.0} cycles/s CPU, {:.3e} flit-hops/s, peak {:.1} MB",
        r.cycles,
        r.seconds,
        r.cpu_seconds,
        r.runs_cpu_seconds.len(),
        r.cycles_per_s,
        r.cycles_per_cpu_s,
        r.flit_hops_per_s,
        out.peak_mb
    );
    println!(
        "  latency {:.2} cycles, accepted {:.4} flits/node/cycle{}",
        r.latency_avg,
        r.accepted_flits_per_node_cycle,
        if r.saturated { " (saturated)" } else { "" }
    );
    if let (Some(x), Some(c)) = (out.ratio, a.compare) {
        println!("  {x:.1}x the compared simulator's {c:.0} cycles/s (CPU time)");
    }
    if !out.scaling.is_empty() {
        if a.scale_rate {
            println!(
                "mesh-size scaling at {} x 8/k packets/node/cycle (CPU time; peak memory of each run):",
                a.scaling_rate
            );
        } else {
            println!(
                "mesh-size scaling at {} packets/node/cycle (CPU time; peak memory of each run):",
                a.scaling_rate
            );
        }
        let mut t = output::table([
            "mesh",
            "nodes",
            "rate",
            "cycles/s",
            "flit-hops/s",
            "flit-hops per node-cycle",
            "ns per node-cycle",
            "ns per flit-hop",
            "latency",
            "peak MB",
        ]);
        for p in &out.scaling {
            t.add_row([
                format!("{}x{}", p.k, p.k),
                p.nodes.to_string(),
                format!("{}", p.rate),
                format!("{:.0}", p.cycles_per_cpu_s),
                format!("{:.3e}", p.flit_hops_per_s * p.seconds / p.cpu_seconds),
                format!("{:.3}", p.flit_hops_per_node_cycle),
                format!("{:.1}", p.ns_per_node_cycle),
                format!("{:.1}", p.ns_per_flit_hop),
                format!("{:.2}", p.latency_avg),
                format!("{:.1}", p.peak_mb),
            ]);
        }
        output::align_numbers(&mut t, 1);
        println!("{t}");
    }
    Ok(ExitCode::SUCCESS)
}
