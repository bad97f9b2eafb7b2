//! The scenario files of `reproduce nagar` (`scenarios/nagar/*.toml`, `model =
//! "nagar"`, embedded in the binary; format in `scenarios/nagar/README.md`), validated
//! once with errors that name `file:line`; every default is in [`Defaults`]. Three
//! kinds:
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
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::check::expect::{self, MetricName};
use crate::check::{Role, Source, Unit};
use crate::experiment::{open, Model};

/// Every default of a Nagar scenario, in one place.
pub struct Defaults;

impl Defaults {
    /// Round trips per ping-pong (stage-times).
    pub const ITERATIONS: u64 = 50;
    /// Messages each way per ping-bulk run.
    pub const MESSAGES: u64 = 256;
    /// Message size of the channels.
    pub const MESSAGE: Bytes = Bytes::kib(4);
    /// Simulated time per load point.
    pub const DURATION: Duration = Duration::from_ms(200);
    /// Runs per load point.
    pub const REPLICATIONS: u32 = 1;
}

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

    /// Every variant.
    pub const ALL: [Variant; 6] = [
        Variant::Svia,
        Variant::Pvia,
        Variant::Qosvia,
        Variant::QosviaAdmission,
        Variant::PviaRateControl,
        Variant::QosviaFcfsCompletions,
    ];

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
    /// as `frame_message` says; absent: CBR messages of the scenario's size.
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

/// `[factors]`: SVIA's θ against PVIA's with one model factor switched at a time
/// (channels scenarios running both), to find what sets the ratio.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorsDef {
    /// The class whose θ is compared.
    pub class: Spanned<String>,
    /// The load points (MB/s) measured.
    pub loads: Spanned<Vec<f64>>,
}

/// Nagar's metrics an `[[expect]]` may name; `case` is a control program, `vs_case`
/// the one a comparison divides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Where the knee class's θ first exceeds `[knee].theta`, MB/s of injected load.
    Knee,
    /// Where the best-effort channel's latency first exceeds `[knee].be_latency`, MB/s.
    BeSaturation,
    /// θ of a class (`class`) at a load point (`load`).
    Theta,
    /// The fraction of a class's messages with jitter at a load point.
    Jittered,
    /// The best-effort channel's mean 1-way latency at a load point, µs.
    BeLatency,
    /// Ping-bulk 1-way latency at a message size (`at`), µs.
    Latency,
}

impl MetricName for Metric {
    fn name(self) -> &'static str {
        match self {
            Metric::Knee => "knee",
            Metric::BeSaturation => "be-saturation",
            Metric::Theta => "theta",
            Metric::Jittered => "jittered",
            Metric::BeLatency => "be-latency",
            Metric::Latency => "latency",
        }
    }
    fn unit(self) -> Unit {
        match self {
            Metric::Knee | Metric::BeSaturation => Unit::MbPerSec,
            Metric::Theta | Metric::Jittered => Unit::Fraction,
            Metric::BeLatency | Metric::Latency => Unit::Us,
        }
    }
    /// θ, jittered fractions and best-effort latencies have intervals from seeded
    /// replications (a scenario with `replications` of 2 or more).
    fn has_interval(self) -> bool {
        matches!(self, Metric::Theta | Metric::Jittered | Metric::BeLatency)
    }
}

/// `[[expect]]` of a Nagar scenario.
pub type ExpectDef = expect::ExpectDef<Metric>;

/// The control program an `[[expect]]` names (validated when loaded).
pub fn variant(e: &Spanned<String>) -> Option<Variant> {
    Variant::ALL.into_iter().find(|v| v.name() == e.get_ref())
}

/// A scenario file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// `"nagar"`.
    pub model: Model,
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
    /// How the frames of MPEG channels become messages (channels; default one message
    /// per frame).
    pub frame_message: Option<FrameMessage>,
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
    /// Whether QoSVIA's LCP takes finished host DMA requests in stamp order (channels and
    /// ping-bulk; default: the VIA calibration's `ordered_completions`). A rule of this
    /// model the paper does not describe, so a scenario may declare it as an assumption.
    pub ordered_completions: Option<bool>,
    /// SVIA's θ against PVIA's with one factor switched at a time (shown, not checked).
    pub factors: Option<FactorsDef>,
    /// Published values and orderings.
    #[serde(default)]
    pub expect: Vec<ExpectDef>,
    /// Every control program runs as this one, under its own name: the firmware's
    /// design switched off, for the mechanism-off tests (never in a file).
    #[serde(skip)]
    pub runs_as: Option<Variant>,
    /// The knee thresholds and classes the knees are also read at: the ends of the
    /// assumptions `[knee]` refers to (never in a file; read from their declarations).
    #[serde(skip)]
    pub knee_grid: KneeGrid,
}

/// How an MPEG channel's frames become messages: `"frame"` (one message per frame) or
/// a size (`"4KiB"`: each frame cut into messages of that size and a last, shorter
/// one). Nagar et al. give no rule (§4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameMessage {
    /// One message per frame.
    Frame,
    /// Messages of at most this size.
    Cut(Bytes),
}

impl FrameMessage {
    /// The largest message a frame becomes (no limit for one per frame).
    pub fn limit(self) -> Bytes {
        match self {
            FrameMessage::Frame => Bytes::new(u64::MAX),
            FrameMessage::Cut(b) => b,
        }
    }
}

impl<'de> Deserialize<'de> for FrameMessage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == "frame" {
            return Ok(FrameMessage::Frame);
        }
        match s.parse::<Bytes>() {
            Ok(b) if !b.is_zero() => Ok(FrameMessage::Cut(b)),
            Ok(_) => Err(serde::de::Error::custom(
                "frame_message: a size must be positive",
            )),
            Err(e) => Err(serde::de::Error::custom(format!(
                "frame_message: \"frame\" (one message per frame) or a size: {e}"
            ))),
        }
    }
}

/// Where else knees are read: each threshold with each class (the declared one first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KneeGrid {
    /// Thresholds: the declared value, then the ends of its range.
    pub thetas: Vec<f64>,
    /// Classes: the declared one, then its alternatives.
    pub classes: Vec<String>,
}

/// The values `[knee].theta` and `[knee].class` may take: for each that refers to a
/// declared assumption, its value and the ends of its range (or alternatives); else
/// the value written.
fn knee_grid(file: &str, raw: &str, knee: &KneeDef) -> KneeGrid {
    let referred = |key: &str| -> Option<crate::assume::Assumption> {
        let v: toml::Value = toml::from_str(raw).ok()?;
        let name = v
            .get("knee")?
            .get(key)?
            .get(crate::assume::REFERENCE)?
            .as_str()?
            .to_string();
        crate::assume::declared(file, raw)
            .ok()?
            .into_iter()
            .find(|a| a.name == name)
    };
    let mut thetas = vec![knee.theta];
    if let Some(a) = referred("theta") {
        thetas.extend(a.ends().iter().filter_map(toml::Value::as_float));
    }
    let mut classes = vec![knee.class.get_ref().clone()];
    if let Some(a) = referred("class") {
        classes.extend(a.ends().iter().filter_map(|v| v.as_str().map(String::from)));
    }
    KneeGrid { thetas, classes }
}

/// Metrics an `[[expect]]` may name in a scenario of `kind`.
pub fn metrics(kind: Kind) -> &'static [Metric] {
    match kind {
        Kind::StageTimes => &[],
        Kind::PingBulk => &[Metric::Latency],
        Kind::Channels => &[
            Metric::Knee,
            Metric::BeSaturation,
            Metric::Theta,
            Metric::Jittered,
            Metric::BeLatency,
        ],
    }
}

fn at(file: &str, text: &str, span: std::ops::Range<usize>, msg: impl Into<String>) -> Located {
    Located::at(file, text, span.start, msg)
}

impl Scenario {
    /// The program that runs in the place of `v` (itself, but with the firmware's
    /// design switched off).
    pub fn runs(&self, v: Variant) -> Variant {
        self.runs_as.unwrap_or(v)
    }

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
    let raw = text;
    let text: &str = &open(file, text, Model::Nagar)?;
    let mut s: Scenario = parse_toml(file, text)?;
    if let Some(k) = &s.knee {
        s.knee_grid = knee_grid(file, raw, k);
    }
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
            if let Some(f) = &s.factors {
                if !s.class.iter().any(|c| &c.name == f.class.get_ref()) {
                    return Err(at(
                        file,
                        text,
                        f.class.span(),
                        format!("no class named '{}'", f.class.get_ref()),
                    ));
                }
                if let Some(l) = f.loads.get_ref().iter().find(|l| s.point(**l).is_none()) {
                    return Err(at(
                        file,
                        text,
                        f.loads.span(),
                        format!("factors.loads: {l} MB/s is not a load point of this scenario"),
                    ));
                }
                for v in [Variant::Svia, Variant::Pvia] {
                    known(v, f.class.span())?;
                }
            }
        }
    }
    for r in &s.row {
        if let Some(v) = r
            .published
            .get_ref()
            .iter()
            .find(|v| !(v.is_finite() && **v >= 0.0))
        {
            return Err(at(
                file,
                text,
                r.published.span(),
                format!("published = {v}: a time is a non-negative number of µs"),
            ));
        }
    }
    let allowed = metrics(s.kind);
    for e in &s.expect {
        e.validate(file, text)?;
        let m = e.metric_of(file, text, allowed, s.kind)?;
        let selectors: &[&str] = match m {
            Metric::Knee | Metric::BeSaturation => &["case", "vs_case"],
            Metric::Theta | Metric::Jittered => &["case", "vs_case", "load", "class"],
            Metric::BeLatency => &["case", "vs_case", "load"],
            Metric::Latency => &["case", "vs_case", "at"],
        };
        e.only(file, text, selectors)?;
        let Some(fw) = &e.case else {
            return Err(at(
                file,
                text,
                e.metric.span(),
                "case = \"…\" (the control program) is required",
            ));
        };
        for c in [Some(fw), e.vs_case.as_ref()].into_iter().flatten() {
            match variant(c) {
                Some(v) => known(v, c.span())?,
                None => {
                    return Err(at(
                        file,
                        text,
                        c.span(),
                        format!(
                            "no control program '{}' (one of {})",
                            c.get_ref(),
                            Variant::ALL.map(|v| v.name()).join(", ")
                        ),
                    ))
                }
            }
        }
        if e.kind == crate::check::Kind::Ordering
            && e.margin.is_none()
            && s.replications.unwrap_or(Defaults::REPLICATIONS) < 2
        {
            return Err(at(
                file,
                text,
                e.metric.span(),
                "this scenario runs one replication per point, so its runs give no confidence interval: an ordering needs `margin` (or replications >= 2)",
            ));
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
        let needs_class = matches!(m, Metric::Theta | Metric::Jittered);
        if needs_class && e.class.is_none() {
            return Err(at(
                file,
                text,
                e.metric.span(),
                format!("{} needs class = \"…\"", m.name()),
            ));
        }
        let needs_load = matches!(m, Metric::Theta | Metric::Jittered | Metric::BeLatency);
        match (&e.load, needs_load) {
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
                    format!("{} needs load = <load MB/s>", m.name()),
                ))
            }
            (None, false) => {}
        }
        if m == Metric::Latency {
            let size =
                e.at.as_ref()
                    .and_then(|a| a.get_ref().parse::<Bytes>().ok());
            if !size.is_some_and(|z| s.sizes.contains(&z)) {
                return Err(at(
                    file,
                    text,
                    e.at.as_ref().map_or(e.metric.span(), |a| a.span()),
                    "latency needs at = one of the scenario's sizes",
                ));
            }
        }
        if m == Metric::Knee && s.knee.is_none() {
            return Err(at(
                file,
                text,
                e.metric.span(),
                "a knee needs a [knee] table",
            ));
        }
        if m == Metric::BeSaturation
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
        .map(|(name, text)| {
            load(&format!("scenarios/nagar/{name}.toml"), text).map_err(crate::Error::from)
        })
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
        let text = "model = \"nagar\"\nname = \"x\"\ntitle = \"t\"\nkind = \"channels\"\nmessage = \"4KiB\"\n\
                    [[class]]\nname = \"a\"\nrate = \"2MB/s\"\n\
                    channels = [[1, 2]]\n";
        let e = load("x.toml", text).unwrap_err();
        assert!(e.to_string().contains("x.toml"), "{e}");
        let text = "model = \"nagar\"\nname = \"x\"\ntitle = \"t\"\nkind = \"channels\"\nchannels = [[1]]\n\
                    [[class]]\nname = \"a\"\nrate = \"2MB/s\"\n\
                    [[expect]]\nmetric = \"knee\"\ncase = \"pvia\"\npublished = 100\n\
                    source = { stated = \"§4.2\" }\ntolerance = 0.2\n";
        let e = load("x.toml", text).unwrap_err();
        assert!(e.to_string().starts_with("x.toml:"), "{e}");
        let text = text.replace("tolerance = 0.2\n", "");
        let e = load("x.toml", &text).unwrap_err();
        assert!(e.to_string().contains("[knee]"), "{e}");
        let text = text.replace("metric = \"knee\"", "metric = \"speed\"");
        let e = load("x.toml", &text).unwrap_err();
        assert!(e.to_string().contains("speed"), "{e}");
        assert!(e.to_string().starts_with("x.toml:10"), "{e}");
        // A published value that cannot be: a file:line error.
        let bad = text
            .replace("metric = \"speed\"", "metric = \"knee\"")
            .replace("published = 100", "published = -81.8");
        let e = load("x.toml", &bad).unwrap_err();
        assert!(
            e.to_string().starts_with("x.toml:12") && e.to_string().contains("negative"),
            "{e}"
        );
    }
}
