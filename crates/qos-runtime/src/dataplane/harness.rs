//! A measurement harness: a set of agent data planes (on loopback, or each inside a
//! testbed host's network namespace) driven by in-process applications on
//! shared-memory ports. Used by `clusterqos calibrate` (thesis §5.3: IDT sweep of one
//! flow of 64 KB messages) and the experiments on real traffic.

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration as StdDuration, Instant};

use qos_core::sched::SchedulerKind;
use qos_core::units::{Bandwidth, Duration};

use crate::dataplane::engine::{EngineConfig, EngineStats};
use crate::dataplane::segment::{path_mtu, payload_for_mtu};
use crate::dataplane::service::{DataPlane, DataPlaneConfig, DataPlaneHandle, IdtRow};
use crate::shm::client::{PortClient, PortError};
use crate::shm::region::{Layout, RecvDesc, SendDesc, CQ_RECEIVED, CQ_SENT};
use crate::transport::auth::{BenchSeal, DataKey, Protection, DEFAULT_MAX_SKEW_SECS};
use crate::transport::link::Faults;

/// The pacing IDT as a fraction of the fastest time per packet ([`Harness::pacing_idt`]).
pub const PACING_MARGIN: f64 = 0.9;

/// Where a harness node lives.
#[derive(Debug, Clone)]
pub struct NodeSite {
    pub name: String,
    pub addr: SocketAddr,
    /// Network namespace to bind the node's socket in (`None`: the current one).
    pub netns: Option<String>,
    /// The node's UDP socket, already bound at `addr` (`None`: the data plane binds
    /// it). Loopback sites hold theirs from the moment their port is picked, so no other
    /// process can take the port before the data plane starts.
    pub bound: Option<std::sync::Arc<std::net::UdpSocket>>,
}

/// Harness errors.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Port(#[from] PortError),
    #[error("no message arrived within {0:?}")]
    Stalled(StdDuration),
    #[error("data plane of node {node} did not switch to the {want} scheduler")]
    NotSwitched { node: String, want: SchedulerKind },
}

/// Running data planes.
pub struct Harness {
    handles: Vec<(DataPlaneHandle, std::thread::JoinHandle<()>)>,
    pub sockets: Vec<PathBuf>,
    pub nodes: Vec<NodeSite>,
    pub payload: usize,
    _dir: tempfile_dir::Dir,
}

mod tempfile_dir {
    /// A private directory removed on drop.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Moves the calling thread into network namespace `name` (`ip netns` names).
fn enter_netns(name: &str) -> std::io::Result<()> {
    let f = std::fs::File::open(format!("/var/run/netns/{name}"))?;
    rustix::thread::move_into_link_name_space(
        f.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )?;
    Ok(())
}

impl NodeSite {
    /// `n` nodes `n0`, `n1`, … on loopback, each on a free UDP port.
    pub fn loopback(n: usize) -> std::io::Result<Vec<NodeSite>> {
        (0..n)
            .map(|i| {
                let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
                Ok(NodeSite {
                    name: format!("n{i}"),
                    addr: socket.local_addr()?,
                    netns: None,
                    bound: Some(std::sync::Arc::new(socket)),
                })
            })
            .collect()
    }
}

/// Ports the harness's process may hold open on each of its data planes.
const HARNESS_PORTS: usize = 1024;

/// How a harness's data planes run.
#[derive(Debug, Clone, Copy)]
pub struct HarnessOptions {
    /// Every node's packet scheduler.
    pub scheduler: SchedulerKind,
    /// Payload bytes per packet (`None`: from the path MTU).
    pub payload: Option<usize>,
    /// Every node's link rate on the wire: the engines pace their output to it
    /// (`EngineConfig::link_rate`). `None`: no pacing.
    pub link_rate: Option<Bandwidth>,
    /// How every node protects the datagrams it sends.
    pub protection: Protection,
    /// What every node seals: [`BenchSeal::Whole`] as agents do, or less as a
    /// benchmark's control (see [`DataPlane::set_bench_seal`]).
    pub bench_seal: BenchSeal,
}

impl Harness {
    /// Starts one data plane per node with scheduler `kind`.
    pub fn start(
        nodes: Vec<NodeSite>,
        kind: SchedulerKind,
        payload: Option<usize>,
    ) -> Result<Harness, HarnessError> {
        Harness::start_with(
            nodes,
            HarnessOptions {
                scheduler: kind,
                payload,
                link_rate: None,
                protection: Protection::default(),
                bench_seal: BenchSeal::Whole,
            },
        )
    }

    /// Starts one data plane per node as `opts` says.
    pub fn start_with(nodes: Vec<NodeSite>, opts: HarnessOptions) -> Result<Harness, HarnessError> {
        let HarnessOptions {
            scheduler: kind,
            payload,
            link_rate,
            protection,
            bench_seal,
        } = opts;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "clusterqos-harness-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)?;
        let dir = tempfile_dir::Dir(dir);
        let list: Vec<(String, SocketAddr)> =
            nodes.iter().map(|n| (n.name.clone(), n.addr)).collect();
        // Every harness has a key of its own: its data planes talk only to each other.
        let key = DataKey::random();
        let mut handles = Vec::new();
        let mut sockets = Vec::new();
        let mut used_payload = 0;
        for n in &nodes {
            let socket = dir.0.join(format!("{}.sock", n.name));
            let list = list.clone();
            let me = n.clone();
            let sock = socket.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            let key = key.clone();
            let t = std::thread::spawn(move || {
                let r = (|| -> std::io::Result<DataPlane> {
                    if let Some(ns) = &me.netns {
                        enter_netns(ns)?;
                    }
                    let other = list
                        .iter()
                        .find(|(x, _)| *x != me.name)
                        .map(|(_, a)| *a)
                        .unwrap_or(me.addr);
                    let payload =
                        payload.unwrap_or_else(|| payload_for_mtu(path_mtu(other).unwrap_or(1500)));
                    let bound = me.bound.as_ref().map(|s| s.try_clone()).transpose()?;
                    DataPlane::bind_on(
                        DataPlaneConfig {
                            node: me.name.clone(),
                            nodes: list,
                            socket: sock,
                            socket_mode: 0o600,
                            allowed_uids: vec![],
                            engine: EngineConfig {
                                payload,
                                window: 128,
                                link_rate,
                                ..EngineConfig::default()
                            },
                            faults: Faults::default(),
                            scheduler: kind,
                            layout: Layout {
                                buffer_bytes: 32 << 20,
                                ..Layout::default()
                            },
                            key,
                            max_clock_skew_secs: DEFAULT_MAX_SKEW_SECS,
                            protection,
                            // The harness's one process plays every application of its
                            // node (Nagar's Figs 3-4 hold 25 channels per class open at once),
                            // so the per-process and per-user guards of a shared node are
                            // lifted to the per-user default's order.
                            limits: crate::dataplane::service::PortLimits {
                                per_uid: HARNESS_PORTS,
                                per_process: HARNESS_PORTS,
                                ..Default::default()
                            },
                        },
                        bound,
                    )
                })();
                match r {
                    Ok(mut dp) => {
                        dp.set_bench_seal(bench_seal);
                        let _ = tx.send(Ok((dp.handle(), dp.payload())));
                        let _ = dp.run();
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            });
            let (h, p) = rx
                .recv()
                .map_err(|_| std::io::Error::other("data plane thread died"))??;
            used_payload = p;
            handles.push((h, t));
            sockets.push(socket);
        }
        Ok(Harness {
            handles,
            sockets,
            nodes,
            payload: used_payload,
            _dir: dir,
        })
    }

    /// `n` data planes on loopback (nodes `n0`, `n1`, …), as the benchmarks use.
    pub fn loopback(n: usize, kind: SchedulerKind) -> Result<Harness, HarnessError> {
        Harness::start(NodeSite::loopback(n)?, kind, None)
    }

    /// Switches every node's packet scheduler (rate control on: `RateControl`; off:
    /// `Gm`) in the running data planes — same threads, sockets and ports — and returns
    /// once all have applied it.
    pub fn set_scheduler(&self, kind: SchedulerKind) -> Result<(), HarnessError> {
        for ((h, _), n) in self.handles.iter().zip(&self.nodes) {
            if h.set_scheduler(kind) != Some(kind) {
                return Err(HarnessError::NotSwitched {
                    node: n.name.clone(),
                    want: kind,
                });
            }
        }
        Ok(())
    }

    /// Makes every data plane poll for work for `spin` before sleeping (zero: sleep at once).
    pub fn set_idle_spin(&self, spin: Duration) {
        for (h, _) in &self.handles {
            h.set_idle_spin(spin);
        }
    }

    /// Processor time consumed so far by each data plane's thread, in nanoseconds (the
    /// thread CPU clock: what the agent itself spent, whatever else ran on the machine).
    pub fn agent_cpu_ns(&self) -> Vec<u64> {
        use std::os::unix::thread::JoinHandleExt;
        self.handles
            .iter()
            .map(|(_, t)| {
                let mut id: libc::clockid_t = 0;
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: the thread is joined only in Drop, so its pthread_t is live;
                // both out-pointers are valid.
                let ok = unsafe {
                    libc::pthread_getcpuclockid(t.as_pthread_t(), &mut id) == 0
                        && libc::clock_gettime(id, &mut ts) == 0
                };
                if ok {
                    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
                } else {
                    0
                }
            })
            .collect()
    }

    /// Sets node `i`'s IDT table.
    pub fn set_table(&self, i: usize, rows: Vec<IdtRow>) {
        self.handles[i].0.set_table(rows);
    }

    /// Every data plane's engine counters (in node order).
    pub fn engine_stats(&self) -> Vec<EngineStats> {
        self.handles
            .iter()
            .map(|(h, _)| h.stats().unwrap_or_default())
            .collect()
    }

    /// Gives the two flows between node `a` port `pa` and node `b` port `pb` (both ways,
    /// what a ping-pong uses) the IDT `idt`, replacing both nodes' tables (zero:
    /// unregulated). Returns once both data planes have it.
    pub fn pace_pair(&self, a: usize, pa: u16, b: usize, pb: u16, idt: Duration) {
        let row = |dst: usize, src_port: u16, dst_port: u16| IdtRow {
            src_port,
            dst_node: self.nodes[dst].name.clone(),
            dst_port,
            priority: 0,
            idt: Some(idt),
            reserved: None,
        };
        self.set_table(a, vec![row(b, pa, pb)]);
        self.set_table(b, vec![row(a, pb, pa)]);
        // The table travels with the control messages before this one.
        let _ = self.handles[a].0.stats();
        let _ = self.handles[b].0.stats();
    }

    /// The shortest time per packet an unregulated flow from `src` to `dst` achieves:
    /// the best of three streams of `count` one-packet messages of `size` bytes (small
    /// messages: the highest packet rate the agents reach).
    pub fn packet_time(
        &self,
        src: usize,
        dst: usize,
        size: usize,
        count: usize,
    ) -> Result<Duration, HarnessError> {
        let size = size.clamp(1, self.payload.max(1));
        let mut best = Duration::from_ps(u64::MAX);
        for _ in 0..3 {
            let bw = self.measure_flow(src, dst, Duration::ZERO, size, count)?;
            let ps = (size as f64 / bw.bytes_per_sec().max(1) as f64 * 1e12) as u64;
            best = best.min(Duration::from_ps(ps));
        }
        Ok(best)
    }

    /// An IDT that makes rate control take a pacing decision for every packet without
    /// throttling: [`PACING_MARGIN`] of [`Harness::packet_time`], so the flows may go a
    /// little faster than the agents can move packets at all (the
    /// overhead measured on the full NDT path, not an unregulated flow's cheap one).
    pub fn pacing_idt(&self, src: usize, dst: usize) -> Result<Duration, HarnessError> {
        let t = self.packet_time(src, dst, 64, 2000)?;
        Ok(Duration::from_ps((t.as_ps() as f64 * PACING_MARGIN) as u64))
    }

    /// One flow from node `src` port `sp` to node `dst` port `dp` with `idt` (zero:
    /// unregulated): sends `count` messages of `size` bytes and returns the achieved
    /// bandwidth in the steady state: the bytes of the messages after the first fifth
    /// over the time from the first fifth's last arrival to the last arrival (so that
    /// start-up and a shaper's initial burst do not inflate it).
    pub fn measure_flow(
        &self,
        src: usize,
        dst: usize,
        idt: Duration,
        size: usize,
        count: usize,
    ) -> Result<Bandwidth, HarnessError> {
        let (sp, dp) = (1u16, 2u16);
        self.set_table(
            src,
            vec![IdtRow {
                src_port: sp,
                dst_node: self.nodes[dst].name.clone(),
                dst_port: dp,
                priority: 0,
                idt: Some(idt),
                reserved: None,
            }],
        );
        std::thread::sleep(StdDuration::from_millis(20));
        let tx = PortClient::open(&self.sockets[src], Some(sp))?;
        let rx = PortClient::open(&self.sockets[dst], Some(dp))?;
        let slot = size.next_multiple_of(64) as u64;
        let slots = (rx.region().layout.buffer_bytes / slot).min(128);
        for i in 0..slots {
            rx.post_recv(RecvDesc {
                offset: i * slot,
                capacity: slot as u32,
                _pad: 0,
                cookie: i * slot,
            })?;
        }
        let dst_node = tx.node_index(&self.nodes[dst].name).expect("node listed");
        let send_slots = (tx.region().layout.buffer_bytes / slot)
            .min(u64::from(tx.region().layout.send_slots) - 1);
        let mut free: Vec<u64> = (0..send_slots).map(|i| i * slot).collect();
        for &o in &free {
            tx.region().write(o, &vec![0x5a; size]);
        }
        let start = Instant::now();
        let (mut sent, mut got, mut bytes) = (0usize, 0usize, 0u64);
        let mut last = start;
        let skip = count / 5;
        let mut mark = start;
        while got < count {
            while sent < count {
                let Some(o) = free.pop() else { break };
                let d = SendDesc {
                    offset: o,
                    len: size as u32,
                    dst_node,
                    cookie: o,
                    dst_port: dp,
                    priority: 0,
                    _pad: [0; 5],
                };
                if !tx.post_send(d)? {
                    free.push(o);
                    break;
                }
                sent += 1;
            }
            while let Some(c) = tx.poll()? {
                if c.kind == CQ_SENT {
                    free.push(c.cookie);
                }
            }
            match rx.wait(StdDuration::from_millis(2))? {
                Some(c) if c.kind == CQ_RECEIVED => {
                    got += 1;
                    last = Instant::now();
                    if got == skip {
                        mark = last;
                    } else if got > skip {
                        bytes += u64::from(c.len);
                    }
                    rx.post_recv(RecvDesc {
                        offset: c.cookie,
                        capacity: slot as u32,
                        _pad: 0,
                        cookie: c.cookie,
                    })?;
                }
                _ => {
                    if last.elapsed() > StdDuration::from_secs(10) {
                        return Err(HarnessError::Stalled(StdDuration::from_secs(10)));
                    }
                }
            }
        }
        let secs = (last - mark).as_secs_f64().max(1e-9);
        Ok(Bandwidth::from_bytes_per_sec((bytes as f64 / secs) as u64))
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        for (h, t) in self.handles.drain(..) {
            h.stop();
            let _ = t.join();
        }
    }
}

/// Result of a calibration (thesis §5.3).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Calibration {
    /// (IDT, achieved bandwidth) for every sweep point.
    pub sweep: Vec<(Duration, Bandwidth)>,
    /// Bandwidth of the unregulated flow.
    pub bmax: Bandwidth,
    /// Time per packet at Bmax (packet payload / Bmax): IDTs below it do not slow the flow.
    pub t: Duration,
    /// The IDT where the sweep falls below 98 % of Bmax, interpolated between sweep points
    /// (the knee of Fig 5.3; `qos_core::calibrate::knee`).
    pub knee: Duration,
    pub packet_payload: usize,
    /// Bmax in bytes per second (for programs).
    pub bmax_bytes_per_sec: u64,
    /// T in picoseconds (for programs).
    pub t_ps: u64,
}

/// Sweeps the IDT of one flow of `size`-byte messages from node 0 to node 1. Bmax is
/// the best of three unregulated runs: on a shared machine a run can lose the CPU for a
/// while, and Bmax is what the node can do, not what it did at its worst.
pub fn calibrate(h: &Harness, size: usize, count: usize) -> Result<Calibration, HarnessError> {
    let bmax = unregulated_bmax(h, size, count)?;
    let t_ps = (h.payload as f64 / bmax.bytes_per_sec().max(1) as f64 * 1e12) as u64;
    let t = Duration::from_ps(t_ps);
    let mut sweep = vec![(Duration::ZERO, bmax)];
    for f in [0.5, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0] {
        let idt = Duration::from_ps((t_ps as f64 * f) as u64);
        sweep.push((idt, h.measure_flow(0, 1, idt, size, count)?));
    }
    let pts: Vec<(f64, f64)> = sweep
        .iter()
        .map(|(i, b)| (i.as_ps() as f64, b.bytes_per_sec() as f64))
        .collect();
    let knee = qos_core::calibrate::knee(&pts, bmax.bytes_per_sec() as f64)
        .map_or(Duration::ZERO, |ps| Duration::from_ps(ps.round() as u64));
    Ok(Calibration {
        sweep,
        bmax,
        t,
        knee,
        packet_payload: h.payload,
        bmax_bytes_per_sec: bmax.bytes_per_sec(),
        t_ps,
    })
}

/// The best of three unregulated runs of node 0 → node 1 (see [`calibrate`]).
pub fn unregulated_bmax(h: &Harness, size: usize, count: usize) -> Result<Bandwidth, HarnessError> {
    let mut best = Bandwidth::from_bytes_per_sec(0);
    for _ in 0..3 {
        let b = h.measure_flow(0, 1, Duration::ZERO, size, count)?;
        if b.bytes_per_sec() > best.bytes_per_sec() {
            best = b;
        }
    }
    Ok(best)
}
