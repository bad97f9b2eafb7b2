//! Nagar, Liu, Sivasubramaniam, Kandiraju, Gautam, *Incorporating Quality-of-Service in
//! the Virtual Interface Architecture*, in the VIA firmware model
//! (`qos_sim::myrinet::nic::via`): the shipped scenarios (`scenarios/nagar/`,
//! embedded), each run, and every published value checked.
//!
//! - Table 1 (stage completion times, [`tables`]) is the calibration: every cell a fit.
//! - Table 2 (ping-bulk, [`tables`]), Figs 3–4 and 5 and 6 ([`channels`]) are
//!   predictions: stated values and the orderings and crossovers the paper states.
//! - Beyond the paper ([`channels`], scenario `beyond`): the Fig 5 workload with
//!   admission control in front of QoSVIA, with rate control in place of VirtualClock,
//!   and with the model's one assumption about QoSVIA removed.
//! - On real traffic ([`real`], `reproduce nagar --real`): the Figs 3–4 experiment on the
//!   namespace testbed, under every packet scheduler the agent can run.

pub mod bounds;
pub mod channels;
pub mod factors;
pub mod fit;
mod mechanism;
pub mod model;
#[cfg(feature = "real")]
pub mod real;
pub mod scenario;
pub mod tables;

use qos_core::source::Located;
use serde::Serialize;

pub use model::{calibration, size_label, Options, Results};
pub use scenario::{Scenario, Variant};

use crate::check::{Check, Mechanism, Summary};
use crate::experiment::{Experiment, Model, Progress, ReadFile, RunOptions};
use crate::report::checks::{checks_table, sources_table, summary_paragraphs};
use crate::report::Report;
use crate::Error;

/// Title of the report.
pub const TITLE: &str =
    "Reproduction of Nagar et al., Incorporating Quality-of-Service in the Virtual Interface Architecture";

/// What the reproduction produced.
#[derive(Debug, Clone, Serialize)]
pub struct Simulated {
    /// Per scenario, in order.
    pub results: Vec<Results>,
    /// Counts of the checks.
    pub summary: Summary,
}

impl Simulated {
    /// Every check, in order.
    pub fn checks(&self) -> impl Iterator<Item = &Check> {
        self.results.iter().flat_map(|r| r.checks.iter())
    }
    /// Simulated events in all runs.
    pub fn events(&self) -> u64 {
        self.results.iter().map(|r| r.events).sum()
    }
}

/// Nagar et al.'s experiments in the VIA firmware model.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nagar;

impl Experiment for Nagar {
    type Scenario = Scenario;
    type Output = Simulated;

    fn model(&self) -> Model {
        Model::Nagar
    }
    fn title(&self) -> String {
        TITLE.into()
    }
    fn builtin(&self) -> Vec<(&'static str, &'static str)> {
        scenario::BUILTIN.to_vec()
    }
    fn load(&self, file: &str, text: &str, _read: &ReadFile<'_>) -> Result<Scenario, Located> {
        scenario::load(file, text)
    }
    fn name<'a>(&self, s: &'a Scenario) -> &'a str {
        &s.name
    }
    fn units(&self, scenarios: &[Self::Scenario], _opt: &RunOptions) -> u64 {
        scenarios.len() as u64
    }

    fn simulate(
        &self,
        scenarios: &[Scenario],
        opt: &RunOptions,
        progress: &dyn Progress,
    ) -> Result<Simulated, Error> {
        simulate(
            scenarios,
            Options {
                quick: opt.quick,
                seed: opt.seed,
            },
            progress,
        )
    }
    fn checks<'a>(&self, out: &'a Simulated) -> Vec<&'a Check> {
        out.checks().collect()
    }
    fn report(&self, out: &Simulated, title: &str) -> Report {
        report_titled(out, title)
    }
    fn switch_off(&self, s: &Scenario, m: Mechanism) -> Option<Scenario> {
        mechanism::switch_off(s, m)
    }
    fn crediting_only(&self, s: &Scenario) -> Option<Scenario> {
        mechanism::crediting_only(s)
    }
}

/// The shipped scenarios (all, or the one named), in the paper's order.
pub fn builtin_scenarios(only: Option<&str>) -> Result<Vec<Scenario>, Error> {
    scenario::builtin(only)
}

/// Runs `scenarios`; `progress` hears each as it finishes.
pub fn simulate(
    scenarios: &[Scenario],
    opt: Options,
    progress: &dyn Progress,
) -> Result<Simulated, Error> {
    progress.plan(scenarios.len() as u64);
    let mut results = Vec::new();
    for s in scenarios {
        results.push(match s.kind {
            scenario::Kind::StageTimes => tables::stage_times(s, opt),
            scenario::Kind::PingBulk => tables::ping_bulk(s, opt),
            scenario::Kind::Channels => {
                let (mut r, sweeps) = channels::run(s, opt)?;
                if let Some(f) = &s.factors {
                    let (t, events) = factors::table(s, f, &sweeps, opt);
                    r.events += events;
                    r.tables.push(t);
                    if s.variants().contains(&scenario::Variant::Qosvia) {
                        let (t, events) = factors::qos_table(s, f, &sweeps, opt);
                        r.events += events;
                        r.tables.push(t);
                    }
                }
                r
            }
        });
        progress.done(&s.name);
    }
    let summary = Summary::of(results.iter().flat_map(|r| r.checks.iter()));
    Ok(Simulated { results, summary })
}

/// The report of the reproduction.
pub fn report(sim: &Simulated) -> Report {
    report_titled(sim, TITLE)
}

/// The report under another title (a user's scenarios run by `clusterqos run`).
pub fn report_titled(sim: &Simulated, title: &str) -> Report {
    let checks: Vec<&Check> = sim.checks().collect();
    let mut report = Report::new(title);
    report.summary.push(format!(
        "{} scenarios; {} simulated events. Every measured value comes from running the VIA \
         firmware model (SVIA, PVIA, QoSVIA as NIC control programs of the Myrinet model). \
         Table 1 is the calibration (every cell a fit); Table 2 and Figs 3-6 are predictions. \
         Figures are not in the paper's text, so they are checked through the loads and \
         orderings the text states.",
        sim.results.len(),
        sim.events()
    ));
    report.summary.extend(summary_paragraphs(&sim.summary));
    report.tables.push(checks_table(&checks));
    report.tables.push(sources_table(&checks));
    for r in &sim.results {
        report.tables.extend(r.tables.iter().cloned());
        report.figures.extend(r.figures.iter().cloned());
    }
    report.notes.extend(NOTES.iter().map(|n| n.to_string()));
    report
}

/// What the model assumes beyond the paper, and where it differs and why.
pub const NOTES: &[&str] = &[
    "Model (crates/qos-sim/src/myrinet/nic/via): one LANai runs the LCP; one host DMA engine with a hardware request queue moves descriptors, data (one request per 4 KiB page, buffers 64 B into a page) and completion status at 133.6 MB/s with 2 us (reads) or 1 us (writes) of set-up per request; NSDMA sends one message at a time at the 160 MB/s link rate; NRDMA takes messages in order. Doorbells are merged into one FCFS queue. Every constant is in via/calibration.toml with the Table 1 entries it is fitted to.",
    "PVIA's polling loop is simulated exactly: the LANai visits doorbells, HDMA, NSDMA and NRDMA in turn, spends a check on each, and handles one event per visit; an event waits for its device's visit. SVIA busy-waits on each device of its sequence and polls the doorbell queue and NRDMA between sequences (and NRDMA while it waits for the host DMA).",
    "QoSVIA: PVIA's costs plus time-stamping and mid-queue insertion, fitted to its Table 1 column. The HDMA and NSDMA queues are in stamp order; an insertion never passes the request next to the HDMA head (the paper's tolerated mis-ordering). Assumption: the LCP also takes finished host DMA requests by stamp (ordered completions). Without it QoSVIA's LANai, busier than its DMA engine with Table 1's costs, serves best-effort work first and QoSVIA saturates with PVIA: see the beyond scenario.",
    "Jitter: θ = mean over messages of max(0, inter-receipt time - negotiated inter-arrival time) / negotiated time, measured when the receiving application notices each message (status written up, host polling); for MPEG channels the inter-emission time replaces the negotiated one (the paper does not say how it measured VBR jitter). CBR channels start at a seeded random phase; the best-effort channel is Poisson.",
    "Knees: the load at which θ of the slowest class first exceeds 0.1, interpolated between sweep points; best-effort saturation: where its mean latency first exceeds 1 ms. The paper gives loads but no threshold.",
    "Table 2 cannot be met as printed: its SVIA latencies are below Table 1's own sequential send times, and PVIA's 16 KB latency is below the host DMA time of a 16 KB message at Table 1's rate. The model follows Table 1 and the paper's descriptions; those checks show as misses with the reason.",
];
