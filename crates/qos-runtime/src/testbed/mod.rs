//! A cluster on one Linux machine for experiments on real traffic (the thesis's testbed
//! of §5.1, rebuilt): N hosts as network namespaces, joined by a Linux bridge (the
//! switch) in a namespace of its own, every host↔switch link shaped to the link rate in
//! both directions with `tbf` (this kernel has tbf, htb, veth and bridges, no netem).
//!
//! `up` records everything it creates in a state file *as it goes*, so `down` removes
//! exactly what `up` made — also after a failed or interrupted `up` — and nothing else.
//! Addresses are private (10.77.0.0/24 by default), never the machine's own network.

pub mod services;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use qos_core::units::Bandwidth;
use serde::{Deserialize, Serialize};

/// Testbed errors.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error("testbed needs {0}")]
    Unavailable(String),
    #[error("`{cmd}` failed: {stderr}")]
    Command { cmd: String, stderr: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

/// What to build.
#[derive(Debug, Clone)]
pub struct TestbedSpec {
    pub nodes: usize,
    pub link_rate: Bandwidth,
    /// Prefix of every namespace and interface name (short: names are ≤ 15 bytes).
    pub prefix: String,
    /// First three octets of the hosts' /24.
    pub subnet: [u8; 3],
    /// Directory for the state file, logs, sockets and generated configuration.
    pub dir: PathBuf,
    /// Queue of every switch output port in bytes (`None`: 50 ms at the link rate). A
    /// small one is a switch that drops when two senders overrun one port.
    pub port_buffer: Option<u64>,
}

/// One host of a testbed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostState {
    pub name: String,
    pub netns: String,
    pub addr: Ipv4Addr,
}

/// A process started in the testbed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessState {
    pub role: String,
    pub netns: String,
    pub pid: u32,
    pub log: PathBuf,
    /// When the process started, in clock ticks after boot (`/proc/PID/stat` field
    /// 22): with the pid, its identity. PIDs wrap, so `down` signals a pid only while
    /// this still matches. `None` in state files from before it was
    /// recorded: `down` then leaves the process alone and says so.
    #[serde(default)]
    pub start_time: Option<u64>,
}

/// The start time of process `pid` in clock ticks after boot (`/proc/PID/stat` field
/// 22), or `None` if there is no such process.
pub fn process_start_time(pid: u32) -> Option<u64> {
    parse_start_time(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may itself hold spaces or
    // parentheses: the fields after it follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: field 3 (state) is the first; field 22 (starttime) the 20th.
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl ProcessState {
    /// Whether the process this record names is still running: its pid exists and
    /// started when the record says (not a later process that reused the pid).
    pub fn is_running(&self) -> bool {
        match self.start_time {
            Some(t) => process_start_time(self.pid) == Some(t),
            None => false,
        }
    }
}

/// Everything `up` created, in creation order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestbedState {
    pub prefix: String,
    pub link_rate: u64,
    pub namespaces: Vec<String>,
    pub hosts: Vec<HostState>,
    pub processes: Vec<ProcessState>,
    pub dir: PathBuf,
}

/// Name of the state file inside the testbed directory.
pub const STATE_FILE: &str = "testbed.json";

impl TestbedState {
    pub fn load(dir: &Path) -> Result<TestbedState, TestbedError> {
        let p = dir.join(STATE_FILE);
        let text = std::fs::read_to_string(&p).map_err(|source| TestbedError::Io {
            path: p.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text)
            .map_err(|e| TestbedError::Invalid(format!("{}: {e}", p.display())))
    }
    pub fn save(&self) -> Result<(), TestbedError> {
        let p = self.dir.join(STATE_FILE);
        let text =
            serde_json::to_string_pretty(self).map_err(|e| TestbedError::Invalid(e.to_string()))?;
        std::fs::write(&p, text).map_err(|source| TestbedError::Io {
            path: p.display().to_string(),
            source,
        })
    }
}

fn run(cmd: &str, args: &[&str]) -> Result<String, TestbedError> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestbedError::Command {
            cmd: format!("{cmd} {}", args.join(" ")),
            stderr: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(TestbedError::Command {
            cmd: format!("{cmd} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ns_run(ns: &str, cmd: &str, args: &[&str]) -> Result<String, TestbedError> {
    let mut v = vec!["netns", "exec", ns, cmd];
    v.extend_from_slice(args);
    run("ip", &v)
}

/// Why a testbed cannot be built here, if it cannot (not root, no `ip`/`tc`, no netns).
pub fn unavailable_reason() -> Option<String> {
    // SAFETY: geteuid never fails.
    if unsafe { libc::geteuid() } != 0 {
        return Some("root (network namespaces, veth, tc)".into());
    }
    for tool in ["ip", "tc"] {
        if Command::new(tool).arg("-V").output().is_err() {
            return Some(format!("the `{tool}` command (iproute2)"));
        }
    }
    let probe = format!("cqprobe{}", std::process::id());
    if run("ip", &["netns", "add", &probe]).is_err() {
        return Some("permission to create network namespaces".into());
    }
    let _ = run("ip", &["netns", "del", &probe]);
    None
}

/// tbf burst: at least one timer tick's worth of bytes (HZ ≥ 100) and two 64 KiB frames.
fn tbf_args(rate: Bandwidth) -> (String, String) {
    let bps = rate.bytes_per_sec();
    let burst = (bps / 100).max(2 * 65_536);
    (format!("{bps}bps"), format!("{burst}b"))
}

/// Builds the testbed's network. Processes are started separately ([`start_process`]).
pub fn up(spec: &TestbedSpec) -> Result<TestbedState, TestbedError> {
    if spec.nodes == 0 || spec.nodes > 200 {
        return Err(TestbedError::Invalid(format!(
            "--nodes must be 1..=200, not {}",
            spec.nodes
        )));
    }
    if spec.prefix.is_empty()
        || spec.prefix.len() > 6
        || !spec.prefix.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(TestbedError::Invalid(
            "prefix must be 1..=6 letters or digits".into(),
        ));
    }
    if spec.subnet == [192, 0, 2] {
        return Err(TestbedError::Invalid(
            "192.0.2.0/24 is the machine's own network; pick another subnet".into(),
        ));
    }
    if spec.link_rate.is_zero() {
        return Err(TestbedError::Invalid("link rate must be positive".into()));
    }
    if let Some(r) = unavailable_reason() {
        return Err(TestbedError::Unavailable(r));
    }
    std::fs::create_dir_all(&spec.dir).map_err(|source| TestbedError::Io {
        path: spec.dir.display().to_string(),
        source,
    })?;
    if spec.dir.join(STATE_FILE).exists() {
        return Err(TestbedError::Invalid(format!(
            "{} exists: run `testbed down` first",
            spec.dir.join(STATE_FILE).display()
        )));
    }
    let mut st = TestbedState {
        prefix: spec.prefix.clone(),
        link_rate: spec.link_rate.bytes_per_sec(),
        dir: spec.dir.clone(),
        ..TestbedState::default()
    };
    let result = build(spec, &mut st);
    st.save()?;
    result.map(|()| st)
}

fn build(spec: &TestbedSpec, st: &mut TestbedState) -> Result<(), TestbedError> {
    let p = &spec.prefix;
    let sw = format!("{p}-sw");
    run("ip", &["netns", "add", &sw])?;
    st.namespaces.push(sw.clone());
    st.save()?;
    ns_run(&sw, "ip", &["link", "add", "br0", "type", "bridge"])?;
    ns_run(&sw, "ip", &["link", "set", "br0", "up"])?;
    ns_run(&sw, "ip", &["link", "set", "lo", "up"])?;
    let (rate, burst) = tbf_args(spec.link_rate);
    for i in 0..spec.nodes {
        let name = format!("h{i}");
        let ns = format!("{p}-{name}");
        run("ip", &["netns", "add", &ns])?;
        st.namespaces.push(ns.clone());
        st.save()?;
        let addr = Ipv4Addr::new(
            spec.subnet[0],
            spec.subnet[1],
            spec.subnet[2],
            (i + 1) as u8,
        );
        // veth pair: "eth0" in the host, "p<i>" in the switch namespace.
        let sw_if = format!("p{i}");
        ns_run(
            &ns,
            "ip",
            &[
                "link", "add", "eth0", "type", "veth", "peer", "name", &sw_if, "netns", &sw,
            ],
        )?;
        ns_run(
            &ns,
            "ip",
            &["addr", "add", &format!("{addr}/24"), "dev", "eth0"],
        )?;
        ns_run(&ns, "ip", &["link", "set", "eth0", "up"])?;
        ns_run(&ns, "ip", &["link", "set", "lo", "up"])?;
        ns_run(&sw, "ip", &["link", "set", &sw_if, "master", "br0"])?;
        ns_run(&sw, "ip", &["link", "set", &sw_if, "up"])?;
        // Shape both directions: host → switch on eth0, switch → host on p<i>.
        ns_run(
            &ns,
            "tc",
            &[
                "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", &rate, "burst", &burst,
                "latency", "50ms",
            ],
        )?;
        let (queue_kind, queue) = match spec.port_buffer {
            Some(b) => ("limit", format!("{b}b")),
            None => ("latency", "50ms".to_string()),
        };
        ns_run(
            &sw,
            "tc",
            &[
                "qdisc", "add", "dev", &sw_if, "root", "tbf", "rate", &rate, "burst", &burst,
                queue_kind, &queue,
            ],
        )?;
        st.hosts.push(HostState {
            name,
            netns: ns,
            addr,
        });
        st.save()?;
    }
    Ok(())
}

/// Starts `program args` inside `netns`, logging to `<dir>/<role>.log`, and records it.
pub fn start_process(
    st: &mut TestbedState,
    role: &str,
    netns: &str,
    program: &Path,
    args: &[String],
) -> Result<u32, TestbedError> {
    let log = st.dir.join(format!("{role}.log"));
    let f = std::fs::File::create(&log).map_err(|source| TestbedError::Io {
        path: log.display().to_string(),
        source,
    })?;
    let f2 = f.try_clone().map_err(|source| TestbedError::Io {
        path: log.display().to_string(),
        source,
    })?;
    let child = Command::new("ip")
        .args(["netns", "exec", netns])
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(f2)
        .spawn()
        .map_err(|e| TestbedError::Command {
            cmd: format!("ip netns exec {netns} {}", program.display()),
            stderr: e.to_string(),
        })?;
    let pid = child.id();
    // Read while the child is certainly ours: it has not been waited for, so its pid
    // cannot have been reused yet.
    let start_time = process_start_time(pid);
    std::mem::forget(child);
    st.processes.push(ProcessState {
        role: role.into(),
        netns: netns.into(),
        pid,
        log,
        start_time,
    });
    st.save()?;
    Ok(pid)
}

/// What `down` removed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DownReport {
    pub processes_stopped: usize,
    /// Recorded processes not signalled because their pid now belongs to another
    /// process (or the record has no start time): "role (pid N): why".
    pub processes_left: Vec<String>,
    pub namespaces_removed: Vec<String>,
    pub errors: Vec<String>,
}

/// Sends `sig` to the recorded process if it is still that process. The identity
/// check and the signal are two steps, but the pid cannot be reused in between unless
/// the process exits *and* is reaped: a testbed's processes are reaped by init or by
/// this very function, not concurrently.
fn signal(p: &ProcessState, sig: i32) -> bool {
    if !p.is_running() {
        return false;
    }
    // SAFETY: kill has no memory effects; the pid was just checked to be our process.
    unsafe { libc::kill(p.pid as i32, sig) == 0 }
}

/// Removes exactly what the state in `dir` records: stops its processes (TERM, then KILL
/// after 3 s) — each only if its pid still belongs to the process started, judged by
/// its start time — deletes its namespaces (which deletes their veths, bridge and
/// qdiscs), then the state file.
pub fn down(dir: &Path) -> Result<DownReport, TestbedError> {
    let st = TestbedState::load(dir)?;
    let mut rep = DownReport::default();
    for p in st.processes.iter().rev() {
        if signal(p, libc::SIGTERM) {
            rep.processes_stopped += 1;
        } else if std::path::Path::new(&format!("/proc/{}", p.pid)).exists() {
            let why = match p.start_time {
                Some(_) => "the pid now belongs to another process",
                None => "no start time recorded, so its identity cannot be checked",
            };
            rep.processes_left
                .push(format!("{} (pid {}): not signalled: {why}", p.role, p.pid));
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    for p in &st.processes {
        while p.is_running() && std::time::Instant::now() < deadline {
            // Reap if it is our child; otherwise just wait.
            // SAFETY: non-blocking waitpid on a pid; no memory is passed.
            unsafe { libc::waitpid(p.pid as i32, std::ptr::null_mut(), libc::WNOHANG) };
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        signal(p, libc::SIGKILL);
    }
    for ns in st.namespaces.iter().rev() {
        match run("ip", &["netns", "del", ns]) {
            Ok(_) => rep.namespaces_removed.push(ns.clone()),
            Err(e) => rep.errors.push(e.to_string()),
        }
    }
    let p = dir.join(STATE_FILE);
    std::fs::remove_file(&p).map_err(|source| TestbedError::Io {
        path: p.display().to_string(),
        source,
    })?;
    Ok(rep)
}

/// Runs `cmd args` in a host's namespace (for tests and experiments).
pub fn exec_in(netns: &str, cmd: &str, args: &[&str]) -> Result<String, TestbedError> {
    ns_run(netns, cmd, args)
}

/// The qdisc lines of an interface in a namespace (to check shaping).
pub fn qdiscs(netns: &str, dev: &str) -> Result<String, TestbedError> {
    ns_run(netns, "tc", &["qdisc", "show", "dev", dev])
}

/// Packets sent and dropped by the root qdisc of `dev` in `netns` since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QdiscCounters {
    pub sent_packets: u64,
    pub dropped: u64,
}

/// Reads [`QdiscCounters`] (`tc -s qdisc show`).
pub fn qdisc_counters(netns: &str, dev: &str) -> Result<QdiscCounters, TestbedError> {
    let text = ns_run(netns, "tc", &["-s", "qdisc", "show", "dev", dev])?;
    parse_qdisc_counters(&text)
        .ok_or_else(|| TestbedError::Invalid(format!("no counters in `tc -s qdisc`: {text}")))
}

/// Parses " Sent 1234 bytes 56 pkt (dropped 7, overlimits 8 requeues 0)".
fn parse_qdisc_counters(text: &str) -> Option<QdiscCounters> {
    let line = text.lines().find(|l| l.trim_start().starts_with("Sent "))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |w: &str| {
        let i = words.iter().position(|x| x.trim_start_matches('(') == w)?;
        words.get(i + 1)?.trim_end_matches(',').parse::<u64>().ok()
    };
    let sent_packets = words
        .iter()
        .position(|x| *x == "pkt")
        .and_then(|i| words.get(i.checked_sub(1)?)?.parse().ok())?;
    Some(QdiscCounters {
        sent_packets,
        dropped: after("dropped")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(dir: &Path, role: &str, pid: u32, start_time: Option<u64>) {
        let st = TestbedState {
            prefix: "cqt".into(),
            dir: dir.to_path_buf(),
            processes: vec![ProcessState {
                role: role.into(),
                netns: "none".into(),
                pid,
                log: dir.join("x.log"),
                start_time,
            }],
            ..TestbedState::default()
        };
        st.save().unwrap();
    }

    #[test]
    fn down_does_not_signal_a_process_that_reused_a_recorded_pid() {
        // A recorded pid that now belongs to another process (pids
        // wrap) must be left alone. Stand-in: a live process whose start time differs
        // from the one recorded, as a reused pid's would.
        let dir = tempfile::tempdir().unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let started = process_start_time(other.id()).unwrap();
        record(dir.path(), "agent-h0", other.id(), Some(started + 1));
        let rep = down(dir.path()).unwrap();
        assert_eq!(rep.processes_stopped, 0);
        assert_eq!(rep.processes_left.len(), 1, "{rep:?}");
        assert!(rep.processes_left[0].contains("another process"), "{rep:?}");
        assert_eq!(
            other.try_wait().unwrap(),
            None,
            "the other process was signalled"
        );
        // A record without a start time (an older state file) is not trusted either.
        record(dir.path(), "manager", other.id(), None);
        let rep = down(dir.path()).unwrap();
        assert!(rep.processes_left[0].contains("no start time"), "{rep:?}");
        assert_eq!(other.try_wait().unwrap(), None);
        // The process the record does name is stopped.
        record(dir.path(), "agent-h0", other.id(), Some(started));
        let rep = down(dir.path()).unwrap();
        assert_eq!(rep.processes_stopped, 1);
        // `down` reaped it (it is our child); the pid no longer names that process.
        let _ = other.wait();
        assert_ne!(process_start_time(other.id()), Some(started));
        assert!(!dir.path().join(STATE_FILE).exists());
    }

    #[test]
    fn the_start_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let fields: Vec<String> = (3..=25).map(|i| format!("{}", i * 10)).collect();
        let stat = format!("4242 (a b) (c)) {}", fields.join(" "));
        assert_eq!(parse_start_time(&stat), Some(220));
        assert_eq!(parse_start_time("4242 (x) S 1"), None);
        assert!(process_start_time(std::process::id()).is_some());
        assert_eq!(process_start_time(u32::MAX), None);
    }

    #[test]
    fn qdisc_counters_are_read_from_tc_statistics() {
        let text = "qdisc tbf 8001: root refcnt 2 rate 80Mbit burst 131072b lat 50ms\n \
                    Sent 1234567 bytes 890 pkt (dropped 12, overlimits 345 requeues 0)\n \
                    backlog 0b 0p requeues 0\n";
        assert_eq!(
            parse_qdisc_counters(text),
            Some(QdiscCounters {
                sent_packets: 890,
                dropped: 12
            })
        );
        assert_eq!(parse_qdisc_counters("qdisc noqueue 0: root"), None);
    }
}
