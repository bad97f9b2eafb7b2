//! Deterministic discrete-event simulator of clusterqos (DESIGN.md, "qos-sim"): the
//! models and the engine, and nothing else — scenario files, checks against the papers
//! and reports are the experiments library's (`qos-experiments`).
//!
//! Map of the crate:
//! - [`engine`] — integer-picosecond event queue with a deterministic tie-break, and the
//!   seeded random number generator.
//! - [`myrinet`] — the Myrinet/GM cluster model (hosts, LANai NICs, crossbar switches,
//!   bandwidth resource manager), calibrated against the thesis's chapter 5.
//! - [`flit`] — flit-level wormhole network: virtual lanes, credit flow control, IBA VL
//!   arbitration, HCAs, crossbar/mesh/torus, load sweeps (Yum et al. §3, §6.1).
//! - [`iba`] — Yum et al.'s QoS cluster on the flit network: run configuration, the
//!   real-time workload (MPEG-2 streams, ON/OFF, best effort, control), DMP/DMT and
//!   latency measures with confidence intervals.
//! - [`workload`] — real-time sources: MPEG streams (traces or synthetic GOPs), ON/OFF,
//!   Poisson (Yum §6.2, Nagar §4).

// No unsafe code, except the two modules that share the flit network's arrays between
// the threads of one run (flit::parallel, flit::threads), each write justified there,
// and two one-call modules of hints to the CPU and the kernel (flit::prefetch: a
// prefetch instruction; flit::huge: madvise), which read and write no memory.
#![deny(unsafe_code)]

pub mod engine;
pub mod flit;
pub mod iba;
pub mod myrinet;
pub mod workload;
