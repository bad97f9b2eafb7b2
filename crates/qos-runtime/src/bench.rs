//! The manager benchmark behind `clusterqos bench manager`: a master on a
//! 1,024-node mesh (32×32, dimension-order routes), many concurrent clients on
//! loopback asking it for premium flows and releasing them, each decision timed end
//! to end — HTTP request, admission, group-committed write, reply. The write goes to
//! SQLite beside the master, or to a 3-member etcd cluster started on
//! loopback for the run, every commit a fenced etcd transaction; etcd's own counters
//! say where its time went ([`etcd_account`]).

pub mod etcd_account;
pub mod jobs;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qos_core::besteffort::Policy;
use qos_core::topology::build::{mesh, HostDefaults};
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::auth::Secret;
use crate::manager::{self, Config};
use crate::master_client::MasterClient;
use crate::protocol::{ClassSpec, Decision, EndpointSpec, FlowRequest, FlowSpec, Owner};
use etcd_account::{EtcdAccount, Snapshot};

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Side of the mesh (32 → 1,024 nodes).
    pub k: u16,
    /// Number of flows requested (then released).
    pub flows: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// Where the database goes (a fresh file is created in it).
    pub dir: PathBuf,
    /// Seed of the flow mix.
    pub seed: u64,
    /// Where grants are committed.
    pub store: BenchStore,
    /// Worker threads of the master's runtime (`clusterqos manager` runs one per core;
    /// the benchmark one unless asked, see [`run`]).
    pub master_threads: usize,
}

/// The store a benchmark run commits to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchStore {
    /// SQLite with this commit mode.
    Sqlite(crate::manager::store::Sync),
    /// A local etcd cluster of `members` members (fsync on), `pipeline` transactions
    /// in flight, a free writer gathering decisions for up to `gather`.
    Etcd {
        /// Members.
        members: usize,
        /// Transactions in flight.
        pipeline: usize,
        /// The manager's `--etcd-gather`.
        gather: Duration,
        /// The manager's `--etcd-commit-via`.
        via: crate::manager::store::etcd_config::CommitVia,
        /// The manager's `--etcd-flow-keys`.
        flow_keys: crate::manager::store::etcd_config::FlowKeys,
        /// The members' Go runtime settings.
        go: crate::etcd_local::GoRuntime,
    },
}

/// Latency figures of one phase.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// Operations.
    pub count: usize,
    /// Operations per second, wall clock.
    pub per_sec: f64,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile latency, microseconds.
    pub p99_us: f64,
    /// Largest latency, microseconds.
    pub max_us: f64,
    /// Processor time of the whole benchmark process (master, clients and, for the
    /// agent phase, agents) per operation, microseconds: a figure that other load on
    /// the machine disturbs less than the latencies.
    pub cpu_us_per_op: f64,
    /// Processor time of the master alone per operation, microseconds: the threads of
    /// its runtime and of its store (what a replica running by itself would spend;
    /// the clients' and agents' threads are not counted).
    pub master_cpu_us_per_op: f64,
    /// Processor time of the etcd members per operation, microseconds (0 for SQLite,
    /// whose writer is inside the benchmark process).
    pub store_cpu_us_per_op: f64,
    /// etcd's account of the phase (etcd only).
    pub etcd: Option<EtcdAccount>,
}

/// The benchmark's result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The store: "sqlite full" (fsync per commit), "sqlite normal" (commit to the
    /// OS, no fsync) or "etcd 3 members" (quorum commit, fsync on every member).
    pub sync: String,
    /// Nodes in the topology.
    pub nodes: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// Requests granted.
    pub granted: usize,
    /// Requests rejected (admission criteria).
    pub rejected: usize,
    /// Admission decisions (requests).
    pub decisions: Phase,
    /// Releases of the granted flows.
    pub releases: Phase,
    /// The etcd members' Go runtime settings (`GOMAXPROCS=1 GOGC=200`, or
    /// "inherited"); absent for SQLite.
    pub etcd_go_runtime: Option<String>,
    /// Decisions asked by applications through their node's agent (Unix socket →
    /// agent → master → IDT pushed back to the agent → reply).
    pub via_agents: Phase,
}

/// Why the benchmark failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Set-up.
    #[error("benchmark set-up: {0}")]
    Setup(String),
    /// A request failed outright.
    #[error("request failed: {0}")]
    Request(String),
}

/// User plus system time of this process so far.
fn cpu_time() -> Duration {
    // SAFETY: rusage is plain data; getrusage fills the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn phase(mut lat: Vec<Duration>, wall: Duration, cpu: Duration) -> Phase {
    lat.sort();
    let pct = |p: f64| {
        if lat.is_empty() {
            0.0
        } else {
            let i = ((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1;
            lat[i].as_secs_f64() * 1e6
        }
    };
    Phase {
        count: lat.len(),
        per_sec: lat.len() as f64 / wall.as_secs_f64(),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        max_us: lat.last().map_or(0.0, |d| d.as_secs_f64() * 1e6),
        cpu_us_per_op: if lat.is_empty() {
            0.0
        } else {
            cpu.as_secs_f64() * 1e6 / lat.len() as f64
        },
        master_cpu_us_per_op: 0.0,
        store_cpu_us_per_op: 0.0,
        etcd: None,
    }
}

/// Names of the master's threads: its runtime's workers and blocking threads, and its
/// SQLite writer and checkpointer.
const MASTER_THREADS: [&str; 3] = ["qos-master", "qos-store", "qos-checkpoint"];

/// User plus system time of the master's threads so far (from /proc/self/task: the
/// kernel's per-thread accounts, in clock ticks).
fn master_cpu() -> Duration {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut ticks = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        // "tid (comm) state ppid ..." — comm may hold spaces, so split at the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        if !MASTER_THREADS.iter().any(|m| comm.starts_with(m)) {
            continue;
        }
        // Fields after the comm: state is the 3rd of the line, utime the 14th, stime
        // the 15th.
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let field = |n: usize| {
            rest.get(n - 3)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        ticks += field(14) + field(15);
    }
    Duration::from_micros(ticks * 1_000_000 / hz)
}

/// Processor time between two readings, per operation, microseconds.
fn per_op(before: Duration, after: Duration, count: usize) -> f64 {
    if count == 0 {
        0.0
    } else {
        after.saturating_sub(before).as_secs_f64() * 1e6 / count as f64
    }
}

/// Runs `jobs` through `clients` concurrent workers; returns each job's latency and
/// result, the wall time and the process's processor time.
async fn drive<T, F, Fut>(
    jobs: Arc<Vec<T>>,
    clients: usize,
    f: F,
) -> (Vec<(Duration, bool)>, Duration, Duration)
where
    T: Send + Sync + 'static,
    F: Fn(Arc<Vec<T>>, usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Result<bool, String>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let (start, cpu0) = (Instant::now(), cpu_time());
    let mut workers = Vec::new();
    for _ in 0..clients {
        let (jobs, next, f) = (jobs.clone(), next.clone(), f.clone());
        workers.push(tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs.len() {
                    return Ok::<_, String>(out);
                }
                let t = Instant::now();
                let ok = f(jobs.clone(), i).await?;
                out.push((t.elapsed(), ok));
            }
        }));
    }
    let mut all = Vec::with_capacity(jobs.len());
    for w in workers {
        match w.await {
            Ok(Ok(v)) => all.extend(v),
            Ok(Err(e)) => {
                all.push((Duration::ZERO, false));
                tracing::error!(error = %e, "benchmark request failed");
            }
            Err(e) => tracing::error!(error = %e, "benchmark worker panicked"),
        }
    }
    (all, start.elapsed(), cpu_time() - cpu0)
}

/// Runs the benchmark: the master on its own runtime, the clients on another, both on
/// this machine's loopback. The clients' runtime has one worker thread, the master's
/// `master_threads` (one by default: with SQLite's writer thread that makes three busy
/// threads on this machine's two cores; `clusterqos manager` itself runs one per core,
/// which lets it admit the requests of one commit's clients two at a time while etcd
/// waits for the next transaction).
pub fn run(opts: &Options) -> Result<Report, BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::Setup(e.to_string());
    let topo = mesh(opts.k, &HostDefaults::thesis())
        .and_then(|b| b.build())
        .map_err(|e| setup(&e))?;
    let names: Vec<String> = topo.nodes().iter().map(|n| n.name.clone()).collect();
    let secret = Secret::new("benchmark-secret-0123456789").map_err(|e| setup(&e))?;
    let db = opts.dir.join("bench-manager.db");
    for suffix in ["", "-wal", "-shm", ".witness"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let etcd_dir = opts.dir.join("bench-manager-etcd");
    let _ = std::fs::remove_dir_all(&etcd_dir);
    let etcd = match opts.store {
        BenchStore::Etcd { members, go, .. } => Some(
            crate::etcd_local::LocalEtcd::start_with(&etcd_dir, members, go)
                .map_err(|e| setup(&e))?,
        ),
        BenchStore::Sqlite(_) => None,
    };
    let store_cpu = || etcd.as_ref().map_or(Duration::ZERO, |e| e.cpu_time());
    let counters = || etcd.as_ref().map(|e| Snapshot::parse(&e.metrics()));
    let account = |before: Option<Snapshot>, p: &Phase| {
        let wall = if p.per_sec > 0.0 {
            p.count as f64 / p.per_sec
        } else {
            0.0
        };
        before
            .zip(counters())
            .map(|(b, a)| b.until(&a, p.count, wall))
    };
    let store = match (opts.store, &etcd) {
        (
            BenchStore::Etcd {
                pipeline,
                gather,
                via,
                flow_keys,
                ..
            },
            Some(e),
        ) => manager::StoreConfig::Etcd(crate::manager::store::etcd_config::EtcdConfig {
            pipeline,
            gather,
            flow_keys,
            commit_via_leader: via == crate::manager::store::etcd_config::CommitVia::Leader,
            ..crate::manager::store::etcd_config::EtcdConfig::new(e.endpoints(), "/bench/")
        }),
        (BenchStore::Sqlite(sync), _) => manager::StoreConfig::Sqlite {
            path: db.clone(),
            sync,
        },
        (BenchStore::Etcd { .. }, None) => unreachable!("etcd was started above"),
    };
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.master_threads.max(1))
        .thread_name("qos-master")
        .enable_all()
        .build()
        .map_err(|e| setup(&e))?;
    let handle = server_rt
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
    let url = format!("http://{}", handle.addr);
    // A replica on etcd serves once it is elected.
    let t0 = Instant::now();
    while !handle.shared.role.is_leader() {
        if t0.elapsed() > Duration::from_secs(30) {
            return Err(BenchError::Setup(
                "the manager was not elected within 30 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    // The flow mix: random distinct source and destination, 0.1 to 4 MB/s.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(opts.seed);
    let owner = Owner {
        uid: 0,
        pid: std::process::id(),
    };
    let reqs: Vec<FlowRequest> = (0..opts.flows)
        .map(|i| {
            let s = rng.gen_range(0..names.len());
            let mut d = rng.gen_range(0..names.len() - 1);
            if d >= s {
                d += 1;
            }
            FlowRequest {
                flow: FlowSpec {
                    src: EndpointSpec {
                        node: names[s].clone(),
                        port: (i % 65_536) as u16,
                    },
                    dst: EndpointSpec {
                        node: names[d].clone(),
                        port: 0,
                    },
                    priority: (i / 65_536) as u8,
                },
                name: None,
                class: ClassSpec::Premium {
                    bandwidth: rng.gen_range(100_000..4_000_000),
                },
                owner,
            }
        })
        .collect();

    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-client")
        .enable_all()
        .build()
        .map_err(|e| setup(&e))?;
    let result = client_rt.block_on(async {
        let base =
            MasterClient::new(&url, "n0_0", &secret).map_err(|e| BenchError::Setup(e.message))?;
        let reqs = Arc::new(reqs);
        let b = base.clone();
        let s0 = store_cpu();
        let m0 = master_cpu();
        let c0 = counters();
        let (lat, wall, cpu) = drive(
            reqs.clone(),
            opts.clients,
            move |reqs: Arc<Vec<FlowRequest>>, i| {
                let b = b.clone();
                async move {
                    let r = &reqs[i];
                    match b.with_node(&r.flow.src.node).request(r).await {
                        Ok(Decision::Granted(_)) => Ok(true),
                        Ok(Decision::Rejected(_)) => Ok(false),
                        Err(e) => Err(e.message),
                    }
                }
            },
        )
        .await;
        let (s1, m1) = (store_cpu(), master_cpu());
        if lat.len() != reqs.len() || lat.iter().any(|(d, _)| d.is_zero()) {
            return Err(BenchError::Request(
                "some requests failed; see the log".into(),
            ));
        }
        let granted: Vec<FlowSpec> = {
            // Which were granted: ask the master (the order of `lat` is per worker).
            base.flows()
                .await
                .map_err(|e| BenchError::Request(e.message))?
                .into_iter()
                .map(|e| e.flow)
                .collect()
        };
        let n_granted = lat.iter().filter(|(_, ok)| *ok).count();
        let mut decisions = phase(lat.into_iter().map(|(d, _)| d).collect(), wall, cpu);
        decisions.store_cpu_us_per_op = per_op(s0, s1, decisions.count);
        decisions.master_cpu_us_per_op = per_op(m0, m1, decisions.count);
        decisions.etcd = account(c0, &decisions);
        let granted = Arc::new(granted);
        let b = base.clone();
        let s0 = store_cpu();
        let m0 = master_cpu();
        let c0 = counters();
        let (rel, rwall, rcpu) = drive(
            granted.clone(),
            opts.clients,
            move |g: Arc<Vec<FlowSpec>>, i| {
                let b = b.clone();
                async move {
                    let f = g[i].clone();
                    b.with_node(&f.src.node)
                        .release(f, owner)
                        .await
                        .map(|_| true)
                        .map_err(|e| e.message)
                }
            },
        )
        .await;
        Ok(Report {
            sync: match opts.store {
                BenchStore::Sqlite(crate::manager::store::Sync::Full) => "sqlite full".into(),
                BenchStore::Sqlite(crate::manager::store::Sync::Normal) => "sqlite normal".into(),
                BenchStore::Etcd { members, .. } => format!("etcd {members} members"),
            },
            nodes: names.len(),
            clients: opts.clients,
            granted: n_granted,
            rejected: reqs.len() - n_granted,
            decisions,
            releases: {
                let mut p = phase(rel.into_iter().map(|(d, _)| d).collect(), rwall, rcpu);
                p.store_cpu_us_per_op = per_op(s0, store_cpu(), p.count);
                p.master_cpu_us_per_op = per_op(m0, master_cpu(), p.count);
                p.etcd = account(c0, &p);
                p
            },
            etcd_go_runtime: match opts.store {
                BenchStore::Etcd { go, .. } => Some(go.describe()),
                BenchStore::Sqlite(_) => None,
            },
            via_agents: phase(Vec::new(), Duration::ZERO, Duration::ZERO),
        })
    });
    let result = match result {
        Ok(mut r) => {
            let s0 = store_cpu();
            let m0 = master_cpu();
            let c0 = counters();
            r.via_agents = via_agents(opts, &client_rt, &url, &secret, &names)?;
            r.via_agents.store_cpu_us_per_op = per_op(s0, store_cpu(), r.via_agents.count);
            r.via_agents.master_cpu_us_per_op = per_op(m0, master_cpu(), r.via_agents.count);
            r.via_agents.etcd = account(c0, &r.via_agents);
            Ok(r)
        }
        e => e,
    };
    server_rt.block_on(handle.shutdown());
    result
}

/// Applications on 8 nodes ask their agents for `opts.flows` small flows, one
/// application thread per client, end to end through the Unix sockets.
fn via_agents(
    opts: &Options,
    rt: &tokio::runtime::Runtime,
    url: &str,
    secret: &Secret,
    names: &[String],
) -> Result<Phase, BenchError> {
    let nodes: Vec<&String> = names.iter().take(8).collect();
    let mut agents = Vec::new();
    for n in &nodes {
        let socket = opts.dir.join(format!("bench-agent-{n}.sock"));
        let h = rt
            .block_on(crate::agent::start(crate::agent::Config::new(
                n,
                url,
                secret.clone(),
                socket.clone(),
            )))
            .map_err(|e| BenchError::Setup(e.to_string()))?;
        let table = h.idt_table();
        let t0 = Instant::now();
        while !table.borrow().synced {
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(BenchError::Setup(format!("agent {n} did not sync")));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        agents.push((h, socket));
    }
    let next = Arc::new(AtomicUsize::new(0));
    let (start, cpu0) = (Instant::now(), cpu_time());
    let threads: Vec<_> = (0..opts.clients)
        .map(|c| {
            let socket = agents[c % agents.len()].1.clone();
            let dst = names[names.len() - 1 - c % 8].clone();
            let (next, total) = (next.clone(), opts.flows);
            std::thread::spawn(move || -> Result<Vec<Duration>, String> {
                let mut cl = crate::client::Client::connect(&socket).map_err(|e| e.to_string())?;
                let mut lat = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return Ok(lat);
                    }
                    let flow = crate::client::LocalFlow::new(i as u16, &dst, (i >> 16) as u16);
                    let t = Instant::now();
                    cl.request_bandwidth(&flow, 10_000)
                        .map_err(|e| e.to_string())?;
                    lat.push(t.elapsed());
                }
            })
        })
        .collect();
    let mut lat = Vec::with_capacity(opts.flows);
    for t in threads {
        match t.join() {
            Ok(Ok(v)) => lat.extend(v),
            Ok(Err(e)) => return Err(BenchError::Request(e)),
            Err(_) => return Err(BenchError::Request("client thread panicked".into())),
        }
    }
    let (wall, cpu) = (start.elapsed(), cpu_time() - cpu0);
    for (h, _) in agents {
        h.shutdown();
    }
    Ok(phase(lat, wall, cpu))
}
