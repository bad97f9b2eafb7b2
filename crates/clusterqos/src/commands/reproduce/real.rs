//! `clusterqos reproduce gulati --real`: the thesis's experiments (chapter 5) on real
//! traffic — a testbed of network namespaces joined by a bridge with `tbf`-shaped links
//! (`qos_runtime::testbed`), agent data planes inside the hosts, applications on
//! shared-memory ports — side by side with the published and the simulated values.
//!
//! The testbed's link differs from Myrinet's, so every check compares proportions:
//! shares and ratios of flows, rates as fractions of the measured Bmax, IDTs as
//! multiples of the measured T. The testbed is removed on exit, on error and on Ctrl-C.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{bail, Context};
use qos_core::sched::SchedulerKind;
use qos_core::units::Bandwidth;
use qos_runtime::dataplane::harness::{Harness, NodeSite};
use qos_runtime::testbed::{self, TestbedSpec, TestbedState};
use qos_sim::report::{Figure, Report, Table};
use qos_sim::scenario::{self, builtin, run::Check, run::Options, Scenario};
use serde::Serialize;

use super::experiments;
use crate::output;

/// The experiments `--real` runs, by scenario name, in the thesis's order.
pub const EXPERIMENTS: &[&str] = &[
    "idt-sweep",
    "two-senders-one-node",
    "three-flows-one-node",
    "two-sources-one-destination",
    "send-and-receive",
    "best-effort-one",
    "best-effort-two",
    "overhead",
];

/// Options of a real run.
#[derive(Debug, Clone)]
pub struct RealOptions {
    pub link_rate: Bandwidth,
    pub dir: Option<PathBuf>,
    pub prefix: Option<String>,
    pub quick: bool,
    pub only: Option<String>,
    pub json: bool,
    pub out: PathBuf,
}

/// One compared value.
#[derive(Debug, Clone, Serialize)]
pub struct RealCheck {
    pub experiment: String,
    pub metric: String,
    pub unit: String,
    /// The thesis's value, as the same proportion (`None`: the thesis gives none).
    pub published: Option<f64>,
    /// The calibrated Myrinet model's value (`None`: no simulated counterpart).
    pub simulated: Option<f64>,
    /// Measured on the testbed.
    pub real: f64,
    /// What `real` is checked against: the published value, or the design's value.
    pub expected: f64,
    /// (real − expected) / expected.
    pub deviation: f64,
    pub tolerance: f64,
    /// "within", "at-most", "at-least" or "info" (shown, not checked).
    pub mode: String,
    pub ok: bool,
}

impl RealCheck {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        experiment: &str,
        metric: impl Into<String>,
        unit: &str,
        published: Option<f64>,
        simulated: Option<f64>,
        real: f64,
        expected: f64,
        tolerance: f64,
        mode: &str,
    ) -> RealCheck {
        let deviation = if expected != 0.0 {
            (real - expected) / expected
        } else {
            real
        };
        let ok = match mode {
            "within" => real.is_finite() && deviation.abs() <= tolerance + 1e-12,
            "at-most" => real <= expected,
            "at-least" => real >= expected,
            _ => true,
        };
        RealCheck {
            experiment: experiment.into(),
            metric: metric.into(),
            unit: unit.into(),
            published,
            simulated,
            real,
            expected,
            deviation,
            tolerance,
            mode: mode.into(),
            ok,
        }
    }
}

/// Set by SIGINT/SIGTERM: experiments stop at their next step and the testbed is removed.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether Ctrl-C (or SIGTERM) arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

fn catch_signals() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Progress on stderr.
pub fn step(start: Instant, msg: &str) {
    eprintln!("[{:6.1} s] {msg}", start.elapsed().as_secs_f64());
}

/// Removes the testbed when dropped: on success, on error and after Ctrl-C.
struct Cleanup {
    dir: PathBuf,
    owned_dir: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.dir.join(testbed::STATE_FILE).exists() {
            match testbed::down(&self.dir) {
                Ok(r) => {
                    eprintln!(
                        "testbed removed ({} namespaces, {} processes stopped)",
                        r.namespaces_removed.len(),
                        r.processes_stopped
                    );
                    for e in r.errors {
                        eprintln!("warning: {e}");
                    }
                }
                Err(e) => eprintln!("warning: removing the testbed: {e}"),
            }
        }
        if self.owned_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The simulated results the real ones are shown beside.
pub struct Simulated {
    pub scenarios: Vec<Scenario>,
    pub checks: Vec<Check>,
    pub figures: Vec<Figure>,
}

impl Simulated {
    /// The simulated value of (`experiment`, `metric`).
    pub fn value(&self, experiment: &str, metric: &str) -> Option<f64> {
        self.checks
            .iter()
            .find(|c| c.experiment == experiment && c.metric == metric)
            .map(|c| c.simulated)
    }
    pub fn scenario(&self, name: &str) -> Option<&Scenario> {
        self.scenarios.iter().find(|s| s.file.name == name)
    }
    /// The model's Bmax (MB/s).
    pub fn bmax(&self) -> f64 {
        self.value("idt-sweep", "bmax").unwrap_or(81.8)
    }
}

fn simulate(names: &[&str], quick: bool) -> anyhow::Result<Simulated> {
    let mut sim = Simulated {
        scenarios: Vec::new(),
        checks: Vec::new(),
        figures: Vec::new(),
    };
    for name in names {
        let text = builtin::find(name).with_context(|| format!("no scenario {name}"))?;
        let s = scenario::load(&format!("{name}.toml"), text, |p| {
            Err(format!("embedded scenario cannot read '{p}'"))
        })
        .with_context(|| format!("embedded scenario {name}"))?;
        let r = scenario::run::execute(&s, Options { quick, seed: None });
        sim.checks.extend(r.checks);
        sim.figures.extend(r.figures);
        sim.scenarios.push(s);
    }
    Ok(sim)
}

/// Everything the experiments share.
pub struct Ctx {
    pub start: Instant,
    pub quick: bool,
    pub state: TestbedState,
    /// Rate-control data planes in every host (UDP port 7600).
    pub harness: Harness,
    /// Measured Bmax (B/s) and T (seconds per full packet) of h0 → h1.
    pub bmax: f64,
    pub t: f64,
    pub payload: usize,
    pub sim: Simulated,
    pub checks: Vec<RealCheck>,
    pub figures: Vec<Figure>,
    pub notes: Vec<String>,
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// Last port number handed out (every experiment uses fresh ports).
    pub next_port: u16,
    /// Whether the manager and agents run.
    pub services: bool,
}

impl Ctx {
    pub fn step(&self, msg: &str) {
        step(self.start, msg);
    }
    pub fn check_interrupt(&self) -> anyhow::Result<()> {
        if interrupted() {
            bail!("interrupted");
        }
        Ok(())
    }
}

/// Data planes (scheduler `kind`) in the testbed's hosts, on UDP `port`.
pub fn harness_in(st: &TestbedState, kind: SchedulerKind, port: u16) -> anyhow::Result<Harness> {
    let sites = st
        .hosts
        .iter()
        .map(|h| NodeSite {
            name: h.name.clone(),
            addr: std::net::SocketAddr::new(h.addr.into(), port),
            netns: Some(h.netns.clone()),
        })
        .collect();
    Harness::start(sites, kind, None).context("starting data planes in the testbed's hosts")
}

/// Runs the real reproduction.
pub fn run(o: RealOptions) -> anyhow::Result<ExitCode> {
    let mut names: Vec<&str> = EXPERIMENTS.to_vec();
    if let Some(only) = &o.only {
        names.retain(|n| n == only);
        if names.is_empty() {
            bail!(
                "no real experiment '{only}' (known: {})",
                EXPERIMENTS.join(", ")
            );
        }
    }
    if let Some(why) = testbed::unavailable_reason() {
        bail!("reproduce --real runs on a testbed of network namespaces and needs {why}");
    }
    catch_signals();
    let start = Instant::now();
    step(start, "simulating the same experiments (Myrinet model)");
    let mut sim_names: Vec<&str> = vec!["idt-sweep"];
    sim_names.extend(names.iter().filter(|n| **n != "idt-sweep"));
    let sim = simulate(&sim_names, o.quick)?;

    let pid = std::process::id();
    let prefix = o
        .prefix
        .clone()
        .unwrap_or_else(|| format!("r{}", pid % 100_000));
    let (dir, owned_dir) = match &o.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("clusterqos-reproduce-{pid}")),
            true,
        ),
    };
    let spec = TestbedSpec {
        nodes: 4,
        link_rate: o.link_rate,
        prefix,
        subnet: [10, 77, 9],
        dir: dir.clone(),
        port_buffer: Some(experiments::PORT_BUFFER),
    };
    step(
        start,
        &format!(
            "building the testbed: 4 hosts, {} links, namespaces {}-*",
            o.link_rate, spec.prefix
        ),
    );
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let cleanup = Cleanup { dir, owned_dir };
    let state = testbed::up(&spec)?;
    let harness = harness_in(&state, SchedulerKind::RateControl, 7600)?;
    let payload = harness.payload;
    let mut cx = Ctx {
        start,
        quick: o.quick,
        state,
        harness,
        bmax: 0.0,
        t: 0.0,
        payload,
        sim,
        checks: Vec::new(),
        figures: Vec::new(),
        notes: Vec::new(),
        extra: serde_json::Map::new(),
        next_port: 100,
        services: false,
    };
    let result = (|| -> anyhow::Result<()> {
        experiments::calibrate(&mut cx, names.contains(&"idt-sweep"))?;
        for name in &names {
            cx.check_interrupt()?;
            match *name {
                "idt-sweep" => {}
                "two-sources-one-destination" => experiments::two_sources(&mut cx)?,
                "best-effort-one" | "best-effort-two" => {
                    experiments::services(&mut cx, &o)?;
                    super::timeline::best_effort(&mut cx, name)?;
                }
                "overhead" => experiments::overhead(&mut cx)?,
                other => experiments::sharing(&mut cx, other)?,
            }
        }
        Ok(())
    })();
    let Ctx {
        start,
        harness,
        bmax,
        t,
        payload,
        checks,
        figures,
        notes,
        extra,
        ..
    } = cx;
    drop(harness);
    drop(cleanup);
    result?;
    finish(
        &o,
        start,
        bmax,
        t,
        payload,
        o.link_rate,
        checks,
        figures,
        notes,
        extra,
    )
}

#[allow(clippy::too_many_arguments)]
fn finish(
    o: &RealOptions,
    start: Instant,
    bmax: f64,
    t: f64,
    payload: usize,
    link: Bandwidth,
    checks: Vec<RealCheck>,
    figures: Vec<Figure>,
    notes: Vec<String>,
    extra: serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<ExitCode> {
    let opt = |v: Option<f64>| v.map_or_else(|| "—".to_string(), fmt);
    let mut table = Table::new(
        "checks",
        "Published, simulated and real (testbed) values, as proportions",
        [
            "experiment",
            "metric",
            "unit",
            "published",
            "simulated",
            "real",
            "deviation",
            "within tolerance",
        ],
    );
    for c in &checks {
        table.push([
            c.experiment.clone(),
            c.metric.clone(),
            c.unit.clone(),
            opt(c.published),
            opt(c.simulated),
            fmt(c.real),
            match c.mode.as_str() {
                "within" => format!(
                    "{:+.1}% (±{:.0}%)",
                    100.0 * c.deviation,
                    100.0 * c.tolerance
                ),
                "at-most" => format!("≤ {}", fmt(c.expected)),
                "at-least" => format!("≥ {}", fmt(c.expected)),
                _ => "shown".to_string(),
            },
            match c.mode.as_str() {
                "info" => "—",
                _ if c.ok => "yes",
                _ => "no",
            }
            .to_string(),
        ]);
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    let total = checks.iter().filter(|c| c.mode != "info").count();
    let mut report = Report::new(
        "Gulati (2001) on real traffic: the thesis's experiments on a testbed of network namespaces",
    );
    report.summary.push(format!(
        "{total} checks, {failed} out of tolerance. Testbed: 4 hosts, links shaped to {link} each way \
         (tbf), agent data planes over UDP; measured Bmax {:.2} MB/s, T {:.1} us per {payload}-byte packet.",
        bmax / 1e6,
        t * 1e6
    ));
    report.summary.push(
        "Proportions, not MB/s: the testbed's link is not Myrinet's, so rates are fractions of \
         the measured Bmax, IDTs multiples of the measured T, and sharing is checked as ratios."
            .into(),
    );
    report.tables.push(table.clone());
    report.figures = figures;
    report.notes = notes;
    report.write(&o.out).context("writing the report")?;
    if o.json {
        output::print_json(&serde_json::json!({
            "checks": checks,
            "failed": failed,
            "total": total,
            "link_rate_bytes_per_sec": link.bytes_per_sec(),
            "bmax_bytes_per_sec": bmax,
            "t_us": t * 1e6,
            "packet_payload": payload,
            "details": extra,
            "report": o.out.display().to_string(),
        }))?;
    } else {
        let mut tb = output::table(table.columns.clone());
        for row in &table.rows {
            tb.add_row(row.clone());
        }
        output::align_numbers(&mut tb, 3);
        println!("{tb}");
        println!(
            "{total} checks, {failed} out of tolerance; report in {}",
            o.out.display()
        );
    }
    step(start, "done");
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}
