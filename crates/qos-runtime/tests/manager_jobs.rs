//! Job reservations through the manager's HTTP endpoints: two jobs that each fit
//! alone but not together, sent at the same time, again and again (one holds all, the
//! other nothing, or waits and then gets all); bad input answered 4xx with one line and
//! nothing held; a job kept across a restart of the manager (its SQLite store).

mod common;

use std::time::{Duration, Instant};

use qos_core::besteffort::Policy;
use qos_runtime::master_client::MasterClient;
use qos_runtime::protocol::job::{JobBody, JobDecision, JobFlow, JobRequest, Pattern};
use qos_runtime::protocol::ErrorCode;

use common::{Cluster, CROSSBAR, TWO_SWITCHES};

fn job(id: &str, owner: &str, nodes: &[&str], rate: u64) -> JobRequest {
    JobRequest {
        id: id.into(),
        owner: owner.into(),
        body: JobBody::Pattern {
            pattern: Pattern::AllToAll,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            rate,
            class: "premium".into(),
        },
        lease_ms: None,
        wait_s: None,
        process: None,
    }
}

/// Reserved bytes/s summed over every resource the master reports.
fn reserved_total(c: &Cluster) -> u64 {
    c.status().resources.iter().map(|r| r.reserved).sum()
}

#[test]
fn two_jobs_that_fit_alone_but_not_together_never_both_hold_part() {
    // a and b on s0, c and d on s1, a 60 MB/s trunk: each job sends 40 MB/s across it
    // each way (a->c and b->d for one, a->d and b->c for the other).
    let c = Cluster::start(TWO_SWITCHES, Policy::Thesis, Duration::from_secs(30));
    let m = c.master_client("a");
    let one = JobRequest {
        body: JobBody::Flows {
            flows: vec![
                JobFlow {
                    src: "a".into(),
                    dst: "c".into(),
                    rate: 40_000_000,
                    src_port: 0,
                    dst_port: 0,
                    class: "premium".into(),
                },
                JobFlow {
                    src: "c".into(),
                    dst: "a".into(),
                    rate: 40_000_000,
                    src_port: 0,
                    dst_port: 0,
                    class: "premium".into(),
                },
            ],
        },
        ..job("one", "t", &["a", "c"], 1)
    };
    let two = JobRequest {
        body: JobBody::Flows {
            flows: vec![
                JobFlow {
                    src: "b".into(),
                    dst: "d".into(),
                    rate: 40_000_000,
                    src_port: 0,
                    dst_port: 0,
                    class: "premium".into(),
                },
                JobFlow {
                    src: "d".into(),
                    dst: "b".into(),
                    rate: 40_000_000,
                    src_port: 0,
                    dst_port: 0,
                    class: "premium".into(),
                },
            ],
        },
        ..job("two", "t", &["b", "d"], 1)
    };
    let alone = reserved_for(&c, &m, &one);
    assert_eq!(alone, reserved_for(&c, &m, &two), "the jobs are alike");
    for round in 0..100 {
        let (r1, r2) =
            c.rt.block_on(async { tokio::join!(m.reserve_job(&one), m.reserve_job(&two)) });
        let (r1, r2) = (r1.unwrap(), r2.unwrap());
        let granted = [&r1, &r2]
            .iter()
            .filter(|d| matches!(d, JobDecision::Granted(_)))
            .count();
        assert_eq!(granted, 1, "round {round}: {r1:?} {r2:?}");
        let jobs = c.rt.block_on(m.jobs()).unwrap();
        assert_eq!(jobs.len(), 1, "round {round}");
        // The one granted holds all of its flows, the other nothing.
        assert_eq!(reserved_total(&c), alone, "round {round}");
        let loser = if matches!(r1, JobDecision::Granted(_)) {
            &r2
        } else {
            &r1
        };
        let JobDecision::Rejected { short, message, .. } = loser else {
            unreachable!()
        };
        assert!(
            short.resource.starts_with("switch") && short.short_by == 20_000_000,
            "{short:?}"
        );
        assert!(!message.contains('\n'));
        c.rt.block_on(m.release_job(&jobs[0].id, "t")).unwrap();
        assert_eq!(reserved_total(&c), 0, "round {round}");
    }
    // Waiting: the second waits in line and gets all of its flows once the first is
    // released.
    for round in 0..20 {
        let waiting = JobRequest {
            wait_s: Some(10),
            ..two.clone()
        };
        let d1 = c.rt.block_on(m.reserve_job(&one)).unwrap();
        assert!(matches!(d1, JobDecision::Granted(_)));
        let m2 = m.clone();
        let pending = c.rt.spawn(async move { m2.reserve_job(&waiting).await });
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            c.rt.block_on(m.jobs()).unwrap().len(),
            1,
            "round {round}: it waits holding nothing"
        );
        let released = Instant::now();
        c.rt.block_on(m.release_job("one", "t")).unwrap();
        let d2 = c.rt.block_on(pending).unwrap().unwrap();
        assert!(
            matches!(d2, JobDecision::Granted(_)),
            "round {round}: {d2:?}"
        );
        assert!(released.elapsed() < Duration::from_secs(5));
        assert_eq!(reserved_total(&c), alone, "round {round}");
        c.rt.block_on(m.release_job("two", "t")).unwrap();
    }
}

fn reserved_for(c: &Cluster, m: &MasterClient, j: &JobRequest) -> u64 {
    let d = c.rt.block_on(m.reserve_job(j)).unwrap();
    assert!(matches!(d, JobDecision::Granted(_)), "{d:?}");
    let r = reserved_total(c);
    c.rt.block_on(m.release_job(&j.id, &j.owner)).unwrap();
    r
}

#[test]
fn bad_job_requests_get_a_4xx_with_one_line_and_hold_nothing() {
    let c = Cluster::start(CROSSBAR, Policy::Thesis, Duration::from_secs(30));
    let m = c.master_client("n0");
    c.rt.block_on(m.reserve_job(&job("held", "t", &["n0", "n1"], 10_000_000)))
        .unwrap();
    let cases = [
        (
            job("x", "t", &["n0", "nowhere"], 1_000_000),
            ErrorCode::NotFound,
            "no node 'nowhere'",
        ),
        (
            job("x", "t", &["n0", "n1"], 0),
            ErrorCode::BadRequest,
            "rate must be",
        ),
        (
            job("x", "t", &["n0", "n1"], 90_000_000),
            ErrorCode::BadRequest,
            "Bmax",
        ),
        (
            job("held", "t", &["n0", "n1"], 20_000_000),
            ErrorCode::Conflict,
            "other contents",
        ),
        (
            job("held", "u", &["n0", "n1"], 10_000_000),
            ErrorCode::Conflict,
            "held by 't'",
        ),
    ];
    let before = reserved_total(&c);
    for (req, code, want) in cases {
        let e = c.rt.block_on(m.reserve_job(&req)).unwrap_err();
        assert_eq!(e.code, code, "{want}: {e:?}");
        assert!(
            e.message.contains(want) && !e.message.contains('\n'),
            "{want}: {}",
            e.message
        );
        assert_eq!(reserved_total(&c), before, "{want}: something held");
    }
    // Release by someone else, of a job that does not exist.
    let e =
        c.rt.block_on(m.release_job("held", "intruder"))
            .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotOwner);
    let e = c.rt.block_on(m.release_job("nope", "t")).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    assert_eq!(c.rt.block_on(m.jobs()).unwrap().len(), 1);
}

#[test]
fn a_granted_job_is_durable_and_comes_back_after_a_restart() {
    let mut c = Cluster::start(CROSSBAR, Policy::Thesis, Duration::from_secs(30));
    let m = c.master_client("n0");
    let d =
        c.rt.block_on(m.reserve_job(&job("keep", "t", &["n0", "n1", "n2"], 10_000_000)))
            .unwrap();
    assert!(matches!(d, JobDecision::Granted(ref i) if i.flow_count == 6));
    let held = reserved_total(&c);
    let config = Cluster::config(CROSSBAR, &c.db());
    c.restart(config).unwrap();
    let jobs = c.rt.block_on(m.jobs()).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].id, "keep");
    assert_eq!(reserved_total(&c), held);
    // The same request again: the same answer.
    let again =
        c.rt.block_on(m.reserve_job(&job("keep", "t", &["n0", "n1", "n2"], 10_000_000)))
            .unwrap();
    assert!(matches!(again, JobDecision::Granted(_)));
    assert_eq!(reserved_total(&c), held);
}

#[test]
fn a_job_whose_lease_is_not_renewed_is_released() {
    let c = Cluster::start(CROSSBAR, Policy::Thesis, Duration::from_millis(200));
    let m = c.master_client("n0");
    // Renewed every 0.1 s against a 1 s lease: a loaded machine may stall a renewal
    // for most of a second without the job lapsing; the silent one lapses within 2 s.
    let renewed = JobRequest {
        lease_ms: Some(1_000),
        ..job("renewed", "t", &["n0", "n1"], 5_000_000)
    };
    let silent = JobRequest {
        lease_ms: Some(1_000),
        ..job("silent", "t", &["n2", "n3"], 5_000_000)
    };
    c.rt.block_on(m.reserve_job(&renewed)).unwrap();
    c.rt.block_on(m.reserve_job(&silent)).unwrap();
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        c.rt.block_on(m.renew_job("renewed", "t")).unwrap();
    }
    let jobs = c.rt.block_on(m.jobs()).unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        ["renewed"]
    );
}
