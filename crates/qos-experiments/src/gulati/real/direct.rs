//! The experiments of `reproduce gulati --real` that set IDTs directly, as the thesis's
//! firmware experiments do (§5.3–5.4): the IDT sweep (calibration), flows sharing a
//! source node, two sources sharing a destination's switch port (with rate control off
//! for comparison: the port drops packets), sending and receiving at one node; and the
//! rate-control overhead (§5.2). IDTs are the scenario files' multiples of T, applied
//! with the T measured on the testbed.

use crate::check::{Check, Mechanism, MetricId, Mode, Published, Role, Source, Unit};
use crate::gulati::scenario::{Scenario, T_TICKS};
use crate::report::{Figure, Scale, Series, Style};
use anyhow::Context;
use qos_core::units::{Bandwidth, Duration};
use qos_runtime::dataplane::harness;
use qos_runtime::dataplane::service::IdtRow;
use qos_runtime::testbed;

use super::context::Ctx;
use crate::overhead::{self, Plan};
use crate::traffic::{run_together, PingPong, Stream};

/// Queue of each switch output port on the testbed, bytes (a real switch's buffer;
/// Myrinet instead stops the senders with backpressure): above the hosts' shaper burst
/// (128 KiB), so one flow at the link rate never overruns it, and below the two
/// transport windows (2 × 128 packets) that two unregulated senders put in flight.
pub const PORT_BUFFER: u64 = 160 * 1024;

/// The thesis's Bmax (MB/s), to turn its published MB/s into fractions of Bmax: 2 ×
/// 40.91 MB/s, the two flows of the (2T, 2T) case filling the sending NIC (§5.4.1).
pub const PUBLISHED_BMAX: f64 = 81.8;

/// The fraction of Bmax the thesis's manager shared among best-effort flows: 78 / 81.8
/// (`calibration.toml` `[manager] best_effort_capacity`, fitted to §5.6).
pub const BEST_EFFORT_FRACTION: f64 = 78.0 / PUBLISHED_BMAX;

/// A published MB/s value as a fraction of the published Bmax.
pub fn published_fraction(mb_s: f64, source: &Source) -> Published {
    Published {
        value: mb_s / PUBLISHED_BMAX,
        source: Source::Derived(format!(
            "{mb_s} MB/s / Bmax 81.8 MB/s (2 x 40.91, §5.4.1); {source}"
        )),
    }
}

/// Testbed host index of a scenario node name ("n2" → host h2); the testbed has
/// `hosts` hosts, and any other name is an error.
pub fn host_index(name: &str, hosts: usize) -> anyhow::Result<usize> {
    name.strip_prefix('n')
        .and_then(|d| d.parse::<usize>().ok())
        .filter(|&i| i < hosts)
        .with_context(|| {
            format!(
                "scenario node '{name}' has no testbed host (the testbed has n0..n{})",
                hosts - 1
            )
        })
}

/// Whether every flow of a sharing scenario goes to the same node: the flows contend
/// for that node's switch port (Fig 5.7), which is also run with rate control off.
pub fn shares_a_destination(s: &Scenario) -> bool {
    let mut to = s.file.flow.iter().map(|f| f.to.get_ref());
    match to.next() {
        Some(first) => s.file.flow.len() > 1 && to.all(|t| t == first),
        None => false,
    }
}

/// Messages of whole packets only (6 packets, ~8.6 KB), so that bytes per IDT are the
/// same for every flow and the same as in the calibration.
pub fn message(cx: &Ctx) -> usize {
    cx.payload * 6
}

/// Calibrates (thesis §5.3): Bmax and T of h0 → h1; with `report`, the IDT-sweep checks.
pub fn calibrate(cx: &mut Ctx, report: bool) -> anyhow::Result<()> {
    let size = cx.payload * 45;
    let count = if cx.quick { 30 } else { 80 };
    if !report {
        // Only Bmax and T are needed: one unregulated run instead of the sweep.
        cx.step("measuring Bmax: one unregulated flow of ~64 KB messages h0 -> h1");
        let b = harness::unregulated_bmax(&cx.harness, size, count)?;
        cx.bmax = b.bytes_per_sec() as f64;
        cx.t = cx.payload as f64 / cx.bmax.max(1.0);
        cx.step(&format!(
            "Bmax {:.2} MB/s, T {:.1} us per {}-byte packet",
            cx.bmax / 1e6,
            cx.t * 1e6,
            cx.payload
        ));
        return Ok(());
    }
    cx.step("IDT sweep (thesis §5.3): one flow of ~64 KB messages h0 -> h1");
    let c = harness::calibrate(&cx.harness, size, count)?;
    cx.bmax = c.bmax.bytes_per_sec() as f64;
    cx.t = c.t.as_secs_f64();
    cx.step(&format!(
        "Bmax {:.2} MB/s, T {:.1} us per {}-byte packet",
        cx.bmax / 1e6,
        cx.t * 1e6,
        cx.payload
    ));
    cx.extra
        .insert("calibration".into(), serde_json::to_value(&c)?);
    let e = "idt-sweep";
    // The link carries the payload with our header, UDP, IP and Ethernet around it.
    let wire = qos_runtime::dataplane::engine::wire_bytes(cx.payload);
    let link = cx.state.link_rate as f64 * cx.payload as f64 / wire as f64;
    cx.checks.push(Check::new(
        MetricId::new(e, "Bmax / payload capacity of the link"),
        Unit::Fraction,
        Role::Prediction,
        Mode::Within(0.05),
        Published {
            value: 1.0,
            source: Source::Design(
                "an unregulated flow fills its shaped link (payload share of the wire)".into(),
            ),
        },
        cx.bmax / link,
    ));
    cx.checks.push(
        Check::shown(MetricId::new(e, "bmax"), Unit::MbPerSec, cx.bmax / 1e6)
            .with_simulated(Some(cx.sim_bmax)),
    );
    let knee = c.knee.as_secs_f64() / cx.t;
    let sim_knee = cx
        .sim_value(&MetricId::new(e, "knee"))
        .map(|k| k / T_TICKS as f64);
    cx.checks.push(
        Check::new(
            MetricId::new(e, "knee / T"),
            Unit::Fraction,
            Role::Prediction,
            Mode::Within(0.10),
            Published {
                value: 1.0,
                source: Source::Stated(
                    "§5.3: IDTs below T do not affect the bandwidth (the knee is at T)".into(),
                ),
            },
            knee,
        )
        .with_simulated(sim_knee),
    );
    // Above the knee, B = T·Bmax/IDT (the IDT rule of §4.3): mean of B·IDT/(T·Bmax).
    let fit = |pts: &[(f64, f64)]| {
        let v: Vec<f64> = pts
            .iter()
            .filter(|p| p.0 >= 2.0)
            .map(|p| p.0 * p.1)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let real_pts: Vec<(f64, f64)> = c
        .sweep
        .iter()
        .map(|(idt, b)| (idt.as_secs_f64() / cx.t, b.bytes_per_sec() as f64 / cx.bmax))
        .collect();
    let sim_bmax = cx.sim_bmax;
    let sim_pts: Vec<(f64, f64)> = cx
        .sim
        .results
        .iter()
        .flat_map(|r| &r.figures)
        .find(|f| f.id == "idt-sweep-idt")
        .and_then(|f| f.series.first())
        .map(|s| {
            s.points
                .iter()
                .map(|p| (p.0 / T_TICKS as f64, p.1 / sim_bmax))
                .collect()
        })
        .unwrap_or_default();
    cx.checks.push(
        Check::new(
            MetricId::new(e, "B x IDT / (T x Bmax) for IDT 2T..8T (mean)"),
            Unit::Ratio,
            Role::Prediction,
            Mode::Within(0.03),
            Published {
                value: 1.0,
                source: Source::Stated(
                    "§3.2.2, §5.3: beyond T the rate is one packet per IDT (B = T·Bmax/IDT)".into(),
                ),
            },
            fit(&real_pts).unwrap_or(0.0),
        )
        .with_simulated(fit(&sim_pts)),
    );
    let model: Vec<(f64, f64)> = (0..=80)
        .map(|k| {
            let x = k as f64 / 10.0;
            (x, if x <= 1.0 { 1.0 } else { 1.0 / x })
        })
        .collect();
    cx.figures.push(
        Figure::new(
            "real-idt-sweep",
            "Fig 5.3 on the testbed: bandwidth against IDT",
            "IDT / T",
            "Bandwidth / Bmax",
        )
        .with_series(Series::new("testbed", real_pts).with_style(Style::Scatter))
        .with_series(
            Series::new(
                "simulated (Myrinet model)",
                sim_pts.into_iter().filter(|p| p.0 <= 8.0).collect(),
            )
            .with_style(Style::Scatter),
        )
        .with_series(Series::new("min(1, T/IDT)", model).with_style(Style::Line)),
    );
    Ok(())
}

/// IDT rows of every flow sourced at `src`.
fn rows_for(src: usize, streams: &[(usize, Stream)], idts: &[f64]) -> Vec<IdtRow> {
    streams
        .iter()
        .zip(idts)
        .filter(|((s, _), _)| *s == src)
        .map(|((_, st), idt)| IdtRow {
            src_port: st.src_port,
            dst_node: st.dst_node.clone(),
            dst_port: st.dst_port,
            priority: 0,
            idt: Some(Duration::from_secs_f64(*idt)),
            reserved: None,
        })
        .collect()
}

/// Streams for a scenario's flows between harness data planes, with fresh port numbers.
fn streams(cx: &mut Ctx, s: &Scenario) -> anyhow::Result<Vec<(usize, Stream)>> {
    let hosts = cx.harness.nodes.len();
    let mut flows = Vec::new();
    for f in &s.file.flow {
        flows.push((
            host_index(f.from.get_ref(), hosts)?,
            host_index(f.to.get_ref(), hosts)?,
        ));
    }
    let msg = message(cx);
    Ok(flows
        .into_iter()
        .map(|(a, b)| {
            cx.next_port += 1;
            let p = cx.next_port;
            (
                a,
                Stream {
                    src_socket: cx.harness.sockets[a].clone(),
                    src_port: p,
                    dst_socket: cx.harness.sockets[b].clone(),
                    dst_node: cx.harness.nodes[b].name.clone(),
                    dst_port: p + 1000,
                    message: msg,
                },
            )
        })
        .collect())
}

/// Runs `streams` together with IDTs `idts` (seconds; 0 = unregulated); returns B/s each.
fn run_case(cx: &Ctx, streams: &[(usize, Stream)], idts: &[f64]) -> anyhow::Result<Vec<f64>> {
    for src in 0..cx.harness.nodes.len() {
        cx.harness.set_table(src, rows_for(src, streams, idts));
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    let (secs, warm) = if cx.quick { (2.0, 0.6) } else { (4.0, 1.0) };
    let list: Vec<Stream> = streams.iter().map(|(_, s)| s.clone()).collect();
    let r = run_together(&list, secs, warm, &super::context::interrupted)?;
    for src in 0..cx.harness.nodes.len() {
        cx.harness.set_table(src, vec![]);
    }
    Ok(r)
}

/// A sharing experiment (Fig 5.5, 5.6, 5.7, 5.8): every case of the scenario, each flow's
/// rate as a fraction of Bmax and the ratios of the flows.
pub fn sharing(cx: &mut Ctx, s: &Scenario) -> anyhow::Result<()> {
    let name = s.file.name.clone();
    let t_sim = (T_TICKS * s.calibration.clock.tick.as_ps()) as f64;
    let names: Vec<String> = s.file.flow.iter().map(|f| f.name.clone()).collect();
    let sim_bmax = cx.sim_bmax;
    let mut fig = Figure::new(
        format!("real-{name}"),
        format!("Fig {} on the testbed: {}", s.file.figure, s.file.title),
        "IDTs of the flows",
        "Bandwidth / Bmax",
    )
    .with_categories(s.file.case.iter().map(|c| c.label.clone()));
    let mut real_series = vec![Vec::new(); names.len()];
    let mut pub_series = vec![Vec::new(); names.len()];
    for (ci, case) in s.file.case.iter().enumerate() {
        cx.check_interrupt()?;
        let mult: Vec<f64> = s.case_idts[ci]
            .iter()
            .map(|d| d.as_ps() as f64 / t_sim)
            .collect();
        cx.step(&format!(
            "{name}: case {} (IDTs in T: {mult:.3?})",
            case.label
        ));
        let st = streams(cx, s)?;
        let idts: Vec<f64> = mult.iter().map(|m| m * cx.t).collect();
        let rates = run_case(cx, &st, &idts)?;
        for (i, r) in rates.iter().enumerate() {
            let real = r / cx.bmax;
            real_series[i].push(((ci + 1) as f64, real));
            let (Some(&p), Some(src)) = (case.published.get(i), &case.source) else {
                continue;
            };
            pub_series[i].push(((ci + 1) as f64, p / PUBLISHED_BMAX));
            let id = MetricId::new(&name, "bandwidth")
                .case(&case.label)
                .flow(&names[i]);
            let sim = cx.sim_value(&id).map(|v| v / sim_bmax);
            cx.checks.push(
                Check::new(
                    MetricId::new(&name, "bandwidth / Bmax")
                        .case(&case.label)
                        .flow(&names[i]),
                    Unit::Fraction,
                    case.role.unwrap_or(Role::Prediction),
                    Mode::Within(0.10),
                    published_fraction(p, src),
                    real,
                )
                .with_simulated(sim),
            );
        }
        let chosen: Vec<usize> = match &case.ratio_of {
            Some(list) => list
                .iter()
                .filter_map(|n| names.iter().position(|x| x == n.get_ref()))
                .collect(),
            None => (0..names.len()).collect(),
        };
        if let Some((&r, rest)) = chosen.split_first() {
            for &i in rest {
                let id = MetricId::new(&name, "ratio")
                    .case(&case.label)
                    .flow(&names[i])
                    .reference(&names[r]);
                let (published, note) =
                    crate::gulati::run::sharing_ratio(case, &s.case_idts[ci], &names, i, r);
                let sim = cx.sim_value(&id);
                let mut c = Check::new(
                    id,
                    Unit::Ratio,
                    Role::Prediction,
                    Mode::Within(0.03),
                    published,
                    rates[i] / rates[r].max(1e-9),
                )
                .with_simulated(sim);
                if let Some(n) = note {
                    c = c.with_note(n);
                }
                cx.checks.push(c);
            }
        }
    }
    for (i, n) in names.iter().enumerate() {
        fig.series.push(
            Series::new(format!("{n} testbed"), real_series[i].clone())
                .with_style(Style::Scatter)
                .in_group(n.clone()),
        );
        if !pub_series[i].is_empty() {
            fig.series.push(
                Series::published(format!("{n} published"), pub_series[i].clone())
                    .in_group(n.clone()),
            );
        }
    }
    cx.figures.push(fig);
    Ok(())
}

fn port_counters(cx: &Ctx, host: usize) -> anyhow::Result<testbed::QdiscCounters> {
    let sw = format!("{}-sw", cx.state.prefix);
    Ok(testbed::qdisc_counters(&sw, &format!("p{host}"))?)
}

/// Fig 5.7 (1 : 9 into one destination) with rate control, then the same two flows with
/// rate control off: the destination's switch port is overrun, drops packets, and the
/// shares are whatever the drops and retransmissions make them.
pub fn two_sources(cx: &mut Ctx, s: &Scenario) -> anyhow::Result<()> {
    let name = s.file.name.clone();
    let dst = match s.file.flow.first() {
        Some(f) => host_index(f.to.get_ref(), cx.harness.nodes.len())?,
        None => anyhow::bail!("{name}: no flows"),
    };
    let before = port_counters(cx, dst)?;
    sharing(cx, s)?;
    let with_rc = port_counters(cx, dst)?;
    cx.check_interrupt()?;
    cx.step(&format!(
        "{name}: rate control off (both flows unregulated)"
    ));
    let st = streams(cx, s)?;
    let rates = run_case(cx, &st, &vec![0.0; st.len()])?;
    let without = port_counters(cx, dst)?;
    let frac = |a: testbed::QdiscCounters, b: testbed::QdiscCounters| {
        let dropped = b.dropped.saturating_sub(a.dropped) as f64;
        let sent = b.sent_packets.saturating_sub(a.sent_packets) as f64;
        dropped / (dropped + sent).max(1.0)
    };
    let (on, off) = (frac(before, with_rc), frac(with_rc, without));
    let design = |why: &str| Published {
        value: 0.001,
        source: Source::Design(why.into()),
    };
    cx.checks.push(
        Check::new(
            MetricId::new(&name, "packets dropped at the destination's switch port")
                .case("rate control on"),
            Unit::Fraction,
            Role::Prediction,
            Mode::AtMost,
            design("regulated flows within the port's rate never overrun its queue (§3.2)"),
            on,
        )
        .crediting(Mechanism::RateControl),
    );
    cx.checks.push(
        Check::new(
            MetricId::new(&name, "packets dropped at the destination's switch port")
                .case("rate control off"),
            Unit::Fraction,
            Role::Prediction,
            Mode::AtLeast,
            design("two unregulated senders overrun one port (the contention of §2.3)"),
            off,
        )
        .crediting(Mechanism::RateControl),
    );
    let (r0, r1) = (
        rates.first().copied().unwrap_or(0.0),
        rates.get(1).copied().unwrap_or(0.0),
    );
    cx.checks.push(Check::shown(
        MetricId::new(&name, "ratio flow 2/flow 1").case("rate control off"),
        Unit::Ratio,
        r1 / r0.max(1e-9),
    ));
    cx.checks.push(Check::shown(
        MetricId::new(&name, "port utilisation (flow 1 + flow 2) / Bmax").case("rate control off"),
        Unit::Fraction,
        (r0 + r1) / cx.bmax,
    ));
    let rates = [r0, r1];
    cx.notes.push(format!(
        "Two sources, one destination (Fig 5.7): with rate control (10T, 10T/9) h2's switch port \
         dropped {:.3} % of packets; with rate control off {:.2} %, and the flows got {:.2} and \
         {:.2} MB/s (ratio {:.2}): a {} KiB port queue is overrun by two unregulated senders, and \
         the shares are set by drops and retransmission time-outs, not by anyone's request. \
         Myrinet has no drops (backpressure) but the same arbitrary shares.",
        100.0 * on,
        100.0 * off,
        rates[0] / 1e6,
        rates[1] / 1e6,
        rates[1] / rates[0].max(1e-9),
        PORT_BUFFER / 1024
    ));
    Ok(())
}

/// Starts the testbed's manager and agents (once), with the measured T and Bmax in the
/// manager's topology, for the experiments that go through the manager.
pub fn services(cx: &mut Ctx, link_rate: Bandwidth) -> anyhow::Result<()> {
    if cx.services {
        return Ok(());
    }
    cx.step("starting the manager and an agent with its data plane in every host");
    let svc = testbed::services::Services {
        exe: std::env::current_exe().context("locating the clusterqos binary")?,
        link_rate,
        t: Some(Duration::from_secs_f64(cx.t)),
        bmax: Some(Bandwidth::from_bytes_per_sec(cx.bmax.round() as u64)),
        kernel: false,
        // The thesis's manager shared 78 of 81.8 MB/s among a node's best-effort flows
        // (the calibration's fit to §5.6): the same fraction of the measured Bmax.
        best_effort: Some(Bandwidth::from_bytes_per_sec(
            (cx.bmax * BEST_EFFORT_FRACTION).round() as u64,
        )),
        schedulers: Default::default(),
    };
    cx.services = true;
    Ok(testbed::services::start(&mut cx.state, &svc)?)
}

/// Rate-control overhead (Fig 5.1, 5.2) between h0 and h1: the testbed's own data
/// planes switched between the rate-control scheduler and GM rotation in ABBA blocks
/// (the method of `bench dataplane-overhead`, at reduced size).
pub fn overhead(cx: &mut Ctx) -> anyhow::Result<()> {
    let e = "overhead";
    cx.step("overhead: the same data planes, rate control switched on and off in ABBA blocks");
    for i in 0..cx.harness.nodes.len() {
        cx.harness.set_table(i, vec![]);
    }
    let max = 64 * 1024;
    let mut pp = PingPong::open(&cx.harness.sockets[0], &cx.harness.sockets[1], max)?;
    let plan = if cx.quick {
        Plan {
            sizes: vec![4, 1024, 16384, 65536],
            quads: 2,
            round_trips: 5,
            pump_bytes: 256 << 10,
            resamples: 200,
            seed: 1,
            off: qos_core::sched::SchedulerKind::Gm,
        }
    } else {
        Plan {
            sizes: overhead::SIZES.to_vec(),
            quads: 10,
            round_trips: 20,
            pump_bytes: 512 << 10,
            resamples: 1000,
            seed: 1,
            off: qos_core::sched::SchedulerKind::Gm,
        }
    };
    let start = cx.start;
    let mut progress = |d: usize, n: usize| {
        if d.is_multiple_of(plan_step(n)) || d == n {
            super::context::step(start, &format!("overhead: {d}/{n} quads"));
        }
    };
    let r = overhead::measure(
        &cx.harness,
        &mut pp,
        &plan,
        &mut progress,
        &super::context::interrupted,
    )?;
    drop(pp);
    let stated = |what: &str| Published {
        value: 0.0,
        source: Source::Stated(format!("§5.2: {what}")),
    };
    for (metric, published, mode, real) in [
        (
            "latency-overhead-avg",
            Published {
                value: 1.0,
                ..stated("less than 1 % in latency, averaged over message sizes")
            },
            Mode::AtMost,
            r.latency_overhead_avg_pct.value,
        ),
        (
            "bandwidth-loss-avg",
            Published {
                value: 1.0,
                ..stated("average bandwidth loss less than 1 %")
            },
            Mode::AtMost,
            r.bandwidth_loss_avg_pct.value,
        ),
        (
            "bandwidth-loss-worst",
            Published {
                value: 4.5,
                ..stated("worst-case bandwidth loss 4.5 %")
            },
            Mode::Within(0.10),
            r.bandwidth_loss_worst_pct,
        ),
    ] {
        let id = MetricId::new(e, metric);
        let sim = cx.sim_value(&id);
        cx.checks.push(
            Check::new(id, Unit::Percent, Role::Prediction, mode, published, real)
                .with_simulated(sim),
        );
    }
    let ci = |x: overhead::Estimate| format!("{:+.2} % [{:+.2}, {:+.2}]", x.value, x.lo, x.hi);
    cx.notes.push(format!(
        "Overhead (Fig 5.1/5.2): the same data planes, scheduler switched between blocks, \
         {} ABBA quads per size, {} round trips per block; pooled medians, 95 % bootstrap \
         intervals over quads. Averaged over sizes: latency {}, bandwidth loss {} (worst \
         size {:+.2} %); agent CPU added per message {} of the one-way time (ping-pong), \
         {} of the time per message (streaming). Per size: details.overhead in the JSON; \
         more quads: `clusterqos bench dataplane-overhead`.",
        r.quads,
        r.round_trips_per_block,
        ci(r.latency_overhead_avg_pct),
        ci(r.bandwidth_loss_avg_pct),
        r.bandwidth_loss_worst_pct,
        ci(r.cpu_rtt_delta_avg_pct),
        ci(r.cpu_bw_delta_avg_pct),
    ));
    let pts = |f: &dyn Fn(&overhead::SizePoint) -> f64| -> Vec<(f64, f64)> {
        r.points.iter().map(|p| (p.size as f64, f(p))).collect()
    };
    cx.figures.push(
        Figure::new(
            "real-overhead-latency",
            "Fig 5.2 on the testbed: round-trip latency, rate control on and off",
            "Message size (bytes)",
            "Round-trip latency (us)",
        )
        .with_series(Series::new("rate control off", pts(&|p| p.rtt_off_us)))
        .with_series(Series::new("rate control on", pts(&|p| p.rtt_on_us)))
        .with_x_scale(Scale::Log2),
    );
    cx.figures.push(
        Figure::new(
            "real-overhead-bandwidth",
            "Fig 5.1 on the testbed: bandwidth, rate control on and off",
            "Message size (bytes)",
            "Bandwidth (MB/s)",
        )
        .with_series(Series::new("rate control off", pts(&|p| p.bw_off_mb_s)))
        .with_series(Series::new("rate control on", pts(&|p| p.bw_on_mb_s)))
        .with_x_scale(Scale::Log2),
    );
    cx.extra
        .insert("overhead".into(), serde_json::to_value(&r)?);
    Ok(())
}

fn plan_step(n: usize) -> usize {
    (n / 10).max(1)
}
