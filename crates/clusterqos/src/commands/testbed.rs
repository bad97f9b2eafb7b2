//! `clusterqos testbed up|down|status`: a cluster of network namespaces with shaped links
//! on this machine, a manager and an agent per host (thesis §5.1 rebuilt;
//! `qos_runtime::testbed`); `testbed node` is a host's agent, started by `up`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use qos_core::units::Bandwidth;
use qos_runtime::testbed::services::{self, UpOptions, DEFAULT_DIR};
use qos_runtime::testbed::{self, TestbedState};

use crate::output;

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
    Node(Box<super::agent::Args>),
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    #[command(flatten)]
    pub options: UpOptions,
    /// Build the network only; start no manager or agents.
    #[arg(long)]
    pub no_services: bool,
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
        Action::Node(a) => super::agent::run(*a),
    }
}

fn up(a: UpArgs) -> anyhow::Result<ExitCode> {
    let exe = (!a.no_services).then(std::env::current_exe).transpose();
    let exe = exe.context("locating the clusterqos binary")?;
    let st = services::up(&UpOptions { exe, ..a.options })?;
    show(&st, a.json)
}

/// Prints a testbed's hosts, links and processes, or its JSON.
fn show(st: &TestbedState, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        output::print_json(st)?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows = st
        .hosts
        .iter()
        .map(|h| vec![h.name.clone(), h.netns.clone(), h.addr.to_string()]);
    output::print_rows(["host", "namespace", "address"], rows, 3);
    println!(
        "links shaped to {} each way; state in {}",
        Bandwidth::from_bytes_per_sec(st.link_rate),
        st.dir.join(testbed::STATE_FILE).display()
    );
    for p in &st.processes {
        let (role, pid, ns, log) = (&p.role, p.pid, &p.netns, p.log.display());
        println!("{role} (pid {pid}) in {ns}, log {log}");
    }
    Ok(ExitCode::SUCCESS)
}

fn down(a: DirArgs) -> anyhow::Result<ExitCode> {
    let rep = testbed::down(&a.dir)?;
    if a.json {
        output::print_json(&rep)?;
    } else {
        println!(
            "stopped {}, removed namespaces: {}",
            qos_core::text::count(rep.processes_stopped, "process"),
            rep.namespaces_removed.join(" ")
        );
        for e in rep.processes_left.iter().chain(&rep.errors) {
            eprintln!("warning: {e}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn status(a: DirArgs) -> anyhow::Result<ExitCode> {
    show(&TestbedState::load(&a.dir)?, a.json)
}
