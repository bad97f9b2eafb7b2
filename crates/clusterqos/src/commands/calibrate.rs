//! `clusterqos calibrate`: measures a node's rate-control parameters T and Bmax the way
//! thesis §5.3 does — one flow of 64 KB messages, IDT swept from 0 (unregulated: Bmax)
//! up; T is the time per packet at Bmax, below which the IDT does not slow the flow (the
//! knee of Fig 5.3) — and writes them into the manager's topology file.
//!
//! The flow runs between two data planes started for the purpose: on loopback, or with
//! `--testbed DIR` inside the testbed's hosts h0 → h1 (through its shaped links).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use qos_core::sched::SchedulerKind;
use qos_core::units::Bytes;
use qos_runtime::dataplane::harness::{calibrate, Harness, NodeSite};

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

fn sites(args: &Args) -> anyhow::Result<Vec<NodeSite>> {
    let Some(dir) = &args.testbed else {
        let a = std::net::UdpSocket::bind("127.0.0.1:0")?.local_addr()?;
        let b = std::net::UdpSocket::bind("127.0.0.1:0")?.local_addr()?;
        return Ok(vec![
            NodeSite {
                name: "a".into(),
                addr: a,
                netns: None,
            },
            NodeSite {
                name: "b".into(),
                addr: b,
                netns: None,
            },
        ]);
    };
    let st = qos_runtime::testbed::TestbedState::load(dir)?;
    if st.hosts.len() < 2 {
        anyhow::bail!(
            "the testbed has {} host(s); calibration needs two",
            st.hosts.len()
        );
    }
    Ok(st.hosts[..2]
        .iter()
        .map(|h| NodeSite {
            name: h.name.clone(),
            addr: std::net::SocketAddr::new(h.addr.into(), 7600),
            netns: Some(h.netns.clone()),
        })
        .collect())
}

/// Writes `t` and `bmax` into the topology file, keeping its formatting and comments.
pub fn write_parameters(
    path: &std::path::Path,
    node: Option<&str>,
    t: &str,
    bmax: &str,
) -> anyhow::Result<()> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| name.clone())?;
    let mut doc: toml_edit::DocumentMut =
        text.parse().map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    match node {
        None => {
            if !doc.contains_key("defaults") {
                doc["defaults"] = toml_edit::table();
            }
            doc["defaults"]["t"] = toml_edit::value(t);
            doc["defaults"]["bmax"] = toml_edit::value(bmax);
        }
        Some(n) => {
            let hosts = doc
                .get_mut("host")
                .and_then(|h| h.as_array_of_tables_mut())
                .ok_or_else(|| anyhow::anyhow!("{name}: no [[host]] entries"))?;
            let h = hosts
                .iter_mut()
                .find(|h| h.get("name").and_then(|v| v.as_str()) == Some(n))
                .ok_or_else(|| anyhow::anyhow!("{name}: no [[host]] named '{n}'"))?;
            h["t"] = toml_edit::value(t);
            h["bmax"] = toml_edit::value(bmax);
        }
    }
    std::fs::write(path, doc.to_string()).with_context(|| name.clone())?;
    // The result must still be a valid topology.
    let text = std::fs::read_to_string(path).with_context(|| name.clone())?;
    qos_core::topology::file::load(&name, &text).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
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
    let h = Harness::start(sites(&args)?, SchedulerKind::RateControl, args.payload)?;
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
