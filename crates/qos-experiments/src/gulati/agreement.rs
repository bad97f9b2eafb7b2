//! Thesis §5.6 two ways: the best-effort shares admission control assigns at each step
//! (`clusterqos admit examples/admit-thesis-best-effort.toml`, the same code the
//! manager service runs) against the rates the simulated, rate-controlled flows reach
//! in the same phases of Figs 5.11 and 5.12 (`best-effort-one`, `best-effort-two`).
//! Both read the best-effort capacity from the thesis cluster's topology (78 MB/s,
//! `qos_core::topology::NodeCapacity::THESIS_BEST_EFFORT`), so they can only agree if
//! the simulated manager's IDTs pace flows at their shares.

use qos_core::besteffort::Policy;
use qos_core::source::Located;
use serde::Serialize;

use super::Simulated;
use crate::admit;

/// The admission script of §5.6, embedded.
pub const SCRIPT: &str = include_str!("../../../../examples/admit-thesis-best-effort.toml");
/// The topology it names (`topologies/thesis-crossbar.toml`), embedded.
pub const TOPOLOGY: &str = include_str!("../../../../examples/topologies/thesis-crossbar.toml");

/// One phase of a §5.6 figure and the script step that leads to the same allocation.
struct Phase {
    /// Step of the script (1-based) after which the shares hold.
    step: usize,
    /// Scenario and flow in the simulation.
    scenario: &'static str,
    flow: &'static str,
    /// The same flow's name in the script.
    script_flow: &'static str,
    /// Measurement window in the simulation, ms (5 ms after the change, so that the
    /// manager's messages have arrived and the flows have settled).
    from_ms: u32,
    until_ms: u32,
    /// What the thesis says the flow got in that phase, MB/s, if it says.
    thesis: Option<f64>,
}

const fn phase(
    step: usize,
    scenario: &'static str,
    flow: &'static str,
    script_flow: &'static str,
    window: (u32, u32),
    thesis: Option<f64>,
) -> Phase {
    Phase {
        step,
        scenario,
        flow,
        script_flow,
        from_ms: window.0,
        until_ms: window.1,
        thesis,
    }
}

/// Figs 5.11 (premium 1 from 20 to 80 ms, premium 2 from 40 to 60 ms) and 5.12 (the
/// premium flow from 30 to 60 ms), phase by phase.
const PHASES: &[Phase] = &[
    phase(
        1,
        "best-effort-one",
        "best-effort",
        "be1",
        (5, 19),
        Some(81.8),
    ),
    phase(
        2,
        "best-effort-one",
        "best-effort",
        "be1",
        (25, 39),
        Some(38.0),
    ),
    phase(
        3,
        "best-effort-one",
        "best-effort",
        "be1",
        (45, 59),
        Some(18.0),
    ),
    phase(5, "best-effort-one", "best-effort", "be1", (65, 79), None),
    phase(
        6,
        "best-effort-one",
        "best-effort",
        "be1",
        (85, 99),
        Some(81.8),
    ),
    phase(
        7,
        "best-effort-two",
        "best-effort 1",
        "be1",
        (10, 29),
        Some(39.0),
    ),
    phase(
        7,
        "best-effort-two",
        "best-effort 2",
        "be2",
        (10, 29),
        Some(39.0),
    ),
    phase(
        8,
        "best-effort-two",
        "best-effort 1",
        "be1",
        (35, 59),
        Some(29.0),
    ),
    phase(
        8,
        "best-effort-two",
        "best-effort 2",
        "be2",
        (35, 59),
        Some(29.0),
    ),
    phase(9, "best-effort-two", "best-effort 1", "be1", (65, 79), None),
    phase(9, "best-effort-two", "best-effort 2", "be2", (65, 79), None),
];

/// One flow in one phase.
#[derive(Debug, Clone, Serialize)]
pub struct Agreement {
    /// Script step.
    pub step: usize,
    /// Simulated scenario and flow.
    pub scenario: String,
    pub flow: String,
    /// Simulation window, ms.
    pub window_ms: (u32, u32),
    /// The share admission control assigned, MB/s.
    pub admitted: f64,
    /// The rate the simulated flow reached, MB/s.
    pub simulated: f64,
    /// 100 · (simulated / admitted − 1).
    pub deviation_pct: f64,
    /// The thesis's value for the phase, MB/s, where it gives one.
    pub thesis: Option<f64>,
}

/// Replays the embedded script through admission control (thesis rule).
pub fn replay() -> Result<admit::Report, Located> {
    admit::replay_text(
        "examples/admit-thesis-best-effort.toml",
        SCRIPT,
        Policy::Thesis,
        |p| {
            if p == "topologies/thesis-crossbar.toml" {
                Ok((
                    "examples/topologies/thesis-crossbar.toml".into(),
                    TOPOLOGY.into(),
                ))
            } else {
                Err(format!(
                    "the embedded script names an unknown topology '{p}'"
                ))
            }
        },
    )
}

/// A flow's rate over `[from, until)` ms from its packet-dispatch timeline (packets per
/// 1000 RTC ticks, 4 KB each), MB/s; `None` when the scenario or flow did not run.
fn simulated_rate(sim: &Simulated, p: &Phase) -> Option<f64> {
    let r = sim.results.iter().find(|r| r.name == p.scenario)?;
    let fig = r.figures.iter().find(|f| f.id.ends_with("-dispatch"))?;
    let series = fig.series.iter().find(|s| s.name == p.flow)?;
    let bins: Vec<f64> = series
        .points
        .iter()
        .filter(|(ms, _)| *ms >= p.from_ms as f64 - 1e-9 && *ms < p.until_ms as f64 - 1e-9)
        .map(|&(_, c)| c)
        .collect();
    if bins.is_empty() {
        return None;
    }
    // 1000 ticks of 0.5 µs = 500 µs; 4096 B per packet.
    let per_bin = bins.iter().sum::<f64>() / bins.len() as f64;
    Some(per_bin * 4096.0 / 500e-6 / 1e6)
}

/// Every phase of Figs 5.11–5.12 that `sim` ran: the admitted share beside the
/// simulated rate. Empty when neither scenario ran.
pub fn agreement(sim: &Simulated, admitted: &admit::Report) -> Vec<Agreement> {
    PHASES
        .iter()
        .filter_map(|p| {
            let simulated = simulated_rate(sim, p)?;
            let admitted = admitted.best_effort_after(p.step, p.script_flow)?;
            Some(Agreement {
                step: p.step,
                scenario: p.scenario.into(),
                flow: p.flow.into(),
                window_ms: (p.from_ms, p.until_ms),
                admitted,
                simulated,
                deviation_pct: 100.0 * (simulated / admitted.max(1e-9) - 1.0),
                thesis: p.thesis,
            })
        })
        .collect()
}
