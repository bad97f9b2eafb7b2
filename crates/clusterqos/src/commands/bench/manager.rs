//! `clusterqos bench manager`: admission decisions per second and end-to-end decision
//! latency of the master (issue §9) — 1,024-node mesh, 10,000 flows, concurrent
//! clients on loopback, every grant committed to SQLite before it is acknowledged.

use std::path::PathBuf;
use std::process::ExitCode;

use qos_runtime::bench::{self, Options, Phase};
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
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
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
    ]
}

/// Runs the benchmark.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.k < 2 || args.flows == 0 || args.clients == 0 {
        anyhow::bail!("--k must be at least 2, --flows and --clients at least 1");
    }
    let mut reports = Vec::new();
    let modes: &[Sync] = match args.sync {
        SyncChoice::Full => &[Sync::Full],
        SyncChoice::Normal => &[Sync::Normal],
        SyncChoice::Both => &[Sync::Full, Sync::Normal],
    };
    for &sync in modes {
        let opts = Options {
            k: args.k,
            flows: args.flows,
            clients: args.clients,
            dir: args.dir.clone().unwrap_or_else(std::env::temp_dir),
            seed: args.seed,
            sync,
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
        "phase (database sync)",
        "count",
        "per second",
        "p50 (µs)",
        "p99 (µs)",
        "max (µs)",
        "CPU µs/op",
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
        "full: fsync per group commit (power-loss safe); normal: commit to the OS (crash safe)\n\
         CPU µs/op: processor time of the whole process (master and clients) per operation"
    );
    Ok(ExitCode::SUCCESS)
}
