//! Yum et al.'s QoS cluster on the flit network: what their paper adds to a wormhole
//! fabric — IBA host channel adapters with queue pairs, probe-based admission control
//! in the routers, the real-time workload and its metrics (§3.2, §4.1, §6) — kept apart
//! from the generic fabric in [`crate::flit`], which it plugs into.
//!
//! Map of the module:
//! - [`config`] — a run as a scenario writes it: network, HCA, WRR variant, admission,
//!   workload, phases; checked once, errors naming the key at fault.
//! - [`traffic`] — the workload turned into messages per node: MPEG-2 streams (with the
//!   input regulator) or ON/OFF connections, Poisson best-effort traffic, control
//!   traffic on VL15; real-time connections with their lanes and solicited bandwidths.
//! - [`metrics`] — what is measured: frames reassembled into DMP and DMT with
//!   batch-means confidence intervals, latency per class, rejection rate, setup latency.
//! - [`congestion`] — credit-based congestion control (§4.2) and the CQ layouts
//!   (§4.3); [`throttle`] — the ALO and Self-Tuned baselines (§7.2) on the HCAs'
//!   injection gate; [`source_rate`] — beyond the paper, Gulati's source rate
//!   control (a bandwidth manager's rates, IDT/NDT at each HCA) in place of credits.
//! - [`power`] — the energy model (§3.4, Table 1): power sampled every N cycles;
//!   a packet's energy and time in the network (§5).
//! - [`hca`] — the HCAs' queue pairs, WQEs and CQs, and the prioritized QP scheduler as
//!   the flit network's injection gate.
//! - [`admission`] — the fabric's links for the probe ledger, connection paths, and
//!   VL arbiters from WRR weights.
//! - [`driver`] — the policy that drives the flit network through its hooks:
//!   consumers, HCAs, probes, releases, final packets, connection lifetimes.
//! - [`run`] — one run at one load: the flit network and the policy built from the
//!   configuration, and what the run measured.

pub mod admission;
pub mod config;
pub mod congestion;
pub mod driver;
pub mod error;
pub mod hca;
pub mod metrics;
pub mod peak;
pub mod power;
pub mod powerherd;
pub mod run;
pub mod source_rate;
pub mod throttle;
pub mod traffic;
pub mod workload_spec;

pub use config::IbaConfig;
pub use error::{ConfigError, IbaError};
