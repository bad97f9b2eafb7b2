//! `clusterqos bench dataplane-overhead`: the cost of rate control in the agent's data
//! plane (thesis §5.2: "less than 1 %" in latency and bandwidth), measured properly —
//! the same data plane with the rate-control scheduler and with GM rotation, two agents
//! each on loopback, ping-pong round trips and streaming bandwidth over message sizes,
//! on/off interleaved over many rounds (order alternating), medians with quartiles.

use std::process::ExitCode;

use qos_core::sched::SchedulerKind;
use qos_runtime::dataplane::harness::Harness;

use crate::commands::reproduce::overhead::{self, Plan, Spread};
use crate::commands::reproduce::traffic::PingPong;
use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Interleaved on/off rounds.
    #[arg(long, default_value_t = 15)]
    pub rounds: usize,
    /// Message sizes in bytes, comma-separated (default: the thesis's 4 B .. 64 KiB).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Ping-pongs per round-trip figure (their median counts).
    #[arg(long, default_value_t = 50)]
    pub iterations: usize,
    /// Bytes per bandwidth figure.
    #[arg(long, default_value_t = 8 << 20)]
    pub pump_bytes: usize,
    #[arg(long)]
    pub json: bool,
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
    if a.rounds == 0 || a.iterations == 0 {
        anyhow::bail!("--rounds and --iterations must be at least 1");
    }
    let max = sizes.iter().copied().max().unwrap_or(65536);
    let on_h = Harness::loopback(2, SchedulerKind::RateControl)?;
    let off_h = Harness::loopback(2, SchedulerKind::Gm)?;
    let mut on = PingPong::open(&on_h.sockets[0], &on_h.sockets[1], max)?;
    let mut off = PingPong::open(&off_h.sockets[0], &off_h.sockets[1], max)?;
    let plan = Plan {
        sizes,
        rounds: a.rounds,
        iterations: a.iterations,
        pump_bytes: a.pump_bytes,
    };
    let start = std::time::Instant::now();
    let mut progress = |d: usize, n: usize| {
        if d == n || d.is_multiple_of(plan_len(n)) {
            eprintln!(
                "[{:6.1} s] {d}/{n} measurements",
                start.elapsed().as_secs_f64()
            );
        }
    };
    let r = overhead::measure(&mut on, &mut off, &plan, &mut progress, &|| false)?;
    if a.json {
        output::print_json(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    let q = |s: Spread| format!("{:+.2} [{:+.2}, {:+.2}]", s.median, s.p25, s.p75);
    let mut t = output::table([
        "size (B)",
        "RTT off (us)",
        "RTT on (us)",
        "latency overhead % [p25, p75]",
        "BW off (MB/s)",
        "BW on (MB/s)",
        "bandwidth loss % [p25, p75]",
    ]);
    for p in &r.points {
        t.add_row(vec![
            p.size.to_string(),
            format!("{:.1}", p.rtt_off_us.median),
            format!("{:.1}", p.rtt_on_us.median),
            q(p.latency_overhead_pct),
            format!("{:.1}", p.bw_off_mb_s.median),
            format!("{:.1}", p.bw_on_mb_s.median),
            q(p.bandwidth_loss_pct),
        ]);
    }
    output::align_numbers(&mut t, 0);
    println!("{t}");
    println!(
        "{} rounds, on/off interleaved. Per-size medians averaged over sizes: latency overhead \
         {:+.2} %, bandwidth loss {:+.2} % (worst size {:+.2} %). Round to round, the \
         size-averaged figures: latency {}, bandwidth {} (median [quartiles]).",
        r.rounds,
        r.latency_overhead_avg_pct,
        r.bandwidth_loss_avg_pct,
        r.bandwidth_loss_worst_pct,
        q(r.latency_overhead_rounds_pct),
        q(r.bandwidth_loss_rounds_pct)
    );
    Ok(ExitCode::SUCCESS)
}

fn plan_len(n: usize) -> usize {
    (n / 10).max(1)
}
