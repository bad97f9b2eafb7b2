//! Jobs through a node's agent (`docs/jobs.md`): an application reserves a job on its
//! agent's socket, held by its process; the master pushes the job to the agents of
//! the nodes it names (and only those); the holder's agent reports the process alive
//! in its heartbeats, so the job lives as long as the process and is freed one lease
//! after it dies; release through the agent by the same user; a rejection names the
//! resource short; joining a job's cgroup needs an agent that classifies by cgroup.

mod common;

use std::process::{Child, Command};
use std::time::Duration;

use qos_core::besteffort::Policy;
use qos_runtime::client::ClientError;
use qos_runtime::protocol::job::{JobBody, JobDecision, Pattern};
use qos_runtime::protocol::{ErrorCode, LocalJob};

use common::{Cluster, TWO_SWITCHES};

fn job(id: &str, nodes: &[&str], rate: u64) -> LocalJob {
    LocalJob {
        id: id.into(),
        body: JobBody::Pattern {
            pattern: Pattern::AllToAll,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            rate,
            class: "premium".into(),
        },
        lease_ms: None,
        wait_s: None,
    }
}

/// A process to hold a job, killed when dropped.
struct Holder(Child);

impl Holder {
    fn start() -> Holder {
        Holder(Command::new("sleep").arg("60").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.kill();
    }
}

fn held(c: &Cluster) -> Vec<String> {
    let m = c.master.as_ref().unwrap();
    let st = m.term().unwrap().state.lock().unwrap().jobs();
    st.into_iter().map(|j| j.id).collect()
}

#[test]
fn a_job_reserved_through_an_agent_reaches_its_nodes_and_lives_as_long_as_its_process() {
    // A 600 ms lease: agents send heartbeats every 200 ms.
    let mut c = Cluster::start(TWO_SWITCHES, Policy::Thesis, Duration::from_millis(600));
    for n in ["a", "b", "c", "d"] {
        c.agent(n);
    }
    let mut holder = Holder::start();
    let mut client = c.client("a");
    client.on_behalf_of(holder.pid());
    let d = client
        .reserve_job(job("run-1", &["a", "b", "c"], 5_000_000))
        .unwrap();
    let JobDecision::Granted(info) = d else {
        panic!("{d:?}")
    };
    assert_eq!(info.flow_count, 6);
    assert_eq!(info.owner, format!("uid:{}@a", unsafe { libc::getuid() }));
    assert_eq!(
        info.process.as_ref().map(|(n, o)| (n.as_str(), o.pid)),
        Some(("a", holder.pid()))
    );
    // Pushed to the agents of the nodes it names, not to the others.
    for n in ["a", "b", "c"] {
        assert!(
            c.wait(|| c.table(n).jobs.contains_key("run-1")),
            "agent {n} never heard of the job"
        );
    }
    assert!(!c.table("d").jobs.contains_key("run-1"));
    // a's part: 5 MB/s to each of b and c.
    let part = c.table("a").jobs["run-1"].body.part("a");
    assert_eq!(
        part.iter()
            .map(|r| (r.dst.as_str(), r.rate))
            .collect::<Vec<_>>(),
        [("b", 5_000_000), ("c", 5_000_000)]
    );
    // The holder lives: its agent's heartbeats keep the job well past its lease.
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(held(&c), ["run-1"]);
    // The same id and contents again: the same answer (an idempotent retry).
    let again = client
        .reserve_job(job("run-1", &["a", "b", "c"], 5_000_000))
        .unwrap();
    assert!(matches!(again, JobDecision::Granted(_)), "{again:?}");
    // The holder dies: one lease later the job is gone, from the master and the nodes.
    holder.kill();
    assert!(
        c.wait(|| held(&c).is_empty()),
        "the dead holder's job was kept"
    );
    for n in ["a", "b", "c"] {
        assert!(
            c.wait(|| !c.table(n).jobs.contains_key("run-1")),
            "agent {n} kept the released job"
        );
    }
    assert_eq!(
        c.status().resources.iter().map(|r| r.reserved).sum::<u64>(),
        0
    );
}

#[test]
fn a_job_is_released_through_its_agent_and_a_refusal_names_the_resource_short() {
    let mut c = Cluster::start(TWO_SWITCHES, Policy::Thesis, Duration::from_secs(30));
    for n in ["a", "b"] {
        c.agent(n);
    }
    let holder = Holder::start();
    let mut client = c.client("a");
    client.on_behalf_of(holder.pid());
    // 40 MB/s each way over the 60 MB/s trunk, twice: the second does not fit.
    let one = job("one", &["a", "c"], 40_000_000);
    assert!(matches!(
        client.reserve_job(one).unwrap(),
        JobDecision::Granted(_)
    ));
    let d = client
        .reserve_job(job("two", &["b", "d"], 40_000_000))
        .unwrap();
    let JobDecision::Rejected { short, message, .. } = d else {
        panic!("{d:?}")
    };
    assert!(short.resource.starts_with("switch"), "{short:?}");
    assert_eq!(short.short_by, 20_000_000);
    assert!(message.contains("short by 20"), "{message}");
    assert_eq!(held(&c), ["one"]);
    // Only the user who reserved it, through the agent of the node it was reserved on.
    client.release_job("one").unwrap();
    assert!(held(&c).is_empty());
    assert!(c.wait(|| !c.table("a").jobs.contains_key("one")));
    let e = client.release_job("one").unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotFound), "{e}");
    // Bad input is refused before the master: one line, nothing held.
    let e = client.reserve_job(job("bad", &["a", "zz"], 1)).unwrap_err();
    assert!(matches!(e, ClientError::Refused(_)), "{e}");
    assert!(e.to_string().contains("zz"), "{e}");
    assert!(!e.to_string().contains('\n'));
    let e = client.reserve_job(job("..", &["a", "b"], 1)).unwrap_err();
    assert!(e.to_string().contains("not allowed"), "{e}");
    assert!(held(&c).is_empty());
    // This agent has no kernel backend: it does not classify by cgroup.
    let mut again = c.client("a");
    assert!(matches!(
        again
            .reserve_job(job("three", &["a", "b"], 1_000_000))
            .unwrap(),
        JobDecision::Granted(_)
    ));
    let e = again.join_job("three", 0).unwrap_err();
    assert!(
        e.to_string()
            .contains("does not tell jobs' traffic by cgroup"),
        "{e}"
    );
}
