//! Flit-level wormhole network with virtual lanes and IBA virtual-lane arbitration
//! (Yum et al. §3.1–3.3, §6.1): the fabric the admission, congestion and power work runs on.
//!
//! Map of the module:
//! - [`config`] — router pipeline delays, lanes and buffers, VL arbitration, HCA,
//!   topology, traffic classes, CBR streams, phases; presets for BookSim2's router and
//!   Yum's five-stage router; [`FlitConfig::reference`] is the benchmark network.
//! - [`topology`] — crossbar, k×k mesh and torus as flat port/link/route tables (DOR;
//!   dateline lane classes on the torus).
//! - [`graph`] — any graph of a qos-core topology file with its source routes, checked
//!   free of deadlock.
//! - [`engine`] — the network's flat struct-of-arrays state, the cycle loop (traffic,
//!   wake-ups, routers, HCAs, watchdog, phases) and the results.
//! - `router` — the routers: VL ring buffers with per-VL credits, route → VL
//!   allocation → crossbar arbitration → traversal → link, driven by wake-ups so a cycle
//!   costs only the lanes that can move.
//! - [`hca`] — host channel adapters: per-class send queues, one-flit-per-cycle DMA
//!   into HCA VL buffers, VL arbitration of the HCA port.
//! - [`traffic`] — Bernoulli/Poisson sources (uniform, transpose, bit-complement,
//!   hotspot) and CBR streams.
//! - [`stats`] — warm-up / measurement / drain statistics.
//! - [`scenario`] — flit scenario files with load sweeps, and their report.
//! - [`runner`] — runs scenario files as `clusterqos run` does and writes their reports.
//!
//! # The BookSim2-equivalent router
//!
//! BookSim2's input-queued router (`iq_router`) with `routing_delay = 0`,
//! `vc_alloc_delay = 1`, `sw_alloc_delay = 1`, `st_final_delay = 1`, channel latency 1
//! and `credit_delay = 1` maps onto [`config::Delays::BOOKSIM`]: `sync = 0`,
//! `route = 0` (lookup in the same cycle as VC allocation), `vl_alloc = 1`,
//! `switch_alloc = 1`, `crossbar = 1`, `link = 1`, `credit = 1`; VCs are lanes, any free
//! lane of the packet's class may be allocated at each hop (as BookSim's VC allocator
//! with one class), output lanes are released when the tail leaves
//! (`wait_for_tail_credit = 0`), and switch allocation is separable input-first with
//! round-robin arbiters and one iteration. BookSim's terminal has an unbounded source
//! queue: set `hca.vl_buffer` absent. Zero-load latency of an L-flit packet through H
//! routers is `4·H + 2 + (L − 1)` cycles in both simulators (BookSim's 8×8 mesh at
//! 0.0002 packets/node/cycle and 1-flit packets reports 27.19 cycles for 6.298 routers
//! on average, = 4 × 6.298 + 2).
//!
//! Yum's Fig 1 router is [`config::Delays::YUM`]: five one-cycle stages
//! (sync, route, VL arbitration, crossbar, output/link).

pub mod config;
pub mod engine;
pub mod graph;
pub mod hca;
mod router;
pub mod runner;
pub mod scenario;
pub mod stats;
pub mod topology;
pub mod traffic;

#[cfg(test)]
mod tests;

pub use config::FlitConfig;
pub use engine::Network;
pub use stats::RunResult;

/// Why a flit network could not be built or run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FlitError {
    /// The configuration is unusable.
    #[error("flit network: {0}")]
    Config(String),
    /// No flit moved for too long while flits were waiting.
    #[error(
        "deadlock: no flit moved for {idle} cycles (cycle {cycle}, {flits} flits in the network)"
    )]
    Deadlock {
        /// Cycle of detection.
        cycle: u64,
        /// Cycles without movement.
        idle: u64,
        /// Flits stuck.
        flits: u64,
    },
    /// More than 2^30 packets in flight at once.
    #[error("more than 2^30 packets in flight; lower the load or shorten the run")]
    TooManyPackets,
}

/// Builds and runs one configuration.
pub fn simulate(cfg: &FlitConfig) -> Result<RunResult, FlitError> {
    Network::new(cfg)?.run()
}
