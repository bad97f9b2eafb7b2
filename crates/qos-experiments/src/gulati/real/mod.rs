//! `reproduce gulati --real`: the thesis's experiments (chapter 5) on real
//! traffic — a testbed of network namespaces joined by a bridge with `tbf`-shaped links
//! (`qos_runtime::testbed`), agent data planes inside the hosts, applications on
//! shared-memory ports — side by side with the published and the simulated values.
//!
//! The testbed's link differs from Myrinet's, so every check compares proportions:
//! shares and ratios of flows, rates as fractions of the measured Bmax, IDTs as
//! multiples of the measured T. The testbed is removed on exit, on error and on Ctrl-C.

mod context;
mod direct;
pub mod mpi;
mod timeline;

use std::time::Instant;

use anyhow::{bail, Context};
pub(crate) use context::Cleanup;
pub use context::{
    catch_signals, check_interrupt, harness_in, interrupted, step, Backend, Ctx, Placement,
    RealOptions, RealResults,
};
use qos_core::sched::SchedulerKind;
use qos_core::source::Located;
use qos_runtime::testbed::{self, TestbedSpec};

use super::scenario::{Kind, Scenario};
use super::Simulated;
use crate::check::{Check, MetricId, Summary};
use crate::experiment::{Experiment, Model, Progress, ReadFile, RunOptions};
use crate::report::checks::{checks_table, sources_table, summary_paragraphs};
use crate::report::Report;
use crate::Error;

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

/// Title of the real reproduction's report.
pub const TITLE: &str =
    "Gulati (2001) on real traffic: the thesis's experiments on a testbed of network namespaces";

/// The thesis's experiments on a testbed (needs root): the shipped scenarios it runs on
/// real traffic, with the options of the testbed.
#[derive(Debug, Clone)]
pub struct GulatiReal {
    /// Where the testbed goes and how fast its links are.
    pub place: Placement,
    /// The agents' data planes, or the kernel backend with real MPI.
    pub backend: Backend,
    /// With the kernel backend: the MPI implementation ("openmpi" or "mpich").
    pub mpi: String,
}

impl Experiment for GulatiReal {
    type Scenario = Scenario;
    type Output = RealResults;

    fn model(&self) -> Model {
        Model::Gulati
    }
    fn title(&self) -> String {
        TITLE.into()
    }
    fn builtin(&self) -> Vec<(&'static str, &'static str)> {
        let runs: &[&str] = match self.backend {
            Backend::Dataplane => EXPERIMENTS,
            Backend::Kernel => &[mpi::EXPERIMENT],
        };
        super::builtin::GULATI
            .iter()
            .filter(|(n, _)| runs.contains(n))
            .copied()
            .collect()
    }
    fn load(&self, file: &str, text: &str, read: &ReadFile<'_>) -> Result<Scenario, Located> {
        super::scenario::load(file, text, read)
    }
    fn name<'a>(&self, s: &'a Scenario) -> &'a str {
        &s.file.name
    }
    /// It reports no progress (one run on real hosts).
    fn units(&self, _scenarios: &[Self::Scenario], _opt: &RunOptions) -> u64 {
        0
    }

    fn simulate(
        &self,
        scenarios: &[Scenario],
        opt: &RunOptions,
        _progress: &dyn Progress,
    ) -> Result<RealResults, Error> {
        let all = self.builtin().len();
        run(RealOptions {
            place: self.place.clone(),
            quick: opt.quick,
            only: match scenarios {
                [one] if all > 1 => Some(one.file.name.clone()),
                _ => None,
            },
            backend: self.backend,
            mpi: self.mpi.clone(),
        })
    }
    fn checks<'a>(&self, out: &'a RealResults) -> Vec<&'a Check> {
        out.checks.iter().collect()
    }
    fn report(&self, out: &RealResults, title: &str) -> Report {
        report(out, title)
    }
}

/// The simulated Bmax (MB/s) the simulated values are normalised by: the idt-sweep's.
fn sim_bmax(sim: &Simulated) -> Result<f64, Error> {
    sim.value(&MetricId::new("idt-sweep", "bmax"))
        .ok_or_else(|| {
            Error::Real(anyhow::anyhow!(
                "the simulated idt-sweep gave no Bmax to normalise the simulated values by"
            ))
        })
}

/// Runs the real reproduction (needs root and network namespaces). Progress goes to
/// stderr; the testbed is removed on success, on error and after Ctrl-C
/// ([`catch_signals`]).
pub fn run(o: RealOptions) -> Result<RealResults, Error> {
    match o.backend {
        Backend::Dataplane => run_inner(o),
        Backend::Kernel => mpi::run(&o),
    }
    .map_err(Error::Real)
}

fn run_inner(o: RealOptions) -> anyhow::Result<RealResults> {
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
    let start = Instant::now();
    step(start, "simulating the same experiments (Myrinet model)");
    let mut sim_names: Vec<&str> = vec!["idt-sweep"];
    sim_names.extend(names.iter().filter(|n| **n != "idt-sweep"));
    let mut scenarios = Vec::new();
    for n in &sim_names {
        scenarios.extend(super::builtin_scenarios(Some(n))?);
    }
    let sim = super::simulate(
        &scenarios,
        &RunOptions {
            quick: o.quick,
            ..RunOptions::default()
        },
        &crate::experiment::Silent,
    )?;
    let sim_bmax = sim_bmax(&sim)?;

    let (prefix, dir, owned_dir) = o.place.resolve('r', "reproduce");
    let spec = TestbedSpec {
        nodes: 4,
        link_rate: o.place.link_rate,
        prefix,
        subnet: [10, 77, 9],
        dir: dir.clone(),
        port_buffer: Some(direct::PORT_BUFFER),
    };
    step(
        start,
        &format!(
            "building the testbed: 4 hosts, {} links, namespaces {}-*",
            o.place.link_rate, spec.prefix
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
        scenarios,
        sim_bmax,
        checks: Vec::new(),
        figures: Vec::new(),
        notes: Vec::new(),
        extra: serde_json::Map::new(),
        next_port: 100,
        services: false,
    };
    let result = (|| -> anyhow::Result<()> {
        direct::calibrate(&mut cx, names.contains(&"idt-sweep"))?;
        for name in &names {
            cx.check_interrupt()?;
            let s = cx.scenario(name)?;
            match s.file.kind {
                Kind::IdtSweep => {}
                Kind::Sharing if direct::shares_a_destination(&s) => {
                    direct::two_sources(&mut cx, &s)?
                }
                Kind::Sharing => direct::sharing(&mut cx, &s)?,
                Kind::Timeline => {
                    direct::services(&mut cx, o.place.link_rate)?;
                    timeline::best_effort(&mut cx, &s)?;
                }
                Kind::Overhead => direct::overhead(&mut cx)?,
                other => bail!("{name}: experiments of kind {other:?} do not run on the testbed"),
            }
        }
        Ok(())
    })();
    let Ctx {
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
    step(start, "done");
    Ok(RealResults {
        summary: Summary::of(&checks),
        checks,
        link_rate_bytes_per_sec: o.place.link_rate.bytes_per_sec(),
        bmax_bytes_per_sec: bmax,
        t_us: t * 1e6,
        packet_payload: payload,
        details: extra,
        figures,
        notes,
    })
}

/// The report of a real reproduction.
pub fn report(r: &RealResults, title: &str) -> Report {
    let mut report = Report::new(title);
    report.summary.push(format!(
        "Testbed: 4 hosts, links shaped to {} B/s each way (tbf), agent data planes over UDP; \
         measured Bmax {:.2} MB/s, T {:.1} us per {}-byte packet.",
        r.link_rate_bytes_per_sec,
        r.bmax_bytes_per_sec / 1e6,
        r.t_us,
        r.packet_payload
    ));
    report.summary.extend(summary_paragraphs(&r.summary));
    report.summary.push(
        "Proportions, not MB/s: the testbed's link is not Myrinet's, so rates are fractions of \
         the measured Bmax, IDTs multiples of the measured T, and sharing is checked as ratios. \
         The measured column holds the testbed's value, the simulated one the Myrinet model's."
            .into(),
    );
    let refs: Vec<&Check> = r.checks.iter().collect();
    report.tables.push(checks_table(&refs));
    report.tables.push(sources_table(&refs));
    report.figures = r.figures.clone();
    report.notes = r.notes.clone();
    report
}
