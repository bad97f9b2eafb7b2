//! What the thesis's experiments on real traffic share: the run's options, the testbed's
//! placement and removal, Ctrl-C handling, progress lines, the context every experiment
//! measures into ([`Ctx`]) and what the reproduction measured ([`RealResults`]). A leaf
//! of the real experiments, so each of them (direct, MPI, timeline) uses it without
//! importing the experiment back.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{bail, Context};
use qos_core::sched::SchedulerKind;
use qos_core::units::Bandwidth;
use qos_runtime::dataplane::harness::{Harness, NodeSite};
use qos_runtime::testbed::{self, TestbedState};
use serde::Serialize;

use super::super::scenario::Scenario;
use super::super::Simulated;
use crate::check::{Check, MetricId, Summary};
use crate::report::Figure;

/// Options of a real run.
#[derive(Debug, Clone)]
pub struct RealOptions {
    /// Where the testbed goes and how fast its links are.
    pub place: Placement,
    /// Reduced run lengths.
    pub quick: bool,
    /// Only this experiment.
    pub only: Option<String>,
    /// Enforcement: the agents' own data planes (every experiment), or the kernel
    /// backend with real MPI (the MPI-level experiment, [`super::mpi`]).
    pub backend: Backend,
    /// With the kernel backend: the MPI implementation ("openmpi" or "mpich").
    pub mpi: String,
}

/// How a real reproduction enforces rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Data planes in the hosts, applications on their ports.
    Dataplane,
    /// The agents' kernel backend, unmodified MPI programs.
    Kernel,
}

/// Set by SIGINT/SIGTERM: experiments stop at their next step and the testbed is removed.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether Ctrl-C (or SIGTERM) arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Makes Ctrl-C and SIGTERM stop the experiments at their next step (the testbed is
/// then removed).
pub fn catch_signals() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Progress on stderr.
pub fn step(start: Instant, msg: &str) {
    eprintln!("[{:6.1} s] {msg}", start.elapsed().as_secs_f64());
}

/// Fails with "interrupted" after Ctrl-C or SIGTERM.
pub fn check_interrupt() -> anyhow::Result<()> {
    if interrupted() {
        bail!("interrupted");
    }
    Ok(())
}

/// Where a real run's testbed goes and how fast its links are (`--link-rate`,
/// `--testbed-dir`, `--prefix` of `reproduce --real`).
#[derive(Debug, Clone)]
pub struct Placement {
    /// Rate of every testbed link, each way.
    pub link_rate: Bandwidth,
    /// Testbed directory (default: a fresh one under the temporary directory).
    pub dir: Option<PathBuf>,
    /// Namespace prefix (default: from the process id).
    pub prefix: Option<String>,
}

impl Placement {
    /// The namespace prefix (given, else `tag` and the process id) and the directory
    /// (given, else `clusterqos-<name>-<pid>` under the temporary directory, then owned
    /// by the run and removed with it: the flag).
    pub(crate) fn resolve(&self, tag: char, name: &str) -> (String, PathBuf, bool) {
        let pid = std::process::id();
        let prefix = self
            .prefix
            .clone()
            .unwrap_or_else(|| format!("{tag}{}", pid % 100_000));
        match &self.dir {
            Some(d) => (prefix, d.clone(), false),
            None => {
                let d = std::env::temp_dir().join(format!("clusterqos-{name}-{pid}"));
                (prefix, d, true)
            }
        }
    }
}

/// Removes the testbed when dropped: on success, on error and after Ctrl-C (also for
/// `reproduce nagar --real`).
pub(crate) struct Cleanup {
    /// The testbed directory (its state file says what to remove).
    pub(crate) dir: PathBuf,
    /// Whether the directory itself was made for the run (then it goes too).
    pub(crate) owned_dir: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.dir.join(testbed::STATE_FILE).exists() {
            match testbed::down(&self.dir) {
                Ok(r) => {
                    eprintln!(
                        "testbed removed ({} namespaces, {} processes stopped)",
                        r.namespaces_removed.len(),
                        r.processes_stopped
                    );
                    for e in r.errors {
                        eprintln!("warning: {e}");
                    }
                }
                Err(e) => eprintln!("warning: removing the testbed: {e}"),
            }
        }
        if self.owned_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Everything the experiments share.
pub struct Ctx {
    pub start: Instant,
    pub quick: bool,
    pub state: TestbedState,
    /// Rate-control data planes in every host (UDP port 7600).
    pub harness: Harness,
    /// Measured Bmax (B/s) and T (seconds per full packet) of h0 → h1.
    pub bmax: f64,
    pub t: f64,
    pub payload: usize,
    pub sim: Simulated,
    /// The scenarios the simulation ran.
    pub scenarios: Vec<Scenario>,
    /// The simulated Bmax (MB/s).
    pub sim_bmax: f64,
    pub checks: Vec<Check>,
    pub figures: Vec<Figure>,
    pub notes: Vec<String>,
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// Last port number handed out (every experiment uses fresh ports).
    pub next_port: u16,
    /// Whether the manager and agents run.
    pub services: bool,
}

impl Ctx {
    pub fn step(&self, msg: &str) {
        step(self.start, msg);
    }
    /// The simulated scenario of an experiment.
    pub fn scenario(&self, name: &str) -> anyhow::Result<Scenario> {
        self.scenarios
            .iter()
            .find(|s| s.file.name == name)
            .cloned()
            .with_context(|| format!("no simulated scenario {name}"))
    }
    /// The simulated value of a metric.
    pub fn sim_value(&self, id: &MetricId) -> Option<f64> {
        self.sim.value(id)
    }
    pub fn check_interrupt(&self) -> anyhow::Result<()> {
        if interrupted() {
            bail!("interrupted");
        }
        Ok(())
    }
}

/// Data planes (scheduler `kind`) in the testbed's hosts, on UDP `port`.
pub fn harness_in(st: &TestbedState, kind: SchedulerKind, port: u16) -> anyhow::Result<Harness> {
    let sites = st
        .hosts
        .iter()
        .map(|h| NodeSite {
            name: h.name.clone(),
            addr: std::net::SocketAddr::new(h.addr.into(), port),
            netns: Some(h.netns.clone()),
            bound: None,
        })
        .collect();
    Harness::start(sites, kind, None).context("starting data planes in the testbed's hosts")
}

/// What a real reproduction measured.
#[derive(Debug, Clone, Serialize)]
pub struct RealResults {
    /// Every check: the testbed's value, beside the published and simulated ones.
    pub checks: Vec<Check>,
    /// Counts of the checks.
    pub summary: Summary,
    /// Link rate of the testbed, B/s.
    pub link_rate_bytes_per_sec: u64,
    /// Measured Bmax of h0 → h1, B/s.
    pub bmax_bytes_per_sec: f64,
    /// Measured T, µs per full packet.
    pub t_us: f64,
    /// Payload bytes per packet.
    pub packet_payload: usize,
    /// Calibration sweep and overhead details.
    pub details: serde_json::Map<String, serde_json::Value>,
    /// Plots.
    #[serde(skip)]
    pub figures: Vec<Figure>,
    /// Notes for the report.
    #[serde(skip)]
    pub notes: Vec<String>,
}
