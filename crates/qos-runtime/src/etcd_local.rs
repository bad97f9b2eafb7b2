//! An etcd cluster of `etcd` processes on loopback, for tests, the benchmark and the
//! chaos runs of the replicated manager: each member on its own free
//! ports, its data in a directory of its own; members can be killed and restarted.
//! Every process is killed when the [`LocalEtcd`] goes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why the cluster could not be started.
#[derive(Debug, thiserror::Error)]
pub enum EtcdLocalError {
    /// No etcd binary.
    #[error("no etcd binary ({0}): install etcd-server (Debian) or set ETCD to its path")]
    NotFound(String),
    /// A member did not start or become healthy.
    #[error("etcd member {name}: {message} (log: {log})")]
    Member {
        /// The member.
        name: String,
        /// What happened.
        message: String,
        /// Its log file.
        log: String,
    },
    /// A file or port.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Settings of the Go runtime the members run with (`GOMAXPROCS`, `GOGC`), given to
/// each member's environment; `None` leaves the variable as this process has it.
///
/// A production member has a machine of its own. Members started here share this
/// machine's cores with each other and with what they serve (the benchmark's master and
/// clients): each member's runtime would otherwise run one thread per core and
/// collect its small heap at Go's default `GOGC=100`, so three members contend for
/// every core. `clusterqos bench manager` sets both (see its `--etcd-gomaxprocs` and
/// `--etcd-gogc`; docs/ha-manager.md gives the rates with and without them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GoRuntime {
    /// Threads running Go code at once in each member (`GOMAXPROCS`).
    pub maxprocs: Option<u32>,
    /// Heap growth before a collection, percent of the live heap (`GOGC`).
    pub gogc: Option<u32>,
}

impl GoRuntime {
    /// The settings as environment assignments (`GOMAXPROCS=1 GOGC=200`), or
    /// "inherited" when neither is set.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if let Some(n) = self.maxprocs {
            v.push(format!("GOMAXPROCS={n}"));
        }
        if let Some(n) = self.gogc {
            v.push(format!("GOGC={n}"));
        }
        if v.is_empty() {
            "inherited".into()
        } else {
            v.join(" ")
        }
    }
}

struct Member {
    name: String,
    client: u16,
    peer: u16,
    child: Option<Child>,
}

/// A running local cluster.
pub struct LocalEtcd {
    bin: PathBuf,
    dir: PathBuf,
    members: Vec<Member>,
    go: GoRuntime,
}

/// The etcd binary: `$ETCD`, else `etcd` on the `PATH`.
pub fn etcd_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ETCD") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("etcd"))
            .find(|p| p.is_file())
    })
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The reply (status line, headers and body) of the member answering on `port` to
/// `GET path`, or `None` if it does not answer within `patience`.
fn get(port: u16, path: &str, patience: Duration) -> Option<String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(patience)).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    Some(reply)
}

/// Whether the member answering on `port` reports itself healthy (it has a leader).
fn healthy(port: u16) -> bool {
    get(port, "/health", Duration::from_secs(2)).is_some_and(|r| r.contains("\"health\":\"true\""))
}

impl LocalEtcd {
    /// Starts `n` members with their data under `dir` and waits until every one is
    /// healthy; their Go runtime settings are this process's.
    pub fn start(dir: &Path, n: usize) -> Result<LocalEtcd, EtcdLocalError> {
        LocalEtcd::start_with(dir, n, GoRuntime::default())
    }

    /// [`LocalEtcd::start`], each member (and each restart of one) run with `go`.
    pub fn start_with(dir: &Path, n: usize, go: GoRuntime) -> Result<LocalEtcd, EtcdLocalError> {
        let bin = etcd_binary().ok_or_else(|| EtcdLocalError::NotFound("not on PATH".into()))?;
        if !bin.is_file() {
            return Err(EtcdLocalError::NotFound(bin.display().to_string()));
        }
        std::fs::create_dir_all(dir)?;
        let mut members = Vec::new();
        for i in 0..n {
            members.push(Member {
                name: format!("m{i}"),
                client: free_port()?,
                peer: free_port()?,
                child: None,
            });
        }
        let mut c = LocalEtcd {
            bin,
            dir: dir.to_path_buf(),
            members,
            go,
        };
        for i in 0..n {
            c.spawn(i)?;
        }
        for i in 0..n {
            c.wait_healthy(i, Duration::from_secs(30))?;
        }
        Ok(c)
    }

    fn log(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}.log", self.members[i].name))
    }

    fn spawn(&mut self, i: usize) -> Result<(), EtcdLocalError> {
        let cluster: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer))
            .collect();
        let m = &self.members[i];
        let data = self.dir.join(&m.name);
        let state = if data.exists() { "existing" } else { "new" };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(i))?;
        let client = format!("http://127.0.0.1:{}", m.client);
        let peer = format!("http://127.0.0.1:{}", m.peer);
        let mut cmd = Command::new(&self.bin);
        if let Some(n) = self.go.maxprocs {
            cmd.env("GOMAXPROCS", n.to_string());
        }
        if let Some(n) = self.go.gogc {
            cmd.env("GOGC", n.to_string());
        }
        let child = cmd
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &cluster.join(",")])
            .args(["--initial-cluster-token", "clusterqos-local"])
            .args(["--initial-cluster-state", state])
            .args(["--logger", "zap", "--log-level", "warn"])
            // Server-side handling times per call, for the benchmark's account.
            .args(["--metrics", "extensive"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        self.members[i].child = Some(child);
        Ok(())
    }

    fn wait_healthy(&mut self, i: usize, limit: Duration) -> Result<(), EtcdLocalError> {
        let end = Instant::now() + limit;
        loop {
            if healthy(self.members[i].client) {
                return Ok(());
            }
            let exited = self.members[i]
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > end {
                return Err(EtcdLocalError::Member {
                    name: self.members[i].name.clone(),
                    message: match exited {
                        Some(s) => format!("exited ({s})"),
                        None => format!("not healthy after {} s", limit.as_secs()),
                    },
                    log: self.log(i).display().to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `127.0.0.1:port` of every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client))
            .collect()
    }

    /// What each running member serves on `/metrics` (Prometheus' text format), for
    /// the benchmark's account of where the time goes; a member that does not answer
    /// gives an empty text.
    pub fn metrics(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| get(m.client, "/metrics", Duration::from_secs(5)).unwrap_or_default())
            .collect()
    }

    /// The process id of member `i`, if it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].child.as_ref().map(Child::id)
    }

    /// Processor time (user + system) the running members have used so far.
    pub fn cpu_time(&self) -> Duration {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let mut ticks = 0u64;
        for pid in (0..self.members.len()).filter_map(|i| self.pid(i)) {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // Fields after the command name (which may hold spaces) end with ')'.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<&str> = rest.split_whitespace().collect();
            // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
            for i in [11, 12] {
                ticks += f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            }
        }
        Duration::from_secs_f64(ticks as f64 / hz)
    }

    /// Kills member `i` with SIGKILL and waits for it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts member `i` again on its data and waits until it is healthy.
    pub fn restart(&mut self, i: usize) -> Result<(), EtcdLocalError> {
        self.kill(i);
        self.spawn(i)?;
        self.wait_healthy(i, Duration::from_secs(30))
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_settings_are_described_as_the_environment_given() {
        assert_eq!(GoRuntime::default().describe(), "inherited");
        let go = GoRuntime {
            maxprocs: Some(1),
            gogc: Some(200),
        };
        assert_eq!(go.describe(), "GOMAXPROCS=1 GOGC=200");
        let only_gc = GoRuntime {
            gogc: Some(400),
            ..GoRuntime::default()
        };
        assert_eq!(only_gc.describe(), "GOGC=400");
    }

    /// Tests that need the etcd binary (ignored unless asked for, in a module named
    /// `etcd` as `scripts/test` expects: `cargo test -- --ignored etcd::`).
    mod etcd {
        use super::super::*;

        /// The settings reach every member's environment, and a restarted member's too.
        #[test]
        #[ignore = "needs the etcd binary"]
        fn members_run_with_the_go_settings_asked_for() {
            let environ = |c: &LocalEtcd, i: usize| {
                let pid = c.pid(i).expect("member runs");
                let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
                env.split(|&b| b == 0)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .filter(|v| v.starts_with("GOMAXPROCS=") || v.starts_with("GOGC="))
                    .collect::<Vec<_>>()
            };
            let dir = tempfile::tempdir().unwrap();
            let go = GoRuntime {
                maxprocs: Some(1),
                gogc: Some(300),
            };
            let mut c = LocalEtcd::start_with(&dir.path().join("etcd"), 2, go).unwrap();
            for i in 0..2 {
                let mut env = environ(&c, i);
                env.sort();
                assert_eq!(env, ["GOGC=300", "GOMAXPROCS=1"], "member {i}");
            }
            c.restart(1).unwrap();
            let mut env = environ(&c, 1);
            env.sort();
            assert_eq!(env, ["GOGC=300", "GOMAXPROCS=1"], "restarted member");
        }
    }
}
