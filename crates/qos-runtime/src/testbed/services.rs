//! The services of a testbed (`clusterqos testbed up`, `reproduce gulati --real`): the
//! master manager in the first host and, in every host, an agent with its data plane,
//! started from the `clusterqos` binary and awaited until they say they are ready (each
//! host's agent with the packet scheduler its configuration names, [`Schedulers`]);
//! and [`up`], the whole of `testbed up` from its options.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration as StdDuration, Instant};

use qos_core::sched::SchedulerKind;
use qos_core::units::{Bandwidth, Duration};

use super::{start_process, TestbedError, TestbedState};

/// UDP port of every agent's data plane.
pub const DATA_PORT: u16 = 7500;
/// TCP port of the manager.
pub const MANAGER_PORT: u16 = 7400;

/// What to start.
#[derive(Debug, Clone)]
pub struct Services {
    /// The `clusterqos` binary (runs `manager` and `testbed node`).
    pub exe: PathBuf,
    /// Rate of every link, each way.
    pub link_rate: Bandwidth,
    /// T for the manager's topology (default: one full frame at the link rate, so that
    /// IDT = T·Bmax/B holds).
    pub t: Option<Duration>,
    /// Bmax for the manager's topology (default: the payload the link carries).
    pub bmax: Option<Bandwidth>,
    /// Run the agents with the kernel backend (htb on each host's `eth0`) instead of
    /// their data planes.
    pub kernel: bool,
    /// What each host shares among its best-effort flows at most (default: its
    /// capacity; `best_effort` in the topology file).
    pub best_effort: Option<Bandwidth>,
    /// Each host's data-plane packet scheduler.
    pub schedulers: Schedulers,
}

/// The packet scheduler of every host's data plane: one kind for all, and kinds for
/// named hosts. Written `KIND`, `HOST=KIND,...` or both (`virtual-clock,h0=gm`), with
/// the names `agent --scheduler` takes ([`crate::dataplane::service::scheduler_kind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedulers {
    /// Hosts not named below.
    pub default: SchedulerKind,
    /// Named hosts, in the order given.
    pub hosts: Vec<(String, SchedulerKind)>,
}

impl Default for Schedulers {
    /// Rate control everywhere (the thesis's firmware).
    fn default() -> Self {
        Schedulers {
            default: SchedulerKind::RateControl,
            hosts: Vec::new(),
        }
    }
}

impl Schedulers {
    /// Parses `KIND`, `HOST=KIND,...` or both; a host named twice is an error, as is a
    /// second default.
    pub fn parse(text: &str) -> Result<Schedulers, TestbedError> {
        let bad = |why: String| TestbedError::Invalid(format!("--scheduler: {why}"));
        let mut out = Schedulers::default();
        let mut default_given = false;
        for part in text.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(bad(format!("empty entry in `{text}`")));
            }
            let (host, name) = match part.split_once('=') {
                Some((h, n)) => (Some(h.trim()), n.trim()),
                None => (None, part),
            };
            let kind =
                crate::dataplane::service::scheduler_kind(name).map_err(|e| bad(e.to_string()))?;
            match host {
                None if default_given => {
                    return Err(bad(format!("two schedulers for every host in `{text}`")))
                }
                None => {
                    out.default = kind;
                    default_given = true;
                }
                Some(h) if out.hosts.iter().any(|(x, _)| x == h) => {
                    return Err(bad(format!("host `{h}` named twice")))
                }
                Some(h) => out.hosts.push((h.to_string(), kind)),
            }
        }
        Ok(out)
    }

    /// The scheduler of `host`.
    pub fn of(&self, host: &str) -> SchedulerKind {
        self.hosts
            .iter()
            .find(|(h, _)| h == host)
            .map_or(self.default, |(_, k)| *k)
    }

    /// A host named that the testbed does not have, if any.
    pub fn unknown_host<'a>(&'a self, hosts: &[super::HostState]) -> Option<&'a str> {
        self.hosts
            .iter()
            .map(|(h, _)| h.as_str())
            .find(|h| !hosts.iter().any(|x| x.name == *h))
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TestbedError + '_ {
    move |source| TestbedError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn random_secret() -> Result<String, TestbedError> {
    let mut b = [0u8; 24];
    let urandom = Path::new("/dev/urandom");
    std::fs::File::open(urandom)
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(io(urandom))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Starts the manager (in the first host) and every host's agent with its data plane,
/// and waits until every agent is ready (20 s at most).
pub fn start(st: &mut TestbedState, svc: &Services) -> Result<(), TestbedError> {
    let dir = st.dir.clone();
    let secret = dir.join("secret");
    std::fs::write(&secret, random_secret()?).map_err(io(&secret))?;
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(io(&secret))?;
    let rate = svc.link_rate;
    // Capacities in the manager's topology count what grants count — payload — so that
    // the shares it hands out fill the link and no more: a full 1514-byte frame carries
    // 1448 bytes of TCP payload (kernel backend) or one data-plane packet's payload.
    // T is the time of one full frame at the link rate, so T·Bmax is the payload of one
    // packet and IDT = T·Bmax/B paces a flow at B of payload.
    let payload = if svc.kernel {
        1448
    } else {
        crate::dataplane::segment::payload_for_mtu(1500) as u64
    };
    let frame = 1514u64;
    let capacity = Bandwidth::from_bytes_per_sec(rate.bytes_per_sec() * payload / frame);
    let bmax = svc.bmax.unwrap_or(capacity);
    let t = svc.t.unwrap_or_else(|| {
        Duration::from_ps((frame as f64 / rate.bytes_per_sec().max(1) as f64 * 1e12).round() as u64)
    });
    let Some(h0) = st.hosts.first().cloned() else {
        return Err(TestbedError::Invalid("the testbed has no hosts".into()));
    };
    if let Some(h) = svc.schedulers.unknown_host(&st.hosts) {
        let names: Vec<&str> = st.hosts.iter().map(|h| h.name.as_str()).collect();
        return Err(TestbedError::Invalid(format!(
            "--scheduler names host `{h}`, which the testbed does not have ({})",
            names.join(", ")
        )));
    }
    let best_effort = svc
        .best_effort
        .map(|b| format!("best_effort = \"{}B/s\"\n", b.bytes_per_sec()))
        .unwrap_or_default();
    let mut topo = format!(
        "[defaults]\nt = \"{}ns\"\nbmax = \"{}B/s\"\nlink = \"{}B/s\"\n{best_effort}\n[[switch]]\nname = \"sw\"\nports = {}\n",
        (t.as_ps() as f64 / 1e3).round() as u64,
        bmax.bytes_per_sec(),
        capacity.bytes_per_sec(),
        st.hosts.len().max(2)
    );
    for (i, h) in st.hosts.iter().enumerate() {
        topo += &format!("\n[[host]]\nname = \"{}\"\nport = \"sw:{i}\"\n", h.name);
    }
    let topo_path = dir.join("topology.toml");
    std::fs::write(&topo_path, topo).map_err(io(&topo_path))?;
    let manager_url = format!("http://{}:{MANAGER_PORT}", h0.addr);
    let margs: Vec<String> = vec![
        "manager".into(),
        "--topology".into(),
        topo_path.display().to_string(),
        "--db".into(),
        dir.join("manager.db").display().to_string(),
        "--listen".into(),
        format!("{}:{MANAGER_PORT}", h0.addr),
        "--secret".into(),
        secret.display().to_string(),
    ];
    start_process(st, "manager", &h0.netns, &svc.exe, &margs)?;
    let nodes: Vec<String> = st
        .hosts
        .iter()
        .map(|h| format!("{}={}:{DATA_PORT}", h.name, h.addr))
        .collect();
    let hosts = st.hosts.clone();
    for h in &hosts {
        let mut nargs: Vec<String> = vec![
            "testbed".into(),
            "node".into(),
            "--node".into(),
            h.name.clone(),
            "--manager".into(),
            manager_url.clone(),
            "--secret".into(),
            secret.display().to_string(),
            "--nodes".into(),
            nodes.join(","),
            "--socket".into(),
            dir.join(format!("{}.agent.sock", h.name))
                .display()
                .to_string(),
            "--dataplane-socket".into(),
            dir.join(format!("{}.dp.sock", h.name))
                .display()
                .to_string(),
        ];
        if svc.kernel {
            nargs.extend(["--backend", "kernel", "--interface", "eth0"].map(String::from));
        } else {
            let kind = svc.schedulers.of(&h.name);
            nargs.extend(["--scheduler".to_string(), kind.name().to_string()]);
            // A work-conserving scheduler orders packets only if the backlog waits in
            // it: its data plane sends no faster than the link (rate control paces
            // every flow below it already).
            if kind != SchedulerKind::RateControl {
                nargs.extend([
                    "--link-rate".to_string(),
                    format!("{}B/s", rate.bytes_per_sec()),
                ]);
            }
        }
        start_process(st, &format!("agent-{}", h.name), &h.netns, &svc.exe, &nargs)?;
    }
    if svc.kernel {
        write_mpi_launcher(st)?;
    }
    let deadline = Instant::now() + StdDuration::from_secs(20);
    for p in st.processes.iter().filter(|p| p.role.starts_with("agent-")) {
        loop {
            let log = std::fs::read_to_string(&p.log).unwrap_or_default();
            if log.contains("agent ready") {
                break;
            }
            if Instant::now() > deadline {
                return Err(TestbedError::Invalid(format!(
                    "{} did not become ready; see {}",
                    p.role,
                    p.log.display()
                )));
            }
            std::thread::sleep(StdDuration::from_millis(100));
        }
    }
    Ok(())
}

/// Name of the MPI launcher script a kernel-backend testbed writes into its directory.
pub const MPI_RSH: &str = "mpi-rsh";

/// What runs `mpirun` in h0: `ip netns exec <h0> unshare --uts` + these words + the
/// mpirun command line, so that h0 has its own host name too (see [`MPI_RSH`]'s script).
pub const MPI_LAUNCH_H0: [&str; 3] = ["sh", "-c", "hostname h0 && exec \"$0\" \"$@\""];

/// Writes `D/mpi-rsh`, an rsh agent for MPI launchers (Open MPI's `plm_rsh_agent`,
/// MPICH's `-launcher-exec`): it runs the command in the named host's network namespace
/// and in a UTS namespace of its own whose host name is the host's (`h1`, `h2`, …), with
/// `CLUSTERQOS_AGENT_SOCKET` set to that host's agent, so the clusterqos PMPI library of
/// every rank talks to its own node's agent. The host names matter: the namespaces share
/// /tmp, and Open MPI names each daemon's session directory after its host (mpirun passes
/// its own `orte_tmpdir_base` to every daemon on the command line, over any value in the
/// daemon's environment). Under one shared host
/// name all daemons and mpirun took the same directory and raced in it: 32 of 1,000
/// launches of `hostname` failed (mkdir "File exists", exit 213; an orted killed by
/// SIGSEGV in hwloc's shared-memory topology file, exit 139); 0 of 1,000 with a host
/// name each. Also `D/hosts.openmpi` and `D/hosts.mpich`: every host but h0 (where
/// mpirun runs, under [`MPI_LAUNCH_H0`]), one slot each.
fn write_mpi_launcher(st: &TestbedState) -> Result<(), TestbedError> {
    let dir = &st.dir;
    let rsh = dir.join(MPI_RSH);
    let script = format!(
        "#!/bin/sh\n\
         # rsh agent for MPI launchers on the clusterqos testbed in {dir}: runs the command\n\
         # in the host's network namespace, under the host's own name, with its agent socket.\n\
         while [ \"${{1#-}}\" != \"$1\" ]; do shift; done  # options such as ssh's -x\n\
         host=\"$1\"; shift\n\
         case \"$host\" in h[0-9]*) ;; *) echo \"mpi-rsh: no testbed host '$host'\" >&2; exit 2;; esac\n\
         CLUSTERQOS_AGENT_SOCKET=\"{dir}/$host.agent.sock\"; export CLUSTERQOS_AGENT_SOCKET\n\
         exec ip netns exec \"{prefix}-$host\" unshare --uts \\\n\
         \x20   sh -c 'hostname \"$0\" && exec sh -c \"$1\"' \"$host\" \"$*\"\n",
        dir = dir.display(),
        prefix = st.prefix,
    );
    std::fs::write(&rsh, script).map_err(io(&rsh))?;
    std::fs::set_permissions(&rsh, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(io(&rsh))?;
    let others: Vec<&str> = st.hosts.iter().skip(1).map(|h| h.name.as_str()).collect();
    for (file, fmt) in [("hosts.openmpi", " slots=1"), ("hosts.mpich", ":1")] {
        let p = dir.join(file);
        let text: String = others.iter().map(|h| format!("{h}{fmt}\n")).collect();
        std::fs::write(&p, text).map_err(io(&p))?;
    }
    Ok(())
}

/// Parses "h0=10.77.0.1:7500,h1=10.77.0.2:7500": every node's data-plane address.
pub fn parse_nodes(s: &str) -> Result<Vec<(String, std::net::SocketAddr)>, TestbedError> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (n, a) = p.split_once('=').ok_or_else(|| {
                TestbedError::Invalid(format!("--nodes: `{p}` is not name=address:port"))
            })?;
            let addr = a.trim().parse().map_err(|_| {
                TestbedError::Invalid(format!("--nodes: `{a}` is not an address:port"))
            })?;
            Ok((n.trim().to_string(), addr))
        })
        .collect()
}

/// Default testbed directory (state file, logs, sockets, configuration).
pub const DEFAULT_DIR: &str = "/tmp/clusterqos-testbed";

/// Everything `testbed up` is started with (`clusterqos testbed up`'s options, parsed by
/// clap, and the binary to start the services from).
#[derive(Debug, Clone, clap::Args)]
pub struct UpOptions {
    /// Number of hosts.
    #[arg(long)]
    pub nodes: usize,
    /// Rate of every host↔switch link, each way ("100Mbit/s", "12.5MB/s").
    #[arg(long)]
    pub link_rate: String,
    /// Directory of the state file, logs, sockets and configuration.
    #[arg(long, default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Prefix of namespace names (1–6 letters or digits).
    #[arg(long, default_value = "cq")]
    pub prefix: String,
    /// The hosts' /24, as three octets.
    #[arg(long, default_value = "10.77.0")]
    pub subnet: String,
    /// The `clusterqos` binary to start the manager and agents from; `None` builds the
    /// network only.
    #[arg(skip)]
    pub exe: Option<PathBuf>,
    /// Rate-control parameter T for the manager's topology (from `clusterqos calibrate`;
    /// default: the time one full packet takes at the link rate, so IDT = T·Bmax/B holds).
    #[arg(long)]
    pub t: Option<String>,
    /// Bmax for the manager's topology (default: the payload the link carries).
    #[arg(long)]
    pub bmax: Option<String>,
    /// How the agents enforce grants: "dataplane" (their own ports) or "kernel" (htb
    /// classes on each host's eth0, for unmodified programs such as iperf3 or MPI).
    #[arg(long, value_enum, default_value = "dataplane")]
    pub backend: crate::agent::enforcer::Backend,
    /// Each host's data-plane packet scheduler: one kind for all ("virtual-clock"), kinds
    /// for named hosts ("h0=gm,h1=virtual-clock"; the others rate control), or both
    /// ("round-robin,h0=rate"). Names as for `agent --scheduler`.
    #[arg(long, default_value = "rate-control")]
    pub scheduler: String,
}

/// Why `testbed up` failed.
#[derive(Debug, thiserror::Error)]
pub enum UpError {
    /// An option is wrong (the message names the flag).
    #[error("{0}")]
    Invalid(String),
    /// The network could not be built.
    #[error(transparent)]
    Testbed(#[from] TestbedError),
    /// The services did not start; the testbed was removed again.
    #[error("starting services (testbed removed again)")]
    Services(#[source] TestbedError),
}

/// Parses a /24 given as three octets ("10.77.0").
pub fn parse_subnet(s: &str) -> Result<[u8; 3], UpError> {
    let bad = || {
        UpError::Invalid(format!(
            "--subnet must be three octets like 10.77.0, not '{s}'"
        ))
    };
    let v: Vec<u8> = s
        .split('.')
        .map(|x| x.parse::<u8>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    match v[..] {
        [a, b, c] => Ok([a, b, c]),
        _ => Err(bad()),
    }
}

/// Builds the testbed and, with `exe`, starts its manager and agents; if they do not
/// start, removes the testbed again. Every option is checked before anything is built.
pub fn up(o: &UpOptions) -> Result<TestbedState, UpError> {
    fn value<T: std::str::FromStr>(flag: &str, v: Option<&str>) -> Result<Option<T>, UpError>
    where
        T::Err: std::fmt::Display,
    {
        v.map(|s| {
            s.parse()
                .map_err(|e| UpError::Invalid(format!("{flag}: {e}")))
        })
        .transpose()
    }
    let rate: Bandwidth = o
        .link_rate
        .parse()
        .map_err(|e| UpError::Invalid(format!("--link-rate: {e}")))?;
    let spec = super::TestbedSpec {
        nodes: o.nodes,
        link_rate: rate,
        prefix: o.prefix.clone(),
        subnet: parse_subnet(&o.subnet)?,
        dir: o.dir.clone(),
        port_buffer: None,
    };
    let schedulers =
        Schedulers::parse(&o.scheduler).map_err(|e| UpError::Invalid(e.to_string()))?;
    let svc = match &o.exe {
        Some(exe) => Some(Services {
            exe: exe.clone(),
            link_rate: rate,
            t: value("--t", o.t.as_deref())?,
            bmax: value("--bmax", o.bmax.as_deref())?,
            kernel: o.backend == crate::agent::enforcer::Backend::Kernel,
            best_effort: None,
            schedulers,
        }),
        None => None,
    };
    let mut st = super::up(&spec)?;
    if let Some(svc) = svc {
        if let Err(e) = start(&mut st, &svc) {
            let _ = super::down(&o.dir);
            return Err(UpError::Services(e));
        }
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedulers_are_one_kind_for_all_hosts_and_kinds_for_named_ones() {
        let s = Schedulers::parse("virtual-clock").unwrap();
        assert_eq!(s.of("h3"), SchedulerKind::VirtualClock);
        let s = Schedulers::parse("h0=gm, h2=interleaved-round-robin").unwrap();
        assert_eq!(s.of("h0"), SchedulerKind::Gm);
        assert_eq!(s.of("h1"), SchedulerKind::RateControl);
        assert_eq!(s.of("h2"), SchedulerKind::InterleavedRoundRobin);
        let s = Schedulers::parse("round-robin,h1=rate").unwrap();
        assert_eq!(s.of("h0"), SchedulerKind::MessageRoundRobin);
        assert_eq!(s.of("h1"), SchedulerKind::RateControl);
        for (bad, says) in [
            ("fifo", "unknown scheduler 'fifo'"),
            ("h0=gm,h0=rate", "host `h0` named twice"),
            ("gm,rate", "two schedulers for every host"),
            ("h0=gm,,", "empty entry"),
            ("h1=wfq", "unknown scheduler 'wfq'"),
        ] {
            let e = Schedulers::parse(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("--scheduler: ") && e.contains(says),
                "{bad}: {e}"
            );
        }
        let hosts = [super::super::HostState {
            name: "h0".into(),
            netns: "x-h0".into(),
            addr: std::net::Ipv4Addr::new(10, 0, 0, 1),
        }];
        let s = Schedulers::parse("h0=gm,h7=gm").unwrap();
        assert_eq!(s.unknown_host(&hosts), Some("h7"));
        assert_eq!(
            Schedulers::parse("h0=gm").unwrap().unknown_host(&hosts),
            None
        );
    }

    #[test]
    fn node_lists_parse_and_bad_entries_say_which() {
        let v = parse_nodes("h0=10.0.0.1:7500, h1=10.0.0.2:7501").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].0, "h1");
        assert_eq!(v[1].1.port(), 7501);
        let e = parse_nodes("h0=10.0.0.1").unwrap_err().to_string();
        assert!(e.contains("10.0.0.1"), "{e}");
        let e = parse_nodes("h0").unwrap_err().to_string();
        assert!(e.contains("name=address:port"), "{e}");
    }

    fn up_options() -> UpOptions {
        UpOptions {
            nodes: 2,
            link_rate: "40Mbit/s".into(),
            dir: PathBuf::from("/nonexistent/testbed"),
            prefix: "cq".into(),
            subnet: "10.77.0".into(),
            exe: Some(PathBuf::from("/nonexistent/clusterqos")),
            t: None,
            bmax: None,
            backend: crate::agent::enforcer::Backend::Dataplane,
            scheduler: "rate-control".into(),
        }
    }

    #[test]
    fn up_checks_every_option_before_building_anything() {
        assert_eq!(parse_subnet("10.9.0").unwrap(), [10, 9, 0]);
        for bad in ["10.9", "10.9.0.1", "10.x.0", "256.0.0"] {
            let e = parse_subnet(bad).unwrap_err().to_string();
            assert!(e.starts_with("--subnet must be three octets"), "{bad}: {e}");
        }
        type Spoil = fn(&mut UpOptions);
        let cases: [(Spoil, &str); 5] = [
            (|o| o.link_rate = "fast".into(), "--link-rate: "),
            (|o| o.subnet = "10.77".into(), "--subnet must be"),
            (|o| o.t = Some("soon".into()), "--t: "),
            (|o| o.bmax = Some("lots".into()), "--bmax: "),
            (|o| o.scheduler = "fifo".into(), "--scheduler: "),
        ];
        for (spoil, expected) in cases {
            let mut o = up_options();
            spoil(&mut o);
            // The error names the flag: nothing was built (the directory does not exist).
            let e = up(&o).unwrap_err();
            assert!(matches!(e, UpError::Invalid(_)), "{e}");
            assert!(e.to_string().starts_with(expected), "{expected:?}: {e}");
        }
    }
}
