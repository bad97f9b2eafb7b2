//! Benchmarks (`clusterqos bench`): how fast the models and services run, measured the
//! same way every time so that the figures in the docs can be regenerated.
//!
//! - [`network`] — the flit-level network's simulation speed (Yum et al. §6.1): cycles
//!   and flit-hops per CPU-second, peak memory, mesh-size scaling.
//! - [`manager`] — the bandwidth manager's admission decisions per second and decision
//!   latency on each store.
//! - [`yum`] — the Yum et al. cluster's simulation speed (5×5 mesh with HCAs and
//!   probe-based admission).
//! - The data plane's rate-control overhead (thesis §5.2) is
//!   [`crate::overhead::bench`].

#[cfg(feature = "real")]
pub mod manager;
pub mod network;
pub mod yum;
