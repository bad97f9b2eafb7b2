//! The agent's kernel backend on real namespaces: grants and best-effort
//! shares become htb classes and u32 filters and follow the manager; `exec` runs a
//! program under a flow; a restarted agent (after kill -9) keeps live classes and drops
//! stale ones; exit removes what was installed; a bad environment (not root, no such
//! interface, an interface already shaped by someone else, an interface that vanishes)
//! is one line, exit 2, nothing left behind. Traffic-control state is read with `tc`,
//! outside the agent.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::testbed::{eventually, run, sh, text, Testbed};
use common::{other_user, Proc, BIN};

/// What these tests ask of a testbed beyond the shared helpers.
impl Testbed {
    fn classes(&self, host: &str) -> String {
        sh(&self.ns(host), "tc -s class show dev eth0")
    }
    fn agent_pid(&self, host: &str) -> u32 {
        self.pid(&format!("agent-{host}"))
    }
    /// Kills `host`'s agent `pid` with SIGKILL (nothing cleans up), runs `between`, and
    /// starts its command line again in the host's namespace; returns the new process
    /// and its log once it says it is ready.
    fn kill_and_restart_agent(
        &self,
        host: &str,
        pid: u32,
        between: impl FnOnce(),
    ) -> (Proc, PathBuf) {
        let cmdline: Vec<String> = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap()
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        // SAFETY: the agent this testbed started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        assert!(eventually(Duration::from_secs(5), || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |s| s.contains(") Z "))
        }));
        between();
        let log = self.dir.path().join(format!("{host}-restarted-{pid}.log"));
        let f = std::fs::File::create(&log).unwrap();
        let p = Proc(
            Command::new("ip")
                .args(["netns", "exec", &self.ns(host)])
                .args(&cmdline)
                .stdout(f.try_clone().unwrap())
                .stderr(f)
                .spawn()
                .unwrap(),
        );
        let ready = eventually(Duration::from_secs(20), || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("agent ready")
        });
        assert!(
            ready,
            "restarted agent {cmdline:?}: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        (p, log)
    }
    /// `clusterqos` in `host`'s namespace.
    fn cq(&self, host: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(host), BIN]);
        c
    }
}

/// The minor number and rate (as tc prints it) of every flow class (c05:10 and up).
fn flow_classes(tc: &str) -> Vec<(String, String)> {
    tc.lines()
        .filter(|l| l.starts_with("class htb c05:"))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let id = w.get(2)?.to_string();
            let rate = w.get(w.iter().position(|x| *x == "rate")? + 1)?.to_string();
            (id != "c05:1" && id != "c05:2").then_some((id, rate))
        })
        .collect()
}

/// `s` without terminal colour sequences (the agent's log is coloured).
fn plain(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\x1b') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}

/// Whether a TCP connection from namespace `ns` to `addr` gets through (a thread of
/// this test enters the namespace).
fn connects_from(ns: &str, addr: &str) -> bool {
    let path = format!("/var/run/netns/{ns}");
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: setns on this thread only, with a namespace file descriptor.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_ok()
    })
    .join()
    .unwrap()
}

/// A process that owns flows for as long as the test needs.
fn owner() -> Proc {
    Proc(Command::new("sleep").arg("600").spawn().unwrap())
}

fn stop(pid: u32) {
    // SAFETY: kill with a pid this test started (through testbed up or itself).
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    assert!(
        eventually(Duration::from_secs(10), || !Path::new(&format!(
            "/proc/{pid}"
        ))
        .exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))),
        "agent {pid} did not stop"
    );
}

/// Needs root and network namespaces: run by `scripts/test` as root (`-- --ignored root::`).
mod root {
    use super::*;

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc"]
    fn grants_become_htb_classes_kept_in_step_and_removed_on_exit() {
        let tb = Testbed::up(3, "kb", "10.77.31", "kernel");
        let own = owner();
        let pid = own.0.id().to_string();
        // A premium grant: when `request` returns the class is there (the reply waits
        // for the kernel), at the grant on the wire: 1 MB/s of TCP payload = 1514/1448.
        let t = Instant::now();
        let o = run(tb
            .cq("h1")
            .args([
                "request",
                "--to",
                "h0:5301",
                "--bandwidth",
                "1MB/s",
                "--pid",
                &pid,
                "--socket",
            ])
            .arg(tb.socket("h1")));
        let latency = t.elapsed();
        assert!(o.status.success(), "{}", text(&o));
        let classes = flow_classes(&tb.classes("h1"));
        eprintln!("request to class installed: {latency:?}; classes {classes:?}");
        assert_eq!(classes.len(), 1, "{classes:?}");
        assert_eq!(classes[0].1, "8364Kbit", "{classes:?}");
        let filters = sh(&tb.ns("h1"), "tc filter show dev eth0 parent c05:");
        assert_eq!(
            common::testbed::u32_filters(&filters),
            2,
            "TCP and UDP to port 5301: {filters}"
        );
        assert!(
            filters.contains("000014b5/0000ffff at 20"),
            "dport 5301: {filters}"
        );
        // A best-effort flow from the same node gets the rest of the switch port to h0
        // (thesis rule): its class follows when the premium flow goes.
        let o = run(tb
            .cq("h1")
            .args([
                "request",
                "--to",
                "h0:5302",
                "--best-effort",
                "--pid",
                &pid,
                "--socket",
            ])
            .arg(tb.socket("h1")));
        assert!(o.status.success(), "{}", text(&o));
        let before = flow_classes(&tb.classes("h1"));
        assert_eq!(before.len(), 2, "{before:?}");
        let o = run(tb
            .cq("h1")
            .args(["release", "--to", "h0:5301", "--socket"])
            .arg(tb.socket("h1")));
        assert!(o.status.success(), "{}", text(&o));
        let after = flow_classes(&tb.classes("h1"));
        assert_eq!(
            after.len(),
            1,
            "the released flow's class is gone: {after:?}"
        );
        let be_before = before.iter().find(|c| c.0 == after[0].0).unwrap();
        assert_ne!(
            be_before.1, after[0].1,
            "the best-effort share grew: {before:?} -> {after:?}"
        );
        // Exit (SIGTERM) removes the qdisc; the tbf shaper keeps working (ping gets through).
        stop(tb.agent_pid("h1"));
        let q = sh(&tb.ns("h1"), "tc qdisc show dev eth0");
        assert!(!q.contains("c05:") && q.contains("tbf"), "{q}");
        assert!(
            connects_from(&tb.ns("h1"), "10.77.31.1:7400"),
            "h1 cannot reach the manager in h0 after its agent exited"
        );
    }

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc"]
    fn a_killed_agent_restarts_keeping_live_classes_and_dropping_stale_ones() {
        let tb = Testbed::up(2, "kr", "10.77.32", "kernel");
        let own = owner();
        let o = run(tb
            .cq("h1")
            .args([
                "request",
                "--to",
                "h0:5401",
                "--bandwidth",
                "1MB/s",
                "--pid",
            ])
            .arg(own.0.id().to_string())
            .arg("--socket")
            .arg(tb.socket("h1")));
        assert!(o.status.success(), "{}", text(&o));
        let live = flow_classes(&tb.classes("h1"));
        assert_eq!(live.len(), 1);
        // Killed: nothing cleaned up, the grant still holds in the kernel. A class and
        // filter left half-made by someone (or a crash) are stale.
        let ns = tb.ns("h1");
        let pid = tb.agent_pid("h1");
        let stale = "tc class add dev eth0 parent c05:1 classid c05:77 htb rate 1mbit && \
                     tc filter add dev eth0 parent c05: protocol ip prio 10 u32 match ip dst 10.77.32.9/32 flowid c05:77";
        let (_restarted, log) = tb.kill_and_restart_agent("h1", pid, || {
            assert_eq!(flow_classes(&tb.classes("h1")), live);
            sh(&ns, stale);
            assert_eq!(flow_classes(&tb.classes("h1")).len(), 2);
        });
        assert!(
            eventually(Duration::from_secs(20), || flow_classes(&tb.classes("h1"))
                == live),
            "after the restart: {:?}, wanted {live:?}; log {}",
            flow_classes(&tb.classes("h1")),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let filters = sh(&ns, "tc filter show dev eth0 parent c05:");
        assert!(!filters.contains("c05:77"), "stale filter left: {filters}");
        assert!(plain(&std::fs::read_to_string(&log).unwrap()).contains("adopted=true"));
    }

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc"]
    fn with_the_manager_down_the_last_classes_keep_enforcing_also_across_an_agent_restart() {
        let tb = Testbed::up(2, "km", "10.77.34", "kernel");
        let own = owner();
        let pid = own.0.id().to_string();
        for (to, how) in [("h0:5601", "--bandwidth"), ("h0:5602", "--best-effort")] {
            let mut c = tb.cq("h1");
            c.args(["request", "--to", to, how]);
            if how == "--bandwidth" {
                c.arg("1MB/s");
            }
            let o = run(c.args(["--pid", &pid, "--socket"]).arg(tb.socket("h1")));
            assert!(o.status.success(), "{}", text(&o));
        }
        let last = flow_classes(&tb.classes("h1"));
        assert_eq!(last.len(), 2, "{last:?}");
        // The manager dies: the agents lose their event streams and keep their tables.
        let manager = tb.pid("manager");
        // SAFETY: the manager this testbed started.
        unsafe { libc::kill(manager as i32, libc::SIGKILL) };
        let log = tb.dir.path().join("agent-h1.log");
        assert!(
            eventually(Duration::from_secs(10), || plain(
                &std::fs::read_to_string(&log).unwrap_or_default()
            )
            .contains("manager link down")),
            "h1's agent did not notice the manager was gone"
        );
        // Two of the backend's periods later the classes are still the last ones.
        std::thread::sleep(Duration::from_millis(2500));
        assert_eq!(flow_classes(&tb.classes("h1")), last);
        // An agent restarted while the manager is down has no snapshot: it adopts the
        // qdisc and leaves the classes enforcing what they did.
        let (_restarted, log) = tb.kill_and_restart_agent("h1", tb.agent_pid("h1"), || {});
        std::thread::sleep(Duration::from_millis(2500));
        assert_eq!(
            flow_classes(&tb.classes("h1")),
            last,
            "{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        assert!(plain(&std::fs::read_to_string(&log).unwrap()).contains("adopted=true"));
        let filters = sh(&tb.ns("h1"), "tc filter show dev eth0 parent c05:");
        assert_eq!(common::testbed::u32_filters(&filters), 4, "{filters}");
    }

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc"]
    fn exec_runs_a_program_under_a_flow_and_gives_it_back() {
        let tb = Testbed::up(2, "ke", "10.77.33", "kernel");
        // The program sees its flow's class (1 MB/s) and its exit status comes back.
        let o = run(tb
            .cq("h1")
            .args([
                "exec",
                "--to",
                "h0:5501",
                "--bandwidth",
                "1MB/s",
                "--socket",
            ])
            .arg(tb.socket("h1"))
            .args([
                "--",
                "sh",
                "-c",
                "tc class show dev eth0 | grep -q 'rate 8364Kbit' && exit 7",
            ]));
        assert_eq!(o.status.code(), Some(7), "{}", text(&o));
        assert!(
            flow_classes(&tb.classes("h1")).is_empty(),
            "released on exit"
        );
        // Best-effort by default.
        let o = run(tb
            .cq("h1")
            .args(["exec", "--to", "h0:5502", "--socket"])
            .arg(tb.socket("h1"))
            .args(["--", "true"]));
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("best_effort"),
            "{}",
            text(&o)
        );
        // Rejected: the program does not run, exit 1.
        let marker = tb.dir.path().join("ran");
        let o = run(tb
            .cq("h1")
            .args([
                "exec",
                "--to",
                "h0:5503",
                "--bandwidth",
                "100MB/s",
                "--socket",
            ])
            .arg(tb.socket("h1"))
            .args(["--", "touch"])
            .arg(&marker));
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("rejected"),
            "{}",
            text(&o)
        );
        assert!(!marker.exists());
    }

    #[test]
    #[ignore = "needs root: network namespaces, veth and tc"]
    fn a_bad_environment_is_one_line_exit_2_and_leaves_nothing() {
        let ns = format!("kx{}", std::process::id() % 10_000);
        let ip = |args: &[&str]| run(Command::new("ip").args(args));
        assert!(ip(&["netns", "add", &ns]).status.success());
        struct Gone(String);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
            }
        }
        let _gone = Gone(ns.clone());
        sh(
            &ns,
            "ip link add x0 type veth peer name x1 && ip link set x0 up && ip link set x1 up",
        );
        let shared = other_user::SharedDir::new().unwrap();
        let secret = shared.path().join("secret");
        std::fs::write(&secret, "0123456789abcdef0123456789abcdef").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let agent = |iface: &str, prefix: &[&str]| {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &ns])
                .args(prefix)
                .arg(shared.bin())
                .args([
                    "agent",
                    "--backend",
                    "kernel",
                    "--interface",
                    iface,
                    "--node",
                    "a",
                    "--nodes",
                    "a=10.1.1.1,b=10.1.1.2",
                    "--manager",
                    "http://127.0.0.1:9",
                    "--link-rate",
                    "10Mbit/s",
                    "--secret",
                ]);
            c.arg(&secret)
                .arg("--socket")
                .arg(shared.path().join(format!("{iface}.sock")));
            c
        };
        let one_line = |o: &Output, needle: &str| {
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{}", text(o));
            assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
            assert!(err.contains(needle), "'{needle}' in: {err}");
        };
        let untouched = || sh(&ns, "tc qdisc show dev x0");
        // Not root.
        let o = run(&mut agent(
            "x0",
            &[
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
            ],
        ));
        one_line(&o, "CAP_NET_ADMIN");
        assert!(!untouched().contains("c05:"));
        // No such interface.
        one_line(&run(&mut agent("nope0", &[])), "no interface 'nope0'");
        // Someone else's qdisc at the root: refused, left as it was.
        sh(&ns, "tc qdisc add dev x0 root handle 1: htb default 1");
        one_line(
            &run(&mut agent("x0", &[])),
            "already has a root qdisc `htb 1:`",
        );
        let q = untouched();
        assert!(q.contains("htb 1:") && !q.contains("c05:"), "{q}");
        sh(&ns, "tc qdisc del dev x0 root");
        // The interface vanishes under a running agent: it stops, one line, exit 2.
        let mut child = agent("x0", &[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        assert!(
            eventually(Duration::from_secs(10), || untouched().contains("htb c05:")),
            "{}",
            untouched()
        );
        sh(&ns, "ip link del x0");
        let deadline = Instant::now() + Duration::from_secs(15);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        if child.try_wait().unwrap().is_none() {
            let _ = child.kill();
            panic!("the agent did not stop when its interface vanished");
        }
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        let last = err
            .lines()
            .filter(|l| l.starts_with("error:"))
            .collect::<Vec<_>>();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        // The launcher names the backend that failed before its reason.
        assert_eq!(
            last,
            vec!["error: kernel backend on x0: interface 'x0' vanished"],
            "{err}"
        );
    }
}
