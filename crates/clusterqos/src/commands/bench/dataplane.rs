//! `clusterqos bench dataplane-overhead`: the cost of rate control in the agent's data
//! plane (thesis §5.2: "less than 1 %" in latency and bandwidth). Two agents on
//! loopback; the same agents switch between the rate-control scheduler and GM rotation
//! in ABBA blocks; ping-pong round trips and streaming bandwidth over message sizes;
//! pooled medians with seeded bootstrap 95 % intervals, and the agents' own CPU time per
//! message (method: `qos_experiments::overhead`).
//!
//! Two runs by default (issue 11 point 6): *unpaced* (IDT 0: rate control's cheapest
//! path, the figure measured before), then *paced*: both ping-pong flows given an IDT
//! just below (0.9 of) the fastest time per packet the unpaced run's streams reached, so
//! rate control takes its full NDT path for every packet and throttles only bursts. The
//! paced run is the JSON's top level; both are reported, with how often pacing held a
//! packet back. The benchmark itself is `qos_experiments::overhead::bench`; this
//! command parses its flags and prints the tables.

use std::process::ExitCode;

use qos_core::sched::SchedulerKind;
use qos_core::units::Duration;
use qos_runtime::dataplane::harness::PACING_MARGIN;

use crate::output;
use qos_experiments::overhead::bench::{self, PacingInfo, Settings};
use qos_experiments::overhead::{self, Estimate, Plan};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// ABBA quads per size (each: four blocks, two with rate control on, two off).
    #[arg(long, default_value_t = 60)]
    pub quads: usize,
    /// Message sizes in bytes, comma-separated (default: the thesis's 4 B .. 64 KiB).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Round trips per block (all are pooled).
    #[arg(long, default_value_t = 25)]
    pub round_trips: usize,
    /// Bytes per block's bandwidth figure (20 ..= 1000 messages).
    #[arg(long, default_value_t = 4 << 20)]
    pub pump_bytes: usize,
    /// Bootstrap resamples for the 95 % intervals.
    #[arg(long, default_value_t = 2000)]
    pub resamples: usize,
    /// Bootstrap seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Scheduler for "rate control off": gm (GM rotation, the thesis's baseline),
    /// interleaved-round-robin, message-round-robin or virtual-clock.
    #[arg(long, default_value = "gm")]
    pub off: SchedulerKind,
    /// Microseconds the agents poll for work before sleeping (0: sleep at once).
    #[arg(long, default_value_t = 0)]
    pub spin_us: u64,
    /// Which runs: both (paced, then unpaced), paced (flows' IDT just below the fastest
    /// packet time), unpaced (IDT 0).
    #[arg(long, value_enum, default_value_t = Pacing::Both)]
    pub pacing: Pacing,
    /// The paced run's IDT as a fraction of the fastest time per packet (0.05 ..= 1).
    #[arg(long, default_value_t = PACING_MARGIN)]
    pub margin: f64,
    #[arg(long)]
    pub json: bool,
}

/// Which flows' IDTs the overhead runs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pacing {
    Both,
    Paced,
    Unpaced,
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let settings = Settings {
        plan: Plan {
            sizes: if a.sizes.is_empty() {
                overhead::SIZES.to_vec()
            } else {
                a.sizes.clone()
            },
            quads: a.quads,
            round_trips: a.round_trips,
            pump_bytes: a.pump_bytes,
            resamples: a.resamples,
            seed: a.seed,
            off: a.off,
        },
        pacing: match a.pacing {
            Pacing::Both => bench::Pacing::Both,
            Pacing::Paced => bench::Pacing::Paced,
            Pacing::Unpaced => bench::Pacing::Unpaced,
        },
        margin: a.margin,
        spin: Duration::from_us(a.spin_us),
    };
    let start = std::time::Instant::now();
    let mut progress = |d: usize, n: usize| {
        if d == n || d.is_multiple_of((n / 10).max(1)) {
            eprintln!(
                "[{:6.1} s] {d}/{n} quads of a size",
                start.elapsed().as_secs_f64()
            );
        }
    };
    let o = bench::run(&settings, &mut progress, &mut |line| eprintln!("{line}"))?;
    if a.json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            overhead: &'a overhead::Overhead,
            /// The unpaced run, when the headline is the paced one.
            #[serde(skip_serializing_if = "Option::is_none")]
            unpaced: Option<&'a overhead::Overhead>,
            #[serde(skip_serializing_if = "Option::is_none")]
            pacing: Option<PacingInfo>,
            spin_us: u64,
            idle_agent_cpu_pct: f64,
            seconds: f64,
        }
        let (overhead, nested, pacing) = match (&o.paced, &o.unpaced) {
            (Some((p, info)), u) => (p, u.as_ref(), Some(*info)),
            (None, Some(u)) => (u, None, None),
            (None, None) => anyhow::bail!("the benchmark made no run"),
        };
        output::print_json(&Out {
            overhead,
            unpaced: nested,
            pacing,
            spin_us: a.spin_us,
            idle_agent_cpu_pct: o.idle_agent_cpu_pct,
            seconds: o.seconds,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(r) = &o.unpaced {
        println!("Unpaced: IDT 0 (rate control's unregulated path).");
        print_run(r, &a, o.seconds);
    }
    if let Some((r, info)) = &o.paced {
        println!(
            "Paced: both ping-pong flows at IDT {:.0} ns ({} of the fastest packet time, {:.0} \
             ns); rate control held a packet back in {} dispatch rounds.",
            info.idt_ns, info.margin, info.packet_time_ns, info.held_back_rounds
        );
        print_run(r, &a, o.seconds);
    }
    println!("Idle agents: {:.3} % CPU.", o.idle_agent_cpu_pct);
    Ok(ExitCode::SUCCESS)
}

/// Prints one run's table and summary.
fn print_run(r: &overhead::Overhead, a: &Args, secs: f64) {
    let ci = |e: Estimate| format!("{:+.2} [{:+.2}, {:+.2}]", e.value, e.lo, e.hi);
    let mut t = output::table([
        "size B",
        "RTT off us",
        "RTT on us",
        "latency +% [95% CI]",
        "BW off MB/s",
        "BW on MB/s",
        "BW loss % [95% CI]",
        "CPU/msg ns pp off..on",
        "+CPU % one-way [CI]",
        "CPU/msg ns stream off..on",
        "+CPU % msg time [CI]",
    ]);
    for p in &r.points {
        t.add_row(vec![
            p.size.to_string(),
            format!("{:.2}", p.rtt_off_us),
            format!("{:.2}", p.rtt_on_us),
            ci(p.latency_overhead_pct),
            format!("{:.1}", p.bw_off_mb_s),
            format!("{:.1}", p.bw_on_mb_s),
            ci(p.bandwidth_loss_pct),
            format!("{:.0}..{:.0}", p.cpu_rtt_off_ns, p.cpu_rtt_on_ns),
            ci(p.cpu_rtt_delta_pct),
            format!("{:.0}..{:.0}", p.cpu_bw_off_ns, p.cpu_bw_on_ns),
            ci(p.cpu_bw_delta_pct),
        ]);
    }
    output::align_numbers(&mut t, 0);
    println!("{t}");
    let per_mode = r.points.first().map_or(0, |p| p.round_trips_per_mode);
    println!(
        "Same two agents, scheduler switched between blocks (off: {}): {} ABBA quads per \
         size, {} \
         round trips per block ({per_mode} per size and mode pooled), idle spin {} us, \
         {} s. 95 % intervals: bootstrap over quads, {} resamples, seed {}.",
        r.off,
        r.quads,
        r.round_trips_per_block,
        a.spin_us,
        secs.round(),
        r.resamples,
        r.seed
    );
    println!(
        "Averaged over sizes: latency overhead {} %, bandwidth loss {} % (worst size {:+.2} \
         %); figures paired within quads. Cross-check, ratio of pooled median round trips: \
         {} %.",
        ci(r.latency_overhead_avg_pct),
        ci(r.bandwidth_loss_avg_pct),
        r.bandwidth_loss_worst_pct,
        ci(r.latency_overhead_pooled_avg_pct)
    );
    println!(
        "Agent CPU added by rate control per message (both agents): ping-pong {} ns = {} % \
         of the one-way time; streaming {} ns = {} % of the time per message.",
        ci(r.cpu_rtt_delta_avg_ns),
        ci(r.cpu_rtt_delta_avg_pct),
        ci(r.cpu_bw_delta_avg_ns),
        ci(r.cpu_bw_delta_avg_pct)
    );
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use qos_core::sched::SchedulerKind;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::Args,
    }

    #[test]
    fn flags_parse_with_their_defaults() {
        let a = Cli::parse_from(["x"]).args;
        assert_eq!(
            (a.quads, a.round_trips, a.resamples, a.seed, a.spin_us),
            (60, 25, 2000, 1, 0)
        );
        assert!(a.sizes.is_empty() && !a.json);
        assert_eq!(a.off, SchedulerKind::Gm);
        assert_eq!(a.pacing, super::Pacing::Both);
        let p = Cli::parse_from(["x", "--pacing", "unpaced"]).args;
        assert_eq!(p.pacing, super::Pacing::Unpaced);
        assert!(Cli::try_parse_from(["x", "--pacing", "sometimes"]).is_err());
        let a = Cli::parse_from([
            "x",
            "--quads",
            "7",
            "--sizes",
            "4,65536",
            "--round-trips",
            "9",
            "--pump-bytes",
            "4096",
            "--resamples",
            "50",
            "--seed",
            "3",
            "--spin-us",
            "20",
            "--off",
            "interleaved-round-robin",
            "--json",
        ])
        .args;
        assert_eq!(a.sizes, vec![4, 65536]);
        assert_eq!(
            (
                a.quads,
                a.round_trips,
                a.pump_bytes,
                a.resamples,
                a.seed,
                a.spin_us
            ),
            (7, 9, 4096, 50, 3, 20)
        );
        assert!(a.json);
        assert_eq!(a.off, SchedulerKind::InterleavedRoundRobin);
        assert!(Cli::try_parse_from(["x", "--off", "fifo"]).is_err());
    }
}
