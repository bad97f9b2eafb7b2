//! Tests of the sensitivity runs: verdicts matched across runs, flips named, the
//! report's tables, and every shipped assumption loadable at every end of its range.

use super::*;
use crate::check::{Comparison, Order, Published, Role, Source as Cited, Unit};
use crate::experiment::Silent;
use crate::gulati::Gulati;
use crate::reproduce::{run_experiment, Job};

fn value(exp: &str, metric: &str, measured: f64) -> Check {
    Check::value(
        MetricId::new(exp, metric),
        Unit::MbPerSec,
        Role::Prediction,
        0.1,
        Published {
            value: 40.0,
            source: Cited::Stated("§1".into()),
        },
        measured,
    )
}

fn ordering(exp: &str, a: f64, b: f64) -> Check {
    Check::ordering(
        MetricId::new(exp, "b-over-a"),
        Role::Prediction,
        Order::Lower,
        Cited::Stated("§2".into()),
        a / b,
        Comparison::new(a, b).with_margin(Some(4.0)),
    )
}

fn declared(exp: &str, name: &str) -> Declared {
    let text = format!(
        "v = {{ assumption = \"{name}\" }}\n[[assumption]]\nname = \"{name}\"\nvalue = 2\nrange = [1, 3]\nwhy = \"w\"\nquote = \"q\"\ncite = \"c\"\n"
    );
    Declared {
        experiment: exp.into(),
        file: "x.toml".into(),
        assumption: assume::declared("x.toml", &text).unwrap().remove(0),
    }
}

fn trial(exp: &str, value: i64, checks: Vec<Check>) -> Trial {
    Trial {
        experiment: exp.into(),
        assumption: "m".into(),
        value: toml::Value::Integer(value),
        summary: Summary::of(&checks),
        checks,
    }
}

#[test]
fn a_verdict_that_changes_at_an_end_is_named_with_the_assumption_and_value() {
    let main = [
        value("e", "bandwidth", 41.0),
        ordering("e", 20.0, 40.0),
        value("f", "bandwidth", 41.0),
        Check::shown(MetricId::new("e", "shown"), Unit::Us, 3.0),
    ];
    let main: Vec<&Check> = main.iter().collect();
    let trials = [
        // Margin 4 → the ordering still passes; at a larger one it would not.
        trial(
            "e",
            1,
            vec![value("e", "bandwidth", 43.0), ordering("e", 38.0, 40.0)],
        ),
        // The run lost its value check.
        trial("e", 3, vec![ordering("e", 20.0, 40.0)]),
    ];
    let r = compare(&main, &[declared("e", "m")], &trials);
    assert_eq!(r.len(), 3, "shown values claim nothing");
    let bw = &r[0];
    assert_eq!((bw.trials, bw.holds), (2, Some(false)));
    assert_eq!(bw.flips.len(), 1);
    assert_eq!(bw.flips[0].text(), "m = 3: no such check");
    assert_eq!((bw.low, bw.high), (41.0, 43.0));
    let ord = &r[1];
    assert_eq!(ord.holds, Some(false));
    assert_eq!(ord.flips[0].text(), "m = 1: not differentiated");
    assert_eq!(ord.flips[0].verdict, Some(Verdict::NotDifferentiated));
    let f = &r[2];
    assert_eq!((f.trials, f.holds), (0, None));
    // Checks with the same id are matched in order.
    let twice = [value("e", "bandwidth", 41.0), value("e", "bandwidth", 50.0)];
    let main: Vec<&Check> = twice.iter().collect();
    let t = [trial("e", 1, twice.to_vec())];
    let r = compare(&main, &[declared("e", "m")], &t);
    assert_eq!(
        r.iter().map(|c| c.holds).collect::<Vec<_>>(),
        [Some(true), Some(true)]
    );
}

#[test]
fn the_counts_read_as_a_sentence() {
    let c = Counts {
        assumptions: 1,
        trials: 2,
        tested: 3,
        held: 2,
        flipped: 1,
        untested: 4,
    };
    assert_eq!(
        c.to_string(),
        "sensitivity: 1 assumption, 2 runs; 2 of 3 checks hold over every range, 1 flips; 4 in scenarios that declare none"
    );
}

/// The shipped contention scenario with the range of its margin widened to `range`.
fn contention(range: &str) -> crate::experiment::Source {
    let text = crate::gulati::builtin::find("network-contention")
        .unwrap()
        .replace("range = [2.0, 8.0]", range);
    crate::experiment::Source {
        file: "nc.toml".into(),
        text,
        embedded: true,
    }
}

#[test]
fn a_sensitivity_run_reports_each_verdict_over_the_range_beside_the_checks() {
    // B gets ~34 MB/s less than A (quick run): a margin of 40 MB/s cannot tell them apart.
    let src = contention("range = [2.0, 40.0]");
    let scenarios = Gulati.load_sources(std::slice::from_ref(&src)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opt = RunOptions {
        quick: true,
        workers: 2,
        ..RunOptions::default()
    };
    let job = Job {
        scenarios: &scenarios,
        sources: std::slice::from_ref(&src),
        sensitivity: true,
    };
    let o = run_experiment(&Gulati, &job, &opt, dir.path(), "t", &Silent).unwrap();
    let s = o.sensitivity.as_ref().unwrap();
    assert_eq!((s.counts.assumptions, s.counts.trials), (1, 2));
    let values: Vec<String> = s.trials.iter().map(|t| show(&t.value)).collect();
    assert_eq!(values, ["2.0", "40.0"]);
    let ord = s.checks.iter().find(|c| c.kind == Kind::Ordering).unwrap();
    assert_eq!(ord.verdict, Verdict::Pass);
    assert_eq!(ord.holds, Some(false));
    assert_eq!(
        ord.flips.iter().map(Flip::text).collect::<Vec<_>>(),
        ["b-vs-a-margin = 40.0: not differentiated"]
    );
    assert_eq!(s.counts.flipped, 1);
    assert_eq!(s.counts.held, s.counts.tested - 1);
    // The JSON and the report carry it, the tables beside the checks.
    assert_eq!(o.json["sensitivity"]["counts"]["flipped"], 1);
    assert_eq!(o.json["assumptions"][0]["name"], "b-vs-a-margin");
    assert_eq!(o.json["assumptions"][0]["experiment"], "network-contention");
    let html = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
    let pos = |id: &str| html.find(&format!("<h2 id=\"{id}\">")).unwrap();
    assert!(pos("checks") < pos("sensitivity") && pos("sensitivity") < pos("assumptions"));
    assert!(html.contains("b-vs-a-margin = 40.0: not differentiated"));
    let problems = crate::report::audit::audit(dir.path());
    assert!(problems.is_empty(), "{problems:#?}");
    // The same runs on one thread give the same verdicts and values.
    let one = RunOptions { workers: 1, ..opt };
    let d1 = tempfile::tempdir().unwrap();
    let o1 = run_experiment(&Gulati, &job, &one, d1.path(), "t", &Silent).unwrap();
    assert_eq!(o1.json["sensitivity"], o.json["sensitivity"]);
}

#[test]
fn an_end_that_does_not_load_is_an_error_naming_the_assumption() {
    // A negative margin is refused by the scenario's own grammar.
    let src = contention("range = [-1.0, 8.0]");
    let scenarios = Gulati.load_sources(std::slice::from_ref(&src)).unwrap();
    let e = plan(&Gulati, &scenarios, std::slice::from_ref(&src))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("nc.toml:")
            && e.contains("with assumption `b-vs-a-margin` = -1.0: margin = -1"),
        "{e}"
    );
}

/// What a progress sink heard, in order.
#[derive(Default)]
struct Heard(Mutex<Vec<String>>);

impl Progress for Heard {
    fn plan(&self, total: u64) {
        self.0.lock().unwrap().push(format!("plan {total}"));
    }
    fn done(&self, what: &str) {
        self.0.lock().unwrap().push(format!("done {what}"));
    }
}

#[test]
fn the_progress_total_of_every_run_is_planned_before_the_first() {
    let src = contention("range = [2.0, 40.0]");
    let scenarios = Gulati.load_sources(std::slice::from_ref(&src)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opt = RunOptions {
        quick: true,
        workers: 1,
        ..RunOptions::default()
    };
    let job = Job {
        scenarios: &scenarios,
        sources: std::slice::from_ref(&src),
        sensitivity: true,
    };
    let heard = Heard::default();
    run_experiment(&Gulati, &job, &opt, dir.path(), "t", &heard).unwrap();
    let heard = heard.0.into_inner().unwrap();
    // The main run and one trial at each end of the margin's range: three units,
    // planned once, first.
    assert_eq!(heard[0], "plan 3", "{heard:?}");
    assert_eq!(heard.iter().filter(|h| h.starts_with("plan")).count(), 1);
    assert_eq!(heard.iter().filter(|h| h.starts_with("done")).count(), 3);
    assert_eq!(
        heard.last().map(String::as_str),
        Some("done b-vs-a-margin = 40.0: network-contention")
    );
}
