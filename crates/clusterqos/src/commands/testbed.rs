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

use anyhow::{bail, Context};
use qos_core::units::Bandwidth;
use qos_runtime::testbed::services::{self, Services};
use qos_runtime::testbed::{self, TestbedSpec, TestbedState};

use crate::output;

/// Default testbed directory (state file, logs, sockets, configuration).
pub const DEFAULT_DIR: &str = "/tmp/clusterqos-testbed";

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
    Node(Box<super::agent::NodeArgs>),
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
    /// How the agents enforce grants: "dataplane" (their own ports) or "kernel" (htb
    /// classes on each host's eth0, for unmodified programs such as iperf3 or MPI).
    #[arg(long, default_value = "dataplane", value_parser = ["dataplane", "kernel"])]
    pub backend: String,
    /// Each host's data-plane packet scheduler: one kind for all ("virtual-clock"), kinds
    /// for named hosts ("h0=gm,h1=virtual-clock"; the others rate control), or both
    /// ("round-robin,h0=rate"). Names as for `agent --scheduler`.
    #[arg(long, default_value = "rate-control")]
    pub scheduler: String,
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

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Up(a) => up(a),
        Action::Down(a) => down(a),
        Action::Status(a) => status(a),
        Action::Node(a) => super::agent::with_dataplane(*a),
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

fn up(a: UpArgs) -> anyhow::Result<ExitCode> {
    let rate: Bandwidth = a
        .link_rate
        .parse()
        .map_err(|e| anyhow::anyhow!("--link-rate: {e}"))?;
    let schedulers = services::Schedulers::parse(&a.scheduler)?;
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
        let svc = Services {
            exe: std::env::current_exe().context("locating the clusterqos binary")?,
            link_rate: rate,
            t: a.t
                .as_deref()
                .map(|t| t.parse().map_err(|e| anyhow::anyhow!("--t: {e}")))
                .transpose()?,
            bmax: a
                .bmax
                .as_deref()
                .map(|b| b.parse().map_err(|e| anyhow::anyhow!("--bmax: {e}")))
                .transpose()?,
            kernel: a.backend == "kernel",
            best_effort: None,
            schedulers,
        };
        if let Err(e) = services::start(&mut st, &svc) {
            let _ = testbed::down(&a.dir);
            return Err(anyhow::Error::new(e).context("starting services (testbed removed again)"));
        }
    }
    if a.json {
        output::print_json(&st)?;
    } else {
        print_state(&st);
    }
    Ok(ExitCode::SUCCESS)
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
        for e in rep.processes_left.iter().chain(&rep.errors) {
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
