//! Port ownership across local users: uid 1001 reserved 1 KB/s on
//! root's flow h1:91 → h0:20 through the agent's world-writable socket; root's own
//! request was then refused and its traffic throttled. Only the owner of a port, or
//! root, may reserve bandwidth for it.
//!
//! The other user is uid 65534 (nobody). Its client runs from a copy of the binary in
//! a fresh temporary directory whose ancestors are all world-traversable, so the test
//! works from any checkout (a target directory under /root is not reachable by
//! nobody); only that directory's own mode is changed.

mod common;

mod root {
    use std::io::{BufRead, BufReader};
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output, Stdio};
    use std::time::{Duration, Instant};

    use super::common::{Proc, BIN};

    const NOBODY: u32 = 65534;
    const SECRET: &str = "port-ownership-secret-0123456789";
    const TOPOLOGY: &str = "[defaults]\nt = \"48us\"\nbmax = \"81.8MB/s\"\nlink = \"160MB/s\"\n\n\
                            [build]\nshape = \"crossbar\"\nhosts = 3\n";

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    /// Whether every directory from `dir` up to `/` lets other users through (o+x).
    fn traversable(dir: &Path) -> bool {
        dir.ancestors().all(|d| {
            std::fs::metadata(d).is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o001 != 0)
        })
    }

    /// A fresh directory nobody can reach, under the first world-traversable base.
    fn reachable_dir() -> Option<tempfile::TempDir> {
        let bases = [
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev/shm"),
        ];
        let base = bases.iter().find(|b| traversable(b))?;
        let dir = tempfile::Builder::new()
            .prefix("cq-ports-")
            .tempdir_in(base)
            .ok()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).ok()?;
        Some(dir)
    }

    fn wait_for(p: &Path) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if p.exists() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    struct Cluster {
        dir: tempfile::TempDir,
        bin: PathBuf,
        /// A process of nobody's, to whom nobody's flows belong.
        sleeper: Proc,
        _procs: Vec<Proc>,
    }

    impl Cluster {
        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        /// `clusterqos request` on `node`'s agent, as `uid` (root if `None`).
        fn request(&self, uid: Option<u32>, node: &str, port: u16, to: &str, bw: &str) -> Output {
            let mut cmd = Command::new(&self.bin);
            cmd.args(["request", "--to", to, "--port", &port.to_string()])
                .args(["--bandwidth", bw, "--socket"])
                .arg(self.path(&format!("{node}.sock")));
            match uid {
                Some(u) => {
                    cmd.uid(u).gid(u);
                    cmd.args(["--pid", &self.sleeper.0.id().to_string()]);
                }
                // Root's flows live as long as this test.
                None => {
                    cmd.args(["--pid", &std::process::id().to_string()]);
                }
            }
            cmd.output().unwrap()
        }
    }

    fn start(dir: tempfile::TempDir) -> Cluster {
        let bin = dir.path().join("clusterqos");
        std::fs::copy(BIN, &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("topology.toml"), TOPOLOGY).unwrap();
        std::fs::write(dir.path().join("secret"), SECRET).unwrap();
        std::fs::set_permissions(
            dir.path().join("secret"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let mut master = Command::new(&bin)
            .args(["manager", "--listen", "127.0.0.1:0", "--lease", "30s"])
            .arg("--topology")
            .arg(dir.path().join("topology.toml"))
            .arg("--db")
            .arg(dir.path().join("manager.db"))
            .arg("--secret")
            .arg(dir.path().join("secret"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(master.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_string();
        let mut procs = vec![Proc(master)];
        // n0's agent serves root only (the default for an agent run by root); n2's
        // agent also serves nobody.
        for (node, extra) in [("n0", vec![]), ("n2", vec!["--allow-uid", "65534"])] {
            let socket = dir.path().join(format!("{node}.sock"));
            procs.push(Proc(
                Command::new(&bin)
                    .args(["agent", "--node", node, "--manager"])
                    .arg(format!("http://{addr}"))
                    .arg("--secret")
                    .arg(dir.path().join("secret"))
                    .arg("--socket")
                    .arg(&socket)
                    .args(extra)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            ));
            assert!(wait_for(&socket), "agent {node} did not start");
        }
        let sleeper = Proc(
            Command::new("sleep")
                .arg("600")
                .uid(NOBODY)
                .gid(NOBODY)
                .spawn()
                .unwrap(),
        );
        Cluster {
            dir,
            bin,
            sleeper,
            _procs: procs,
        }
    }

    fn stderr(o: &Output) -> String {
        String::from_utf8_lossy(&o.stderr).to_string()
    }

    #[test]
    #[ignore = "needs root: runs a client as uid 65534 against agents run by root"]
    fn only_a_ports_owner_or_root_may_reserve_bandwidth_for_it() {
        if !is_root() {
            eprintln!("skipped: needs root to run a client as uid {NOBODY}");
            return;
        }
        let Some(dir) = reachable_dir() else {
            eprintln!(
                "skipped: no temporary directory whose ancestors all let uid {NOBODY} through \
                 (tried $TMPDIR, /tmp, /var/tmp, /dev/shm)"
            );
            return;
        };
        let c = start(dir);
        // Root's flow n0:91 -> n1:20, as in the report.
        let out = c.request(None, "n0", 91, "n1:20", "10MB/s");
        assert!(out.status.success(), "{}", stderr(&out));
        // nobody may not reserve a trickle on root's port, nor on any port of n0,
        // whose agent serves root only.
        for (port, to) in [(91, "n1:21"), (92, "n1:20")] {
            let out = c.request(Some(NOBODY), "n0", port, to, "1kB/s");
            assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
            let e = stderr(&out);
            assert!(
                e.starts_with("error:")
                    && e.contains("uid 65534 may not reserve bandwidth on node 'n0'"),
                "{e}"
            );
        }
        // Root is not locked out of its own port.
        let out = c.request(None, "n0", 91, "n1:21", "1MB/s");
        assert!(out.status.success(), "{}", stderr(&out));
        // On n2 nobody is an allowed user: a free port becomes its own...
        let out = c.request(Some(NOBODY), "n2", 93, "n1:20", "1kB/s");
        assert!(out.status.success(), "{}", stderr(&out));
        // ...but a port root holds reservations on is still root's.
        let out = c.request(None, "n2", 91, "n0:20", "1MB/s");
        assert!(out.status.success(), "{}", stderr(&out));
        let out = c.request(Some(NOBODY), "n2", 91, "n1:20", "1kB/s");
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("port 91 on node 'n2' belongs to uid 0"),
            "{}",
            stderr(&out)
        );
        // And root may use nobody's port (root may reserve for any port).
        let out = c.request(None, "n2", 93, "n0:21", "1MB/s");
        assert!(out.status.success(), "{}", stderr(&out));
    }
}
