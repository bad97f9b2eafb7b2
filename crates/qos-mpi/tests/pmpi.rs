//! The PMPI library on each MPI implementation the crate was built for, without a
//! testbed: the keyvals exist after MPI_Init (C, MPI-1 calls and mpi4py), a request
//! goes to the agent named by CLUSTERQOS_AGENT_SOCKET, and when there is none the
//! status is "failed" with the reason, and delete clears it. The MPI-level traffic under
//! real grants is `reproduce gulati --real --backend kernel` (crates/clusterqos/tests/
//! reproduce_real_mpi.rs).

mod common;

use std::process::Command;

fn builds() -> Vec<qos_mpi::Build> {
    let b = qos_mpi::builds();
    assert!(
        !b.is_empty(),
        "the qos-mpi build found no MPI compiler wrapper: install openmpi-bin libopenmpi-dev \
         (or mpich libmpich-dev) and rebuild"
    );
    b
}

/// `mpirun` of `b` with two local ranks and the clusterqos environment, its agent
/// socket one that does not exist.
fn mpirun(b: &qos_mpi::Build, program: &[&str]) -> Command {
    let mut c = common::mpirun(b, &["CLUSTERQOS_AGENT_SOCKET"]);
    c.env("CLUSTERQOS_AGENT_SOCKET", "/nonexistent/agent.sock")
        .args(program);
    c
}

#[test]
fn an_unknown_implementation_is_named_with_the_known_ones() {
    let e = qos_mpi::build_into("lam", &std::env::temp_dir()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown MPI implementation 'lam' (known: openmpi, mpich, mpi)"
    );
}

/// Tests that need an MPI implementation and the C compiler its wrapper drives.
mod cc {
    use super::*;

    /// Without an agent, a request made through either attribute API fails and says
    /// why, and the job still runs.
    fn without_an_agent_requests_fail_and_say_why(b: &qos_mpi::Build) {
        for api in [&[][..], &["--mpi1"][..]] {
            let bench = b.bench();
            let mut args = vec![
                bench.to_str().unwrap(),
                "--secs",
                "0.5",
                "--warm",
                "0",
                "--rates",
                "1000000",
            ];
            args.extend_from_slice(api);
            let o = mpirun(b, &args).output().unwrap();
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success(),
                "{} {api:?}: {}{}",
                b.implementation,
                out,
                String::from_utf8_lossy(&o.stderr)
            );
            let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap();
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let p = &v["peers"][0];
            assert_eq!(p["status"], "failed", "{line}");
            let reason = p["reason"].as_str().unwrap();
            assert!(
                reason.contains("no clusterqos agent")
                    && reason.contains("/nonexistent/agent.sock"),
                "{}: {reason}",
                b.implementation
            );
            assert!(
                p["mpi_bytes_per_sec"].as_f64().unwrap() > 0.0,
                "the job still ran: {line}"
            );
        }
    }

    #[test]
    #[ignore = "needs MPI (Open MPI or MPICH, with its mpicc) and a C compiler"]
    fn pmpi_without_an_agent_a_request_fails_and_says_why_through_both_attribute_apis() {
        for b in builds() {
            without_an_agent_requests_fail_and_say_why(&b);
        }
    }

    /// An MPI installed after the crate was built: `find` builds for it at run time.
    #[test]
    #[ignore = "needs MPI (Open MPI or MPICH, with its mpicc) and a C compiler"]
    fn pmpi_a_build_made_at_run_time_works_like_the_crate_s_own_and_is_made_once() {
        let cache = tempfile::tempdir().unwrap();
        for b in builds() {
            let made = qos_mpi::build_into(b.implementation, cache.path()).unwrap();
            assert!(made.dir.starts_with(cache.path()), "{made:?}");
            let built_at = std::fs::metadata(made.library())
                .unwrap()
                .modified()
                .unwrap();
            without_an_agent_requests_fail_and_say_why(&made);
            // The program found its library beside it, not through the crate's build.
            let again = qos_mpi::build_into(b.implementation, cache.path()).unwrap();
            assert_eq!(again, made);
            let still = std::fs::metadata(again.library())
                .unwrap()
                .modified()
                .unwrap();
            assert_eq!(still, built_at, "built twice");
        }
        // Nothing half-built left behind.
        for e in std::fs::read_dir(cache.path()).unwrap() {
            let name = e.unwrap().file_name();
            assert!(!name.to_string_lossy().starts_with('.'), "{name:?} left");
        }
    }

    #[test]
    #[ignore = "needs MPI (Open MPI or MPICH, with its mpicc), a C compiler and mpi4py"]
    fn pmpi_mpi4py_programs_name_the_keyvals_from_the_python_module() {
        let script = r#"
import sys
import clusterqos_mpi
from mpi4py import MPI
c = MPI.COMM_WORLD
assert clusterqos_mpi.BANDWIDTH != MPI.KEYVAL_INVALID
assert clusterqos_mpi.status(c) == ("none", 0, ""), clusterqos_mpi.status(c)
c.Set_attr(clusterqos_mpi.BANDWIDTH, 20_000_000)
state, rate, reason = clusterqos_mpi.status(c)
assert state == "failed" and "no clusterqos agent" in reason, (state, reason)
assert c.Get_attr(clusterqos_mpi.BANDWIDTH) == 20_000_000
c.Delete_attr(clusterqos_mpi.BANDWIDTH)
assert clusterqos_mpi.status(c)[0] == "none"
# One write per rank (print("ok", rank) makes several when PYTHONUNBUFFERED is set,
# and mpirun interleaved the two ranks' pieces: "okok 0\n 1").
sys.stdout.write(f"rank-{c.rank}-ok\n")
sys.stdout.flush()
"#;
        // The interpreter with mpi4py: scripts/test's virtual environment, else python3.
        let python = std::env::var("CLUSTERQOS_PYTHON").unwrap_or_else(|_| "python3".into());
        let ok = Command::new(&python).args(["-c", "import mpi4py"]).output();
        assert!(
            ok.is_ok_and(|o| o.status.success()),
            "needs mpi4py in {python} (scripts/test installs python/requirements-mpi.txt \
             into target/pyvenv and sets CLUSTERQOS_PYTHON)"
        );
        // mpi4py is built against one MPI: Debian's default mpicc (Open MPI when both are in).
        let b = qos_mpi::build("openmpi")
            .or_else(|| builds().into_iter().next())
            .unwrap();
        let o = mpirun(&b, &[&python, "-c", script]).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        for rank in ["rank-0-ok", "rank-1-ok"] {
            assert!(out.contains(rank), "{rank} missing: {out}");
        }
    }
}
