//! `clusterqos calibrate`: measures a node's rate-control parameters T and Bmax the way
//! thesis §5.3 does — one flow of 64 KB messages, IDT swept from 0 (unregulated: Bmax)
//! up; T is the time per packet at Bmax, below which the IDT does not slow the flow (the
//! knee of Fig 5.3) — and writes them into the manager's topology file.
//!
//! The flow runs between two data planes started for the purpose: on loopback, or with
//! `--testbed DIR` inside the testbed's hosts h0 → h1 (through its shaped links).

use std::path::PathBuf;
use std::process::ExitCode;

use qos_core::sched::SchedulerKind;
use qos_core::units::Bytes;
use qos_experiments::calibrate::{sites, write_parameters};
use qos_runtime::dataplane::harness::{calibrate, Harness};

use crate::output;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run between the testbed's hosts h0 and h1 (directory of `testbed up`).
    #[arg(long)]
    pub testbed: Option<PathBuf>,
    /// Message size.
    #[arg(long, default_value = "64KiB")]
    pub message_size: String,
    /// Messages per sweep point.
    #[arg(long, default_value_t = 300)]
    pub messages: usize,
    /// Payload bytes per packet (default: from the path MTU).
    #[arg(long)]
    pub payload: Option<usize>,
    /// Topology file of the manager to write T and Bmax into.
    #[arg(long)]
    pub topology: Option<PathBuf>,
    /// Write into this `[[host]]` entry instead of `[defaults]`.
    #[arg(long)]
    pub node: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let size: Bytes = args
        .message_size
        .parse()
        .map_err(|e| anyhow::anyhow!("--message-size: {e}"))?;
    if size.get() == 0 || size.get() > 16 << 20 {
        anyhow::bail!("--message-size must be 1 B ..= 16 MiB");
    }
    if args.messages == 0 {
        anyhow::bail!("--messages must be at least 1");
    }
    let h = Harness::start(
        sites(args.testbed.as_deref())?,
        SchedulerKind::RateControl,
        args.payload,
    )?;
    let c = calibrate(&h, size.get() as usize, args.messages)?;
    drop(h);
    let t = format!("{}ns", c.t.as_ns());
    let bmax = format!("{}", c.bmax);
    if let Some(p) = &args.topology {
        write_parameters(p, args.node.as_deref(), &t, &bmax)?;
    }
    if args.json {
        output::print_json(&c)?;
    } else {
        let mut tbl = output::table(["IDT", "achieved"]);
        for (idt, b) in &c.sweep {
            tbl.add_row(vec![idt.to_string(), b.to_string()]);
        }
        output::align_numbers(&mut tbl, 0);
        println!("{tbl}");
        println!(
            "Bmax = {} (IDT 0), T = {} per {}-byte packet; knee at IDT {}",
            c.bmax, c.t, c.packet_payload, c.knee
        );
        if let Some(p) = &args.topology {
            println!("wrote t = \"{t}\", bmax = \"{bmax}\" into {}", p.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
