//! The bandwidth manager service end to end on loopback (thesis §3.3, §4.3, §5.6):
//! a real master and real agents, applications talking to their agent through the
//! client library.

mod common;

use std::time::Duration;

use common::{mbps, Cluster, TWO_SWITCHES};
use qos_core::besteffort::Policy;
use qos_runtime::client::LocalFlow;
use qos_runtime::protocol::{Decision, ErrorCode, IdtEntry, RejectionInfo};

const LEASE: Duration = Duration::from_secs(30);

fn granted(d: Decision) -> IdtEntry {
    match d {
        Decision::Granted(g) => g,
        Decision::Rejected(r) => panic!("expected a grant, got {}", r.message),
    }
}

fn rejected(d: Decision) -> RejectionInfo {
    match d {
        Decision::Rejected(r) => r,
        Decision::Granted(g) => panic!("expected a rejection, got a grant of {}", g.flow),
    }
}

#[test]
fn each_admission_criterion_rejects_naming_its_resource() {
    let mut c = Cluster::start(TWO_SWITCHES, Policy::Thesis, LEASE);
    for n in ["a", "b", "d"] {
        c.agent(n);
    }
    let (mut a, mut b, mut d) = (c.client("a"), c.client("b"), c.client("d"));

    // Granted, IDT = T * Bmax / Breq = 48 us * 81.8 / 50 = 78.528 us.
    let g = granted(
        a.request_bandwidth(&LocalFlow::new(0, "c", 0), mbps(50.0))
            .unwrap(),
    );
    assert_eq!(g.idt_ps, Some(78_528_000));
    assert_eq!(g.rate, mbps(50.0));

    // 1: the source node a already sends 50 of its 81.8 MB/s.
    let r = rejected(
        a.request_bandwidth(&LocalFlow::new(1, "b", 0), mbps(40.0))
            .unwrap(),
    );
    assert_eq!((r.criterion, r.criterion_name.as_str()), (1, "source-node"));
    assert!(r.resource.contains("node a"), "{}", r.resource);
    assert_eq!(
        (r.reserved, r.requested, r.capacity),
        (mbps(50.0), mbps(40.0), mbps(81.8))
    );

    // 2: the trunk leaving s0 by port 7 carries 50 of its 60 MB/s.
    let r = rejected(
        b.request_bandwidth(&LocalFlow::new(0, "d", 0), mbps(20.0))
            .unwrap(),
    );
    assert_eq!((r.criterion, r.criterion_name.as_str()), (2, "switch-port"));
    assert_eq!(r.resource, "switch s0 port 7");
    assert!(r.message.contains("switch s0 port 7"), "{}", r.message);

    // 3: the destination c already receives 50 of its 81.8 MB/s.
    let r = rejected(
        d.request_bandwidth(&LocalFlow::new(0, "c", 0), mbps(40.0))
            .unwrap(),
    );
    assert_eq!(
        (r.criterion, r.criterion_name.as_str()),
        (3, "destination-node")
    );
    assert!(r.resource.contains("node c"), "{}", r.resource);

    // Rejections change nothing; the books hold the one grant.
    assert_eq!(c.master_flows().len(), 1);
    let trunk = c
        .status()
        .resources
        .into_iter()
        .find(|r| r.name == "s0/7")
        .unwrap();
    assert_eq!(trunk.reserved, mbps(50.0));
}

#[test]
fn idt_updates_reach_exactly_the_affected_agents() {
    let mut c = Cluster::start(TWO_SWITCHES, Policy::Thesis, LEASE);
    for n in ["a", "b", "c", "d"] {
        c.agent(n);
    }
    let updates = |c: &Cluster| -> Vec<u64> {
        ["a", "b", "c", "d"]
            .iter()
            .map(|n| c.table(n).updates)
            .collect()
    };
    assert_eq!(updates(&c), vec![0, 0, 0, 0]);

    // A premium flow from a: only a's table changes.
    let mut a = c.client("a");
    granted(
        a.request_bandwidth(&LocalFlow::new(0, "c", 0), mbps(30.0))
            .unwrap(),
    );
    assert!(c.wait(|| c.row("a", 0, "c", 0).is_some()));
    // A best-effort flow from b across the trunk: only b's table changes.
    let mut b = c.client("b");
    let be = granted(b.best_effort(&LocalFlow::new(0, "d", 0), 1).unwrap());
    assert_eq!(be.rate, mbps(30.0), "trunk surplus 60 - 30");
    assert!(c.wait(|| c.row("b", 0, "d", 0).is_some()));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(updates(&c), vec![1, 1, 0, 0]);

    // Another premium flow from a over the trunk shrinks b's share: a and b change.
    granted(
        a.request_bandwidth(&LocalFlow::new(1, "d", 0), mbps(10.0))
            .unwrap(),
    );
    assert!(c.wait(|| c.row("b", 0, "d", 0).map(|e| e.rate) == Some(mbps(20.0))));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(updates(&c), vec![2, 2, 0, 0]);

    // A flow from c to d shares nothing with b's path (s1:1 has room): only c.
    let mut cc = c.client("c");
    granted(
        cc.request_bandwidth(&LocalFlow::new(0, "d", 0), mbps(5.0))
            .unwrap(),
    );
    assert!(c.wait(|| c.row("c", 0, "d", 0).is_some()));
    std::thread::sleep(Duration::from_millis(100));
    let u = updates(&c);
    assert_eq!((u[0], u[2], u[3]), (2, 1, 0), "{u:?}");

    // Every agent's table equals the master's rows for its node.
    for n in ["a", "b", "c", "d"] {
        let mine: Vec<_> = c
            .master_flows()
            .into_iter()
            .filter(|e| e.flow.src.node == n)
            .collect();
        let theirs: Vec<_> = c.table(n).flows.values().cloned().collect();
        assert_eq!(mine, theirs, "node {n}");
    }
}

#[test]
fn best_effort_shares_follow_premium_flows_as_in_fig_5_11_and_5_12() {
    // The thesis's cluster as `clusterqos admit` and the simulator see it: nodes share
    // at most 78 MB/s among their best-effort flows (fitted to §5.6).
    let thesis = include_str!("../../../examples/topologies/thesis-crossbar.toml");
    let mut c = Cluster::start(thesis, Policy::Thesis, LEASE);
    c.agent("n0");
    let mut app = c.client("n0");
    let be = LocalFlow::new(0, "n1", 0);
    let rate = |c: &Cluster, want: f64| {
        c.wait(|| c.row("n0", 0, "n1", 0).map(|e| e.rate) == Some(mbps(want)))
    };

    // Fig 5.11: one best-effort flow at peak rate (IDT = T), then premium 40 and 20.
    let g = granted(app.best_effort(&be, 1).unwrap());
    assert_eq!((g.rate, g.idt_ps), (mbps(81.8), Some(48_000_000)));
    let p1 = LocalFlow::new(1, "n2", 0);
    let p2 = LocalFlow::new(2, "n3", 0);
    granted(app.request_bandwidth(&p1, mbps(40.0)).unwrap());
    assert!(rate(&c, 38.0), "{:?}", c.row("n0", 0, "n1", 0));
    granted(app.request_bandwidth(&p2, mbps(20.0)).unwrap());
    assert!(rate(&c, 18.0));
    app.release(&p2).unwrap();
    assert!(rate(&c, 38.0));
    app.release(&p1).unwrap();
    assert!(rate(&c, 81.8));

    // Fig 5.12: two best-effort flows split the surplus equally, before and during a
    // 20 MB/s premium flow.
    let be2 = LocalFlow::new(3, "n2", 0);
    granted(app.best_effort(&be2, 1).unwrap());
    assert!(rate(&c, 39.0));
    assert_eq!(c.row("n0", 3, "n2", 0).unwrap().rate, mbps(39.0));
    granted(app.request_bandwidth(&p2, mbps(20.0)).unwrap());
    assert!(rate(&c, 29.0));
    assert!(c.wait(|| c.row("n0", 3, "n2", 0).map(|e| e.rate) == Some(mbps(29.0))));
    app.release(&p2).unwrap();
    assert!(rate(&c, 39.0));
}

#[test]
fn max_min_policy_hands_out_what_the_thesis_rule_leaves_idle() {
    // Two best-effort flows a->c and b->c: both cross the 60 MB/s trunk and end at c.
    // The thesis rule gives each min(81.8, 30, 81.8/2) = 30; so does max-min. Add a
    // third flow a->b that does not cross the trunk: thesis gives a's two flows
    // 81.8/2 each at node a, max-min lets a->b take what a->c cannot use.
    let mut c = Cluster::start(TWO_SWITCHES, Policy::MaxMin, LEASE);
    c.agent("a");
    c.agent("b");
    let (mut a, mut b) = (c.client("a"), c.client("b"));
    granted(a.best_effort(&LocalFlow::new(0, "c", 0), 1).unwrap());
    granted(b.best_effort(&LocalFlow::new(0, "c", 0), 1).unwrap());
    granted(a.best_effort(&LocalFlow::new(1, "b", 0), 1).unwrap());
    assert!(c.wait(|| c.row("a", 0, "c", 0).map(|e| e.rate) == Some(mbps(30.0))));
    assert!(c.wait(|| c.row("a", 1, "b", 0).map(|e| e.rate) == Some(mbps(51.8))));
}

#[test]
fn hundred_clients_racing_for_the_last_capacity_never_over_commit() {
    let mut c = Cluster::start(TWO_SWITCHES, Policy::Thesis, LEASE);
    c.agent("a");
    // 100 clients each want 1 MB/s from a to c; the 60 MB/s trunk admits exactly 60.
    let socket = c.socket("a");
    let handles: Vec<_> = (0..100u16)
        .map(|i| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut cl = qos_runtime::client::Client::connect(socket).unwrap();
                cl.request_bandwidth(&LocalFlow::new(i, "c", 0), mbps(1.0))
                    .unwrap()
            })
        })
        .collect();
    let decisions: Vec<Decision> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let grants = decisions
        .iter()
        .filter(|d| matches!(d, Decision::Granted(_)))
        .count();
    assert_eq!(grants, 60);
    for d in &decisions {
        if let Decision::Rejected(r) = d {
            assert_eq!(r.resource, "switch s0 port 7");
            assert!(r.reserved + r.requested > r.capacity);
        }
    }
    for r in c.status().resources {
        if let Some(cap) = r.capacity {
            assert!(
                r.reserved <= cap,
                "{} {} over-committed",
                r.name,
                r.direction
            );
        }
    }
    assert_eq!(c.master_flows().len(), 60);
}

#[test]
fn a_client_cannot_release_another_users_flow() {
    let mut c = Cluster::start(TWO_SWITCHES, Policy::Thesis, LEASE);
    c.agent("a");
    let me = std::process::id();
    let uid = unsafe_uid();
    let mut app = c.client("a");
    let flow = LocalFlow::new(0, "c", 0);
    granted(app.request_bandwidth(&flow, mbps(10.0)).unwrap());
    let spec = c.master_flows()[0].flow.clone();
    let m = c.master_client("a");
    let other = qos_runtime::protocol::Owner {
        uid: uid + 1,
        pid: me,
    };
    let e = c.rt.block_on(m.release(spec.clone(), other)).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotOwner);
    assert!(e.message.contains("may not release"), "{}", e.message);
    // Nor may another node's agent release it on the owner's behalf.
    let mb = c.master_client("b");
    let owner = qos_runtime::protocol::Owner { uid, pid: me };
    let e = c.rt.block_on(mb.release(spec.clone(), owner)).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotOwner);
    assert_eq!(c.master_flows().len(), 1);
    // The owner may.
    app.release(&flow).unwrap();
    assert!(c.master_flows().is_empty());
    // Releasing it again is a clear error.
    let e = app.release(&flow).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotFound));
}

#[test]
fn wrong_secret_and_wrong_version_are_refused() {
    let c = Cluster::start(TWO_SWITCHES, Policy::Thesis, LEASE);
    let bad = qos_runtime::master_client::MasterClient::new(
        &c.url,
        "a",
        &qos_runtime::auth::Secret::new("not-the-cluster-secret").unwrap(),
    )
    .unwrap();
    let e = c.rt.block_on(bad.register()).unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    let e =
        c.rt.block_on(c.master_client("nowhere").register())
            .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    assert!(e.message.contains("nowhere"));
}

#[test]
fn a_dead_client_and_a_silent_agent_lose_their_flows_after_the_lease() {
    let mut c = Cluster::start(TWO_SWITCHES, Policy::Thesis, Duration::from_millis(800));
    c.agent("a");
    c.agent("b");
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let mut app = c.client("a");
    app.on_behalf_of(child.id());
    granted(
        app.request_bandwidth(&LocalFlow::new(0, "c", 0), mbps(10.0))
            .unwrap(),
    );
    let mut mine = c.client("a");
    granted(
        mine.request_bandwidth(&LocalFlow::new(1, "c", 0), mbps(10.0))
            .unwrap(),
    );
    let mut bapp = c.client("b");
    granted(
        bapp.request_bandwidth(&LocalFlow::new(0, "d", 0), mbps(10.0))
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(c.master_flows().len(), 3, "live owners keep their flows");

    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        c.wait(|| c.row("a", 0, "c", 0).is_none()),
        "dead client's flow released"
    );
    assert!(
        c.row("a", 1, "c", 0).is_some(),
        "the live client's flow stays"
    );

    // Agent b goes silent: its node's flows go too.
    c.agents.remove("b").unwrap().shutdown();
    assert!(c.wait(|| c.master_flows().len() == 1));
    assert_eq!(c.master_flows()[0].flow.src.port, 1);
}

fn unsafe_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{}", std::process::id()))
        .unwrap()
        .uid()
}

#[test]
fn a_second_agent_for_a_node_is_refused_and_a_restarted_one_takes_over() {
    let mut c = Cluster::start(TWO_SWITCHES, Policy::Thesis, LEASE);
    c.agent("a");
    // Another agent process configured with the same node name.
    let twin = c.master_client("a").with_instance(0x7717);
    let e = c.rt.block_on(twin.register()).unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    assert!(
        e.message.contains("node 'a' already has a live agent"),
        "{}",
        e.message
    );
    // Nor may it take the node's event stream or ask in its name.
    assert_eq!(
        c.rt.block_on(twin.events()).err().unwrap().code,
        ErrorCode::Conflict
    );
    // The first agent stops (as a crash closes its connections): a new process for
    // the node is accepted well before the lease runs out.
    c.agents.remove("a").unwrap().shutdown();
    let restarted = c.master_client("a").with_instance(0x8818);
    let t0 = std::time::Instant::now();
    assert!(
        c.wait(|| c.rt.block_on(restarted.register()).is_ok()),
        "restarted agent refused"
    );
    assert!(t0.elapsed() < LEASE / 4, "{:?}", t0.elapsed());
    // Calls naming no instance (tools such as curl) are not checked.
    assert!(c.rt.block_on(c.master_client("a").register()).is_ok());
}
