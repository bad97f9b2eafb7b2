//! Typed checks: one measured value (simulated or real) against what a paper says, shared
//! by every reproduction, in four kinds that cannot flatter (DESIGN.md, "experiments"):
//!
//! - [`Kind::Value`] — the paper prints a number: two-sided, within the acceptance bar
//!   ([`Unit::bar`]: 3 % on ratios, 10 % on everything else).
//! - [`Kind::Bound`] — the paper states a bound in its own words ("less than 1 %"):
//!   one-sided, and only there.
//! - [`Kind::Ordering`] — the paper says one case beats another: it passes only when the
//!   difference is larger than the runs' own confidence interval (or a stated minimum
//!   margin); cases the runs cannot tell apart are **not differentiated** — neither a
//!   pass nor a miss, and counted — and two cases that ran identically are named.
//! - [`Kind::Shown`] — no claim: a value shown beside the others (with the paper's, if
//!   it prints one that the model cannot be asked to meet).
//!
//! Each check also says whether the model predicts the value ([`Role::Prediction`]),
//! was tuned to it ([`Role::Fit`]) or meets it by construction ([`Role::Identity`]),
//! where the published value comes from ([`Source`]), which mechanism it credits
//! ([`Mechanism`]) and, for mechanisms that refuse work, what they refused
//! ([`Refusals`]) in the same row. [`Summary`] counts them for the summary line.
//!
//! The one `[[expect]]` grammar of the scenario files is [`expect`]; the orderings'
//! rule is [`ordering`].

pub mod expect;
pub mod ordering;
#[cfg(test)]
mod tests;
pub mod verdict;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use ordering::Comparison;
pub use verdict::{Order, Verdict};

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
    /// The flow or case a ratio is taken against.
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
    /// With a reference flow or case (ratios).
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
    /// The acceptance bar: the loosest two-sided tolerance a value check in this unit
    /// may have.
    pub fn bar(self) -> f64 {
        match self {
            Unit::Ratio => 0.03,
            _ => 0.10,
        }
    }

    /// Its name in tables and CSV ("MB/s", "ratio", "%").
    pub fn name(self) -> &'static str {
        match self {
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
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

impl Source {
    /// Its kind as one plain word: "stated", "figure", "derived", "design".
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Stated(_) => "stated",
            Source::Figure(_) => "figure",
            Source::Derived(_) => "derived",
            Source::Design(_) => "design",
        }
    }
    /// Its text (the section, figure, derivation or reason).
    pub fn text(&self) -> &str {
        match self {
            Source::Stated(s) | Source::Figure(s) | Source::Derived(s) | Source::Design(s) => s,
        }
    }
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

/// What kind of claim a check tests (the module's documentation says when each applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A number the paper prints: two-sided, within the bar.
    #[default]
    Value,
    /// A bound the paper states: one-sided.
    Bound,
    /// One case beats another: decided only when the runs tell them apart.
    Ordering,
    /// No claim.
    Shown,
}

impl Kind {
    /// Its name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Value => "value",
            Kind::Bound => "bound",
            Kind::Ordering => "ordering",
            Kind::Shown => "shown",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the model was tuned to the value, predicts it, or meets it by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A calibration target: a model constant (or an added rule) was chosen to meet it.
    Fit,
    /// Nothing was tuned to it: the model predicts it.
    Prediction,
    /// True by construction: it restates a fit, or follows from the set-up alone (two
    /// flows with equal IDTs share equally whatever the model).
    Identity,
}

impl Role {
    /// Its name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            Role::Fit => "fit",
            Role::Prediction => "prediction",
            Role::Identity => "identity",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the measured value is compared with the published one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// |measured − published| ≤ tolerance · |published| (a value).
    Within(f64),
    /// measured ≤ published: a bound, or an ordering "lower than".
    AtMost,
    /// measured ≥ published: a bound, or an ordering "higher than".
    AtLeast,
    /// Shown beside the others, not checked.
    Info,
}

impl Mode {
    /// Its name in tables and CSV: "within", "at-most", "at-least", "info".
    pub fn name(self) -> &'static str {
        match self {
            Mode::Within(_) => "within",
            Mode::AtMost => "at-most",
            Mode::AtLeast => "at-least",
            Mode::Info => "info",
        }
    }
    /// The tolerance of a value check.
    pub fn tolerance(self) -> Option<f64> {
        match self {
            Mode::Within(t) => Some(t),
            _ => None,
        }
    }
}

/// The direction of a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// measured ≤ published ("less than 1 %").
    AtMost,
    /// measured ≥ published.
    AtLeast,
}

/// A mechanism a check credits: the one a mechanism-off test switches off to watch the
/// check fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Admission control (the thesis's manager, Yum's probes, the ledger in front of a
    /// VIA firmware).
    Admission,
    /// Credit-based congestion control (Yum §4.2), CQ layouts included.
    Credits,
    /// Peak power control (Yum §5).
    PowerControl,
    /// Rate control at the source (IDT/NDT, the thesis).
    RateControl,
    /// The WRR variant of the VL arbiters (Yum §3.3).
    Wrr,
    /// The NIC firmware's design (SVIA, PVIA, QoSVIA; Nagar §3).
    Firmware,
}

impl Mechanism {
    /// Its name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Admission => "admission",
            Mechanism::Credits => "credits",
            Mechanism::PowerControl => "power-control",
            Mechanism::RateControl => "rate-control",
            Mechanism::Wrr => "wrr",
            Mechanism::Firmware => "firmware",
        }
    }
    /// Whether it wins by refusing work, so its checks carry [`Refusals`].
    pub fn refuses(self) -> bool {
        matches!(self, Mechanism::Admission | Mechanism::PowerControl)
    }
}

/// What a mechanism that refuses work refused, in the row of the check that credits it:
/// a latency won by refusing load is read beside the load refused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Refusals {
    /// Share of the requests (connections, channels) refused, 0..1.
    pub refused: f64,
    /// The load the network carried after admission, in the unit of the experiment's
    /// loads (a fraction of the link, or MB/s).
    pub admitted_load: f64,
}

/// A published value and its source (an ordering's value is 1, the ratio at parity).
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
    /// Value, bound, ordering or shown.
    pub kind: Kind,
    /// Prediction, fit or identity.
    pub role: Role,
    /// How it is compared.
    pub mode: Mode,
    /// The published value (None: the paper gives none; only shown checks).
    pub published: Option<Published>,
    /// The measured value: simulated, or real on the testbed (an ordering's: the ratio
    /// of its two values).
    pub measured: f64,
    /// For real runs: the simulated value of the same metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<f64>,
    /// (measured − published) / |published| (measured itself when published is 0).
    pub deviation: f64,
    /// Whether the claim holds: None when there is none to hold (shown) or the runs
    /// cannot tell (not differentiated).
    pub ok: Option<bool>,
    /// Pass, miss, not differentiated or shown.
    pub verdict: Verdict,
    /// Orderings: whether the runs tell the two cases apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub differentiated: Option<bool>,
    /// Orderings: the two values, the interval of their difference, the margin, and the
    /// cases' names when they ran identically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// The mechanism the check credits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<Mechanism>,
    /// What the credited mechanism refused (admission, power control).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusals: Option<Refusals>,
    /// Why a value differs from the paper, when that is understood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn deviation(measured: f64, published: f64) -> f64 {
    if published != 0.0 {
        (measured - published) / published.abs()
    } else {
        measured
    }
}

impl Check {
    fn base(id: MetricId, unit: Unit, kind: Kind, role: Role, mode: Mode, measured: f64) -> Check {
        Check {
            label: id.to_string(),
            id,
            unit,
            kind,
            role,
            mode,
            published: None,
            measured,
            simulated: None,
            deviation: 0.0,
            ok: None,
            verdict: Verdict::Shown,
            differentiated: None,
            comparison: None,
            mechanism: None,
            refusals: None,
            note: None,
        }
    }

    fn decided(mut self, ok: bool) -> Check {
        self.ok = Some(ok);
        self.verdict = if ok { Verdict::Pass } else { Verdict::Miss };
        self
    }

    /// A value the paper prints: |measured − published| ≤ `tolerance` · |published|.
    ///
    /// # Panics
    /// When `tolerance` is above the unit's bar: that is a programming error (scenario
    /// files are validated when loaded, with the file and line).
    pub fn value(
        id: MetricId,
        unit: Unit,
        role: Role,
        tolerance: f64,
        published: Published,
        measured: f64,
    ) -> Check {
        if let Err(e) = check_tolerance(unit, tolerance) {
            panic!("{id}: {e}");
        }
        let d = deviation(measured, published.value);
        let ok = measured.is_finite() && d.abs() <= tolerance + 1e-12;
        let mut c = Check::base(
            id,
            unit,
            Kind::Value,
            role,
            Mode::Within(tolerance),
            measured,
        );
        c.deviation = d;
        c.published = Some(published);
        c.decided(ok)
    }

    /// A bound the paper states: measured ≤ published ([`Bound::AtMost`]) or ≥.
    pub fn bound(
        id: MetricId,
        unit: Unit,
        role: Role,
        bound: Bound,
        published: Published,
        measured: f64,
    ) -> Check {
        let p = published.value;
        let (mode, holds) = match bound {
            Bound::AtMost => (Mode::AtMost, measured <= p),
            Bound::AtLeast => (Mode::AtLeast, measured >= p),
        };
        let mut c = Check::base(id, unit, Kind::Bound, role, mode, measured);
        c.deviation = deviation(measured, p);
        c.published = Some(published);
        c.decided(measured.is_finite() && holds)
    }

    /// An ordering: `comparison.value` is claimed [`Order::Higher`] (or lower) than
    /// `comparison.reference`. `measured` is the ratio shown (value / reference, as the
    /// experiment defines it for zeros); the verdict is [`ordering::verdict`]'s: not
    /// differentiated unless the difference exceeds the interval or margin.
    pub fn ordering(
        id: MetricId,
        role: Role,
        order: Order,
        source: Source,
        measured: f64,
        comparison: Comparison,
    ) -> Check {
        let mode = match order {
            Order::Higher => Mode::AtLeast,
            Order::Lower => Mode::AtMost,
        };
        let mut c = Check::base(id, Unit::Ratio, Kind::Ordering, role, mode, measured);
        c.deviation = deviation(measured, 1.0);
        c.published = Some(Published { value: 1.0, source });
        let differentiated = comparison.differentiated();
        c.differentiated = Some(differentiated);
        c = match ordering::verdict(order, &comparison) {
            Verdict::Pass => c.decided(true),
            Verdict::Miss => c.decided(false),
            v => {
                c.verdict = v;
                c
            }
        };
        c.comparison = Some(comparison);
        c
    }

    /// A value shown without a published counterpart (never a pass or a miss).
    pub fn shown(id: MetricId, unit: Unit, measured: f64) -> Check {
        Check::base(
            id,
            unit,
            Kind::Shown,
            Role::Prediction,
            Mode::Info,
            measured,
        )
    }

    /// A value shown beside a number the paper prints but the model cannot be asked to
    /// meet (the note says why).
    pub fn shown_against(id: MetricId, unit: Unit, published: Published, measured: f64) -> Check {
        let mut c = Check::shown(id, unit, measured);
        c.deviation = deviation(measured, published.value);
        c.published = Some(published);
        c
    }

    /// The check `mode` makes of `published` and `measured`: a value for
    /// [`Mode::Within`], a bound for [`Mode::AtMost`] / [`Mode::AtLeast`], shown for
    /// [`Mode::Info`]. Orderings are built with [`Check::ordering`].
    pub fn new(
        id: MetricId,
        unit: Unit,
        role: Role,
        mode: Mode,
        published: Published,
        measured: f64,
    ) -> Check {
        match mode {
            Mode::Within(t) => Check::value(id, unit, role, t, published, measured),
            Mode::AtMost => Check::bound(id, unit, role, Bound::AtMost, published, measured),
            Mode::AtLeast => Check::bound(id, unit, role, Bound::AtLeast, published, measured),
            Mode::Info => Check::shown_against(id, unit, published, measured),
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

    /// The same check with another explanation added to its note.
    pub fn add_note(mut self, more: &str) -> Check {
        self.note = Some(match self.note.take() {
            Some(n) if !n.is_empty() => format!("{n} {more}"),
            _ => more.to_string(),
        });
        self
    }

    /// The same check crediting `mechanism`.
    pub fn crediting(mut self, mechanism: Mechanism) -> Check {
        self.mechanism = Some(mechanism);
        self
    }

    /// The same check with what its mechanism refused.
    pub fn with_refusals(mut self, r: Refusals) -> Check {
        self.refusals = Some(r);
        self
    }

    /// The same check with another role.
    pub fn with_role(mut self, role: Role) -> Check {
        self.role = role;
        self
    }

    /// Whether the check failed.
    pub fn missed(&self) -> bool {
        self.verdict == Verdict::Miss
    }

    /// The deviation column: "+1.2% (±10%)", "≤ 4.5", "≥ 0.001", "> 1 (±0.02)" or
    /// "shown".
    pub fn deviation_text(&self) -> String {
        let p = self.published.as_ref().map_or(0.0, |p| p.value);
        match (self.kind, self.mode) {
            (Kind::Value, Mode::Within(t)) => {
                format!("{:+.1}% (±{:.0}%)", 100.0 * self.deviation, 100.0 * t)
            }
            (Kind::Ordering, m) => {
                let dir = if m == Mode::AtMost { "lower" } else { "higher" };
                let by = self
                    .comparison
                    .as_ref()
                    .map_or(String::new(), Comparison::decided_by);
                format!("{dir}{by}")
            }
            (_, Mode::AtMost) => format!("bound ≤ {}", number(p)),
            (_, Mode::AtLeast) => format!("bound ≥ {}", number(p)),
            _ => "shown".into(),
        }
    }
}

/// Counts of a set of checks, for the summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Values, bounds and orderings (shown values are no checks).
    pub checks: usize,
    /// Two-sided checks of printed numbers.
    pub values: usize,
    /// One-sided checks of stated bounds.
    pub bounds: usize,
    /// Orderings.
    pub orderings: usize,
    /// Values shown, not checked.
    pub shown: usize,
    /// Checks of values nothing was tuned to.
    pub predictions: usize,
    /// Checks of calibration targets.
    pub fits: usize,
    /// Checks true by construction.
    pub identities: usize,
    /// Checks that failed.
    pub misses: usize,
    /// Orderings the runs cannot tell apart.
    pub not_differentiated: usize,
}

impl Summary {
    /// Counts `checks`.
    pub fn of<'a>(checks: impl IntoIterator<Item = &'a Check>) -> Summary {
        let mut s = Summary::default();
        for c in checks {
            match c.kind {
                Kind::Shown => {
                    s.shown += 1;
                    continue;
                }
                Kind::Value => s.values += 1,
                Kind::Bound => s.bounds += 1,
                Kind::Ordering => s.orderings += 1,
            }
            s.checks += 1;
            match c.role {
                Role::Prediction => s.predictions += 1,
                Role::Fit => s.fits += 1,
                Role::Identity => s.identities += 1,
            }
            match c.verdict {
                Verdict::Miss => s.misses += 1,
                Verdict::NotDifferentiated => s.not_differentiated += 1,
                _ => {}
            }
        }
        s
    }
}

/// `n` and a noun, singular or plural ("1 miss", "2 misses").
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl fmt::Display for Summary {
    /// `N checks (V values, B bounds, O orderings) and S shown; P predictions, F fits,
    /// I identities; M misses, D not differentiated`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}, {}, {}) and {} shown; {}, {}, {}; {}, {} not differentiated",
            count(self.checks, "check", "checks"),
            count(self.values, "value", "values"),
            count(self.bounds, "bound", "bounds"),
            count(self.orderings, "ordering", "orderings"),
            self.shown,
            count(self.predictions, "prediction", "predictions"),
            count(self.fits, "fit", "fits"),
            count(self.identities, "identity", "identities"),
            count(self.misses, "miss", "misses"),
            self.not_differentiated,
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
