//! `clusterqos bench <what>`: performance benchmarks, one module per benchmark in
//! `bench/`. This file only dispatches.

use std::process::ExitCode;

#[cfg(feature = "runtime")]
pub mod dataplane;
#[cfg(feature = "runtime")]
pub mod jobs;
#[cfg(feature = "runtime")]
pub mod manager;
pub mod network;
pub mod yum;

/// Arguments of `bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    which: Bench,
}

/// The benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Flit-level network simulation speed on the reference 8×8 mesh (cycles/s,
    /// flit-hops/s, peak memory), and how it scales with mesh size.
    Network(network::Args),
    #[cfg(feature = "runtime")]
    /// Bandwidth manager: admission decisions per second and end-to-end decision
    /// latency (p50/p99) on a 1,024-node mesh with concurrent clients on loopback.
    Manager(manager::Args),
    #[cfg(feature = "runtime")]
    /// Job reservations: all-to-all jobs of 128 and 1,024 ranks decided and durable
    /// (request to reply), on SQLite and on a 3-member etcd; the master's memory.
    Jobs(jobs::Args),
    /// Yum et al.'s cluster: the 5×5 mesh with HCAs, queue pairs and probe-based
    /// admission (the Fig 6 scenario), simulated cycles per CPU second.
    Yum(yum::Args),
    #[cfg(feature = "runtime")]
    /// Data plane: rate-control overhead against the same agent with it off (round
    /// trips and bandwidth over message sizes, interleaved rounds, medians and quartiles).
    DataplaneOverhead(dataplane::Args),
}

/// Runs the chosen benchmark.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.which {
        Bench::Network(a) => network::run(a),
        #[cfg(feature = "runtime")]
        Bench::Manager(a) => manager::run(a),
        #[cfg(feature = "runtime")]
        Bench::DataplaneOverhead(a) => dataplane::run(a),
        Bench::Yum(a) => yum::run(a),
        #[cfg(feature = "runtime")]
        Bench::Jobs(a) => jobs::run(a),
    }
}
