//! Yum et al.'s mechanisms switched off, for the tests that watch every check crediting
//! one fail without it (DESIGN.md, "experiments"; `tests/mechanism_off.rs`): admission
//! control disabled, credit-based congestion control (CQ layouts included) and Gulati's
//! source rate control replaced by none, the credit-based peak power control removed
//! (PowerHerd, the paper's rival, stays), and every case given the scenario's own WRR
//! variant — in each case that has the mechanism, everything else as it was. And a
//! scenario cut to the runs its crediting checks read.

use qos_sim::iba::congestion::CongestionSpec;
use qos_sim::iba::power::PowerControlSpec;

use super::scenario::Scenario;
use crate::check::Mechanism;

/// `s` with `m` switched off in every case that has it; None when no case has it.
pub fn switch_off(s: &Scenario, m: Mechanism) -> Option<Scenario> {
    let mut out = s.clone();
    let own = s.file.arbitration;
    let mut changed = false;
    for (_, c) in &mut out.cases {
        let before = (
            c.admission.enabled,
            c.congestion,
            c.power_control,
            c.arbitration,
        );
        match m {
            Mechanism::Admission => c.admission.enabled = false,
            Mechanism::Credits if matches!(c.congestion, CongestionSpec::Credits { .. }) => {
                c.congestion = CongestionSpec::None
            }
            Mechanism::RateControl if matches!(c.congestion, CongestionSpec::SourceRate(_)) => {
                c.congestion = CongestionSpec::None
            }
            Mechanism::PowerControl
                if matches!(c.power_control, Some(PowerControlSpec::Credits { .. })) =>
            {
                c.power_control = None
            }
            Mechanism::Wrr => c.arbitration = own,
            _ => {}
        }
        changed |= before
            != (
                c.admission.enabled,
                c.congestion,
                c.power_control,
                c.arbitration,
            );
    }
    changed.then_some(out)
}

/// `s` cut to what its checks crediting a mechanism read: those checks only, the cases
/// they compare (and the first, which a check naming none reads, and the cases whose
/// admitted connections a kept case is fed) and their loads.
/// None when no check of `s` credits a mechanism.
pub fn crediting_only(s: &Scenario) -> Option<Scenario> {
    let mut out = s.clone();
    out.file.expect.retain(|e| e.mechanism.is_some());
    if out.file.expect.is_empty() {
        return None;
    }
    let first = s.cases.first().map(|(l, _)| l.clone()).unwrap_or_default();
    let mut cases: Vec<String> = Vec::new();
    let mut loads: Vec<f64> = Vec::new();
    for e in &out.file.expect {
        let case = e
            .case
            .as_ref()
            .map_or(first.clone(), |c| c.get_ref().clone());
        cases.push(case);
        cases.extend(e.vs_case.as_ref().map(|c| c.get_ref().clone()));
        loads.extend(e.load.as_ref().map(|l| *l.get_ref()));
        loads.extend(e.vs_load.as_ref().map(|l| *l.get_ref()));
    }
    let keep_load = |l: &f64| loads.iter().any(|x| (x - l).abs() < 1e-9);
    out.file.workload.loads.retain(keep_load);
    // A kept case fed the connections another case admitted keeps that case too, and
    // the references are renumbered.
    let mut keep: Vec<bool> = s
        .cases
        .iter()
        .map(|(l, _)| l == &first || cases.contains(l))
        .collect();
    for i in (0..s.cases.len()).rev() {
        if let (true, Some(j)) = (keep[i], s.streams_of[i]) {
            keep[j] = true;
        }
    }
    let index: Vec<usize> = keep
        .iter()
        .scan(0, |n, &k| {
            let i = *n;
            *n += usize::from(k);
            Some(i)
        })
        .collect();
    let mut kept = keep.iter();
    out.cases.retain(|_| *kept.next().unwrap_or(&false));
    out.streams_of = s
        .streams_of
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(f, _)| f.map(|j| index[j]))
        .collect();
    for (_, c) in &mut out.cases {
        c.workload.loads.retain(keep_load);
    }
    out.file.power_trace = out.file.power_trace.filter(keep_load);
    Some(out)
}
