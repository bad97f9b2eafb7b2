//! Gulati's thesis, chapter 5 (and the cascaded-switch example of §2.3/§3.2), in the
//! calibrated Myrinet/GM model: the shipped scenarios (`scenarios/gulati/`, embedded),
//! the model's own T and Bmax measured first (as the thesis calibrated before its
//! experiments, §5.3), every scenario run, and every published value checked.
//! [`real`] runs the same experiments on a testbed of network namespaces.

pub mod agreement;
pub mod builtin;
mod managed;
#[cfg(feature = "real")]
pub mod real;
pub mod run;
pub mod scenario;

use std::collections::HashMap;

use qos_core::source::Located;
use qos_sim::myrinet::Firmware;
use serde::Serialize;

pub use run::{ModelParams, Options, Results};
pub use scenario::Scenario;

use crate::check::{Check, Mechanism, MetricId, Summary};
use crate::experiment::{Experiment, Model, Progress, ReadFile, RunOptions};
use crate::report::checks::{checks_table, sources_table, summary_paragraphs};
use crate::report::Report;
use crate::Error;

/// Title of the simulated reproduction's report.
pub const TITLE: &str =
    "Reproduction of Gulati (2001), A Proportional Bandwidth Allocation Scheme for Myrinet Clusters";

/// The thesis's experiments in the calibrated Myrinet/GM model.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gulati;

impl Experiment for Gulati {
    type Scenario = Scenario;
    type Output = Simulated;

    fn model(&self) -> Model {
        Model::Gulati
    }
    fn title(&self) -> String {
        TITLE.into()
    }
    fn builtin(&self) -> Vec<(&'static str, &'static str)> {
        builtin::GULATI.to_vec()
    }
    fn load(&self, file: &str, text: &str, read: &ReadFile<'_>) -> Result<Scenario, Located> {
        scenario::load(file, text, read)
    }
    fn name<'a>(&self, s: &'a Scenario) -> &'a str {
        &s.file.name
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
        simulate(scenarios, opt, progress)
    }
    fn checks<'a>(&self, out: &'a Simulated) -> Vec<&'a Check> {
        out.checks().collect()
    }
    fn report(&self, out: &Simulated, title: &str) -> Report {
        report(out, title, NOTES)
    }
    /// Rate control off: the flows run under unmodified GM (the manager's IDTs are
    /// then not enforced).
    fn switch_off(&self, s: &Scenario, m: Mechanism) -> Option<Scenario> {
        (m == Mechanism::RateControl && s.firmware() == Firmware::RateControl).then(|| {
            let mut out = s.clone();
            out.file.firmware = Some(Firmware::Gm);
            out
        })
    }
    fn crediting_only(&self, s: &Scenario) -> Option<Scenario> {
        let mut out = s.clone();
        let (expect, at): (Vec<_>, Vec<_>) = s
            .file
            .expect
            .iter()
            .cloned()
            .zip(s.expect_at.iter().copied())
            .filter(|(e, _)| e.mechanism.is_some())
            .unzip();
        out.file.expect = expect;
        out.expect_at = at;
        (!out.file.expect.is_empty()).then_some(out)
    }
}

/// The shipped scenarios (all, or the one named), in the thesis's order.
pub fn builtin_scenarios(only: Option<&str>) -> Result<Vec<Scenario>, Error> {
    Gulati.builtin_scenarios(only)
}

/// What the simulated reproduction produced.
#[derive(Debug, Clone, Serialize)]
pub struct Simulated {
    /// Per scenario, in order.
    pub results: Vec<Results>,
    /// T and Bmax measured on the model (the first calibration measured).
    pub model: Option<ModelParams>,
    /// Counts of the checks.
    pub summary: Summary,
}

impl Simulated {
    /// Every check, in order.
    pub fn checks(&self) -> impl Iterator<Item = &Check> {
        self.results.iter().flat_map(|r| r.checks.iter())
    }
    /// The simulated value of a metric.
    pub fn value(&self, id: &MetricId) -> Option<f64> {
        self.checks().find(|c| c.id == *id).map(|c| c.measured)
    }
    /// Simulated events in all runs.
    pub fn events(&self) -> u64 {
        self.results.iter().map(|r| r.events).sum()
    }
}

/// Runs `scenarios`. Scenarios under the bandwidth manager use T and Bmax measured on
/// the model, once per calibration. `progress` hears each scenario as it finishes.
pub fn simulate(
    scenarios: &[Scenario],
    opt: &RunOptions,
    progress: &dyn Progress,
) -> Result<Simulated, Error> {
    progress.plan(scenarios.len() as u64);
    let mut models: HashMap<String, ModelParams> = HashMap::new();
    let mut first = None;
    let mut results = Vec::new();
    for s in scenarios {
        let mut o = Options {
            quick: opt.quick,
            seed: opt.seed,
            model: None,
        };
        if s.file.kind.needs_manager() {
            // T and Bmax are the rate-control MCP's (thesis §5.3) whatever firmware the
            // flows then run: with rate control switched off the manager still computes
            // IDTs from them, and nothing enforces them.
            let key = format!("{:?}", s.calibration);
            let m = match models.get(&key) {
                Some(m) => *m,
                None => {
                    let mut on = s.clone();
                    on.file.firmware = Some(Firmware::RateControl);
                    let m = run::measure_model(&on, o)?;
                    models.insert(key, m);
                    m
                }
            };
            first.get_or_insert(m);
            o.model = Some(m);
        }
        results.push(run::execute(s, o)?);
        progress.done(&s.file.name);
    }
    let summary = Summary::of(results.iter().flat_map(|r| r.checks.iter()));
    Ok(Simulated {
        results,
        model: first,
        summary,
    })
}

/// The report of a simulated reproduction.
pub fn report(sim: &Simulated, title: &str, notes: &[&str]) -> Report {
    let checks: Vec<&Check> = sim.checks().collect();
    let mut report = Report::new(title);
    report.summary.push(format!(
        "{} scenarios; {} simulated events. Every measured value comes from running the \
         calibrated Myrinet/GM model.",
        sim.results.len(),
        sim.events()
    ));
    report.summary.extend(summary_paragraphs(&sim.summary));
    if let Some(m) = sim.model {
        report.summary.push(format!(
            "Measured on the model first (thesis §5.3): Bmax = {:.2} MB/s, T = {:.2} ticks (one \
             packet at Bmax; the IDT sweep's knee is at {:.2} ticks); the simulated manager \
             computes IDTs from these.",
            m.bmax.mb_per_sec(),
            m.t_ticks,
            m.knee_ticks
        ));
    }
    report.tables.push(checks_table(&checks));
    report.tables.push(sources_table(&checks));
    for r in &sim.results {
        report.figures.extend(r.figures.iter().cloned());
    }
    report.notes.push(
        "Calibration: crates/qos-sim/src/myrinet/calibration.toml (embedded); each value cites \
         the thesis section it is tuned against and states its assumptions."
            .into(),
    );
    report.notes.extend(notes.iter().map(|n| n.to_string()));
    report
}

/// What the model assumes beyond the thesis, and where its results differ from the
/// published ones and why; printed at the end of the `reproduce gulati` report.
pub const NOTES: &[&str] = &[
    "Model: one LANai processor runs the MCP handlers (receive side first, then SEND, then SDMA) with fixed plus per-KiB costs; one PCI DMA engine (110 MB/s reads, 125 MB/s writes); 4 send and 4 receive SRAM buffers; cut-through crossbars at 160 MB/s per link with round-robin output arbitration and backpressure; cumulative acknowledgements delayed by 100 us. Every constant is in crates/qos-sim/src/myrinet/calibration.toml with the thesis statement it is tuned against.",
    "Calibration first (§5.3): before the experiments under the manager, the model's own Bmax (one unregulated flow of 64 KB messages) and T are measured, and the simulated manager computes IDTs from them, as the thesis's manager used its measured T = 96 ticks and Bmax. T is one 4 KB packet's time at Bmax (§3.2.2: T 'corresponds to the peak achievable bandwidth Bmax'; the runtime's calibration does the same), so an IDT of T·Bmax/B paces a flow at B; the knee of an IDT sweep every 2 ticks from 64 to 160 (where the bandwidth falls below 98 % of Bmax, interpolated) is what the thesis's 96 ticks is checked against. The thesis's own pair has T·Bmax = 48 us x 81.8 MB/s = 3,926 B, 4 % below a packet: its manager's IDTs paced flows 4 % above their reservations.",
    "Best-effort capacity (§5.6): the manager shares at most 78 MB/s of a node among its best-effort flows (minus the node's premium reservations), a value of the thesis cluster's topology (qos_core::topology::NodeCapacity::THESIS_BEST_EFFORT, examples/topologies/thesis-crossbar.toml) fitted to §5.6: 40 + 38 = 60 + 18 = 20 + 2 x 29 = 2 x 39 = 78. `clusterqos admit` and the manager service read the same value from the topology file.",
    "Assumption (Fig 5.4): incoming packets cost less processor time than outgoing ones, but at low incoming rates every packet needs its own acknowledgement; at high rates one acknowledgement covers several packets. This makes incoming + outgoing bandwidth grow with the incoming rate, as the thesis says.",
    "Assumption (MPI, Fig 5.9): MPICH-GM is modelled as host work per message on the sender before the GM post: 40 us plus a copy at 54 MB/s. This caps an MPI flow near 51 MB/s.",
    "Assumption: the network never loses or reorders packets, so acknowledgements only free send tokens and no retransmission is modelled. A stopped flow's queued, unsent packets are discarded (GM drops the sends of a closed port).",
    "Ratios: each ratio is compared with the inverse IDT ratio the thesis states its results follow (§5.4, §5.5.2); where it states the bandwidths of a case, the note gives the ratio of those (20.5 / 39.81 = 0.515 against the IDTs' 0.5). A ratio of two flows with equal IDTs is an identity: they share equally whatever the model.",
    "Network contention (Fig 2.4/3.2): the thesis gives no numbers. Under round-robin switches alone B gets less than A (an ordering, from 'B suffers', decided by a margin of 4 MB/s: the run is one deterministic simulation and gives no interval); once the manager has rate-controlled C and D to half of B's rate, B gets its reservation (within 10 %), and as much as A (an identity: both hold 40 MB/s reservations, so equal IDTs).",
];
