//! The agent's data-plane service: serves ports to local applications over a Unix
//! socket (set-up only, GM's driver role) and moves their messages between the shared
//! descriptor queues and the engine (the MCP role, thesis §4.1–4.2). One thread; busy
//! while there is work, asleep on eventfd/socket readiness when there is none.
//!
//! Security: the socket file gets mode `socket_mode`; each connection's SO_PEERCRED uid
//! must be in `allowed_uids` (default: the agent's own uid and root); each port's memfd
//! and doorbell go only to the process that opened it; every descriptor read from shared
//! memory is checked (node index, buffer span) before use.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;

use qos_core::sched::AnyScheduler;
use qos_core::units::{Duration, Time};
use serde::{Deserialize, Serialize};

use super::fdpass;
use super::region::{
    notify, CompletionDesc, Doorbell, Layout, Region, CQ_ERROR, CQ_RECEIVED, CQ_SENT,
};
use crate::dataplane::clock::{self, Clock};
use crate::dataplane::engine::{
    Completion, Engine, EngineConfig, FlowKey, MessageBytes, Payload, RecvTarget,
};
use crate::transport::link::{AnyLink, Faults, Link};
use crate::transport::wire::FlowTag;

/// Set-up protocol version spoken on the port socket.
pub const SETUP_VERSION: u32 = 1;

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
    /// Scheduler: rate control normally; GM rotation for the "rate control off" baseline.
    pub scheduler: qos_core::sched::SchedulerKind,
    pub layout: Layout,
}

/// One row of the node's IDT table as the data plane applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdtRow {
    pub src_port: u16,
    pub dst_node: String,
    pub dst_port: u16,
    pub priority: u8,
    /// `None`: the flow must not send (zero share).
    pub idt: Option<Duration>,
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
    /// Stops the loop.
    pub fn stop(&self) {
        let _ = self.tx.send(Control::Stop);
        self.bell.ring();
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct OpenRequest {
    version: u32,
    op: String,
    #[serde(default)]
    port: Option<u16>,
}

/// The agent's answer to an open request (the memfd and two eventfds ride along).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenReply {
    pub version: u32,
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub port: u16,
    #[serde(default)]
    pub node: String,
    #[serde(default)]
    pub nodes: Vec<String>,
    #[serde(default)]
    pub layout: Option<Layout>,
    #[serde(default)]
    pub packet_payload: usize,
}

struct ShmSlice {
    region: Arc<Region>,
    offset: u64,
    len: usize,
}
impl MessageBytes for ShmSlice {
    fn bytes(&self) -> &[u8] {
        // SAFETY: span checked when the descriptor was accepted; the mapping lives as long
        // as `region`. The application promised (GM semantics) not to touch the buffer
        // until the send completes.
        unsafe { std::slice::from_raw_parts(self.region.span_ptr(self.offset), self.len) }
    }
}

struct ShmTarget {
    region: Arc<Region>,
    offset: u64,
    len: usize,
}
impl RecvTarget for ShmTarget {
    fn buf_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; the application handed the buffer to the agent until completion.
        unsafe { std::slice::from_raw_parts_mut(self.region.span_ptr(self.offset), self.len) }
    }
}

struct PortConn {
    port: u16,
    conn: OwnedFd,
    region: Arc<Region>,
    app_bell: Doorbell,
    backlog: VecDeque<CompletionDesc>,
}

/// The data plane of one agent.
pub struct DataPlane {
    cfg: DataPlaneConfig,
    engine: Engine<AnyLink, AnyScheduler>,
    listener: OwnedFd,
    bell: Arc<Doorbell>,
    rx: mpsc::Receiver<Control>,
    tx: mpsc::Sender<Control>,
    ports: HashMap<u16, PortConn>,
    peers: HashMap<SocketAddr, u32>,
    applied: HashMap<FlowKey, Duration>,
    clock: Clock,
    allowed: Vec<u32>,
    idle_spin: Duration,
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
        let addr = node_addr(&cfg)?;
        let link = AnyLink::udp(addr, 32 << 20, cfg.faults)?;
        let sched = AnyScheduler::new(cfg.scheduler);
        let engine = Engine::new(cfg.engine, link, sched);
        let _ = std::fs::remove_file(&cfg.socket);
        let listener = fdpass::seqpacket(&cfg.socket, true)?;
        std::fs::set_permissions(
            &cfg.socket,
            std::fs::Permissions::from_mode(cfg.socket_mode),
        )?;
        fdpass::set_nonblocking(listener.as_raw_fd())?;
        let (tx, rx) = mpsc::channel();
        // SAFETY: getuid never fails.
        let me = unsafe { libc::getuid() };
        let allowed = if cfg.allowed_uids.is_empty() {
            vec![me, 0]
        } else {
            cfg.allowed_uids.clone()
        };
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
            peers,
            applied: HashMap::new(),
            clock: Clock::new(),
            allowed,
            idle_spin: Duration::ZERO,
        })
    }

    /// The UDP address the data plane listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.engine.link().local_addr()
    }

    /// Payload bytes per packet.
    pub fn payload(&self) -> usize {
        self.engine.config().payload
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
                let mut fds: Vec<RawFd> = vec![self.bell.raw_fd()];
                fds.extend(self.engine.link().raw_fd());
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
                let mut fds: Vec<RawFd> = vec![self.bell.raw_fd(), self.listener.as_raw_fd()];
                fds.extend(self.engine.link().raw_fd());
                fds.extend(self.ports.values().map(|p| p.conn.as_raw_fd()));
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
        let mut next: HashMap<FlowKey, Duration> = HashMap::new();
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
            next.insert(key, r.idt.unwrap_or(HOLD_IDT));
        }
        for (k, _) in self.applied.iter() {
            if !next.contains_key(k) {
                self.engine.set_idt(*k, Duration::ZERO);
            }
        }
        for (k, idt) in &next {
            if self.applied.get(k) != Some(idt) {
                self.engine.set_idt(*k, *idt);
            }
        }
        self.applied = next;
    }

    /// Moves posted descriptors from every port's rings into the engine.
    fn drain_rings(&mut self, now: Time) -> bool {
        let mut any = false;
        let mut broken = Vec::new();
        for p in self.ports.values_mut() {
            let sends = p.region.send_ring();
            loop {
                let d = match sends.pop() {
                    Ok(Some(d)) => d,
                    Ok(None) => break,
                    Err(_) => {
                        broken.push(p.port);
                        break;
                    }
                };
                any = true;
                let ok = p.region.check_span(d.offset, u64::from(d.len))
                    && (d.dst_node as usize) < self.cfg.nodes.len();
                if !ok {
                    p.backlog.push_back(CompletionDesc {
                        kind: CQ_ERROR,
                        cookie: d.cookie,
                        ..Default::default()
                    });
                    continue;
                }
                let key = FlowKey {
                    peer: self.cfg.nodes[d.dst_node as usize].1,
                    tag: FlowTag {
                        src_port: p.port,
                        dst_port: d.dst_port,
                        priority: d.priority,
                    },
                };
                let msg: Payload = Arc::new(ShmSlice {
                    region: p.region.clone(),
                    offset: d.offset,
                    len: d.len as usize,
                });
                if self.engine.send(now, key, msg, d.cookie).is_err() {
                    p.backlog.push_back(CompletionDesc {
                        kind: CQ_ERROR,
                        cookie: d.cookie,
                        ..Default::default()
                    });
                }
            }
            let recvs = p.region.recv_ring();
            let mut posted = false;
            loop {
                let d = match recvs.pop() {
                    Ok(Some(d)) => d,
                    Ok(None) => break,
                    Err(_) => {
                        broken.push(p.port);
                        break;
                    }
                };
                any = true;
                if !p.region.check_span(d.offset, u64::from(d.capacity)) {
                    p.backlog.push_back(CompletionDesc {
                        kind: CQ_ERROR,
                        cookie: d.cookie,
                        ..Default::default()
                    });
                    continue;
                }
                let t = ShmTarget {
                    region: p.region.clone(),
                    offset: d.offset,
                    len: d.capacity as usize,
                };
                let _ = self.engine.post_recv(p.port, d.cookie, Box::new(t));
                posted = true;
            }
            if posted {
                self.engine.kick_port(p.port);
            }
        }
        for port in broken {
            tracing::warn!(port, "port's shared queues corrupt; closing it");
            self.close_port(port);
        }
        any
    }

    fn deliver_completions(&mut self) -> bool {
        let mut any = false;
        while let Some(c) = self.engine.poll_completion() {
            any = true;
            let (port, desc) = match c {
                Completion::Sent { port, cookie } => (
                    port,
                    CompletionDesc {
                        kind: CQ_SENT,
                        cookie,
                        ..Default::default()
                    },
                ),
                Completion::Received {
                    port,
                    cookie,
                    len,
                    from,
                    src_port,
                    priority,
                    ..
                } => (
                    port,
                    CompletionDesc {
                        kind: CQ_RECEIVED,
                        len,
                        cookie,
                        src_node: self.peers.get(&from).copied().unwrap_or(u32::MAX),
                        src_port,
                        priority,
                        _pad: 0,
                    },
                ),
            };
            if let Some(p) = self.ports.get_mut(&port) {
                p.backlog.push_back(desc);
            }
        }
        for p in self.ports.values_mut() {
            if p.backlog.is_empty() {
                continue;
            }
            let cq = p.region.completion_ring();
            while let Some(d) = p.backlog.front() {
                match cq.push(*d) {
                    Ok(true) => {
                        p.backlog.pop_front();
                        any = true;
                    }
                    _ => break,
                }
            }
            notify(p.region.app_waiting(), &p.app_bell);
        }
        any
    }

    fn close_port(&mut self, port: u16) {
        self.ports.remove(&port);
        self.engine.close_port(port);
    }

    fn accept_and_check_conns(&mut self) {
        while let Ok(Some(conn)) = fdpass::accept(&self.listener) {
            if let Err(e) = self.open_port(conn) {
                tracing::info!(error = %e, "port open refused");
            }
        }
        // A closed connection means the application is gone: free its port.
        let mut gone = Vec::new();
        for p in self.ports.values() {
            let mut pfd = libc::pollfd {
                fd: p.conn.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, zero timeout.
            let r = unsafe { libc::poll(&mut pfd, 1, 0) };
            if r > 0 && pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLIN) != 0 {
                let mut b = [0u8; 64];
                match fdpass::recv_with_fds(p.conn.as_raw_fd(), &mut b) {
                    Ok((0, _)) | Err(_) => gone.push(p.port),
                    Ok(_) => {} // nothing else is spoken after set-up
                }
            }
        }
        for port in gone {
            self.close_port(port);
        }
    }

    fn open_port(&mut self, conn: OwnedFd) -> io::Result<()> {
        let refuse = |conn: &OwnedFd, msg: String| -> io::Result<()> {
            let r = OpenReply {
                version: SETUP_VERSION,
                ok: false,
                error: Some(msg.clone()),
                port: 0,
                node: String::new(),
                nodes: vec![],
                layout: None,
                packet_payload: 0,
            };
            let _ = fdpass::send_with_fds(
                conn.as_raw_fd(),
                &serde_json::to_vec(&r).unwrap_or_default(),
                &[],
            );
            Err(io::Error::new(io::ErrorKind::PermissionDenied, msg))
        };
        // The request must come promptly.
        let mut pfd = libc::pollfd {
            fd: conn.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 1000) };
        let mut buf = [0u8; 1024];
        let (n, _) = fdpass::recv_with_fds(conn.as_raw_fd(), &mut buf)?;
        // The request is read before any refusal: closing a socket with unread data
        // resets the peer, which would lose the reply that says why.
        let (pid, uid, _) = fdpass::peer_cred(&conn)?;
        if !self.allowed.contains(&uid) {
            return refuse(
                &conn,
                format!("uid {uid} (pid {pid}) is not registered with this agent"),
            );
        }
        let req: OpenRequest = match serde_json::from_slice(&buf[..n]) {
            Ok(r) => r,
            Err(e) => return refuse(&conn, format!("malformed open request: {e}")),
        };
        if req.version != SETUP_VERSION {
            return refuse(
                &conn,
                format!(
                    "set-up protocol version {} not supported (agent speaks {SETUP_VERSION})",
                    req.version
                ),
            );
        }
        if req.op != "open" {
            return refuse(&conn, format!("unknown operation `{}`", req.op));
        }
        let port = match req.port {
            Some(p) if self.ports.contains_key(&p) => {
                return refuse(&conn, format!("port {p} is already open"))
            }
            Some(p) => p,
            None => match (1..=u16::MAX).find(|p| !self.ports.contains_key(p)) {
                Some(p) => p,
                None => return refuse(&conn, "no free port".into()),
            },
        };
        let region = Region::create(self.cfg.layout)?;
        let app_bell = Doorbell::new()?;
        let reply = OpenReply {
            version: SETUP_VERSION,
            ok: true,
            error: None,
            port,
            node: self.cfg.node.clone(),
            nodes: self.cfg.nodes.iter().map(|(n, _)| n.clone()).collect(),
            layout: Some(self.cfg.layout),
            packet_payload: self.engine.config().payload,
        };
        let bytes = serde_json::to_vec(&reply).map_err(io::Error::other)?;
        fdpass::send_with_fds(
            conn.as_raw_fd(),
            &bytes,
            &[region.fd(), self.bell.raw_fd(), app_bell.raw_fd()],
        )?;
        let _ = self.engine.open_port(port);
        fdpass::set_nonblocking(conn.as_raw_fd())?;
        tracing::info!(port, pid, uid, "port opened");
        self.ports.insert(
            port,
            PortConn {
                port,
                conn,
                region,
                app_bell,
                backlog: VecDeque::new(),
            },
        );
        Ok(())
    }
}

/// Sets a scheduler's kind by name: "rate" (rate control) or "gm" (rate control off).
pub fn scheduler_kind(name: &str) -> Option<qos_core::sched::SchedulerKind> {
    use qos_core::sched::SchedulerKind as K;
    match name {
        "rate" | "rate-control" | "on" => Some(K::RateControl),
        "gm" | "off" => Some(K::Gm),
        _ => None,
    }
}
