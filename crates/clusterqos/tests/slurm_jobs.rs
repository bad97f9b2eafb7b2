//! Slurm jobs with network reservations on the namespace testbed (`docs/jobs.md`,
//! "Slurm"): a real slurmctld, one `slurmd -N` per host in the host's network namespace,
//! munge, the SPANK plugin built from `contrib/slurm` with the system C compiler against
//! Debian's headers, and the controller's prolog and epilog scripts from there.
//! Checked from outside the programs: the jobs' states and comments (`squeue`) and the
//! reservations the manager holds (`clusterqos job list`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::testbed::{eventually, run, text, Testbed};
use common::BIN;

/// The repository's `contrib/slurm`.
fn contrib() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/slurm")
}

/// What this machine lacks to run Slurm on the testbed, if anything.
fn slurm_missing() -> Option<String> {
    let tools = [
        "slurmctld",
        "slurmd",
        "munged",
        "sbatch",
        "squeue",
        "scontrol",
        "cc",
    ];
    let missing: Vec<&str> = tools
        .into_iter()
        .filter(|t| {
            Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .map(|o| !o.status.success())
                .unwrap_or(true)
        })
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "{} (apt-get install slurmctld slurmd slurm-client munge libslurm-dev gcc)",
            missing.join(", ")
        ));
    }
    if !Path::new("/usr/include/slurm/spank.h").exists() {
        return Some("/usr/include/slurm/spank.h (apt-get install libslurm-dev)".into());
    }
    None
}

/// A Slurm cluster on a testbed: munged, slurmctld in h0's namespace, `slurmd -N hI`
/// in each other host's. Stopped when dropped (jobs cancelled, daemons by pid file).
struct Slurm<'a> {
    tb: &'a Testbed,
    dir: PathBuf,
    nodes: Vec<String>,
}

impl<'a> Slurm<'a> {
    fn start(tb: &'a Testbed, hosts: usize, on_refusal: &str) -> Slurm<'a> {
        let dir = tb.dir.path().join("slurm");
        for d in ["state", "log", "bin"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let bin = dir.join("bin");
        let o = run(Command::new("cc")
            .args(["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(bin.join("clusterqos_spank.so"))
            .arg(contrib().join("clusterqos_spank.c")));
        assert!(
            o.status.success(),
            "building the SPANK plugin: {}",
            text(&o)
        );
        for s in ["prolog-slurmctld", "epilog-slurmctld"] {
            std::fs::copy(contrib().join(s), bin.join(s)).unwrap();
        }
        let d = dir.display();
        std::fs::write(
            bin.join("clusterqos-slurm.env"),
            format!(
                "CQ_MANAGER={}\nCQ_SECRET={}\nCQ_BIN={BIN}\nCQ_SLURMCTLD_PIDFILE={d}/slurmctld.pid\n\
                 CQ_ON_REFUSAL={on_refusal}\nCQ_KEEPER_LOG={d}/log/keeper.log\nSLURM_CONF={d}/slurm.conf\n",
                tb.manager(),
                tb.secret().display()
            ),
        )
        .unwrap();

        let key: Vec<u8> = (0..1024).map(|i| (i * 7919 % 251) as u8 ^ 0x5a).collect();
        std::fs::write(dir.join("munge.key"), key).unwrap();
        set_mode(&dir.join("munge.key"), 0o600);
        let o = run(Command::new("munged")
            .arg("--force")
            .arg(format!("--socket={d}/munge.sock"))
            .arg(format!("--key-file={d}/munge.key"))
            .arg(format!("--pid-file={d}/munged.pid"))
            .arg(format!("--log-file={d}/log/munged.log"))
            .arg(format!("--seed-file={d}/munged.seed")));
        assert!(o.status.success(), "munged: {}", text(&o));

        std::fs::write(
            dir.join("plugstack.conf"),
            format!("required {}\n", bin.join("clusterqos_spank.so").display()),
        )
        .unwrap();
        // slurmctld serves only where SlurmctldHost names its own (short) host name.
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        let hostname = hostname
            .trim()
            .split('.')
            .next()
            .unwrap_or_default()
            .to_string();
        let nodes: Vec<String> = (1..=hosts).map(|i| format!("h{i}")).collect();
        let mut conf = format!(
            "ClusterName=cqtest\nSlurmctldHost={}({})\n\
             SlurmctldPort=6817\nSlurmdPort=6818\nSlurmUser=root\nSlurmdUser=root\n\
             AuthType=auth/munge\nAuthInfo=socket={d}/munge.sock,cred_expire=5\nCredType=cred/munge\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool-%n\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd-%n.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd-%n.log\n\
             ProctrackType=proctrack/pgid\nTaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
             SchedulerType=sched/builtin\nSchedulerParameters=sched_interval=2\n\
             MpiDefault=none\nReturnToService=2\nInactiveLimit=0\nMinJobAge=300\n\
             PlugStackConfig={d}/plugstack.conf\n\
             PrologSlurmctld={d}/bin/prolog-slurmctld\nEpilogSlurmctld={d}/bin/epilog-slurmctld\n",
            hostname,
            tb.addr(0)
        );
        for (i, n) in nodes.iter().enumerate() {
            conf += &format!(
                "NodeName={n} NodeAddr={} CPUs=2 State=UNKNOWN\n",
                tb.addr(i + 1)
            );
        }
        conf += &format!(
            "PartitionName=test Nodes={} Default=YES MaxTime=INFINITE State=UP\n",
            nodes.join(",")
        );
        std::fs::write(dir.join("slurm.conf"), conf).unwrap();

        let slurm = Slurm { tb, dir, nodes };
        let o = run(slurm.in_ns("h0", "slurmctld").arg("-i"));
        assert!(o.status.success(), "slurmctld: {}", text(&o));
        for n in &slurm.nodes {
            std::fs::create_dir_all(slurm.dir.join(format!("spool-{n}"))).unwrap();
            // nsenter keeps the machine's /sys (slurmd needs its cgroup mount), which
            // `ip netns exec` would replace.
            let o = run(Command::new("nsenter")
                .arg(format!("--net=/run/netns/{}", tb.ns(n)))
                .args(["slurmd", "-N", n])
                .env("SLURM_CONF", slurm.dir.join("slurm.conf")));
            assert!(o.status.success(), "slurmd {n}: {}", text(&o));
        }
        assert!(
            eventually(Duration::from_secs(30), || {
                let o = run(slurm.in_ns("h0", "sinfo").args(["-h", "-o", "%t"]));
                let s = String::from_utf8_lossy(&o.stdout).into_owned();
                !s.is_empty() && s.lines().all(|l| l.trim() == "idle")
            }),
            "the nodes never became idle: {}",
            slurm.log("slurmctld.log")
        );
        slurm
    }

    /// `CMD` in `host`'s namespace, with this cluster's slurm.conf.
    fn in_ns(&self, host: &str, cmd: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.tb.ns(host), cmd])
            .env("SLURM_CONF", self.dir.join("slurm.conf"));
        c
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join("log").join(name)).unwrap_or_default()
    }

    /// Submits a batch job over every node (one task each) that runs until `stop(id)`;
    /// returns its id.
    fn submit(&self, bandwidth: &str) -> u32 {
        let script = self.dir.join("job.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nwhile [ ! -e {}/stop-$SLURM_JOB_ID ]; do sleep 0.2; done\n",
                self.dir.display()
            ),
        )
        .unwrap();
        let o = run(self
            .in_ns("h0", "sbatch")
            .arg(format!("--network-bandwidth={bandwidth}"))
            .args(["--parsable", "--ntasks-per-node=1", "-N"])
            .arg(self.nodes.len().to_string())
            .arg(format!("--output={}/out-%j.txt", self.dir.display()))
            .arg(&script));
        assert!(o.status.success(), "sbatch: {}", text(&o));
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("sbatch: {}", text(&o)))
    }

    fn stop(&self, job: u32) {
        std::fs::write(self.dir.join(format!("stop-{job}")), "").unwrap();
    }

    /// (state, reason, comment) of a job as `squeue` shows them.
    fn squeue(&self, job: u32) -> (String, String, String) {
        let o = run(self
            .in_ns("h0", "squeue")
            .args(["-h", "-t", "all", "-o", "%T|%r|%k", "-j"])
            .arg(job.to_string()));
        let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let mut f = s.splitn(3, '|').map(String::from);
        (
            f.next().unwrap_or_default(),
            f.next().unwrap_or_default(),
            f.next().unwrap_or_default(),
        )
    }

    fn wait_state(&self, job: u32, state: &str, limit: Duration) -> (String, String, String) {
        let mut last = Default::default();
        let ok = eventually(limit, || {
            last = self.squeue(job);
            last.0 == state
        });
        assert!(
            ok,
            "job {job} never {state}: last {last:?}; controller log:\n{}",
            self.log("slurmctld.log")
        );
        last
    }

    fn pid(&self, file: &str) -> Option<i32> {
        std::fs::read_to_string(self.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Kills slurmctld with SIGKILL (no epilog, no cleanup).
    fn kill_controller(&self) {
        let pid = self.pid("slurmctld.pid").expect("slurmctld's pid file");
        // SAFETY: the controller this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

impl Drop for Slurm<'_> {
    fn drop(&mut self) {
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            if let Some(id) = e.file_name().to_str().and_then(|n| n.strip_prefix("out-")) {
                let _ = std::fs::write(
                    self.dir
                        .join(format!("stop-{}", id.trim_end_matches(".txt"))),
                    "",
                );
            }
        }
        let _ = run(self.in_ns("h0", "scancel").args(["--full", "-p", "test"]));
        std::thread::sleep(Duration::from_secs(1));
        let mut files: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("slurmd-{n}.pid"))
            .collect();
        files.extend(["slurmctld.pid".into(), "munged.pid".into()]);
        for f in files {
            if let Some(pid) = self.pid(&f) {
                // SAFETY: daemons this test started (their pid files are in its directory).
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        std::thread::sleep(Duration::from_secs(1));
        // What is left of the daemons' children (batch steps, the prolog's lease
        // keepers) in this testbed's namespaces, and only there.
        let hosts = std::iter::once("h0".to_string()).chain(self.nodes.iter().cloned());
        for h in hosts {
            let o = run(Command::new("ip").args(["netns", "pids", &self.tb.ns(&h)]));
            for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                let cmd =
                    std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let ours = cmd.starts_with("slurm") || cmd.contains("--keep-while-pid");
                if let (true, Ok(pid)) = (ours, pid.parse::<i32>()) {
                    // SAFETY: a Slurm process or lease keeper in this test's namespaces.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Needs root (namespaces, daemons) and Slurm: run by `scripts/test` as root
/// (`-- --ignored root::`), which installs Slurm and munge or says it skipped this.
mod root {
    use super::*;

    #[test]
    #[ignore = "needs root: network namespaces; and slurmctld, slurmd, munge, libslurm-dev"]
    fn slurm_jobs_reserve_all_or_nothing_wait_pending_and_are_released_at_end_cancel_and_controller_death(
    ) {
        if let Some(what) = slurm_missing() {
            panic!("needs {what}");
        }
        let tb = Testbed::up(3, "sl", "10.77.38", "dataplane");
        let slurm = Slurm::start(&tb, 2, "requeue");
        let held = || tb.jobs_held();
        let id = |j: u32| format!("slurm-cqtest-{j}");

        // A bad request fails at submission, in one line, and makes no job.
        let o =
            run(slurm
                .in_ns("h0", "sbatch")
                .args(["--network-bandwidth=3XB/s", "--wrap", "true"]));
        assert!(!o.status.success(), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--network-bandwidth: the rate '3XB/s' has no known unit"),
            "{err}"
        );

        // h1 -> h2 at 3 MB/s fits alone (h1 sends at most 4.62 MB/s), twice does not.
        let a = slurm.submit("3MB/s:one-to-many");
        let (_, _, comment) = slurm.wait_state(a, "RUNNING", Duration::from_secs(30));
        assert!(comment.contains("network reserved"), "{comment}");
        assert_eq!(held(), [id(a)]);

        // The second waits, pending, holding nothing, its comment naming what is short.
        let b = slurm.submit("3MB/s:one-to-many");
        let mut last = Default::default();
        assert!(
            eventually(Duration::from_secs(30), || {
                last = slurm.squeue(b);
                last.0 == "PENDING" && last.2.contains("waiting for network")
            }),
            "{last:?}"
        );
        assert!(
            last.2.contains("node h1 send is short by 1.376 MB/s"),
            "{last:?}"
        );
        // Past the manager's 10 s lease the first job is still held (the prolog's keeper
        // renews it while the controller lives) and the second still waits, holding
        // nothing; it has been retried meanwhile (requeued every few seconds).
        std::thread::sleep(Duration::from_secs(15));
        let keeper = slurm.log("keeper.log");
        assert!(
            keeper.contains("keeping the job's lease") && keeper.contains(&id(a)),
            "job {a}'s keeper never ran; its log: {keeper}"
        );
        assert_eq!(held(), [id(a)]);
        assert_eq!(slurm.squeue(b).0, "PENDING");
        assert_eq!(slurm.squeue(a).0, "RUNNING");
        let refusals = slurm
            .log("slurmctld.log")
            .matches(&format!("JobId={b} prolog exit status 1"))
            .count();
        assert!(refusals >= 2, "job {b} tried {refusals} times");

        // The first ends: its epilog releases it; the second then gets all of its flows.
        let ended = Instant::now();
        slurm.stop(a);
        let (_, _, comment) = slurm.wait_state(b, "RUNNING", Duration::from_secs(60));
        eprintln!(
            "job {b} started {:.1} s after job {a} was told to end",
            ended.elapsed().as_secs_f64()
        );
        assert!(comment.contains("network reserved"), "{comment}");
        assert_eq!(held(), [id(b)]);

        // scancel releases at once (the epilog), not after a lease.
        let o = run(slurm.in_ns("h0", "scancel").arg(b.to_string()));
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            eventually(Duration::from_secs(8), || held().is_empty()),
            "{:?}",
            held()
        );

        // A job that cannot fit even alone is not retried forever: it fails, saying why.
        let c = slurm.submit("3MB/s:all-to-all");
        let mut last = Default::default();
        assert!(
            eventually(Duration::from_secs(30), || {
                last = slurm.squeue(c);
                last.2.contains("never fits") && last.0 != "PENDING" && last.0 != "RUNNING"
            }),
            "{last:?}"
        );
        assert!(held().is_empty(), "{:?}", held());

        // A controller killed with SIGKILL runs no epilog: its jobs' reservations are
        // freed by their lease (10 s, plus up to a third of it to notice).
        let d = slurm.submit("2MB/s:one-to-many");
        slurm.wait_state(d, "RUNNING", Duration::from_secs(30));
        assert_eq!(held(), [id(d)]);
        slurm.kill_controller();
        let killed = Instant::now();
        assert!(
            eventually(Duration::from_secs(25), || held().is_empty()),
            "still held: {:?}",
            held()
        );
        let freed = killed.elapsed();
        eprintln!(
            "job {d}'s reservation freed {:.1} s after the controller was killed",
            freed.as_secs_f64()
        );
        assert!(freed >= Duration::from_secs(5), "freed after {freed:?}");
    }
}
