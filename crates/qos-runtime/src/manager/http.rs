//! The master's HTTP/JSON endpoints (protocol v1, `docs/protocol.md`): one handler per
//! operation, the version and authentication checks in front of them, and the size
//! limit on every body. Every input is parsed and validated here before it reaches the
//! books; a bad one gets an error reply and changes nothing.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request, State as AxState};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

use super::role::Term;
use super::serve::{ConnTicket, RequestDeadline};
use super::shared::Shared;
use super::state::{AdmissionRequest, BooksError, DbOp, Refusal, Verdict};
use super::store::api::Job;
use crate::metrics::Endpoint;
use crate::protocol::{
    Decision, ErrorCode, FlowRequest, Heartbeat, LeaderInfo, Registered, RejectionInfo,
    ReleaseRequest, VersionInfo, WireError, INSTANCE_HEADER, LEADER_HEADER, MAX_BODY_BYTES,
    PROTOCOL_VERSION, VERSION_HEADER,
};

/// Largest number of owners one heartbeat may list.
const MAX_LIVE: usize = 65_536;

/// An error as the client sees it: status from the code, JSON body; a follower's
/// refusal also has the `clusterqos-leader` header, naming the leader (empty when
/// none is known).
pub(super) struct ApiError(pub(super) WireError, pub(super) Option<String>);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut r = (status, Json(self.0)).into_response();
        if let Some(v) = self.1.and_then(|l| HeaderValue::from_str(&l).ok()) {
            r.headers_mut().insert(LEADER_HEADER, v);
        }
        r
    }
}

impl From<WireError> for ApiError {
    fn from(e: WireError) -> Self {
        ApiError(e, None)
    }
}

/// The protocol's code for each kind of refusal by the books.
impl From<BooksError> for WireError {
    fn from(e: BooksError) -> Self {
        WireError::new(e.code(), e.to_string())
    }
}

/// A refusal by admission control as the protocol writes it.
pub fn rejection_info(r: &Refusal) -> RejectionInfo {
    match r {
        Refusal::Resource(r) => RejectionInfo {
            criterion: r.criterion.number(),
            criterion_name: serde_json::to_value(r.criterion)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            resource: r.resource.clone(),
            reserved: r.reserved.bytes_per_sec(),
            requested: r.requested.bytes_per_sec(),
            capacity: r.capacity.bytes_per_sec(),
            message: format!("rejected: {r}"),
        },
        Refusal::AboveBmax {
            node,
            requested,
            bmax,
            message,
        } => RejectionInfo {
            criterion: 0,
            criterion_name: "bmax".into(),
            resource: format!("node {node} nic"),
            reserved: 0,
            requested: *requested,
            capacity: *bmax,
            message: message.clone(),
        },
    }
}

/// The books' verdict as the protocol's decision.
pub fn decision(v: Verdict) -> Decision {
    match v {
        Verdict::Granted(e) => Decision::Granted(e),
        Verdict::Rejected(r) => Decision::Rejected(rejection_info(&r)),
    }
}

/// The current term, or a follower's refusal naming the leader.
pub(super) fn term(s: &Shared) -> ApiResult<Arc<Term>> {
    s.role.term().ok_or_else(|| {
        s.metrics.errors.fetch_add(1, Ordering::Relaxed);
        ApiError(
            s.role.not_leader(),
            Some(s.role.leader().unwrap_or_default()),
        )
    })
}

/// The current term's books may be answered from: `t` is still this replica's term
/// and its leadership is provable now (else a follower's refusal, as [`term`]).
fn still_leads(s: &Shared, t: &Term) -> ApiResult<()> {
    if s.role.still_leads(t) {
        return Ok(());
    }
    s.metrics.errors.fetch_add(1, Ordering::Relaxed);
    Err(ApiError(
        s.role.not_leader(),
        Some(s.role.leader().unwrap_or_default()),
    ))
}

/// The reply when a decision's commit never completed (the writer stopped).
pub(super) fn not_committed() -> ApiError {
    ApiError::from(WireError::new(
        ErrorCode::Unavailable,
        "not acknowledged: this manager replica lost its leadership or its store before the \
         decision committed; retry (a retried request may find it done)",
    ))
}

pub(super) type ApiResult<T> = Result<T, ApiError>;

/// A request body, read whole within [`MAX_BODY_BYTES`]; a body over the limit or
/// that cannot be read is refused in the protocol's JSON error form (`413
/// too_large`, `400 bad_request`), not the framework's plain text, and so is a body
/// that does not say it is JSON (`415 unsupported_media_type`: a form or text body is
/// not taken for a request whatever it holds).
pub(super) struct Body(pub(super) Bytes);

/// Time to read a body when the connection layer set no [`RequestDeadline`] (a router
/// served without it, as in tests).
const DEFAULT_BODY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether a `Content-Type` value is `application/json` (parameters such as
/// `charset=utf-8` allowed, case ignored as RFC 9110 §8.3.1 says).
fn is_json(value: &HeaderValue) -> bool {
    let v = value.as_bytes();
    let essence = v.split(|&b| b == b';').next().unwrap_or_default();
    essence
        .trim_ascii()
        .eq_ignore_ascii_case(b"application/json")
}

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let deadline = req.extensions().get::<RequestDeadline>().map_or_else(
            || tokio::time::Instant::now() + DEFAULT_BODY_DEADLINE,
            |d| d.0,
        );
        let ticket = req.extensions().get::<Arc<ConnTicket>>().cloned();
        match tokio::time::timeout_at(deadline, Body::read(req, state)).await {
            Ok(r) => r.map_err(IntoResponse::into_response),
            Err(_) => {
                // The connection goes too: the rest of the body is never read.
                if let Some(t) = ticket {
                    t.close_after_reply();
                }
                let mut r = ApiError::from(WireError::new(
                    ErrorCode::Timeout,
                    "the request was not received whole in time",
                ))
                .into_response();
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                Err(r)
            }
        }
    }
}

impl Body {
    async fn read<S: Send + Sync>(req: Request, state: &S) -> Result<Body, ApiError> {
        let types = req.headers().get_all(header::CONTENT_TYPE);
        let mut types = types.iter();
        let json = matches!((types.next(), types.next()), (Some(v), None) if is_json(v));
        if !json {
            return Err(ApiError::from(WireError::new(
                ErrorCode::UnsupportedMediaType,
                "the request body must be JSON, sent with one Content-Type: application/json",
            )));
        }
        Bytes::from_request(req, state)
            .await
            .map(Body)
            .map_err(|e| {
                ApiError::from(if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    WireError::new(
                        ErrorCode::TooLarge,
                        format!("request body over {MAX_BODY_BYTES} bytes"),
                    )
                } else {
                    WireError::new(
                        ErrorCode::BadRequest,
                        format!("cannot read the request body: {}", e.body_text()),
                    )
                })
            })
    }
}

/// The `{node}` of a path; a path that does not decode is a JSON `400 bad_request`.
pub(super) struct Node(pub(super) String);

impl<S: Send + Sync> FromRequestParts<S> for Node {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|p| Node(p.0))
            .map_err(|e| {
                ApiError::from(WireError::new(
                    ErrorCode::BadRequest,
                    format!("bad path: {}", e.body_text()),
                ))
            })
    }
}

/// The router: `/v1/...` (and `more`, the job endpoints) behind version and auth
/// checks, `/v1/version` and `/metrics` open.
pub fn router(shared: Arc<Shared>, more: Router<Arc<Shared>>) -> Router {
    let api = Router::new()
        .route("/v1/agents/{node}/register", post(register))
        .route("/v1/agents/{node}/heartbeat", post(heartbeat))
        .route("/v1/agents/{node}/events", get(events))
        .route("/v1/agents/{node}/flows", post(request))
        .route("/v1/agents/{node}/flows/release", post(release))
        .route("/v1/flows", get(flows))
        .route("/v1/status", get(status))
        .merge(more)
        .route_layer(middleware::from_fn_with_state(shared.clone(), guard));
    Router::new()
        .route("/v1/version", get(version))
        .route("/v1/leader", get(leader))
        .route("/metrics", get(metrics))
        .merge(api)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(shared)
}

/// Version header and bearer token, checked before any handler runs.
async fn guard(AxState(s): AxState<Arc<Shared>>, req: Request, next: Next) -> Response {
    let fail = |e: WireError| {
        s.metrics.errors.fetch_add(1, Ordering::Relaxed);
        ApiError::from(e).into_response()
    };
    match req.headers().get(VERSION_HEADER).map(HeaderValue::to_str) {
        Some(Ok(v)) if v.trim() == PROTOCOL_VERSION.to_string() => {}
        Some(v) => {
            let v = v.unwrap_or("?");
            return fail(WireError::new(
                ErrorCode::VersionMismatch,
                format!("protocol version {v} not supported: this manager speaks version {PROTOCOL_VERSION}"),
            ));
        }
        None => {
            return fail(WireError::new(
                ErrorCode::VersionMismatch,
                format!("missing header {VERSION_HEADER}: this manager speaks protocol version {PROTOCOL_VERSION}"),
            ))
        }
    }
    // Two Authorization headers are refused, whatever they hold: which one a proxy or
    // a framework reads differs, so accepting either would let one be checked and the
    // other believed.
    let mut auths = req.headers().get_all(header::AUTHORIZATION).iter();
    let auth = auths.next().map(HeaderValue::as_bytes);
    if auths.next().is_some() {
        tracing::warn!(path = %req.uri().path(), "refused: more than one Authorization header");
        return fail(WireError::new(
            ErrorCode::BadRequest,
            "more than one Authorization header",
        ));
    }
    if !s.secret.verify(auth) {
        tracing::warn!(path = %req.uri().path(), "refused: bad or missing credentials");
        return fail(WireError::new(
            ErrorCode::Unauthorized,
            "missing or wrong bearer token (the cluster's shared secret)",
        ));
    }
    // An agent's connection from now on: never closed to make room for others.
    if let Some(t) = req.extensions().get::<Arc<ConnTicket>>() {
        t.promote();
    }
    next.run(req).await
}

pub(super) fn parse<T: DeserializeOwned>(s: &Shared, body: &Bytes) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| {
        s.metrics.errors.fetch_add(1, Ordering::Relaxed);
        ApiError::from(WireError::new(
            ErrorCode::BadRequest,
            format!("bad request body: {e}"),
        ))
    })
}

pub(super) fn counted<T, E: Into<WireError>>(s: &Shared, r: Result<T, E>) -> ApiResult<T> {
    r.map_err(|e| {
        s.metrics.errors.fetch_add(1, Ordering::Relaxed);
        ApiError::from(e.into())
    })
}

/// The agent instance a call names, if any.
fn instance(h: &HeaderMap) -> Result<Option<u64>, WireError> {
    let Some(v) = h.get(INSTANCE_HEADER) else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .map(Some)
        .ok_or_else(|| {
            WireError::new(
                ErrorCode::BadRequest,
                format!("header {INSTANCE_HEADER} must be up to 16 hex digits"),
            )
        })
}

/// Checks that the calling agent process may speak for `node` and records that it was
/// heard from; returns the node's id, and — when the call made its instance the
/// node's holder — the pending write of that, to await before answering (a restarted
/// or newly elected master must know the holder it acknowledged). Call with the
/// term's books locked.
pub(super) fn agent_call(
    s: &Shared,
    t: &Term,
    st: &mut super::state::State,
    node: &str,
    headers: &HeaderMap,
) -> ApiResult<(qos_core::topology::NodeId, Option<oneshot::Receiver<()>>)> {
    let id = counted(s, st.node(node))?;
    let now = Instant::now();
    let inst = counted(s, instance(headers))?;
    let op = counted(s, st.claim(id, inst, now, s.lease, t.hub.streaming(node)))?;
    st.touch_agent(id, now);
    let written = op.map(|op| {
        // Queued with the books locked: in order with the decisions around it.
        let (tx, rx) = oneshot::channel();
        t.store.submit(Job {
            ops: vec![op],
            done: Box::new(move || {
                let _ = tx.send(());
            }),
        });
        rx
    });
    Ok((id, written))
}

/// Waits for the write [`agent_call`] queued, if any.
pub(super) async fn durable(written: Option<oneshot::Receiver<()>>) -> ApiResult<()> {
    match written {
        Some(rx) => rx.await.map_err(|_| not_committed()),
        None => Ok(()),
    }
}

async fn not_found() -> ApiError {
    ApiError::from(WireError::new(
        ErrorCode::NotFound,
        "no such endpoint (see docs/protocol.md)",
    ))
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::from(WireError::new(
        ErrorCode::MethodNotAllowed,
        format!(
            "{} is not allowed on {} (see docs/protocol.md)",
            req.method(),
            req.uri().path()
        ),
    ))
}

async fn version() -> Json<VersionInfo> {
    Json(VersionInfo {
        protocol: PROTOCOL_VERSION,
        server: format!("clusterqos-manager {}", env!("CARGO_PKG_VERSION")),
    })
}

/// `GET /v1/leader`: this replica's role and the leader's URL as it knows it.
async fn leader(AxState(s): AxState<Arc<Shared>>) -> Json<LeaderInfo> {
    Json(LeaderInfo {
        role: if s.role.is_leader() {
            "leader".into()
        } else {
            "follower".into()
        },
        leader: s.role.leader(),
        this: s.role.advertise().map(str::to_string),
        terms: s.role.terms(),
    })
}

async fn metrics(AxState(s): AxState<Arc<Shared>>) -> Response {
    let status = match s.role.term() {
        Some(t) => t.state.lock().expect("state lock").status(),
        None => crate::protocol::StatusReport::default(),
    };
    let mut body = s.metrics.render(&status);
    body.push_str(&format!(
        "# HELP clusterqos_leader Whether this manager replica leads (1) or follows (0).\n\
         # TYPE clusterqos_leader gauge\nclusterqos_leader {}\n\
         # HELP clusterqos_terms_total Terms of leadership this replica has begun.\n\
         # TYPE clusterqos_terms_total counter\nclusterqos_terms_total {}\n",
        u8::from(s.role.is_leader()),
        s.role.terms()
    ));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn register(
    AxState(s): AxState<Arc<Shared>>,
    Node(node): Node,
    headers: HeaderMap,
) -> ApiResult<Json<Registered>> {
    s.metrics.hit(Endpoint::Register);
    let t = term(&s)?;
    let written = {
        let mut st = t.state.lock().expect("state lock");
        agent_call(&s, &t, &mut st, &node, &headers)?.1
    };
    durable(written).await?;
    tracing::info!(node = %node, "agent registered");
    Ok(Json(Registered {
        node,
        lease_ms: s.lease.as_millis() as u64,
        heartbeat_ms: (s.lease.as_millis() as u64 / 3).max(10),
    }))
}

async fn heartbeat(
    AxState(s): AxState<Arc<Shared>>,
    Node(node): Node,
    headers: HeaderMap,
    Body(body): Body,
) -> ApiResult<Json<serde_json::Value>> {
    s.metrics.hit(Endpoint::Heartbeat);
    let hb: Heartbeat = parse(&s, &body)?;
    for o in &hb.live {
        counted(&s, o.check())?;
    }
    if hb.live.len() > MAX_LIVE {
        return counted(
            &s,
            Err(WireError::new(
                ErrorCode::TooLarge,
                "too many owners in one heartbeat",
            )),
        );
    }
    let t = term(&s)?;
    let written = {
        let mut st = t.state.lock().expect("state lock");
        let (id, written) = agent_call(&s, &t, &mut st, &node, &headers)?;
        st.touch_clients(id, &hb.live, Instant::now());
        written
    };
    durable(written).await?;
    Ok(Json(serde_json::json!({})))
}

async fn events(
    AxState(s): AxState<Arc<Shared>>,
    Node(node): Node,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    s.metrics.hit(Endpoint::Events);
    let t = term(&s)?;
    let (events, written) = {
        let mut st = t.state.lock().expect("state lock");
        let (id, written) = agent_call(&s, &t, &mut st, &node, &headers)?;
        let events = t
            .hub
            .subscribe(t.clone(), (id, &node), st.node_snapshot((id, &node)));
        (events, written)
    };
    durable(written).await?;
    tracing::info!(node = %node, "agent event stream open");
    let stream = events.map(|ev| {
        let name = match &ev {
            crate::protocol::AgentEvent::Snapshot { .. } => "snapshot",
            crate::protocol::AgentEvent::Update { .. } => "update",
        };
        let data = serde_json::to_string(&ev).expect("events serialize");
        Ok(Event::default().event(name).data(data))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

async fn request(
    AxState(s): AxState<Arc<Shared>>,
    Node(node): Node,
    headers: HeaderMap,
    Body(body): Body,
) -> ApiResult<Json<Decision>> {
    s.metrics.hit(Endpoint::Request);
    let req: FlowRequest = parse(&s, &body)?;
    counted(&s, req.owner.check())?;
    let premium = matches!(req.class, crate::protocol::ClassSpec::Premium { .. });
    let t = term(&s)?;
    let rx = {
        let mut st = t.state.lock().expect("state lock");
        // A holder write queued here commits before (or with) the decision's.
        let (_, written) = agent_call(&s, &t, &mut st, &node, &headers)?;
        let req = counted(&s, AdmissionRequest::check(st.topology(), &node, req))?;
        let out = counted(&s, st.request(req, Instant::now()))?;
        match decision(out.decision) {
            Decision::Rejected(r) => {
                s.metrics.rejections[r.criterion.min(3) as usize].fetch_add(1, Ordering::Relaxed);
                tracing::debug!(node = %node, reason = %r.message, "rejected");
                Err((r, written))
            }
            granted => {
                // Queued while the books are locked: the store sees decisions in order.
                let (tx, rx) = oneshot::channel();
                let hub = t.hub.clone();
                let changes = out.changes;
                t.store.submit(Job {
                    ops: out.db.into_iter().collect(),
                    done: Box::new(move || {
                        hub.publish(changes);
                        let _ = tx.send(granted);
                    }),
                });
                Ok(rx)
            }
        }
    };
    let rx = match rx {
        Ok(rx) => rx,
        Err((r, written)) => {
            durable(written).await?;
            // A refusal is an answer from the books: only a provable leader gives it.
            still_leads(&s, &t)?;
            return Ok(Json(Decision::Rejected(r)));
        }
    };
    let decision = rx.await.map_err(|_| not_committed())?;
    if premium {
        s.metrics.grants_premium.fetch_add(1, Ordering::Relaxed);
    } else {
        s.metrics.grants_best_effort.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Json(decision))
}

async fn release(
    AxState(s): AxState<Arc<Shared>>,
    Node(node): Node,
    headers: HeaderMap,
    Body(body): Body,
) -> ApiResult<Json<serde_json::Value>> {
    s.metrics.hit(Endpoint::Release);
    let req: ReleaseRequest = parse(&s, &body)?;
    counted(&s, req.owner.check())?;
    let t = term(&s)?;
    let rx = {
        let mut st = t.state.lock().expect("state lock");
        agent_call(&s, &t, &mut st, &node, &headers)?;
        let (op, changes) = counted(&s, st.release(&node, &req.flow, req.owner))?;
        let (tx, rx) = oneshot::channel();
        let hub = t.hub.clone();
        t.store.submit(Job {
            ops: vec![op],
            done: Box::new(move || {
                hub.publish(changes);
                let _ = tx.send(());
            }),
        });
        rx
    };
    rx.await.map_err(|_| not_committed())?;
    s.jobs_queue.freed();
    s.metrics.releases.fetch_add(1, Ordering::Relaxed);
    Ok(Json(serde_json::json!({ "released": req.flow })))
}

async fn flows(AxState(s): AxState<Arc<Shared>>) -> ApiResult<Json<serde_json::Value>> {
    s.metrics.hit(Endpoint::Flows);
    let t = term(&s)?;
    let all = t.state.lock().expect("state lock").all_flows();
    still_leads(&s, &t)?;
    Ok(Json(serde_json::json!({ "flows": all })))
}

async fn status(
    AxState(s): AxState<Arc<Shared>>,
) -> ApiResult<Json<crate::protocol::StatusReport>> {
    s.metrics.hit(Endpoint::Status);
    let t = term(&s)?;
    let report = t.state.lock().expect("state lock").status();
    still_leads(&s, &t)?;
    Ok(Json(report))
}

/// Releases expired leases and pushes the redistributed shares; run periodically.
pub fn reap(s: &Shared) {
    let Some(t) = s.role.term() else { return };
    let mut st = t.state.lock().expect("state lock");
    // Jobs are queued with the books locked, so the store sees them in decision order.
    let expired = st.expire(Instant::now(), s.lease);
    if !expired.is_empty() {
        s.jobs_queue.freed();
    }
    for (op, changes) in expired {
        if let DbOp::Delete(_, f) = &op {
            tracing::info!(flow = %f, "lease expired: released");
        }
        if let DbOp::JobDelete(id) = &op {
            tracing::info!(job = %id, "job lease expired: released");
        }
        s.metrics.lease_expiries.fetch_add(1, Ordering::Relaxed);
        let hub = t.hub.clone();
        t.store.submit(Job {
            ops: vec![op],
            done: Box::new(move || hub.publish(changes)),
        });
    }
}
