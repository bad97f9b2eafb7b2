//! The whole rate-control overhead benchmark (`clusterqos bench dataplane-overhead`,
//! thesis §5.2): two agents on loopback measured by
//! [`super::measure`] twice — *unpaced* (IDT 0, rate control's cheapest path) and
//! *paced* (both ping-pong flows given an IDT just below, `margin` of, the fastest time
//! per packet the unpaced streams reached, so every packet takes the full NDT path and
//! only bursts are throttled) — plus the idle agents' CPU. The command only parses its
//! flags and prints what this returns.

use std::time::Instant;

use crate::report::Table;
use anyhow::bail;
use qos_core::sched::SchedulerKind;
use qos_core::units::Duration;
use qos_runtime::dataplane::harness::{Harness, HarnessOptions, NodeSite};
use qos_runtime::transport::auth::{BenchSeal, Protection};
use serde::Serialize;

use super::{measure, Estimate, Overhead, Plan};
use crate::traffic::PingPong;

/// The ping-pong's ports (`PingPong::open`): 21 on node 0, 22 on node 1.
const PING: u16 = 21;
const PONG: u16 = 22;

/// Which runs to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// Unpaced, then paced (the paced run is the headline).
    Both,
    Paced,
    Unpaced,
}

/// The benchmark's settings beyond the measurement plan.
#[derive(Debug, Clone)]
pub struct Settings {
    pub plan: Plan,
    pub pacing: Pacing,
    /// The paced run's IDT as a fraction of the fastest time per packet (0.05 ..= 1).
    pub margin: f64,
    /// How long the agents poll for work before sleeping.
    pub spin: Duration,
    /// How the agents protect their datagrams (authenticated, or also encrypted).
    pub protection: Protection,
    /// What the agents seal: everything, as agents do, or less — the controls that
    /// measure what protection costs (`Off`) and what of it the payload's bytes cost
    /// (`HeadersOnly`).
    pub bench_seal: BenchSeal,
}

impl Settings {
    /// Refuses settings the benchmark cannot run, naming the flag at fault.
    pub fn validate(&self) -> anyhow::Result<()> {
        let p = &self.plan;
        if let Some(bad) = p.sizes.iter().find(|s| **s == 0 || **s > 1 << 20) {
            bail!("--sizes: {bad} is not 1 ..= 1048576 bytes");
        }
        if p.sizes.is_empty() {
            bail!("--sizes: no message size");
        }
        if p.quads == 0 || p.round_trips == 0 {
            bail!("--quads and --round-trips must be at least 1");
        }
        if p.off == SchedulerKind::RateControl {
            bail!("--off: rate-control is the scheduler being measured");
        }
        if !(0.05..=1.0).contains(&self.margin) {
            bail!("--margin: {} is not 0.05 ..= 1", self.margin);
        }
        if self.spin > Duration::from_us(1000) {
            bail!("--spin-us: {} is above 1000 us", self.spin);
        }
        Ok(())
    }
}

/// How the paced run was paced.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PacingInfo {
    /// Fastest time per packet of the unpaced run's streams (or, paced run alone, of an
    /// unregulated flow of 64-byte messages), ns.
    pub packet_time_ns: f64,
    /// The IDT given to both ping-pong flows, ns.
    pub idt_ns: f64,
    pub margin: f64,
    /// Dispatch rounds in which rate control held a packet back during the paced run
    /// (both agents): 0 means pacing never throttled.
    pub held_back_rounds: u64,
}

/// What the benchmark measured.
#[derive(Debug)]
pub struct Outcome {
    pub unpaced: Option<Overhead>,
    pub paced: Option<(Overhead, PacingInfo)>,
    /// CPU of the idle agents, % of one core per agent.
    pub idle_agent_cpu_pct: f64,
    pub seconds: f64,
}

/// Runs the benchmark; `progress(done, of)` is called as quads of a size complete and
/// `note` gets a line at the start of each run.
pub fn run(
    s: &Settings,
    progress: &mut dyn FnMut(usize, usize),
    note: &mut dyn FnMut(&str),
) -> anyhow::Result<Outcome> {
    s.validate()?;
    let max = s.plan.sizes.iter().copied().max().unwrap_or(65536);
    let h = Harness::start_with(
        NodeSite::loopback(2)?,
        HarnessOptions {
            scheduler: SchedulerKind::RateControl,
            payload: None,
            link_rate: None,
            protection: s.protection,
            bench_seal: s.bench_seal,
        },
    )?;
    h.set_idle_spin(s.spin);
    let start = Instant::now();
    let held = |h: &Harness| h.engine_stats().iter().map(|s| s.held_back).sum::<u64>();
    let mut unpaced = None;
    if s.pacing != Pacing::Paced {
        note("unpaced run: IDT 0");
        h.pace_pair(0, PING, 1, PONG, Duration::ZERO);
        let mut pp = PingPong::open(&h.sockets[0], &h.sockets[1], max)?;
        unpaced = Some(measure(&h, &mut pp, &s.plan, progress, &|| false)?);
    }
    let mut paced = None;
    if s.pacing != Pacing::Unpaced {
        // The fastest time per packet these agents reached: from the unpaced run's
        // streams when there is one (rate control on, every size), else measured.
        let t = match &unpaced {
            Some(r) => fastest_packet(r, h.payload),
            None => h.packet_time(0, 1, 64, 2000)?,
        };
        let idt = Duration::from_ps((t.as_ps() as f64 * s.margin) as u64);
        note(&format!(
            "paced run: IDT {idt} ({} of the fastest packet time {t})",
            s.margin
        ));
        h.pace_pair(0, PING, 1, PONG, idt);
        let mut pp = PingPong::open(&h.sockets[0], &h.sockets[1], max)?;
        let before = held(&h);
        let r = measure(&h, &mut pp, &s.plan, progress, &|| false)?;
        let info = PacingInfo {
            packet_time_ns: t.as_ps() as f64 / 1e3,
            idt_ns: idt.as_ps() as f64 / 1e3,
            margin: s.margin,
            held_back_rounds: held(&h) - before,
        };
        paced = Some((r, info));
    }
    let idle_agent_cpu_pct = idle_cpu_pct(&h);
    Ok(Outcome {
        unpaced,
        paced,
        idle_agent_cpu_pct,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// What `--json` prints: the headline run (the paced one when there is one) at the top
/// level, the unpaced run nested under it.
#[derive(Debug, Serialize)]
pub struct Json<'a> {
    #[serde(flatten)]
    pub overhead: &'a Overhead,
    /// The unpaced run, when the headline is the paced one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpaced: Option<&'a Overhead>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing: Option<PacingInfo>,
    pub spin_us: u64,
    pub idle_agent_cpu_pct: f64,
    pub seconds: f64,
}

impl Outcome {
    /// The JSON form (`None` if no run was made); `spin_us` is the agents' idle poll.
    pub fn json(&self, spin_us: u64) -> Option<Json<'_>> {
        let (overhead, unpaced, pacing) = match (&self.paced, &self.unpaced) {
            (Some((p, info)), u) => (p, u.as_ref(), Some(*info)),
            (None, Some(u)) => (u, None, None),
            (None, None) => return None,
        };
        Some(Json {
            overhead,
            unpaced,
            pacing,
            spin_us,
            idle_agent_cpu_pct: self.idle_agent_cpu_pct,
            seconds: self.seconds,
        })
    }

    /// Every run made, unpaced first, with the line that introduces it.
    pub fn runs(&self) -> Vec<(String, &Overhead)> {
        let mut v = Vec::new();
        if let Some(r) = &self.unpaced {
            v.push((
                "Unpaced: IDT 0 (rate control's unregulated path).".to_string(),
                r,
            ));
        }
        if let Some((r, info)) = &self.paced {
            let line = format!(
                "Paced: both ping-pong flows at IDT {:.0} ns ({} of the fastest packet time, \
                 {:.0} ns); rate control held a packet back in {} dispatch rounds.",
                info.idt_ns, info.margin, info.packet_time_ns, info.held_back_rounds
            );
            v.push((line, r));
        }
        v
    }
}

/// An estimate with its interval: `+1.23 [+0.50, +2.00]`.
fn ci(e: Estimate) -> String {
    format!("{:+.2} [{:+.2}, {:+.2}]", e.value, e.lo, e.hi)
}

/// One run's figures per message size.
pub fn table(r: &Overhead) -> Table {
    let mut t = Table::new(
        "overhead",
        "Rate-control overhead",
        [
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
        ],
    );
    for p in &r.points {
        t.push([
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
    t
}

/// The lines under a run's table: the method, the thesis's two figures averaged over
/// sizes, and the agents' CPU; `spin_us` is the agents' idle poll, `secs` the
/// benchmark's wall time.
pub fn summary(r: &Overhead, spin_us: u64, secs: f64) -> String {
    let per_mode = r.points.first().map_or(0, |p| p.round_trips_per_mode);
    format!(
        "Same two agents, scheduler switched between blocks (off: {}): {} ABBA quads per \
         size, {} round trips per block ({per_mode} per size and mode pooled), idle spin {} \
         us, {} s. 95 % intervals: bootstrap over quads, {} resamples, seed {}.\n\
         Averaged over sizes: latency overhead {} %, bandwidth loss {} % (worst size {:+.2} \
         %); figures paired within quads. Cross-check, ratio of pooled median round trips: \
         {} %.\n\
         Agent CPU added by rate control per message (both agents): ping-pong {} ns = {} % \
         of the one-way time; streaming {} ns = {} % of the time per message.",
        r.off,
        r.quads,
        r.round_trips_per_block,
        spin_us,
        secs.round(),
        r.resamples,
        r.seed,
        ci(r.latency_overhead_avg_pct),
        ci(r.bandwidth_loss_avg_pct),
        r.bandwidth_loss_worst_pct,
        ci(r.latency_overhead_pooled_avg_pct),
        ci(r.cpu_rtt_delta_avg_ns),
        ci(r.cpu_rtt_delta_avg_pct),
        ci(r.cpu_bw_delta_avg_ns),
        ci(r.cpu_bw_delta_avg_pct)
    )
}

/// The shortest time per packet of the run's streams with rate control on: size over
/// bandwidth, divided by the packets a message of that size takes.
pub fn fastest_packet(r: &Overhead, payload: usize) -> Duration {
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

/// CPU of the agents over half a second with no traffic, % of one core per agent.
fn idle_cpu_pct(h: &Harness) -> f64 {
    std::thread::sleep(std::time::Duration::from_millis(200));
    let a: u64 = h.agent_cpu_ns().iter().sum();
    let t = Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let b: u64 = h.agent_cpu_ns().iter().sum();
    100.0 * (b - a) as f64 / 1e9 / t.elapsed().as_secs_f64() / h.nodes.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            plan: Plan {
                sizes: vec![4, 65536],
                quads: 2,
                round_trips: 3,
                pump_bytes: 4096,
                resamples: 10,
                seed: 1,
                off: SchedulerKind::Gm,
            },
            pacing: Pacing::Both,
            margin: 0.9,
            spin: Duration::ZERO,
            protection: Protection::default(),
            bench_seal: BenchSeal::Whole,
        }
    }

    #[test]
    fn settings_outside_their_ranges_are_refused_by_flag() {
        assert!(settings().validate().is_ok());
        type Spoil = fn(&mut Settings);
        let cases: [(&str, Spoil); 6] = [
            ("--sizes", |s| s.plan.sizes = vec![0]),
            ("--sizes", |s| s.plan.sizes = vec![(1 << 20) + 1]),
            ("--quads", |s| s.plan.quads = 0),
            ("--off", |s| s.plan.off = SchedulerKind::RateControl),
            ("--margin", |s| s.margin = 1.5),
            ("--spin-us", |s| s.spin = Duration::from_us(1001)),
        ];
        for (flag, spoil) in cases {
            let mut s = settings();
            spoil(&mut s);
            let e = s.validate().unwrap_err().to_string();
            assert!(e.starts_with(flag), "{flag}: {e}");
        }
    }
}
