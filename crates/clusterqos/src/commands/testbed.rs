//! `clusterqos testbed`: a cluster of network namespaces on this machine for experiments
//! on real traffic (thesis §5.1 rebuilt; see `qos_runtime::testbed`).
//!
//! - `testbed up --nodes N --link-rate R`: hosts h0..hN-1 joined by a bridge, every link
//!   shaped to R both ways with tbf; a manager in h0 and, in every host, an agent with its
//!   data plane (`testbed node`).
//! - `testbed down`: removes exactly what `up` recorded.
//! - `testbed status`: what is up.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use qos_core::units::Bandwidth;
use qos_runtime::testbed::{self, TestbedSpec, TestbedState};

use crate::output;

/// Default testbed directory (state file, logs, sockets, configuration).
pub const DEFAULT_DIR: &str = "/tmp/clusterqos-testbed";
/// UDP port of every agent's data plane.
pub const DATA_PORT: u16 = 7500;
/// TCP port of the manager.
pub const MANAGER_PORT: u16 = 7400;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Build the testbed and start a manager and an agent per host.
    Up(UpArgs),
    /// Remove everything `up` created (as recorded in the state file).
    Down(DirArgs),
    /// Show the testbed recorded in the state file.
    Status(DirArgs),
    /// Run one host's agent with its data plane (started by `up` inside a namespace).
    #[command(hide = true)]
    Node(NodeArgs),
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Number of hosts.
    #[arg(long)]
    pub nodes: usize,
    /// Rate of every host↔switch link, each way ("100Mbit/s", "12.5MB/s").
    #[arg(long)]
    pub link_rate: String,
    #[arg(long, default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Prefix of namespace names (1–6 letters or digits).
    #[arg(long, default_value = "cq")]
    pub prefix: String,
    /// The hosts' /24, as three octets.
    #[arg(long, default_value = "10.77.0")]
    pub subnet: String,
    /// Build the network only; start no manager or agents.
    #[arg(long)]
    pub no_services: bool,
    /// Rate-control parameter T for the manager's topology (from `clusterqos calibrate`;
    /// default: the time one full packet takes at the link rate, so IDT = T·Bmax/B holds).
    #[arg(long)]
    pub t: Option<String>,
    #[arg(long)]
    pub bmax: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct DirArgs {
    #[arg(long, default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    #[arg(long)]
    pub node: String,
    #[arg(long)]
    pub manager: String,
    #[arg(long)]
    pub secret: PathBuf,
    /// Every node's data address: "h0=10.77.0.1:7500,h1=10.77.0.2:7500".
    #[arg(long)]
    pub nodes: String,
    /// The local manager's socket.
    #[arg(long)]
    pub socket: PathBuf,
    /// The data plane's port socket.
    #[arg(long)]
    pub dataplane_socket: PathBuf,
    /// "rate" (rate control) or "gm" (rate control off).
    #[arg(long, default_value = "rate")]
    pub scheduler: String,
    /// Transport faults, e.g. "drop=0.01,dup=0.01,reorder=0.02,seed=1".
    #[arg(long, default_value = "")]
    pub faults: String,
    /// Payload bytes per packet (default: from the path MTU).
    #[arg(long)]
    pub payload: Option<usize>,
    #[command(flatten)]
    pub tls: super::agent::TlsArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Up(a) => up(a),
        Action::Down(a) => down(a),
        Action::Status(a) => status(a),
        Action::Node(a) => node(a),
    }
}

fn parse_subnet(s: &str) -> anyhow::Result<[u8; 3]> {
    let v: Vec<u8> = s
        .split('.')
        .map(|x| x.parse::<u8>())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow::anyhow!("--subnet must be three octets like 10.77.0, not '{s}'"))?;
    match v[..] {
        [a, b, c] => Ok([a, b, c]),
        _ => bail!("--subnet must be three octets like 10.77.0, not '{s}'"),
    }
}

fn random_secret() -> anyhow::Result<String> {
    let mut b = [0u8; 24];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

fn up(a: UpArgs) -> anyhow::Result<ExitCode> {
    let rate: Bandwidth = a
        .link_rate
        .parse()
        .map_err(|e| anyhow::anyhow!("--link-rate: {e}"))?;
    let spec = TestbedSpec {
        nodes: a.nodes,
        link_rate: rate,
        prefix: a.prefix.clone(),
        subnet: parse_subnet(&a.subnet)?,
        dir: a.dir.clone(),
        port_buffer: None,
    };
    let mut st = testbed::up(&spec)?;
    if !a.no_services {
        if let Err(e) = start_services(&a, rate, &mut st) {
            let _ = testbed::down(&a.dir);
            return Err(e.context("starting services (testbed removed again)"));
        }
    }
    if a.json {
        output::print_json(&st)?;
    } else {
        print_state(&st);
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts the manager (in h0) and every host's agent with its data plane, and waits
/// until they are ready.
pub fn start_services(a: &UpArgs, rate: Bandwidth, st: &mut TestbedState) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating the clusterqos binary")?;
    let secret = a.dir.join("secret");
    std::fs::write(&secret, random_secret()?).with_context(|| secret.display().to_string())?;
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    let bmax = a.bmax.clone().unwrap_or_else(|| format!("{}", rate));
    let t = a.t.clone().unwrap_or_else(|| {
        let payload = qos_runtime::dataplane::segment::payload_for_mtu(1500) as f64;
        format!(
            "{}ns",
            (payload / rate.bytes_per_sec() as f64 * 1e9).round() as u64
        )
    });
    let mut topo = format!("[defaults]\nt = \"{}\"\nbmax = \"{}\"\nlink = \"{}\"\n\n[[switch]]\nname = \"sw\"\nports = {}\n", t, bmax, rate, st.hosts.len().max(2));
    for (i, h) in st.hosts.iter().enumerate() {
        topo += &format!("\n[[host]]\nname = \"{}\"\nport = \"sw:{i}\"\n", h.name);
    }
    let topo_path = a.dir.join("topology.toml");
    std::fs::write(&topo_path, topo)?;
    let h0 = st.hosts[0].clone();
    let manager_url = format!("http://{}:{MANAGER_PORT}", h0.addr);
    let margs: Vec<String> = vec![
        "manager".into(),
        "--topology".into(),
        topo_path.display().to_string(),
        "--db".into(),
        a.dir.join("manager.db").display().to_string(),
        "--listen".into(),
        format!("{}:{MANAGER_PORT}", h0.addr),
        "--secret".into(),
        secret.display().to_string(),
    ];
    testbed::start_process(st, "manager", &h0.netns, &exe, &margs)?;
    let nodes: Vec<String> = st
        .hosts
        .iter()
        .map(|h| format!("{}={}:{DATA_PORT}", h.name, h.addr))
        .collect();
    let hosts = st.hosts.clone();
    for h in &hosts {
        let nargs: Vec<String> = vec![
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
            a.dir
                .join(format!("{}.agent.sock", h.name))
                .display()
                .to_string(),
            "--dataplane-socket".into(),
            a.dir
                .join(format!("{}.dp.sock", h.name))
                .display()
                .to_string(),
        ];
        testbed::start_process(st, &format!("agent-{}", h.name), &h.netns, &exe, &nargs)?;
    }
    // Wait for every agent to say it is ready.
    let deadline = Instant::now() + Duration::from_secs(20);
    for p in st.processes.iter().filter(|p| p.role.starts_with("agent-")) {
        loop {
            let log = std::fs::read_to_string(&p.log).unwrap_or_default();
            if log.contains("agent ready") {
                break;
            }
            if Instant::now() > deadline {
                bail!("{} did not become ready; see {}", p.role, p.log.display());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

fn print_state(st: &TestbedState) {
    let mut t = output::table(["host", "namespace", "address"]);
    for h in &st.hosts {
        t.add_row(vec![h.name.clone(), h.netns.clone(), h.addr.to_string()]);
    }
    println!("{t}");
    println!(
        "links shaped to {} each way; state in {}",
        Bandwidth::from_bytes_per_sec(st.link_rate),
        st.dir.join(testbed::STATE_FILE).display()
    );
    for p in &st.processes {
        println!(
            "{} (pid {}) in {}, log {}",
            p.role,
            p.pid,
            p.netns,
            p.log.display()
        );
    }
}

fn down(a: DirArgs) -> anyhow::Result<ExitCode> {
    let rep = testbed::down(&a.dir)?;
    if a.json {
        output::print_json(&rep)?;
    } else {
        println!(
            "stopped {} processes, removed namespaces: {}",
            rep.processes_stopped,
            rep.namespaces_removed.join(" ")
        );
        for e in &rep.errors {
            eprintln!("warning: {e}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn status(a: DirArgs) -> anyhow::Result<ExitCode> {
    let st = TestbedState::load(&a.dir)?;
    if a.json {
        output::print_json(&st)?;
    } else {
        print_state(&st);
    }
    Ok(ExitCode::SUCCESS)
}

/// Parses "h0=10.77.0.1:7500,h1=10.77.0.2:7500".
pub fn parse_nodes(s: &str) -> anyhow::Result<Vec<(String, std::net::SocketAddr)>> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (n, a) = p
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("--nodes: `{p}` is not name=address:port"))?;
            let addr = a
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("--nodes: `{a}` is not an address:port"))?;
            Ok((n.trim().to_string(), addr))
        })
        .collect()
}

/// Runs one host's agent with its data plane (`testbed node`, and `agent --nodes`).
pub fn node(a: NodeArgs) -> anyhow::Result<ExitCode> {
    use qos_runtime::dataplane::engine::EngineConfig;
    use qos_runtime::dataplane::segment::{path_mtu, payload_for_mtu};
    use qos_runtime::dataplane::service::{scheduler_kind, DataPlaneConfig};
    use qos_runtime::shm::region::Layout;
    use qos_runtime::transport::link::Faults;

    let nodes = parse_nodes(&a.nodes)?;
    let scheduler = scheduler_kind(&a.scheduler).ok_or_else(|| {
        anyhow::anyhow!("--scheduler must be `rate` or `gm`, not '{}'", a.scheduler)
    })?;
    let faults = Faults::parse(&a.faults).map_err(|e| anyhow::anyhow!("--faults: {e}"))?;
    let payload = match a.payload {
        Some(p) => p,
        None => {
            let other = nodes.iter().find(|(n, _)| *n != a.node).map(|(_, x)| *x);
            payload_for_mtu(other.and_then(path_mtu).unwrap_or(1500))
        }
    };
    let secret = qos_runtime::auth::Secret::load(&a.secret)?;
    qos_runtime::logging::init();
    let agent = qos_runtime::agent::Config {
        node: a.node.clone(),
        manager: a.manager,
        secret,
        socket: a.socket,
        tls: a.tls.client_config()?,
    };
    let dp = DataPlaneConfig {
        node: a.node,
        nodes,
        socket: a.dataplane_socket,
        socket_mode: 0o660,
        allowed_uids: vec![],
        engine: EngineConfig {
            payload,
            ..EngineConfig::default()
        },
        faults,
        scheduler,
        layout: Layout::default(),
    };
    qos_runtime::dataplane::seam::run_agent_with_dataplane(agent, dp)?;
    Ok(ExitCode::SUCCESS)
}
