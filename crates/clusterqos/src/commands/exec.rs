//! `clusterqos exec`: runs an unmodified program under a flow (issue 14): asks the local
//! agent for the flow (best-effort by default, premium with `--bandwidth`), runs the
//! program, and gives the flow back when it exits. With the agent's kernel backend the
//! program's packets to `--to` are then shaped to the grant (docs/kernel-backend.md).
//!
//! Exit status: the program's (128 + N when a signal N ended it); 1 when the request is
//! rejected (the program is not run); 2 on an error (nothing granted is left behind).
//! SIGINT, SIGTERM and SIGHUP sent to this command are passed on to the program.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::Context;
use qos_core::units::Bandwidth;
use qos_runtime::client::{Client, LocalFlow};
use qos_runtime::protocol::Decision;

use super::request::FlowArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(trailing_var_arg = true)]
pub struct Args {
    #[command(flatten)]
    pub flow: FlowArgs,
    /// Premium bandwidth to reserve ("10MB/s"); without it the flow is best-effort.
    #[arg(long)]
    pub bandwidth: Option<String>,
    /// Best-effort weight (max-min policy).
    #[arg(long, default_value_t = 1, conflicts_with = "bandwidth")]
    pub weight: u32,
    /// A name for the flow.
    #[arg(long)]
    pub name: Option<String>,
    /// The program and its arguments (after `--`).
    #[arg(required = true, num_args = 1.., value_name = "CMD")]
    pub command: Vec<String>,
}

/// The running program, for the signal handler (0: none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; it only signals the program we started.
        unsafe { libc::kill(pid, sig) };
    }
}

fn forward_signals() {
    let handler = forward as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only reads an atomic and calls kill.
        unsafe { libc::signal(sig, handler) };
    }
}

fn release(socket: &PathBuf, flow: &LocalFlow) -> anyhow::Result<()> {
    let mut c = Client::connect(socket)
        .with_context(|| format!("agent socket {} (releasing the flow)", socket.display()))?;
    c.release(flow).context("releasing the flow")?;
    Ok(())
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut flow = args.flow.flow()?;
    flow.name = args.name.clone();
    let socket = args.flow.socket.clone();
    let bandwidth = args
        .bandwidth
        .as_deref()
        .map(|b| {
            b.parse::<Bandwidth>()
                .map_err(|e| anyhow::anyhow!("--bandwidth: {e}"))
        })
        .transpose()?;
    let mut c =
        Client::connect(&socket).with_context(|| format!("agent socket {}", socket.display()))?;
    // The flow belongs to this process, which lives as long as the program.
    let decision = match bandwidth {
        Some(b) => c.request_bandwidth(&flow, b.bytes_per_sec())?,
        None => c.best_effort(&flow, args.weight)?,
    };
    drop(c);
    match &decision {
        Decision::Granted(g) => eprintln!(
            "clusterqos exec: {} {} at {}",
            g.flow,
            g.class,
            Bandwidth::from_bytes_per_sec(g.rate)
        ),
        Decision::Rejected(r) => {
            eprintln!("clusterqos exec: rejected: {}", r.message);
            return Ok(ExitCode::from(1));
        }
    }
    forward_signals();
    let spawned = std::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            release(&socket, &flow)?;
            anyhow::bail!("cannot run '{}': {e}", args.command[0]);
        }
    };
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    let status = child.wait();
    CHILD.store(0, Ordering::SeqCst);
    release(&socket, &flow)?;
    let status = status.with_context(|| format!("waiting for '{}'", args.command[0]))?;
    use std::os::unix::process::ExitStatusExt;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
