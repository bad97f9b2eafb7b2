//! Flit-level wormhole network with virtual lanes and IBA virtual-lane arbitration
//! (Yum et al. §3.1–3.3, §6.1): the fabric the admission, congestion and power work runs on.
//!
//! Map of the module:
//! - [`config`] — router pipeline delays, lanes and buffers, allocator, VL arbitration,
//!   HCA, topology, traffic classes, CBR streams, phases; presets for BookSim2's router
//!   and terminal and Yum's five-stage router; [`FlitConfig::reference`] is the
//!   benchmark network, [`FlitConfig::booksim2`] the BookSim2-equivalent one.
//! - [`topology`] — crossbar, k×k mesh and torus as flat port/link/route tables (DOR;
//!   dateline lane classes on the torus).
//! - [`graph`] — any graph of a qos-core topology file with its source routes, checked
//!   free of deadlock.
//! - [`engine`] — the network's flat struct-of-arrays state, the cycle loop (traffic,
//!   wake-ups, routers, HCAs, watchdog, phases) and the results.
//! - `packet` — packets in flight and the flit word, shared by the engine, the HCAs
//!   and the routers (dependencies point one way: engine → hca → router → records,
//!   packet).
//! - `records` — the routers' flat records: VC ring slot, input VC (wormhole and
//!   credit state), port, counters.
//! - `separable` — BookSim2's separable input-first VC and switch allocators.
//! - `prefetch`, `huge` — speed only, no result depends on them: prefetch hints for
//!   the routers a sweep steps next, and the large arrays on transparent huge pages.
//! - [`validate`] — the configuration's checks, each naming the key at fault.
//! - `router` — the routers: VL ring buffers with per-VL credits, route → VL
//!   allocation → crossbar arbitration → traversal → link, driven by wake-ups so a cycle
//!   costs only the lanes that can move.
//! - [`hca`] — host channel adapters: per-class send queues, one-flit-per-cycle DMA
//!   into HCA VL buffers, VL arbitration of the HCA port; or BookSim2's terminal.
//! - [`traffic`] — Bernoulli/Poisson sources (uniform, transpose, bit-complement,
//!   hotspot) and CBR streams.
//! - [`hooks`] — extension points for policies: packet kinds with a payload, the
//!   header hook at routing, delivery and injection hooks, posting, the periodic hook,
//!   the HCA injection gate ([`Network::run_hooked`]).
//! - [`stats`] — warm-up / measurement / drain statistics.
//! - [`ran_array`] — Knuth's generator, BookSim2's, for BookSim2's `randperm`
//!   permutations.
//!
//! # The BookSim2-equivalent configuration
//!
//! [`FlitConfig::booksim2`] and `scenarios/flit/{mesh8,torus8}-booksim2.toml` behave as
//! BookSim2's `iq_router` and terminal (`scenarios/flit/booksim/*.cfg`) cycle for cycle:
//! - `router.delays = "booksim2"` ([`config::Delays::booksim2`]): routing_delay 0,
//!   vc_alloc_delay 1, sw_alloc_delay 1, st_final_delay 1 and BookSim2's channel and
//!   credit timing — a credit is usable 3 cycles after its flit left the buffer (4
//!   between torus routers), 2 at the terminal; torus router links take 2 cycles
//!   (`use_noc_latency`); the terminal's ejection buffer returns credits 3 cycles
//!   after the flit arrived.
//! - `router.allocator = "separable_input_first"`: BookSim2's VC and switch
//!   allocators (the `separable` module).
//! - `hca.model = "source_queue"`: BookSim2's terminal (one packet at a time per
//!   class, header on the next lane with a credit).
//! - on a torus, `ties = "random"` and `dateline = "on_entry"`: `dim_order_torus`.
//! - `phases.abort_latency`: BookSim2's `latency_thres` rule.
//!
//! Zero-load latency of an L-flit packet through H routers is `4·H + 2 + (L − 1)`
//! cycles on the mesh and `5·H + 1 + (L − 1)` on the torus in both simulators.
//! `delays = "booksim"` ([`config::Delays::BOOKSIM`]) has BookSim2's stage delays and
//! zero-load latency on a mesh but one-cycle credits; with Yum's VL arbiters and DMA
//! HCA it is the reference network of the benchmark ([`FlitConfig::reference`]).
//!
//! Yum's Fig 1 router is [`config::Delays::YUM`]: five one-cycle stages
//! (sync, route, VL arbitration, crossbar, output/link).

pub mod anynet;
pub mod config;
pub mod engine;
pub mod error;
pub mod governor;
pub mod graph;
pub mod hca;
pub mod hooks;
#[allow(unsafe_code)]
mod huge;
mod packet;
#[allow(unsafe_code)]
mod parallel;
#[allow(unsafe_code)]
mod prefetch;
pub mod ran_array;
mod records;
mod router;
mod sampling;
mod separable;
pub mod stats;
#[allow(unsafe_code)]
mod threads;
pub mod topology;
pub mod traffic;
pub mod validate;

#[cfg(test)]
mod booksim_tests;
#[cfg(test)]
mod hooks_tests;
#[cfg(test)]
mod outbuf_tests;
#[cfg(test)]
mod priority_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod threads_tests;
#[cfg(test)]
mod trace_tests;

pub use config::{FlitConfig, LaneOrder, TopologySpec};
pub use engine::Network;
pub use error::FlitError;
pub use parallel::{sync_cost, ThreadsProfile};
pub use stats::RunResult;

/// Builds and runs one configuration.
pub fn simulate(cfg: &FlitConfig) -> Result<RunResult, FlitError> {
    Network::new(cfg)?.run()
}
