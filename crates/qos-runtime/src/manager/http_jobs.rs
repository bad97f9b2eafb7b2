//! The job endpoints (`/v1/jobs`, `docs/jobs.md`): reserve a job's flows all or
//! nothing, release it as one, renew its lease, list the jobs held. A job's demand is
//! summed on a worker thread before the books are locked; under the lock the decision
//! costs O(resources the job touches); a grant is answered once its record is durable.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, State as AxState};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use tokio::sync::oneshot;

use super::http::{
    agent_call, counted, durable, not_committed, parse, term, ApiResult, Body, Node,
};
use super::shared::Shared;
use super::state::{prepare_job, JobVerdict, PreparedJob};
use super::store::api::Job;
use crate::protocol::job::{
    JobDecision, JobOwnerRequest, JobRequest, JobShortfall, MAX_JOB_BODY_BYTES,
};
use crate::protocol::{ErrorCode, Owner, WireError};

/// The job routes (behind the version and authentication checks).
pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route(
            "/v1/jobs",
            post(reserve)
                .get(list)
                .layer(DefaultBodyLimit::max(MAX_JOB_BODY_BYTES)),
        )
        .route("/v1/jobs/{id}/release", post(release))
        .route("/v1/jobs/{id}/renew", post(renew))
        .route(
            "/v1/agents/{node}/jobs",
            post(reserve_for_process).layer(DefaultBodyLimit::max(MAX_JOB_BODY_BYTES)),
        )
}

/// "5 MB/s" style, for messages.
fn mbs(b: u64) -> String {
    qos_core::admission::mb(qos_core::units::Bandwidth::from_bytes_per_sec(b))
}

/// The one-line reason of a refusal.
pub fn message(id: &str, s: &JobShortfall) -> String {
    if s.short_by == 0 {
        return format!(
            "job '{id}' not granted: {} (its time to wait ran out)",
            s.resource
        );
    }
    let never = if s.never_fits {
        " — it does not fit even with nothing else reserved"
    } else {
        ""
    };
    format!(
        "job '{id}' rejected: {} is short by {} ({} reserved + {} requested > {}){never}",
        s.resource,
        mbs(s.short_by),
        mbs(s.reserved),
        mbs(s.requested),
        mbs(s.capacity)
    )
}

async fn reserve(
    AxState(s): AxState<Arc<Shared>>,
    Body(body): Body,
) -> ApiResult<Json<JobDecision>> {
    let req: JobRequest = parse(&s, &body)?;
    if req.process.is_some() {
        return counted(
            &s,
            Err(WireError::new(
                ErrorCode::BadRequest,
                "`process` is set by a node's agent (POST /v1/agents/{node}/jobs), not on /v1/jobs",
            )),
        );
    }
    decide(&s, req, None).await
}

/// A job held by a process on the agent's node: its lease is renewed while the agent
/// lists the process alive.
async fn reserve_for_process(
    AxState(s): AxState<Arc<Shared>>,
    Node(node): Node,
    headers: HeaderMap,
    Body(body): Body,
) -> ApiResult<Json<JobDecision>> {
    let req: JobRequest = parse(&s, &body)?;
    let Some(process) = req.process else {
        return counted(
            &s,
            Err(WireError::new(
                ErrorCode::BadRequest,
                "an agent's job request names the `process` that holds it",
            )),
        );
    };
    let t = term(&s)?;
    let written = {
        let mut st = t.state.lock().expect("state lock");
        agent_call(&s, &t, &mut st, &node, &headers)?.1
    };
    durable(written).await?;
    decide(&s, req, Some((node, process))).await
}

/// Prepares, then decides — at once, or waiting in line up to the request's `wait_s`.
async fn decide(
    s: &Arc<Shared>,
    req: JobRequest,
    process: Option<(String, Owner)>,
) -> ApiResult<Json<JobDecision>> {
    let wait = Duration::from_secs(req.wait_s.unwrap_or(0) as u64);
    let id = req.id.clone();
    let lease_ms = s.lease.as_millis() as u64;
    let ledger = s.empty.clone();
    let prepared =
        tokio::task::spawn_blocking(move || prepare_job(&ledger, req, lease_ms, process))
            .await
            .map_err(|e| WireError::new(ErrorCode::Internal, format!("preparing the job: {e}")))?;
    let prepared = counted(s, prepared)?;
    let started = Instant::now();
    let deadline = started + wait;
    let ticket = (!wait.is_zero()).then(|| s.jobs_queue.join());
    let result = in_line(s, &prepared, ticket, deadline).await;
    if let Some(t) = ticket {
        s.jobs_queue.leave(t);
    }
    let waited_ms = started.elapsed().as_millis() as u64;
    match result? {
        Ok(info) => {
            s.metrics.grants_premium.fetch_add(1, Ordering::Relaxed);
            Ok(Json(JobDecision::Granted(info)))
        }
        Err(short) => {
            s.metrics.rejections[if short.resource.starts_with("switch") {
                2
            } else {
                1
            }]
            .fetch_add(1, Ordering::Relaxed);
            Ok(Json(JobDecision::Rejected {
                message: message(&id, &short),
                id,
                short,
                waited_ms,
            }))
        }
    }
}

/// Tries when it is `ticket`'s turn (always, without a ticket), until granted,
/// refused for good, or `deadline`.
async fn in_line(
    s: &Arc<Shared>,
    job: &PreparedJob,
    ticket: Option<u64>,
    deadline: Instant,
) -> ApiResult<Result<crate::protocol::job::JobInfo, JobShortfall>> {
    let mut last: Option<JobShortfall> = None;
    loop {
        let notified = s.jobs_queue.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if ticket.is_none_or(|t| s.jobs_queue.is_head(t)) {
            let t = term(s)?;
            let rx = {
                let mut st = t.state.lock().expect("state lock");
                let out = counted(s, st.reserve_job(job.clone(), Instant::now()))?;
                match out.decision {
                    JobVerdict::Rejected(short) => Err(short),
                    JobVerdict::Granted(info) => {
                        // Queued with the books locked: the store sees decisions in order.
                        let (tx, rx) = oneshot::channel();
                        let hub = t.hub.clone();
                        let changes = out.changes;
                        t.store.submit(Job {
                            ops: out.db.into_iter().collect(),
                            done: Box::new(move || {
                                hub.publish(changes);
                                let _ = tx.send(info);
                            }),
                        });
                        Ok(rx)
                    }
                }
            };
            match rx {
                Ok(rx) => return Ok(Ok(rx.await.map_err(|_| not_committed())?)),
                Err(short) if short.never_fits || Instant::now() >= deadline => {
                    return Ok(Err(short))
                }
                Err(short) => last = Some(short),
            }
        }
        if Instant::now() >= deadline {
            // Out of time before its turn came: say what it waits for.
            let ahead = ticket.map_or(0, |t| s.jobs_queue.ahead(t));
            return Ok(Err(last.unwrap_or(JobShortfall {
                resource: format!("{ahead} earlier jobs were still waiting in line"),
                reserved: 0,
                requested: 0,
                capacity: 0,
                short_by: 0,
                never_fits: false,
            })));
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep_until(deadline.into()) => {}
        }
    }
}

async fn release(
    AxState(s): AxState<Arc<Shared>>,
    Node(id): Node,
    Body(body): Body,
) -> ApiResult<Json<serde_json::Value>> {
    let req: JobOwnerRequest = parse(&s, &body)?;
    let t = term(&s)?;
    let rx = {
        let mut st = t.state.lock().expect("state lock");
        let (op, changes) = counted(&s, st.release_job(&id, &req.owner))?;
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
    tracing::info!(job = %id, "job released");
    Ok(Json(serde_json::json!({ "released": id })))
}

async fn renew(
    AxState(s): AxState<Arc<Shared>>,
    Node(id): Node,
    Body(body): Body,
) -> ApiResult<Json<serde_json::Value>> {
    let req: JobOwnerRequest = parse(&s, &body)?;
    let t = term(&s)?;
    let mut st = t.state.lock().expect("state lock");
    counted(&s, st.renew_job(&id, &req.owner, Instant::now()))?;
    Ok(Json(serde_json::json!({})))
}

async fn list(AxState(s): AxState<Arc<Shared>>) -> ApiResult<Json<serde_json::Value>> {
    let t = term(&s)?;
    let jobs = t.state.lock().expect("state lock").jobs();
    Ok(Json(serde_json::json!({ "jobs": jobs })))
}
