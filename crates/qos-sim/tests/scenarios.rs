//! The shipped thesis scenarios at reduced length: each loads, runs within the
//! published tolerances, and the same seed gives byte-identical JSON.

use qos_sim::scenario::{self, builtin, run::Options, run::Results};

fn load(name: &str) -> scenario::Scenario {
    let text = builtin::find(name).unwrap();
    scenario::load(&format!("{name}.toml"), text, |p| Err(p.to_string()))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn quick(name: &str) -> Results {
    scenario::run::execute(
        &load(name),
        Options {
            quick: true,
            seed: None,
        },
    )
}

fn assert_within(name: &str) {
    let r = quick(name);
    assert!(!r.checks.is_empty(), "{name} checks nothing");
    assert!(!r.figures.is_empty(), "{name} draws nothing");
    for c in &r.checks {
        assert!(
            c.ok,
            "{name}: {} published {} simulated {} ({:+.1} %)",
            c.metric,
            c.published,
            c.simulated,
            100.0 * c.deviation
        );
    }
}

#[test]
fn every_shipped_scenario_loads() {
    assert_eq!(builtin::names().len(), 11);
    for n in builtin::names() {
        load(n);
    }
}

#[test]
fn same_seed_gives_byte_identical_json() {
    let s = load("send-and-receive");
    let opt = Options {
        quick: true,
        seed: Some(42),
    };
    let a = serde_json::to_string(&scenario::run::execute(&s, opt)).unwrap();
    let b = serde_json::to_string(&scenario::run::execute(&s, opt)).unwrap();
    assert_eq!(a, b);
    assert!(a.contains("\"simulated\""));
}

#[test]
fn two_senders_one_node_shares_in_inverse_idt_ratio() {
    assert_within("two-senders-one-node");
}

#[test]
fn three_flows_one_node_shares_two_to_one_to_one() {
    assert_within("three-flows-one-node");
}

#[test]
fn two_sources_one_destination_shares_one_to_nine() {
    assert_within("two-sources-one-destination");
}

#[test]
fn send_and_receive_leaves_about_65_mb_s_for_outgoing_flows() {
    assert_within("send-and-receive");
}

#[test]
fn idt_sweep_is_flat_up_to_t_and_falls_as_one_over_idt() {
    assert_within("idt-sweep");
}

#[test]
fn receive_vs_send_outgoing_falls_with_incoming_rate() {
    assert_within("receive-vs-send");
    let r = quick("receive-vs-send");
    let out = &r.figures[0].series[0].points;
    // Outgoing bandwidth grows as the incoming rate falls.
    let hi_in = out
        .iter()
        .cloned()
        .fold((0.0, 0.0), |a, p| if p.0 > a.0 { p } else { a });
    let lo_in = out
        .iter()
        .cloned()
        .fold((f64::MAX, 0.0), |a, p| if p.0 < a.0 { p } else { a });
    assert!(lo_in.1 > hi_in.1);
}

#[test]
fn rate_control_overhead_is_small() {
    assert_within("overhead");
}

#[test]
fn mpi_level_is_capped_near_50_mb_s_and_still_proportional() {
    assert_within("mpi-level");
}

#[test]
fn best_effort_follows_premium_allocations() {
    assert_within("best-effort-one");
    assert_within("best-effort-two");
}

#[test]
fn network_contention_is_eased_by_rate_control() {
    assert_within("network-contention");
}
