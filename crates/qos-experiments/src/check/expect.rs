//! The one `[[expect]]` grammar of every scenario file: which value (a paper's typed
//! metric and the selectors that pick one run or two), what the paper says of it (a
//! value, a bound, an ordering, or nothing: shown), where it says so, and how the model
//! relates to it (prediction, fit, identity). Each paper names its metrics with an enum
//! ([`MetricName`]) and says which selectors a metric takes; what is common — the kind
//! and its keys, the published value, tolerances and margins, defaults — is checked
//! here once, each error at the `file:line` of the key at fault.
//!
//! ```toml
//! [[expect]]
//! metric = "dmt"            # the paper's metric (typed: an unknown name is refused)
//! case = "No A"             # selectors: case, load, class, flow, at, from/until
//! vs_case = "A"             # a comparison: the other side (vs_case, vs_load)
//! load = 0.8
//! kind = "ordering"         # value (default) | bound | ordering | shown
//! order = "higher"          # ordering: higher | lower; bound: bound = "at-most" | "at-least"
//! mechanism = "admission"   # what the claim credits
//! source = { stated = "§7.3, Fig 5(a): DMT higher without admission" }
//! ```

use std::fmt;
use std::ops::Range;

use qos_core::source::Located;
use qos_core::units::Duration;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use toml::Spanned;

use super::{
    check_tolerance, Bound, Check, Comparison, Kind, Mechanism, MetricId, Order, Published, Role,
    Source, Unit,
};

/// A paper's metric names, as its scenario files write them.
pub trait MetricName: Copy + PartialEq + fmt::Debug + DeserializeOwned {
    /// Its name in files and tables.
    fn name(self) -> &'static str;
    /// The unit of one value of it (a comparison of two is a ratio).
    fn unit(self) -> Unit;
    /// Whether a value of it may be negative (a loss that can be a gain).
    fn signed(self) -> bool {
        false
    }
    /// Whether the runs give a confidence interval for it (an ordering of a metric
    /// without one needs a stated `margin`).
    fn has_interval(self) -> bool {
        false
    }
    /// Whether it is itself a comparison of two values (a ratio of two flows): then
    /// it is checked as a ratio, and may be an ordering without `vs_case`.
    fn is_ratio(self) -> bool {
        false
    }
    /// The unit of the two values a comparison of it divides (a margin's unit).
    fn value_unit(self) -> Unit {
        self.unit()
    }
}

/// `[[expect]]` as written, for a paper whose metrics are `M`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectDef<M> {
    /// What is measured.
    pub metric: Spanned<M>,
    /// The case (a label of `[[case]]`, a firmware).
    pub case: Option<Spanned<String>>,
    /// A comparison: the other case.
    pub vs_case: Option<Spanned<String>>,
    /// The load point.
    pub load: Option<Spanned<f64>>,
    /// A comparison: the other load.
    pub vs_load: Option<Spanned<f64>>,
    /// A traffic class.
    pub class: Option<Spanned<String>>,
    /// A flow.
    pub flow: Option<Spanned<String>>,
    /// A point of a sweep (an IDT, a message size).
    pub at: Option<Spanned<String>>,
    /// Start of a window of a timeline.
    pub from: Option<Duration>,
    /// End of a window of a timeline.
    pub until: Option<Duration>,
    /// What the paper says: a value (default), a bound, an ordering, or nothing.
    #[serde(default)]
    pub kind: Kind,
    /// A bound's direction.
    pub bound: Option<Spanned<Bound>>,
    /// An ordering's direction: the checked side higher or lower than the other.
    pub order: Option<Spanned<Order>>,
    /// The published value (a value, a bound; optional for shown; none for an
    /// ordering).
    pub published: Option<Spanned<f64>>,
    /// Where it comes from.
    pub source: Source,
    /// `fit` when a model choice was tuned to it, `identity` when it holds by
    /// construction (default `prediction`).
    pub role: Option<Role>,
    /// A value's relative tolerance (default and maximum: the bar of its unit).
    pub tolerance: Option<Spanned<f64>>,
    /// An ordering's minimum difference, in the metric's unit (needed where the runs
    /// give no confidence interval).
    pub margin: Option<Spanned<f64>>,
    /// The mechanism the claim credits.
    pub mechanism: Option<Mechanism>,
    /// Why the model differs from the paper, or what the comparison means.
    pub note: Option<String>,
}

fn located(file: &str, text: &str, span: Range<usize>, msg: impl Into<String>) -> Located {
    Located::at(file, text, span.start, msg)
}

impl<M: MetricName> ExpectDef<M> {
    /// The metric.
    pub fn metric(&self) -> M {
        *self.metric.get_ref()
    }

    /// Whether it compares two values (another case or load, or a ratio metric).
    pub fn is_comparison(&self) -> bool {
        self.vs_case.is_some() || self.vs_load.is_some() || self.metric().is_ratio()
    }

    /// The unit of the compared value: a ratio for a comparison.
    pub fn unit(&self) -> Unit {
        if self.is_comparison() {
            Unit::Ratio
        } else {
            self.metric().unit()
        }
    }

    /// The tolerance of a value check: as written, else the bar of its unit.
    pub fn tolerance(&self) -> f64 {
        self.tolerance
            .as_ref()
            .map_or(self.unit().bar(), |t| *t.get_ref())
    }

    /// The role: as written, else prediction.
    pub fn role(&self) -> Role {
        self.role.unwrap_or(Role::Prediction)
    }

    /// The published value (0 where the kind needs none).
    pub fn published_value(&self) -> f64 {
        self.published.as_ref().map_or(0.0, |p| *p.get_ref())
    }

    /// An error at the line of the metric (the entry as a whole).
    pub fn error(&self, file: &str, text: &str, msg: impl Into<String>) -> Located {
        located(file, text, self.metric.span(), msg)
    }

    /// The metric, refused at its line unless it is one of `known` (the metrics a
    /// scenario of `kind` gives).
    pub fn metric_of(
        &self,
        file: &str,
        text: &str,
        known: &[M],
        kind: impl fmt::Debug,
    ) -> Result<M, Located> {
        let m = self.metric();
        if known.contains(&m) {
            return Ok(m);
        }
        let names: Vec<&str> = known.iter().map(|m| m.name()).collect();
        Err(self.error(
            file,
            text,
            format!(
                "metric '{}' does not apply to kind {kind:?} (expected one of {})",
                m.name(),
                names.join(", ")
            ),
        ))
    }

    /// Refuses the selectors the paper's metric does not take (`allowed` names those it
    /// does), each at its line.
    pub fn only(&self, file: &str, text: &str, allowed: &[&str]) -> Result<(), Located> {
        let s = |x: &Option<Spanned<String>>| x.as_ref().map(|v| v.span());
        let f = |x: &Option<Spanned<f64>>| x.as_ref().map(|v| v.span());
        let whole = self.metric.span();
        let given = [
            ("case", s(&self.case)),
            ("vs_case", s(&self.vs_case)),
            ("load", f(&self.load)),
            ("vs_load", f(&self.vs_load)),
            ("class", s(&self.class)),
            ("flow", s(&self.flow)),
            ("at", s(&self.at)),
            ("from", self.from.map(|_| whole.clone())),
            ("until", self.until.map(|_| whole.clone())),
        ];
        for (key, span) in given {
            if let Some(span) = span {
                if !allowed.contains(&key) {
                    let takes = if allowed.is_empty() {
                        "no selector".to_string()
                    } else {
                        allowed.join(", ")
                    };
                    return Err(located(
                        file,
                        text,
                        span,
                        format!(
                            "`{key}` does not apply to metric {} (it takes {takes})",
                            self.metric().name()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks what every paper's `[[expect]]` shares: the kind and the keys it needs
    /// and refuses, the published value (finite; never negative for a metric that
    /// cannot be; never 0 for a value or a ratio, which have no relative tolerance
    /// there), the tolerance (at most the bar), the margin (positive) and that an
    /// ordering of a metric the runs give no interval for states a margin.
    pub fn validate(&self, file: &str, text: &str) -> Result<(), Located> {
        let m = self.metric();
        let here = |span: Range<usize>, msg: String| Err(located(file, text, span, msg));
        let kind = self.kind;
        // Keys a kind refuses.
        let refuse = |key: &str, span: Option<Range<usize>>| -> Result<(), Located> {
            match span {
                Some(s) => here(
                    s,
                    format!("`{key}` does not apply to kind = \"{}\"", kind.name()),
                ),
                None => Ok(()),
            }
        };
        let span = |x: &Option<Spanned<f64>>| x.as_ref().map(|v| v.span());
        if kind != Kind::Value {
            refuse("tolerance", span(&self.tolerance))?;
        }
        if kind != Kind::Bound {
            refuse("bound", self.bound.as_ref().map(|b| b.span()))?;
        }
        if kind != Kind::Ordering {
            refuse("order", self.order.as_ref().map(|o| o.span()))?;
            refuse("margin", span(&self.margin))?;
        } else {
            refuse("published", span(&self.published))?;
        }
        match kind {
            Kind::Value | Kind::Bound if self.published.is_none() => {
                return Err(self.error(
                    file,
                    text,
                    format!(
                        "a {} needs `published` (the paper's number)",
                        kind.name()
                    ),
                ))
            }
            Kind::Bound if self.bound.is_none() => {
                return Err(self.error(
                    file,
                    text,
                    "a bound needs `bound = \"at-most\"` or `\"at-least\"` (as the paper states it)",
                ))
            }
            Kind::Ordering if self.order.is_none() => {
                return Err(self.error(
                    file,
                    text,
                    "an ordering needs `order = \"higher\"` or `\"lower\"` (the checked side against the other)",
                ))
            }
            Kind::Ordering if !self.is_comparison() => {
                return Err(self.error(
                    file,
                    text,
                    "an ordering compares two runs: give `vs_case` or `vs_load`",
                ))
            }
            Kind::Ordering if self.margin.is_none() && !m.has_interval() => {
                return Err(self.error(
                    file,
                    text,
                    format!(
                        "the runs give no confidence interval for {}: an ordering of it needs `margin` (the smallest difference that counts, in {})",
                        m.name(),
                        m.value_unit()
                    ),
                ))
            }
            _ => {}
        }
        if let Some(p) = &self.published {
            let v = *p.get_ref();
            if !v.is_finite() {
                return here(p.span(), format!("published = {v}: must be a number"));
            }
            if v < 0.0 && !m.signed() {
                return here(
                    p.span(),
                    format!("published = {v}: {} cannot be negative", m.name()),
                );
            }
            if v == 0.0 && kind == Kind::Value {
                return here(
                    p.span(),
                    "published = 0: a value check is relative to the published value; state a bound (bound = \"at-most\") instead".into(),
                );
            }
            if v == 0.0 && self.is_comparison() {
                return here(
                    p.span(),
                    "published = 0: a ratio of two positive measures is never 0".into(),
                );
            }
        }
        if let Some(t) = &self.tolerance {
            check_tolerance(self.unit(), *t.get_ref()).map_err(|e| {
                located(
                    file,
                    text,
                    t.span(),
                    format!("{e}: a value the model does not meet shows as a miss, with a note"),
                )
            })?;
        }
        if let Some(g) = &self.margin {
            let v = *g.get_ref();
            if !(v.is_finite() && v > 0.0) {
                return here(
                    g.span(),
                    format!(
                        "margin = {v}: must be a positive number (in {})",
                        m.value_unit()
                    ),
                );
            }
        }
        Ok(())
    }

    /// The published value with its source.
    fn published(&self) -> Published {
        Published {
            value: self.published_value(),
            source: self.source.clone(),
        }
    }

    /// The check of this entry: `measured` its value (for a comparison, the ratio as
    /// the experiment defines it), `sides` the two values of a comparison with their
    /// intervals (an ordering without them is not differentiated).
    pub fn check(&self, id: MetricId, measured: f64, sides: Option<Comparison>) -> Check {
        let unit = self.unit();
        let role = self.role();
        let c = match self.kind {
            Kind::Value => {
                Check::value(id, unit, role, self.tolerance(), self.published(), measured)
            }
            Kind::Bound => Check::bound(
                id,
                unit,
                role,
                self.bound.as_ref().map_or(Bound::AtMost, |b| *b.get_ref()),
                self.published(),
                measured,
            ),
            Kind::Ordering => {
                let margin = self.margin.as_ref().map(|m| *m.get_ref());
                let cmp = sides
                    .unwrap_or_else(|| Comparison::new(f64::NAN, f64::NAN))
                    .with_margin(margin);
                Check::ordering(
                    id,
                    role,
                    self.order.as_ref().map_or(Order::Higher, |o| *o.get_ref()),
                    self.source.clone(),
                    measured,
                    cmp,
                )
            }
            Kind::Shown => match &self.published {
                Some(_) => Check::shown_against(id, unit, self.published(), measured),
                None => Check::shown(id, unit, measured),
            },
        };
        let c = match self.mechanism {
            Some(m) => c.crediting(m),
            None => c,
        };
        match &self.note {
            Some(n) => c.with_note(n.clone()),
            None => c,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qos_core::source::parse_toml;

    #[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    enum M {
        Bandwidth,
        Loss,
        Latency,
    }

    impl MetricName for M {
        fn name(self) -> &'static str {
            match self {
                M::Bandwidth => "bandwidth",
                M::Loss => "loss",
                M::Latency => "latency",
            }
        }
        fn unit(self) -> Unit {
            match self {
                M::Bandwidth => Unit::MbPerSec,
                M::Loss => Unit::Percent,
                M::Latency => Unit::Us,
            }
        }
        fn signed(self) -> bool {
            self == M::Loss
        }
        fn has_interval(self) -> bool {
            self == M::Latency
        }
    }

    #[derive(Debug, Deserialize)]
    struct File {
        expect: Vec<ExpectDef<M>>,
    }

    fn load(body: &str) -> Result<Vec<ExpectDef<M>>, String> {
        let text = format!("[[expect]]\n{body}");
        let f: File = parse_toml("e.toml", &text).map_err(|e| e.to_string())?;
        for e in &f.expect {
            e.validate("e.toml", &text).map_err(|e| e.to_string())?;
        }
        Ok(f.expect)
    }

    const SRC: &str = "source = { stated = \"§1\" }\n";

    #[test]
    fn bad_published_values_are_refused_at_their_line() {
        for (v, says) in [
            ("-81.8", "cannot be negative"),
            ("nan", "must be a number"),
            ("inf", "must be a number"),
            ("0", "state a bound"),
        ] {
            let e = load(&format!("metric = \"bandwidth\"\npublished = {v}\n{SRC}")).unwrap_err();
            assert!(e.starts_with("e.toml:3:"), "{v}: {e}");
            assert!(e.contains(says), "{v}: {e}");
        }
        // A loss may be negative (a gain), and a bound may be 0.
        assert!(load(&format!("metric = \"loss\"\npublished = -2.0\n{SRC}")).is_ok());
        assert!(load(&format!(
            "metric = \"bandwidth\"\nkind = \"bound\"\nbound = \"at-most\"\npublished = 0\n{SRC}"
        ))
        .is_ok());
        // A ratio of two runs is never 0.
        let e = load(&format!(
            "metric = \"bandwidth\"\nvs_case = \"x\"\nkind = \"bound\"\nbound = \"at-least\"\npublished = 0\n{SRC}"
        ))
        .unwrap_err();
        assert!(e.contains("never 0"), "{e}");
    }

    #[test]
    fn each_kind_takes_its_keys_and_refuses_the_others() {
        let e = load(&format!(
            "metric = \"latency\"\nkind = \"ordering\"\nvs_case = \"b\"\n{SRC}"
        ))
        .unwrap_err();
        assert!(
            e.contains("order = \\\"higher\\\"") || e.contains("needs `order"),
            "{e}"
        );
        let ok = load(&format!(
            "metric = \"latency\"\nkind = \"ordering\"\norder = \"lower\"\nvs_case = \"b\"\n{SRC}"
        ));
        assert!(ok.is_ok(), "{ok:?}");
        // An ordering of a metric without intervals needs a margin.
        let e = load(&format!(
            "metric = \"bandwidth\"\nkind = \"ordering\"\norder = \"lower\"\nvs_case = \"b\"\n{SRC}"
        ))
        .unwrap_err();
        assert!(e.contains("needs `margin`"), "{e}");
        assert!(load(&format!(
            "metric = \"bandwidth\"\nkind = \"ordering\"\norder = \"lower\"\nvs_case = \"b\"\nmargin = 2\n{SRC}"
        ))
        .is_ok());
        // An ordering states no published value, and compares two runs.
        let e = load(&format!(
            "metric = \"latency\"\nkind = \"ordering\"\norder = \"lower\"\nvs_case = \"b\"\npublished = 1\n{SRC}"
        ))
        .unwrap_err();
        assert!(
            e.starts_with("e.toml:6:") && e.contains("`published`"),
            "{e}"
        );
        let e = load(&format!(
            "metric = \"latency\"\nkind = \"ordering\"\norder = \"lower\"\n{SRC}"
        ))
        .unwrap_err();
        assert!(e.contains("vs_case"), "{e}");
        // A tolerance is a value's; above the bar it is refused.
        let e = load(&format!(
            "metric = \"bandwidth\"\nkind = \"bound\"\nbound = \"at-most\"\npublished = 1\ntolerance = 0.05\n{SRC}"
        ))
        .unwrap_err();
        assert!(e.starts_with("e.toml:6:"), "{e}");
        let e = load(&format!(
            "metric = \"bandwidth\"\npublished = 1\ntolerance = 0.2\n{SRC}"
        ))
        .unwrap_err();
        assert!(e.contains("acceptance bar"), "{e}");
        // Unknown metrics and keys are refused by the parser, at their line.
        let e = load(&format!("metric = \"speed\"\npublished = 1\n{SRC}")).unwrap_err();
        assert!(e.starts_with("e.toml:2") && e.contains("speed"), "{e}");
        let e = load(&format!(
            "metric = \"latency\"\npublished = 1\nmode = \"at-most\"\n{SRC}"
        ))
        .unwrap_err();
        assert!(e.starts_with("e.toml:4") && e.contains("mode"), "{e}");
    }

    #[test]
    fn an_entry_makes_its_check() {
        let e = &load(&format!(
            "metric = \"latency\"\nkind = \"ordering\"\norder = \"lower\"\nvs_case = \"b\"\nmechanism = \"admission\"\n{SRC}"
        ))
        .unwrap()[0];
        let c = e.check(
            MetricId::new("x", "latency"),
            0.5,
            Some(Comparison::new(1.0, 2.0).with_intervals(Some(0.1), Some(0.1))),
        );
        assert_eq!(c.kind, Kind::Ordering);
        assert_eq!(c.verdict, super::super::Verdict::Pass);
        assert_eq!(c.mechanism, Some(Mechanism::Admission));
        assert_eq!(c.published.as_ref().unwrap().value, 1.0);
        let v = &load(&format!("metric = \"bandwidth\"\npublished = 40\n{SRC}")).unwrap()[0];
        let c = v.check(MetricId::new("x", "bandwidth"), 43.0, None);
        assert_eq!((c.kind, c.ok), (Kind::Value, Some(true)));
    }
}
