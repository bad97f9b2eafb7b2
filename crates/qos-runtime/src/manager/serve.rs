//! The master's connection layer: accepts TCP (or TLS)
//! connections and serves HTTP/1.1 on them with limits, so that idle or slow
//! connections — 20,000 of them needed no secret — cannot lock everyone out.
//!
//! - A connection starts *unauthenticated*. It must complete a request carrying the
//!   cluster's secret within [`ConnLimits::first_request`], or it is closed: this
//!   bounds slowloris (headers trickled byte by byte) and idle connections alike.
//! - At most [`ConnLimits::max_unauthenticated`] connections wait to authenticate.
//!   When one more arrives, the *oldest* waiting one is closed to make room. A flood
//!   of idle connections therefore only ever holds that many descriptors, and a new
//!   connection from an agent — which sends its request at once — always gets in.
//! - A connection whose request passes authentication (see `http::guard`) becomes an
//!   *agent* connection: never evicted, closed only after
//!   [`ConnLimits::idle_timeout`] without a request (a stream of pushed events is
//!   not idle). Registered agents are thus served whatever the flood does.
//! - At [`ConnLimits::max_connections`] in all, a new connection is answered
//!   `503 unavailable` in the protocol's JSON error form and closed.
//! - Every request, on any connection, must have arrived whole — body included — in
//!   time ([`RequestDeadline`]): the first within [`ConnLimits::first_request`] of the
//!   connection's accept (so a head parsed late, on a busy master, does not extend it),
//!   each later one within as long of its head. An authenticated client trickling its
//!   body is answered `408` and closed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::metrics::Metrics;
use crate::protocol::{ErrorCode, WireError};
use crate::shutdown::Stop;

/// Descriptors kept back from the connection cap for the database, logs and the rest.
const RESERVED_FDS: u64 = 128;

/// Limits on the master's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections of every kind; beyond it new ones get `503`.
    pub max_connections: usize,
    /// Connections not yet authenticated; beyond it the oldest is closed.
    pub max_unauthenticated: usize,
    /// Time a new connection has to complete an authenticated request.
    pub first_request: Duration,
    /// Time an agent connection may sit idle between requests.
    pub idle_timeout: Duration,
}

impl ConnLimits {
    /// Limits for a process allowed `fds` open descriptors: all but 128 for
    /// connections (at most 65,536), a quarter of them (at most 1,024) for
    /// connections waiting to authenticate, 10 s to authenticate, 60 s idle.
    pub fn for_descriptors(fds: u64) -> Self {
        let max = fds.saturating_sub(RESERVED_FDS).clamp(16, 65_536) as usize;
        ConnLimits {
            max_connections: max,
            max_unauthenticated: (max / 4).clamp(4, 1024),
            first_request: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl Default for ConnLimits {
    /// [`ConnLimits::for_descriptors`] of this process's descriptor limit, after
    /// raising its soft limit to the hard one ([`raise_fd_limit`]).
    fn default() -> Self {
        ConnLimits::for_descriptors(raise_fd_limit())
    }
}

/// Raises this process's soft limit on open descriptors to its hard limit and
/// returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the one struct they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// When the request being served must have been read whole (its body included): set
/// by the connection layer, `ConnLimits::first_request` after the connection was
/// accepted for its first request and after the head for later ones, whether the
/// connection is authenticated or not; read by the body extractor
/// (`http::Body`), which answers `408` and closes the connection past it.
#[derive(Debug, Clone, Copy)]
pub struct RequestDeadline(pub tokio::time::Instant);

const PENDING: u8 = 0;
const AGENT: u8 = 1;
const GONE: u8 = 2;

/// One connection's place in the books of [`Connections`]; request handlers find it
/// in the request's extensions and [`promote`](ConnTicket::promote) it once the
/// request is authenticated.
pub struct ConnTicket {
    id: u64,
    state: AtomicU8,
    conns: Arc<Connections>,
    /// Rung to close the connection once its last reply is out.
    close: tokio::sync::Notify,
}

impl ConnTicket {
    /// The connection carried an authenticated request: it is an agent connection
    /// from now on, never evicted. `false` if it was evicted just before.
    pub fn promote(&self) -> bool {
        if self.state.load(Ordering::Acquire) != PENDING {
            return self.state.load(Ordering::Acquire) == AGENT;
        }
        // State changes happen under the lock, so eviction and promotion cannot cross.
        let mut inner = self.conns.inner.lock().expect("connections lock");
        if inner.pending.remove(&self.id).is_some() {
            inner.agents += 1;
            self.state.store(AGENT, Ordering::Release);
            true
        } else {
            false
        }
    }

    /// Closes the connection after the reply being written (a request past its
    /// deadline: the rest of its body is not waited for).
    pub fn close_after_reply(&self) {
        self.close.notify_one();
    }

    fn is_pending(&self) -> bool {
        self.state.load(Ordering::Acquire) == PENDING
    }
}

impl Drop for ConnTicket {
    fn drop(&mut self) {
        let mut inner = self.conns.inner.lock().expect("connections lock");
        match self.state.swap(GONE, Ordering::AcqRel) {
            PENDING => {
                inner.pending.remove(&self.id);
            }
            AGENT => inner.agents -= 1,
            _ => {}
        }
    }
}

#[derive(Default)]
struct Inner {
    /// Unauthenticated connections by arrival (oldest first) and how to close each.
    pending: BTreeMap<u64, oneshot::Sender<()>>,
    agents: usize,
    next: u64,
}

/// The master's open connections, counted against [`ConnLimits`].
pub struct Connections {
    inner: Mutex<Inner>,
    limits: ConnLimits,
    metrics: Arc<Metrics>,
}

/// How many connections of each kind are open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnCounts {
    /// Waiting to authenticate.
    pub unauthenticated: usize,
    /// Authenticated.
    pub agents: usize,
}

impl Connections {
    /// No connections yet.
    pub fn new(limits: ConnLimits, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Connections {
            inner: Mutex::new(Inner::default()),
            limits,
            metrics,
        })
    }

    /// The counts now.
    pub fn counts(&self) -> ConnCounts {
        let inner = self.inner.lock().expect("connections lock");
        ConnCounts {
            unauthenticated: inner.pending.len(),
            agents: inner.agents,
        }
    }

    /// Closes the oldest unauthenticated connection, if any.
    fn evict_oldest(inner: &mut Inner, metrics: &Metrics) -> bool {
        match inner.pending.pop_first() {
            Some((_, close)) => {
                let _ = close.send(());
                metrics.evictions.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Books a new connection, evicting the oldest waiting one if too many wait;
    /// `None` at the connection cap.
    fn admit(self: &Arc<Self>) -> Option<(Arc<ConnTicket>, oneshot::Receiver<()>)> {
        let mut inner = self.inner.lock().expect("connections lock");
        if inner.pending.len() >= self.limits.max_unauthenticated {
            Connections::evict_oldest(&mut inner, &self.metrics);
        }
        if inner.pending.len() + inner.agents >= self.limits.max_connections {
            return None;
        }
        let id = inner.next;
        inner.next += 1;
        let (tx, rx) = oneshot::channel();
        inner.pending.insert(id, tx);
        drop(inner);
        Some((
            Arc::new(ConnTicket {
                id,
                state: AtomicU8::new(PENDING),
                conns: self.clone(),
                close: tokio::sync::Notify::new(),
            }),
            rx,
        ))
    }
}

/// What the accept loop needs.
pub struct Server {
    /// The listening socket.
    pub listener: TcpListener,
    /// TLS, when the master serves `https://`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The protocol's router.
    pub app: Router,
    /// The connection books.
    pub conns: Arc<Connections>,
    /// Becomes `true` to stop.
    pub stop: Stop,
}

/// Accepts and serves connections until `stop`.
pub async fn run(mut s: Server) {
    let tls = s.tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let accepted = tokio::select! {
            a = s.listener.accept() => a,
            _ = s.stop.wait() => break,
        };
        let accepted_at = tokio::time::Instant::now();
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors (or the like): make room, then pause, not spin.
                tracing::warn!(error = %e, "accept failed");
                {
                    let mut inner = s.conns.inner.lock().expect("connections lock");
                    Connections::evict_oldest(&mut inner, &s.conns.metrics);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // Replies and pushed events are small writes: without TCP_NODELAY, Nagle's
        // algorithm holds one behind the peer's delayed acknowledgement (~40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let Some((ticket, evicted)) = s.conns.admit() else {
            s.conns.metrics.refusals.fetch_add(1, Ordering::Relaxed);
            if tls.is_none() {
                tokio::spawn(refuse(tcp, s.conns.limits.max_connections));
            }
            continue;
        };
        let conn = Conn {
            accepted_at,
            app: s.app.clone(),
            ticket,
            evicted,
            stop: s.stop.clone(),
            limits: s.conns.limits,
            metrics: s.conns.metrics.clone(),
        };
        match &tls {
            None => {
                tokio::spawn(conn.serve(tcp));
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let limit = crate::tls::HANDSHAKE_TIMEOUT.min(conn.limits.first_request);
                    match tokio::time::timeout(limit, acceptor.accept(tcp)).await {
                        Ok(Ok(io)) => conn.serve(io).await,
                        Ok(Err(e)) => tracing::warn!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::warn!("TLS handshake timed out"),
                    }
                });
            }
        }
    }
}

/// The answer at the connection cap: `503` with the protocol's JSON error, after
/// reading what the client sent (closing with unread data would reset the
/// connection and lose the answer).
async fn refuse(mut tcp: TcpStream, max: usize) {
    let body = serde_json::to_string(&WireError::new(
        ErrorCode::Unavailable,
        format!("the manager holds its maximum of {max} connections; try again later"),
    ))
    .unwrap_or_default();
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_millis(200), tcp.read(&mut buf)).await;
    let _ = tcp.write_all(reply.as_bytes()).await;
    let _ = tcp.shutdown().await;
}

/// One connection being served.
struct Conn {
    /// When the connection was accepted: its first request's deadline counts from here.
    accepted_at: tokio::time::Instant,
    app: Router,
    ticket: Arc<ConnTicket>,
    evicted: oneshot::Receiver<()>,
    stop: Stop,
    limits: ConnLimits,
    metrics: Arc<Metrics>,
}

impl Conn {
    async fn serve<I>(self, io: I)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        self.serve_until_closed(io).await;
        // Its buffers are freed: let the reaper hand them back to the system.
        super::hub::note_freed();
    }

    async fn serve_until_closed<I>(mut self, io: I)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (app, ticket) = (self.app.clone(), self.ticket.clone());
        let whole_request = self.limits.first_request;
        let first_deadline = self.accepted_at + whole_request;
        let served = std::sync::atomic::AtomicBool::new(false);
        let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ticket.clone());
            let deadline = if served.swap(true, Ordering::Relaxed) {
                tokio::time::Instant::now() + whole_request
            } else {
                first_deadline
            };
            req.extensions_mut().insert(RequestDeadline(deadline));
            tower::ServiceExt::oneshot(app.clone(), req)
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.idle_timeout)
            .keep_alive(true)
            .serve_connection(TokioIo::new(io), svc);
        tokio::pin!(conn);
        let first = tokio::time::sleep_until(first_deadline);
        tokio::pin!(first);
        let (mut waiting, mut armed) = (true, true);
        loop {
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended");
                    }
                    return;
                }
                r = &mut self.evicted, if armed => {
                    armed = false;
                    // An error means the connection was promoted (its sender dropped).
                    if r.is_ok() {
                        tracing::debug!("unauthenticated connection closed to make room");
                        return;
                    }
                }
                _ = &mut first, if waiting => {
                    waiting = false;
                    if self.ticket.is_pending() {
                        self.metrics.timeouts.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!("connection closed: no authenticated request in time");
                        return;
                    }
                }
                _ = self.ticket.close.notified() => {
                    // Time to write the reply, not to read what the client still sends.
                    let _ = tokio::time::timeout(Duration::from_millis(200), conn.as_mut()).await;
                    return;
                }
                _ = self.stop.wait() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
                    return;
                }
            }
        }
    }
}
