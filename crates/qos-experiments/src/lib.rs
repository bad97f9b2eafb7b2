//! The papers' experiments, each written once: what to run, what the paper published
//! and where, and how the measured value is compared (typed checks,
//! `qos_sim::report::check`), run in the simulator or on a testbed of network namespaces.
//! The `clusterqos` command only parses arguments, calls these, and prints.
//!
//! Map of the crate:
//! - [`gulati`] — the thesis's chapter 5 (and §2.3/§3.2): the simulated reproduction
//!   (model calibrated first, as the thesis did), and [`gulati::real`], the same
//!   experiments on real traffic.
//! - [`nagar`] — Nagar et al.'s QoS-aware VIA firmware (SVIA, PVIA, QoSVIA): Table 1
//!   as the calibration, then Table 2 and Figs 3–6 as predictions, and the comparisons
//!   beyond the paper (admission control, rate control).
//! - [`yum`] — Yum et al.'s QoS wormhole cluster (admission control, WRR variants, the
//!   real-time workload) in the flit-level model: `clusterqos reproduce yum`.
//! - [`tables`] — the check and source tables every reproduction prints.
//! - [`traffic`] — streams and ping-pong between applications on data-plane ports, with
//!   every arrival timed.
//! - [`overhead`] — the rate-control overhead on real traffic (thesis §5.2): ABBA blocks,
//!   paired statistics, bootstrap intervals.
//! - [`sweep`] — one scenario at every combination of some of its values and several
//!   seeds, as pure tasks (`clusterqos sweep`, the Python package's `sweep`).
//! - [`reproduce`] — a reproduction as `clusterqos reproduce` runs it: report written,
//!   checks table, summary line and JSON ready to print.
//! - [`run`] — a user's scenario files for `clusterqos run` (thesis or flit network).
//! - [`bench`] — benchmarks: the flit network's speed, the manager's decisions.
//! - [`schedule`] — the rate-control dispatch table for a set of flows (Table 3.1).
//! - [`admit`] — replaying an admission script (thesis §3.3.1) for `clusterqos admit`.
//! - [`calibrate`] — where a real node's IDT sweep runs, and writing T and Bmax into a
//!   manager's topology file.

pub mod admit;
pub mod bench;
pub mod calibrate;
pub mod gulati;
pub mod nagar;
pub mod overhead;
pub mod reproduce;
pub mod run;
pub mod schedule;
pub mod sweep;
pub mod tables;
pub mod traffic;
pub mod yum;

/// Why an experiment could not run (a miss is not an error: it is a failed check).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A scenario file is wrong (with its file and line).
    #[error(transparent)]
    Scenario(#[from] qos_core::source::Located),
    /// The model could not run a scenario.
    #[error(transparent)]
    Model(#[from] qos_sim::scenario::run::RunError),
    /// No scenario or experiment of that name.
    #[error("no scenario '{name}' (known: {known})")]
    Unknown {
        /// What was asked.
        name: String,
        /// What exists.
        known: String,
    },
    /// The report directory could not be written.
    #[error("writing the report: {0}")]
    Report(#[from] qos_sim::report::ReportError),
    /// A real experiment failed (testbed, data plane, traffic).
    #[error("{0:#}")]
    Real(anyhow::Error),
}
