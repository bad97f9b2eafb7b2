//! Scenario files of the Yum et al. reproduction (`scenarios/yum/`, format in
//! `scenarios/yum/README.md`): a cluster run as [`qos_sim::iba::IbaConfig`] writes it
//! (`[network]`, `[hca]`, `[arbitration]`, `[admission]`, `[workload]`, `[run]`), the
//! cases compared (`[[case]]`, each overriding the arbitration or the admission), and
//! the published values and claims checked (`[[expect]]`). Parsed and checked once;
//! every error names the file and line of the key at fault.

use qos_core::source::{parse_toml, Located};
use qos_sim::iba::config::{
    AdmissionSpec, ArbitrationSpec, HcaSpec, IbaConfig, NetworkSpec, RealTimeSpec, RunSpec,
    WorkloadSpec,
};
use qos_sim::iba::congestion::CongestionSpec;
use qos_sim::iba::peak::PowerControlSpec;
use serde::Deserialize;

use crate::check::expect::{self, MetricName};
use crate::check::Unit;
use crate::experiment::{open, Model, ReadFile};
use crate::locate::located;

/// A case: a label and what it changes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseDef {
    /// Name in tables and legends ("A", "No A", "small-fast").
    pub label: String,
    /// The WRR variant of this case.
    pub arbitration: Option<ArbitrationSpec>,
    /// Admission control in this case.
    pub admission: Option<AdmissionSpec>,
    /// Congestion control in this case.
    pub congestion: Option<CongestionSpec>,
    /// HCAs in this case (where a send completes: the reliable-service variant).
    pub hca: Option<HcaSpec>,
    /// Peak power control (§5) or PowerHerd in this case.
    pub power_control: Option<PowerControlSpec>,
    /// A comparison at equal admitted load: this case (without admission control) is
    /// fed, at each load, exactly the connections the named case admitted there.
    pub streams_of: Option<String>,
}

/// What an expectation measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Deadline missing probability of MPEG-2 frames.
    Dmp,
    /// Mean deadline missing time, ms.
    Dmt,
    /// Mean packet latency of a class (`class`), µs.
    Latency,
    /// Connection rejection rate.
    Rejection,
    /// Mean connection set-up time, µs.
    Setup,
    /// Mean utilisation of the router links.
    Utilisation,
    /// Mean queueing delay of a class (`class`) at the source HCA, µs.
    Queueing,
    /// Accepted throughput: data flits delivered per node per cycle.
    Throughput,
    /// Mean power of the network over the measurement window (needs `[power]`), W.
    Power,
    /// Highest power sample (needs `[power]`), W.
    PowerMax,
    /// DMP with each stream's first deadline at its first frame's arrival (zero
    /// slack; `dmp` has it one frame time after the first frame's generation).
    DmpFirstArrival,
    /// DMT (ms) with the first deadline at the first frame's arrival.
    DmtFirstArrival,
    /// Mean latency of a class (`class`) from the WQE's post at the source HCA, µs:
    /// `latency` less any wait at the consumer (for a credit).
    PostedLatency,
    /// Mean latency of a class (`class`) from the packet's header entering the network
    /// (the source HCA's link) to its delivery, µs: the paper's "average network
    /// latency" read as the network's part alone (no wait at the consumer or the HCA).
    NetworkLatency,
    /// Mean power of the routers and links alone (Table 1's energies, without the
    /// HCAs' fitted energy per flit), W.
    PowerFabric,
    /// The load that entered: best effort plus the admitted connections' mean rates,
    /// a fraction of the link per node.
    AdmittedLoad,
    /// Best-effort messages that waited for a credit, plus real-time attempts refused
    /// for want of one (credit-based congestion control binding).
    CreditWaits,
}

impl MetricName for Metric {
    fn unit(self) -> Unit {
        match self {
            Metric::Dmp
            | Metric::DmpFirstArrival
            | Metric::Rejection
            | Metric::Utilisation
            | Metric::Throughput
            | Metric::AdmittedLoad => Unit::Fraction,
            Metric::Dmt | Metric::DmtFirstArrival => Unit::Ms,
            Metric::Latency
            | Metric::PostedLatency
            | Metric::NetworkLatency
            | Metric::Setup
            | Metric::Queueing => Unit::Us,
            Metric::Power | Metric::PowerMax | Metric::PowerFabric => Unit::Watts,
            Metric::CreditWaits => Unit::Number,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Metric::Dmp => "dmp",
            Metric::Dmt => "dmt",
            Metric::Latency => "latency",
            Metric::Rejection => "rejection",
            Metric::Setup => "setup",
            Metric::Utilisation => "utilisation",
            Metric::Queueing => "queueing",
            Metric::Throughput => "throughput",
            Metric::Power => "power",
            Metric::PowerMax => "power-max",
            Metric::DmpFirstArrival => "dmp-first-arrival",
            Metric::DmtFirstArrival => "dmt-first-arrival",
            Metric::PostedLatency => "posted-latency",
            Metric::NetworkLatency => "network-latency",
            Metric::PowerFabric => "power-fabric",
            Metric::AdmittedLoad => "admitted-load",
            Metric::CreditWaits => "credit-waits",
        }
    }

    /// DMP, DMT, latencies and queueing delays come with 95 % batch-means intervals.
    fn has_interval(self) -> bool {
        matches!(
            self,
            Metric::Dmp
                | Metric::Dmt
                | Metric::DmpFirstArrival
                | Metric::DmtFirstArrival
                | Metric::Latency
                | Metric::PostedLatency
                | Metric::NetworkLatency
                | Metric::Queueing
        )
    }
}

/// Which traffic class a latency is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassName {
    /// Control traffic.
    Control,
    /// Real-time traffic.
    RealTime,
    /// Best-effort traffic.
    BestEffort,
}

impl ClassName {
    /// The class named `name` as files write it.
    pub fn parse(name: &str) -> Option<ClassName> {
        match name {
            "control" => Some(ClassName::Control),
            "real-time" => Some(ClassName::RealTime),
            "best-effort" => Some(ClassName::BestEffort),
            _ => None,
        }
    }
}

/// `[[expect]]` of a Yum scenario: its metrics, with `case`, `load`, `class` and, for a
/// comparison, `vs_case` / `vs_load`.
pub type ExpectDef = expect::ExpectDef<Metric>;

/// The class an `[[expect]]` names (validated when loaded).
pub fn class_of(e: &ExpectDef) -> Option<ClassName> {
    e.class.as_ref().and_then(|c| ClassName::parse(c.get_ref()))
}

/// The load an `[[expect]]` names (required, validated when loaded).
pub fn load_of(e: &ExpectDef) -> f64 {
    e.load.as_ref().map_or(f64::NAN, |l| *l.get_ref())
}

/// A scenario file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// `"yum"`.
    pub model: Model,
    /// Short name.
    pub name: String,
    /// One-line title.
    pub title: String,
    /// The paper's figure or table.
    #[serde(default)]
    pub figure: String,
    /// Seed (default 1).
    pub seed: Option<u64>,
    /// Network.
    pub network: NetworkSpec,
    /// HCAs.
    #[serde(default)]
    pub hca: HcaSpec,
    /// WRR variant (cases may override).
    #[serde(default)]
    pub arbitration: ArbitrationSpec,
    /// Admission control (cases may override).
    #[serde(default)]
    pub admission: AdmissionSpec,
    /// Congestion control (cases may override).
    #[serde(default)]
    pub congestion: CongestionSpec,
    /// The energy model (absent: power is not measured).
    #[serde(default)]
    pub power: Option<qos_sim::iba::power::EnergySpec>,
    /// Peak power control or PowerHerd for every case (a case may set its own).
    #[serde(default)]
    pub power_control: Option<PowerControlSpec>,
    /// Workload.
    pub workload: WorkloadSpec,
    /// The load whose power samples the report draws against time, one series per
    /// case (Fig 10; needs `[power]`).
    #[serde(default)]
    pub power_trace: Option<f64>,
    /// Phases.
    pub run: RunSpec,
    /// Cases (default: one, the file as written).
    #[serde(default)]
    pub case: Vec<CaseDef>,
    /// Published values and claims.
    #[serde(default)]
    pub expect: Vec<ExpectDef>,
}

/// A checked scenario: one configuration per case.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file as written.
    pub file: ScenarioFile,
    /// Per case: its label and configuration.
    pub cases: Vec<(String, IbaConfig)>,
    /// Per case: the case whose admitted connections it is fed (`streams_of`).
    pub streams_of: Vec<Option<usize>>,
}

impl Scenario {
    /// The seed.
    pub fn seed(&self) -> u64 {
        self.file.seed.unwrap_or(crate::experiment::DEFAULT_SEED)
    }

    /// The loads of the sweep.
    pub fn loads(&self) -> &[f64] {
        &self.file.workload.loads
    }

    /// Shortens the phases for a quick look: a fifth of the warm-up, of the
    /// measurement and of the drain, four batches. MPEG frames are counted when
    /// produced in the measurement less two frame times, so a scenario with MPEG
    /// streams measures at least three frame times (100 ms) — never longer than its
    /// full run.
    pub fn quick(&mut self) {
        for (_, c) in &mut self.cases {
            let frames =
                matches!(c.workload.real_time, RealTimeSpec::Mpeg { .. }) && c.workload.mix.0 > 0.0;
            let r = &mut c.run;
            let floor = if frames {
                qos_core::units::Duration::from_ms(100).min(r.measure)
            } else {
                qos_core::units::Duration::ZERO
            };
            r.warmup = r.warmup / 5;
            r.measure = (r.measure / 5).max(floor);
            r.drain = r.drain / 5;
            r.batches = r.batches.min(4);
        }
    }
}

/// Parses and checks a scenario that reads no other file (the shipped ones): trace
/// files are refused.
pub fn load(file: &str, text: &str) -> Result<Scenario, Located> {
    load_with(file, text, &|p| {
        Err(format!(
            "cannot read {p}: only a scenario given as a file reads trace files (beside it)"
        ))
    })
}

/// Parses and checks a scenario; `read` gives the text of a trace file named in it
/// (as written, relative to the scenario) and the name its errors show.
pub fn load_with(file: &str, text: &str, read: &ReadFile<'_>) -> Result<Scenario, Located> {
    let text: &str = &open(file, text, Model::Yum)?;
    let mut f: ScenarioFile = parse_toml(file, text)?;
    if let RealTimeSpec::Mpeg { traces, .. } = &mut f.workload.real_time {
        for (i, t) in traces.iter_mut().enumerate() {
            let at = format!("workload.real_time.traces[{i}].file");
            let (name, body) = read(&t.file).map_err(|m| {
                located(
                    file,
                    text,
                    &at,
                    m.replacen("cannot read ", "cannot read trace ", 1),
                )
            })?;
            t.load(&name, &body)?;
        }
    }
    let base = IbaConfig {
        network: f.network.clone(),
        hca: f.hca.clone(),
        arbitration: f.arbitration,
        admission: f.admission,
        congestion: f.congestion,
        power: f.power,
        power_control: f.power_control,
        workload: f.workload.clone(),
        run: f.run,
    };
    base.validate()
        .map_err(|e| located(file, text, &e.path, e.to_string()))?;
    let mut cases = Vec::new();
    let mut streams_of = Vec::new();
    if f.case.is_empty() {
        cases.push((f.name.clone(), base.clone()));
        streams_of.push(None);
    }
    for (i, c) in f.case.iter().enumerate() {
        if f.case[..i].iter().any(|o| o.label == c.label) {
            return Err(located(
                file,
                text,
                &format!("case[{i}].label"),
                format!("case '{}' is listed twice", c.label),
            ));
        }
        let mut cfg = base.clone();
        if let Some(a) = c.arbitration {
            cfg.arbitration = a;
        }
        if let Some(a) = c.admission {
            cfg.admission = a;
        }
        if let Some(a) = c.congestion {
            cfg.congestion = a;
        }
        if let Some(h) = &c.hca {
            cfg.hca = h.clone();
        }
        if let Some(p) = c.power_control {
            cfg.power_control = Some(p);
        }
        cfg.validate().map_err(|e| {
            located(
                file,
                text,
                &format!("case[{i}].{}", e.path),
                format!("case '{}': {e}", c.label),
            )
        })?;
        let from = match &c.streams_of {
            None => None,
            Some(o) => {
                let j = f.case[..i].iter().position(|x| &x.label == o);
                let at = format!("case[{i}].streams_of");
                match j {
                    None => {
                        return Err(located(
                            file,
                            text,
                            &at,
                            format!("case '{o}' is not a case listed before this one"),
                        ))
                    }
                    Some(j) if !cases[j].1.admission.enabled || cfg.admission.enabled => {
                        return Err(located(
                            file,
                            text,
                            &at,
                            format!("a case without admission control takes the connections '{o}' admitted: '{o}' must have admission control and this case none"),
                        ))
                    }
                    Some(j) => Some(j),
                }
            }
        };
        cases.push((c.label.clone(), cfg));
        streams_of.push(from);
    }
    let labels: Vec<&str> = cases.iter().map(|(l, _)| l.as_str()).collect();
    let has_load = |l: f64| f.workload.loads.iter().any(|&x| (x - l).abs() < 1e-9);
    if let Some(l) = f.power_trace {
        if !has_load(l) {
            return Err(located(
                file,
                text,
                "power_trace",
                format!(
                    "load {l} is not one of workload.loads {:?}",
                    f.workload.loads
                ),
            ));
        }
        if f.power.is_none() {
            return Err(located(
                file,
                text,
                "power_trace",
                "a power trace needs the energy model: add a [power] section",
            ));
        }
    }
    for e in &f.expect {
        e.validate(file, text)?;
        e.only(file, text, &["case", "vs_case", "load", "vs_load", "class"])?;
        let here = |span: std::ops::Range<usize>, m: String| Located::at(file, text, span.start, m);
        for c in [&e.case, &e.vs_case].into_iter().flatten() {
            if !labels.contains(&c.get_ref().as_str()) {
                return Err(here(
                    c.span(),
                    format!("no case '{}' (cases: {})", c.get_ref(), labels.join(", ")),
                ));
            }
        }
        if e.load.is_none() {
            return Err(e.error(file, text, "give the load (one of workload.loads)"));
        }
        for l in [&e.load, &e.vs_load].into_iter().flatten() {
            if !has_load(*l.get_ref()) {
                return Err(here(
                    l.span(),
                    format!(
                        "load {} is not one of workload.loads {:?}",
                        l.get_ref(),
                        f.workload.loads
                    ),
                ));
            }
        }
        let needs_class = matches!(
            e.metric(),
            Metric::Latency | Metric::Queueing | Metric::PostedLatency | Metric::NetworkLatency
        );
        match &e.class {
            Some(c) if !needs_class || ClassName::parse(c.get_ref()).is_none() => {
                return Err(here(
                    c.span(),
                    "a latency or queueing delay needs its class (control, real-time or best-effort), and only those have one".into(),
                ))
            }
            None if needs_class => {
                return Err(e.error(
                    file,
                    text,
                    "a latency or queueing delay needs its class (control, real-time or best-effort)",
                ))
            }
            _ => {}
        }
    }
    Ok(Scenario {
        file: f,
        cases,
        streams_of,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"model = "yum"
name = "t"
title = "t"
[network]
topology = { kind = "crossbar", ports = 4 }
[workload]
loads = [0.6, 0.8]
real_time = { kind = "mpeg" }
[run]
warmup = "5ms"
measure = "100ms"
[[case]]
label = "A"
[[case]]
label = "No A"
admission = { enabled = false }
[[expect]]
metric = "dmp"
case = "No A"
vs_case = "A"
load = 0.8
kind = "ordering"
order = "higher"
source = { stated = "§7.3" }
"#;

    #[test]
    fn cases_override_the_file_and_expectations_refer_to_them() {
        let s = load("t.toml", OK).unwrap();
        assert_eq!(s.cases.len(), 2);
        assert!(s.cases[0].1.admission.enabled);
        assert!(!s.cases[1].1.admission.enabled);
        assert_eq!(s.file.expect[0].unit(), Unit::Ratio);
        assert!(s.file.expect[0].is_comparison());
    }

    #[test]
    fn errors_name_the_file_and_line_of_the_key_at_fault() {
        for (from, to, line) in [
            ("loads = [0.6, 0.8]", "loads = [0.6, 1.8]", 7),
            ("case = \"No A\"", "case = \"B\"", 19),
            ("load = 0.8", "load = 0.7", 21),
            ("ports = 4", "ports = 1", 5),
            ("order = \"higher\"", "order = \"sideways\"", 23),
            ("order = \"higher\"", "order = \"higher\"\nx = 1", 24),
            ("load = 0.8\n", "", 18),
            (
                "kind = \"ordering\"\norder = \"higher\"",
                "published = -1.0\nkind = \"bound\"\nbound = \"at-most\"",
                22,
            ),
        ] {
            let text = OK.replace(from, to);
            let e = load("t.toml", &text).unwrap_err();
            let s = e.to_string();
            assert!(s.starts_with("t.toml:"), "{s}");
            assert_eq!(e.line, Some(line), "{from} → {s}");
            assert!(!s.contains('\n'));
        }
        // Congestion control: a C_b beyond the HCA buffer, quad CQs on a crossbar.
        let text = format!("{OK}[congestion]\nkind = \"credits\"\nbest_effort = 9999\n");
        let e = load("t.toml", &text).unwrap_err();
        assert_eq!(e.line, Some(27), "{e}");
        assert!(e.to_string().contains("congestion.best_effort"), "{e}");
        let text =
            format!("{OK}[congestion]\nkind = \"credits\"\nbest_effort = 10\ncq = \"quad\"\n");
        let e = load("t.toml", &text).unwrap_err();
        assert_eq!(e.line, Some(28), "{e}");
        let e = load("t.toml", &format!("{OK}[power]\ncrossbar_pj = -1.0\n")).unwrap_err();
        assert_eq!(e.line, Some(26), "{e}");
        assert!(e.to_string().contains("power.crossbar_pj"), "{e}");
        let e = load("t.toml", &format!("{OK}[congestion]\nkind = \"warp\"\n")).unwrap_err();
        assert!(e.to_string().starts_with("t.toml:2"), "{e}");
        let e = load(
            "t.toml",
            &OK.replace(
                "kind = \"ordering\"\norder = \"higher\"",
                "published = 1.2\ntolerance = 0.5",
            ),
        )
        .unwrap_err();
        assert!(e.to_string().contains("acceptance bar"), "{e}");
    }

    #[test]
    fn trace_files_are_read_beside_the_scenario_and_their_errors_name_their_line() {
        let text = OK.replace(
            "real_time = { kind = \"mpeg\" }",
            "real_time = { kind = \"mpeg\", traces = [{ file = \"a.txt\", unit = \"bytes\" }] }",
        );
        let read = |body: &'static str| {
            move |p: &str| -> Result<(String, String), String> {
                if p == "a.txt" {
                    Ok((format!("dir/{p}"), body.to_string()))
                } else {
                    Err(format!("cannot read {p}"))
                }
            }
        };
        let s = load_with("t.toml", &text, &read("I 9000\nB 1000\n")).unwrap();
        match &s.cases[1].1.workload.real_time {
            RealTimeSpec::Mpeg { traces, .. } => {
                assert_eq!(traces[0].mean_rate().bytes_per_sec(), 150_000)
            }
            other => panic!("{other:?}"),
        }
        // A bad line of the trace names the trace's line.
        let e = load_with("t.toml", &text, &read("9000\nX 12\n")).unwrap_err();
        assert!(e.to_string().starts_with("dir/a.txt:2"), "{e}");
        // A missing trace names the scenario's line.
        let e = load_with("t.toml", &text.replace("a.txt", "b.txt"), &read("1\n")).unwrap_err();
        assert!(e.to_string().starts_with("t.toml:8"), "{e}");
        assert!(e.to_string().contains("cannot read trace b.txt"), "{e}");
        // Embedded scenarios read no files.
        assert!(load("t.toml", &text).is_err());
        // An empty trace and a bad unit.
        let e = load_with("t.toml", &text, &read("0\n0\n")).unwrap_err();
        assert!(e.to_string().contains("carries no data"), "{e}");
        let e = load_with(
            "t.toml",
            &text.replace("\"bytes\"", "\"words\""),
            &read("1\n"),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("t.toml:8"), "{e}");
        // A file without its model key is refused, naming the key.
        let e = load("t.toml", &OK.replace("model = \"yum\"\n", "")).unwrap_err();
        assert!(e.to_string().contains("missing key `model`"), "{e}");
    }
}
