//! Best-effort flows following premium flows on real traffic (thesis §5.6, Fig 5.11 and
//! 5.12), through the whole system: applications on the testbed agents' data-plane
//! ports register best-effort flows and request and release premium ones with the
//! manager; the manager re-shares what the premium flows leave (§4.3) and pushes IDTs;
//! the agents pace the best-effort flows by their new shares. The scenario's timeline is
//! stretched (its milliseconds become tenths of seconds) to leave the manager's updates
//! a negligible part of every measuring window.

use std::time::Duration as StdDuration;

use crate::check::{Check, MetricId, Mode, Published, Role, Source, Unit};
use crate::gulati::scenario::Scenario;
use crate::report::{Figure, Series};
use qos_runtime::client::{Client, LocalFlow};
use qos_runtime::protocol::Decision;

use super::context::Ctx;
use super::direct::{host_index, message, published_fraction, PUBLISHED_BMAX};
use crate::traffic::{Stream, Traffic};

enum Event {
    Start(usize),
    Stop(usize),
}

/// Runs a timeline scenario (`best-effort-one`, `best-effort-two`).
pub fn best_effort(cx: &mut Ctx, s: &Scenario) -> anyhow::Result<()> {
    let name = s.file.name.as_str();
    let hosts = cx.state.hosts.len();
    let scale = if cx.quick { 30.0 } else { 60.0 };
    let dir = cx.state.dir.clone();
    let sock = |h: usize, what: &str| dir.join(format!("h{h}.{what}.sock"));
    let msg = message(cx);
    let mut streams = Vec::new();
    let mut flows = Vec::new();
    for f in &s.file.flow {
        let (a, b) = (
            host_index(f.from.get_ref(), hosts)?,
            host_index(f.to.get_ref(), hosts)?,
        );
        cx.next_port += 1;
        let p = cx.next_port;
        streams.push(Stream {
            src_socket: sock(a, "dp"),
            src_port: p,
            dst_socket: sock(b, "dp"),
            dst_node: format!("h{b}"),
            dst_port: p + 1000,
            message: msg,
        });
        flows.push((a, LocalFlow::new(p, &format!("h{b}"), p + 1000)));
    }
    let client = |a: usize| -> anyhow::Result<Client> {
        Client::connect(sock(a, "agent")).map_err(|e| anyhow::anyhow!("agent of h{a}: {e}"))
    };
    cx.step(&format!(
        "{name}: {} flows through the manager, timeline x{scale:.0}",
        streams.len()
    ));
    let traffic = Traffic::start(&streams)?;
    let mut events = Vec::new();
    for (i, f) in s.file.flow.iter().enumerate() {
        if f.best_effort {
            let (a, fl) = &flows[i];
            client(*a)?
                .best_effort(fl, 1)
                .map_err(|e| anyhow::anyhow!("best-effort {}: {e}", f.name))?;
        }
        let start = f.start.map_or(0.0, |d| d.as_secs_f64() * scale);
        events.push((start, Event::Start(i)));
        if let Some(stop) = f.stop {
            events.push((stop.as_secs_f64() * scale, Event::Stop(i)));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let end = s.file.duration.map_or(0.1, |d| d.as_secs_f64()) * scale;
    let mut reserved = vec![0.0; streams.len()];
    let mut result = Ok(());
    let mut next = 0;
    while traffic.now() < end {
        if super::context::interrupted() {
            result = Err(anyhow::anyhow!("interrupted"));
            break;
        }
        while next < events.len() && events[next].0 <= traffic.now() {
            let (a, fl) = &flows[match events[next].1 {
                Event::Start(i) | Event::Stop(i) => i,
            }];
            let r = match events[next].1 {
                Event::Start(i) => match s.file.flow[i].bandwidth.as_ref() {
                    Some(bw) => {
                        let want = bw.get_ref().mb_per_sec() / PUBLISHED_BMAX * cx.bmax;
                        reserved[i] = want;
                        match client(*a)?.request_bandwidth(fl, want as u64) {
                            Ok(Decision::Granted(_)) => {
                                traffic.set_active(i, true);
                                Ok(())
                            }
                            Ok(Decision::Rejected(r)) => Err(anyhow::anyhow!(
                                "{}: {want:.0} B/s refused: {}",
                                s.file.flow[i].name,
                                r.message
                            )),
                            Err(e) => Err(anyhow::anyhow!("{e}")),
                        }
                    }
                    None => {
                        traffic.set_active(i, true);
                        Ok(())
                    }
                },
                Event::Stop(i) => {
                    traffic.set_active(i, false);
                    client(*a)?
                        .release(fl)
                        .map(|_| ())
                        .map_err(|e| anyhow::anyhow!("{e}"))
                }
            };
            next += 1;
            if let Err(e) = r {
                result = Err(e);
                break;
            }
        }
        if result.is_err() {
            break;
        }
        std::thread::sleep(StdDuration::from_millis(5));
    }
    let arrivals = traffic.finish();
    // Best-effort flows leave the manager's books too (the next experiment shares anew).
    for (i, f) in s.file.flow.iter().enumerate() {
        if f.best_effort {
            let (a, fl) = &flows[i];
            if let Err(e) =
                client(*a).and_then(|mut c| c.release(fl).map_err(|e| anyhow::anyhow!("{e}")))
            {
                result = result.and(Err(e));
            }
        }
    }
    result?;
    let arrivals = arrivals?;
    let names: Vec<String> = s.file.flow.iter().map(|f| f.name.clone()).collect();
    let sim_bmax = cx.sim_bmax;
    for e in &s.file.expect {
        if e.metric() != crate::gulati::scenario::Metric::Rate {
            continue;
        }
        let Some(flow) = e.flow.as_ref().map(|f| f.get_ref().clone()) else {
            continue;
        };
        let Some(i) = names.iter().position(|n| *n == flow) else {
            continue;
        };
        let (from, until) = (e.from.unwrap_or_default(), e.until.unwrap_or_default());
        let window = format!("{from}-{until}");
        let sim_id = MetricId::new(name, "rate").flow(&flow).window(&window);
        let real = arrivals.rate(i, from.as_secs_f64() * scale, until.as_secs_f64() * scale);
        let sim = cx.sim_value(&sim_id).map(|v| v / sim_bmax);
        cx.checks.push(
            Check::new(
                MetricId::new(name, "rate / Bmax")
                    .flow(&flow)
                    .window(&window),
                Unit::Fraction,
                e.role(),
                Mode::Within(0.10),
                published_fraction(e.published_value(), &e.source),
                real / cx.bmax,
            )
            .with_simulated(sim),
        );
    }
    // Premium flows get their reservations while they run.
    for (i, f) in s.file.flow.iter().enumerate() {
        let (Some(a), Some(b)) = (f.start, f.stop) else {
            continue;
        };
        if f.bandwidth.is_none() {
            continue;
        }
        let (a, b) = (a.as_secs_f64() * scale, b.as_secs_f64() * scale);
        let real = arrivals.rate(i, a + 0.25 * (b - a), b);
        cx.checks.push(Check::new(
            MetricId::new(name, "rate / its reservation").flow(&f.name),
            Unit::Fraction,
            Role::Prediction,
            Mode::Within(0.10),
            Published {
                value: 1.0,
                source: Source::Stated("§3.3: a granted flow gets its requested bandwidth".into()),
            },
            real / reserved[i].max(1.0),
        ));
    }
    let bin = end / 50.0;
    let mut fig = Figure::new(
        format!("real-{name}"),
        format!(
            "Fig {} on the testbed: {} (time x{scale:.0})",
            s.file.figure, s.file.title
        ),
        "Time (s)",
        "Bandwidth / Bmax",
    );
    for (i, n) in names.iter().enumerate() {
        let pts = arrivals
            .series(i, bin, end)
            .into_iter()
            .map(|(t, r)| (t, r / cx.bmax))
            .collect();
        fig.series.push(Series::new(n.clone(), pts));
    }
    cx.figures.push(fig);
    Ok(())
}
