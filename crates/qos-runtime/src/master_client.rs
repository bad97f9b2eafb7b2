//! The HTTP client side of protocol v1 (`docs/protocol.md`): what an agent sends to
//! the master, plus the event-stream reader. Every request carries the version header
//! and the bearer token; an error reply comes back as the master's [`WireError`], a
//! failure to reach the master as [`ErrorCode::Unavailable`].

use std::sync::{Arc, Mutex};
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
use crate::protocol::{
    AgentEvent, Decision, ErrorCode, FlowRequest, FlowSpec, Heartbeat, IdtEntry, Owner, Registered,
    ReleaseRequest, StatusReport, WireError, INSTANCE_HEADER, PROTOCOL_VERSION, VERSION_HEADER,
};

/// How long dialling the master may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Idle connections kept for reuse.
const MAX_IDLE: usize = 1024;

/// An idle connection older than this is not reused: the master closes agent
/// connections idle for 60 s, and a request sent just as it does would fail.
const POOL_IDLE: Duration = Duration::from_secs(30);

type Sender = SendRequest<Full<Bytes>>;

/// Kept-alive HTTP/1.1 connections to the master, speaking for one node. Clones share
/// the connections. Each request takes an idle connection (or dials one) and puts it
/// back after the whole reply is read: one request in flight per connection, no
/// pipelining, as the protocol document says.
#[derive(Clone)]
pub struct MasterClient {
    shared: Arc<Shared>,
    node: String,
    instance: Option<HeaderValue>,
}

struct Shared {
    /// `host:port` of the master.
    authority: String,
    /// For `https://`: the TLS client and the name the master's certificate must carry.
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    /// The base URL is `https://`.
    https: bool,
    host: HeaderValue,
    bearer: HeaderValue,
    version: HeaderValue,
    idle: Mutex<Vec<(Sender, std::time::Instant)>>,
}

impl std::fmt::Debug for MasterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterClient")
            .field("master", &self.shared.authority)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

fn unavailable(e: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::Unavailable, format!("manager unreachable: {e}"))
}

fn bad_address(base: &str, why: &str) -> WireError {
    WireError::new(
        ErrorCode::BadRequest,
        format!("manager address `{base}`: {why} (expected http://HOST:PORT)"),
    )
}

impl MasterClient {
    /// A client for the master at `base` ("http://127.0.0.1:7400", or "https://..."
    /// followed by [`MasterClient::with_tls`]) acting for `node`.
    pub fn new(base: &str, node: &str, secret: &Secret) -> Result<Self, WireError> {
        let (https, rest) = match (base.strip_prefix("https://"), base.strip_prefix("http://")) {
            (Some(r), _) => (true, r),
            (None, Some(r)) => (false, r),
            (None, None) => {
                return Err(bad_address(base, "the scheme must be http:// or https://"))
            }
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(bad_address(base, "no path may follow the host and port"));
        }
        let header = |v: &str| {
            HeaderValue::from_str(v).map_err(|_| bad_address(base, "not a valid header value"))
        };
        Ok(MasterClient {
            shared: Arc::new(Shared {
                authority: authority.to_string(),
                tls: None,
                https,
                host: header(authority)?,
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
    /// mutual TLS) to an `https://` master. Call before the first request.
    pub fn with_tls(&self, config: Arc<rustls::ClientConfig>) -> Result<Self, WireError> {
        let base = format!("https://{}", self.shared.authority);
        if !self.shared.https {
            return Err(bad_address(
                &format!("http://{}", self.shared.authority),
                "TLS settings need an https:// address",
            ));
        }
        // The host part: a name, an IPv4 address, or a bracketed IPv6 address.
        let host = match self.shared.authority.rsplit_once(':') {
            Some((h, port)) if port.parse::<u16>().is_ok() => h,
            _ => self.shared.authority.as_str(),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| bad_address(&base, "the host is neither a DNS name nor an IP address"))?;
        let shared = Shared {
            authority: self.shared.authority.clone(),
            tls: Some((tokio_rustls::TlsConnector::from(config), name)),
            https: true,
            host: self.shared.host.clone(),
            bearer: self.shared.bearer.clone(),
            version: self.shared.version.clone(),
            idle: Mutex::new(Vec::new()),
        };
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

    /// A new connection to the master; its driver runs as a task of its own.
    async fn dial(&self) -> Result<Sender, WireError> {
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect(&self.shared.authority),
        )
        .await
        .map_err(|_| unavailable(format!("connecting to {} timed out", self.shared.authority)))?
        .map_err(|e| unavailable(format!("{}: {e}", self.shared.authority)))?;
        // Requests are single small writes: do not let Nagle hold one back.
        let _ = tcp.set_nodelay(true);
        match (&self.shared.tls, self.shared.https) {
            (Some((connector, name)), _) => {
                let tls =
                    tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name.clone(), tcp))
                        .await
                        .map_err(|_| {
                            unavailable(format!(
                                "TLS handshake with {} timed out",
                                self.shared.authority
                            ))
                        })?
                        .map_err(|e| {
                            unavailable(format!("TLS with {}: {e}", self.shared.authority))
                        })?;
                handshake(tls).await
            }
            (None, true) => Err(WireError::new(
                ErrorCode::BadRequest,
                format!(
                    "https://{} needs the cluster's CA certificate (agent --tls-ca)",
                    self.shared.authority
                ),
            )),
            (None, false) => handshake(tcp).await,
        }
    }

    /// An idle connection that is still open, if any.
    fn reuse(&self) -> Option<Sender> {
        let mut idle = self.shared.idle.lock().expect("pool lock");
        // A stack: put back at the end, so oldest first; those too old go.
        let stale = idle.partition_point(|(_, since)| since.elapsed() >= POOL_IDLE);
        idle.drain(..stale);
        while let Some((s, _)) = idle.pop() {
            if !s.is_closed() {
                return Some(s);
            }
        }
        None
    }

    fn put_back(&self, s: Sender) {
        let mut idle = self.shared.idle.lock().expect("pool lock");
        if idle.len() < MAX_IDLE {
            idle.push((s, std::time::Instant::now()));
        }
    }

    fn build(&self, method: &Method, path: &str, body: &Bytes) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body.clone()));
        *req.method_mut() = method.clone();
        *req.uri_mut() = format!("/v1{path}").parse().unwrap_or_default();
        let h = req.headers_mut();
        h.insert(HOST, self.shared.host.clone());
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

    /// Sends one request and reads the whole reply. A kept-alive connection the master
    /// closed in the meantime (a restart) is detected before the request leaves, and
    /// the request goes on a fresh connection instead.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), WireError> {
        let mut pooled = self.reuse();
        loop {
            let reused = pooled.is_some();
            let mut sender = match pooled.take() {
                Some(s) => s,
                None => self.dial().await?,
            };
            if sender.ready().await.is_err() {
                if reused {
                    pooled = self.reuse();
                    continue;
                }
                return Err(unavailable("the connection closed before the request"));
            }
            let resp = match sender.send_request(self.build(&method, path, &body)).await {
                Ok(r) => r,
                // Not sent at all: safe to send again on a fresh connection.
                Err(e) if reused && e.is_canceled() => {
                    pooled = self.reuse();
                    continue;
                }
                Err(e) => return Err(unavailable(e)),
            };
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(unavailable)?
                .to_bytes();
            self.put_back(sender);
            return Ok((status, bytes));
        }
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<T, WireError> {
        let (status, body) = self.call(method, path, body).await?;
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
        let body = serde_json::to_vec(body).map_err(|e| {
            WireError::new(ErrorCode::Internal, format!("cannot encode a request: {e}"))
        })?;
        self.send(Method::POST, path, Bytes::from(body)).await
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
    pub async fn flows(&self) -> Result<Vec<IdtEntry>, WireError> {
        #[derive(serde::Deserialize)]
        struct All {
            flows: Vec<IdtEntry>,
        }
        let a: All = self.send(Method::GET, "/flows", Bytes::new()).await?;
        Ok(a.flows)
    }

    /// Opens `GET /v1/agents/{node}/events` on a connection of its own and returns the
    /// events as they arrive; the stream ends (`None`) when the connection drops.
    pub async fn events(&self) -> Result<EventStream, WireError> {
        let mut sender = self.dial().await?;
        let path = format!("/agents/{}/events", self.node);
        let resp = sender
            .send_request(self.build(&Method::GET, &path, &Bytes::new()))
            .await
            .map_err(unavailable)?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            return Err(reply_error(status, &body));
        }
        Ok(EventStream {
            body: resp.into_body(),
            buf: Vec::new(),
        })
    }
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

/// A server-sent-events reader yielding [`AgentEvent`]s.
pub struct EventStream {
    body: hyper::body::Incoming,
    buf: Vec<u8>,
}

/// Silence on the event stream after which it counts as broken.
const STREAM_SILENCE: Duration = Duration::from_secs(45);

/// Largest event accepted from the master (a snapshot of many flows).
const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;

impl EventStream {
    /// The next event; `None` when the stream ends or breaks.
    pub async fn next(&mut self) -> Option<AgentEvent> {
        loop {
            if let Some(end) = find_blank_line(&self.buf) {
                let block: Vec<u8> = self.buf.drain(..end.1).collect();
                let text = String::from_utf8_lossy(&block[..end.0]);
                let mut data = String::new();
                for line in text.lines() {
                    if let Some(d) = line.strip_prefix("data:") {
                        if !data.is_empty() {
                            data.push('\n');
                        }
                        data.push_str(d.strip_prefix(' ').unwrap_or(d));
                    }
                }
                if data.is_empty() {
                    continue; // keep-alive comment
                }
                match serde_json::from_str(&data) {
                    Ok(ev) => return Some(ev),
                    Err(e) => {
                        tracing::warn!(error = %e, "undecodable event from the manager");
                        continue;
                    }
                }
            }
            if self.buf.len() > MAX_EVENT_BYTES {
                return None;
            }
            // The master sends a keep-alive every 15 s: longer silence is a dead link.
            match tokio::time::timeout(STREAM_SILENCE, self.body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Some(chunk) = frame.data_ref() {
                        self.buf.extend_from_slice(chunk);
                    }
                }
                _ => return None,
            }
        }
    }
}

/// (end of block, end of separator) of the first blank line in `b`.
fn find_blank_line(b: &[u8]) -> Option<(usize, usize)> {
    let n = b.windows(2).position(|w| w == b"\n\n")?;
    Some((n, n + 2))
}
