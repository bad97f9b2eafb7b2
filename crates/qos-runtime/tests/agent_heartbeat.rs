//! The agent's heartbeats after a re-sync (thesis §4.3's local managers; the lease of
//! docs/protocol.md; an agent restart reconciles the owners' leases instead of
//! dropping live ones): a restarted agent vouches for the live owners its snapshot brings at
//! once, not a heartbeat period later. `scripts/chaos/kernel-faults` found the gap: an
//! agent killed and back 3.4 s later sent its first heartbeat before its snapshot
//! arrived (listing no one) and the next one a period (3.3 s) later — after the lease of
//! a grant whose owner was alive had run out, so the manager released it.
//!
//! A fake master makes the order certain: it sends the snapshot only once the agent's
//! first heartbeat has come, and asks for heartbeats every 60 s.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use qos_runtime::agent;
use qos_runtime::auth::Secret;
use qos_runtime::protocol::{
    AgentEvent, EndpointSpec, FlowSpec, Heartbeat, IdtEntry, Owner, Registered,
};
use tokio::sync::watch;

const SECRET: &str = "test-secret-0123456789abcdef";

#[derive(Clone)]
struct Fake {
    /// Every heartbeat's list of live owners, in arrival order.
    heartbeats: Arc<Mutex<Vec<Vec<Owner>>>>,
    /// How many heartbeats have come (the event stream waits for the first).
    count: watch::Sender<usize>,
    /// The row the snapshot carries.
    row: IdtEntry,
}

async fn register() -> Json<Registered> {
    Json(Registered {
        node: "a".into(),
        lease_ms: 180_000,
        heartbeat_ms: 60_000,
    })
}

async fn heartbeat(State(f): State<Fake>, Json(hb): Json<Heartbeat>) -> Json<serde_json::Value> {
    let n = {
        let mut all = f.heartbeats.lock().unwrap();
        all.push(hb.live);
        all.len()
    };
    f.count.send_replace(n);
    Json(serde_json::json!({}))
}

async fn events(
    State(f): State<Fake>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>> {
    let mut count = f.count.subscribe();
    let _ = count.wait_for(|n| *n >= 1).await;
    let snapshot = AgentEvent::Snapshot {
        seq: 1,
        flows: vec![f.row.clone()],
        jobs: Vec::new(),
    };
    let first = Event::default()
        .event("snapshot")
        .data(serde_json::to_string(&snapshot).unwrap());
    // The snapshot, then nothing: the stream stays open as a master's does.
    let stream =
        futures_util::stream::once(async move { Ok(first) }).chain(futures_util::stream::pending());
    Sse::new(stream)
}

#[test]
fn a_restarted_agent_lists_its_snapshots_live_owners_at_once() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The owner is this test process: alive throughout.
    let me = Owner {
        uid: my_uid(),
        pid: std::process::id(),
    };
    let row = IdtEntry {
        flow: FlowSpec {
            src: EndpointSpec {
                node: "a".into(),
                port: 0,
            },
            dst: EndpointSpec {
                node: "b".into(),
                port: 5301,
            },
            priority: 0,
        },
        name: "live".into(),
        class: "premium".into(),
        rate: 1_000_000,
        idt_ps: Some(1_448_000_000),
        weight: 0,
        owner: me,
    };
    let (count, _) = watch::channel(0usize);
    let fake = Fake {
        heartbeats: Arc::new(Mutex::new(Vec::new())),
        count,
        row,
    };
    let app = Router::new()
        .route("/v1/agents/{node}/register", post(register))
        .route("/v1/agents/{node}/heartbeat", post(heartbeat))
        .route("/v1/agents/{node}/events", get(events))
        .with_state(fake.clone());
    let url = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await });
        format!("http://{addr}")
    });
    let agent = rt
        .block_on(agent::start(agent::Config::new(
            "a",
            &url,
            Secret::new(SECRET).unwrap(),
            dir.path().join("a.sock"),
        )))
        .unwrap();
    // The snapshot reaches the table (after the first heartbeat, by construction).
    let table = agent.idt_table();
    let end = Instant::now() + Duration::from_secs(20);
    while table.borrow().flows.is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(table.borrow().flows.len(), 1, "the snapshot never arrived");
    // A heartbeat listing the owner follows without waiting for the 60 s period (the
    // 20 s allowed here only bound a very slow machine).
    let listed = || {
        fake.heartbeats
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(&me))
    };
    while !listed() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    let seen = fake.heartbeats.lock().unwrap().clone();
    assert!(
        listed(),
        "no heartbeat listed the snapshot's live owner {me:?}: {seen:?}"
    );
    assert!(
        seen[0].is_empty(),
        "the first heartbeat came before the snapshot: {seen:?}"
    );
    agent.shutdown();
}

/// This process's uid.
fn my_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{}", std::process::id()))
        .unwrap()
        .uid()
}
