//! Checks that can fail: every ordering or bound that credits a mechanism (admission,
//! credits, power control, rate control, the WRR variant, the firmware's design) is run
//! again with that mechanism switched off, and must then miss or be not differentiated
//! — a check that passes without its mechanism is no evidence for it.
//!
//! The tests iterate the checks of every shipped scenario, so a crediting check added
//! to a scenario file is covered without touching this file. Each scenario is cut to
//! its crediting checks and the runs they read (`Experiment::crediting_only`) and run
//! quick, once as shipped and once per credited mechanism switched off
//! (`Experiment::switch_off`), with the same seed.

use qos_experiments::check::{Check, Kind, Mechanism, MetricId, Verdict};
use qos_experiments::experiment::{Experiment, RunOptions, Silent};
use qos_experiments::gulati::Gulati;
use qos_experiments::nagar::Nagar;
use qos_experiments::yum::Yum;

/// One crediting check, as shipped and with its mechanism off.
struct Row {
    experiment: String,
    label: String,
    kind: Kind,
    mechanism: Mechanism,
    on: Verdict,
    off: Option<Verdict>,
}

/// A check crediting a mechanism (values too: they are listed, not required to fail).
fn crediting(c: &Check) -> bool {
    c.mechanism.is_some() && c.kind != Kind::Shown
}

/// Whether a crediting check must fail with its mechanism off: orderings and bounds (a
/// value is a number the paper prints, which another mechanism may also reach).
fn required(kind: Kind) -> bool {
    matches!(kind, Kind::Ordering | Kind::Bound)
}

/// Every crediting check of `e`'s shipped scenarios, on and off.
fn rows<E: Experiment>(e: &E) -> Vec<Row> {
    let opt = RunOptions {
        quick: true,
        workers: 2,
        ..RunOptions::default()
    };
    let mut out = Vec::new();
    for s in e.builtin_scenarios(None).expect("shipped scenarios load") {
        let Some(cut) = e.crediting_only(&s) else {
            continue;
        };
        let name = e.name(&s).to_string();
        let start = std::time::Instant::now();
        let on = e
            .simulate(std::slice::from_ref(&cut), &opt, &Silent)
            .expect("runs");
        let on: Vec<Check> = e
            .checks(&on)
            .into_iter()
            .filter(|c| crediting(c))
            .cloned()
            .collect();
        let mut mechanisms: Vec<Mechanism> = on.iter().filter_map(|c| c.mechanism).collect();
        mechanisms.sort_by_key(|m| m.name());
        mechanisms.dedup();
        for m in mechanisms {
            let off: Vec<Check> = match e.switch_off(&cut, m) {
                Some(s) => {
                    let r = e
                        .simulate(std::slice::from_ref(&s), &opt, &Silent)
                        .expect("runs");
                    e.checks(&r).into_iter().cloned().collect()
                }
                // Nothing to switch off: every crediting check of `m` fails below.
                None => Vec::new(),
            };
            let find = |id: &MetricId, kind: Kind| {
                off.iter()
                    .find(|c| c.id == *id && c.kind == kind)
                    .map(|c| c.verdict)
            };
            eprintln!(
                "{name}: {} on and off in {:.0} s",
                m.name(),
                start.elapsed().as_secs_f64()
            );
            for c in on.iter().filter(|c| c.mechanism == Some(m)) {
                out.push(Row {
                    experiment: name.clone(),
                    label: c.label.clone(),
                    kind: c.kind,
                    mechanism: m,
                    on: c.verdict,
                    off: find(&c.id, c.kind),
                });
            }
        }
    }
    out
}

/// Prints the rows, and fails on any check that passes with its mechanism off (or that
/// the run without it no longer has).
fn require(paper: &str, rows: &[Row]) {
    let mut bad = Vec::new();
    for r in rows {
        let off = r.off.map_or("no such check", |v| v.name());
        eprintln!(
            "{paper} {} | {} | {} | {} | on: {} | off: {off}",
            r.experiment,
            r.label,
            r.kind.name(),
            r.mechanism.name(),
            r.on.name()
        );
        if required(r.kind) && !matches!(r.off, Some(Verdict::Miss | Verdict::NotDifferentiated)) {
            bad.push(format!(
                "{} {} ({}): {off} with it off",
                r.experiment,
                r.label,
                r.mechanism.name()
            ));
        }
    }
    let req: Vec<&Row> = rows.iter().filter(|r| required(r.kind)).collect();
    let passing = req.iter().filter(|r| r.on == Verdict::Pass).count();
    eprintln!(
        "{paper}: {} crediting orderings and bounds, {passing} pass as shipped (quick), {} miss or are not differentiated with their mechanism off; {} crediting values listed",
        req.len(),
        req.len() - bad.len(),
        rows.len() - req.len()
    );
    assert!(
        bad.is_empty(),
        "checks that hold without their mechanism:\n{}",
        bad.join("\n")
    );
}

#[test]
fn gulati_checks_fail_with_their_mechanism_off() {
    require("gulati", &rows(&Gulati));
}

#[test]
fn nagar_checks_fail_with_their_mechanism_off() {
    let rows = rows(&Nagar);
    assert!(rows.iter().any(|r| r.mechanism == Mechanism::Firmware));
    require("nagar", &rows);
}

#[test]
fn yum_checks_fail_with_their_mechanism_off() {
    let rows = rows(&Yum);
    for m in [
        Mechanism::Admission,
        Mechanism::Credits,
        Mechanism::PowerControl,
        Mechanism::Wrr,
        Mechanism::RateControl,
    ] {
        assert!(rows.iter().any(|r| r.mechanism == m), "{}", m.name());
    }
    require("yum", &rows);
}
