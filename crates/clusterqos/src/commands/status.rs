//! `clusterqos status`: per node and per switch port, capacity, reserved, best-effort
//! and free bandwidth as the master sees them (thesis §3.3.1, §3.3.2); with `--flows`,
//! this node's IDT table as its agent holds it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use qos_core::units::{Bandwidth, Duration};
use qos_runtime::client::Client;

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent's Unix socket.
    #[arg(long, default_value = super::agent::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Show this node's flows and IDTs instead of the resources.
    #[arg(long)]
    pub flows: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn bw(v: Option<u64>) -> String {
    v.map_or("unlimited".into(), |b| {
        Bandwidth::from_bytes_per_sec(b).to_string()
    })
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut c = Client::connect(&args.socket)
        .with_context(|| format!("agent socket {}", args.socket.display()))?;
    if args.flows {
        let flows = c.flows()?;
        if args.json {
            output::print_json(&serde_json::json!({ "flows": flows }))?;
            return Ok(ExitCode::SUCCESS);
        }
        let header = ["flow", "name", "class", "rate", "IDT", "owner uid/pid"];
        let rows = flows.iter().map(|f| {
            let idt = f.idt_ps.map(|p| Duration::from_ps(p).to_string());
            vec![
                f.flow.to_string(),
                f.name.clone(),
                f.class.clone(),
                bw(Some(f.rate)),
                idt.unwrap_or_else(|| "-".into()),
                format!("{}/{}", f.owner.uid, f.owner.pid),
            ]
        });
        output::print_rows(header, rows, 3);
        return Ok(ExitCode::SUCCESS);
    }
    let status = c.status()?;
    if args.json {
        output::print_json(&status)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "policy {}, {} premium and {} best-effort flows",
        status.policy, status.premium_flows, status.best_effort_flows
    );
    for (kind, first) in [("node", "node"), ("port", "switch/port")] {
        let header = [
            first,
            "direction",
            "capacity",
            "reserved",
            "best-effort",
            "free",
        ];
        let rows = status.resources.iter().filter(|r| r.kind == kind).map(|r| {
            vec![
                r.name.clone(),
                r.direction.clone(),
                bw(r.capacity),
                bw(Some(r.reserved)),
                bw(Some(r.best_effort)),
                bw(r.free),
            ]
        });
        output::print_rows(header, rows, 2);
    }
    Ok(ExitCode::SUCCESS)
}
