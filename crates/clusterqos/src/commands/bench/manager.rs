//! `clusterqos bench manager`: admission decisions per second and end-to-end decision
//! latency of the master (issue §9) — 1,024-node mesh, 10,000 flows, concurrent
//! clients on loopback, every grant committed before it is acknowledged: to SQLite, or
//! (`--store etcd`) to a 3-member etcd cluster started on loopback for the run.

use std::path::PathBuf;
use std::process::ExitCode;

use qos_runtime::bench::{self, BenchStore, Options, Phase};
use qos_runtime::manager::store::Sync;

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
    /// etcd transactions in flight at once.
    #[arg(long, default_value_t = 4)]
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

fn row(name: &str, p: &Phase) -> Vec<String> {
    vec![
        name.to_string(),
        p.count.to_string(),
        format!("{:.0}", p.per_sec),
        format!("{:.0}", p.p50_us),
        format!("{:.0}", p.p99_us),
        format!("{:.0}", p.max_us),
        format!("{:.1}", p.cpu_us_per_op),
        format!("{:.1}", p.store_cpu_us_per_op),
    ]
}

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.k < 2 || args.flows == 0 || args.clients == 0 {
        anyhow::bail!("--k must be at least 2, --flows and --clients at least 1");
    }
    if args.etcd_members == 0 || args.etcd_pipeline == 0 {
        anyhow::bail!("--etcd-members and --etcd-pipeline must be at least 1");
    }
    let mut reports = Vec::new();
    let modes: &[Sync] = match args.sync {
        SyncChoice::Full => &[Sync::Full],
        SyncChoice::Normal => &[Sync::Normal],
        SyncChoice::Both => &[Sync::Full, Sync::Normal],
    };
    let mut stores: Vec<BenchStore> = Vec::new();
    if args.store != StoreChoice::Etcd {
        stores.extend(modes.iter().map(|&s| BenchStore::Sqlite(s)));
    }
    if args.store != StoreChoice::Sqlite {
        stores.push(BenchStore::Etcd {
            members: args.etcd_members,
            pipeline: args.etcd_pipeline,
        });
    }
    for store in stores {
        let opts = Options {
            k: args.k,
            flows: args.flows,
            clients: args.clients,
            dir: args.dir.clone().unwrap_or_else(std::env::temp_dir),
            seed: args.seed,
            store,
        };
        reports.push(bench::run(&opts)?);
    }
    if args.json {
        output::print_json(&reports)?;
        return Ok(ExitCode::SUCCESS);
    }
    let r = &reports[0];
    println!(
        "{} nodes, {} flows, {} clients: {} granted, {} rejected",
        r.nodes, args.flows, r.clients, r.granted, r.rejected
    );
    let mut t = output::table([
        "phase (store)",
        "count",
        "per second",
        "p50 (µs)",
        "p99 (µs)",
        "max (µs)",
        "CPU µs/op",
        "etcd CPU µs/op",
    ]);
    for r in &reports {
        t.add_row(row(&format!("decisions ({})", r.sync), &r.decisions));
        t.add_row(row(&format!("releases ({})", r.sync), &r.releases));
        t.add_row(row(
            &format!("decisions via agents ({})", r.sync),
            &r.via_agents,
        ));
    }
    output::align_numbers(&mut t, 1);
    println!("{t}");
    println!(
        "sqlite full: fsync per group commit (power-loss safe); sqlite normal: commit to the OS \
         (crash safe);\netcd: quorum commit on a local cluster, fsync on every member\n\
         CPU µs/op: processor time of the benchmark process (master and clients) per operation; \
         etcd CPU: of the etcd members"
    );
    Ok(ExitCode::SUCCESS)
}
