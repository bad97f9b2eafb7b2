//! `clusterqos bench manager`: admission decisions per second and end-to-end decision
//! latency of the master (issue §9, 18). The benchmark is
//! `qos_experiments::bench::manager`; this parses its flags and prints the table.

use std::path::PathBuf;
use std::process::ExitCode;

use qos_experiments::bench::manager::{self, Options, Stores, Syncs};

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Side of the mesh (32 gives 1,024 nodes).
    #[arg(long, default_value_t = 32)]
    pub k: u16,
    /// Flows requested, then released.
    #[arg(long, default_value_t = 10_000)]
    pub flows: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Directory for the benchmark's database (default: the system's temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the flow mix.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Database commit modes to measure: full (fsync per group commit), normal (commit
    /// to the OS) or both.
    #[arg(long, value_enum, default_value_t = SyncChoice::Both)]
    pub sync: SyncChoice,
    /// Stores to measure: SQLite (in the modes of --sync), etcd (a local cluster of
    /// --etcd-members members; needs the etcd binary), or both.
    #[arg(long, value_enum, default_value_t = StoreChoice::Sqlite)]
    pub store: StoreChoice,
    /// Members of the local etcd cluster.
    #[arg(long, default_value_t = 3)]
    pub etcd_members: usize,
    /// etcd transactions in flight at once (the manager's --etcd-pipeline).
    #[arg(long, default_value_t = 1)]
    pub etcd_pipeline: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Which stores `bench manager` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreChoice {
    /// SQLite beside the master.
    Sqlite,
    /// A local etcd cluster.
    Etcd,
    /// SQLite, then etcd.
    Both,
}

/// Which commit modes `bench manager` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SyncChoice {
    /// fsync at every group commit.
    Full,
    /// Commit to the OS without fsync.
    Normal,
    /// Full, then normal.
    Both,
}

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if std::env::var_os("RUST_LOG").is_some() {
        qos_runtime::logging::init();
    }
    let opts = Options {
        k: args.k,
        flows: args.flows,
        clients: args.clients,
        dir: args.dir,
        seed: args.seed,
        sync: match args.sync {
            SyncChoice::Full => Syncs::Full,
            SyncChoice::Normal => Syncs::Normal,
            SyncChoice::Both => Syncs::Both,
        },
        stores: match args.store {
            StoreChoice::Sqlite => Stores::Sqlite,
            StoreChoice::Etcd => Stores::Etcd,
            StoreChoice::Both => Stores::Both,
        },
        etcd_members: args.etcd_members,
        etcd_pipeline: args.etcd_pipeline,
    };
    let reports = manager::run(&opts)?;
    if args.json {
        output::print_json(&reports)?;
    } else {
        println!("{}", manager::headline(&reports, &opts));
        output::print_table(&manager::table(&reports), 1);
        for line in manager::etcd_accounts(&reports) {
            println!("{line}");
        }
        println!("{}", manager::LEGEND);
    }
    Ok(ExitCode::SUCCESS)
}
