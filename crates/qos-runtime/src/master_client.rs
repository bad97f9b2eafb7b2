//! The HTTP client side of protocol v1 (`docs/protocol.md`): what an agent sends to
//! the master, plus the event-stream reader ([`events`]). Every request carries the
//! version header and the bearer token; an error reply comes back as the master's
//! [`WireError`], a failure to reach the master as [`ErrorCode::Unavailable`].
//!
//! **Failover**: the client may be given every manager replica
//! (`http://a:7400,http://b:7400,http://c:7400`). It sends to the one it believes
//! leads; when that one cannot be reached, or answers as a follower (`503` with the
//! `clusterqos-leader` header naming the leader, added to the list if it was not in
//! it), the request goes to the next one — but only when it was certainly not
//! handled: a request whose connection broke after it was sent is answered
//! `unavailable` rather than sent twice. When no replica leads (the failover window)
//! the caller gets `unavailable`, which is retryable.

mod events;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::auth::Secret;
use crate::protocol::job::{JobDecision, JobInfo, JobOwnerRequest, JobRequest};
use crate::protocol::{
    Decision, ErrorCode, FlowRequest, FlowSpec, Heartbeat, IdtEntry, Owner, Registered,
    ReleaseRequest, StatusReport, WireError, INSTANCE_HEADER, LEADER_HEADER, PROTOCOL_VERSION,
    VERSION_HEADER,
};
pub use events::EventStream;

/// How long dialling the master may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Idle connections kept for reuse.
const MAX_IDLE: usize = 1024;

/// An idle connection older than this is not reused: the master closes agent
/// connections idle for 60 s, and a request sent just as it does would fail.
const POOL_IDLE: Duration = Duration::from_secs(30);

/// Longest wait for a reply once a request is sent. A replica that does not answer
/// in time (paused, overloaded, cut off) may or may not have handled the request: the
/// caller gets `unavailable`, and later requests go to the next replica.
const REPLY_TIMEOUT: Duration = Duration::from_secs(3);

/// Most manager addresses a client keeps (those given plus leaders it was sent to).
const MAX_TARGETS: usize = 16;

type Sender = SendRequest<Full<Bytes>>;

/// One manager replica.
struct Target {
    /// `host:port`.
    authority: String,
    host: HeaderValue,
    /// For `https://`: the name the replica's certificate must carry.
    name: Option<ServerName<'static>>,
}

/// Kept-alive HTTP/1.1 connections to the master (to whichever replica leads),
/// speaking for one node. Clones share the connections. Each request takes an idle
/// connection (or dials one) and puts it back after the whole reply is read: one
/// request in flight per connection, no pipelining, as the protocol document says.
#[derive(Clone)]
pub struct MasterClient {
    shared: Arc<Shared>,
    node: String,
    instance: Option<HeaderValue>,
}

struct Shared {
    /// The replicas, in the order given, then leaders learnt from redirects.
    targets: RwLock<Vec<Arc<Target>>>,
    /// The index of the replica believed to lead.
    current: AtomicUsize,
    /// Tells event streams when `current` moves.
    moved: tokio::sync::watch::Sender<usize>,
    /// For `https://`: the TLS client.
    tls: Option<tokio_rustls::TlsConnector>,
    /// The addresses are `https://`.
    https: bool,
    bearer: HeaderValue,
    version: HeaderValue,
    /// Idle connections: (target index, connection, idle since).
    idle: Mutex<Vec<(usize, Sender, std::time::Instant)>>,
}

impl std::fmt::Debug for MasterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let targets: Vec<String> = self
            .shared
            .targets
            .read()
            .expect("targets lock")
            .iter()
            .map(|t| t.authority.clone())
            .collect();
        f.debug_struct("MasterClient")
            .field("master", &targets)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// How long a job reservation's reply may take: its wait in line, then as long as any
/// other reply (a 1,024-node job's demand is summed before the decision).
fn job_reply_timeout(req: &JobRequest) -> Duration {
    Duration::from_secs(u64::from(req.wait_s.unwrap_or(0))) + 2 * REPLY_TIMEOUT
}

fn unavailable(e: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::Unavailable, format!("manager unreachable: {e}"))
}

fn bad_address(base: &str, why: &str) -> WireError {
    WireError::new(
        ErrorCode::BadRequest,
        format!(
            "manager address `{base}`: {why} (expected http://HOST:PORT[,http://HOST:PORT...])"
        ),
    )
}

/// (https, `host:port`) of one base URL.
fn split_url(base: &str) -> Result<(bool, String), WireError> {
    let (https, rest) = match (base.strip_prefix("https://"), base.strip_prefix("http://")) {
        (Some(r), _) => (true, r),
        (None, Some(r)) => (false, r),
        (None, None) => return Err(bad_address(base, "the scheme must be http:// or https://")),
    };
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') {
        return Err(bad_address(base, "no path may follow the host and port"));
    }
    Ok((https, authority.to_string()))
}

fn target(base: &str, authority: &str, tls: bool) -> Result<Target, WireError> {
    let host = HeaderValue::from_str(authority)
        .map_err(|_| bad_address(base, "not a valid header value"))?;
    let name =
        if tls {
            // The host part: a name, an IPv4 address, or a bracketed IPv6 address.
            let h = match authority.rsplit_once(':') {
                Some((h, port)) if port.parse::<u16>().is_ok() => h,
                _ => authority,
            };
            let h = h.trim_start_matches('[').trim_end_matches(']');
            Some(ServerName::try_from(h.to_string()).map_err(|_| {
                bad_address(base, "the host is neither a DNS name nor an IP address")
            })?)
        } else {
            None
        };
    Ok(Target {
        authority: authority.to_string(),
        host,
        name,
    })
}

/// What one attempt on one replica gave.
enum Attempt {
    /// Nothing reached the replica: safe to send elsewhere.
    NotSent(WireError),
    /// The request left, and no reply came: it may have been handled.
    Lost(WireError),
    /// A reply.
    Reply(StatusCode, Option<String>, Bytes),
}

impl MasterClient {
    /// A client for the master at `base` — one URL ("http://127.0.0.1:7400", or
    /// "https://..." followed by [`MasterClient::with_tls`]), or the URLs of every
    /// replica separated by commas — acting for `node`.
    pub fn new(base: &str, node: &str, secret: &Secret) -> Result<Self, WireError> {
        let mut https = None;
        let mut targets = Vec::new();
        for url in base.split(',').map(str::trim) {
            let (s, authority) = split_url(url)?;
            if https.is_some_and(|h| h != s) {
                return Err(bad_address(base, "every replica must use the same scheme"));
            }
            https = Some(s);
            targets.push(Arc::new(target(url, &authority, false)?));
        }
        if targets.len() > MAX_TARGETS {
            return Err(bad_address(base, "at most 16 replicas"));
        }
        Ok(MasterClient {
            shared: Arc::new(Shared {
                targets: RwLock::new(targets),
                current: AtomicUsize::new(0),
                moved: tokio::sync::watch::channel(0).0,
                tls: None,
                https: https.unwrap_or(false),
                bearer: HeaderValue::from_str(&secret.bearer()).map_err(|_| {
                    WireError::new(
                        ErrorCode::BadRequest,
                        "the secret is not a valid header value",
                    )
                })?,
                version: HeaderValue::from(PROTOCOL_VERSION),
                idle: Mutex::new(Vec::new()),
            }),
            node: node.to_string(),
            instance: None,
        })
    }

    /// Speaks TLS with `config` (the cluster's CA, and the agent's certificate for
    /// mutual TLS) to `https://` replicas. Call before the first request.
    pub fn with_tls(&self, config: Arc<rustls::ClientConfig>) -> Result<Self, WireError> {
        let old = self.shared.targets.read().expect("targets lock");
        if !self.shared.https {
            let first = old.first().map_or(String::new(), |t| t.authority.clone());
            return Err(bad_address(
                &format!("http://{first}"),
                "TLS settings need an https:// address",
            ));
        }
        let mut targets = Vec::new();
        for t in old.iter() {
            let base = format!("https://{}", t.authority);
            targets.push(Arc::new(target(&base, &t.authority, true)?));
        }
        let shared = Shared {
            targets: RwLock::new(targets),
            current: AtomicUsize::new(0),
            moved: tokio::sync::watch::channel(0).0,
            tls: Some(tokio_rustls::TlsConnector::from(config)),
            https: true,
            bearer: self.shared.bearer.clone(),
            version: self.shared.version.clone(),
            idle: Mutex::new(Vec::new()),
        };
        drop(old);
        Ok(MasterClient {
            shared: Arc::new(shared),
            ..self.clone()
        })
    }

    /// The same connections, naming the calling agent process (`INSTANCE_HEADER`):
    /// while this instance is live, the master refuses another agent for the node.
    pub fn with_instance(&self, instance: u64) -> Self {
        MasterClient {
            // Hex digits always make a valid header value.
            instance: HeaderValue::from_str(&format!("{instance:016x}")).ok(),
            ..self.clone()
        }
    }

    /// The same connections speaking for another node (for tools that act for many
    /// nodes, such as the benchmark).
    pub fn with_node(&self, node: &str) -> Self {
        MasterClient {
            shared: self.shared.clone(),
            node: node.to_string(),
            instance: self.instance.clone(),
        }
    }

    /// The node this client speaks for.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The `host:port` of the replica this client believes leads.
    pub fn current(&self) -> String {
        let i = self.shared.current.load(Ordering::Relaxed);
        self.target(i).authority.clone()
    }

    fn target(&self, i: usize) -> Arc<Target> {
        let t = self.shared.targets.read().expect("targets lock");
        t[i % t.len()].clone()
    }

    fn count(&self) -> usize {
        self.shared.targets.read().expect("targets lock").len()
    }

    /// Believe replica `from + 1` leads, unless another request moved on already.
    fn next_after(&self, from: usize) {
        let n = self.count();
        let to = (from + 1) % n;
        if self
            .shared
            .current
            .compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.shared.moved.send_replace(to);
        }
    }

    /// Believe the replica at `url` (from a follower's redirect) leads, adding it to
    /// the list if it is new; false if the URL is unusable.
    fn follow(&self, url: &str) -> bool {
        let Ok((https, authority)) = split_url(url) else {
            return false;
        };
        if https != self.shared.https {
            return false;
        }
        let mut targets = self.shared.targets.write().expect("targets lock");
        let i = match targets.iter().position(|t| t.authority == authority) {
            Some(i) => i,
            None if targets.len() < MAX_TARGETS => {
                let Ok(t) = target(url, &authority, https) else {
                    return false;
                };
                targets.push(Arc::new(t));
                targets.len() - 1
            }
            None => return false,
        };
        if self.shared.current.swap(i, Ordering::Relaxed) != i {
            self.shared.moved.send_replace(i);
        }
        true
    }

    /// A new connection to replica `i`; its driver runs as a task of its own.
    async fn dial(&self, i: usize) -> Result<Sender, WireError> {
        let t = self.target(i);
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect(&t.authority),
        )
        .await
        .map_err(|_| unavailable(format!("connecting to {} timed out", t.authority)))?
        .map_err(|e| unavailable(format!("{}: {e}", t.authority)))?;
        // Requests are single small writes: do not let Nagle hold one back.
        let _ = tcp.set_nodelay(true);
        match (&self.shared.tls, &t.name) {
            (Some(connector), Some(name)) => {
                let tls =
                    tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name.clone(), tcp))
                        .await
                        .map_err(|_| {
                            unavailable(format!("TLS handshake with {} timed out", t.authority))
                        })?
                        .map_err(|e| unavailable(format!("TLS with {}: {e}", t.authority)))?;
                handshake(tls).await
            }
            _ if self.shared.https => Err(WireError::new(
                ErrorCode::BadRequest,
                format!(
                    "https://{} needs the cluster's CA certificate (agent --tls-ca)",
                    t.authority
                ),
            )),
            _ => handshake(tcp).await,
        }
    }

    /// An idle connection to replica `i` that is still open, if any.
    fn reuse(&self, i: usize) -> Option<Sender> {
        let mut idle = self.shared.idle.lock().expect("pool lock");
        // A stack: put back at the end, so oldest first; those too old go.
        let stale = idle.partition_point(|(_, _, since)| since.elapsed() >= POOL_IDLE);
        idle.drain(..stale);
        while let Some(pos) = idle.iter().rposition(|(t, _, _)| *t == i) {
            let (_, s, _) = idle.remove(pos);
            if !s.is_closed() {
                return Some(s);
            }
        }
        None
    }

    fn put_back(&self, i: usize, s: Sender) {
        let mut idle = self.shared.idle.lock().expect("pool lock");
        if idle.len() < MAX_IDLE {
            idle.push((i, s, std::time::Instant::now()));
        }
    }

    fn build(&self, i: usize, method: &Method, path: &str, body: &Bytes) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body.clone()));
        *req.method_mut() = method.clone();
        *req.uri_mut() = format!("/v1{path}").parse().unwrap_or_default();
        let h = req.headers_mut();
        h.insert(HOST, self.target(i).host.clone());
        h.insert(VERSION_HEADER, self.shared.version.clone());
        h.insert(AUTHORIZATION, self.shared.bearer.clone());
        if let Some(i) = &self.instance {
            h.insert(INSTANCE_HEADER, i.clone());
        }
        if !body.is_empty() {
            h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        req
    }

    /// Sends one request to replica `i` and reads the whole reply. A kept-alive
    /// connection the replica closed in the meantime (a restart) is detected before
    /// the request leaves, and the request goes on a fresh connection instead.
    async fn attempt(
        &self,
        i: usize,
        method: &Method,
        path: &str,
        body: &Bytes,
        reply_timeout: Duration,
    ) -> Attempt {
        let mut pooled = self.reuse(i);
        loop {
            let reused = pooled.is_some();
            let mut sender = match pooled.take() {
                Some(s) => s,
                None => match self.dial(i).await {
                    Ok(s) => s,
                    Err(e) => return Attempt::NotSent(e),
                },
            };
            if sender.ready().await.is_err() {
                if reused {
                    pooled = self.reuse(i);
                    continue;
                }
                return Attempt::NotSent(unavailable("the connection closed before the request"));
            }
            let exchange = async {
                let resp = sender
                    .send_request(self.build(i, method, path, body))
                    .await?;
                let status = resp.status();
                let leader = leader_hint(status, resp.headers());
                let bytes = resp.into_body().collect().await?.to_bytes();
                Ok::<_, hyper::Error>((status, leader, bytes))
            };
            let Ok(done) = tokio::time::timeout(reply_timeout, exchange).await else {
                return Attempt::Lost(unavailable(format!(
                    "{} sent no reply within {} s; the request may or may not have been done",
                    self.target(i).authority,
                    reply_timeout.as_secs()
                )));
            };
            let (status, leader, bytes) = match done {
                Ok(r) => r,
                // Not sent at all: safe to send again on a fresh connection.
                Err(e) if e.is_canceled() => {
                    if reused {
                        pooled = self.reuse(i);
                        continue;
                    }
                    return Attempt::NotSent(unavailable(e));
                }
                Err(e) => return Attempt::Lost(unavailable(e)),
            };
            self.put_back(i, sender);
            return Attempt::Reply(status, leader, bytes);
        }
    }

    /// Sends one request to the leader, going through the replicas as described in
    /// the module documentation.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
        reply_timeout: Duration,
    ) -> Result<(StatusCode, Bytes), WireError> {
        // Each replica at most twice: once in turn, once more if a redirect names it.
        let tries = 2 * self.count() + 1;
        let mut last = None;
        for _ in 0..tries {
            let i = self.shared.current.load(Ordering::Relaxed);
            match self.attempt(i, &method, path, &body, reply_timeout).await {
                Attempt::Reply(status, None, bytes) => return Ok((status, bytes)),
                Attempt::Reply(status, Some(leader), bytes) => {
                    last = Some(reply_error(status, &bytes));
                    if !self.follow(&leader) || self.shared.current.load(Ordering::Relaxed) == i {
                        self.next_after(i);
                    }
                }
                Attempt::Lost(e) => {
                    // Not sent again (it may have been done); the next request tries
                    // the next replica.
                    self.next_after(i);
                    return Err(e);
                }
                Attempt::NotSent(e) if e.code == ErrorCode::BadRequest => return Err(e),
                Attempt::NotSent(e) => {
                    last = Some(e);
                    self.next_after(i);
                }
            }
        }
        Err(last.unwrap_or_else(|| unavailable("no manager replica answered")))
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<T, WireError> {
        self.send_within(method, path, body, REPLY_TIMEOUT).await
    }

    /// [`Self::send`], waiting up to `reply_timeout` for the reply.
    async fn send_within<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
        reply_timeout: Duration,
    ) -> Result<T, WireError> {
        let (status, body) = self.call(method, path, body, reply_timeout).await?;
        if status.is_success() {
            serde_json::from_slice(&body).map_err(|e| {
                WireError::new(
                    ErrorCode::Internal,
                    format!("bad reply from the manager: {e}"),
                )
            })
        } else {
            Err(reply_error(status, &body))
        }
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, WireError> {
        self.post_within(path, body, REPLY_TIMEOUT).await
    }

    async fn post_within<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        reply_timeout: Duration,
    ) -> Result<T, WireError> {
        let body = serde_json::to_vec(body).map_err(|e| {
            WireError::new(ErrorCode::Internal, format!("cannot encode a request: {e}"))
        })?;
        self.send_within(Method::POST, path, Bytes::from(body), reply_timeout)
            .await
    }

    /// `POST /v1/agents/{node}/register`.
    pub async fn register(&self) -> Result<Registered, WireError> {
        self.post(
            &format!("/agents/{}/register", self.node),
            &serde_json::json!({}),
        )
        .await
    }

    /// `POST /v1/agents/{node}/heartbeat`.
    pub async fn heartbeat(&self, live: Vec<Owner>) -> Result<(), WireError> {
        let _: serde_json::Value = self
            .post(
                &format!("/agents/{}/heartbeat", self.node),
                &Heartbeat { live },
            )
            .await?;
        Ok(())
    }

    /// `POST /v1/agents/{node}/flows`: the master's decision.
    pub async fn request(&self, req: &FlowRequest) -> Result<Decision, WireError> {
        self.post(&format!("/agents/{}/flows", self.node), req)
            .await
    }

    /// `POST /v1/agents/{node}/flows/release`.
    pub async fn release(&self, flow: FlowSpec, owner: Owner) -> Result<(), WireError> {
        let _: serde_json::Value = self
            .post(
                &format!("/agents/{}/flows/release", self.node),
                &ReleaseRequest { flow, owner },
            )
            .await?;
        Ok(())
    }

    /// `GET /v1/status`.
    pub async fn status(&self) -> Result<StatusReport, WireError> {
        self.send(Method::GET, "/status", Bytes::new()).await
    }

    /// `GET /v1/flows`.
    /// `POST /v1/jobs`: reserves a job's flows all or nothing (waits up to its
    /// `wait_s` for room).
    pub async fn reserve_job(&self, req: &JobRequest) -> Result<JobDecision, WireError> {
        self.post_within("/jobs", req, job_reply_timeout(req)).await
    }

    /// `POST /v1/agents/{node}/jobs`: a job held by a process on this agent's node.
    pub async fn reserve_job_for_process(
        &self,
        req: &JobRequest,
    ) -> Result<JobDecision, WireError> {
        self.post_within(
            &format!("/agents/{}/jobs", self.node),
            req,
            job_reply_timeout(req),
        )
        .await
    }

    /// `POST /v1/jobs/{id}/release`.
    pub async fn release_job(&self, id: &str, owner: &str) -> Result<(), WireError> {
        let _: serde_json::Value = self
            .post(
                &format!("/jobs/{id}/release"),
                &JobOwnerRequest {
                    owner: owner.to_string(),
                },
            )
            .await?;
        Ok(())
    }

    /// `POST /v1/jobs/{id}/renew`.
    pub async fn renew_job(&self, id: &str, owner: &str) -> Result<(), WireError> {
        let _: serde_json::Value = self
            .post(
                &format!("/jobs/{id}/renew"),
                &JobOwnerRequest {
                    owner: owner.to_string(),
                },
            )
            .await?;
        Ok(())
    }

    /// `GET /v1/jobs`: every job held.
    pub async fn jobs(&self) -> Result<Vec<JobInfo>, WireError> {
        #[derive(serde::Deserialize)]
        struct All {
            jobs: Vec<JobInfo>,
        }
        let a: All = self.send(Method::GET, "/jobs", Bytes::new()).await?;
        Ok(a.jobs)
    }

    pub async fn flows(&self) -> Result<Vec<IdtEntry>, WireError> {
        #[derive(serde::Deserialize)]
        struct All {
            flows: Vec<IdtEntry>,
        }
        let a: All = self.send(Method::GET, "/flows", Bytes::new()).await?;
        Ok(a.flows)
    }

    /// Opens `GET /v1/agents/{node}/events` on a connection of its own (to the
    /// leader, following redirects) and returns the events as they arrive; the stream
    /// ends (`None`) when the connection drops.
    pub async fn events(&self) -> Result<EventStream, WireError> {
        let path = format!("/agents/{}/events", self.node);
        let tries = 2 * self.count() + 1;
        let mut last = None;
        for _ in 0..tries {
            let i = self.shared.current.load(Ordering::Relaxed);
            let mut sender = match self.dial(i).await {
                Ok(s) => s,
                Err(e) if e.code == ErrorCode::BadRequest => return Err(e),
                Err(e) => {
                    last = Some(e);
                    self.next_after(i);
                    continue;
                }
            };
            // Subscribing twice is harmless: a replica that does not answer in time
            // is left for the next one.
            let sent = tokio::time::timeout(
                REPLY_TIMEOUT,
                sender.send_request(self.build(i, &Method::GET, &path, &Bytes::new())),
            )
            .await;
            let resp = match sent {
                Ok(r) => r.map_err(unavailable)?,
                Err(_) => {
                    last = Some(unavailable(format!(
                        "{} did not answer within {} s",
                        self.target(i).authority,
                        REPLY_TIMEOUT.as_secs()
                    )));
                    self.next_after(i);
                    continue;
                }
            };
            let status = resp.status();
            if status.is_success() {
                return Ok(EventStream {
                    body: resp.into_body(),
                    buf: Vec::new(),
                    from: i,
                    leader: self.shared.moved.subscribe(),
                });
            }
            let leader = leader_hint(status, resp.headers());
            let body = resp
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let e = reply_error(status, &body);
            match leader {
                Some(l) => {
                    if !self.follow(&l) || self.shared.current.load(Ordering::Relaxed) == i {
                        self.next_after(i);
                    }
                    last = Some(e);
                }
                None => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| unavailable("no manager replica answered")))
    }
}

/// The leader a follower's `503` names; `Some("")` when it knows none (the failover
/// window), so the client tries the next replica.
fn leader_hint(status: StatusCode, headers: &hyper::HeaderMap) -> Option<String> {
    if status != StatusCode::SERVICE_UNAVAILABLE {
        return None;
    }
    headers
        .get(LEADER_HEADER)
        .map(|v| v.to_str().unwrap_or_default().to_string())
}

/// HTTP/1.1 over `io`; the connection's driver runs as a task of its own.
async fn handshake<I>(io: I) -> Result<Sender, WireError>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(unavailable)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "connection to the manager ended");
        }
    });
    Ok(sender)
}

/// The master's error body, or a description of an unexpected reply.
fn reply_error(status: StatusCode, body: &[u8]) -> WireError {
    serde_json::from_slice::<WireError>(body).unwrap_or_else(|_| {
        WireError::new(
            ErrorCode::Internal,
            format!(
                "manager replied {status}: {}",
                String::from_utf8_lossy(body)
            ),
        )
    })
}
