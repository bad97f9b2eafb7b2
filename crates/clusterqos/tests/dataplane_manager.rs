//! The data plane under the manager on real traffic, with real processes on loopback
//! (a master, `clusterqos agent --nodes` per node, applications on client-library ports):
//!
//! - with the master down, agents keep enforcing their last IDTs (a granted flow keeps
//!   its granted rate) and re-synchronise when it returns (a grant made after the return
//!   takes effect);
//! - best-effort re-sharing (thesis §4.3, §5.6): a best-effort flow's measured rate
//!   drops when a premium flow from the same node is granted and rises again after the
//!   premium flow is released.
//!
//! Rates are measured over 2 s windows between arrivals (not window edges), so a loaded
//! machine that deschedules the receiving thread does not bias them, at rates (1-5 MB/s
//! of 8 KiB messages) a debug build sustains beside two CPU-bound processes.

mod common;

use std::time::{Duration, Instant};

use common::loopback::{Cluster, Stream};
use qos_client::Grant;

/// The two tests run one after the other: each runs a master, two agents and four
/// application threads, and side by side on 2 loaded cores they would measure each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn within(value: f64, want: f64, tol: f64) -> bool {
    (value / want - 1.0).abs() <= tol
}

#[test]
fn agents_keep_enforcing_the_last_idts_while_the_manager_is_down_and_resync_when_it_returns() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Node send capacity 5 MB/s; a grant of 1 MB/s is an IDT of 5 T.
    let mut c = Cluster::start(2, 5.0);
    let tx = c.port(0, 1);
    assert_eq!(
        tx.request_bandwidth("n1", 2, 1_000_000).unwrap(),
        Grant::Granted
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut s1 = Stream::start(tx, c.port(1, 2), "n1", 2);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(2300));
    c.kill_master();
    let down = Instant::now();
    std::thread::sleep(Duration::from_millis(2500));
    c.start_master();
    let back = Instant::now();

    // A new grant after the master's return: retried until the agent has re-synced.
    let tx2 = c.port(0, 3);
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        match tx2.request_bandwidth("n1", 4, 2_000_000) {
            Ok(Grant::Granted) => break,
            other if Instant::now() > deadline => panic!("no grant after the return: {other:?}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    let granted = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let mut s2 = Stream::start(tx2, c.port(1, 4), "n1", 4);
    let t2 = Instant::now();
    std::thread::sleep(Duration::from_millis(2300));
    let end = Instant::now();
    s1.stop();
    s2.stop();

    let before = s1.rate(t0 + Duration::from_millis(300), down);
    let during = s1.rate(down + Duration::from_millis(200), back);
    let after = s1.rate(t2 + Duration::from_millis(300), end);
    let new = s2.rate(t2 + Duration::from_millis(300), end);
    eprintln!(
        "flow 1 (1 MB/s granted): {before:.0} B/s before, {during:.0} with the master down, \
         {after:.0} after its return; flow 2 (2 MB/s granted {:.1} s after the return): {new:.0}",
        (granted - back).as_secs_f64()
    );
    assert!(within(before, 1e6, 0.10), "before: {before:.0} B/s");
    assert!(within(during, 1e6, 0.10), "master down: {during:.0} B/s");
    assert!(within(after, 1e6, 0.10), "after the return: {after:.0} B/s");
    assert!(
        within(new, 2e6, 0.10),
        "grant after the return: {new:.0} B/s"
    );
}

#[test]
fn a_best_effort_flow_gives_way_to_a_premium_flow_and_takes_the_bandwidth_back_on_release() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Node send capacity 5 MB/s: best-effort alone 5, beside 3 MB/s premium 2.
    let c = Cluster::start(2, 5.0);
    let be = c.port(0, 1);
    be.best_effort("n1", 2, 1).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut s_be = Stream::start(be, c.port(1, 2), "n1", 2);
    let pr = c.port(0, 3);
    let mut s_pr = Stream::start(pr, c.port(1, 4), "n1", 4);
    s_pr.set_on(false);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(2400));

    // The premium stream's port is busy sending; its flow is requested by number
    // through the node's agent, as any program of the same user may.
    let mut asker = qos_runtime::client::Client::connect(c.agent_socket(0)).unwrap();
    let flow = qos_runtime::client::LocalFlow::new(3, "n1", 4);
    let t1 = Instant::now();
    let d = asker.request_bandwidth(&flow, 3_000_000).unwrap();
    assert!(
        matches!(d, qos_runtime::protocol::Decision::Granted(_)),
        "{d:?}"
    );
    s_pr.set_on(true);
    std::thread::sleep(Duration::from_millis(2400));
    let t2 = Instant::now();
    s_pr.set_on(false);
    asker.release(&flow).unwrap();
    std::thread::sleep(Duration::from_millis(2400));
    let t3 = Instant::now();
    s_be.stop();
    s_pr.stop();

    let settle = Duration::from_millis(400);
    let alone = s_be.rate(t0 + settle, t1);
    let beside = s_be.rate(t1 + settle, t2);
    let premium = s_pr.rate(t1 + settle, t2);
    let again = s_be.rate(t2 + settle, t3);
    eprintln!(
        "best-effort {alone:.0} B/s alone, {beside:.0} beside premium ({premium:.0}), \
         {again:.0} after release"
    );
    assert!(within(alone, 5e6, 0.10), "alone: {alone:.0} B/s");
    assert!(within(beside, 2e6, 0.10), "beside premium: {beside:.0} B/s");
    assert!(within(premium, 3e6, 0.10), "premium: {premium:.0} B/s");
    assert!(within(again, 5e6, 0.10), "after release: {again:.0} B/s");
}
