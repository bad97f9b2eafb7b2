//! The agent's data-plane service: serves ports to local applications over a Unix
//! socket (set-up only, GM's driver role) and moves their messages between the shared
//! descriptor queues and the engine (the MCP role, thesis §4.1–4.2). One thread; busy
//! while there is work, asleep on eventfd/socket readiness when there is none.
//!
//! Security: the socket file gets mode `socket_mode`; each connection's SO_PEERCRED uid
//! must be in `allowed_uids` (default: the agent's own uid and root); each port's memfd
//! and doorbell go only to the process that opened it; every descriptor read from shared
//! memory is checked (node index, buffer span) before use.
//!
//! The shared-memory mechanics both ends use are in [`crate::shm`]. Split: this file holds the configuration, the control handle and the loop;
//! [`ports`] the port set-up and the moving of descriptors and completions.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;

use qos_core::sched::AnyScheduler;
use qos_core::units::{Bandwidth, Duration, Time};

use crate::agent::ports::PortOwners;
use crate::dataplane::clock::{self, Clock};
use crate::dataplane::engine::{Engine, EngineConfig, EngineStats, FlowKey};
use crate::shm::fdpass;
use crate::shm::region::{Doorbell, Layout};
use crate::transport::auth::{AuthConfig, AuthLink, AuthStats, DataKey};
use crate::transport::link::{AnyLink, Faults, Link, UdpLink};
use crate::transport::wire::FlowTag;

mod conn;
mod ports;
mod setup;
use conn::PortConn;

#[cfg(test)]
mod tests;

/// How the data plane runs.
#[derive(Debug, Clone)]
pub struct DataPlaneConfig {
    /// This node's name.
    pub node: String,
    /// Every node's data address (this one's included); the index is the node number
    /// used in send descriptors.
    pub nodes: Vec<(String, SocketAddr)>,
    /// Unix socket for port set-up.
    pub socket: PathBuf,
    /// Mode of the socket file.
    pub socket_mode: u32,
    /// Uids allowed to open ports; empty = the agent's own uid and root.
    pub allowed_uids: Vec<u32>,
    pub engine: EngineConfig,
    pub faults: Faults,
    /// Packet scheduler (chosen per node): rate control normally; VirtualClock
    /// (Vtick from each flow's reservation), round robin of messages or packets, or GM
    /// rotation (the "rate control off" baseline). See [`scheduler_kind`].
    pub scheduler: qos_core::sched::SchedulerKind,
    pub layout: Layout,
    /// The key material the cluster's agents share: every datagram is sealed with a
    /// key derived from it for its (sender, receiver) pair (`transport::auth`).
    pub key: DataKey,
    /// Largest difference, in seconds, between a datagram's send time and this
    /// agent's clock ([`crate::transport::auth::DEFAULT_MAX_SKEW_SECS`]).
    pub max_clock_skew_secs: u32,
    /// How this agent protects the datagrams it sends (authenticated, or also
    /// encrypted); it opens either kind.
    pub protection: crate::transport::auth::Protection,
    /// Ports one user, and one process, may hold open at once ([`PortLimits`]).
    pub limits: PortLimits,
}

/// How many ports local applications may hold, so that one user cannot take the
/// agent's descriptors (each port holds three: its socket, memory and doorbell) or
/// memory from the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortLimits {
    /// Ports open at once by one uid.
    pub per_uid: usize,
    /// Ports open at once by one process.
    pub per_process: usize,
    /// Descriptors never given to ports: the agent's control socket, its link to the
    /// manager, logs and the like keep working however many ports are open.
    pub reserved_fds: u64,
}

impl Default for PortLimits {
    /// 256 ports per uid, 64 per process, 256 descriptors in reserve.
    fn default() -> Self {
        PortLimits {
            per_uid: 256,
            per_process: 64,
            reserved_fds: 256,
        }
    }
}

/// Descriptors each open port holds in the agent (socket, region, doorbell).
const FDS_PER_PORT: u64 = 3;

/// One row of the node's IDT table as the data plane applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdtRow {
    pub src_port: u16,
    pub dst_node: String,
    pub dst_port: u16,
    pub priority: u8,
    /// `None`: the flow must not send (zero share).
    pub idt: Option<Duration>,
    /// The bandwidth reserved for the flow (a premium flow's); `None` for best-effort.
    /// VirtualClock's tick comes from it ([`crate::dataplane::engine::vtick_for`]).
    pub reserved: Option<Bandwidth>,
}

/// IDT given to a flow that must not send (a zero best-effort share).
pub const HOLD_IDT: Duration = Duration::from_secs(3600);

enum Control {
    Table(Vec<IdtRow>),
    Stop,
    /// Switch the packet scheduler; the kind now running is sent back once applied.
    Scheduler(
        qos_core::sched::SchedulerKind,
        mpsc::Sender<qos_core::sched::SchedulerKind>,
    ),
    /// Poll for work this long before sleeping (zero: sleep at once).
    IdleSpin(Duration),
    /// Send back the engine's counters.
    Stats(mpsc::Sender<EngineStats>),
    /// Send back the authenticated link's counters.
    AuthStats(mpsc::Sender<AuthStats>),
}

/// Talks to a running data plane from other threads.
#[derive(Clone)]
pub struct DataPlaneHandle {
    tx: mpsc::Sender<Control>,
    bell: Arc<Doorbell>,
}

impl DataPlaneHandle {
    /// Replaces the IDT table (rows not listed fall back to unregulated).
    pub fn set_table(&self, rows: Vec<IdtRow>) {
        let _ = self.tx.send(Control::Table(rows));
        self.bell.ring();
    }
    /// Switches the packet scheduler (rate control on or off in the same agent, for the
    /// overhead comparison); returns the kind running once applied (`None`: the loop is gone).
    pub fn set_scheduler(
        &self,
        kind: qos_core::sched::SchedulerKind,
    ) -> Option<qos_core::sched::SchedulerKind> {
        let (tx, rx) = mpsc::channel();
        self.tx.send(Control::Scheduler(kind, tx)).ok()?;
        self.bell.ring();
        rx.recv_timeout(std::time::Duration::from_secs(5)).ok()
    }
    /// Makes the loop poll its queues and socket for `spin` before sleeping when idle.
    pub fn set_idle_spin(&self, spin: Duration) {
        let _ = self.tx.send(Control::IdleSpin(spin));
        self.bell.ring();
    }
    /// The engine's counters (`None`: the loop is gone).
    pub fn stats(&self) -> Option<EngineStats> {
        let (tx, rx) = mpsc::channel();
        self.tx.send(Control::Stats(tx)).ok()?;
        self.bell.ring();
        rx.recv_timeout(std::time::Duration::from_secs(5)).ok()
    }
    /// What the authenticated link accepted and refused (`None`: the loop is gone).
    pub fn auth_stats(&self) -> Option<AuthStats> {
        let (tx, rx) = mpsc::channel();
        self.tx.send(Control::AuthStats(tx)).ok()?;
        self.bell.ring();
        rx.recv_timeout(std::time::Duration::from_secs(5)).ok()
    }
    /// Stops the loop.
    pub fn stop(&self) {
        let _ = self.tx.send(Control::Stop);
        self.bell.ring();
    }
}

/// The data plane of one agent.
pub struct DataPlane {
    cfg: DataPlaneConfig,
    engine: Engine<AuthLink<AnyLink>, AnyScheduler>,
    listener: OwnedFd,
    bell: Arc<Doorbell>,
    rx: mpsc::Receiver<Control>,
    tx: mpsc::Sender<Control>,
    ports: HashMap<u16, PortConn>,
    /// Connections on the port socket waiting to send their open request.
    setups: std::collections::VecDeque<setup::Setup>,
    peers: HashMap<SocketAddr, u32>,
    /// The IDT and Vtick applied to each flow of the table.
    applied: HashMap<FlowKey, (Duration, Option<Duration>)>,
    clock: Clock,
    allowed: Vec<u32>,
    idle_spin: Duration,
    /// Who opened each port, shared with the agent's socket.
    owners: PortOwners,
    /// Ports open per uid and per process, and how many ports may be open in all
    /// (from the descriptor limit, less the reserve).
    per_uid: HashMap<u32, usize>,
    per_pid: HashMap<u32, usize>,
    max_ports: usize,
}

fn node_addr(cfg: &DataPlaneConfig) -> io::Result<SocketAddr> {
    cfg.nodes
        .iter()
        .find(|(n, _)| *n == cfg.node)
        .map(|(_, a)| *a)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("node `{}` is not in the node list", cfg.node),
            )
        })
}

impl DataPlane {
    /// Binds the UDP socket and the port socket.
    pub fn bind(cfg: DataPlaneConfig) -> io::Result<DataPlane> {
        DataPlane::bind_on(cfg, None)
    }

    /// Like [`DataPlane::bind`], on a UDP socket the caller bound already at this node's
    /// address (`None`: bind it here).
    pub fn bind_on(
        cfg: DataPlaneConfig,
        socket: Option<std::net::UdpSocket>,
    ) -> io::Result<DataPlane> {
        let addr = node_addr(&cfg)?;
        const UDP_BUFFER: usize = 32 << 20;
        let udp = match socket {
            Some(s) => {
                if s.local_addr()? != addr {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "the socket given is bound at {}, not at {addr}",
                            s.local_addr()?
                        ),
                    ));
                }
                AnyLink::over(UdpLink::from_socket(s, UDP_BUFFER)?, cfg.faults)
            }
            None => AnyLink::udp(addr, UDP_BUFFER, cfg.faults)?,
        };
        let link = AuthLink::new(
            udp,
            &AuthConfig {
                key: cfg.key.clone(),
                me: addr,
                peers: cfg.nodes.iter().map(|(_, a)| *a).collect(),
                max_skew_secs: cfg.max_clock_skew_secs,
                protection: cfg.protection,
            },
        );
        let sched = AnyScheduler::new(cfg.scheduler);
        let engine = Engine::new(cfg.engine, link, sched);
        let _ = std::fs::remove_file(&cfg.socket);
        let listener = fdpass::seqpacket(&cfg.socket, true)?;
        std::fs::set_permissions(
            &cfg.socket,
            std::fs::Permissions::from_mode(cfg.socket_mode),
        )?;
        fdpass::set_nonblocking(&listener)?;
        let (tx, rx) = mpsc::channel();
        let me = rustix::process::getuid().as_raw();
        let allowed = if cfg.allowed_uids.is_empty() {
            vec![me, 0]
        } else {
            cfg.allowed_uids.clone()
        };
        let cfg_limits = cfg.limits;
        let mut peers = HashMap::new();
        for (i, (_, a)) in cfg.nodes.iter().enumerate() {
            peers.insert(*a, i as u32);
        }
        Ok(DataPlane {
            cfg,
            engine,
            listener,
            bell: Arc::new(Doorbell::new()?),
            rx,
            tx,
            ports: HashMap::new(),
            setups: Default::default(),
            peers,
            applied: HashMap::new(),
            clock: Clock::new(),
            allowed,
            idle_spin: Duration::ZERO,
            owners: PortOwners::default(),
            per_uid: HashMap::new(),
            per_pid: HashMap::new(),
            max_ports: port_capacity(cfg_limits.reserved_fds),
        })
    }

    /// The UDP address the data plane listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.engine.link().local_addr()
    }

    /// Seals less than an agent in this data plane (see [`AuthLink::set_bench_seal`]:
    /// a benchmark's control, never an agent's; every node it talks to must use the
    /// same).
    pub fn set_bench_seal(&mut self, seal: crate::transport::auth::BenchSeal) {
        self.engine.link_mut().set_bench_seal(seal);
    }

    /// Payload bytes per packet.
    pub fn payload(&self) -> usize {
        self.engine.config().payload
    }

    /// The open ports and the uid that opened each, kept current by this data plane:
    /// give it to the agent ([`crate::agent::Config::ports`]) so that only a port's
    /// opener (or root) may reserve bandwidth from it.
    pub fn port_owners(&self) -> PortOwners {
        self.owners.clone()
    }

    pub fn handle(&self) -> DataPlaneHandle {
        DataPlaneHandle {
            tx: self.tx.clone(),
            bell: self.bell.clone(),
        }
    }

    /// Serves until [`DataPlaneHandle::stop`].
    pub fn run(mut self) -> io::Result<()> {
        let mut last_conn_check = Time::ZERO;
        loop {
            let now = self.clock.now();
            loop {
                match self.rx.try_recv() {
                    Ok(Control::Table(rows)) => self.apply_table(now, rows),
                    Ok(Control::Stop) => {
                        let _ = std::fs::remove_file(&self.cfg.socket);
                        return Ok(());
                    }
                    Ok(Control::Scheduler(kind, reply)) => {
                        let s = qos_core::sched::AnyScheduler::new(kind);
                        self.engine.replace_scheduler(now, s);
                        let _ = reply.send(self.engine.scheduler().kind());
                    }
                    Ok(Control::IdleSpin(d)) => self.idle_spin = d,
                    Ok(Control::Stats(reply)) => {
                        let _ = reply.send(self.engine.stats);
                    }
                    Ok(Control::AuthStats(reply)) => {
                        let _ = reply.send(self.engine.link().stats);
                    }
                    Err(_) => break,
                }
            }
            let posted = self.drain_rings(now);
            let next = self.engine.poll(now)?;
            let completed = self.deliver_completions();
            if now.saturating_since(last_conn_check) > Duration::from_ms(10) {
                last_conn_check = now;
                self.accept_and_check_conns();
            }
            if posted || completed {
                continue;
            }
            if next.is_some_and(|t| t <= self.clock.now()) {
                continue;
            }
            if self.idle_spin > Duration::ZERO {
                let mut fds = vec![self.bell.as_fd()];
                fds.extend(self.engine.link().fd());
                let until = self.clock.now() + self.idle_spin;
                let until = next.map_or(until, |t| t.min(until));
                let ports = &self.ports;
                let work = || {
                    ports.values().any(|p| {
                        !p.region.send_ring().is_empty() || !p.region.recv_ring().is_empty()
                    })
                };
                if clock::spin_for_work(&self.clock, &fds, until, work) {
                    self.bell.clear();
                    continue;
                }
            }
            // Going to sleep: tell applications to ring, then look once more.
            for p in self.ports.values() {
                p.region.agent_sleeping().store(1, Ordering::SeqCst);
            }
            std::sync::atomic::fence(Ordering::SeqCst);
            let pending = self
                .ports
                .values()
                .any(|p| !p.region.send_ring().is_empty() || !p.region.recv_ring().is_empty());
            if !pending {
                let mut fds = vec![self.bell.as_fd(), self.listener.as_fd()];
                fds.extend(self.engine.link().fd());
                fds.extend(self.ports.values().map(|p| p.conn.as_fd()));
                fds.extend(self.setups.iter().map(|s| s.conn.as_fd()));
                // A set-up that sends nothing is dropped in time even on an idle node.
                let expiry = self.setups.front().map(|s| s.since + setup::SETUP_WAIT);
                let next = match (next, expiry) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                clock::wait(&self.clock, &fds, next);
                self.bell.clear();
                self.accept_and_check_conns();
                last_conn_check = self.clock.now();
            }
            for p in self.ports.values() {
                p.region.agent_sleeping().store(0, Ordering::SeqCst);
            }
        }
    }

    fn apply_table(&mut self, _now: Time, rows: Vec<IdtRow>) {
        let payload = self.engine.config().payload;
        let mut next: HashMap<FlowKey, (Duration, Option<Duration>)> = HashMap::new();
        for r in rows {
            let Some((_, addr)) = self.cfg.nodes.iter().find(|(n, _)| *n == r.dst_node) else {
                continue;
            };
            let key = FlowKey {
                peer: *addr,
                tag: FlowTag {
                    src_port: r.src_port,
                    dst_port: r.dst_port,
                    priority: r.priority,
                },
            };
            let vtick = crate::dataplane::engine::vtick_for(payload, r.reserved);
            next.insert(key, (r.idt.unwrap_or(HOLD_IDT), vtick));
        }
        for (k, _) in self.applied.iter() {
            if !next.contains_key(k) {
                self.engine.set_idt(*k, Duration::ZERO);
                self.engine.set_vtick(*k, None);
            }
        }
        for (k, v @ (idt, vtick)) in &next {
            if self.applied.get(k) != Some(v) {
                self.engine.set_idt(*k, *idt);
                self.engine.set_vtick(*k, *vtick);
            }
        }
        self.applied = next;
    }
}

/// Ports this process can hold without passing its descriptor limit less `reserved`
/// (the descriptors open now, and `reserved` more, are kept for everything else).
fn port_capacity(reserved: u64) -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
        .min(1 << 24);
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count() as u64);
    (limit.saturating_sub(open + reserved) / FDS_PER_PORT) as usize
}

/// A data-plane scheduler name that is none of [`SCHEDULER_NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduler '{0}' (expected rate-control or rate, virtual-clock, round-robin or message-round-robin, interleaved-round-robin, or gm)")]
pub struct UnknownScheduler(pub String);

/// Every name [`scheduler_kind`] accepts, with the kind it means: the configuration
/// names of `SchedulerKind` and the short forms of the agent's command line.
pub const SCHEDULER_NAMES: &[(&str, qos_core::sched::SchedulerKind)] = {
    use qos_core::sched::SchedulerKind as K;
    &[
        ("rate-control", K::RateControl),
        ("rate", K::RateControl),
        ("on", K::RateControl),
        ("virtual-clock", K::VirtualClock),
        ("round-robin", K::MessageRoundRobin),
        ("message-round-robin", K::MessageRoundRobin),
        ("interleaved-round-robin", K::InterleavedRoundRobin),
        ("gm", K::Gm),
        ("off", K::Gm),
    ]
};

/// A data-plane scheduler by name (every kind selectable per node):
/// "rate-control" (or "rate"), "virtual-clock", "round-robin" (whole messages in turn;
/// also "message-round-robin"), "interleaved-round-robin" (one packet per flow in turn)
/// or "gm" (GM's rotation, rate control off). "on" and "off" are the overhead
/// comparison's names for rate control and GM.
pub fn scheduler_kind(name: &str) -> Result<qos_core::sched::SchedulerKind, UnknownScheduler> {
    SCHEDULER_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, k)| *k)
        .ok_or_else(|| UnknownScheduler(name.to_string()))
}
