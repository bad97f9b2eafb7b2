//! The job attribute (`CQ_MPI_JOB_BANDWIDTH`, docs/jobs.md) on a real MPI library and
//! a real manager with four agents in this process: two mpi4py jobs on COMM_WORLD, each
//! with one rank on each side of a 60 MB/s trunk. The first reserves 40 MB/s per pair
//! and holds it; the second asks the same while the first holds, and cannot fit: every
//! rank of it gets the same refusal, naming the trunk short by 20 MB/s, and it holds
//! nothing. The first job is released by MPI_Finalize.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qos_runtime::agent::{self, AgentHandle};
use qos_runtime::auth::Secret;
use qos_runtime::manager::{self, ManagerHandle};

const TOPOLOGY: &str = r#"
[defaults]
t = "48us"
bmax = "81.8MB/s"
link = "160MB/s"

[[switch]]
name = "s0"
ports = 8

[[switch]]
name = "s1"
ports = 8

[[host]]
name = "a"
port = "s0:0"

[[host]]
name = "b"
port = "s0:1"

[[host]]
name = "c"
port = "s1:0"

[[host]]
name = "d"
port = "s1:1"

[[link]]
a = "s0:7"
b = "s1:7"
capacity = "60MB/s"
"#;

const SECRET: &str = "test-secret-0123456789abcdef";

/// Each rank sets the attribute on COMM_WORLD, prints what it got as one JSON line,
/// waits for `hold` to exist (if not "-"), and ends without deleting the attribute:
/// MPI_Finalize releases the job.
const SCRIPT: &str = r#"
import json, os, sys, time
import clusterqos_mpi
from mpi4py import MPI
c = MPI.COMM_WORLD
c.Set_attr(clusterqos_mpi.JOB_BANDWIDTH, int(sys.argv[1]))
state, rate, reason = clusterqos_mpi.status(c)
sys.stdout.write(json.dumps({"rank": c.rank, "state": state, "rate": rate, "reason": reason}) + "\n")
sys.stdout.flush()
hold = sys.argv[2]
while hold != "-" and not os.path.exists(hold):
    time.sleep(0.05)
c.Barrier()
"#;

struct Cluster {
    _rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    master: ManagerHandle,
    _agents: Vec<AgentHandle>,
}

impl Cluster {
    fn start() -> Cluster {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let topo = qos_core::topology::file::load("test.toml", TOPOLOGY).unwrap();
        let config = manager::Config::new(
            Arc::new(topo),
            dir.path().join("manager.db"),
            Secret::new(SECRET).unwrap(),
        );
        let master = rt
            .block_on(async {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                manager::start(config, l).await
            })
            .unwrap();
        let url = format!("http://{}", master.addr);
        let mut agents = Vec::new();
        for n in ["a", "b", "c", "d"] {
            let config = agent::Config::new(
                n,
                &url,
                Secret::new(SECRET).unwrap(),
                dir.path().join(format!("{n}.sock")),
            );
            agents.push(rt.block_on(agent::start(config)).unwrap());
        }
        let c = Cluster {
            _rt: rt,
            dir,
            master,
            _agents: agents,
        };
        for n in ["a", "b", "c", "d"] {
            let sock = c.socket(n);
            assert!(
                wait(|| qos_runtime::client::Client::connect(&sock)
                    .and_then(|mut x| x.node())
                    .is_ok()),
                "agent {n} never served"
            );
        }
        c
    }

    fn socket(&self, node: &str) -> PathBuf {
        self.dir.path().join(format!("{node}.sock"))
    }

    /// The jobs the manager holds, by id.
    fn jobs(&self) -> Vec<String> {
        let st = self.master.term().unwrap().state.lock().unwrap().jobs();
        st.into_iter().map(|j| j.id).collect()
    }

    /// Bandwidth reserved, summed over every resource.
    fn reserved(&self) -> u64 {
        let st = self.master.term().unwrap().state.lock().unwrap().status();
        st.resources.iter().map(|r| r.reserved).sum()
    }
}

fn wait(mut ok: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ok()
}

/// Two ranks of `SCRIPT` under Open MPI, rank 0 talking to `sockets.0`'s agent and
/// rank 1 to `sockets.1`'s (as if each ran on that node).
fn job(
    b: &qos_mpi::Build,
    python: &str,
    sockets: (&Path, &Path),
    rate: u64,
    hold: &str,
) -> Command {
    let mut c = common::mpirun(b, &["CQ_SOCK_0", "CQ_SOCK_1"]);
    c.env("CQ_SOCK_0", sockets.0).env("CQ_SOCK_1", sockets.1);
    let pick = r#"r=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}; eval "export CLUSTERQOS_AGENT_SOCKET=\$CQ_SOCK_$r"; exec "$@""#;
    c.args(["sh", "-c", pick, "sh", python, "-c", SCRIPT])
        .arg(rate.to_string())
        .arg(hold);
    c
}

fn answers(lines: &[String]) -> Vec<serde_json::Value> {
    let mut v: Vec<serde_json::Value> = lines
        .iter()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    v.sort_by_key(|a| a["rank"].as_i64());
    v
}

/// Tests that need an MPI implementation and the C compiler its wrapper drives.
mod cc {
    use super::*;

    #[test]
    #[ignore = "needs Open MPI (with its mpicc), a C compiler and mpi4py"]
    fn pmpi_mpi4py_two_jobs_on_comm_world_one_holds_all_the_other_nothing_and_every_rank_agrees() {
        let python = std::env::var("CLUSTERQOS_PYTHON").unwrap_or_else(|_| "python3".into());
        let ok = Command::new(&python).args(["-c", "import mpi4py"]).output();
        assert!(
            ok.is_ok_and(|o| o.status.success()),
            "needs mpi4py in {python} (scripts/test sets CLUSTERQOS_PYTHON)"
        );
        let b = qos_mpi::build("openmpi").expect("the qos-mpi build found no Open MPI");
        let c = Cluster::start();
        let hold = c.dir.path().join("go");
        let hold_s = hold.to_str().unwrap();
        let (a, cc) = (c.socket("a"), c.socket("c"));
        let mut first = job(&b, &python, (&a, &cc), 40_000_000, hold_s)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let out = first.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut got = Vec::new();
        while answers(&got).len() < 2 {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(l) => got.push(l),
                Err(_) => {
                    let _ = first.kill();
                    let o = first.wait_with_output().unwrap();
                    panic!("first job: {got:?} {}", String::from_utf8_lossy(&o.stderr));
                }
            }
        }
        let one = answers(&got);
        for r in &one {
            assert_eq!(r["state"], "granted", "{one:?}");
            assert_eq!(r["rate"], 40_000_000, "{one:?}");
        }
        let held = c.jobs();
        assert_eq!(held.len(), 1, "{held:?}");
        assert!(held[0].starts_with("mpi-"), "{held:?}");
        // a <-> c at 40 MB/s each way: 40 MB/s on each direction of the trunk and the
        // four host links crossed.
        let alone = c.reserved();
        assert!(alone > 0);

        let (bs, ds) = (c.socket("b"), c.socket("d"));
        let o = job(&b, &python, (&bs, &ds), 40_000_000, "-")
            .output()
            .unwrap();
        let lines: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(String::from)
            .collect();
        assert!(
            o.status.success(),
            "{lines:?}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let two = answers(&lines);
        assert_eq!(two.len(), 2, "{lines:?}");
        for r in &two {
            assert_eq!(r["state"], "rejected", "{two:?}");
            assert_eq!(r["rate"], 0, "{two:?}");
        }
        assert_eq!(
            two[0]["reason"], two[1]["reason"],
            "every rank the same answer"
        );
        let reason = two[0]["reason"].as_str().unwrap();
        assert!(
            reason.contains("switch") && reason.contains("short by 20"),
            "{reason}"
        );
        assert_eq!(c.jobs(), held, "the refused job holds nothing");
        assert_eq!(c.reserved(), alone);

        std::fs::write(&hold, b"").unwrap();
        let o = first.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            wait(|| c.jobs().is_empty()),
            "MPI_Finalize left {:?}",
            c.jobs()
        );
        assert_eq!(c.reserved(), 0);
    }
}
