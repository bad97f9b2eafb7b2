//! The words a check ends in: its [`Verdict`], and the direction of an ordering
//! ([`Order`]). A leaf of the check module, so the orderings' rule ([`super::ordering`])
//! and the checks can both use them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The direction of an ordering: the checked case's value against the other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// Higher than the other ("DMT higher without admission").
    Higher,
    /// Lower than the other ("QoSVIA reduces the jitter").
    Lower,
}

/// The outcome of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The claim holds.
    Pass,
    /// The claim does not hold.
    Miss,
    /// An ordering the runs cannot tell apart: neither a pass nor a miss.
    NotDifferentiated,
    /// No claim.
    Shown,
}

impl Verdict {
    /// Its word in tables and CSV.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Miss => "miss",
            Verdict::NotDifferentiated => "not differentiated",
            Verdict::Shown => "shown",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
