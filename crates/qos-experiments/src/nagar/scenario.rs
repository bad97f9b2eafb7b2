//! The scenario files of `reproduce nagar` (`scenarios/nagar/*.toml`, embedded in the
//! binary; format in `scenarios/nagar/README.md`), validated once with errors that name
//! `file:line`. Three kinds:
//!
//! - `stage-times` (Table 1): a ping-pong per control program and message size; the
//!   NICs report when each operation completed; `[[row]]`s give Table 1.
//! - `ping-bulk` (Table 2): windows of messages each way, the best window per size.
//! - `channels` (Figs 3–6, and the comparisons beyond the paper): one sender, one
//!   receiver per class of QoS channels (CBR, or an aggregate of MPEG streams) and one
//!   for a best-effort channel; the load grows with the number of channels per class.

use qos_core::source::{parse_toml, Located};
use qos_core::units::{Bandwidth, Bytes, Duration};
use qos_sim::myrinet::Firmware;
use qos_sim::report::check::{check_tolerance, Role, Source, Unit};
use serde::{Deserialize, Serialize};
use toml::Spanned;

/// The shipped scenarios, in the paper's order.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "table-1",
        include_str!("../../../../scenarios/nagar/table-1.toml"),
    ),
    (
        "table-2",
        include_str!("../../../../scenarios/nagar/table-2.toml"),
    ),
    (
        "fig-3-4",
        include_str!("../../../../scenarios/nagar/fig-3-4.toml"),
    ),
    (
        "fig-5",
        include_str!("../../../../scenarios/nagar/fig-5.toml"),
    ),
    (
        "fig-6",
        include_str!("../../../../scenarios/nagar/fig-6.toml"),
    ),
    (
        "beyond",
        include_str!("../../../../scenarios/nagar/beyond.toml"),
    ),
];

/// Which experiment a scenario is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Table 1: stage completion times in a ping-pong.
    StageTimes,
    /// Table 2: ping-bulk latency.
    PingBulk,
    /// Figs 3–6: QoS and best-effort channels from one sender, load sweep.
    Channels,
}

/// A control program, or one of the comparisons beyond the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// SVIA (§3.1).
    Svia,
    /// PVIA (§3.2).
    Pvia,
    /// QoSVIA (§3.3).
    Qosvia,
    /// QoSVIA behind the thesis's admission control (qos-core's ledger), which the
    /// paper leaves to future work (§3.3, §5).
    QosviaAdmission,
    /// PVIA with Gulati's rate control in place of VirtualClock, behind the same
    /// admission, the best-effort channel paced at the thesis rule's share.
    PviaRateControl,
    /// QoSVIA whose LCP takes finished DMA requests first come first served (the
    /// model's `ordered_completions` off).
    QosviaFcfsCompletions,
}

impl Variant {
    /// The three control programs of the paper.
    pub const PAPER: [Variant; 3] = [Variant::Svia, Variant::Pvia, Variant::Qosvia];

    /// The name in files and tables.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Svia => "svia",
            Variant::Pvia => "pvia",
            Variant::Qosvia => "qosvia",
            Variant::QosviaAdmission => "qosvia-admission",
            Variant::PviaRateControl => "pvia-rate-control",
            Variant::QosviaFcfsCompletions => "qosvia-fcfs-completions",
        }
    }

    /// The firmware its NICs run.
    pub fn firmware(self) -> Firmware {
        match self {
            Variant::Svia => Firmware::Svia,
            Variant::Pvia => Firmware::Pvia,
            Variant::Qosvia | Variant::QosviaAdmission | Variant::QosviaFcfsCompletions => {
                Firmware::Qosvia
            }
            Variant::PviaRateControl => Firmware::PviaRateControl,
        }
    }

    /// Whether channels go through admission control first.
    pub fn admits(self) -> bool {
        matches!(self, Variant::QosviaAdmission | Variant::PviaRateControl)
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `[[row]]` of a table scenario: one row of the paper's table for one control program.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowDef {
    /// A Table 1 stage (`send-desc-prog` …), `one-way` (Table 1's last row) or
    /// `latency` (Table 2).
    pub metric: Spanned<String>,
    /// The control program.
    pub firmware: Variant,
    /// One value per message size, in the order of `sizes` (fewer: the rest has none).
    pub published: Spanned<Vec<f64>>,
    /// Where the values come from.
    pub source: Source,
    /// `fit` when the calibration was tuned to them (default prediction).
    pub role: Option<Role>,
    /// Why the model differs, when that is understood.
    pub note: Option<String>,
}

/// `[[class]]` of a channels scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassDef {
    /// Name in tables ("2 MB/s").
    pub name: String,
    /// Negotiated bandwidth of each channel of the class.
    pub rate: Bandwidth,
    /// VBR: each channel carries this many MPEG-1 streams (synthetic, 25 frames/s),
    /// one message per frame; absent: CBR messages of the scenario's size.
    pub streams: Option<u32>,
}

/// `[best_effort]`: one best-effort channel with Poisson arrivals.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BestEffortDef {
    /// Mean rate.
    pub rate: Bandwidth,
}

/// `[knee]`: how knees are read off the sweeps.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KneeDef {
    /// The class whose θ marks the knee.
    pub class: Spanned<String>,
    /// The knee is where that θ first exceeds this (interpolated between points).
    pub theta: f64,
    /// The best-effort channel saturates where its mean latency first exceeds this.
    pub be_latency: Option<Duration>,
}

/// `[[expect]]`: a published value or a stated ordering.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectDef {
    /// Metric (see [`metric_unit`]).
    pub metric: Spanned<String>,
    /// The control program (single-valued metrics) or the numerator of a ratio.
    pub firmware: Option<Variant>,
    /// The denominator of a ratio.
    pub to: Option<Variant>,
    /// The class (θ, messages with jitter).
    pub class: Option<Spanned<String>>,
    /// The load point, by its total injected load in MB/s (channels).
    pub at: Option<Spanned<f64>>,
    /// The message size (ping-bulk).
    pub size: Option<Bytes>,
    /// The published value (1 for an ordering).
    pub published: f64,
    /// Where it comes from.
    pub source: Source,
    /// `fit` or `prediction` (default).
    pub role: Option<Role>,
    /// `within` (default), `at-most`, `at-least`.
    #[serde(default)]
    pub mode: Mode,
    /// Relative tolerance (default and maximum: the bar).
    pub tolerance: Option<Spanned<f64>>,
    /// Why the model differs, when that is understood.
    pub note: Option<String>,
}

/// How an `[[expect]]` compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Two-sided, within the tolerance.
    #[default]
    Within,
    /// The paper states an upper bound or an ordering (≤).
    AtMost,
    /// The paper states a lower bound or an ordering (≥).
    AtLeast,
}

/// A scenario file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name.
    pub name: String,
    /// One-line title.
    pub title: String,
    /// What of the paper it reproduces ("Table 1", "Fig 5").
    #[serde(default)]
    pub figure: String,
    /// The experiment.
    pub kind: Kind,
    /// Control programs to run (default: SVIA, PVIA, QoSVIA).
    #[serde(default)]
    pub firmware: Vec<Variant>,
    /// Seed (default 1).
    pub seed: Option<u64>,
    /// Message sizes (tables).
    #[serde(default)]
    pub sizes: Vec<Bytes>,
    /// Round trips per ping-pong (stage-times).
    pub iterations: Option<u64>,
    /// Windows tried (ping-bulk).
    #[serde(default)]
    pub windows: Vec<u32>,
    /// Messages each way per ping-bulk run, over all its rounds.
    pub messages: Option<u64>,
    /// Table rows.
    #[serde(default)]
    pub row: Vec<RowDef>,
    /// Message size of CBR and best-effort channels (channels).
    pub message: Option<Bytes>,
    /// Simulated time per load point (channels).
    pub duration: Option<Duration>,
    /// Excluded start of each run.
    pub warmup: Option<Duration>,
    /// Runs per load point, each with its own seeded channel phases, pooled (default 1).
    pub replications: Option<u32>,
    /// QoS classes, one receiver each.
    #[serde(default)]
    pub class: Vec<ClassDef>,
    /// The best-effort channel, to its own receiver.
    pub best_effort: Option<BestEffortDef>,
    /// Load points: channels per class.
    #[serde(default)]
    pub channels: Vec<Spanned<Vec<u32>>>,
    /// Knee definition.
    pub knee: Option<KneeDef>,
    /// Published values and orderings.
    #[serde(default)]
    pub expect: Vec<ExpectDef>,
}

/// Metrics an `[[expect]]` may name in a scenario of `kind`.
pub fn metrics(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::StageTimes => &[],
        Kind::PingBulk => &["latency-ratio"],
        Kind::Channels => &[
            "knee",
            "knee-ratio",
            "be-saturation",
            "theta-ratio",
            "jittered-ratio",
            "be-latency-ratio",
        ],
    }
}

/// The unit of a metric.
pub fn metric_unit(metric: &str) -> Unit {
    match metric {
        "knee" | "be-saturation" => Unit::MbPerSec,
        m if m.ends_with("-ratio") => Unit::Ratio,
        _ => Unit::Us,
    }
}

fn at(file: &str, text: &str, span: std::ops::Range<usize>, msg: impl Into<String>) -> Located {
    Located::at(file, text, span.start, msg)
}

impl Scenario {
    /// The control programs to run.
    pub fn variants(&self) -> Vec<Variant> {
        if self.firmware.is_empty() {
            Variant::PAPER.to_vec()
        } else {
            self.firmware.clone()
        }
    }

    /// Total injected load of each point (MB/s): channels × rate per class, plus the
    /// best-effort channel.
    pub fn loads(&self) -> Vec<f64> {
        let be = self
            .best_effort
            .as_ref()
            .map_or(0.0, |b| b.rate.mb_per_sec());
        self.channels
            .iter()
            .map(|row| {
                be + row
                    .get_ref()
                    .iter()
                    .zip(&self.class)
                    .map(|(&n, c)| f64::from(n) * c.rate.mb_per_sec())
                    .sum::<f64>()
            })
            .collect()
    }

    /// The index of the point whose load is `load` (within 0.01 MB/s).
    pub fn point(&self, load: f64) -> Option<usize> {
        self.loads().iter().position(|l| (l - load).abs() < 0.01)
    }
}

/// Parses and validates a scenario.
pub fn load(file: &str, text: &str) -> Result<Scenario, Located> {
    let s: Scenario = parse_toml(file, text)?;
    let variants = s.variants();
    let known = |v: Variant, span: std::ops::Range<usize>| {
        if variants.contains(&v) {
            Ok(())
        } else {
            Err(at(
                file,
                text,
                span,
                format!("'{v}' is not run by this scenario (firmware = {variants:?})"),
            ))
        }
    };
    match s.kind {
        Kind::StageTimes | Kind::PingBulk => {
            if s.sizes.is_empty() {
                return Err(Located::whole(
                    file,
                    "sizes: give at least one message size",
                ));
            }
            if s.kind == Kind::PingBulk && s.windows.is_empty() {
                return Err(Located::whole(file, "windows: give at least one window"));
            }
            for r in &s.row {
                let m = r.metric.get_ref().as_str();
                let ok = match s.kind {
                    Kind::StageTimes => {
                        m == "one-way" || qos_sim::myrinet::nic::via::Stage::parse(m).is_some()
                    }
                    _ => m == "latency",
                };
                if !ok {
                    return Err(at(
                        file,
                        text,
                        r.metric.span(),
                        format!("unknown row metric '{m}' for kind {:?}", s.kind),
                    ));
                }
                known(r.firmware, r.metric.span())?;
                if r.published.get_ref().len() > s.sizes.len() {
                    return Err(at(
                        file,
                        text,
                        r.published.span(),
                        format!(
                            "{} published values for {} sizes",
                            r.published.get_ref().len(),
                            s.sizes.len()
                        ),
                    ));
                }
            }
        }
        Kind::Channels => {
            if s.class.is_empty() || s.channels.is_empty() {
                return Err(Located::whole(
                    file,
                    "a channels scenario needs [[class]] entries and channels = [[…], …]",
                ));
            }
            for row in &s.channels {
                if row.get_ref().len() != s.class.len() {
                    return Err(at(
                        file,
                        text,
                        row.span(),
                        format!(
                            "{} channel counts for {} classes",
                            row.get_ref().len(),
                            s.class.len()
                        ),
                    ));
                }
            }
            for c in &s.class {
                if c.rate.is_zero() || c.streams == Some(0) {
                    return Err(Located::whole(
                        file,
                        format!("class '{}': rate and streams must be positive", c.name),
                    ));
                }
            }
            if s.message.is_some_and(|m| m.is_zero()) {
                return Err(Located::whole(file, "message must be positive"));
            }
            if let Some(k) = &s.knee {
                if !s.class.iter().any(|c| &c.name == k.class.get_ref()) {
                    return Err(at(
                        file,
                        text,
                        k.class.span(),
                        format!("no class named '{}'", k.class.get_ref()),
                    ));
                }
                if !(k.theta.is_finite() && k.theta > 0.0) {
                    return Err(at(
                        file,
                        text,
                        k.class.span(),
                        "knee.theta must be positive",
                    ));
                }
            }
        }
    }
    let allowed = metrics(s.kind);
    for e in &s.expect {
        let m = e.metric.get_ref().as_str();
        if !allowed.contains(&m) {
            return Err(at(
                file,
                text,
                e.metric.span(),
                format!(
                    "unknown metric '{m}' for kind {:?} (expected one of {})",
                    s.kind,
                    allowed.join(", ")
                ),
            ));
        }
        let Some(fw) = e.firmware else {
            return Err(at(
                file,
                text,
                e.metric.span(),
                "firmware = \"…\" is required",
            ));
        };
        known(fw, e.metric.span())?;
        let ratio = m.ends_with("-ratio");
        match (ratio, e.to) {
            (true, Some(to)) => known(to, e.metric.span())?,
            (true, None) => {
                return Err(at(file, text, e.metric.span(), "a ratio needs to = \"…\""))
            }
            (false, Some(_)) => {
                return Err(at(
                    file,
                    text,
                    e.metric.span(),
                    "only a ratio takes to = \"…\"",
                ))
            }
            (false, None) => {}
        }
        if let Some(t) = &e.tolerance {
            if e.mode != Mode::Within {
                return Err(at(
                    file,
                    text,
                    t.span(),
                    "a tolerance only applies to mode = \"within\"",
                ));
            }
            check_tolerance(metric_unit(m), *t.get_ref()).map_err(|err| {
                at(
                    file,
                    text,
                    t.span(),
                    format!("{err}: a check the model does not meet shows as a miss, with a note"),
                )
            })?;
        }
        if let Some(c) = &e.class {
            if !s.class.iter().any(|x| &x.name == c.get_ref()) {
                return Err(at(
                    file,
                    text,
                    c.span(),
                    format!("no class named '{}'", c.get_ref()),
                ));
            }
        }
        let needs_class = matches!(m, "theta-ratio" | "jittered-ratio");
        if needs_class && e.class.is_none() {
            return Err(at(
                file,
                text,
                e.metric.span(),
                format!("{m} needs class = \"…\""),
            ));
        }
        let needs_at = matches!(m, "theta-ratio" | "jittered-ratio" | "be-latency-ratio");
        match (&e.at, needs_at) {
            (Some(a), _) => {
                if s.point(*a.get_ref()).is_none() {
                    return Err(at(
                        file,
                        text,
                        a.span(),
                        format!(
                            "no load point of {} MB/s (points: {:?})",
                            a.get_ref(),
                            s.loads()
                        ),
                    ));
                }
            }
            (None, true) => {
                return Err(at(
                    file,
                    text,
                    e.metric.span(),
                    format!("{m} needs at = <load MB/s>"),
                ))
            }
            (None, false) => {}
        }
        if m == "latency-ratio" && !e.size.is_some_and(|z| s.sizes.contains(&z)) {
            return Err(at(
                file,
                text,
                e.metric.span(),
                "latency-ratio needs size = one of the scenario's sizes",
            ));
        }
        if matches!(m, "knee" | "knee-ratio") && s.knee.is_none() {
            return Err(at(
                file,
                text,
                e.metric.span(),
                "a knee needs a [knee] table",
            ));
        }
        if m == "be-saturation"
            && (s.best_effort.is_none() || s.knee.as_ref().is_none_or(|k| k.be_latency.is_none()))
        {
            return Err(at(
                file,
                text,
                e.metric.span(),
                "be-saturation needs [best_effort] and knee.be_latency",
            ));
        }
    }
    Ok(s)
}

/// The shipped scenarios (all, or the one named).
pub fn builtin(only: Option<&str>) -> Result<Vec<Scenario>, crate::Error> {
    let list: Vec<&(&str, &str)> = BUILTIN
        .iter()
        .filter(|(n, _)| only.is_none_or(|o| o == *n))
        .collect();
    if list.is_empty() {
        return Err(crate::Error::Unknown {
            name: only.unwrap_or_default().to_string(),
            known: BUILTIN
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    list.iter()
        .map(|(name, text)| load(&format!("{name}.toml"), text).map_err(crate::Error::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_loads() {
        let all = builtin(None).unwrap();
        assert_eq!(all.len(), BUILTIN.len());
        assert!(builtin(Some("nope")).is_err());
    }

    #[test]
    fn errors_name_the_line() {
        let text = "name = \"x\"\ntitle = \"t\"\nkind = \"channels\"\nmessage = \"4KiB\"\n\
                    [[class]]\nname = \"a\"\nrate = \"2MB/s\"\n\
                    channels = [[1, 2]]\n";
        let e = load("x.toml", text).unwrap_err();
        assert!(e.to_string().contains("x.toml"), "{e}");
        let text = "name = \"x\"\ntitle = \"t\"\nkind = \"channels\"\nchannels = [[1]]\n\
                    [[class]]\nname = \"a\"\nrate = \"2MB/s\"\n\
                    [[expect]]\nmetric = \"knee\"\nfirmware = \"pvia\"\npublished = 100\n\
                    source = { stated = \"§4.2\" }\ntolerance = 0.2\n";
        let e = load("x.toml", text).unwrap_err();
        assert!(e.to_string().starts_with("x.toml:"), "{e}");
        let text = text.replace("tolerance = 0.2\n", "");
        let e = load("x.toml", &text).unwrap_err();
        assert!(e.to_string().contains("[knee]"), "{e}");
        let text = text.replace("metric = \"knee\"", "metric = \"speed\"");
        let e = load("x.toml", &text).unwrap_err();
        assert!(e.to_string().contains("unknown metric 'speed'"), "{e}");
        assert!(e.to_string().starts_with("x.toml:9"), "{e}");
    }
}
