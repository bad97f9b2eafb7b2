//! The job benchmark behind `clusterqos bench jobs`: a master on a 1,024-node mesh
//! (32×32, dimension-order routes) decides all-to-all job reservations of R ranks
//! (R·(R−1) flows) over HTTP on loopback, timed from the client: request sent, demand
//! summed over every flow's route, decided, its record durable (SQLite fsync, or a
//! 3-member etcd's quorum commit), reply read. Each job is released before the next.
//! Also stated: the master's resident memory while it holds the largest job, and the
//! size of what it keeps for it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qos_core::besteffort::Policy;
use qos_core::topology::build::{mesh, HostDefaults};
use serde::Serialize;

use super::{BenchError, BenchStore};
use crate::auth::Secret;
use crate::manager::{self, Config};
use crate::master_client::MasterClient;
use crate::protocol::job::{JobBody, JobDecision, JobRequest, Pattern};

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Rank counts (nodes of each all-to-all job), e.g. 128 and 1024.
    pub ranks: Vec<usize>,
    /// Jobs decided per rank count.
    pub repeats: usize,
    /// Where the database goes.
    pub dir: PathBuf,
    /// Where grants are committed.
    pub store: BenchStore,
}

/// One rank count's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// "sqlite full" or "etcd 3 members".
    pub store: String,
    /// Ranks (nodes) of the job.
    pub ranks: usize,
    /// Its flows.
    pub flows: u64,
    /// Jobs timed.
    pub samples: usize,
    /// Reservation, request to durable reply: fastest, median, slowest, ms.
    pub min_ms: f64,
    pub p50_ms: f64,
    pub max_ms: f64,
    /// Release of the job, median, ms.
    pub release_p50_ms: f64,
    /// Resident memory of the process (master and client) while it holds the job,
    /// minus before the first reservation, KiB.
    pub rss_held_kib: i64,
    /// Resources the job's demand touches (what the master keeps besides the
    /// record: 16 bytes each).
    pub demand_entries: usize,
    /// Bytes of the job's stored record (JSON).
    pub record_bytes: usize,
}

/// Resident set size of this process, KiB.
fn rss_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the benchmark.
pub fn run(opts: &Options) -> Result<Vec<Row>, BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::Setup(e.to_string());
    let topo = mesh(32, &HostDefaults::thesis())
        .and_then(|b| b.build())
        .map_err(|e| setup(&e))?;
    let names: Vec<String> = topo.nodes().iter().map(|n| n.name.clone()).collect();
    if let Some(&r) = opts.ranks.iter().find(|&&r| r < 2 || r > names.len()) {
        return Err(BenchError::Setup(format!(
            "{r} ranks: the mesh has {} nodes (2 to {0} ranks)",
            names.len()
        )));
    }
    let secret = Secret::new("benchmark-secret-0123456789").map_err(|e| setup(&e))?;
    let db = opts.dir.join("bench-jobs.db");
    for suffix in ["", "-wal", "-shm", ".witness"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let etcd_dir = opts.dir.join("bench-jobs-etcd");
    let _ = std::fs::remove_dir_all(&etcd_dir);
    let etcd = match opts.store {
        BenchStore::Etcd { members, go, .. } => Some(
            crate::etcd_local::LocalEtcd::start_with(&etcd_dir, members, go)
                .map_err(|e| setup(&e))?,
        ),
        BenchStore::Sqlite(_) => None,
    };
    let (store, label) = match (opts.store, &etcd) {
        (
            BenchStore::Etcd {
                pipeline,
                members,
                gather,
                via,
                flow_keys,
                ..
            },
            Some(e),
        ) => (
            manager::StoreConfig::Etcd(crate::manager::store::etcd_config::EtcdConfig {
                pipeline,
                gather,
                flow_keys,
                commit_via_leader: via == crate::manager::store::etcd_config::CommitVia::Leader,
                ..crate::manager::store::etcd_config::EtcdConfig::new(e.endpoints(), "/bench/")
            }),
            format!("etcd {members} members"),
        ),
        (BenchStore::Sqlite(sync), _) => (
            manager::StoreConfig::Sqlite {
                path: db.clone(),
                sync,
            },
            format!("sqlite {sync:?}").to_lowercase(),
        ),
        (BenchStore::Etcd { .. }, None) => unreachable!("etcd was started above"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| setup(&e))?;
    let handle = rt
        .block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            manager::start(
                Config {
                    policy: Policy::Thesis,
                    lease: Duration::from_secs(3600),
                    store,
                    ..Config::new(Arc::new(topo), db.clone(), secret.clone())
                },
                l,
            )
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
        })
        .map_err(|e| setup(&e))?;
    let t0 = Instant::now();
    while !handle.shared.role.is_leader() {
        if t0.elapsed() > Duration::from_secs(30) {
            return Err(BenchError::Setup(
                "the manager was not elected within 30 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let m = MasterClient::new(&format!("http://{}", handle.addr), "bench", &secret)
        .map_err(|e| setup(&e.message))?;
    let rss0 = rss_kib();
    let mut rows = Vec::new();
    for &ranks in &opts.ranks {
        // 10 kB/s a flow: a 1,024-rank all-to-all fits the mesh's busiest link
        // (8,192 flows cross it under dimension-order routing; 160 MB/s).
        let req = JobRequest {
            id: String::new(),
            owner: "bench".into(),
            body: JobBody::Pattern {
                pattern: Pattern::AllToAll,
                nodes: names[..ranks].to_vec(),
                rate: 10_000,
                class: "premium".into(),
            },
            lease_ms: None,
            wait_s: None,
            process: None,
        };
        let record_bytes = serde_json::to_vec(&req).map(|v| v.len()).unwrap_or(0);
        let (mut reserve, mut release) = (Vec::new(), Vec::new());
        let (mut rss_held, mut entries, mut flows) = (0, 0, 0);
        for i in 0..opts.repeats.max(1) {
            let req = JobRequest {
                id: format!("bench-{ranks}-{i}"),
                ..req.clone()
            };
            let t = Instant::now();
            let d = rt
                .block_on(m.reserve_job(&req))
                .map_err(|e| BenchError::Request(e.message))?;
            reserve.push(t.elapsed());
            match d {
                JobDecision::Granted(info) => flows = info.flow_count,
                JobDecision::Rejected { message, .. } => return Err(BenchError::Request(message)),
            }
            if i == 0 {
                rss_held = rss_kib() - rss0;
                if let Some(term) = handle.term() {
                    let st = term.state.lock().expect("state lock");
                    entries = st.job_demand_entries(&req.id).unwrap_or(0);
                }
            }
            let t = Instant::now();
            rt.block_on(m.release_job(&req.id, "bench"))
                .map_err(|e| BenchError::Request(e.message))?;
            release.push(t.elapsed());
        }
        reserve.sort();
        release.sort();
        rows.push(Row {
            store: label.clone(),
            ranks,
            flows,
            samples: reserve.len(),
            min_ms: ms(reserve[0]),
            p50_ms: ms(reserve[reserve.len() / 2]),
            max_ms: ms(*reserve.last().expect("one sample at least")),
            release_p50_ms: ms(release[release.len() / 2]),
            rss_held_kib: rss_held,
            demand_entries: entries,
            record_bytes,
        });
    }
    rt.block_on(handle.shutdown());
    drop(etcd);
    Ok(rows)
}
