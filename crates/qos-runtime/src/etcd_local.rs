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
    /// healthy.
    pub fn start(dir: &Path, n: usize) -> Result<LocalEtcd, EtcdLocalError> {
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
        let child = Command::new(&self.bin)
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
