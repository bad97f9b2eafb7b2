//! The papers' experiments, each written once (DESIGN.md, "experiments"): what to run,
//! what the paper says and where, and how the measured value is compared — in checks
//! whose kinds cannot flatter ([`check`]) — run in the simulator or on a testbed of
//! network namespaces. Every experiment has one shape ([`experiment::Experiment`]), so
//! `clusterqos reproduce` and `clusterqos run` are one generic path each; the command
//! only parses arguments, calls these, and prints.
//!
//! Map of the crate:
//! - [`experiment`] — the [`experiment::Experiment`] shape, run options, the progress
//!   sink, the `model` key every scenario file starts with.
//! - [`assume`] — declared assumptions: the values a paper leaves open, each with its
//!   range and the paper's words, used by reference in a scenario file.
//! - [`check`] — checks (value, bound, ordering, shown; prediction, fit, identity), the
//!   orderings' rule, and the one `[[expect]]` grammar of the scenario files.
//! - [`report`] — the report directory: `index.html`, SVG figures (behind one seam),
//!   CSV and JSON of every table and series; the tables of checks.
//! - [`gulati`] — the thesis's chapter 5 (and §2.3/§3.2) in the calibrated Myrinet/GM
//!   model, and [`gulati::real`], the same experiments on real traffic.
//! - [`nagar`] — Nagar et al.'s QoS-aware VIA firmware (SVIA, PVIA, QoSVIA), simulated,
//!   and Figs 3–4 on real traffic.
//! - [`yum`] — Yum et al.'s QoS wormhole cluster (admission, congestion and peak power
//!   control) in the flit-level model.
//! - [`flit`] — the flit network's load sweeps (scenario files, runs, report).
//! - [`reproduce`] — `clusterqos reproduce PAPER`: the paper as a typed value, and the
//!   one path that runs any experiment's shipped scenarios into an outcome to print.
//! - [`sensitivity`] — `reproduce PAPER --sensitivity`: each declared assumption at the
//!   ends of its range, and which verdicts it flips.
//! - [`run`] — `clusterqos run FILE...`: files of any model, through the same path.
//! - [`sweep`] — one scenario at every combination of some of its values and several
//!   seeds, as pure tasks (`clusterqos sweep`, the Python package's `sweep`).
//! - [`locate`] — the line of a key path in a scenario file (file:line errors).
//! - [`traffic`] — streams and ping-pong between applications on data-plane ports, with
//!   every arrival timed.
//! - [`overhead`] — the rate-control overhead on real traffic (thesis §5.2): ABBA blocks,
//!   paired statistics, bootstrap intervals.
//! - [`bench`] — benchmarks: the flit network's speed, the manager's decisions.
//! - [`schedule`] — the rate-control dispatch table for a set of flows (Table 3.1).
//! - [`admit`] — replaying an admission script (thesis §3.3.1) for `clusterqos admit`.
//! - [`calibrate`] — where a real node's IDT sweep runs, and writing T and Bmax into a
//!   manager's topology file.

pub mod admit;
pub mod assume;
pub mod bench;
#[cfg(feature = "real")]
pub mod calibrate;
pub mod check;
pub mod error;
pub mod experiment;
pub mod flit;
pub mod gulati;
pub mod locate;
pub mod nagar;
#[cfg(feature = "real")]
pub mod overhead;
pub mod report;
pub mod reproduce;
pub mod run;
pub mod schedule;
pub mod sensitivity;
pub mod sweep;
#[cfg(feature = "real")]
pub mod traffic;
pub mod yum;

pub use error::Error;
