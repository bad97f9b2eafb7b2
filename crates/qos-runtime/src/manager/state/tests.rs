//! Unit tests of the master's books: decisions, ownership, leases and what each change
//! pushes, without any I/O.

use std::sync::Arc;
use std::time::{Duration, Instant};

use qos_core::besteffort::Policy;
use qos_core::topology::build::{crossbar, HostDefaults};

use super::*;
use crate::protocol::{EndpointSpec, ErrorCode};

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

/// Requests at the current instant (the tests that care about time pass their own).
trait RequestNow {
    fn request_at(
        &mut self,
        agent: &str,
        req: FlowRequest,
        now: Instant,
    ) -> Result<Outcome, BooksError>;
    fn request_now(&mut self, agent: &str, req: FlowRequest) -> Result<Outcome, BooksError>;
}

impl RequestNow for State {
    fn request_now(&mut self, agent: &str, req: FlowRequest) -> Result<Outcome, BooksError> {
        self.request_at(agent, req, Instant::now())
    }
    fn request_at(
        &mut self,
        agent: &str,
        req: FlowRequest,
        now: Instant,
    ) -> Result<Outcome, BooksError> {
        let req = AdmissionRequest::check(self.topology(), agent, req)?;
        self.request(req, now)
    }
}

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
        .request_now(
            "n0",
            req(
                spec("n0", 0, "n1"),
                ClassSpec::Premium {
                    bandwidth: 40_000_000,
                },
            ),
        )
        .unwrap();
    assert!(matches!(out.decision, Verdict::Granted(ref g) if g.idt_ps == Some(98_160_000)));
    assert!(matches!(out.db, Some(DbOp::Insert(_))));
    assert_eq!(out.changes.per_node.keys().collect::<Vec<_>>(), vec!["n0"]);
}

#[test]
fn a_best_effort_share_change_is_pushed_to_the_flow_source() {
    let mut s = books();
    s.request_now(
        "n1",
        req(spec("n1", 0, "n2"), ClassSpec::BestEffort { weight: 1 }),
    )
    .unwrap();
    // A premium flow from n0 into n2 shrinks n2's surplus: n1's best-effort row moves.
    let out = s
        .request_now(
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
    s.request_now(
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
        .request_now(
            "n0",
            req(
                spec("n0", 1, "n2"),
                ClassSpec::Premium {
                    bandwidth: 10_000_000,
                },
            ),
        )
        .unwrap();
    assert!(
        matches!(out.decision, Verdict::Rejected(Refusal::Resource(ref r)) if r.criterion.number() == 1)
    );
    assert!(out.db.is_none() && out.changes.is_empty());
    let e = s
        .request_now(
            "n1",
            req(spec("n0", 2, "n2"), ClassSpec::Premium { bandwidth: 1 }),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::BadRequest);
    let e = s
        .request_now(
            "n0",
            req(spec("n0", 0, "n1"), ClassSpec::Premium { bandwidth: 1 }),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Conflict);
    let e = s
        .request_now(
            "n0",
            req(spec("n0", 3, "zz"), ClassSpec::Premium { bandwidth: 1 }),
        )
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotFound);
    assert_eq!(s.all_flows(), before);
}

#[test]
fn only_the_owner_through_the_source_agent_may_release() {
    let mut s = books();
    let f = spec("n0", 0, "n1");
    s.request_now(
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
        s.release("n0", &f, other).unwrap_err().code(),
        ErrorCode::NotOwner
    );
    assert_eq!(
        s.release("n1", &f, ME).unwrap_err().code(),
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
            .request_now(
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
        again.restore(r, Instant::now()).unwrap();
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
    s.request_now(
        "n0",
        req(
            spec("n0", 0, "n1"),
            ClassSpec::Premium {
                bandwidth: 1_000_000,
            },
        ),
    )
    .unwrap();
    s.request_now(
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
    let lease = Duration::from_secs(10);
    s.claim(n0, Some(1), t0, lease, false).unwrap();
    // The holder is live and streaming: another instance is refused.
    let e = s
        .claim(n0, Some(2), t0 + Duration::from_secs(1), lease, true)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Conflict);
    assert!(e.to_string().contains("'n0'") && e.to_string().contains("1000 ms ago"));
    // The holder keeps calling; calls without an instance are never checked.
    s.claim(n0, Some(1), t0 + Duration::from_secs(4), lease, true)
        .unwrap();
    s.claim(n0, None, t0 + Duration::from_secs(4), lease, true)
        .unwrap();
    // Its stream gone (a crash), a new instance takes the node at once...
    s.claim(n0, Some(2), t0 + Duration::from_secs(5), lease, false)
        .unwrap();
    // ...and the old one is now the intruder.
    assert!(s
        .claim(n0, Some(1), t0 + Duration::from_secs(6), lease, true)
        .is_err());
    // Quiet for the takeover time, a holder loses the node even with a stream open.
    s.claim(n0, Some(3), t0 + Duration::from_secs(11), lease, true)
        .unwrap();
    // Other nodes are independent.
    let n1 = s.node("n1").unwrap();
    s.claim(n1, Some(1), t0, lease, true).unwrap();
}

#[test]
fn a_grant_after_a_release_gets_a_fresh_lease() {
    // Regression: request, release, wait more than a lease, request again: the
    // owner's time last seen outlived its release, so the reaper freed the new grant
    // at once although the owner lived. Time is injected; nothing sleeps.
    let mut s = books();
    let lease = Duration::from_secs(2);
    let t0 = Instant::now();
    s.reset_leases(t0);
    let premium = ClassSpec::Premium {
        bandwidth: 1_000_000,
    };
    let f = spec("n0", 5, "n1");
    s.request_at("n0", req(f.clone(), premium), t0).unwrap();
    s.release("n0", &f, ME).unwrap();
    // More than a lease later (the agent kept heartbeating, listing no owner: the
    // owner had no flow), the owner asks again.
    let t1 = t0 + Duration::from_secs(5);
    s.touch_clients(s.node("n0").unwrap(), &[], t1);
    let out = s.request_at("n0", req(f.clone(), premium), t1).unwrap();
    assert!(matches!(out.decision, Verdict::Granted(_)));
    // The reaper runs soon after: the new grant has a whole lease.
    let t2 = t1 + Duration::from_millis(40);
    s.touch_clients(s.node("n0").unwrap(), &[], t2);
    assert!(s.expire(t2, lease).is_empty(), "a fresh grant was reaped");
    assert_eq!(s.len(), 1);
    // Listed alive by its agent, it keeps the flow; silent for a lease, it loses it.
    let t3 = t1 + Duration::from_millis(1500);
    s.touch_clients(s.node("n0").unwrap(), &[ME], t3);
    assert!(s.expire(t1 + Duration::from_millis(3000), lease).is_empty());
    s.touch_agent(s.node("n0").unwrap(), t1 + Duration::from_millis(3600));
    assert_eq!(s.expire(t3 + Duration::from_millis(2100), lease).len(), 1);
    assert!(s.is_empty());
}

#[test]
fn a_port_with_reservations_is_reserved_only_by_its_owner_or_root() {
    // Regression: uid 1001 reserved a trickle on root's flow key; root's own
    // request was then refused and its traffic paced at the intruder's rate.
    let mut s = books();
    let t = Instant::now();
    let premium = |b| ClassSpec::Premium { bandwidth: b };
    let root = Owner { uid: 0, pid: 1 };
    let other = Owner { uid: 1001, pid: 77 };
    let ask = |s: &mut State, f: FlowSpec, owner: Owner, b| {
        s.request_at(
            "n0",
            FlowRequest {
                flow: f,
                name: None,
                class: premium(b),
                owner,
            },
            t,
        )
    };
    ask(&mut s, spec("n0", 91, "n1"), root, 10_000_000).unwrap();
    // Another user may not reserve from root's port, to any destination.
    for dst in ["n1", "n2"] {
        let mut f = spec("n0", 91, dst);
        f.priority = 1;
        let e = ask(&mut s, f, other, 1_000).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotOwner);
        assert!(
            e.to_string()
                .contains("port 91 on node 'n0' belongs to uid 0")
                && e.to_string().contains("uid 1001 may not reserve"),
            "{}",
            e.to_string()
        );
    }
    assert_eq!(s.len(), 1);
    // Other ports are free for it; then they are its, and root may still use them.
    ask(&mut s, spec("n0", 92, "n1"), other, 1_000).unwrap();
    ask(&mut s, spec("n0", 92, "n2"), root, 1_000).unwrap();
    let e = ask(&mut s, spec("n0", 92, "n3"), ME, 1_000).unwrap_err();
    assert!(
        e.to_string().contains("belongs to uid 1001"),
        "{}",
        e.to_string()
    );
    // The same port number on another node is another port.
    s.request_at(
        "n1",
        FlowRequest {
            flow: spec("n1", 91, "n2"),
            name: None,
            class: premium(1_000),
            owner: other,
        },
        t,
    )
    .unwrap();
    // When root's last flow from port 91 goes, the port is free again.
    s.release("n0", &spec("n0", 91, "n1"), root).unwrap();
    ask(&mut s, spec("n0", 91, "n1"), other, 1_000).unwrap();
}

#[test]
fn after_a_restart_the_node_waits_half_a_lease_for_the_agent_that_held_it() {
    // Regression: after a master restart, a second agent for the same node won
    // the race to the restarted master and locked the original agent's clients out.
    let mut s = books();
    let n0 = s.node("n0").unwrap();
    let lease = Duration::from_secs(10);
    let t0 = Instant::now();
    // Before the restart: instance 1 took the node; that is written down.
    assert_eq!(
        s.claim(n0, Some(1), t0, lease, false).unwrap(),
        Some(DbOp::Holder("n0".into(), 1))
    );
    assert_eq!(s.claim(n0, Some(1), t0, lease, true).unwrap(), None);
    // The restarted master reads the holder back; no stream is open yet.
    let mut again = books();
    let t1 = t0 + Duration::from_secs(60);
    again.restore_holder("n0", 1, t1);
    again.restore_holder("gone", 9, t1);
    let e = again
        .claim(n0, Some(2), t1 + Duration::from_secs(1), lease, false)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Conflict);
    assert!(
        e.to_string().contains("before the manager restarted"),
        "{}",
        e.to_string()
    );
    // Still refused until half a lease has passed (the usual takeover time: a live
    // holder reconnects within its back-off, 1 s at most)...
    assert!(again
        .claim(n0, Some(2), t1 + Duration::from_millis(4_900), lease, false)
        .is_err());
    // ...while the holder comes back whenever it likes within that time.
    again
        .claim(n0, Some(1), t1 + Duration::from_millis(4_900), lease, false)
        .unwrap();
    // Had it not, the node would go to the newcomer after half a lease — before the
    // node's leases, started afresh at the restart, run out (see
    // an_agent_replaced_while_the_master_was_down_takes_the_node_before_its_flows_expire).
    let mut third = books();
    third.restore_holder("n0", 1, t1);
    assert_eq!(
        third
            .claim(n0, Some(2), t1 + Duration::from_millis(5_001), lease, false)
            .unwrap(),
        Some(DbOp::Holder("n0".into(), 2))
    );
}

#[test]
fn an_agent_replaced_while_the_master_was_down_takes_the_node_before_its_flows_expire() {
    // Regression (scripts/chaos/kernel-faults, phases E and F): h2's agent was
    // restarted while the manager was down, so the restarted manager's books named the
    // dead instance as h2's holder. It kept the node for a whole lease, refusing the new
    // agent, and the node's agent and owner leases (started afresh at the restart) ran
    // out at the same moment: a live best-effort flow was released 10 s after the
    // manager came back. A restored holder keeps the node for half a lease, as a live
    // holder gone quiet does: long enough for a live one to reconnect (its back-off is
    // at most 1 s), short enough for a successor to register and list its owners first.
    let mut s = books();
    let lease = Duration::from_secs(10);
    let t0 = Instant::now();
    let n0 = s.node("n0").unwrap();
    s.claim(n0, Some(1), t0, lease, true).unwrap();
    s.request_at(
        "n0",
        req(spec("n0", 5, "n1"), ClassSpec::BestEffort { weight: 1 }),
        t0,
    )
    .unwrap();
    // The master restarts on its books: instance 1 held n0.
    let t1 = t0 + Duration::from_secs(30);
    s.restore_holder("n0", 1, t1);
    s.reset_leases(t1);
    // Its successor is refused at first (a twin must not win the race to the master) ...
    let e = s
        .claim(n0, Some(2), t1 + Duration::from_secs(1), lease, false)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Conflict);
    assert!(
        e.to_string().contains("5000 ms after the restart"),
        "{}",
        e.to_string()
    );
    // ... and takes the node half a lease after the restart, before the leases end.
    let t2 = t1 + lease / 2 + Duration::from_millis(1);
    s.claim(n0, Some(2), t2, lease, false).unwrap();
    s.touch_clients(n0, &[ME], t2);
    assert!(
        s.expire(t1 + lease + Duration::from_millis(1), lease)
            .is_empty(),
        "the new agent's live owner lost its flow"
    );
    assert_eq!(s.all_flows().len(), 1);
}
