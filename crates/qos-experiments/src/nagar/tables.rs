//! Nagar Tables 1 and 2 in the model: a ping-pong per control program and message size,
//! with the NICs reporting when each operation completed (Table 1, §4.1), and the
//! ping-bulk test with the best window (Table 2).

use std::collections::BTreeMap;

use qos_core::topology::NodeId;
use qos_core::units::{Bytes, Duration, Time};
use qos_sim::myrinet::nic::via::Stage;
use qos_sim::myrinet::{Api, Cluster, FlowSpec, Rate, Workload};
use qos_sim::report::check::{Check, MetricId, Mode, Published, Role, Unit};
use qos_sim::report::{Figure, Scale, Series, Style, Table};

use super::scenario::{Mode as ExpectMode, Scenario, Variant};
use super::{setup, size_label, Options, Results};

/// Long enough for any ping-pong or ping-bulk run of the tables.
const UNTIL: Duration = Duration::from_ms(10_000);

fn flow(size: Bytes, workload: Workload) -> FlowSpec {
    FlowSpec {
        name: "channel".into(),
        src: NodeId(0),
        dst: NodeId(1),
        message: size,
        rate: Rate::Idt(Duration::ZERO),
        workload,
        api: Api::Gm,
        start: Time::ZERO,
        stop: None,
    }
}

fn results(s: &Scenario) -> Results {
    Results {
        name: s.name.clone(),
        title: s.title.clone(),
        figure: s.figure.clone(),
        checks: Vec::new(),
        figures: Vec::new(),
        tables: Vec::new(),
        events: 0,
    }
}

/// Per (variant, metric): one value per size.
type Measured = BTreeMap<(Variant, String), Vec<f64>>;

/// Checks every `[[row]]` against `measured` (10 % bar).
fn row_checks(s: &Scenario, measured: &Measured, out: &mut Results) {
    for r in &s.row {
        let m = r.metric.get_ref();
        let Some(values) = measured.get(&(r.firmware, m.clone())) else {
            continue;
        };
        for (k, size) in s.sizes.iter().enumerate() {
            let id = MetricId::new(&s.name, m.as_str())
                .flow(r.firmware.name())
                .at(size_label(*size));
            let c = match r.published.get_ref().get(k) {
                Some(&p) => Check::new(
                    id,
                    Unit::Us,
                    r.role.unwrap_or(Role::Prediction),
                    Mode::Within(Unit::Us.bar()),
                    Published {
                        value: p,
                        source: r.source.clone(),
                    },
                    values[k],
                ),
                None => Check::info(id, Unit::Us, values[k]),
            };
            out.checks.push(match &r.note {
                Some(n) if !c.ok || c.published.is_none() => c.with_note(n.clone()),
                _ => c,
            });
        }
    }
}

/// The paper's layout: one row per metric, "model (paper)" per program and size.
fn paper_table(s: &Scenario, measured: &Measured, id: &str, title: &str) -> Table {
    let variants = s.variants();
    let mut cols = vec!["operation".to_string()];
    for v in &variants {
        for z in &s.sizes {
            cols.push(format!("{} {}", v.name(), size_label(*z)));
        }
    }
    let mut t = Table::new(id, title, cols);
    let mut metrics: Vec<String> = Vec::new();
    for r in &s.row {
        if !metrics.contains(r.metric.get_ref()) {
            metrics.push(r.metric.get_ref().clone());
        }
    }
    for m in metrics {
        let mut row = vec![m.clone()];
        for v in &variants {
            let published = s
                .row
                .iter()
                .find(|r| r.firmware == *v && r.metric.get_ref() == &m)
                .map(|r| r.published.get_ref().clone())
                .unwrap_or_default();
            for k in 0..s.sizes.len() {
                let model = measured
                    .get(&(*v, m.clone()))
                    .and_then(|x| x.get(k))
                    .map_or("—".into(), |x| format!("{x:.1}"));
                row.push(match published.get(k) {
                    Some(p) => format!("{model} ({p})"),
                    None => format!("{model} (—)"),
                });
            }
        }
        t.push(row);
    }
    t
}

/// Table 1: ping-pong per program and size; send-side stages from the pinging NIC,
/// receive-side stages from the ponging one, 1-way latency = half the round trip.
pub fn stage_times(s: &Scenario, opt: Options) -> Results {
    let mut out = results(s);
    let iterations = if opt.quick {
        10
    } else {
        s.iterations.unwrap_or(50)
    };
    let seed = opt.seed.or(s.seed).unwrap_or(1);
    let mut measured = Measured::new();
    for v in s.variants() {
        for size in &s.sizes {
            let f = flow(*size, Workload::PingPong { iterations });
            let o = match Cluster::new(setup(v, 2, vec![f], Duration::ZERO, UNTIL, seed)) {
                Ok(c) => c.run(),
                Err(e) => panic!("a two-host ping-pong always builds: {e}"),
            };
            out.events += o.events;
            let (ping, pong) = (
                o.stages.first().cloned().flatten(),
                o.stages.get(1).cloned().flatten(),
            );
            for st in Stage::ALL {
                let side = if st <= Stage::SendStatusDone {
                    &ping
                } else {
                    &pong
                };
                let v_us = side
                    .as_ref()
                    .and_then(|x| x.mean_us(st))
                    .unwrap_or(f64::NAN);
                measured
                    .entry((v, st.name().to_string()))
                    .or_default()
                    .push(v_us);
            }
            let lat = o.flows[0].latency_us.unwrap_or(f64::NAN);
            measured.entry((v, "one-way".into())).or_default().push(lat);
        }
    }
    row_checks(s, &measured, &mut out);
    out.tables.push(paper_table(
        s,
        &measured,
        "table-1",
        "Table 1 as the model gives it: µs, model (paper)",
    ));
    out
}

/// Table 2: for each program and size, the lowest ping-bulk latency over the windows.
pub fn ping_bulk(s: &Scenario, opt: Options) -> Results {
    let mut out = results(s);
    let messages = if opt.quick {
        64
    } else {
        s.messages.unwrap_or(256)
    };
    let seed = opt.seed.or(s.seed).unwrap_or(1);
    let mut measured = Measured::new();
    let mut best_window: BTreeMap<(Variant, usize), u32> = BTreeMap::new();
    for v in s.variants() {
        for (k, size) in s.sizes.iter().enumerate() {
            let mut best = (f64::INFINITY, 0u32);
            for &w in &s.windows {
                let w = w.max(1);
                let rounds = (messages / u64::from(w)).max(1);
                let f = flow(*size, Workload::PingBulk { window: w, rounds });
                let o = match Cluster::new(setup(v, 2, vec![f], Duration::ZERO, UNTIL, seed)) {
                    Ok(c) => c.run(),
                    Err(e) => panic!("a two-host ping-bulk always builds: {e}"),
                };
                out.events += o.events;
                let lat = o.flows[0].latency_us.unwrap_or(f64::INFINITY);
                if lat < best.0 {
                    best = (lat, w);
                }
            }
            measured
                .entry((v, "latency".into()))
                .or_default()
                .push(best.0);
            best_window.insert((v, k), best.1);
        }
    }
    row_checks(s, &measured, &mut out);
    for e in &s.expect {
        let (Some(a), Some(b), Some(size)) = (e.firmware, e.to, e.size) else {
            continue;
        };
        let Some(k) = s.sizes.iter().position(|z| *z == size) else {
            continue;
        };
        let get = |v: Variant| {
            measured
                .get(&(v, "latency".into()))
                .map_or(f64::NAN, |x| x[k])
        };
        let id = MetricId::new(&s.name, "latency")
            .flow(a.name())
            .reference(b.name())
            .at(size_label(size));
        out.checks
            .push(expect_check(e, id, Unit::Ratio, get(a) / get(b)));
    }
    let mut t = paper_table(
        s,
        &measured,
        "table-2",
        "Table 2 as the model gives it: µs, model (paper)",
    );
    let mut row = vec!["best window".to_string()];
    for v in s.variants() {
        for k in 0..s.sizes.len() {
            row.push(
                best_window
                    .get(&(v, k))
                    .map_or("—".into(), |w| w.to_string()),
            );
        }
    }
    t.push(row);
    out.tables.push(t);
    if !opt.quick {
        out.tables.push(limits(s, messages, seed));
    }
    let mut fig = Figure::new(
        "table-2-ping-bulk",
        "Table 2: ping-bulk 1-way latency",
        "message size (bytes)",
        "1-way latency (µs)",
    );
    fig.x_scale = Scale::Log2;
    for v in s.variants() {
        if let Some(m) = measured.get(&(v, "latency".into())) {
            let pts = s
                .sizes
                .iter()
                .zip(m)
                .map(|(z, y)| (z.get() as f64, *y))
                .collect();
            fig.series.push(Series::new(format!("{v} (model)"), pts));
        }
        if let Some(r) = s.row.iter().find(|r| r.firmware == v) {
            let pts = s
                .sizes
                .iter()
                .zip(r.published.get_ref())
                .map(|(z, y)| (z.get() as f64, *y))
                .collect();
            fig.series
                .push(Series::new(format!("{v} (paper)"), pts).with_style(Style::Scatter));
        }
    }
    out.figures.push(fig);
    out
}

/// Table 2 taken apart ([`super::bounds`]): for each program and size, what limits
/// the value and why a miss misses. Ping-pongs of the PVIA refits: 30 round trips.
fn limits(s: &Scenario, messages: u64, seed: u64) -> Table {
    let mut cells = Vec::new();
    for v in s.variants() {
        let paper: Vec<Option<f64>> = (0..s.sizes.len())
            .map(|k| {
                s.row
                    .iter()
                    .find(|r| r.firmware == v && r.metric.get_ref() == "latency")
                    .and_then(|r| r.published.get_ref().get(k).copied())
            })
            .collect();
        // The embedded table-1 scenario always loads, so this never fails.
        if let Ok(c) = super::bounds::cells(v, &s.sizes, &paper, &s.windows, messages, 30, seed) {
            cells.extend(c);
        }
    }
    super::bounds::table(&cells)
}

/// A check of an `[[expect]]` entry.
pub(crate) fn expect_check(
    e: &super::scenario::ExpectDef,
    id: MetricId,
    unit: Unit,
    measured: f64,
) -> Check {
    let mode = match e.mode {
        ExpectMode::Within => {
            Mode::Within(e.tolerance.as_ref().map_or(unit.bar(), |t| *t.get_ref()))
        }
        ExpectMode::AtMost => Mode::AtMost,
        ExpectMode::AtLeast => Mode::AtLeast,
    };
    let c = Check::new(
        id,
        unit,
        e.role.unwrap_or(Role::Prediction),
        mode,
        Published {
            value: e.published,
            source: e.source.clone(),
        },
        measured,
    );
    match &e.note {
        Some(n) => c.with_note(n.clone()),
        None => c,
    }
}
