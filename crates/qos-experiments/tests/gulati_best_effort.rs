//! Thesis §5.6: one best-effort capacity for admission control (`clusterqos admit`,
//! the manager service) and the simulator, and the simulated manager's IDTs pacing
//! flows at the shares it assigns.

use qos_experiments::experiment::{RunOptions, Silent};
use qos_experiments::gulati::{self, agreement};

fn simulate_best_effort() -> gulati::Simulated {
    let mut scenarios = gulati::builtin_scenarios(Some("best-effort-one")).unwrap();
    scenarios.extend(gulati::builtin_scenarios(Some("best-effort-two")).unwrap());
    gulati::simulate(&scenarios, &RunOptions::default(), &Silent).unwrap()
}

#[test]
fn admission_gives_the_thesis_best_effort_rates_at_every_step() {
    // Fails with a best-effort capacity of Bmax (41.8, 21.8, 40.9, 30.9 MB/s).
    let r = agreement::replay().unwrap();
    assert_eq!(r.len(), 9);
    assert_eq!(r.decision(4), Some("rejected"));
    let want = [
        (1, "be1", 81.8),
        (2, "be1", 38.0),
        (3, "be1", 18.0),
        (5, "be1", 38.0),
        (6, "be1", 81.8),
        (7, "be1", 39.0),
        (7, "be2", 39.0),
        (8, "be1", 29.0),
        (8, "be2", 29.0),
        (9, "be2", 39.0),
    ];
    for (step, flow, mb) in want {
        let got = r.best_effort_after(step, flow).unwrap();
        assert!(
            (got - mb).abs() < 0.01,
            "step {step} {flow}: {got} MB/s, want {mb}"
        );
    }
}

#[test]
fn the_simulated_best_effort_rates_agree_with_admission_within_one_percent() {
    // Fails when the simulated manager's T is the IDT sweep's knee (its IDTs then pace
    // flows ~2 % below their shares) or when the simulator shares another capacity.
    let sim = simulate_best_effort();
    let admitted = agreement::replay().unwrap();
    let rows = agreement::agreement(&sim, &admitted);
    assert_eq!(rows.len(), 11, "{rows:?}");
    for a in &rows {
        assert!(
            a.deviation_pct.abs() <= 1.0,
            "step {} {} {:?} ms: simulated {:.2} against admitted {:.2} MB/s",
            a.step,
            a.flow,
            a.window_ms,
            a.simulated,
            a.admitted
        );
        if let Some(t) = a.thesis {
            assert!((a.simulated / t - 1.0).abs() <= 0.01, "{a:?}");
        }
    }
}
