//! `reproduce nagar --real`: the CBR-class experiment of Nagar et al. §4.1 (Figs 3–4)
//! on real traffic: one sending host and three receiving
//! hosts of the namespace testbed (`qos_runtime::testbed`), three classes of CBR
//! channels whose rates are 1 : 2 : 3, one receiver per class, 1 to 5 channels per
//! class — and, beyond the paper, more channels per class until the sender's link is
//! nearly full, where the paper expected the differences to show (§4.1), and the same
//! classes beside a greedy best-effort channel to a fifth host (the BE channel of Fig
//! 5). Each load runs under every packet scheduler of the comparison ([`DISCIPLINES`]),
//! in the agents' own data planes; θ and the fraction of messages with jitter of each
//! class come from the receiving applications' receipt times (qos-core's
//! `stream_metrics`).
//!
//! Scaling: the paper's card sends at Myrinet's 160 MB/s link rate; here a class of
//! X MB/s sends X/160 of the sender's measured Bmax (its payload rate on the shaped
//! link), with 3-packet messages (~4 KB, the size the simulated reproduction assumes).
//! Rates and message transfer times then both shrink by the same factor, so every time
//! of the experiment is the paper's stretched by 160 MB/s / Bmax (16x at 80 Mbit/s).
//!
//! Split: [`cbr`] the workload on the ports, [`checks`] the comparisons with the paper,
//! `report` the results, table, figures and notes, this file the sweep. The testbed is
//! removed on exit, on error and on Ctrl-C.

pub mod cbr;
pub mod checks;
pub mod params;
pub mod replicates;
mod report;
pub mod results;

pub use params::{
    Discipline, BEST_EFFORT_CHANNELS, BEYOND_CHANNELS, BE_PACKETS_PER_MESSAGE, CLASSES_MB_S,
    CLASS_NAMES, DISCIPLINES, PACKETS_PER_MESSAGE, PAPER_CHANNELS, PAPER_LINK_MB_S, QUICK_CHANNELS,
    RT_PRIORITY,
};
pub use report::{report, results_table, RealResults, TITLE};
pub use results::{ClassResult, Point, Run};

use std::time::Instant;

use anyhow::{bail, Context};
use qos_core::admission::idt_for;
use qos_core::sched::SchedulerKind;
use qos_core::source::Located;
use qos_core::stream_metrics::Jitter;
use qos_core::topology::RateParams;
use qos_core::units::{Bandwidth, Duration};
use qos_runtime::dataplane::engine::wire_bytes;
use qos_runtime::dataplane::harness::{self, Harness, HarnessOptions, NodeSite};
use qos_runtime::dataplane::service::IdtRow;
use qos_runtime::testbed::{self, TestbedSpec, TestbedState};
use qos_sim::engine::SimRng;

use crate::check::{Check, Summary};
use crate::experiment::{Experiment, Model, Progress, ReadFile, RunOptions};
use crate::gulati::real::{check_interrupt, interrupted, step, Cleanup, Placement};
use crate::report::{Report, Table};
use crate::Error;

/// UDP port of the experiment's data planes.
const DATA_PORT: u16 = 7610;

/// Runs the calling thread, and every thread it starts while this lives, at real-time
/// priority (threads inherit the policy): the paper assumes a QoS-aware OS scheduler
/// under its workload generator (§4), and on a shared machine the time-sharing
/// scheduler's delays (tens of ms) would otherwise swamp the packet schedulers'. The
/// kernel's real-time throttling still leaves 5 % of every second to other tasks.
/// Dropping it returns the thread to the normal policy.
struct Realtime {
    on: bool,
}

impl Realtime {
    fn enter() -> Realtime {
        let p = libc::sched_param {
            sched_priority: RT_PRIORITY,
        };
        // SAFETY: plain system call on the calling thread with a valid parameter.
        let on = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0;
        Realtime { on }
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        if self.on {
            let p = libc::sched_param { sched_priority: 0 };
            // SAFETY: as in `enter`.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
        }
    }
}

/// Figs 3-4 on a testbed (needs root), under every packet scheduler.
#[derive(Debug, Clone)]
pub struct NagarReal {
    /// Where the testbed goes and how fast its links are.
    pub place: Placement,
    /// Instead of the sweep: VirtualClock against fcfs over seeds and run lengths.
    pub replicates: Option<replicates::Plan>,
}

impl Experiment for NagarReal {
    type Scenario = super::Scenario;
    type Output = RealResults;

    fn model(&self) -> Model {
        Model::Nagar
    }
    fn title(&self) -> String {
        TITLE.into()
    }
    fn builtin(&self) -> Vec<(&'static str, &'static str)> {
        super::scenario::BUILTIN
            .iter()
            .filter(|(n, _)| *n == checks::EXPERIMENT)
            .copied()
            .collect()
    }
    fn load(
        &self,
        file: &str,
        text: &str,
        _read: &ReadFile<'_>,
    ) -> Result<super::Scenario, Located> {
        super::scenario::load(file, text)
    }
    fn name<'a>(&self, s: &'a super::Scenario) -> &'a str {
        &s.name
    }
    /// It reports no progress (one run on real hosts).
    fn units(&self, _scenarios: &[Self::Scenario], _opt: &RunOptions) -> u64 {
        0
    }

    fn simulate(
        &self,
        _scenarios: &[super::Scenario],
        opt: &RunOptions,
        _progress: &dyn Progress,
    ) -> Result<RealResults, Error> {
        run(RealOptions {
            place: self.place.clone(),
            quick: opt.quick,
            seed: opt.seed_for(None),
            replicates: self.replicates.clone(),
        })
    }
    fn checks<'a>(&self, out: &'a RealResults) -> Vec<&'a Check> {
        out.checks.iter().collect()
    }
    fn report(&self, out: &RealResults, title: &str) -> Report {
        report(out, title)
    }
    fn printed(&self, out: &RealResults) -> Vec<Table> {
        if out.separations.is_empty() {
            vec![results_table(out)]
        } else {
            vec![replicates::table(&out.separations)]
        }
    }
}

/// Options of a real run.
#[derive(Debug, Clone)]
pub struct RealOptions {
    /// Where the testbed goes and how fast its links are.
    pub place: Placement,
    /// Fewer loads, shorter runs.
    pub quick: bool,
    /// Seed of the channels' phases.
    pub seed: u64,
    /// Instead of the sweep: VirtualClock against fcfs over seeds and run lengths.
    pub replicates: Option<replicates::Plan>,
}

/// Run length and warm-up, seconds.
fn durations(quick: bool) -> (f64, f64) {
    if quick {
        (3.0, 0.5)
    } else {
        (7.0, 1.0)
    }
}

/// The loads of a run: (channels per class, with the best-effort channel).
pub fn loads(quick: bool) -> Vec<(u32, bool)> {
    let plain: Vec<u32> = if quick {
        QUICK_CHANNELS.to_vec()
    } else {
        PAPER_CHANNELS
            .iter()
            .chain(&BEYOND_CHANNELS)
            .copied()
            .collect()
    };
    let be = if quick {
        &BEST_EFFORT_CHANNELS[BEST_EFFORT_CHANNELS.len() - 1..]
    } else {
        &BEST_EFFORT_CHANNELS[..]
    };
    plain
        .into_iter()
        .map(|k| (k, false))
        .chain(be.iter().map(|&k| (k, true)))
        .collect()
}

/// The rate of class `c` (B/s) when Bmax is `bmax` B/s.
pub fn class_rate(bmax: f64, c: usize) -> f64 {
    bmax * CLASSES_MB_S[c] / PAPER_LINK_MB_S
}

/// Everything the runs share.
struct Ctx {
    start: Instant,
    state: TestbedState,
    link_rate: Bandwidth,
    payload: usize,
    bmax: f64,
    secs: f64,
    warm: f64,
    seed: u64,
    realtime: bool,
}

/// Data planes in the testbed's hosts with `kind`, paced to the link.
fn harness(cx: &Ctx, kind: SchedulerKind) -> anyhow::Result<Harness> {
    let sites = cx
        .state
        .hosts
        .iter()
        .map(|h| NodeSite {
            name: h.name.clone(),
            addr: std::net::SocketAddr::new(h.addr.into(), DATA_PORT),
            netns: Some(h.netns.clone()),
            bound: None,
        })
        .collect();
    let opts = HarnessOptions {
        scheduler: kind,
        payload: (cx.payload > 0).then_some(cx.payload),
        link_rate: Some(cx.link_rate),
        protection: Default::default(),
        bench_seal: Default::default(),
    };
    Harness::start_with(sites, opts).context("starting data planes in the testbed's hosts")
}

fn sender_drops(cx: &Ctx) -> u64 {
    cx.state
        .hosts
        .first()
        .and_then(|h| testbed::qdisc_counters(&h.netns, "eth0").ok())
        .map_or(0, |c| c.dropped)
}

/// The channels of a load: `k` per class, phases drawn from the point's own stream
/// (the same for every discipline).
fn channels(cx: &Ctx, k: u32, message: usize) -> Vec<cbr::Channel> {
    let mut rng = SimRng::stream(cx.seed, u64::from(k));
    let mut v = Vec::new();
    for c in 0..CLASSES_MB_S.len() {
        let period = message as f64 / class_rate(cx.bmax, c);
        for _ in 0..k {
            let i = v.len() as u16;
            v.push(cbr::Channel {
                class: c,
                src_port: 100 + i,
                dst: c + 1,
                dst_port: 1000 + i,
                period,
                phase: rng.unit() * period,
            });
        }
    }
    v
}

/// Harness node of the best-effort receiver.
const BE_HOST: usize = 4;

/// One discipline at one load (with the best-effort channel if `be`).
fn run_one(cx: &Ctx, d: &Discipline, k: u32, be: bool) -> anyhow::Result<Run> {
    let message = cx.payload * PACKETS_PER_MESSAGE;
    let chans = channels(cx, k, message);
    let h = harness(cx, d.kind)?;
    let rate = RateParams {
        t: Duration::from_secs_f64(cx.payload as f64 / cx.bmax),
        bmax: Bandwidth::from_bytes_per_sec(cx.bmax.round() as u64),
    };
    let reserved: f64 = chans.iter().map(|c| class_rate(cx.bmax, c.class)).sum();
    let best_effort = be.then(|| cbr::BestEffort {
        src_port: 99,
        dst: BE_HOST,
        dst_port: 999,
        message: cx.payload * BE_PACKETS_PER_MESSAGE,
    });
    let mut rows: Vec<IdtRow> = chans
        .iter()
        .map(|c| {
            let b = Bandwidth::from_bytes_per_sec(class_rate(cx.bmax, c.class).round() as u64);
            IdtRow {
                src_port: c.src_port,
                dst_node: h.nodes[c.dst].name.clone(),
                dst_port: c.dst_port,
                priority: 0,
                idt: idt_for(rate, b),
                reserved: d.reserved.then_some(b),
            }
        })
        .collect();
    if let Some(b) = &best_effort {
        // No reservation (VirtualClock: infinite Vtick); rate control paces it at what
        // the reservations leave of Bmax, as the manager shares it (thesis §3.3).
        let left = Bandwidth::from_bytes_per_sec((cx.bmax - reserved).max(0.0) as u64);
        rows.push(IdtRow {
            src_port: b.src_port,
            dst_node: h.nodes[b.dst].name.clone(),
            dst_port: b.dst_port,
            priority: 0,
            idt: idt_for(rate, left),
            reserved: None,
        });
    }
    h.set_table(0, rows);
    // The counters travel behind the table: once they are back, it is applied.
    let before = h.engine_stats()[0];
    let drops = sender_drops(cx);
    let plan = cbr::Plan {
        channels: chans.clone(),
        message,
        secs: cx.secs,
        best_effort,
    };
    let records = cbr::run(&h, &plan, &interrupted)?;
    let after = h.engine_stats()[0];
    let drops = sender_drops(cx).saturating_sub(drops);
    drop(h);
    let mut classes = vec![(Jitter::default(), Vec::new(), 0u64); CLASSES_MB_S.len()];
    let mut late = Vec::new();
    for (c, r) in chans.iter().zip(&records.channels) {
        let j = r.jitter(cx.warm, c.period);
        let acc = &mut classes[c.class];
        acc.0.negotiated = j.negotiated;
        acc.0.merge(&j);
        acc.1.extend(r.latencies(cx.warm));
        acc.2 += r.skipped;
        late.extend(r.late.iter().map(|s| s * 1e6));
    }
    Ok(Run {
        scheduler: d.name,
        classes: classes
            .into_iter()
            .map(|(j, lat, skipped)| ClassResult {
                theta: j.fraction(),
                jittered: j.jittered_fraction(),
                messages: j.intervals,
                skipped,
                latency_ms: if lat.is_empty() {
                    f64::NAN
                } else {
                    1e3 * lat.iter().sum::<f64>() / lat.len() as f64
                },
            })
            .collect(),
        source_late_p99_us: crate::traffic::quantile(&mut late, 0.99),
        best_effort_mb_s: be.then(|| records.best_effort_rate(cx.warm, cx.secs) / 1e6),
        retransmits: after.retransmits - before.retransmits,
        link_paced: after.link_paced - before.link_paced,
        held_back: after.held_back - before.held_back,
        sender_queue_drops: drops,
    })
}

/// Runs the experiment (needs root and network namespaces). Progress goes to stderr;
/// the testbed is removed on success, on error and after Ctrl-C
/// ([`crate::gulati::real::catch_signals`]).
pub fn run(o: RealOptions) -> Result<RealResults, Error> {
    run_inner(o).map_err(Error::Real)
}

fn run_inner(o: RealOptions) -> anyhow::Result<RealResults> {
    if let Some(why) = testbed::unavailable_reason() {
        bail!("reproduce --real runs on a testbed of network namespaces and needs {why}");
    }
    let start = Instant::now();
    // The sweep's checks show the VIA model beside the testbed; a replicate study has
    // no such column.
    let sim = if o.replicates.is_none() {
        step(
            start,
            "simulating Figs 3-4 (VIA firmware model) for the simulated column",
        );
        let scenarios = super::builtin_scenarios(Some("fig-3-4"))?;
        Some(super::simulate(
            &scenarios,
            super::Options {
                quick: o.quick,
                seed: None,
            },
            &crate::experiment::Silent,
        )?)
    } else {
        None
    };
    let (prefix, dir, owned_dir) = o.place.resolve('n', "nagar");
    let spec = TestbedSpec {
        nodes: 5,
        link_rate: o.place.link_rate,
        prefix,
        subnet: [10, 77, 13],
        dir: dir.clone(),
        port_buffer: None,
    };
    step(
        start,
        &format!(
            "building the testbed: 1 sender, 3 class receivers, 1 best-effort receiver, {} links, namespaces {}-*",
            o.place.link_rate, spec.prefix
        ),
    );
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let cleanup = Cleanup { dir, owned_dir };
    let state = testbed::up(&spec)?;
    let (secs, warm) = durations(o.quick);
    let mut cx = Ctx {
        start,
        state,
        link_rate: o.place.link_rate,
        payload: 0,
        bmax: 0.0,
        secs,
        warm,
        seed: o.seed,
        realtime: false,
    };
    let result = {
        let rt = Realtime::enter();
        cx.realtime = rt.on;
        if !rt.on {
            step(
                start,
                "warning: no real-time priority (needs CAP_SYS_NICE): host scheduling noise will show as jitter",
            );
        }
        match &o.replicates {
            Some(plan) => replicate(&mut cx, plan).map(|r| (Vec::new(), r)),
            None => sweep(&mut cx, o.quick).map(|p| (p, Vec::new())),
        }
    };
    drop(cleanup);
    let (points, reps) = result?;
    step(start, "done");
    let capacity = o.place.link_rate.bytes_per_sec() as f64 * cx.payload as f64
        / wire_bytes(cx.payload) as f64;
    let checks = checks::checks(&points, sim.as_ref(), cx.bmax, capacity);
    let mut r = RealResults {
        summary: Summary::of(&checks),
        checks,
        link_rate_bytes_per_sec: o.place.link_rate.bytes_per_sec(),
        payload_capacity_bytes_per_sec: capacity,
        bmax_bytes_per_sec: cx.bmax,
        packet_payload: cx.payload,
        message_bytes: cx.payload * PACKETS_PER_MESSAGE,
        unit_bytes_per_sec: cx.bmax / PAPER_LINK_MB_S,
        measured_secs: secs - warm,
        warmup_secs: warm,
        seed: o.seed,
        realtime: cx.realtime,
        figures: report::figures(&points),
        notes: Vec::new(),
        points,
        separations: replicates::separations(&reps),
        replicates: reps,
    };
    r.notes = report::notes(&r);
    r.notes.push(report::transport_note(&r.points));
    Ok(r)
}

/// Bmax, then VirtualClock and fcfs at each load of `plan`, at each run length, with
/// each seed (the two back to back, a different one first at each seed).
fn replicate(cx: &mut Ctx, plan: &replicates::Plan) -> anyhow::Result<Vec<replicates::Replicate>> {
    measure_bmax(cx, true)?;
    let base = cx.seed;
    let pair: Vec<&Discipline> = replicates::PAIR
        .iter()
        .filter_map(|n| DISCIPLINES.iter().find(|d| d.name == *n))
        .collect();
    let mut out = Vec::new();
    for &(k, be) in &plan.loads {
        for &secs in &plan.secs {
            for s in 0..plan.seeds {
                cx.seed = base + u64::from(s);
                cx.secs = secs + cx.warm;
                let mut runs = Vec::new();
                for j in 0..pair.len() {
                    let d = pair[(s as usize + j) % pair.len()];
                    check_interrupt()?;
                    step(
                        cx.start,
                        &format!(
                            "{k} channels per class{}, {secs} s, seed {}: {}",
                            if be { " + best-effort" } else { "" },
                            cx.seed,
                            d.name
                        ),
                    );
                    runs.push(run_one(cx, d, k, be)?);
                }
                runs.sort_by_key(|r| replicates::PAIR.iter().position(|n| *n == r.scheduler));
                let mut it = runs.into_iter();
                let (Some(vc), Some(fcfs)) = (it.next(), it.next()) else {
                    bail!("the replicate pair's schedulers are not in the comparison");
                };
                out.push(replicates::Replicate {
                    channels_per_class: k,
                    best_effort: be,
                    secs,
                    seed: cx.seed,
                    runs: [vc, fcfs],
                });
            }
        }
    }
    cx.seed = base;
    Ok(out)
}

/// Measures the sender's Bmax and the packet payload into `cx`.
fn measure_bmax(cx: &mut Ctx, quick: bool) -> anyhow::Result<()> {
    step(
        cx.start,
        "measuring Bmax: one unregulated flow of ~64 KB messages h0 -> h1, paced to the link",
    );
    {
        let h = harness(cx, SchedulerKind::RateControl)?;
        cx.payload = h.payload;
        let b = harness::unregulated_bmax(&h, h.payload * 45, if quick { 30 } else { 80 })?;
        cx.bmax = b.bytes_per_sec() as f64;
    }
    if cx.bmax <= 0.0 {
        bail!("the sender moved no data: Bmax is 0");
    }
    step(
        cx.start,
        &format!(
            "Bmax {:.2} MB/s; one paper MB/s is {:.1} kB/s here; messages of {} bytes",
            cx.bmax / 1e6,
            cx.bmax / PAPER_LINK_MB_S / 1e3,
            cx.payload * PACKETS_PER_MESSAGE
        ),
    );
    Ok(())
}

/// Bmax, then every load under every discipline.
fn sweep(cx: &mut Ctx, quick: bool) -> anyhow::Result<Vec<Point>> {
    measure_bmax(cx, quick)?;
    let mut points = Vec::new();
    for (pi, (k, be)) in loads(quick).into_iter().enumerate() {
        let paper = 6.0 * f64::from(k);
        let mut runs: Vec<Option<Run>> = vec![None; DISCIPLINES.len()];
        // A different discipline goes first at each load: slow drifts of the machine's
        // load do not favour one.
        for j in 0..DISCIPLINES.len() {
            let di = (pi + j) % DISCIPLINES.len();
            check_interrupt()?;
            let d = &DISCIPLINES[di];
            step(
                cx.start,
                &format!(
                    "{k} channels per class ({paper:.0} paper MB/s, {:.0} % of Bmax){}: {}",
                    100.0 * paper / PAPER_LINK_MB_S,
                    if be { " + best-effort" } else { "" },
                    d.name
                ),
            );
            runs[di] = Some(run_one(cx, d, k, be)?);
        }
        points.push(Point {
            best_effort: be,
            channels_per_class: k,
            paper_load_mb_s: paper,
            load_fraction: paper / PAPER_LINK_MB_S,
            runs: runs.into_iter().flatten().collect(),
        });
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_the_papers_fractions_of_the_card_and_loads_reach_the_link() {
        // 10 MB/s of Bmax: the 2 MB/s class is 2/160 of it.
        assert!((class_rate(10e6, 1) - 125_000.0).abs() < 1e-6);
        let full = loads(false);
        let plain: Vec<u32> = full.iter().filter(|l| !l.1).map(|l| l.0).collect();
        assert_eq!(plain, [1, 2, 3, 4, 5, 10, 15, 20, 25]);
        let be: Vec<u32> = full.iter().filter(|l| l.1).map(|l| l.0).collect();
        assert_eq!(be, [5, 25]);
        // The paper's top load is 30/160 of the card; the sweep's top stays below Bmax.
        let top = 6.0 * f64::from(plain[plain.len() - 1]) / PAPER_LINK_MB_S;
        assert!(top > 0.9 && top < 1.0, "{top}");
        assert_eq!(
            loads(true),
            [(1, false), (5, false), (25, false), (25, true)]
        );
        // fcfs is VirtualClock without reservations; the others are distinct kinds.
        let fcfs = DISCIPLINES.iter().find(|d| d.name == "fcfs").unwrap();
        assert_eq!(
            (fcfs.kind, fcfs.reserved),
            (SchedulerKind::VirtualClock, false)
        );
    }
}
