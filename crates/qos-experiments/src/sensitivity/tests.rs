//! Tests of the sensitivity runs: verdicts matched across runs, flips named, the
//! report's tables, and every shipped assumption loadable at every end of its range.

use super::*;
use crate::check::{Comparison, Order, Published, Role, Source as Cited, Unit};

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
