//! Typed checks: one measured value (simulated or real) against a published one, shared
//! by every reproduction (`reproduce gulati`, `--real`, and the papers to come).
//!
//! A check says what it compares ([`MetricId`], matched by value, never by label text),
//! in which [`Unit`], how ([`Mode`]: a two-sided tolerance, or a bound the paper
//! states), whether the model was tuned to it ([`Role::Fit`]) or predicts it
//! ([`Role::Prediction`]), and where the published value comes from ([`Source`]: stated
//! in the text, read off a figure, or derived — with the derivation). Tolerances may
//! not exceed the acceptance bar ([`Unit::bar`]): 3 % on ratios, 10 % on everything else.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What is compared: an experiment's metric and the qualifiers that pick one value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct MetricId {
    /// The experiment (scenario name).
    pub experiment: String,
    /// The metric ("bandwidth", "ratio", "bmax", "rate", …).
    pub metric: String,
    /// The case of a multi-case experiment ("(2T, 4T, 4T)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    /// The flow (or class) the value belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
    /// The flow a ratio is taken against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// A point of a sweep ("500 ticks", "load 0.6").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// A window of a timeline ("25ms-39ms").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
}

impl MetricId {
    /// `metric` of `experiment`, unqualified.
    pub fn new(experiment: impl Into<String>, metric: impl Into<String>) -> Self {
        MetricId {
            experiment: experiment.into(),
            metric: metric.into(),
            ..Default::default()
        }
    }
    /// With a case.
    pub fn case(mut self, c: impl Into<String>) -> Self {
        self.case = Some(c.into());
        self
    }
    /// With a flow.
    pub fn flow(mut self, f: impl Into<String>) -> Self {
        self.flow = Some(f.into());
        self
    }
    /// With a reference flow (ratios).
    pub fn reference(mut self, f: impl Into<String>) -> Self {
        self.reference = Some(f.into());
        self
    }
    /// At a sweep point.
    pub fn at(mut self, a: impl Into<String>) -> Self {
        self.at = Some(a.into());
        self
    }
    /// In a window.
    pub fn window(mut self, w: impl Into<String>) -> Self {
        self.window = Some(w.into());
        self
    }
}

impl fmt::Display for MetricId {
    /// The label in tables: "(2T, 4T, 4T) ratio flow 2/flow 1", "rate of best-effort in
    /// 25ms-39ms", "outgoing at 500 ticks".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = &self.case {
            write!(f, "{c} ")?;
        }
        match (&self.flow, &self.reference) {
            (Some(a), Some(b)) => write!(f, "{} {a}/{b}", self.metric)?,
            (Some(a), None) if self.case.is_some() => write!(f, "{a} {}", self.metric)?,
            (Some(a), None) => write!(f, "{} of {a}", self.metric)?,
            _ => write!(f, "{}", self.metric)?,
        }
        if let Some(a) = &self.at {
            write!(f, " at {a}")?;
        }
        if let Some(w) = &self.window {
            write!(f, " in {w}")?;
        }
        Ok(())
    }
}

/// Unit of a compared value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// 10^6 bytes per second.
    MbPerSec,
    /// A ratio of two measured values of the same kind.
    Ratio,
    /// A fraction of a capacity (0..1).
    Fraction,
    /// Percent.
    Percent,
    /// LANai RTC ticks (0.5 µs).
    Ticks,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Router cycles.
    Cycles,
    /// Watts.
    Watts,
    /// A count or other dimensionless number.
    Number,
}

impl Unit {
    /// The acceptance bar: the loosest two-sided tolerance a check in this unit may have.
    pub fn bar(self) -> f64 {
        match self {
            Unit::Ratio => 0.03,
            _ => 0.10,
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unit::MbPerSec => "MB/s",
            Unit::Ratio => "ratio",
            Unit::Fraction => "fraction",
            Unit::Percent => "%",
            Unit::Ticks => "ticks",
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::Cycles => "cycles",
            Unit::Watts => "W",
            Unit::Number => "",
        })
    }
}

/// Where a published value comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Stated in the text or a table (section or table number).
    Stated(String),
    /// Read off a figure (figure number).
    Figure(String),
    /// Derived from stated values (the derivation).
    Derived(String),
    /// Not in the paper: what the design predicts (the reason), for checks of the real
    /// runtime's own promises.
    Design(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Stated(s) => write!(f, "stated, {s}"),
            Source::Figure(s) => write!(f, "read off Fig {s}"),
            Source::Derived(s) => write!(f, "derived: {s}"),
            Source::Design(s) => write!(f, "design: {s}"),
        }
    }
}

/// Whether the model was tuned to reproduce the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A calibration target: a model constant was chosen to meet it.
    Fit,
    /// Nothing was tuned to it: the model predicts it.
    Prediction,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Fit => "fit",
            Role::Prediction => "prediction",
        })
    }
}

/// How the measured value is compared with the published one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// |measured − published| ≤ tolerance · |published|.
    Within(f64),
    /// measured ≤ published: the paper states an upper bound ("less than 1 %").
    AtMost,
    /// measured ≥ published: the paper states a lower bound.
    AtLeast,
    /// Shown beside the others, not checked.
    Info,
}

impl Mode {
    /// Whether this is a one-sided check.
    pub fn is_bound(self) -> bool {
        matches!(self, Mode::AtMost | Mode::AtLeast)
    }
}

/// A published value and its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// The value, in the check's unit.
    pub value: f64,
    /// Where it comes from.
    pub source: Source,
}

/// A tolerance above the bar of its unit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("tolerance {tolerance} is above the acceptance bar of {bar} for {unit} values")]
pub struct LooseTolerance {
    /// What was asked.
    pub tolerance: f64,
    /// The bar.
    pub bar: f64,
    /// The unit.
    pub unit: Unit,
}

/// Checks that a tolerance is within the bar of `unit` (and a finite non-negative
/// number).
pub fn check_tolerance(unit: Unit, tolerance: f64) -> Result<(), LooseTolerance> {
    if tolerance.is_finite() && (0.0..=unit.bar() + 1e-12).contains(&tolerance) {
        Ok(())
    } else {
        Err(LooseTolerance {
            tolerance,
            bar: unit.bar(),
            unit,
        })
    }
}

/// One comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What is compared.
    pub id: MetricId,
    /// The label shown in tables (`id` rendered).
    pub label: String,
    /// Unit of the values.
    pub unit: Unit,
    /// Fit or prediction.
    pub role: Role,
    /// How it is compared.
    pub mode: Mode,
    /// The published value (None: the paper gives none; only `Mode::Info` then).
    pub published: Option<Published>,
    /// The measured value: simulated, or real on the testbed.
    pub measured: f64,
    /// For real runs: the simulated value of the same metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<f64>,
    /// (measured − published) / |published| (measured itself when published is 0).
    pub deviation: f64,
    /// Whether it passes (always true for `Mode::Info`).
    pub ok: bool,
    /// Why a value differs from the paper, when that is understood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Check {
    /// Compares `measured` with `published`.
    ///
    /// # Panics
    /// When a `Within` tolerance is above the unit's bar: that is a programming error
    /// (scenario files are validated when loaded, with the file and line).
    pub fn new(
        id: MetricId,
        unit: Unit,
        role: Role,
        mode: Mode,
        published: Published,
        measured: f64,
    ) -> Check {
        if let Mode::Within(t) = mode {
            if let Err(e) = check_tolerance(unit, t) {
                panic!("{}: {e}", id);
            }
        }
        let p = published.value;
        let deviation = if p != 0.0 {
            (measured - p) / p.abs()
        } else {
            measured
        };
        let ok = measured.is_finite()
            && match mode {
                Mode::Within(t) => deviation.abs() <= t + 1e-12,
                Mode::AtMost => measured <= p,
                Mode::AtLeast => measured >= p,
                Mode::Info => true,
            };
        Check {
            label: id.to_string(),
            id,
            unit,
            role,
            mode,
            published: Some(published),
            measured,
            simulated: None,
            deviation,
            ok,
            note: None,
        }
    }

    /// A value shown without a published counterpart (never a miss).
    pub fn info(id: MetricId, unit: Unit, measured: f64) -> Check {
        Check {
            label: id.to_string(),
            id,
            unit,
            role: Role::Prediction,
            mode: Mode::Info,
            published: None,
            measured,
            simulated: None,
            deviation: 0.0,
            ok: true,
            note: None,
        }
    }

    /// The same check with the simulated value of its metric beside it (real runs).
    pub fn with_simulated(mut self, v: Option<f64>) -> Check {
        self.simulated = v;
        self
    }

    /// The same check with an explanation.
    pub fn with_note(mut self, note: impl Into<String>) -> Check {
        self.note = Some(note.into());
        self
    }

    /// The deviation column: "+1.2% (±10%)", "≤ 4.5", "≥ 0.001" or "shown".
    pub fn deviation_text(&self) -> String {
        let p = self.published.as_ref().map_or(0.0, |p| p.value);
        match self.mode {
            Mode::Within(t) => format!("{:+.1}% (±{:.0}%)", 100.0 * self.deviation, 100.0 * t),
            Mode::AtMost => format!("bound ≤ {}", number(p)),
            Mode::AtLeast => format!("bound ≥ {}", number(p)),
            Mode::Info => "shown".into(),
        }
    }

    /// The verdict column: "yes", "no" or "—".
    pub fn verdict(&self) -> &'static str {
        match (self.mode, self.ok) {
            (Mode::Info, _) => "—",
            (_, true) => "yes",
            (_, false) => "no",
        }
    }

    /// The kind column: "prediction", "fit", "bound" or "shown".
    pub fn kind(&self) -> String {
        match self.mode {
            Mode::Info => "shown".into(),
            m if m.is_bound() => "bound".into(),
            _ => self.role.to_string(),
        }
    }
}

/// Counts of a set of checks, for the summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Checked values (every mode but `Info`).
    pub checks: usize,
    /// Two-sided checks of predicted values.
    pub predictions: usize,
    /// Two-sided checks of calibration targets.
    pub fits: usize,
    /// One-sided checks of bounds the paper states.
    pub bounds: usize,
    /// Checks that failed.
    pub misses: usize,
}

impl Summary {
    /// Counts `checks`.
    pub fn of<'a>(checks: impl IntoIterator<Item = &'a Check>) -> Summary {
        let mut s = Summary::default();
        for c in checks {
            if c.mode == Mode::Info {
                continue;
            }
            s.checks += 1;
            if c.mode.is_bound() {
                s.bounds += 1;
            } else if c.role == Role::Fit {
                s.fits += 1;
            } else {
                s.predictions += 1;
            }
            if !c.ok {
                s.misses += 1;
            }
        }
        s
    }
}

impl fmt::Display for Summary {
    /// `N checks: P predictions, F fits, B bounds, M misses`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} checks: {} predictions, {} fits, {} bounds, {} misses",
            self.checks, self.predictions, self.fits, self.bounds, self.misses
        )
    }
}

/// A number as tables show it: one decimal from 100 up, three below.
pub fn number(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
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
        let c = Check::new(
            id.clone(),
            Unit::MbPerSec,
            Role::Prediction,
            Mode::Within(0.10),
            stated(40.0),
            43.9,
        );
        assert!(c.ok);
        assert!((c.deviation - 0.0975).abs() < 1e-12);
        let c = Check::new(
            id,
            Unit::MbPerSec,
            Role::Prediction,
            Mode::Within(0.10),
            stated(40.0),
            44.1,
        );
        assert!(!c.ok);
        assert_eq!(c.label, "(2T, 2T) flow 1 bandwidth");
    }

    #[test]
    fn bounds_are_one_sided_and_counted_apart() {
        let id = MetricId::new("overhead", "latency-overhead-avg");
        let below = Check::new(
            id.clone(),
            Unit::Percent,
            Role::Prediction,
            Mode::AtMost,
            stated(1.0),
            0.2,
        );
        let above = Check::new(
            id,
            Unit::Percent,
            Role::Prediction,
            Mode::AtMost,
            stated(1.0),
            1.2,
        );
        let fit = Check::new(
            MetricId::new("idt-sweep", "bmax"),
            Unit::MbPerSec,
            Role::Fit,
            Mode::Within(0.10),
            stated(81.8),
            81.0,
        );
        let shown = Check::info(MetricId::new("x", "y"), Unit::Number, 3.0);
        let s = Summary::of([&below, &above, &fit, &shown]);
        assert_eq!(
            s,
            Summary {
                checks: 3,
                predictions: 0,
                fits: 1,
                bounds: 2,
                misses: 1
            }
        );
        assert_eq!(
            s.to_string(),
            "3 checks: 0 predictions, 1 fits, 2 bounds, 1 misses"
        );
        assert_eq!(above.kind(), "bound");
        assert_eq!(fit.kind(), "fit");
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
        Check::new(
            MetricId::new("e", "m"),
            Unit::MbPerSec,
            Role::Prediction,
            Mode::Within(0.25),
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
}
