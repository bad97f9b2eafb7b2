//! The bandwidth manager's admission decisions per second and end-to-end decision
//! latency (`clusterqos bench manager`): a 1,024-node mesh, 10,000
//! flows, concurrent clients on loopback, every grant committed before it is
//! acknowledged — to SQLite (fsync per group commit, or commit to the OS), or to a
//! 3-member etcd cluster started on loopback for the run. One run per store asked for
//! ([`qos_runtime::bench`] measures each); the results as a table.

use std::path::PathBuf;

use crate::report::Table;
use qos_runtime::bench::{self, BenchError, BenchStore, Phase, Report};
use qos_runtime::etcd_local::GoRuntime;
use qos_runtime::manager::store::etcd_config::{CommitVia, FlowKeys};
use qos_runtime::manager::store::Sync;

/// Which stores are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Stores {
    /// SQLite beside the master, in the commit modes asked for.
    Sqlite,
    /// A local etcd cluster.
    Etcd,
    /// SQLite, then etcd.
    Both,
}

/// Which SQLite commit modes are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Syncs {
    /// fsync at every group commit.
    Full,
    /// Commit to the OS without fsync.
    Normal,
    /// Full, then normal.
    Both,
}

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Side of the mesh (32 gives 1,024 nodes).
    #[arg(long, default_value_t = 32)]
    pub k: u16,
    /// Flows requested, then released.
    #[arg(long, default_value_t = 10_000)]
    pub flows: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Worker threads of the master's runtime (`clusterqos manager` runs one per core).
    #[arg(long, default_value_t = 1)]
    pub master_threads: usize,
    /// Directory for the benchmark's database and etcd members' data, cleared first
    /// (default: a new directory under the system's temporary one, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the flow mix.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Database commit modes to measure: full (fsync per group commit), normal (commit
    /// to the OS) or both.
    #[arg(long, value_enum, default_value = "both")]
    pub sync: Syncs,
    /// Stores to measure: SQLite (in the modes of --sync), etcd (a local cluster of
    /// --etcd-members members; needs the etcd binary), or both.
    #[arg(long = "store", value_enum, default_value = "sqlite")]
    pub stores: Stores,
    /// Members of the local etcd cluster.
    #[arg(long, default_value_t = 3)]
    pub etcd_members: usize,
    /// etcd transactions in flight at once (the manager's --etcd-pipeline).
    #[arg(long, default_value_t = 1)]
    pub etcd_pipeline: usize,
    /// How long a free etcd writer gathers decisions (the manager's --etcd-gather).
    #[arg(long, default_value = "500us")]
    pub etcd_gather: qos_core::units::Duration,
    /// Where the etcd writer commits (the manager's --etcd-commit-via): leader
    /// (etcd's Raft leader) or any member.
    #[arg(long, value_enum, default_value_t = CommitVia::Leader)]
    pub etcd_commit_via: CommitVia,
    /// How the etcd writer lays granted flows out (the manager's --etcd-flow-keys):
    /// per-flow or grouped (one key per transaction's grants).
    #[arg(long, value_enum, default_value_t = FlowKeys::PerFlow)]
    pub etcd_flow_keys: FlowKeys,
    /// GOMAXPROCS of each local etcd member: threads running its Go code at once, or
    /// "inherit" (this process's environment). Default 1: the members share this
    /// machine's cores with each other and with the master and clients measured (in
    /// production each member has a machine of its own); docs/ha-manager.md gives the
    /// rates with and without it.
    #[arg(long, default_value = "1", value_parser = go_setting)]
    pub etcd_gomaxprocs: GoSetting,
    /// GOGC of each local etcd member: heap growth, percent of the live heap, before a
    /// collection, or "inherit". Default 200 (Go's own is 100): the smallest of 200 /
    /// 400 / 800 at which the members' CPU per decision stopped falling when measured
    /// (docs/ha-manager.md); it costs heap, a member's is small here.
    #[arg(long, default_value = "200", value_parser = go_setting)]
    pub etcd_gogc: GoSetting,
}

/// A Go runtime setting given to the etcd members: a number, or `None` for "inherit".
pub type GoSetting = Option<u32>;

/// Parses `inherit` or a whole number of at least 1.
fn go_setting(s: &str) -> Result<GoSetting, String> {
    if s == "inherit" {
        return Ok(None);
    }
    match s.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(format!("`{s}`: a whole number of at least 1, or inherit")),
    }
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An option out of range (the message names the flag).
    #[error("{0}")]
    Invalid(&'static str),
    /// A run failed.
    #[error(transparent)]
    Bench(#[from] BenchError),
}

/// What the table's last lines say about the stores and the CPU columns.
pub const LEGEND: &str = "sqlite full: fsync per group commit (power-loss safe); sqlite normal: \
    commit to the OS (crash safe);\netcd: quorum commit on a local cluster, fsync on every \
    member\nCPU µs/op: processor time per operation of the benchmark process (master and \
    clients); master: of the master's own threads (runtime and store); etcd: of the etcd \
    members";

impl Options {
    /// The stores to run, in order: SQLite in each mode asked for, then etcd.
    pub fn bench_stores(&self) -> Vec<BenchStore> {
        let modes: &[Sync] = match self.sync {
            Syncs::Full => &[Sync::Full],
            Syncs::Normal => &[Sync::Normal],
            Syncs::Both => &[Sync::Full, Sync::Normal],
        };
        let mut stores = Vec::new();
        if self.stores != Stores::Etcd {
            stores.extend(modes.iter().map(|&s| BenchStore::Sqlite(s)));
        }
        if self.stores != Stores::Sqlite {
            stores.push(BenchStore::Etcd {
                members: self.etcd_members,
                pipeline: self.etcd_pipeline,
                gather: std::time::Duration::from_nanos(self.etcd_gather.as_ns()),
                via: self.etcd_commit_via,
                flow_keys: self.etcd_flow_keys,
                go: GoRuntime {
                    maxprocs: self.etcd_gomaxprocs,
                    gogc: self.etcd_gogc,
                },
            });
        }
        stores
    }
}

/// Runs the benchmark once per store; one report each, in [`Options::bench_stores`]
/// order.
pub fn run(opts: &Options) -> Result<Vec<Report>, Error> {
    if opts.k < 2 || opts.flows == 0 || opts.clients == 0 {
        return Err(Error::Invalid(
            "--k must be at least 2, --flows and --clients at least 1",
        ));
    }
    if opts.etcd_members == 0 || opts.etcd_pipeline == 0 {
        return Err(Error::Invalid(
            "--etcd-members and --etcd-pipeline must be at least 1",
        ));
    }
    // Without `--dir`, a directory of this run's own (removed when it ends): the
    // benchmark clears its database and etcd members' data before it starts, so two
    // benchmarks sharing one fixed directory would clear each other's.
    let own = match &opts.dir {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("clusterqos-bench-manager-")
                .tempdir()
                .map_err(|e| BenchError::Setup(format!("a temporary directory: {e}")))?,
        ),
    };
    let dir = own.as_ref().map_or_else(
        || opts.dir.clone().unwrap_or_default(),
        |t| t.path().to_path_buf(),
    );
    let mut reports = Vec::new();
    for store in opts.bench_stores() {
        reports.push(bench::run(&bench::Options {
            k: opts.k,
            flows: opts.flows,
            clients: opts.clients,
            dir: dir.clone(),
            seed: opts.seed,
            store,
            master_threads: opts.master_threads,
        })?);
    }
    Ok(reports)
}

/// The line above the table: the set-up, and each run's split of its decisions
/// (a rate is only as good as the share it granted: rejections commit nothing).
pub fn headline(reports: &[Report], opts: &Options) -> String {
    let Some(first) = reports.first() else {
        return String::new();
    };
    let splits: Vec<String> = reports
        .iter()
        .map(|r| {
            let all = (r.granted + r.rejected).max(1);
            let go = r
                .etcd_go_runtime
                .as_ref()
                .map_or(String::new(), |g| format!(" (members' Go runtime: {g})"));
            format!(
                "{}{go}: {} granted, {} rejected ({:.1} %)",
                r.sync,
                r.granted,
                r.rejected,
                100.0 * r.rejected as f64 / all as f64
            )
        })
        .collect();
    format!(
        "{} nodes, {} flows, {} clients; {}",
        first.nodes,
        opts.flows,
        first.clients,
        splits.join("; ")
    )
}

/// etcd's own account of each phase of the etcd runs (transactions, operations per
/// transaction, WAL fsyncs on the members and their durations): what limits it.
pub fn etcd_accounts(reports: &[Report]) -> Vec<String> {
    let mut lines = Vec::new();
    for r in reports {
        for (name, p) in [
            ("decisions", &r.decisions),
            ("releases", &r.releases),
            ("decisions via agents", &r.via_agents),
        ] {
            if let Some(a) = &p.etcd {
                lines.push(format!(
                    "{name} ({}): {} etcd transactions, {:.1} operations and {:.2} ms each \
                     (etcd's part {:.2} ms); {} WAL fsyncs on the members, mean {:.2} ms, 99 % \
                     within {:.0} ms",
                    r.sync,
                    a.transactions,
                    a.ops_per_transaction,
                    a.ms_per_transaction,
                    a.etcd_ms_per_transaction,
                    a.fsyncs,
                    a.fsync_mean_ms,
                    a.fsync_p99_ms
                ));
            }
        }
    }
    lines
}

/// Every run's three phases, a row each.
pub fn table(reports: &[Report]) -> Table {
    let mut t = Table::new(
        "manager",
        "Manager benchmark",
        [
            "phase (store)",
            "count",
            "per second",
            "p50 (µs)",
            "p99 (µs)",
            "max (µs)",
            "CPU µs/op",
            "master CPU µs/op",
            "etcd CPU µs/op",
        ],
    );
    let row = |name: String, p: &Phase| {
        vec![
            name,
            p.count.to_string(),
            format!("{:.0}", p.per_sec),
            format!("{:.0}", p.p50_us),
            format!("{:.0}", p.p99_us),
            format!("{:.0}", p.max_us),
            format!("{:.1}", p.cpu_us_per_op),
            format!("{:.1}", p.master_cpu_us_per_op),
            format!("{:.1}", p.store_cpu_us_per_op),
        ]
    };
    for r in reports {
        t.push(row(format!("decisions ({})", r.sync), &r.decisions));
        t.push(row(format!("releases ({})", r.sync), &r.releases));
        t.push(row(
            format!("decisions via agents ({})", r.sync),
            &r.via_agents,
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(sync: Syncs, stores: Stores) -> Options {
        Options {
            k: 2,
            flows: 4,
            clients: 1,
            master_threads: 1,
            dir: None,
            seed: 1,
            sync,
            stores,
            etcd_members: 3,
            etcd_pipeline: 2,
            etcd_gather: qos_core::units::Duration::from_us(500),
            etcd_commit_via: CommitVia::Any,
            etcd_flow_keys: FlowKeys::PerFlow,
            etcd_gomaxprocs: Some(1),
            etcd_gogc: None,
        }
    }

    #[test]
    fn stores_follow_the_choices_in_order() {
        use BenchStore::{Etcd, Sqlite};
        let etcd = Etcd {
            members: 3,
            pipeline: 2,
            gather: std::time::Duration::from_micros(500),
            via: CommitVia::Any,
            flow_keys: FlowKeys::PerFlow,
            go: GoRuntime {
                maxprocs: Some(1),
                gogc: None,
            },
        };
        assert_eq!(
            opts(Syncs::Both, Stores::Both).bench_stores(),
            vec![Sqlite(Sync::Full), Sqlite(Sync::Normal), etcd]
        );
        assert_eq!(
            opts(Syncs::Normal, Stores::Sqlite).bench_stores(),
            vec![Sqlite(Sync::Normal)]
        );
        assert_eq!(opts(Syncs::Full, Stores::Etcd).bench_stores(), vec![etcd]);
    }

    #[test]
    fn go_settings_are_numbers_or_inherit() {
        assert_eq!(go_setting("inherit"), Ok(None));
        assert_eq!(go_setting("200"), Ok(Some(200)));
        assert!(go_setting("0").is_err());
        assert!(go_setting("off").is_err());
        assert!(go_setting("-1").is_err());
    }

    #[test]
    fn bad_sizes_are_refused_before_anything_runs() {
        let mut o = opts(Syncs::Normal, Stores::Sqlite);
        o.k = 1;
        assert!(run(&o).unwrap_err().to_string().starts_with("--k must"));
        let mut o = opts(Syncs::Normal, Stores::Sqlite);
        o.etcd_members = 0;
        assert!(run(&o)
            .unwrap_err()
            .to_string()
            .starts_with("--etcd-members"));
    }

    #[test]
    fn runs_without_a_directory_do_not_share_one() {
        // Each clears its database before it starts: in one fixed directory the second
        // would delete the first's files under it.
        let o = opts(Syncs::Normal, Stores::Sqlite);
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| run(&o));
            let b = s.spawn(|| run(&o));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!(a.unwrap()[0].granted + b.unwrap()[0].granted, 8);
    }

    #[test]
    fn a_tiny_run_gives_three_rows_per_store() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(Syncs::Normal, Stores::Sqlite);
        o.dir = Some(dir.path().to_path_buf());
        let reports = run(&o).unwrap();
        assert_eq!(reports.len(), 1);
        let t = table(&reports);
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.shown_rows()[0][0], "decisions (sqlite normal)");
        assert!(headline(&reports, &o).contains("4 flows, 1 clients; sqlite normal: "));
    }
}
