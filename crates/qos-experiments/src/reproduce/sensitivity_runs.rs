//! End-to-end tests of `reproduce --sensitivity` on the thesis's contention scenario:
//! the verdicts over a declared range beside the checks, an end that does not load, and
//! the progress total planned before the first run.

use std::sync::Mutex;

use super::*;
use crate::assume::show;
use crate::check::{Kind, Verdict};
use crate::experiment::{Progress, Silent};
use crate::gulati::Gulati;
use crate::sensitivity::{plan, Flip};

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
