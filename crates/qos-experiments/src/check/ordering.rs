//! The rule of an ordering ("X beats Y"): it passes only when the runs tell X and Y
//! apart — their difference larger than the runs' own 95 % confidence interval of it
//! (batch means or seeded replications, as the models compute them), or than a
//! minimum margin the scenario states where the runs give no interval. Otherwise the
//! two are **not differentiated**: neither a pass nor a miss. Two cases that ran
//! identically (bit for bit) are named, so a case whose mechanism never acted cannot
//! pass as a win; so is a credited mechanism that did not act in the run that has it
//! on (credits no consumer ever waited for), whatever else differs between the runs.

use serde::{Deserialize, Serialize};

use super::verdict::{Order, Verdict};

/// The evidence of an ordering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The value of the case the claim is about.
    pub value: f64,
    /// The value it is compared with.
    pub reference: f64,
    /// Half-width of the 95 % confidence interval of `value − reference`, from the runs'
    /// own intervals (None: the runs give none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<f64>,
    /// The minimum difference the scenario states for the claim, in the values' unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    /// The two cases ran identically: which (e.g. "C and No A at load 0.8").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identical: Option<String>,
    /// The mechanism the claim credits did not act in the run that has it on: what
    /// shows it (e.g. "no consumer waited for a credit in Credit 200 at load 0.4").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<String>,
}

impl Comparison {
    /// `value` against `reference`, with neither an interval nor a margin yet.
    pub fn new(value: f64, reference: f64) -> Comparison {
        Comparison {
            value,
            reference,
            interval: None,
            margin: None,
            identical: None,
            idle: None,
        }
    }

    /// With the interval of the difference of two independent estimates whose own 95 %
    /// half-widths are `a` and `b`: √(a² + b²). Runs that share their seeds are
    /// positively correlated, so this is the wider (safer) interval.
    pub fn with_intervals(mut self, a: Option<f64>, b: Option<f64>) -> Comparison {
        // A NaN half-width (one batch or replication) is no interval.
        let a = a.filter(|h| !h.is_nan());
        let b = b.filter(|h| !h.is_nan());
        self.interval = match (a, b) {
            (Some(a), Some(b)) => Some((a * a + b * b).sqrt()),
            _ => None,
        };
        self
    }

    /// With the interval of the difference given directly.
    pub fn with_interval(mut self, h: Option<f64>) -> Comparison {
        self.interval = h;
        self
    }

    /// With a stated minimum margin.
    pub fn with_margin(mut self, m: Option<f64>) -> Comparison {
        self.margin = m;
        self
    }

    /// Naming the two cases that ran identically.
    pub fn identical(mut self, what: Option<String>) -> Comparison {
        self.identical = what;
        self
    }

    /// Naming the credited mechanism that never acted.
    pub fn idle(mut self, what: Option<String>) -> Comparison {
        self.idle = what;
        self
    }

    /// Whether the runs tell the two values apart: they differ, by more than the
    /// interval (when the runs give one) and the margin (when one is stated), and at
    /// least one of the two decides. Identical cases, a credited mechanism that never
    /// acted, equal values, a NaN or an infinite interval never do. A value beyond the sweep (infinite) is apart from
    /// any finite one.
    pub fn differentiated(&self) -> bool {
        let (a, b) = (self.value, self.reference);
        if self.identical.is_some() || self.idle.is_some() || a.is_nan() || b.is_nan() || a == b {
            return false;
        }
        if a.is_infinite() || b.is_infinite() {
            return true;
        }
        let d = (a - b).abs();
        let by_interval = self.interval.is_none_or(|h| h.is_finite() && d > h);
        let by_margin = self.margin.is_none_or(|m| d > m);
        (self.interval.is_some() || self.margin.is_some()) && by_interval && by_margin
    }

    /// What decided, for the deviation column: " (±0.0021)", " (margin 5)".
    pub fn decided_by(&self) -> String {
        if self.identical.is_some() {
            return ", identical runs".into();
        }
        if let Some(what) = &self.idle {
            return format!(", mechanism idle: {what}");
        }
        match (self.interval, self.margin) {
            (Some(h), None) => format!(" (±{})", short(h)),
            (None, Some(m)) => format!(" (margin {})", short(m)),
            (Some(h), Some(m)) => format!(" (±{}, margin {})", short(h), short(m)),
            (None, None) => String::new(),
        }
    }
}

/// Four significant digits.
fn short(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
    format!("{v:.digits$}")
}

/// The verdict of an ordering: not differentiated unless [`Comparison::differentiated`];
/// then a pass when the value lies on the claimed side, a miss when not.
pub fn verdict(order: Order, c: &Comparison) -> Verdict {
    if !c.differentiated() {
        return Verdict::NotDifferentiated;
    }
    let higher = c.value > c.reference;
    match (order, higher) {
        (Order::Higher, true) | (Order::Lower, false) => Verdict::Pass,
        _ => Verdict::Miss,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_credited_mechanism_decides_nothing() {
        let c = Comparison::new(2.0, 1.0).with_intervals(Some(0.1), Some(0.1));
        assert_eq!(verdict(Order::Higher, &c), Verdict::Pass);
        let c = c.idle(Some("no consumer waited for a credit".into()));
        assert_eq!(verdict(Order::Higher, &c), Verdict::NotDifferentiated);
        assert!(c.decided_by().contains("no consumer waited"));
    }

    #[test]
    fn an_ordering_within_its_interval_is_not_differentiated() {
        let c = Comparison::new(1.04, 1.0).with_intervals(Some(0.04), Some(0.03));
        assert!((c.interval.unwrap() - 0.05).abs() < 1e-12);
        assert!(!c.differentiated());
        assert_eq!(verdict(Order::Higher, &c), Verdict::NotDifferentiated);
        let c = Comparison::new(1.2, 1.0).with_intervals(Some(0.04), Some(0.03));
        assert_eq!(verdict(Order::Higher, &c), Verdict::Pass);
        assert_eq!(verdict(Order::Lower, &c), Verdict::Miss);
    }

    #[test]
    fn ties_identical_cases_and_undecidable_comparisons_never_pass() {
        // Equal values: no interval or margin makes them apart.
        let tie = Comparison::new(3.0, 3.0).with_margin(Some(0.0));
        assert_eq!(verdict(Order::Higher, &tie), Verdict::NotDifferentiated);
        // Identical runs, whatever the values.
        let same = Comparison::new(3.0, 2.0)
            .with_margin(Some(0.1))
            .identical(Some("A,C and A".into()));
        assert_eq!(verdict(Order::Higher, &same), Verdict::NotDifferentiated);
        // Neither an interval nor a margin: nothing decides.
        let bare = Comparison::new(3.0, 2.0);
        assert_eq!(verdict(Order::Higher, &bare), Verdict::NotDifferentiated);
        // An infinite interval (too few batches) decides nothing.
        let wide = Comparison::new(3.0, 2.0).with_interval(Some(f64::INFINITY));
        assert_eq!(verdict(Order::Higher, &wide), Verdict::NotDifferentiated);
        // A margin decides where the runs give no interval.
        let m = Comparison::new(130.0, 100.0).with_margin(Some(5.0));
        assert_eq!(verdict(Order::Higher, &m), Verdict::Pass);
        let m = Comparison::new(103.0, 100.0).with_margin(Some(5.0));
        assert_eq!(verdict(Order::Higher, &m), Verdict::NotDifferentiated);
        // Both given: both must be exceeded.
        let both = Comparison::new(110.0, 100.0)
            .with_interval(Some(12.0))
            .with_margin(Some(5.0));
        assert!(!both.differentiated());
        // A knee beyond the sweep is above any finite one.
        let inf = Comparison::new(f64::INFINITY, 100.0).with_margin(Some(5.0));
        assert_eq!(verdict(Order::Higher, &inf), Verdict::Pass);
        let nan = Comparison::new(f64::NAN, 100.0).with_margin(Some(5.0));
        assert_eq!(verdict(Order::Higher, &nan), Verdict::NotDifferentiated);
    }

    #[test]
    fn the_deviation_column_says_what_decided() {
        let c = Comparison::new(2.0, 1.0).with_interval(Some(0.0123456));
        assert_eq!(c.decided_by(), " (±0.01235)");
        let c = Comparison::new(2.0, 1.0).with_margin(Some(5.0));
        assert_eq!(c.decided_by(), " (margin 5.000)");
    }
}
