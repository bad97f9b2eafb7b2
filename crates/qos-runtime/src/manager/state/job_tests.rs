//! Tests of job reservations in the books: random job mixes on random topologies
//! replayed against an independent ledger that admits each job's flows one by one
//! (qos-core's per-flow admission, thesis §3.3.1), and bad input.

use std::sync::Arc;
use std::time::{Duration, Instant};

use qos_core::admission::Ledger;
use qos_core::besteffort::Policy;
use qos_core::flow::{Flow, FlowKey};
use qos_core::topology::build::{cascade, crossbar, mesh, HostDefaults};
use qos_core::topology::{NodeId, Topology};
use qos_core::units::Bandwidth;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::protocol::job::{JobBody, JobFlow, JobRequest, Pattern};

fn topology(rng: &mut ChaCha8Rng) -> Arc<Topology> {
    let d = HostDefaults::thesis();
    let b = match rng.gen_range(0..3) {
        0 => crossbar(rng.gen_range(3..12), &d).unwrap(),
        1 => cascade(
            rng.gen_range(2..4),
            rng.gen_range(2..5),
            &d,
            Bandwidth::from_mb_per_sec(rng.gen_range(40.0..200.0)),
        )
        .unwrap(),
        _ => mesh(rng.gen_range(2..4), &d).unwrap(),
    };
    Arc::new(b.build().unwrap())
}

fn request(rng: &mut ChaCha8Rng, topo: &Topology, id: usize) -> JobRequest {
    let n = topo.nodes().len();
    let name = |i: usize| topo.nodes()[i].name.clone();
    let body = if rng.gen_bool(0.8) {
        let k = rng.gen_range(2..=n.min(6));
        let mut idx: Vec<usize> = (0..n).collect();
        for i in 0..k {
            let j = rng.gen_range(i..n);
            idx.swap(i, j);
        }
        JobBody::Pattern {
            pattern: Pattern::ALL[rng.gen_range(0..4)],
            nodes: idx[..k].iter().map(|&i| name(i)).collect(),
            rate: rng.gen_range(1..20) * 1_000_000,
            class: "premium".into(),
        }
    } else {
        let mut flows: Vec<JobFlow> = Vec::new();
        for _ in 0..rng.gen_range(1..6) {
            let a = rng.gen_range(0..n);
            let b = (a + rng.gen_range(1..n)) % n;
            if flows.iter().any(|f| f.src == name(a) && f.dst == name(b)) {
                continue;
            }
            flows.push(JobFlow {
                src: name(a),
                dst: name(b),
                rate: rng.gen_range(1..40) * 1_000_000,
                src_port: 0,
                dst_port: 0,
                class: "premium".into(),
            });
        }
        JobBody::Flows { flows }
    };
    JobRequest {
        id: format!("job-{id}"),
        owner: "test".into(),
        body,
        lease_ms: None,
        wait_s: None,
        process: None,
    }
}

/// The job's flows admitted one by one into a copy of `reference`: the copy if every
/// flow was granted, else the first flow refused (its rejection's resource).
fn one_by_one(reference: &Ledger, topo: &Topology, body: &JobBody) -> Result<Ledger, String> {
    let mut l = reference.clone();
    let flows: Vec<(NodeId, NodeId, Bandwidth)> = super::job::flows(topo, body).unwrap().collect();
    for (i, (s, d, b)) in flows.into_iter().enumerate() {
        // Distinct keys: the source port numbers the flow within the job.
        let mut key = FlowKey::between(s, d);
        key.src.port = i as u16;
        key.dst.port = (reference.len() % 60_000) as u16;
        match l.request(Flow::premium("f", s, d, b).with_key(key)) {
            Ok(_) => {}
            Err(qos_core::admission::AdmitError::Rejected(r)) => return Err(r.resource),
            Err(e) => panic!("bad flow in a valid job: {e}"),
        }
    }
    Ok(l)
}

#[test]
fn a_thousand_random_job_mixes_match_one_by_one_admission_and_never_hold_part_of_a_job() {
    let mut rng = ChaCha8Rng::seed_from_u64(30);
    let (mut granted, mut refused, mut released) = (0, 0, 0);
    for mix in 0..1000 {
        let topo = topology(&mut rng);
        let mut books = State::new(topo.clone(), Policy::Thesis);
        let empty = Ledger::new(topo.clone());
        let mut reference = Ledger::new(topo.clone());
        // Per held job: its reference ledger before it (to release it there too).
        let mut held: Vec<(String, JobBody)> = Vec::new();
        let now = Instant::now();
        for j in 0..rng.gen_range(3..12) {
            if !held.is_empty() && rng.gen_bool(0.25) {
                let (id, _) = held.remove(rng.gen_range(0..held.len()));
                books.release_job(&id, "test").unwrap();
                released += 1;
                // Rebuild the reference from the jobs still held, one flow at a time.
                reference = Ledger::new(topo.clone());
                for (_, body) in &held {
                    reference = one_by_one(&reference, &topo, body).unwrap();
                }
            }
            let req = request(&mut rng, &topo, j);
            let body = req.body.clone();
            let id = req.id.clone();
            let prepared = match super::job::prepare(&empty, req, 10_000, None) {
                Ok(p) => p,
                // A flow no state admits (rate above a node's capacity): bad input.
                Err(BooksError::Invalid(_)) => continue,
                Err(e) => panic!("mix {mix}: {e}"),
            };
            let out = books.reserve_job(prepared, now).unwrap();
            let expected = one_by_one(&reference, &topo, &body);
            match (out.decision, expected) {
                (JobVerdict::Granted(_), Ok(after)) => {
                    granted += 1;
                    reference = after;
                    held.push((id, body));
                }
                (JobVerdict::Rejected(s), Err(first)) => {
                    refused += 1;
                    // The resource named is really short: what is held there plus the
                    // job's demand on it exceeds its capacity.
                    let r = (0..reference.resource_count())
                        .map(|i| qos_core::admission::ResourceId(i as u32))
                        .find(|&r| reference.label(r) == s.resource)
                        .unwrap_or_else(|| panic!("mix {mix}: unknown resource {}", s.resource));
                    let demand = empty
                        .demand(super::job::flows(&topo, &body).unwrap())
                        .unwrap();
                    let cap = reference
                        .capacity(r)
                        .map_or(u64::MAX, |c| c.bytes_per_sec());
                    // (A job that never fits is short with nothing reserved.)
                    let held = if s.never_fits {
                        0
                    } else {
                        reference.reserved(r).bytes_per_sec()
                    };
                    assert!(
                        held + demand.on(r).bytes_per_sec() > cap,
                        "mix {mix}: {} is named short but is not ({first} was, one by one)",
                        s.resource
                    );
                    assert_eq!(s.reserved, held, "mix {mix}");
                    assert_eq!(s.requested, demand.on(r).bytes_per_sec(), "mix {mix}");
                }
                (d, e) => panic!("mix {mix} job {j}: books {d:?}, one by one {e:?}"),
            }
            // Nothing held in part, nothing over-committed: every resource's
            // reservation is exactly the reference's, and within capacity.
            for i in 0..reference.resource_count() {
                let r = qos_core::admission::ResourceId(i as u32);
                assert_eq!(
                    books.ledger.reserved(r),
                    reference.reserved(r),
                    "mix {mix}: {}",
                    reference.label(r)
                );
                if let Some(c) = reference.capacity(r) {
                    assert!(books.ledger.reserved(r) <= c, "mix {mix}: over-commit");
                }
            }
        }
    }
    eprintln!("1,000 mixes: {granted} jobs granted, {refused} refused, {released} released");
    // The mixes exercise both outcomes and releases.
    assert!(
        granted > 1000 && refused > 500 && released > 200,
        "{granted} {refused} {released}"
    );
}

fn books() -> (State, Ledger) {
    let topo = Arc::new(
        crossbar(4, &HostDefaults::thesis())
            .unwrap()
            .build()
            .unwrap(),
    );
    (State::new(topo.clone(), Policy::Thesis), Ledger::new(topo))
}

fn pattern(id: &str, nodes: &[&str], rate: u64) -> JobRequest {
    JobRequest {
        id: id.into(),
        owner: "o".into(),
        body: JobBody::Pattern {
            pattern: Pattern::AllToAll,
            nodes: nodes.iter().map(|s| s.to_string()).collect(),
            rate,
            class: "premium".into(),
        },
        lease_ms: None,
        wait_s: None,
        process: None,
    }
}

#[test]
fn bad_jobs_are_refused_in_one_line_and_hold_nothing() {
    let (mut st, empty) = books();
    let cases: [(JobRequest, &str); 5] = [
        (
            pattern("a", &["n0", "n9"], 1_000_000),
            "no node 'n9' in the topology",
        ),
        (pattern("a", &["n0", "n1"], 0), "rate must be 1..="),
        (
            pattern("a", &["n0", "n1"], 100_000_000),
            "> Bmax 81.8 MB/s of node n0",
        ),
        (pattern("a b", &["n0", "n1"], 1), "not allowed"),
        (pattern("a", &["n0", "n0"], 1), "listed twice"),
    ];
    for (req, want) in cases {
        let e = super::job::prepare(&empty, req, 1000, None).unwrap_err();
        let m = e.to_string();
        assert!(m.contains(want) && !m.contains('\n'), "{want}: {m}");
        assert!(e.code().http_status() / 100 == 4, "{m}");
    }
    // A duplicate id with other contents: a conflict naming the difference; the first
    // job is still held, alone.
    let p =
        super::job::prepare(&empty, pattern("j", &["n0", "n1"], 5_000_000), 1000, None).unwrap();
    assert!(matches!(
        st.reserve_job(p, Instant::now()).unwrap().decision,
        JobVerdict::Granted(_)
    ));
    let q =
        super::job::prepare(&empty, pattern("j", &["n0", "n1"], 6_000_000), 1000, None).unwrap();
    let e = st.reserve_job(q, Instant::now()).unwrap_err();
    assert_eq!(e.code(), crate::protocol::ErrorCode::Conflict);
    assert!(
        e.to_string()
            .contains("rate is 5000000 B/s, not 6000000 B/s"),
        "{e}"
    );
    // The same contents again: the same answer, nothing new written.
    let r =
        super::job::prepare(&empty, pattern("j", &["n0", "n1"], 5_000_000), 1000, None).unwrap();
    let out = st.reserve_job(r, Instant::now()).unwrap();
    assert!(matches!(out.decision, JobVerdict::Granted(_)) && out.db.is_none());
    assert_eq!(st.job_count(), 1);
}

#[test]
fn a_job_that_never_fits_says_so_and_a_lease_that_runs_out_frees_the_job() {
    let (mut st, empty) = books();
    // 3 senders into each node at 30 MB/s: 90 MB/s > the 81.8 MB/s receive peak.
    let p = super::job::prepare(
        &empty,
        pattern("big", &["n0", "n1", "n2", "n3"], 30_000_000),
        50,
        None,
    )
    .unwrap();
    let JobVerdict::Rejected(s) = st.reserve_job(p, Instant::now()).unwrap().decision else {
        panic!("granted")
    };
    assert!(s.never_fits && s.short_by > 0, "{s:?}");
    let t0 = Instant::now();
    let p = super::job::prepare(
        &empty,
        pattern("small", &["n0", "n1"], 10_000_000),
        50,
        None,
    )
    .unwrap();
    st.reserve_job(p, t0).unwrap();
    assert!(st
        .expire(t0 + Duration::from_millis(40), Duration::from_secs(60))
        .is_empty());
    st.renew_job("small", "o", t0 + Duration::from_millis(40))
        .unwrap();
    assert!(st
        .expire(t0 + Duration::from_millis(80), Duration::from_secs(60))
        .is_empty());
    let gone = st.expire(t0 + Duration::from_millis(100), Duration::from_secs(60));
    assert!(matches!(&gone[..], [(DbOp::JobDelete(id), _)] if id == "small"));
    assert_eq!(st.job_count(), 0);
    for i in 0..st.ledger.resource_count() {
        assert!(st
            .ledger
            .reserved(qos_core::admission::ResourceId(i as u32))
            .is_zero());
    }
}
