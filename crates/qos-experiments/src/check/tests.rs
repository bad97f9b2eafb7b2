//! Checks of each kind: how they decide, and how they are counted.

use super::*;

fn stated(v: f64) -> Published {
    Published {
        value: v,
        source: Source::Stated("§5.4.1".into()),
    }
}

#[test]
fn a_value_inside_its_tolerance_passes_and_outside_misses() {
    let id = MetricId::new("e", "bandwidth")
        .case("(2T, 2T)")
        .flow("flow 1");
    let c = Check::value(
        id.clone(),
        Unit::MbPerSec,
        Role::Prediction,
        0.10,
        stated(40.0),
        43.9,
    );
    assert_eq!(
        (c.kind, c.verdict, c.ok),
        (Kind::Value, Verdict::Pass, Some(true))
    );
    assert!((c.deviation - 0.0975).abs() < 1e-12);
    let c = Check::value(
        id,
        Unit::MbPerSec,
        Role::Prediction,
        0.10,
        stated(40.0),
        44.1,
    );
    assert_eq!((c.verdict, c.ok), (Verdict::Miss, Some(false)));
    assert_eq!(c.label, "(2T, 2T) flow 1 bandwidth");
    // A NaN never passes.
    let c = Check::value(
        MetricId::new("e", "m"),
        Unit::Us,
        Role::Prediction,
        0.1,
        stated(1.0),
        f64::NAN,
    );
    assert!(c.missed());
}

#[test]
fn kinds_and_roles_are_counted_apart_and_the_summary_line_says_so() {
    let id = MetricId::new("overhead", "latency-overhead-avg");
    let below = Check::bound(
        id.clone(),
        Unit::Percent,
        Role::Prediction,
        Bound::AtMost,
        stated(1.0),
        0.2,
    );
    let above = Check::bound(
        id,
        Unit::Percent,
        Role::Prediction,
        Bound::AtMost,
        stated(1.0),
        1.2,
    );
    let fit = Check::value(
        MetricId::new("idt-sweep", "bmax"),
        Unit::MbPerSec,
        Role::Fit,
        0.10,
        stated(81.8),
        81.0,
    );
    let identity = Check::value(
        MetricId::new("s", "ratio"),
        Unit::Ratio,
        Role::Identity,
        0.03,
        stated(1.0),
        1.0,
    );
    let tie = Check::ordering(
        MetricId::new("s", "latency"),
        Role::Prediction,
        Order::Lower,
        Source::Stated("§7.2".into()),
        1.0,
        Comparison::new(5.0, 5.0).with_intervals(Some(0.1), Some(0.1)),
    );
    let shown = Check::shown(MetricId::new("x", "y"), Unit::Number, 3.0);
    let s = Summary::of([&below, &above, &fit, &identity, &tie, &shown]);
    assert_eq!(
        s,
        Summary {
            checks: 5,
            values: 2,
            bounds: 2,
            orderings: 1,
            shown: 1,
            predictions: 3,
            fits: 1,
            identities: 1,
            misses: 1,
            not_differentiated: 1,
        }
    );
    assert_eq!(
        s.to_string(),
        "5 checks (2 values, 2 bounds, 1 ordering) and 1 shown; 3 predictions, 1 fit, 1 identity; 1 miss, 1 not differentiated"
    );
    assert_eq!(tie.verdict, Verdict::NotDifferentiated);
    assert_eq!((tie.ok, tie.differentiated), (None, Some(false)));
    assert_eq!(shown.ok, None);
}

#[test]
fn the_json_keeps_its_keys_and_adds_kind_and_differentiated() {
    let c = Check::ordering(
        MetricId::new("fig5", "dmt").case("No A").reference("A"),
        Role::Prediction,
        Order::Higher,
        Source::Stated("§7.3".into()),
        1.5,
        Comparison::new(0.015, 0.010).with_intervals(Some(0.001), Some(0.001)),
    )
    .crediting(Mechanism::Admission)
    .with_refusals(Refusals {
        refused: 0.3,
        admitted_load: 0.55,
    });
    let v = serde_json::to_value(&c).unwrap();
    for key in [
        "id",
        "label",
        "unit",
        "kind",
        "role",
        "mode",
        "published",
        "measured",
        "deviation",
        "ok",
        "verdict",
        "differentiated",
        "comparison",
        "mechanism",
        "refusals",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    assert_eq!(v["id"]["experiment"], "fig5");
    assert_eq!(v["published"]["value"], 1.0);
    assert_eq!(v["published"]["source"]["stated"], "§7.3");
    assert_eq!(v["kind"], "ordering");
    assert_eq!(v["mode"], "at-least");
    assert_eq!(v["differentiated"], true);
    assert_eq!(v["ok"], true);
    assert_eq!(v["verdict"], "pass");
    assert_eq!(v["refusals"]["refused"], 0.3);
    let back: Check = serde_json::from_value(v).unwrap();
    assert_eq!(back, c);
}

#[test]
fn tolerances_above_the_bar_are_refused() {
    assert!(check_tolerance(Unit::Ratio, 0.03).is_ok());
    assert!(check_tolerance(Unit::Ratio, 0.05).is_err());
    assert!(check_tolerance(Unit::MbPerSec, 0.10).is_ok());
    assert!(check_tolerance(Unit::MbPerSec, 0.15).is_err());
    assert!(check_tolerance(Unit::MbPerSec, f64::NAN).is_err());
    assert!(check_tolerance(Unit::MbPerSec, -0.01).is_err());
}

#[test]
#[should_panic(expected = "above the acceptance bar")]
fn a_loose_check_cannot_be_built() {
    Check::value(
        MetricId::new("e", "m"),
        Unit::MbPerSec,
        Role::Prediction,
        0.25,
        stated(18.0),
        21.6,
    );
}

#[test]
fn metric_ids_match_by_value_not_by_label() {
    let a = MetricId::new("e", "ratio")
        .case("(2T, 4T, 4T)")
        .flow("flow 2")
        .reference("flow 1");
    let b = MetricId::new("e", "ratio")
        .case("(2T, 4T, 4T)")
        .flow("flow 2")
        .reference("flow 1");
    assert_eq!(a, b);
    assert_ne!(a, b.clone().reference("flow 3"));
    assert_eq!(a.to_string(), "(2T, 4T, 4T) ratio flow 2/flow 1");
    let w = MetricId::new("e", "rate")
        .flow("best-effort")
        .window("25ms-39ms");
    assert_eq!(w.to_string(), "rate of best-effort in 25ms-39ms");
}
