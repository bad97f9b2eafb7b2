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
        let mut t = output::table(["flow", "name", "class", "rate", "IDT", "owner uid/pid"]);
        for f in &flows {
            t.add_row(vec![
                f.flow.to_string(),
                f.name.clone(),
                f.class.clone(),
                bw(Some(f.rate)),
                f.idt_ps
                    .map_or("-".into(), |p| Duration::from_ps(p).to_string()),
                format!("{}/{}", f.owner.uid, f.owner.pid),
            ]);
        }
        output::align_numbers(&mut t, 3);
        println!("{t}");
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
    for kind in ["node", "port"] {
        let first = if kind == "node" {
            "node"
        } else {
            "switch/port"
        };
        let mut t = output::table([
            first,
            "direction",
            "capacity",
            "reserved",
            "best-effort",
            "free",
        ]);
        for r in status.resources.iter().filter(|r| r.kind == kind) {
            t.add_row(vec![
                r.name.clone(),
                r.direction.clone(),
                bw(r.capacity),
                bw(Some(r.reserved)),
                bw(Some(r.best_effort)),
                bw(r.free),
            ]);
        }
        output::align_numbers(&mut t, 2);
        println!("{t}");
    }
    Ok(ExitCode::SUCCESS)
}
