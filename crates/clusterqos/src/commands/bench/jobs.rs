//! `clusterqos bench jobs`: how long a job reservation takes to be decided and durable
//! (all-to-all jobs of 128 and 1,024 ranks on a 1,024-node mesh), on SQLite and on a
//! 3-member etcd. The benchmark is `qos_runtime::bench::jobs`; this parses its flags
//! and prints the table. Take published figures with `/work/tools/quiet`-style quiet
//! machines: the times are wall-clock.

use std::path::PathBuf;
use std::process::ExitCode;

use qos_runtime::bench::jobs::{self, Options};
use qos_runtime::bench::BenchStore;
use qos_runtime::manager::store::Sync;

use crate::output;

/// Which stores are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Stores {
    /// SQLite beside the master, fsync at every commit.
    Sqlite,
    /// A local etcd cluster of --etcd-members members (needs the etcd binary).
    Etcd,
    /// SQLite, then etcd.
    Both,
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Ranks of the all-to-all jobs, comma-separated (each R·(R−1) flows).
    #[arg(long, value_delimiter = ',', default_value = "128,1024")]
    pub ranks: Vec<usize>,
    /// Jobs reserved (and released) per rank count.
    #[arg(long, default_value_t = 10)]
    pub repeats: usize,
    /// Stores to measure.
    #[arg(long = "store", value_enum, default_value = "both")]
    pub stores: Stores,
    /// Members of the local etcd cluster.
    #[arg(long, default_value_t = 3)]
    pub etcd_members: usize,
    /// Directory for the database (default: the system's temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if std::env::var_os("RUST_LOG").is_some() {
        qos_runtime::logging::init();
    }
    let dir = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut stores = Vec::new();
    if matches!(a.stores, Stores::Sqlite | Stores::Both) {
        stores.push(BenchStore::Sqlite(Sync::Full));
    }
    if matches!(a.stores, Stores::Etcd | Stores::Both) {
        stores.push(BenchStore::Etcd {
            members: a.etcd_members,
            pipeline: 1,
            gather: qos_runtime::manager::store::etcd_config::EtcdConfig::DEFAULT_GATHER,
            via: Default::default(),
            flow_keys: Default::default(),
            // The members inherit this process's Go settings (`bench manager` sets
            // its own: --etcd-gomaxprocs, --etcd-gogc).
            go: Default::default(),
        });
    }
    let mut rows = Vec::new();
    for store in stores {
        rows.extend(jobs::run(&Options {
            ranks: a.ranks.clone(),
            repeats: a.repeats,
            dir: dir.clone(),
            store,
        })?);
    }
    if a.json {
        output::print_json(&rows)?;
        return Ok(ExitCode::SUCCESS);
    }
    let header = [
        "store",
        "ranks",
        "flows",
        "jobs",
        "min ms",
        "p50 ms",
        "max ms",
        "release p50 ms",
        "RSS held KiB",
        "demand entries",
        "record B",
    ];
    let table = rows.iter().map(|r| {
        vec![
            r.store.clone(),
            r.ranks.to_string(),
            r.flows.to_string(),
            r.samples.to_string(),
            format!("{:.1}", r.min_ms),
            format!("{:.1}", r.p50_ms),
            format!("{:.1}", r.max_ms),
            format!("{:.1}", r.release_p50_ms),
            r.rss_held_kib.to_string(),
            r.demand_entries.to_string(),
            r.record_bytes.to_string(),
        ]
    });
    output::print_rows(header, table, 2);
    println!(
        "reservation time: request sent to reply read (demand summed over every route, \
         decided, record durable); RSS held: the process's resident memory holding the job, \
         beyond its start"
    );
    Ok(ExitCode::SUCCESS)
}
