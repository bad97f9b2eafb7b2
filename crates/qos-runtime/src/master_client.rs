//! The HTTP client side of protocol v1 (`docs/protocol.md`): what an agent sends to
//! the master, plus the event-stream reader. Every request carries the version header
//! and the bearer token; an error reply comes back as the master's [`WireError`], a
//! failure to reach the master as [`ErrorCode::Unavailable`].

use std::time::Duration;

use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::auth::Secret;
use crate::protocol::{
    AgentEvent, Decision, ErrorCode, FlowRequest, FlowSpec, Heartbeat, IdtEntry, Owner, Registered,
    ReleaseRequest, StatusReport, WireError, PROTOCOL_VERSION, VERSION_HEADER,
};

/// A connection pool to the master, speaking for one node.
#[derive(Clone, Debug)]
pub struct MasterClient {
    http: reqwest::Client,
    base: String,
    node: String,
    bearer: String,
}

fn unavailable(e: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::Unavailable, format!("manager unreachable: {e}"))
}

impl MasterClient {
    /// A client for the master at `base` ("http://127.0.0.1:7400") acting for `node`.
    pub fn new(base: &str, node: &str, secret: &Secret) -> Result<Self, WireError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1024)
            .build()
            .map_err(unavailable)?;
        Ok(MasterClient {
            http,
            base: base.trim_end_matches('/').to_string(),
            node: node.to_string(),
            bearer: secret.bearer(),
        })
    }

    /// The same connection pool speaking for another node (for tools that act for
    /// many nodes, such as the benchmark).
    pub fn with_node(&self, node: &str) -> Self {
        MasterClient {
            node: node.to_string(),
            ..self.clone()
        }
    }

    /// The node this client speaks for.
    pub fn node(&self) -> &str {
        &self.node
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v1{}", self.base, path)
    }

    async fn send<T: DeserializeOwned>(&self, rb: reqwest::RequestBuilder) -> Result<T, WireError> {
        let resp = rb
            .header(VERSION_HEADER, PROTOCOL_VERSION.to_string())
            .header(reqwest::header::AUTHORIZATION, &self.bearer)
            .send()
            .await
            .map_err(unavailable)?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(unavailable)?;
        if status.is_success() {
            serde_json::from_slice(&body).map_err(|e| {
                WireError::new(
                    ErrorCode::Internal,
                    format!("bad reply from the manager: {e}"),
                )
            })
        } else {
            Err(
                serde_json::from_slice::<WireError>(&body).unwrap_or_else(|_| {
                    WireError::new(
                        ErrorCode::Internal,
                        format!(
                            "manager replied {status}: {}",
                            String::from_utf8_lossy(&body)
                        ),
                    )
                }),
            )
        }
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, WireError> {
        self.send(self.http.post(self.url(path)).json(body)).await
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
        self.send(self.http.get(self.url("/status"))).await
    }

    /// `GET /v1/flows`.
    pub async fn flows(&self) -> Result<Vec<IdtEntry>, WireError> {
        #[derive(serde::Deserialize)]
        struct All {
            flows: Vec<IdtEntry>,
        }
        let a: All = self.send(self.http.get(self.url("/flows"))).await?;
        Ok(a.flows)
    }

    /// Opens `GET /v1/agents/{node}/events` and returns the events as they arrive;
    /// the stream ends (`None`) when the connection drops.
    pub async fn events(&self) -> Result<EventStream, WireError> {
        let resp = self
            .http
            .get(self.url(&format!("/agents/{}/events", self.node)))
            .header(VERSION_HEADER, PROTOCOL_VERSION.to_string())
            .header(reqwest::header::AUTHORIZATION, &self.bearer)
            .send()
            .await
            .map_err(unavailable)?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body = resp.bytes().await.unwrap_or_default();
            return Err(
                serde_json::from_slice::<WireError>(&body).unwrap_or_else(|_| {
                    WireError::new(ErrorCode::Internal, format!("manager replied {status}"))
                }),
            );
        }
        Ok(EventStream {
            inner: Box::pin(resp.bytes_stream()),
            buf: Vec::new(),
        })
    }
}

type ByteStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>;

/// A server-sent-events reader yielding [`AgentEvent`]s.
pub struct EventStream {
    inner: ByteStream,
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
            match tokio::time::timeout(STREAM_SILENCE, self.inner.next()).await {
                Ok(Some(Ok(chunk))) => self.buf.extend_from_slice(&chunk),
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
