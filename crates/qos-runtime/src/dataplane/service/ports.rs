//! The agent's side of its ports (GM's MCP role on the host, thesis §4.1): set-up of a
//! port on the Unix socket (credentials checked, region and doorbells passed), moving
//! posted descriptors from a port's shared rings into the engine, and completions back.
//! Every descriptor read from shared memory is checked (node index, buffer span) before
//! use; a bad one gets an error completion.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use qos_core::units::Time;

use super::conn::PortConn;
use super::setup::{Setup, SETUP_WAIT};
use super::DataPlane;
use crate::dataplane::engine::{
    Completion, FlowKey, MessageBytes, Payload, RecvTarget, SendFailure,
};
use crate::shm::fdpass;
use crate::shm::region::{
    notify, CompletionDesc, Doorbell, Region, Span, CQ_ERROR, CQ_RECEIVED, CQ_SENT,
    ERR_PEER_RESTARTED, ERR_PEER_UNREACHABLE,
};
use crate::shm::setup::{OpenReply, OpenRequest, SETUP_VERSION};
use crate::transport::link::{Body, SharedBytes};
use crate::transport::wire::FlowTag;

/// Connections waiting to send their request, per uid and in all (each holds a
/// descriptor); more are refused with a reply that says so.
const SETUPS_PER_UID: usize = 8;
const SETUPS_TOTAL: usize = 64;

/// A message in a port's buffer area (checked when its descriptor was accepted).
struct ShmSlice(Span);
impl MessageBytes for ShmSlice {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn body(&self, offset: usize, len: usize) -> Body<'_> {
        match self.0.raw(offset, len) {
            // SAFETY: `raw` checked the range against the span, and the span keeps the
            // mapping alive for as long as `self` (the body's lifetime) lives.
            Some((ptr, len)) => Body::Shared(unsafe { SharedBytes::new(ptr, len) }),
            // The engine asks only for ranges inside the message.
            None => Body::Local(&[]),
        }
    }
}

/// A receive buffer in a port's buffer area (checked when it was posted).
struct ShmTarget(Span);
impl RecvTarget for ShmTarget {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn write(&mut self, offset: usize, data: &[u8]) {
        self.0.write(offset, data);
    }
    fn read(&self, offset: usize, out: &mut [u8]) {
        self.0.read(offset, out);
    }
}

impl DataPlane {
    /// Moves posted descriptors from every port's rings into the engine.
    pub(super) fn drain_rings(&mut self, now: Time) -> bool {
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
                let span = p.region.span(d.offset, u64::from(d.len));
                let Some(span) = span.filter(|_| (d.dst_node as usize) < self.cfg.nodes.len())
                else {
                    p.backlog.push_back(CompletionDesc {
                        kind: CQ_ERROR,
                        cookie: d.cookie,
                        ..Default::default()
                    });
                    continue;
                };
                let key = FlowKey {
                    peer: self.cfg.nodes[d.dst_node as usize].1,
                    tag: FlowTag {
                        src_port: p.port,
                        dst_port: d.dst_port,
                        priority: d.priority,
                    },
                };
                let msg: Payload = Arc::new(ShmSlice(span));
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
                let Some(span) = p.region.span(d.offset, u64::from(d.capacity)) else {
                    p.backlog.push_back(CompletionDesc {
                        kind: CQ_ERROR,
                        cookie: d.cookie,
                        ..Default::default()
                    });
                    continue;
                };
                let t = ShmTarget(span);
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

    pub(super) fn deliver_completions(&mut self) -> bool {
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
                Completion::Failed {
                    port,
                    cookie,
                    peer,
                    why,
                } => (
                    port,
                    CompletionDesc {
                        kind: CQ_ERROR,
                        cookie,
                        len: match why {
                            SendFailure::PeerRestarted => ERR_PEER_RESTARTED,
                            SendFailure::PeerUnreachable => ERR_PEER_UNREACHABLE,
                        },
                        src_node: self.peers.get(&peer).copied().unwrap_or(u32::MAX),
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
        if let Some(p) = self.ports.remove(&port) {
            for (map, id) in [(&mut self.per_uid, p.uid), (&mut self.per_pid, p.pid)] {
                if let Some(n) = map.get_mut(&id) {
                    *n -= 1;
                    if *n == 0 {
                        map.remove(&id);
                    }
                }
            }
        }
        self.owners.closed(port);
        self.engine.close_port(port);
    }

    pub(super) fn accept_and_check_conns(&mut self) {
        let now = self.clock.now();
        // New connections wait for their request in the set-up queue: the loop never
        // blocks on one (a process that connects and sends nothing costs nobody else).
        while let Ok(Some(conn)) = fdpass::accept(&self.listener) {
            let uid = fdpass::peer_cred(&conn)
                .map(|(_, uid, _)| uid)
                .unwrap_or(u32::MAX);
            let of_uid = self.setups.iter().filter(|s| s.uid == uid).count();
            if of_uid >= SETUPS_PER_UID || self.setups.len() >= SETUPS_TOTAL {
                let msg = format!(
                    "too many port set-ups in progress ({of_uid} of uid {uid}, {} in all); \
                     send the open request at once, or try again later",
                    self.setups.len()
                );
                tracing::info!(uid, "port set-up refused: {msg}");
                let r = OpenReply::refused(msg);
                let _ =
                    fdpass::send_with_fds(&conn, &serde_json::to_vec(&r).unwrap_or_default(), &[]);
                continue;
            }
            self.setups.push_back(Setup {
                conn,
                uid,
                since: now,
            });
        }
        let mut waiting = VecDeque::with_capacity(self.setups.len());
        while let Some(s) = self.setups.pop_front() {
            if fdpass::ready(&s.conn) {
                if let Err(e) = self.open_port(s.conn) {
                    tracing::info!(error = %e, "port open refused");
                }
            } else if now.saturating_since(s.since) > SETUP_WAIT {
                tracing::info!(uid = s.uid, "port set-up dropped: no request within 1 s");
            } else {
                waiting.push_back(s);
            }
        }
        self.setups = waiting;
        // A closed connection means the application is gone: free its port.
        let mut gone = Vec::new();
        for p in self.ports.values() {
            if fdpass::ready(&p.conn) {
                let mut b = [0u8; 64];
                match fdpass::recv_with_fds(&p.conn, &mut b) {
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
            let r = OpenReply::refused(msg.clone());
            let _ = fdpass::send_with_fds(conn, &serde_json::to_vec(&r).unwrap_or_default(), &[]);
            Err(io::Error::new(io::ErrorKind::PermissionDenied, msg))
        };
        // The request is waiting (the set-up queue saw the connection readable).
        let mut buf = [0u8; 1024];
        let (n, _) = fdpass::recv_with_fds(&conn, &mut buf)?;
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
        let limits = self.cfg.limits;
        let of_uid = self.per_uid.get(&uid).copied().unwrap_or(0);
        if of_uid >= limits.per_uid {
            return refuse(
                &conn,
                format!(
                    "uid {uid} already holds {of_uid} ports on this agent, its limit \
                     (close one, or start the agent with a higher --max-ports-per-uid)"
                ),
            );
        }
        let of_pid = self.per_pid.get(&pid).copied().unwrap_or(0);
        if of_pid >= limits.per_process {
            return refuse(
                &conn,
                format!(
                    "process {pid} already holds {of_pid} ports on this agent, its limit \
                     (--max-ports-per-process)"
                ),
            );
        }
        if self.ports.len() >= self.max_ports {
            return refuse(
                &conn,
                format!(
                    "this agent holds {} ports, all its descriptors allow beside the {} it \
                     keeps for its manager link and control socket; try again later",
                    self.ports.len(),
                    limits.reserved_fds
                ),
            );
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
            &conn,
            &bytes,
            &[region.fd(), self.bell.as_fd(), app_bell.as_fd()],
        )?;
        let _ = self.engine.open_port(port);
        fdpass::set_nonblocking(&conn)?;
        tracing::info!(port, pid, uid, "port opened");
        self.owners.opened(port, uid);
        *self.per_uid.entry(uid).or_default() += 1;
        *self.per_pid.entry(pid).or_default() += 1;
        self.ports.insert(
            port,
            PortConn {
                port,
                uid,
                pid,
                conn,
                region,
                app_bell,
                backlog: VecDeque::new(),
            },
        );
        Ok(())
    }
}
