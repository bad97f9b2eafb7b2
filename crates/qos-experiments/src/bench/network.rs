//! How fast the flit-level network simulates (`clusterqos bench network`; Yum et al.
//! §6.1). The reference configuration — 8×8 mesh, DOR, 4 VLs ×
//! 10-flit buffers, 40-flit packets, uniform traffic at 0.008 packets/node/cycle, the
//! BookSim2-equivalent router, 10,000 warm-up and 30,000 measured cycles — is run
//! single-threaded; the result is simulated cycles per wall-clock and per CPU second,
//! flit-hops (crossbar traversals) per second and the process's peak resident memory.
//!
//! `sizes` adds a mesh-size scaling table at `scaling_rate` packets per node per cycle
//! (default 0.002, below saturation up to 32×32): cycles/s, ns per node-cycle and ns per
//! flit-hop (mean hop count grows with k at a fixed per-node rate, so the work per
//! node-cycle does too) and the peak resident memory of each size; `scale_rate` runs
//! each size at the same fraction of its bisection bound instead. [`Preset::Booksim2`]
//! runs the BookSim2-equivalent configuration ([`FlitConfig::booksim2`],
//! scenarios/flit/booksim/). `repeat` runs each point that many times and reports the
//! median time, with every run's CPU time kept.

use std::time::Instant;

use crate::report::Table;
use qos_sim::flit::{sync_cost, FlitConfig, FlitError, Network, ThreadsProfile, TopologySpec};
use serde::Serialize;

/// Which configuration is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// Yum's router with BookSim2's stage delays (`FlitConfig::reference`).
    Reference,
    /// BookSim2's router and terminal cycle for cycle, on a mesh (`FlitConfig::booksim2`).
    Booksim2,
}

/// The routers' prefetch hints (`Network::set_prefetch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Prefetch {
    /// On when the network's VC records and rings outgrow a level-2 cache
    /// (`qos_sim::flit::engine::PREFETCH_ABOVE` bytes), as in every other run.
    Auto,
    /// Always on.
    On,
    /// Always off.
    Off,
}

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Mesh side k of the reference run.
    #[arg(long, default_value_t = 8)]
    pub k: u32,
    /// Injection rate of the reference run, packets per node per cycle.
    #[arg(long, default_value_t = 0.008)]
    pub rate: f64,
    /// Warm-up cycles.
    #[arg(long, default_value_t = 10_000)]
    pub warmup: u64,
    /// Measured cycles.
    #[arg(long, default_value_t = 30_000)]
    pub measure: u64,
    /// Also run these mesh sides (comma-separated) for the scaling table.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<u32>,
    /// Injection rate of the scaling table, packets per node per cycle.
    #[arg(long, default_value_t = 0.002)]
    pub scaling_rate: f64,
    /// Scale the scaling table's rate by 8/k: every size then runs at the same fraction
    /// of its bisection bound (4/k flits/node/cycle) as 8×8 at `--scaling-rate`, so the
    /// flit-hops per node-cycle stay about constant.
    #[arg(long)]
    pub scale_rate: bool,
    /// Runs per point; the median time is reported.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Configuration: `reference` (Yum's router with BookSim2's stage delays) or
    /// `booksim2` (BookSim2's router and terminal cycle for cycle).
    #[arg(long, value_enum, default_value = "reference")]
    pub preset: Preset,
    /// Another simulator's cycles per CPU-second on the same configuration, to print
    /// the ratio.
    #[arg(long)]
    pub compare: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run the network on this many threads (routers cut into blocks of rows); the
    /// result is the same for every count, 1 included, but may differ from a run
    /// without the flag in the order of same-cycle ties. CPU time is then the
    /// process's, all threads together.
    #[arg(long)]
    pub threads: Option<usize>,
    /// The routers' prefetch hints: `auto` (what every run does), `on` or `off`, to
    /// measure what they are worth; results are the same either way.
    #[arg(long, value_enum, default_value = "auto")]
    pub prefetch: Prefetch,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An option out of range (the message names the flag).
    #[error("{0}")]
    Invalid(String),
    /// The configuration was refused by the model.
    #[error("benchmark configuration")]
    Config(#[source] FlitError),
    /// The simulation failed.
    #[error("simulation")]
    Simulation(#[source] FlitError),
}

/// One measured point (median of its runs).
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub k: u32,
    pub nodes: u32,
    pub rate: f64,
    pub cycles: u64,
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub cycles_per_s: f64,
    pub cycles_per_cpu_s: f64,
    pub flit_hops_per_s: f64,
    pub flit_hops_per_node_cycle: f64,
    pub ns_per_node_cycle: f64,
    pub ns_per_flit_hop: f64,
    pub peak_mb: f64,
    pub latency_avg: f64,
    pub accepted_flits_per_node_cycle: f64,
    pub saturated: bool,
    /// Whether the routers' prefetch hints were on.
    pub prefetch: bool,
    /// CPU seconds of every run, in the order run.
    pub runs_cpu_seconds: Vec<f64>,
    /// `--threads`, and on two or more: where the last run's time went, and what a
    /// cycle of synchronisation alone costs (no work, same threads, measured after it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads_profile: Option<ThreadsProfile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_ns_per_cycle: Option<f64>,
}

/// The benchmark's result (`--json` prints it as is).
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    /// The reference run.
    pub reference: Point,
    /// Peak resident memory of the reference run, MB.
    pub peak_mb: f64,
    /// The reference run's CPU speed over `compare`.
    pub ratio: Option<f64>,
    /// The scaling table's points, one per size.
    pub scaling: Vec<Point>,
}

impl Options {
    /// Refuses options the benchmark cannot run, naming the flag at fault.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::Invalid(m.to_string()));
        if !(self.rate > 0.0 && self.rate <= 1.0) {
            return bad("--rate must be in (0, 1] packets/node/cycle");
        }
        if self.measure == 0 {
            return bad("--measure must be at least 1 cycle");
        }
        if !(self.scaling_rate > 0.0 && self.scaling_rate <= 1.0) {
            return bad("--scaling-rate must be in (0, 1] packets/node/cycle");
        }
        if self.threads == Some(0) {
            return bad("--threads must be at least 1");
        }
        if let Some(&k) = self.sizes.iter().find(|&&k| !(1..=256).contains(&k)) {
            return Err(Error::Invalid(format!(
                "--sizes: mesh side {k} out of range 1-256"
            )));
        }
        Ok(())
    }

    /// The scaling table's rate for mesh side `k`.
    fn scaling_rate_for(&self, k: u32) -> f64 {
        if self.scale_rate {
            (self.scaling_rate * 8.0 / k as f64).min(1.0)
        } else {
            self.scaling_rate
        }
    }
}

/// Runs the benchmark: the reference point, then every size of the scaling table.
pub fn run(opts: &Options) -> Result<Output, Error> {
    opts.validate()?;
    let reference = measure(opts.k, opts.rate, opts)?;
    let scaling = opts
        .sizes
        .iter()
        .map(|&k| measure(k, opts.scaling_rate_for(k), opts))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Output {
        peak_mb: reference.peak_mb,
        ratio: opts.compare.map(|c| reference.cycles_per_cpu_s / c),
        reference,
        scaling,
    })
}

impl Output {
    /// The summary printed above the scaling table: configuration, speed, latency and
    /// the comparison, one line each.
    pub fn summary(&self, opts: &Options) -> String {
        let r = &self.reference;
        let mut s = format!(
            "flit network {}x{} mesh, DOR, 4 VLs x 10 flits, 40-flit packets, uniform {} packets/node/cycle, {}\n",
            r.k,
            r.k,
            r.rate,
            match opts.preset {
                Preset::Reference => "Yum's router with BookSim2's stage delays",
                Preset::Booksim2 => "BookSim2-equivalent router and terminal",
            }
        );
        s += &format!(
            "  {} cycles in {:.3} s wall ({:.3} s CPU, median of {}): {:.0} cycles/s wall, {:.0} cycles/s CPU, {:.3e} flit-hops/s, peak {:.1} MB\n",
            r.cycles,
            r.seconds,
            r.cpu_seconds,
            r.runs_cpu_seconds.len(),
            r.cycles_per_s,
            r.cycles_per_cpu_s,
            r.flit_hops_per_s,
            self.peak_mb
        );
        s += &format!(
            "  latency {:.2} cycles, accepted {:.4} flits/node/cycle{}\n",
            r.latency_avg,
            r.accepted_flits_per_node_cycle,
            if r.saturated { " (saturated)" } else { "" }
        );
        if let Some(n) = opts.threads {
            s += &format!("  on {n} thread(s): CPU time is the whole process's\n");
        }
        if let (Some(p), Some(sync)) = (r.threads_profile, r.sync_ns_per_cycle) {
            let c = p.cycles.max(1) as f64;
            s += &format!(
                "  {} cycles run on threads: phases 1-2 {:.0} ns/cycle, serial phase {:.0} ns/cycle, {:.1} boundary crossings/cycle; synchronisation alone {:.0} ns/cycle\n",
                p.cycles,
                p.parallel_ns as f64 / c,
                p.serial_ns as f64 / c,
                p.crossings as f64 / c,
                sync
            );
        }
        if let (Some(x), Some(c)) = (self.ratio, opts.compare) {
            s += &format!("  {x:.1}x the compared simulator's {c:.0} cycles/s (CPU time)\n");
        }
        s
    }

    /// The mesh-size scaling table (title as its heading), if sizes were asked for.
    pub fn scaling_table(&self, opts: &Options) -> Option<Table> {
        if self.scaling.is_empty() {
            return None;
        }
        let title = if opts.scale_rate {
            format!(
                "mesh-size scaling at {} x 8/k packets/node/cycle (CPU time; peak memory of each run):",
                opts.scaling_rate
            )
        } else {
            format!(
                "mesh-size scaling at {} packets/node/cycle (CPU time; peak memory of each run):",
                opts.scaling_rate
            )
        };
        let mut t = Table::new(
            "scaling",
            title,
            [
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
            ],
        );
        for p in &self.scaling {
            t.push([
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
        Some(t)
    }
}

/// Median of `v` (the mean of the two middle values for an even count; 0 when empty).
pub fn median(v: &[f64]) -> f64 {
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

/// Runs one point `opts.repeat` times (at least once).
fn measure(k: u32, rate: f64, opts: &Options) -> Result<Point, Error> {
    let mut cfg = match opts.preset {
        Preset::Reference => FlitConfig::reference(k, rate),
        Preset::Booksim2 => FlitConfig::booksim2(TopologySpec::mesh(k), rate),
    };
    cfg.phases.warmup = opts.warmup;
    cfg.phases.measure = opts.measure;
    cfg.seed = opts.seed;
    let (mut wall, mut cpu, mut peak) = (Vec::new(), Vec::new(), 0.0f64);
    let (mut profile, mut prefetch) = (None, false);
    let mut one = || -> Result<_, Error> {
        reset_peak();
        let mut net = Network::new(&cfg).map_err(Error::Config)?;
        match opts.prefetch {
            Prefetch::Auto => {}
            Prefetch::On => net.set_prefetch(true),
            Prefetch::Off => net.set_prefetch(false),
        }
        prefetch = net.prefetch();
        if let Some(n) = opts.threads {
            net.set_threads(n).map_err(Error::Config)?;
        }
        let clock = if opts.threads.is_some_and(|n| n > 1) {
            process_cpu_seconds
        } else {
            cpu_seconds
        };
        let t = Instant::now();
        let c0 = clock();
        let r = net.run().map_err(Error::Simulation)?;
        cpu.push((clock() - c0).max(1e-9));
        if net.threads() > 1 {
            profile = Some(net.threads_profile());
        }
        wall.push(t.elapsed().as_secs_f64().max(1e-9));
        peak = peak.max(peak_mb());
        Ok(r)
    };
    let mut r = one()?;
    for _ in 1..opts.repeat {
        r = one()?;
    }
    let (s, cpu_s) = (median(&wall), median(&cpu));
    let sync = profile.map(|_| sync_cost(opts.threads.unwrap_or(1), 200_000));
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
        prefetch,
        runs_cpu_seconds: cpu,
        threads: opts.threads,
        threads_profile: profile,
        sync_ns_per_cycle: sync,
    })
}

/// CPU time this thread has run, in seconds (`CLOCK_THREAD_CPUTIME_ID`, nanoseconds,
/// the running slice included); wall-clock where that clock is missing. On a shared
/// machine CPU time is the fair measure: it leaves out time the process waited for a
/// core. (`/proc/thread-self/schedstat`, read before, moves only at the scheduler's tick
/// — 4 ms here —, a tenth of an 8×8 run of the scaling table.)
pub fn cpu_seconds() -> f64 {
    clock_seconds(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process (all threads), in seconds (`CLOCK_PROCESS_CPUTIME_ID`);
/// wall-clock where that clock is missing.
pub fn process_cpu_seconds() -> f64 {
    clock_seconds(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn clock_seconds(id: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given, a local here.
    if unsafe { libc::clock_gettime(id, &mut ts) } == 0 {
        return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Options {
        Options {
            k: 2,
            rate: 0.01,
            warmup: 50,
            measure: 200,
            sizes: vec![],
            scaling_rate: 0.002,
            scale_rate: false,
            repeat: 1,
            preset: Preset::Reference,
            compare: None,
            seed: 1,
            threads: None,
            prefetch: Prefetch::Auto,
        }
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn bad_options_name_their_flag() {
        for (o, flag) in [
            (
                Options {
                    rate: 0.0,
                    ..tiny()
                },
                "--rate",
            ),
            (
                Options {
                    measure: 0,
                    ..tiny()
                },
                "--measure",
            ),
            (
                Options {
                    scaling_rate: 1.5,
                    ..tiny()
                },
                "--scaling-rate",
            ),
            (
                Options {
                    sizes: vec![2, 300],
                    ..tiny()
                },
                "--sizes: mesh side 300",
            ),
        ] {
            let e = run(&o).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{e}");
        }
    }

    #[test]
    fn repeats_and_scaling_points_are_all_measured() {
        let o = Options {
            repeat: 3,
            sizes: vec![2, 3],
            scale_rate: true,
            compare: Some(1000.0),
            ..tiny()
        };
        let out = run(&o).unwrap();
        assert_eq!(out.reference.runs_cpu_seconds.len(), 3);
        assert_eq!(out.scaling.len(), 2);
        // 8/k scaling: 0.002 × 8/3 for the 3×3 mesh.
        assert!((out.scaling[1].rate - 0.002 * 8.0 / 3.0).abs() < 1e-12);
        assert!(out.ratio.unwrap() > 0.0);
        let t = out.scaling_table(&o).unwrap();
        assert_eq!(t.rows.len(), 2);
        assert!(t.title.contains("x 8/k"), "{}", t.title);
        assert!(out
            .summary(&o)
            .contains("the compared simulator's 1000 cycles/s"));
    }
}
