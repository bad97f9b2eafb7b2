//! The thesis's scenario files (TOML, `model = "gulati"`): what to simulate and which
//! published values to compare with, validated once with errors that name `file:line`
//! (DESIGN.md, "Data flow").
//!
//! A scenario has a `kind` saying which experiment of the thesis it is:
//! `sharing` (flows with fixed IDTs, one run per `[[case]]`, §5.4–5.5), `idt-sweep`
//! (Fig 5.3), `receive-vs-send` (Fig 5.4), `overhead` (Fig 5.1–5.2), `mpi` (Fig 5.9),
//! `timeline` (best-effort dispatch frequencies, Fig 5.11–5.12) and `contention`
//! (cascaded switches, Fig 2.4/3.2). The format is documented in
//! `scenarios/gulati/README.md`; the shipped files are embedded
//! ([`super::builtin`]). Every default is in [`Defaults`].
//!
//! IDTs are written `"2T"`, `"10T/3"` (multiples of T = 96 ticks), `"96ticks"`,
//! `"48us"` or `"0"` (unregulated).

use std::sync::Arc;

use qos_core::source::{parse_toml, Located};
use qos_core::topology::{build, file::TopologySource, NodeId, Topology};
use qos_core::units::{Bandwidth, Bytes, Duration};
use qos_sim::myrinet::{Api, Calibration, Firmware};
use serde::Deserialize;
use toml::Spanned;

use crate::check::expect::{ExpectDef, MetricName};
use crate::check::{Role, Source, Unit};
use crate::experiment::{open, Model};

/// Every default of a thesis scenario, in one place.
pub struct Defaults;

impl Defaults {
    /// Hosts of the crossbar when no topology is given.
    pub const HOSTS: u16 = 4;
    /// Message size.
    pub const MESSAGE: Bytes = Bytes::kib(64);
    /// Firmware: the thesis's rate control.
    pub const FIRMWARE: Firmware = Firmware::RateControl;
    /// Run length of stream experiments.
    pub const DURATION: Duration = Duration::from_ms(60);
    /// Excluded start of stream experiments.
    pub const WARMUP: Duration = Duration::from_ms(5);
    /// Messages per bandwidth test.
    pub const MESSAGES: u64 = 100;
    /// Round trips per latency test.
    pub const ITERATIONS: u64 = 50;
    /// Latency of a bandwidth-manager message.
    pub const CONTROL_LATENCY: Duration = Duration::from_us(100);
}

/// Which experiment a scenario is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Fixed-IDT flows, one run per case; bandwidths and ratios.
    Sharing,
    /// One flow, bandwidth against IDT.
    IdtSweep,
    /// Outgoing bandwidth left for each incoming IDT.
    ReceiveVsSend,
    /// Rate-control firmware against unmodified GM over message sizes.
    Overhead,
    /// GM and MPI bandwidth against IDT.
    Mpi,
    /// Premium and best-effort flows starting and stopping under the manager.
    Timeline,
    /// Cascaded switches, round-robin against managed rate control.
    Contention,
}

impl Kind {
    /// Whether the scenario's flows go through the bandwidth manager (which needs the
    /// model's measured T and Bmax).
    pub fn needs_manager(self) -> bool {
        matches!(self, Kind::Timeline | Kind::Contention)
    }
}

/// `[[flow]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowDef {
    /// Name in tables.
    pub name: String,
    /// Source host.
    pub from: Spanned<String>,
    /// Destination host.
    pub to: Spanned<String>,
    /// Fixed IDT.
    pub idt: Option<Spanned<String>>,
    /// Premium request to the manager.
    pub bandwidth: Option<Spanned<Bandwidth>>,
    /// Best-effort flow under the manager.
    #[serde(default)]
    pub best_effort: bool,
    /// Start time (default 0).
    pub start: Option<Duration>,
    /// Stop time (default: never).
    pub stop: Option<Duration>,
}

/// `[[case]]` of a sharing scenario: one IDT per flow and the published bandwidths.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseDef {
    /// Label ("(2T, 2T)").
    pub label: String,
    /// One IDT per flow, in flow order.
    pub idts: Spanned<Vec<Spanned<String>>>,
    /// Published MB/s per flow (empty: only the inverse-IDT ratio is checked).
    #[serde(default)]
    pub published: Vec<f64>,
    /// Where the published MB/s come from (required with `published`).
    pub source: Option<Source>,
    /// Whether the model was tuned to the published MB/s (default: prediction).
    pub role: Option<Role>,
    /// Why the model differs from the published values, when that is understood.
    pub note: Option<String>,
    /// Flows whose bandwidth ratios are checked, against the first one named
    /// (default: every flow against the first flow).
    pub ratio_of: Option<Vec<Spanned<String>>>,
}

/// The thesis's metrics an `[[expect]]` may name (each kind takes some, [`metrics`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// B_max: the bandwidth of an unregulated flow (IDT 0), MB/s.
    Bmax,
    /// T: where the IDT sweep falls below 98 % of B_max (interpolated), ticks.
    Knee,
    /// The outgoing flow's bandwidth at an incoming IDT (`at`), MB/s.
    Outgoing,
    /// Incoming plus outgoing bandwidth at the sweep's highest incoming rate over the
    /// same sum at its lowest (a ratio; as an ordering, the two sums compared).
    NetGain,
    /// Round-trip latency overhead of rate control, averaged over the sizes, %.
    LatencyOverheadAvg,
    /// Bandwidth loss of rate control, averaged over the sizes, %.
    BandwidthLossAvg,
    /// The largest bandwidth loss of any size, %.
    BandwidthLossWorst,
    /// The MPI-level bandwidth for IDTs below 140 ticks, MB/s.
    MpiCap,
    /// A flow's (`flow`) mean rate in a window (`from`, `until`), MB/s.
    Rate,
    /// B's bandwidth over A's, round-robin switches only.
    BOverAUnregulated,
    /// B's bandwidth over A's, under the manager's rate control.
    BOverARegulated,
    /// B's bandwidth under rate control, MB/s.
    BRegulated,
}

impl MetricName for Metric {
    fn name(self) -> &'static str {
        match self {
            Metric::Bmax => "bmax",
            Metric::Knee => "knee",
            Metric::Outgoing => "outgoing",
            Metric::NetGain => "net-gain",
            Metric::LatencyOverheadAvg => "latency-overhead-avg",
            Metric::BandwidthLossAvg => "bandwidth-loss-avg",
            Metric::BandwidthLossWorst => "bandwidth-loss-worst",
            Metric::MpiCap => "mpi-cap",
            Metric::Rate => "rate",
            Metric::BOverAUnregulated => "b-over-a-unregulated",
            Metric::BOverARegulated => "b-over-a-regulated",
            Metric::BRegulated => "b-regulated",
        }
    }
    fn unit(self) -> Unit {
        match self {
            Metric::Bmax
            | Metric::Outgoing
            | Metric::MpiCap
            | Metric::Rate
            | Metric::BRegulated => Unit::MbPerSec,
            Metric::Knee => Unit::Ticks,
            Metric::LatencyOverheadAvg | Metric::BandwidthLossAvg | Metric::BandwidthLossWorst => {
                Unit::Percent
            }
            Metric::BOverAUnregulated | Metric::BOverARegulated | Metric::NetGain => Unit::Ratio,
        }
    }
    /// An overhead or a loss can be a gain.
    fn signed(self) -> bool {
        matches!(
            self,
            Metric::LatencyOverheadAvg | Metric::BandwidthLossAvg | Metric::BandwidthLossWorst
        )
    }
    fn is_ratio(self) -> bool {
        matches!(
            self,
            Metric::BOverAUnregulated | Metric::BOverARegulated | Metric::NetGain
        )
    }
    fn value_unit(self) -> Unit {
        if self.is_ratio() {
            Unit::MbPerSec
        } else {
            self.unit()
        }
    }
}

/// `[[expect]]` of a thesis scenario.
pub type Expect = ExpectDef<Metric>;

/// A scenario file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// `"gulati"`.
    pub model: Model,
    /// Short name ("two-senders-one-node").
    pub name: String,
    /// One-line title.
    pub title: String,
    /// Thesis figure(s) it reproduces.
    #[serde(default)]
    pub figure: String,
    /// The experiment.
    pub kind: Kind,
    /// NIC firmware (default rate-control).
    pub firmware: Option<Firmware>,
    /// Seed (default 1).
    pub seed: Option<u64>,
    /// A crossbar of this many hosts n0.. (default 4), unless `topology` is given.
    pub hosts: Option<u16>,
    /// A topology file path or inline table (qos-core format).
    pub topology: Option<Spanned<TopologySource>>,
    /// Message size (default 64 KiB).
    pub message: Option<Bytes>,
    /// GM or MPI (default gm).
    pub api: Option<Api>,
    /// Run length of stream experiments.
    pub duration: Option<Duration>,
    /// Warm-up excluded from measurements.
    pub warmup: Option<Duration>,
    /// Messages per bandwidth test.
    pub messages: Option<u64>,
    /// Round trips per latency test.
    pub iterations: Option<u64>,
    /// Bandwidth-manager control latency (default 100 us).
    pub control_latency: Option<Duration>,
    /// Sweep points (IDTs).
    #[serde(default)]
    pub idts: Vec<Spanned<String>>,
    /// Message sizes (overhead).
    #[serde(default)]
    pub sizes: Vec<Bytes>,
    /// Flows.
    #[serde(default)]
    pub flow: Vec<FlowDef>,
    /// Cases (sharing).
    #[serde(default)]
    pub case: Vec<CaseDef>,
    /// Published values and claims.
    #[serde(default)]
    pub expect: Vec<Expect>,
    /// Overrides of the calibration (same tables as calibration.toml).
    pub calibration: Option<toml::Table>,
}

/// A validated scenario: names resolved, IDTs parsed, topology built.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file as written (for names and published values).
    pub file: ScenarioFile,
    /// The cluster.
    pub topology: Arc<Topology>,
    /// The constants.
    pub calibration: Calibration,
    /// Flow endpoints, in flow order.
    pub endpoints: Vec<(NodeId, NodeId)>,
    /// Fixed IDTs of the flows (None: managed or none given).
    pub flow_idts: Vec<Option<Duration>>,
    /// Case IDTs.
    pub case_idts: Vec<Vec<Duration>>,
    /// Sweep IDTs.
    pub sweep: Vec<Duration>,
    /// `at` of each expect.
    pub expect_at: Vec<Option<Duration>>,
}

/// T = 96 ticks (thesis §5.3): the unit of "2T".
pub const T_TICKS: u64 = 96;

/// Parses an IDT: "2T", "10T/3", "96ticks", "48us", "0".
pub fn parse_idt(text: &str, tick: Duration) -> Result<Duration, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if let Some(pos) = t.find('T') {
        let (num, rest) = (&t[..pos], &t[pos + 1..]);
        let k: f64 = if num.trim().is_empty() {
            1.0
        } else {
            num.trim().parse().map_err(|_| {
                format!(
                    "invalid IDT '{text}': expected a multiple of T such as \"2T\" or \"10T/3\""
                )
            })?
        };
        let div: f64 = match rest.trim().strip_prefix('/') {
            Some(d) => d.trim().parse().map_err(|_| {
                format!("invalid IDT '{text}': expected a multiple of T such as \"10T/3\"")
            })?,
            None if rest.trim().is_empty() => 1.0,
            None => return Err(format!("invalid IDT '{text}': unexpected '{rest}' after T")),
        };
        if !(k.is_finite() && div.is_finite() && k >= 0.0 && div > 0.0) {
            return Err(format!(
                "invalid IDT '{text}': must be a non-negative multiple of T"
            ));
        }
        let ps = k / div * (T_TICKS * tick.as_ps()) as f64;
        return Ok(Duration::from_ps(ps.round() as u64));
    }
    Duration::parse_with_tick(t, Some(tick)).map_err(|e| {
        let why = match e {
            qos_core::units::UnitError::UnknownUnit { unit, .. } => {
                format!("unknown unit '{unit}'")
            }
            qos_core::units::UnitError::Negative { .. } => "must not be negative".to_string(),
            _ => "not a time".to_string(),
        };
        format!(
            "invalid IDT '{text}': {why} (an IDT is a time: \"96ticks\", \"48us\", \"2T\", \"10T/3\" or \"0\")"
        )
    })
}

fn at(file: &str, text: &str, span: std::ops::Range<usize>, msg: impl Into<String>) -> Located {
    Located::at(file, text, span.start, msg)
}

/// Metric names each kind understands in `[[expect]]`.
pub fn metrics(kind: Kind) -> &'static [Metric] {
    match kind {
        Kind::Sharing => &[],
        Kind::IdtSweep => &[Metric::Bmax, Metric::Knee],
        Kind::ReceiveVsSend => &[Metric::Outgoing, Metric::NetGain],
        Kind::Overhead => &[
            Metric::LatencyOverheadAvg,
            Metric::BandwidthLossAvg,
            Metric::BandwidthLossWorst,
        ],
        Kind::Mpi => &[Metric::MpiCap],
        Kind::Timeline => &[Metric::Rate],
        Kind::Contention => &[
            Metric::BOverAUnregulated,
            Metric::BOverARegulated,
            Metric::BRegulated,
        ],
    }
}

/// Parses and validates a scenario. `read` resolves `topology = "path"`.
pub fn load(
    file: &str,
    text: &str,
    read: impl FnOnce(&str) -> Result<(String, String), String>,
) -> Result<Scenario, Located> {
    let text: &str = &open(file, text, Model::Gulati)?;
    let f: ScenarioFile = parse_toml(file, text)?;
    let mut calibration = Calibration::thesis();
    if let Some(over) = &f.calibration {
        let mut base: toml::Table = toml::from_str(qos_sim::myrinet::calibration::CALIBRATION_TOML)
            .map_err(|e| Located::whole(file, e.to_string()))?;
        for (k, v) in over {
            match (base.get_mut(k), v) {
                (Some(toml::Value::Table(b)), toml::Value::Table(o)) => {
                    for (kk, vv) in o {
                        if !b.contains_key(kk) {
                            return Err(Located::whole(
                                file,
                                format!("unknown calibration key {k}.{kk}"),
                            ));
                        }
                        b.insert(kk.clone(), vv.clone());
                    }
                }
                _ => {
                    return Err(Located::whole(
                        file,
                        format!("unknown calibration table [{k}]"),
                    ))
                }
            }
        }
        let merged = toml::to_string(&base).map_err(|e| Located::whole(file, e.to_string()))?;
        calibration = Calibration::parse(file, &merged)
            .map_err(|e| Located::whole(file, format!("calibration: {}", e.message)))?;
    }
    let tick = calibration.clock.tick;
    let topology = match &f.topology {
        Some(src) => TopologySource::load(src, file, text, read)?,
        None => {
            let hosts = f.hosts.unwrap_or(Defaults::HOSTS).max(2);
            build::crossbar(hosts, &build::HostDefaults::thesis_cluster())
                .and_then(|b| b.build())
                .map_err(|e| Located::whole(file, e.to_string()))?
        }
    };
    let idt =
        |s: &Spanned<String>| parse_idt(s.get_ref(), tick).map_err(|m| at(file, text, s.span(), m));
    let mut endpoints = Vec::new();
    let mut flow_idts = Vec::new();
    for fl in &f.flow {
        let node = |s: &Spanned<String>| {
            topology.node_id(s.get_ref()).ok_or_else(|| {
                at(
                    file,
                    text,
                    s.span(),
                    format!(
                        "flow '{}': no node '{}' in the topology (nodes: {})",
                        fl.name,
                        s.get_ref(),
                        topology
                            .nodes()
                            .iter()
                            .map(|n| n.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
        };
        let (a, b) = (node(&fl.from)?, node(&fl.to)?);
        if a == b {
            return Err(at(
                file,
                text,
                fl.to.span(),
                format!("flow '{}' goes from a node to itself", fl.name),
            ));
        }
        endpoints.push((a, b));
        let given = [fl.idt.is_some(), fl.bandwidth.is_some(), fl.best_effort]
            .iter()
            .filter(|&&x| x)
            .count();
        if given > 1 {
            return Err(at(
                file,
                text,
                fl.from.span(),
                format!(
                    "flow '{}': give only one of idt, bandwidth, best_effort",
                    fl.name
                ),
            ));
        }
        flow_idts.push(fl.idt.as_ref().map(idt).transpose()?);
    }
    let mut case_idts = Vec::new();
    for c in &f.case {
        if c.idts.get_ref().len() != f.flow.len() {
            return Err(at(
                file,
                text,
                c.idts.span(),
                format!(
                    "case '{}' gives {} IDTs for {} flows",
                    c.label,
                    c.idts.get_ref().len(),
                    f.flow.len()
                ),
            ));
        }
        if let Some(v) = c.published.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(at(
                file,
                text,
                c.idts.span(),
                format!(
                    "case '{}': published = {v}: a bandwidth is a positive number of MB/s",
                    c.label
                ),
            ));
        }
        if !c.published.is_empty() && c.published.len() != f.flow.len() {
            return Err(at(
                file,
                text,
                c.idts.span(),
                format!("case '{}': published needs one value per flow", c.label),
            ));
        }
        for r in c.ratio_of.iter().flatten() {
            if !f.flow.iter().any(|x| &x.name == r.get_ref()) {
                return Err(at(
                    file,
                    text,
                    r.span(),
                    format!("no flow named '{}'", r.get_ref()),
                ));
            }
        }
        case_idts.push(c.idts.get_ref().iter().map(idt).collect::<Result<_, _>>()?);
    }
    let sweep = f.idts.iter().map(idt).collect::<Result<Vec<_>, _>>()?;
    for c in &f.case {
        if !c.published.is_empty() && c.source.is_none() {
            return Err(at(
                file,
                text,
                c.idts.span(),
                format!(
                    "case '{}': published values need a source (stated, figure or derived)",
                    c.label
                ),
            ));
        }
    }
    let mut expect_at = Vec::new();
    for e in &f.expect {
        e.validate(file, text)?;
        let m = e.metric_of(file, text, metrics(f.kind), f.kind)?;
        let allowed: &[&str] = match m {
            Metric::Outgoing => &["at"],
            Metric::Rate => &["flow", "from", "until"],
            _ => &[],
        };
        e.only(file, text, allowed)?;
        if m == Metric::Outgoing && e.at.is_none() {
            return Err(e.error(file, text, "outgoing needs at = <the incoming IDT>"));
        }
        if m == Metric::Rate && (e.flow.is_none() || e.from.is_none() || e.until.is_none()) {
            return Err(e.error(file, text, "rate needs flow, from and until"));
        }
        if let Some(fl) = &e.flow {
            if !f.flow.iter().any(|x| &x.name == fl.get_ref()) {
                return Err(at(
                    file,
                    text,
                    fl.span(),
                    format!("no flow named '{}'", fl.get_ref()),
                ));
            }
        }
        expect_at.push(e.at.as_ref().map(idt).transpose()?);
    }
    Ok(Scenario {
        file: f,
        topology: Arc::new(topology),
        calibration,
        endpoints,
        flow_idts,
        case_idts,
        sweep,
        expect_at,
    })
}

impl Scenario {
    /// Firmware (default rate control).
    pub fn firmware(&self) -> Firmware {
        self.file.firmware.unwrap_or(Defaults::FIRMWARE)
    }
    /// Message size (default 64 KiB).
    pub fn message(&self) -> Bytes {
        self.file.message.unwrap_or(Defaults::MESSAGE)
    }
    /// API (default GM).
    pub fn api(&self) -> Api {
        self.file.api.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idts_parse_in_multiples_of_t_ticks_and_time() {
        let tick = Duration::from_ns(500);
        assert_eq!(parse_idt("2T", tick).unwrap(), Duration::from_us(96));
        assert_eq!(parse_idt("96ticks", tick).unwrap(), Duration::from_us(48));
        assert_eq!(parse_idt("48us", tick).unwrap(), Duration::from_us(48));
        assert_eq!(parse_idt("0", tick).unwrap(), Duration::ZERO);
        let t = parse_idt("10T/3", tick).unwrap();
        assert_eq!(t, Duration::from_us(160));
        assert!(parse_idt("40MB/s", tick)
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_idt("2X", tick).is_err());
    }
}
