//! Nagar et al.'s firmware designs switched off, for the tests that watch every check
//! crediting one fail without it (DESIGN.md, "experiments"; `tests/mechanism_off.rs`):
//! every control program runs as SVIA (§3.1, no pipelining and no QoS-conscious
//! service), each under its own name, so that a claim "PVIA beats SVIA" or "QoSVIA
//! beats PVIA" compares two runs of the same firmware. And a scenario cut to its
//! crediting checks.

use super::scenario::{Scenario, Variant};
use crate::check::Mechanism;

/// `s` with `m` switched off; None when `s` has nothing of it to switch off.
pub fn switch_off(s: &Scenario, m: Mechanism) -> Option<Scenario> {
    match m {
        Mechanism::Firmware if s.variants().iter().any(|v| s.runs(*v) != Variant::Svia) => {
            let mut out = s.clone();
            out.runs_as = Some(Variant::Svia);
            Some(out)
        }
        _ => None,
    }
}

/// `s` with only its checks crediting a mechanism; None when it has none.
pub fn crediting_only(s: &Scenario) -> Option<Scenario> {
    let mut out = s.clone();
    out.expect.retain(|e| e.mechanism.is_some());
    (!out.expect.is_empty()).then_some(out)
}
