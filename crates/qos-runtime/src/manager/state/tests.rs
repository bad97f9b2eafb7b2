//! Unit tests of the master's books: decisions, ownership, leases and what each change
//! pushes, without any I/O.

use std::sync::Arc;
use std::time::{Duration, Instant};

use qos_core::besteffort::Policy;
use qos_core::topology::build::{crossbar, HostDefaults};

use super::*;

fn books() -> State {
    let topo = crossbar(4, &HostDefaults::thesis())
        .unwrap()
        .build()
        .unwrap();
    State::new(Arc::new(topo), Policy::Thesis)
}

fn spec(src: &str, sp: u16, dst: &str) -> FlowSpec {
    FlowSpec {
        src: EndpointSpec {
            node: src.into(),
            port: sp,
        },
        dst: EndpointSpec {
            node: dst.into(),
            port: 0,
        },
        priority: 0,
    }
}

const ME: Owner = Owner { uid: 1000, pid: 42 };

fn req(flow: FlowSpec, class: ClassSpec) -> FlowRequest {
    FlowRequest {
        flow,
        name: None,
        class,
        owner: ME,
    }
}

#[test]
fn a_grant_is_written_and_pushed_to_its_source_node_only() {
    let mut s = books();
    let out = s
        .request(
            "n0",
            req(
                spec("n0", 0, "n1"),
                ClassSpec::Premium {
                    bandwidth: 40_000_000,
                },
            ),
        )
        .unwrap();
    assert!(matches!(out.decision, Decision::Granted(ref g) if g.idt_ps == Some(98_160_000)));
    assert!(matches!(out.db, Some(DbOp::Insert(_))));
    assert_eq!(out.changes.per_node.keys().collect::<Vec<_>>(), vec!["n0"]);
}

#[test]
fn a_best_effort_share_change_is_pushed_to_the_flow_source() {
    let mut s = books();
    s.request(
        "n1",
        req(spec("n1", 0, "n2"), ClassSpec::BestEffort { weight: 1 }),
    )
    .unwrap();
    // A premium flow from n0 into n2 shrinks n2's surplus: n1's best-effort row moves.
    let out = s
        .request(
            "n0",
            req(
                spec("n0", 0, "n2"),
                ClassSpec::Premium {
                    bandwidth: 30_000_000,
                },
            ),
        )
        .unwrap();
    let nodes: Vec<_> = out.changes.per_node.keys().cloned().collect();
    assert_eq!(nodes, vec!["n0".to_string(), "n1".to_string()]);
    let be = &out.changes.per_node["n1"].0[0];
    assert_eq!(be.rate, 51_800_000);
}

#[test]
fn rejections_and_errors_change_nothing() {
    let mut s = books();
    s.request(
        "n0",
        req(
            spec("n0", 0, "n1"),
            ClassSpec::Premium {
                bandwidth: 80_000_000,
            },
        ),
    )
    .unwrap();
    let before = s.all_flows();
    let out = s
        .request(
            "n0",
            req(
                spec("n0", 1, "n2"),
                ClassSpec::Premium {
                    bandwidth: 10_000_000,
                },
            ),
        )
        .unwrap();
    assert!(matches!(out.decision, Decision::Rejected(ref r) if r.criterion == 1));
    assert!(out.db.is_none() && out.changes.is_empty());
    let e = s
        .request(
            "n1",
            req(spec("n0", 2, "n2"), ClassSpec::Premium { bandwidth: 1 }),
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest);
    let e = s
        .request(
            "n0",
            req(spec("n0", 0, "n1"), ClassSpec::Premium { bandwidth: 1 }),
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    let e = s
        .request(
            "n0",
            req(spec("n0", 3, "zz"), ClassSpec::Premium { bandwidth: 1 }),
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    assert_eq!(s.all_flows(), before);
}

#[test]
fn only_the_owner_through_the_source_agent_may_release() {
    let mut s = books();
    let f = spec("n0", 0, "n1");
    s.request(
        "n0",
        req(
            f.clone(),
            ClassSpec::Premium {
                bandwidth: 1_000_000,
            },
        ),
    )
    .unwrap();
    let other = Owner { uid: 1001, pid: 42 };
    assert_eq!(
        s.release("n0", &f, other).unwrap_err().code,
        ErrorCode::NotOwner
    );
    assert_eq!(
        s.release("n1", &f, ME).unwrap_err().code,
        ErrorCode::NotOwner
    );
    let (op, changes) = s.release("n0", &f, Owner { uid: 1000, pid: 7 }).unwrap();
    assert_eq!(op, DbOp::Delete(1, f.clone()));
    assert_eq!(changes.per_node["n0"].1, vec![f]);
    assert!(s.is_empty());
}

#[test]
fn restoring_the_stored_rows_rebuilds_the_same_books() {
    let mut s = books();
    let mut rows = Vec::new();
    for (i, dst) in ["n1", "n2", "n3"].iter().enumerate() {
        let out = s
            .request(
                "n0",
                req(
                    spec("n0", i as u16, dst),
                    ClassSpec::Premium {
                        bandwidth: 20_000_000,
                    },
                ),
            )
            .unwrap();
        if let Some(DbOp::Insert(r)) = out.db {
            rows.push(r);
        }
    }
    let mut again = books();
    for r in rows {
        again.restore(r).unwrap();
    }
    assert_eq!(again.all_flows(), s.all_flows());
    assert_eq!(again.status(), s.status());
}

#[test]
fn leases_expire_silent_owners_and_silent_agents() {
    let mut s = books();
    let t0 = Instant::now();
    let lease = Duration::from_secs(1);
    s.reset_leases(t0);
    s.request(
        "n0",
        req(
            spec("n0", 0, "n1"),
            ClassSpec::Premium {
                bandwidth: 1_000_000,
            },
        ),
    )
    .unwrap();
    s.request(
        "n2",
        req(
            spec("n2", 0, "n1"),
            ClassSpec::Premium {
                bandwidth: 1_000_000,
            },
        ),
    )
    .unwrap();
    s.reset_leases(t0);
    let t1 = t0 + Duration::from_millis(900);
    s.touch_clients(s.node("n0").unwrap(), &[ME], t1);
    s.touch_clients(s.node("n2").unwrap(), &[], t1);
    let t2 = t0 + Duration::from_millis(1500);
    let gone = s.expire(t2, lease);
    assert_eq!(gone.len(), 1, "n2's owner was not listed");
    assert_eq!(s.all_flows()[0].flow.src.node, "n0");
    // n0's agent falls silent.
    let gone = s.expire(t1 + Duration::from_millis(1100), lease);
    assert_eq!(gone.len(), 1);
    assert!(s.is_empty());
}

#[test]
fn one_agent_instance_holds_a_node_until_it_goes_quiet_or_drops_its_stream() {
    let mut s = books();
    let n0 = s.node("n0").unwrap();
    let t0 = Instant::now();
    let takeover = Duration::from_secs(5);
    s.claim(n0, Some(1), t0, takeover, false).unwrap();
    // The holder is live and streaming: another instance is refused.
    let e = s
        .claim(n0, Some(2), t0 + Duration::from_secs(1), takeover, true)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    assert!(e.message.contains("'n0'") && e.message.contains("1000 ms ago"));
    // The holder keeps calling; calls without an instance are never checked.
    s.claim(n0, Some(1), t0 + Duration::from_secs(4), takeover, true)
        .unwrap();
    s.claim(n0, None, t0 + Duration::from_secs(4), takeover, true)
        .unwrap();
    // Its stream gone (a crash), a new instance takes the node at once...
    s.claim(n0, Some(2), t0 + Duration::from_secs(5), takeover, false)
        .unwrap();
    // ...and the old one is now the intruder.
    assert!(s
        .claim(n0, Some(1), t0 + Duration::from_secs(6), takeover, true)
        .is_err());
    // Quiet for the takeover time, a holder loses the node even with a stream open.
    s.claim(n0, Some(3), t0 + Duration::from_secs(11), takeover, true)
        .unwrap();
    // Other nodes are independent.
    let n1 = s.node("n1").unwrap();
    s.claim(n1, Some(1), t0, takeover, true).unwrap();
}
