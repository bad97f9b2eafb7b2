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
//! packet back.

use std::process::ExitCode;

use qos_core::sched::SchedulerKind;
use qos_core::units::Duration;
use qos_runtime::dataplane::harness::{Harness, PACING_MARGIN};

use crate::output;
use qos_experiments::overhead::{self, Estimate, Plan};
use qos_experiments::traffic::PingPong;

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

/// The ping-pong's ports (`PingPong::open`): 21 on node 0, 22 on node 1.
const PING: u16 = 21;
const PONG: u16 = 22;

/// How the paced run was paced.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct PacingInfo {
    /// Fastest time per packet of the unpaced run's streams (or, paced run alone, of an
    /// unregulated flow of 64-byte messages), ns.
    packet_time_ns: f64,
    /// The IDT given to both ping-pong flows, ns.
    idt_ns: f64,
    margin: f64,
    /// Dispatch rounds in which rate control held a packet back during the paced run
    /// (both agents): 0 means pacing never throttled.
    held_back_rounds: u64,
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let sizes = if a.sizes.is_empty() {
        overhead::SIZES.to_vec()
    } else {
        a.sizes.clone()
    };
    if let Some(bad) = sizes.iter().find(|s| **s == 0 || **s > 1 << 20) {
        anyhow::bail!("--sizes: {bad} is not 1 ..= 1048576 bytes");
    }
    if a.quads == 0 || a.round_trips == 0 {
        anyhow::bail!("--quads and --round-trips must be at least 1");
    }
    if a.off == SchedulerKind::RateControl {
        anyhow::bail!("--off: rate-control is the scheduler being measured");
    }
    if !(0.05..=1.0).contains(&a.margin) {
        anyhow::bail!("--margin: {} is not 0.05 ..= 1", a.margin);
    }
    if a.spin_us > 1000 {
        anyhow::bail!("--spin-us: {} is above 1000", a.spin_us);
    }
    let max = sizes.iter().copied().max().unwrap_or(65536);
    let h = Harness::loopback(2, SchedulerKind::RateControl)?;
    h.set_idle_spin(Duration::from_us(a.spin_us));
    let plan = Plan {
        sizes,
        quads: a.quads,
        round_trips: a.round_trips,
        pump_bytes: a.pump_bytes,
        resamples: a.resamples,
        seed: a.seed,
        off: a.off,
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
    let held = |h: &Harness| h.engine_stats().iter().map(|s| s.held_back).sum::<u64>();
    let mut unpaced = None;
    if a.pacing != Pacing::Paced {
        eprintln!("unpaced run: IDT 0");
        h.pace_pair(0, PING, 1, PONG, Duration::ZERO);
        let mut pp = PingPong::open(&h.sockets[0], &h.sockets[1], max)?;
        unpaced = Some(overhead::measure(
            &h,
            &mut pp,
            &plan,
            &mut progress,
            &|| false,
        )?);
    }
    let mut paced = None;
    if a.pacing != Pacing::Unpaced {
        // The fastest time per packet these agents reached: from the unpaced run's
        // streams when there is one (rate control on, every size), else measured.
        let t = match &unpaced {
            Some(r) => fastest_packet(r, h.payload),
            None => h.packet_time(0, 1, 64, 2000)?,
        };
        let idt = Duration::from_ps((t.as_ps() as f64 * a.margin) as u64);
        eprintln!(
            "paced run: IDT {idt} ({} of the fastest packet time {t})",
            a.margin
        );
        h.pace_pair(0, PING, 1, PONG, idt);
        let mut pp = PingPong::open(&h.sockets[0], &h.sockets[1], max)?;
        let before = held(&h);
        let r = overhead::measure(&h, &mut pp, &plan, &mut progress, &|| false)?;
        let info = PacingInfo {
            packet_time_ns: t.as_ps() as f64 / 1e3,
            idt_ns: idt.as_ps() as f64 / 1e3,
            margin: a.margin,
            held_back_rounds: held(&h) - before,
        };
        paced = Some((r, info));
    }
    let idle = idle_cpu_pct(&h);
    let secs = start.elapsed().as_secs_f64();
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
        let (overhead, nested, pacing) = match (&paced, &unpaced) {
            (Some((p, info)), u) => (p, u.as_ref(), Some(*info)),
            (None, Some(u)) => (u, None, None),
            (None, None) => unreachable!("at least one run"),
        };
        output::print_json(&Out {
            overhead,
            unpaced: nested,
            pacing,
            spin_us: a.spin_us,
            idle_agent_cpu_pct: idle,
            seconds: secs,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(r) = &unpaced {
        println!("Unpaced: IDT 0 (rate control's unregulated path).");
        print_run(r, &a, secs);
    }
    if let Some((r, info)) = &paced {
        println!(
            "Paced: both ping-pong flows at IDT {:.0} ns ({} of the fastest packet time, {:.0} \
             ns); rate control held a packet back in {} dispatch rounds.",
            info.idt_ns, info.margin, info.packet_time_ns, info.held_back_rounds
        );
        print_run(r, &a, secs);
    }
    println!("Idle agents: {idle:.3} % CPU.");
    Ok(ExitCode::SUCCESS)
}

/// The shortest time per packet of the run's streams with rate control on: size over
/// bandwidth, divided by the packets a message of that size takes.
fn fastest_packet(r: &overhead::Overhead, payload: usize) -> Duration {
    let ps = r
        .points
        .iter()
        .filter(|p| p.bw_on_mb_s > 0.0)
        .map(|p| {
            let packets = p.size.div_ceil(payload.max(1)).max(1) as f64;
            p.size as f64 / (p.bw_on_mb_s * 1e6) / packets * 1e12
        })
        .fold(f64::INFINITY, f64::min);
    Duration::from_ps(if ps.is_finite() { ps as u64 } else { 0 })
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

/// CPU of the agents over half a second with no traffic, % of one core per agent.
fn idle_cpu_pct(h: &Harness) -> f64 {
    std::thread::sleep(std::time::Duration::from_millis(200));
    let a: u64 = h.agent_cpu_ns().iter().sum();
    let t = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let b: u64 = h.agent_cpu_ns().iter().sum();
    100.0 * (b - a) as f64 / 1e9 / t.elapsed().as_secs_f64() / h.nodes.len() as f64
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
