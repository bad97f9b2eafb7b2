//! The admission replay behind `clusterqos admit FILE`: replays a topology and an ordered list of requests and
//! releases through the bandwidth resource manager's admission control (thesis
//! §3.3.1) and prints each decision (granted with IDT = T·Bmax/Breq, or rejected with
//! the criterion, resource and numbers) and the best-effort shares after each step
//! (thesis §3.3.2, §4.3; `--policy thesis|max-min`).
//!
//! The script format (see `examples/admit-*.toml`):
//!
//! ```toml
//! topology = "crossbar.toml"        # a path relative to this file, or an inline [topology]
//!
//! [[step]]
//! request = "premium"               # or "best-effort"
//! name = "video"                    # names the flow in later steps
//! from = "n0"                       # "node" or "node:port" (port 0 by default)
//! to = "n2:1"
//! bandwidth = "40MB/s"              # premium only
//! # weight = 2                      # best-effort only (max-min policy), default 1
//! # priority = 0                    # GM priority, part of the flow's identity
//!
//! [[step]]
//! release = "video"
//!
//! [[step]]                          # a job: every flow of a pattern at once, or none
//! job = "solver"                    # (docs/jobs.md)
//! pattern = "all-to-all"            # ring, nearest-neighbour, one-to-many
//! nodes = ["n0", "n1", "n2"]
//! rate = "10MB/s"                   # each flow
//!
//! [[step]]
//! release_job = "solver"
//! ```
//!
//! The whole script is checked and replayed before anything is printed: bad input
//! (malformed TOML, bad units, zero bandwidth, unknown nodes or flows, a route through
//! a missing port) gives one `file:line` error and exit status 2.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use qos_core::admission::{mb, AdmitError, Demand, Grant, Ledger, Rejection};
use qos_core::besteffort::{self, Bottleneck, Policy, Share};
use qos_core::flow::{Class, Endpoint, Flow, FlowKey, Weight};
use qos_core::pattern::Pattern;
use qos_core::source::{decode_text, parse_toml, Located};
use qos_core::topology::file::TopologySource;
use qos_core::topology::Topology;
use qos_core::units::{Bandwidth, Duration};
use serde::{Deserialize, Serialize};
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    topology: Spanned<TopologySource>,
    #[serde(default)]
    step: Vec<Step>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RequestKind {
    Premium,
    BestEffort,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    request: Option<Spanned<RequestKind>>,
    release: Option<Spanned<String>>,
    name: Option<Spanned<String>>,
    from: Option<Spanned<String>>,
    to: Option<Spanned<String>>,
    priority: Option<u8>,
    bandwidth: Option<Spanned<Bandwidth>>,
    weight: Option<Spanned<u32>>,
    job: Option<Spanned<String>>,
    pattern: Option<Spanned<String>>,
    nodes: Option<Spanned<Vec<String>>>,
    rate: Option<Spanned<Bandwidth>>,
    release_job: Option<Spanned<String>>,
}

/// One step's outcome, as printed and as JSON.
#[derive(Debug, Serialize)]
pub struct StepReport {
    step: usize,
    line: usize,
    action: &'static str,
    flow: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bandwidth_mb_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    weight: Option<u32>,
    decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    idt: Option<IdtReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rejection: Option<Rejection>,
    best_effort: Vec<ShareReport>,
}

/// An IDT in picoseconds, microseconds and (with a tick) ticks.
#[derive(Debug, Serialize)]
pub struct IdtReport {
    ps: u64,
    us: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ticks: Option<f64>,
}

/// A best-effort flow's share.
#[derive(Debug, Serialize)]
pub struct ShareReport {
    flow: String,
    rate_mb_per_s: f64,
    idt: Option<IdtReport>,
    limited_by: String,
}

/// A replayed script: every step's decision and the best-effort shares after it.
#[derive(Debug, Serialize)]
pub struct Report {
    file: String,
    policy: Policy,
    #[serde(skip_serializing_if = "Option::is_none")]
    tick_us: Option<f64>,
    steps: Vec<StepReport>,
}

fn idt_report(idt: Duration, tick: Option<Duration>) -> IdtReport {
    IdtReport {
        ps: idt.as_ps(),
        us: idt.as_ps() as f64 / 1e6,
        ticks: tick.map(|t| idt.in_ticks_f64(t)),
    }
}

fn idt_text(i: &IdtReport) -> String {
    let us = trim(i.us, 3);
    match i.ticks {
        Some(t) => format!("IDT {us} us = {} ticks", trim(t, 2)),
        None => format!("IDT {us} us"),
    }
}

fn trim(x: f64, places: usize) -> String {
    let s = format!("{x:.places$}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Replays a script. Errors are located in `file`.
struct Replay<'a> {
    file: &'a str,
    text: &'a str,
    topo: Arc<Topology>,
    ledger: Ledger,
    policy: Policy,
    names: HashMap<String, FlowKey>,
    jobs: HashMap<String, Demand>,
}

impl Replay<'_> {
    fn at<T>(&self, s: &Spanned<T>, msg: impl std::fmt::Display) -> Located {
        Located::at(self.file, self.text, s.span().start, msg.to_string())
    }

    fn endpoint(&self, s: &Spanned<String>) -> Result<Endpoint, Located> {
        let text = s.get_ref().trim();
        let (node, port) = match text.rsplit_once(':') {
            Some((n, p)) => {
                let port = p.trim().parse::<u16>().map_err(|_| {
                    self.at(s, format!("'{text}': the port after ':' must be a number"))
                })?;
                (n.trim(), port)
            }
            None => (text, 0),
        };
        let node = self
            .topo
            .node_id(node)
            .ok_or_else(|| self.at(s, format!("unknown node '{node}'")))?;
        Ok(Endpoint { node, port })
    }

    fn line<T>(&self, s: &Spanned<T>) -> usize {
        qos_core::source::line_of(self.text, s.span().start).0
    }

    fn shares(&self) -> Vec<ShareReport> {
        let tick = self.topo.tick();
        let mut by_key: HashMap<FlowKey, &str> = HashMap::new();
        for e in self.ledger.flows() {
            by_key.insert(e.flow.key, &e.flow.name);
        }
        let mut shares: Vec<Share> = besteffort::allocate(&self.ledger, self.policy);
        shares.sort_by_key(|s| by_key[&s.key].to_string());
        shares
            .into_iter()
            .map(|s| ShareReport {
                flow: by_key[&s.key].to_string(),
                rate_mb_per_s: s.rate.mb_per_sec(),
                idt: s.idt.map(|i| idt_report(i, tick)),
                limited_by: match s.bottleneck {
                    Bottleneck::Peak => "Bmax (peak rate)".to_string(),
                    Bottleneck::Resource(r) => self.ledger.label(r),
                },
            })
            .collect()
    }

    fn step(&mut self, i: usize, s: &Step) -> Result<StepReport, Located> {
        let n = i + 1;
        if let Some(j) = &s.job {
            return self.job(n, s, j);
        }
        if let Some(j) = &s.release_job {
            return self.release_job(n, j);
        }
        match (&s.request, &s.release) {
            (Some(_), Some(r)) => Err(self.at(r, "a step either requests or releases, not both")),
            (None, Some(r)) => self.release(n, s, r),
            (Some(kind), None) => self.request(n, s, kind),
            (None, None) => {
                let msg = format!("step {n}: needs `request = \"premium\"`, `request = \"best-effort\"` or `release = \"name\"`");
                Err(match &s.name {
                    Some(name) => self.at(name, msg),
                    None => Located::whole(self.file, msg),
                })
            }
        }
    }

    fn release(&mut self, n: usize, s: &Step, r: &Spanned<String>) -> Result<StepReport, Located> {
        for (field, present) in [
            ("name", s.name.is_some()),
            ("from", s.from.is_some()),
            ("to", s.to.is_some()),
            ("bandwidth", s.bandwidth.is_some()),
            ("weight", s.weight.is_some()),
        ] {
            if present {
                return Err(self.at(
                    r,
                    format!("a release takes only the flow's name, not `{field}`"),
                ));
            }
        }
        let name = r.get_ref();
        let key = self
            .names
            .remove(name)
            .ok_or_else(|| self.at(r, format!("release of unknown flow '{name}' (not requested, rejected or already released)")))?;
        let flow = self.ledger.release(&key).map_err(|e| self.at(r, e))?;
        let bandwidth = match flow.class {
            Class::Premium { bandwidth } => Some(bandwidth.mb_per_sec()),
            Class::BestEffort { .. } => None,
        };
        Ok(StepReport {
            step: n,
            line: self.line(r),
            action: "release",
            flow: name.clone(),
            from: None,
            to: None,
            bandwidth_mb_per_s: bandwidth,
            weight: None,
            decision: "released",
            idt: None,
            reason: None,
            rejection: None,
            best_effort: self.shares(),
        })
    }

    fn request(
        &mut self,
        n: usize,
        s: &Step,
        kind: &Spanned<RequestKind>,
    ) -> Result<StepReport, Located> {
        let need = |v: &Option<Spanned<String>>, key: &str| {
            v.clone()
                .ok_or_else(|| self.at(kind, format!("step {n}: a request needs `{key}`")))
        };
        let name = need(&s.name, "name")?;
        let from = need(&s.from, "from")?;
        let to = need(&s.to, "to")?;
        if self.names.contains_key(name.get_ref()) {
            return Err(self.at(
                &name,
                format!("flow '{}' is already active", name.get_ref()),
            ));
        }
        let key = FlowKey {
            src: self.endpoint(&from)?,
            dst: self.endpoint(&to)?,
            priority: s.priority.unwrap_or(0),
        };
        if key.src.node == key.dst.node {
            return Err(self.at(&to, "source and destination are the same node"));
        }
        let class = match kind.get_ref() {
            RequestKind::Premium => {
                if let Some(w) = &s.weight {
                    return Err(self.at(w, "`weight` is for best-effort flows"));
                }
                let b = s.bandwidth.as_ref().ok_or_else(|| {
                    self.at(
                        kind,
                        format!("step {n}: a premium request needs `bandwidth`"),
                    )
                })?;
                if b.get_ref().is_zero() {
                    return Err(self.at(b, "bandwidth must be greater than zero"));
                }
                Class::Premium {
                    bandwidth: *b.get_ref(),
                }
            }
            RequestKind::BestEffort => {
                if let Some(b) = &s.bandwidth {
                    return Err(self.at(
                        b,
                        "a best-effort request takes no `bandwidth` (use request = \"premium\")",
                    ));
                }
                let weight = match &s.weight {
                    None => Weight::default(),
                    Some(w) if *w.get_ref() == 0 || Weight(*w.get_ref()) > Weight::MAX => {
                        return Err(self.at(w, "weight must be between 1 and 1000000"))
                    }
                    Some(w) => Weight(*w.get_ref()),
                };
                Class::BestEffort { weight }
            }
        };
        let flow = Flow {
            key,
            name: name.get_ref().clone(),
            class,
        };
        let tick = self.topo.tick();
        let mut report = StepReport {
            step: n,
            line: self.line(kind),
            action: "request",
            flow: flow.name.clone(),
            from: Some(from.get_ref().clone()),
            to: Some(to.get_ref().clone()),
            bandwidth_mb_per_s: None,
            weight: None,
            decision: "granted",
            idt: None,
            reason: None,
            rejection: None,
            best_effort: Vec::new(),
        };
        match class {
            Class::Premium { bandwidth } => {
                report.bandwidth_mb_per_s = Some(bandwidth.mb_per_sec())
            }
            Class::BestEffort { weight } => report.weight = Some(weight.0),
        }
        match self.ledger.request(flow) {
            Ok(Grant { idt, .. }) => {
                self.names.insert(name.get_ref().clone(), key);
                report.idt = idt.map(|i| idt_report(i, tick));
            }
            Err(AdmitError::Rejected(r)) => {
                report.decision = "rejected";
                report.reason = Some(r.to_string());
                report.rejection = Some(*r);
            }
            Err(e @ AdmitError::AboveBmax { .. }) => {
                report.decision = "rejected";
                report.reason = Some(e.to_string().trim_start_matches("rejected: ").to_string());
            }
            Err(e) => return Err(self.at(&name, e)),
        }
        report.best_effort = self.shares();
        Ok(report)
    }
}

impl Replay<'_> {
    /// A job step: its pattern's flows admitted all at once or none (the manager's
    /// `/v1/jobs`).
    fn job(&mut self, n: usize, s: &Step, j: &Spanned<String>) -> Result<StepReport, Located> {
        if s.request.is_some() || s.release.is_some() || s.release_job.is_some() {
            return Err(self.at(j, "a job step takes `pattern`, `nodes` and `rate` only"));
        }
        let name = j.get_ref().clone();
        if self.jobs.contains_key(&name) {
            return Err(self.at(j, format!("job '{name}' is already held")));
        }
        let need = |what: &str| self.at(j, format!("step {n}: a job needs `{what}`"));
        let pattern_text = s
            .pattern
            .as_ref()
            .map_or("all-to-all", |p| p.get_ref().as_str());
        let pattern: Pattern = pattern_text
            .parse()
            .map_err(|e: String| self.at(s.pattern.as_ref().unwrap_or(j), e))?;
        let nodes = s.nodes.as_ref().ok_or_else(|| need("nodes"))?;
        let rate = s.rate.as_ref().ok_or_else(|| need("rate"))?;
        if rate.get_ref().is_zero() {
            return Err(self.at(rate, "rate must be greater than zero"));
        }
        let mut ids = Vec::new();
        for node in nodes.get_ref() {
            let id = self
                .topo
                .node_id(node)
                .ok_or_else(|| self.at(nodes, format!("unknown node '{node}'")))?;
            if ids.contains(&id) {
                return Err(self.at(nodes, format!("node '{node}' is listed twice")));
            }
            ids.push(id);
        }
        if ids.len() < 2 {
            return Err(self.at(nodes, "a job needs at least 2 nodes"));
        }
        let b = *rate.get_ref();
        let demand = self
            .ledger
            .demand(pattern.pairs(ids.len()).map(|(a, c)| (ids[a], ids[c], b)))
            .map_err(|e| self.at(rate, e))?;
        let mut report = StepReport {
            step: n,
            line: self.line(j),
            action: "job",
            flow: format!(
                "{name} ({} over {} nodes, {} flows)",
                pattern.name(),
                ids.len(),
                demand.flows
            ),
            from: None,
            to: None,
            bandwidth_mb_per_s: Some(b.mb_per_sec()),
            weight: None,
            decision: "granted",
            idt: None,
            reason: None,
            rejection: None,
            best_effort: Vec::new(),
        };
        match self.ledger.reserve(&demand) {
            Ok(()) => {
                self.jobs.insert(name, demand);
            }
            Err(r) => {
                let short = (r.reserved.bytes_per_sec() + r.requested.bytes_per_sec())
                    .saturating_sub(r.capacity.bytes_per_sec());
                report.decision = "rejected";
                report.reason = Some(format!(
                    "{r}, short by {}",
                    mb(Bandwidth::from_bytes_per_sec(short))
                ));
                report.rejection = Some(*r);
            }
        }
        report.best_effort = self.shares();
        Ok(report)
    }

    fn release_job(&mut self, n: usize, j: &Spanned<String>) -> Result<StepReport, Located> {
        let name = j.get_ref();
        let demand = self.jobs.remove(name).ok_or_else(|| {
            self.at(
                j,
                format!(
                    "release of unknown job '{name}' (not reserved, rejected or already released)"
                ),
            )
        })?;
        self.ledger.unreserve(&demand);
        Ok(StepReport {
            step: n,
            line: self.line(j),
            action: "release_job",
            flow: name.clone(),
            from: None,
            to: None,
            bandwidth_mb_per_s: None,
            weight: None,
            decision: "released",
            idt: None,
            reason: None,
            rejection: None,
            best_effort: self.shares(),
        })
    }
}

/// Why a script could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The script file could not be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// A mistake in the script or its topology, with its file and line.
    #[error(transparent)]
    Script(#[from] Located),
}

/// Loads, checks and replays the script (a topology path in it is relative to the
/// script's directory). The whole script is replayed before anything is returned.
pub fn replay(path: &Path, policy: Policy) -> Result<Report, ReplayError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ReplayError::Read {
        file: file.clone(),
        source,
    })?;
    let text = decode_text(&file, bytes)?;
    let base = path.parent().unwrap_or(Path::new("."));
    Ok(replay_text(&file, &text, policy, |p| {
        let full = base.join(p);
        let name = full.display().to_string();
        let bytes =
            std::fs::read(&full).map_err(|e| format!("cannot read topology file {name}: {e}"))?;
        decode_text(&name, bytes)
            .map(|body| (name.clone(), body))
            .map_err(|e| e.to_string())
    })?)
}

/// [`replay`] of a script's `text` (named `file` in errors); `read` resolves a
/// `topology = "path"` to its name and text.
pub fn replay_text(
    file: &str,
    text: &str,
    policy: Policy,
    read: impl FnOnce(&str) -> Result<(String, String), String>,
) -> Result<Report, Located> {
    let script: Script = parse_toml(file, text)?;
    let topo = TopologySource::load(&script.topology, file, text, read)?;
    let topo = Arc::new(topo);
    let mut r = Replay {
        file,
        text,
        topo: topo.clone(),
        ledger: Ledger::new(topo.clone()),
        policy,
        names: HashMap::new(),
        jobs: HashMap::new(),
    };
    let mut steps = Vec::with_capacity(script.step.len());
    for (i, s) in script.step.iter().enumerate() {
        steps.push(r.step(i, s)?);
    }
    Ok(Report {
        file: file.to_string(),
        policy,
        tick_us: topo.tick().map(|t| t.as_ps() as f64 / 1e6),
        steps,
    })
}

impl Report {
    /// Number of steps replayed.
    pub fn len(&self) -> usize {
        self.steps.len()
    }
    /// Whether the script had no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
    /// The best-effort rate of flow `name` after step `step` (1-based), MB/s.
    pub fn best_effort_after(&self, step: usize, name: &str) -> Option<f64> {
        self.steps
            .get(step.checked_sub(1)?)?
            .best_effort
            .iter()
            .find(|s| s.flow == name)
            .map(|s| s.rate_mb_per_s)
    }
    /// Step `step`'s (1-based) decision: "granted", "rejected" or "released".
    pub fn decision(&self, step: usize) -> Option<&'static str> {
        Some(self.steps.get(step.checked_sub(1)?)?.decision)
    }
}

/// The report as text: one line per step, then the best-effort shares after it.
pub fn render_text(rep: &Report) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let policy = match rep.policy {
        Policy::Thesis => "thesis rule",
        Policy::MaxMin => "weighted max-min",
    };
    let _ = writeln!(
        o,
        "{}: {} steps, best-effort policy: {policy}",
        rep.file,
        rep.steps.len()
    );
    for s in &rep.steps {
        let what = match (s.action, s.bandwidth_mb_per_s, s.weight) {
            ("job", Some(b), _) => format!(
                "job {} at {} a flow",
                s.flow,
                mb(Bandwidth::from_mb_per_sec(b))
            ),
            ("release_job", _, _) => format!("release job {}", s.flow),
            ("release", Some(b), _) => format!(
                "release {} (premium {})",
                s.flow,
                mb(Bandwidth::from_mb_per_sec(b))
            ),
            ("release", None, _) => format!("release {} (best-effort)", s.flow),
            (_, Some(b), _) => format!(
                "request {} (premium {}, {} -> {})",
                s.flow,
                mb(Bandwidth::from_mb_per_sec(b)),
                s.from.as_deref().unwrap_or("?"),
                s.to.as_deref().unwrap_or("?")
            ),
            (_, None, w) => format!(
                "request {} (best-effort, weight {}, {} -> {})",
                s.flow,
                w.unwrap_or(1),
                s.from.as_deref().unwrap_or("?"),
                s.to.as_deref().unwrap_or("?")
            ),
        };
        let outcome = match (s.decision, &s.idt, &s.reason) {
            ("granted", Some(i), _) => format!("granted, {}", idt_text(i)),
            ("rejected", _, Some(r)) => format!("REJECTED: {r}"),
            (d, _, _) => d.to_string(),
        };
        let _ = writeln!(o, "#{} (line {}) {what}: {outcome}", s.step, s.line);
        if s.best_effort.is_empty() {
            let _ = writeln!(o, "    best-effort: none");
        }
        for b in &s.best_effort {
            let idt = b
                .idt
                .as_ref()
                .map_or("stopped (no surplus)".to_string(), idt_text);
            let _ = writeln!(
                o,
                "    best-effort {}: {}, {idt}, limited by {}",
                b.flow,
                mb(Bandwidth::from_mb_per_sec(b.rate_mb_per_s)),
                b.limited_by
            );
        }
    }
    o
}
