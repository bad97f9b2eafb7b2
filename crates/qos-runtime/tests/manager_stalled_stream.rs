//! An agent event stream that nobody reads (with 300 best-effort
//! flows on the node and 3,000 request/release pairs the master grew from 30 to
//! 655 MB, and kept it after the socket closed). The stream's queue must stay within
//! its limits, the reader must catch up from a snapshot, and closing the stream must
//! free the queue.

mod common;

use std::time::{Duration, Instant};

use common::{Cluster, TWO_SWITCHES};
use qos_runtime::agent::IdtTable;
use qos_runtime::manager::hub::HubLimits;
use qos_runtime::protocol::{ClassSpec, EndpointSpec, FlowRequest, FlowSpec, Owner};

fn flow(port: u16, dst: &str, class: ClassSpec) -> FlowRequest {
    FlowRequest {
        flow: FlowSpec {
            src: EndpointSpec {
                node: "a".into(),
                port,
            },
            dst: EndpointSpec {
                node: dst.into(),
                port: 0,
            },
            priority: 0,
        },
        name: None,
        class,
        owner: Owner { uid: 0, pid: 1 },
    }
}

#[test]
fn a_stalled_event_stream_stays_bounded_and_catches_up_from_a_snapshot() {
    let limits = HubLimits {
        max_events: 64,
        max_rows: 2_000,
    };
    let c = Cluster::start_custom(TWO_SWITCHES, |cfg| cfg.hub = limits);
    let m = c.master_client("a");
    let hub = c.master.as_ref().unwrap().term().unwrap().hub.clone();
    // The stream is opened, then not read: the client's connection stops reading and
    // the master's writes back up once the socket buffers are full.
    let mut stream = c.rt.block_on(m.events()).unwrap();
    for port in 0..200 {
        c.rt.block_on(m.request(&flow(port, "b", ClassSpec::BestEffort { weight: 1 })))
            .unwrap();
    }
    // Each premium grant and release moves all 200 best-effort shares: 200-row updates.
    let mut most = 0;
    for i in 0..300u16 {
        let f = flow(1000 + i, "c", ClassSpec::Premium { bandwidth: 1_000 });
        c.rt.block_on(m.request(&f)).unwrap();
        c.rt.block_on(m.release(f.flow.clone(), f.owner)).unwrap();
        let (events, rows) = hub.queued("a").unwrap();
        assert!(
            events <= limits.max_events && rows <= limits.max_rows,
            "{events} {rows}"
        );
        most = most.max(rows);
    }
    let resyncs = c
        .master
        .as_ref()
        .unwrap()
        .shared
        .metrics
        .resyncs
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        resyncs >= 1,
        "the stream never fell behind (most queued: {most} rows)"
    );
    // The reader wakes up: it gets what the sockets held, then the re-sync snapshot,
    // and ends with exactly the master's table. (Each pair leaves the table as it
    // found it, so the table also matches along the way: wait for the snapshot.)
    let want: Vec<_> = c
        .master_flows()
        .into_iter()
        .filter(|e| e.flow.src.node == "a")
        .collect();
    let mut table = IdtTable::default();
    let end = Instant::now() + Duration::from_secs(60);
    while table.snapshots < 2 || table.flows.values().cloned().collect::<Vec<_>>() != want {
        assert!(Instant::now() < end, "the stream did not catch up");
        let ev = c.rt.block_on(stream.next()).expect("stream ended");
        table.apply(ev);
    }
    // Closing the stream gives the queue back.
    drop(stream);
    let gone = Instant::now() + Duration::from_secs(10);
    while hub.queued("a").is_some() {
        assert!(Instant::now() < gone, "queue kept after the stream closed");
        std::thread::sleep(Duration::from_millis(10));
    }
}
