//! Slurm jobs with network reservations on the namespace testbed (`docs/jobs.md`,
//! "Slurm"): a real slurmctld, one `slurmd -N` per host in the host's network namespace,
//! munge, the SPANK plugin built from `contrib/slurm` with the system C compiler against
//! Debian's headers, and the controller's prolog and epilog scripts from there.
//! Checked from outside the programs: the jobs' states and comments (`squeue`), the
//! reservations the manager holds (`clusterqos job list`), and a job's throughput as the
//! switch namespace counts it while an unreserved job floods the same link (the agents
//! run the kernel backend; the plugin puts the job's tasks in the job's cgroup).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::testbed::{eventually, run, text, Testbed};
use common::{Proc, BIN};

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
        "iperf3",
        "nft",
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
            "{} (apt-get install slurmctld slurmd slurm-client munge libslurm-dev gcc iperf3 nftables)",
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

        // Each node's tasks join their job's cgroup through that node's agent (named to
        // its slurmd by CLUSTERQOS_AGENT_SOCKET, below).
        std::fs::write(
            dir.join("plugstack.conf"),
            format!(
                "required {} join_cgroup\n",
                bin.join("clusterqos_spank.so").display(),
            ),
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
             MpiDefault=none\nReturnToService=2\nInactiveLimit=0\nMinJobAge=300\nKillWait=5\n\
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
                .env("SLURM_CONF", slurm.dir.join("slurm.conf"))
                .env(
                    "CLUSTERQOS_AGENT_SOCKET",
                    tb.dir.path().join(format!("{n}.agent.sock")),
                ));
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
        let nodes = self.nodes.len().to_string();
        self.submit_script(
            &["--ntasks-per-node=1", "-N", &nodes],
            &format!(
                "touch {0}/started-$SLURM_JOB_ID\n\
                 while [ ! -e {0}/stop-$SLURM_JOB_ID ]; do sleep 0.2; done",
                self.dir.display()
            ),
            Some(bandwidth),
        )
    }

    /// Submits batch job `script` (shell) with sbatch options `args`, asking for
    /// `bandwidth` if any; returns its id. Its output goes to `out-<id>.txt`.
    fn submit_script(&self, args: &[&str], script: &str, bandwidth: Option<&str>) -> u32 {
        let file = self.dir.join("job.sh");
        std::fs::write(&file, format!("#!/bin/sh\n{script}\n")).unwrap();
        let mut cmd = self.in_ns("h0", "sbatch");
        if let Some(b) = bandwidth {
            cmd.arg(format!("--network-bandwidth={b}"));
        }
        let o = run(cmd
            .arg("--parsable")
            .args(args)
            .arg(format!("--output={}/out-%j.txt", self.dir.display()))
            .arg(&file));
        assert!(o.status.success(), "sbatch: {}", text(&o));
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("sbatch: {}", text(&o)))
    }

    /// What job `job` wrote.
    fn output(&self, job: u32) -> String {
        std::fs::read_to_string(self.dir.join(format!("out-{job}.txt"))).unwrap_or_default()
    }

    /// Waits until the script of `job` (from `submit`) runs on its node.
    fn wait_started(&self, job: u32) {
        let marker = self.dir.join(format!("started-{job}"));
        assert!(
            eventually(Duration::from_secs(30), || marker.exists()),
            "job {job}'s script never ran: {:?}",
            self.squeue(job)
        );
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

    /// Starts `tool` (salloc or srun) in h0's namespace with `args`, running shell
    /// `script`; its standard error goes to `<tool>.err`, whose path is returned too.
    fn interactive(&self, tool: &str, args: &[&str], script: &str) -> (Proc, PathBuf) {
        let err = self.dir.join(format!("{tool}.err"));
        let child = self
            .in_ns("h0", tool)
            .args(args)
            .args(["sh", "-c", script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
        (Proc(child), err)
    }

    /// (id, state, comment) of the job named `name`, as `squeue` shows them.
    fn squeue_named(&self, name: &str) -> (String, String, String) {
        let o = run(self
            .in_ns("h0", "squeue")
            .args(["-h", "-t", "all", "-o", "%i|%T|%k", "-n", name]));
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
        for tool in ["salloc", "srun"] {
            let _ = std::fs::write(self.dir.join(format!("{tool}-stop")), "");
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
        // keepers) and of the commands salloc ran (they outlive a killed salloc) in this
        // testbed's namespaces, and only there.
        let dir = self.dir.display().to_string();
        let hosts = std::iter::once("h0".to_string()).chain(self.nodes.iter().cloned());
        for h in hosts {
            let o = run(Command::new("ip").args(["netns", "pids", &self.tb.ns(&h)]));
            for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                let cmd =
                    std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let ours = cmd.starts_with("slurm")
                    || cmd.contains("--keep-while-pid")
                    || cmd.contains(&dir);
                if let (true, Ok(pid)) = (ours, pid.parse::<i32>()) {
                    // SAFETY: a Slurm process, lease keeper or command naming this test's
                    // directory, in this test's namespaces.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
    }
}

/// Byte counters in the switch namespace, outside every program under test: on the
/// ingress of the switch's port from host `host` (what that host sends), one nftables
/// counter per TCP destination port.
struct SwitchCounters {
    ns: String,
}

impl SwitchCounters {
    fn install(tb: &Testbed, host: usize, ports: &[u16]) -> SwitchCounters {
        let c = SwitchCounters {
            ns: format!("{}-sw", tb.prefix),
        };
        let mut script = format!(
            "nft add table netdev cqcount\n\
             nft add chain netdev cqcount in '{{ type filter hook ingress device p{host} priority 0; }}'\n"
        );
        for p in ports {
            script +=
                &format!("nft add rule netdev cqcount in ip protocol tcp tcp dport {p} counter\n");
        }
        let o = run(Command::new("ip")
            .args(["netns", "exec", &c.ns, "sh", "-ec"])
            .arg(script));
        assert!(o.status.success(), "switch counters: {}", text(&o));
        c
    }

    /// Every port's (IP bytes, packets) counted so far, read at once: when the read
    /// started, how long it took (a loaded machine may take a while to run `nft`: the
    /// counters were read at some instant within), and the counts.
    fn read(&self, ports: &[u16]) -> (Instant, Duration, Vec<(u64, u64)>) {
        let at = Instant::now();
        let o = run(Command::new("ip").args([
            "netns", "exec", &self.ns, "nft", "list", "chain", "netdev", "cqcount", "in",
        ]));
        let took = at.elapsed();
        let t = String::from_utf8_lossy(&o.stdout);
        let counts = ports
            .iter()
            .map(|port| {
                let rule = format!("tcp dport {port} counter");
                t.lines()
                    .find(|l| l.contains(&rule))
                    .and_then(|l| {
                        let w: Vec<&str> = l.split_whitespace().collect();
                        let after =
                            |k: &str| w.get(w.iter().position(|x| *x == k)? + 1)?.parse().ok();
                        Some((after("bytes")?, after("packets")?))
                    })
                    .unwrap_or_else(|| panic!("no counter for port {port}: {}", text(&o)))
            })
            .collect();
        (at, took, counts)
    }
}

/// One reading of a stream's switch counter.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// When the read started.
    at: Instant,
    /// How long it took.
    took: Duration,
    /// IP bytes and packets counted.
    bytes: u64,
    packets: u64,
}

impl Sample {
    fn mid(&self) -> Instant {
        self.at + self.took / 2
    }
}

/// IP and TCP headers (with timestamps) of each packet the counters count, beyond its
/// payload: the counters see IP packets (1,500 B for a full one carrying 1,448 B).
const HEADERS: u64 = 52;

/// A stream's TCP payload rate over its steady part, from its counter's samples.
#[derive(Debug)]
struct Steady {
    /// B/s between the two samples taken as ends (by the middle of their reads).
    rate: f64,
    /// What the rate may be at most and at least, the counters having been read at any
    /// instant within those two reads.
    low: f64,
    high: f64,
    /// How long the reads taken as ends lasted.
    took: [Duration; 2],
    /// The rate between the first sample inside the steady part and the last, whatever
    /// their reads lasted (for comparison: what a slow read at an end does).
    any_ends: f64,
    /// Reads in the steady part, those that took over 50 ms, and the slowest one.
    reads: usize,
    slow_reads: usize,
    slowest: Duration,
}

/// A stream's TCP payload rate (B/s) from samples of its switch counter: over its steady
/// part, from 2 s after its first byte to 1 s before its last. Each end is the quickest
/// read within 1 s of the steady part's first (last) sample: the instant a read saw the
/// counters is known only to within that read's duration, which a loaded machine
/// stretches. The counter may hold earlier streams' bytes: counted from the first sample.
fn steady_rate(samples: &[Sample]) -> Steady {
    let (b0, p0) = (samples[0].bytes, samples[0].packets);
    let samples: Vec<Sample> = samples
        .iter()
        .map(|s| Sample {
            bytes: s.bytes - b0,
            packets: s.packets - p0,
            ..*s
        })
        .collect();
    let first = samples
        .iter()
        .find(|s| s.bytes > 0)
        .expect("the stream sent nothing");
    let last_bytes = samples.last().unwrap().bytes;
    let last = samples.iter().find(|s| s.bytes == last_bytes).unwrap();
    let from = first.mid() + Duration::from_secs(2);
    let to = last.mid() - Duration::from_secs(1);
    let second = Duration::from_secs(1);
    let inside: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.mid() >= from && s.mid() <= to)
        .collect();
    assert!(
        inside.len() >= 2,
        "{} samples in the steady part ({} in all)",
        inside.len(),
        samples.len()
    );
    let quickest = |near: &dyn Fn(&Sample) -> bool| {
        *inside
            .iter()
            .filter(|s| near(s))
            .min_by_key(|s| s.took)
            .unwrap()
    };
    let (i, j) = (inside[0], inside[inside.len() - 1]);
    let a = quickest(&|s| s.mid() <= i.mid() + second);
    let z = quickest(&|s| s.mid() + second >= j.mid());
    let payload =
        |a: &Sample, z: &Sample| ((z.bytes - a.bytes) - HEADERS * (z.packets - a.packets)) as f64;
    let secs = z.mid().duration_since(a.mid()).as_secs_f64();
    assert!(
        secs >= 4.0,
        "the stream's steady part lasted {secs:.1} s ({} samples)",
        samples.len()
    );
    Steady {
        rate: payload(a, z) / secs,
        low: payload(a, z) / (z.at + z.took).duration_since(a.at).as_secs_f64(),
        high: payload(a, z) / z.at.duration_since(a.at + a.took).as_secs_f64(),
        took: [a.took, z.took],
        any_ends: payload(i, j) / j.mid().duration_since(i.mid()).as_secs_f64(),
        slow_reads: inside
            .iter()
            .filter(|s| s.took > Duration::from_millis(50))
            .count(),
        reads: inside.len(),
        slowest: inside.iter().map(|s| s.took).max().unwrap(),
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
        let tb = Testbed::up(3, "sl", "10.77.38", "kernel");
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

        // h1 -> h2 at 3 MB/s fits alone (h1 sends at most 4.78 MB/s with the kernel backend), twice does not.
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
            last.2.contains("node h1 send is short by 1.218 MB/s"),
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
        // (CONFIGURING: caught while allocated again for a retry, its prolog running.)
        let retried = slurm.squeue(b).0;
        assert!(
            retried == "PENDING" || retried == "CONFIGURING",
            "job {b} is {retried}"
        );
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
        // (Once its script runs: a job cancelled while its step is still being set up
        // keeps its nodes until KillWait has passed.)
        slurm.wait_started(b);
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

        // salloc and srun take the option too (the plugin passes it on from their own
        // context, as from sbatch's): the allocation holds all of its flows while it
        // lives, its end releases them, and an srun's tasks run in the job's cgroup.
        // An interactive job that does not fit cannot wait pending (Slurm requeues only
        // batch jobs): it ends at once, holding nothing, its comment saying why.
        for tool in ["salloc", "srun"] {
            let started = slurm.dir.join(format!("{tool}-started"));
            let stop = slurm.dir.join(format!("{tool}-stop"));
            let script = format!(
                "if [ \"${{SLURM_PROCID:-0}}\" = 0 ]; then\n\
                 {{ echo $SLURM_JOB_ID; cat /proc/self/cgroup; }} >{0}.tmp && mv {0}.tmp {0}\n\
                 fi\n\
                 while [ ! -e {1} ]; do sleep 0.2; done",
                started.display(),
                stop.display()
            );
            let mut args = vec!["-N2", "--network-bandwidth=3MB/s:one-to-many"];
            if tool == "srun" {
                args.push("--ntasks-per-node=1");
            }
            let (mut child, err) = slurm.interactive(tool, &args, &script);
            let log = || std::fs::read_to_string(&err).unwrap_or_default();
            assert!(
                eventually(Duration::from_secs(40), || started.exists()),
                "{tool} never ran its command: {}",
                log()
            );
            let what = std::fs::read_to_string(&started).unwrap();
            let job: u32 = what.lines().next().unwrap_or_default().parse().unwrap();
            let (state, _, comment) = slurm.squeue(job);
            assert_eq!(state, "RUNNING", "{tool}: {}", log());
            assert!(comment.contains("network reserved"), "{tool}: {comment}");
            assert_eq!(held(), [id(job)], "{tool}");
            if tool == "srun" {
                assert!(
                    what.contains(&format!("0::/clusterqos/{}\n", id(job))),
                    "srun's task is not in its job's cgroup: {what}"
                );
            }
            if tool == "salloc" {
                let o = run(slurm.in_ns("h0", "timeout").args([
                    "60",
                    "srun",
                    "-N2",
                    "--ntasks-per-node=1",
                    "-J",
                    "cq-refused",
                    "--network-bandwidth=3MB/s:one-to-many",
                    "true",
                ]));
                // srun says "PrologSlurmctld failed, job killed", or "Job allocation N has
                // been revoked", or both (the first message races the revocation).
                assert!(!o.status.success(), "{}", text(&o));
                assert!(
                    ["PrologSlurmctld failed", "has been revoked"]
                        .iter()
                        .any(|m| text(&o).contains(m)),
                    "{}",
                    text(&o)
                );
                let (_, state, comment) = slurm.squeue_named("cq-refused");
                assert!(
                    comment.contains("does not fit now (an interactive job is not requeued)")
                        && comment.contains("node h1 send is short by"),
                    "{state}: {comment}"
                );
                assert_eq!(held(), [id(job)]);
            }
            std::fs::write(&stop, "").unwrap();
            let ended = Instant::now();
            let mut status = None;
            assert!(
                eventually(Duration::from_secs(30), || {
                    status = child.0.try_wait().unwrap();
                    status.is_some()
                }),
                "{tool} did not end: {}",
                log()
            );
            assert!(status.unwrap().success(), "{tool}: {}", log());
            assert!(
                eventually(Duration::from_secs(8), || held().is_empty()),
                "{tool}: {:?}",
                held()
            );
            eprintln!(
                "{tool}: job {job} held its reservation while it ran; released {:.1} s \
                 after its command was told to end",
                ended.elapsed().as_secs_f64()
            );
        }

        // Enforcement, counted in the switch: job E reserves 4 MB/s from h1 to h2 and
        // runs iperf3 there (its batch script runs on h1, in the job's cgroup: the plugin
        // put it there) while job F, unreserved, floods the same link with 4 streams from
        // h1. Then the same again without the reservation: no class, no cgroup, and E's
        // stream gets what the flood leaves it. 4 MB/s of the link's 5 (4.78 of TCP
        // payload) is far above that.
        let h2 = tb.addr(2);
        let _servers: Vec<Proc> = [7002, 7100]
            .iter()
            .map(|p| {
                Proc(
                    Command::new("ip")
                        .args(["netns", "exec", &tb.ns("h2"), "iperf3", "-s", "-p"])
                        .arg(p.to_string())
                        .stdout(std::process::Stdio::null())
                        .spawn()
                        .unwrap(),
                )
            })
            .collect();
        let counters = SwitchCounters::install(&tb, 1, &[7002, 7100]);
        let measure = |bandwidth: Option<&str>| {
            let flood = slurm.submit_script(
                &["-N1", "-w", "h1"],
                &format!("exec iperf3 -c {h2} -p 7100 -P 4 -t 60 >/dev/null"),
                None,
            );
            slurm.wait_state(flood, "RUNNING", Duration::from_secs(30));
            // 1 MB socket buffers (a quarter second at 4 MB/s): the kernel keeps the
            // stream going while a busy machine leaves iperf3 itself unscheduled, so the
            // figure is the network's share rather than the sender's CPU.
            let e = slurm.submit_script(
                &["-N2", "--ntasks-per-node=1"],
                &format!("exec iperf3 -c {h2} -p 7002 -t 12 -O 1 -w 1M -J"),
                bandwidth,
            );
            // The counters are read on a thread of their own, every 0.2 s, while this
            // one follows the job (a loaded machine makes each `squeue` slow).
            let done = std::sync::atomic::AtomicBool::new(false);
            let (state, samples) = std::thread::scope(|s| {
                let sampler = s.spawn(|| {
                    let mut v = vec![];
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        v.push(counters.read(&[7002, 7100]));
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    v.push(counters.read(&[7002, 7100]));
                    v
                });
                let end = Instant::now() + Duration::from_secs(60);
                let state = loop {
                    let state = slurm.squeue(e).0;
                    let going = ["PENDING", "CONFIGURING", "RUNNING", "COMPLETING"];
                    if !going.contains(&state.as_str()) || Instant::now() > end {
                        break state;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                };
                done.store(true, std::sync::atomic::Ordering::Relaxed);
                (state, sampler.join().unwrap())
            });
            assert_eq!(state, "COMPLETED", "job {e}: {}", slurm.output(e));
            let port = |i: usize| -> Vec<Sample> {
                samples
                    .iter()
                    .map(|(at, took, c)| Sample {
                        at: *at,
                        took: *took,
                        bytes: c[i].0,
                        packets: c[i].1,
                    })
                    .collect()
            };
            let (job, other) = (port(0), port(1));
            let o = run(slurm.in_ns("h0", "scancel").arg(flood.to_string()));
            assert!(o.status.success(), "{}", text(&o));
            slurm.wait_state(flood, "CANCELLED", Duration::from_secs(30));
            let out = slurm.output(e);
            // iperf3's report, after any line slurmstepd wrote into the output.
            let json = match out.find("\n{\n") {
                Some(i) => &out[i + 1..],
                None => out.as_str(),
            };
            let v: serde_json::Value =
                serde_json::from_str(json).unwrap_or_else(|err| panic!("{err}: {out}"));
            let iperf = v["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or_default()
                / 8.0;
            (steady_rate(&job), steady_rate(&other), iperf)
        };
        let (got, flood, iperf) = measure(Some("4MB/s:one-to-many"));
        let (off, off_flood, off_iperf) = measure(None);
        eprintln!(
            "switch counters: reserved job {:.0} B/s of TCP payload (4,000,000 reserved; \
             iperf3 says {iperf:.0}), the flood {:.0} B/s; without the reservation \
             {:.0} B/s (iperf3 {off_iperf:.0}), the flood {:.0} B/s",
            got.rate, flood.rate, off.rate, off_flood.rate
        );
        for (what, s) in [
            ("reserved job", &got),
            ("its flood", &flood),
            ("unreserved job", &off),
            ("its flood", &off_flood),
        ] {
            eprintln!(
                "{what}: {:.0} B/s between the quickest reads near the ends (they took \
                 {:.0} and {:.0} ms: the rate is within {:.0} ... {:.0}); {:.0} B/s \
                 between the first and last samples of the steady part; {} of {} \
                 reads took over 50 ms, the slowest {:.0} ms",
                s.rate,
                s.took[0].as_secs_f64() * 1e3,
                s.took[1].as_secs_f64() * 1e3,
                s.low,
                s.high,
                s.any_ends,
                s.slow_reads,
                s.reads,
                s.slowest.as_secs_f64() * 1e3
            );
        }
        let got = got.rate;
        let (flood, off) = (flood.rate, off.rate);
        assert!(
            (got - 4_000_000.0).abs() <= 0.02 * 4_000_000.0,
            "reserved job {got:.0} B/s, flood {flood:.0} B/s"
        );
        assert!(flood > 300_000.0, "flood {flood:.0} B/s");
        assert!(
            off < 0.9 * 4_000_000.0,
            "unreserved, the same stream got {off:.0} B/s against the flood"
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
