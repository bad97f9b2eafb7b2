//! Whole runs with peak power control and PowerHerd (§5 and §7.4): a 4×4 mesh
//! with the paper's 2.5 Gbit/s links and the energy model calibrated to Fig 3 (21 W at
//! 50 %), at loads that draw well above the 21 W peak without control.

use crate::iba::config::IbaConfig;
use crate::iba::run::{run, RunOutput};

/// A 4×4 mesh at 2.5 Gbit/s with the calibrated energy model, `mix` real time (ON/OFF,
/// peak-rate probes), no control traffic.
fn mesh(mix: f64, extra: &str) -> IbaConfig {
    let text = format!(
        "[network]\ntopology = {{ kind = \"mesh\", k = 4 }}\nlink = \"2.5Gbit/s\"\n[admission]\nsolicit = \"peak\"\n[power]\nhca_pj_per_flit = 128130.0\n{extra}\n[workload]\nloads = [0.8]\nmix = {mix}\nreal_time = {{ kind = \"on_off\", mean_on = \"0.2ms\", mean_off = \"0.2ms\", rate = \"100Mbit/s\" }}\ncontrol = {{ count = 0 }}\n[run]\nwarmup = \"0.3ms\"\nmeasure = \"1.2ms\"\ndrain = \"1ms\"\nbatches = 4\n"
    );
    let c: IbaConfig = toml::from_str(&text).unwrap();
    c.validate().unwrap();
    c
}

fn power(r: &RunOutput) -> (f64, f64) {
    let p = r.power.as_ref().unwrap();
    (p.mean_w, p.max_w)
}

#[test]
fn without_control_the_mesh_draws_above_the_peak_and_peak_power_control_holds_its_mean() {
    let none = run(&mesh(0.0, ""), 0.8, 1, &mut |_| {}).unwrap();
    assert!(power(&none).0 > 1.3 * 21.0, "{:?}", power(&none));
    let pc = run(
        &mesh(0.0, "[power_control]\nkind = \"credits\""),
        0.8,
        1,
        &mut |_| {},
    )
    .unwrap();
    let (mean, max) = power(&pc);
    // Best effort has the whole peak: the periods' budgets are spent and held to.
    assert!(mean <= 21.0 * 1.005 && mean > 0.95 * 21.0, "{mean}");
    assert!(max < power(&none).1, "{max}");
    assert!(pc.energy_held > 0);
    assert_eq!(pc.power_refused, 0);
}

#[test]
fn peak_power_control_refuses_real_time_connections_its_routers_cannot_power() {
    let cfg = |extra| mesh(1.0, extra);
    let none = run(&cfg(""), 0.8, 1, &mut |_| {}).unwrap();
    let pc = run(
        &cfg("[power_control]\nkind = \"credits\""),
        0.8,
        1,
        &mut |_| {},
    )
    .unwrap();
    // Peak-rate charges: every admitted connection's routers can power it while ON,
    // so even all ON at once stays under the peak.
    assert!(pc.power_refused > 0, "{pc:?}");
    assert!(pc.measures.rejected > none.measures.rejected);
    assert!(power(&pc).1 <= 21.0, "{:?}", power(&pc));
    assert!(power(&none).0 > 21.0, "{:?}", power(&none));
    // Best effort is not there: no HCA held a packet back for energy.
    assert_eq!(pc.energy_held, 0);
}

#[test]
fn powerherd_holds_every_window_under_the_peak_and_moves_budget_between_routers() {
    let ph = run(
        &mesh(0.0, "[power_control]\nkind = \"powerherd\""),
        0.8,
        1,
        &mut |_| {},
    )
    .unwrap();
    let (_, max) = power(&ph);
    // The windows are the samples' (500 cycles from cycle 0): each router's budget
    // caps its crossbar, so a sample exceeds the peak only by the flits an HCA sent
    // in one window that crossed their first crossbar in the next.
    assert!(max <= 21.0 * 1.01, "{max}");
    assert!(ph.herd_held > 0);
    assert_eq!(ph.energy_held, 0);
}

#[test]
fn power_control_without_the_energy_model_or_admission_is_refused_at_its_key() {
    let text = |extra: &str| {
        format!("[network]\ntopology = {{ kind = \"mesh\", k = 4 }}\n{extra}\n[workload]\nloads = [0.5]\nmix = 0.5\nreal_time = {{ kind = \"on_off\", mean_on = \"1ms\", mean_off = \"1ms\", rate = \"20Mbit/s\" }}\n[run]\nwarmup = \"1ms\"\nmeasure = \"1ms\"\n")
    };
    let c: IbaConfig = toml::from_str(&text("[power_control]\nkind = \"credits\"")).unwrap();
    assert_eq!(c.validate().unwrap_err().path, "power_control");
    let c: IbaConfig = toml::from_str(&text(
        "[admission]\nenabled = false\n[power]\n[power_control]\nkind = \"credits\"",
    ))
    .unwrap();
    let e = c.validate().unwrap_err();
    assert_eq!(e.path, "power_control");
    assert!(e.message.contains("admission"), "{e}");
    // PowerHerd needs no admission control.
    let c: IbaConfig = toml::from_str(&text(
        "[admission]\nenabled = false\n[power]\n[power_control]\nkind = \"powerherd\"",
    ))
    .unwrap();
    c.validate().unwrap();
}
