//! `clusterqos job reserve|release|renew|list`: job reservations on the manager
//! (`docs/jobs.md`) — every flow of a parallel job reserved at once or none, from a
//! pattern and a node list on the command line or a TOML file. Talks to the manager
//! over HTTP with the cluster's secret (a scheduler's controller, an operator).
//!
//! Exit status of `reserve`: 0 granted, 1 rejected (the reason printed), 2 an error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context};
use qos_runtime::auth::Secret;
use qos_runtime::client::job::{keep_while, millis, parse_file, pattern_body};
use qos_runtime::master_client::MasterClient;
use qos_runtime::protocol::job::{JobBody, JobDecision, JobRequest};

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

/// Where the manager is.
#[derive(Debug, Clone, clap::Args)]
pub struct ManagerArgs {
    /// The manager's URL (every replica's, separated by commas).
    #[arg(long)]
    pub manager: String,
    /// File holding the cluster's shared secret.
    #[arg(long)]
    pub secret: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The job operations.
#[derive(Debug, clap::Subcommand)]
pub enum What {
    /// Reserve a job's flows, all or nothing.
    Reserve(ReserveArgs),
    /// Release a job as one.
    Release(IdArgs),
    /// Renew a job's lease (once, or while a process lives).
    Renew(RenewArgs),
    /// List the jobs the manager holds.
    List(ManagerArgs),
}

/// `job reserve`.
#[derive(Debug, clap::Args)]
pub struct ReserveArgs {
    #[command(flatten)]
    pub manager: ManagerArgs,
    /// A TOML file describing the job (instead of the options below).
    #[arg(long, conflicts_with_all = ["id", "pattern", "nodes", "rate"])]
    pub file: Option<PathBuf>,
    /// The job's id (letters, digits, . _ : @ + -).
    #[arg(long, required_unless_present = "file")]
    pub id: Option<String>,
    /// Who holds it.
    #[arg(long, default_value = "cli")]
    pub owner: String,
    /// all-to-all, ring, nearest-neighbour or one-to-many.
    #[arg(long, default_value = "all-to-all")]
    pub pattern: String,
    /// The job's nodes, comma-separated, in order.
    #[arg(long, value_delimiter = ',', required_unless_present = "file")]
    pub nodes: Vec<String>,
    /// Each flow's rate ("10MB/s").
    #[arg(long, required_unless_present = "file")]
    pub rate: Option<String>,
    /// Wait in line up to this long for room ("30s") instead of being refused at once.
    #[arg(long)]
    pub wait: Option<String>,
    /// The job's lease ("30s"); default: the manager's.
    #[arg(long)]
    pub lease: Option<String>,
    /// Once granted, keep renewing the lease while process PID lives (stays in the
    /// foreground): when PID dies the job is released one lease later.
    #[arg(long, value_name = "PID")]
    pub keep_while_pid: Option<u32>,
}

/// `job release`, `job renew`.
#[derive(Debug, clap::Args)]
pub struct IdArgs {
    #[command(flatten)]
    pub manager: ManagerArgs,
    /// The job's id.
    #[arg(long)]
    pub id: String,
    /// Who holds it.
    #[arg(long, default_value = "cli")]
    pub owner: String,
}

/// `job renew`.
#[derive(Debug, clap::Args)]
pub struct RenewArgs {
    #[command(flatten)]
    pub job: IdArgs,
    /// Keep renewing the lease while process PID lives (stays in the foreground; ends
    /// when PID dies or the job is released): a scheduler's controller ties a job it
    /// reserved to its own life this way.
    #[arg(long, value_name = "PID")]
    pub keep_while_pid: Option<u32>,
    /// With --keep-while-pid: start the keeper in its own session and return at once
    /// (0 once it runs). A script that starts a keeper and then exits (a scheduler's
    /// prolog, whose process group is killed when it ends) needs this: a keeper put in
    /// the background by the shell could be killed before it leaves the group.
    #[arg(long, requires = "keep_while_pid")]
    pub detach: bool,
}

/// Starts this same command again, without `--detach`, in a new session (stdin closed,
/// stdout and stderr shared). `spawn` returns once the new program runs, so the keeper
/// has left the caller's process group and session by the time this returns.
fn detach() -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("finding this program to detach")?;
    let args = std::env::args_os().skip(1).filter(|a| a != "--detach");
    let mut cmd = std::process::Command::new(exe);
    cmd.args(args).stdin(std::process::Stdio::null());
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of this process.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().context("starting the keeper")?;
    println!("keeper started: pid {}", child.id());
    Ok(())
}

fn client(m: &ManagerArgs) -> anyhow::Result<MasterClient> {
    let secret = Secret::load(&m.secret)?;
    MasterClient::new(&m.manager, "cli", &secret).map_err(|e| anyhow!("--manager: {}", e.message))
}

fn request(a: &ReserveArgs) -> anyhow::Result<JobRequest> {
    let mut req = match &a.file {
        Some(f) => {
            let text = std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?;
            parse_file(&f.display().to_string(), &text).map_err(|e| anyhow!(e))?
        }
        None => JobRequest {
            id: a.id.clone().unwrap_or_default(),
            owner: a.owner.clone(),
            body: pattern_body(&a.pattern, &a.nodes, a.rate.as_deref().unwrap_or_default())
                .map_err(|e| anyhow!("--pattern/--rate: {e}"))?,
            lease_ms: None,
            wait_s: None,
            process: None,
        },
    };
    if let Some(w) = &a.wait {
        req.wait_s = Some(millis("--wait", w).map_err(|e| anyhow!(e))?.div_ceil(1000) as u32);
    }
    if let Some(l) = &a.lease {
        req.lease_ms = Some(millis("--lease", l).map_err(|e| anyhow!(e))?);
    }
    Ok(req)
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = qos_runtime::client::job::runtime()?;
    match args.what {
        What::Reserve(a) => {
            let req = request(&a)?;
            let m = client(&a.manager)?;
            let d = rt
                .block_on(m.reserve_job(&req))
                .map_err(|e| anyhow!(e.message))?;
            if a.manager.json {
                output::print_json(&d)?;
            }
            match d {
                JobDecision::Granted(info) => {
                    if !a.manager.json {
                        let what = match &info.body {
                            JobBody::Pattern { pattern, nodes, .. } => {
                                format!("{} over {} nodes", pattern.name(), nodes.len())
                            }
                            JobBody::Flows { .. } => "explicit flows".into(),
                        };
                        println!(
                            "granted: job {} ({what}, {} flows, lease {} ms)",
                            info.id, info.flow_count, info.lease_ms
                        );
                    }
                    if let Some(pid) = a.keep_while_pid {
                        qos_runtime::logging::init();
                        let lease = Duration::from_millis(info.lease_ms);
                        rt.block_on(keep_while(&m, &info.id, &info.owner, lease, pid))
                            .map_err(|e| anyhow!(e.message))?;
                    }
                    Ok(ExitCode::SUCCESS)
                }
                JobDecision::Rejected { message, .. } => {
                    if !a.manager.json {
                        println!("{message}");
                    }
                    Ok(ExitCode::from(1))
                }
            }
        }
        What::Release(a) => {
            let m = client(&a.manager)?;
            rt.block_on(m.release_job(&a.id, &a.owner))
                .map_err(|e| anyhow!(e.message))?;
            if a.manager.json {
                output::print_json(&serde_json::json!({ "released": a.id }))?;
            } else {
                println!("released: job {}", a.id);
            }
            Ok(ExitCode::SUCCESS)
        }
        What::Renew(RenewArgs {
            job: a,
            keep_while_pid,
            detach: true,
        }) => {
            // Bad options fail here, in the caller's sight, not in the keeper's log.
            let _ = (client(&a.manager)?, keep_while_pid);
            detach()?;
            Ok(ExitCode::SUCCESS)
        }
        What::Renew(RenewArgs {
            job: a,
            keep_while_pid,
            detach: false,
        }) => {
            let m = client(&a.manager)?;
            // A keeper runs detached: what it did goes to its log (stderr).
            qos_runtime::logging::init();
            let Some(pid) = keep_while_pid else {
                rt.block_on(m.renew_job(&a.id, &a.owner))
                    .map_err(|e| anyhow!(e.message))?;
                return Ok(ExitCode::SUCCESS);
            };
            // A keeper does not give up on a failed first call (a busy manager, a
            // replica changing leader): it renews every third of the job's lease
            // (3 s if the lease cannot be read yet), retrying until PID dies or the job
            // is gone.
            let lease_ms = rt
                .block_on(m.jobs())
                .ok()
                .and_then(|jobs| jobs.iter().find(|j| j.id == a.id).map(|j| j.lease_ms))
                .unwrap_or(3_000);
            rt.block_on(keep_while(
                &m,
                &a.id,
                &a.owner,
                Duration::from_millis(lease_ms),
                pid,
            ))
            .map_err(|e| anyhow!(e.message))?;
            Ok(ExitCode::SUCCESS)
        }
        What::List(a) => {
            let m = client(&a)?;
            let jobs = rt.block_on(m.jobs()).map_err(|e| anyhow!(e.message))?;
            if a.json {
                output::print_json(&serde_json::json!({ "jobs": jobs }))?;
                return Ok(ExitCode::SUCCESS);
            }
            let header = ["id", "owner", "what", "flows", "lease"];
            let rows = jobs.iter().map(|j| {
                let what = match &j.body {
                    JobBody::Pattern {
                        pattern,
                        nodes,
                        rate,
                        ..
                    } => format!(
                        "{} over {} at {}",
                        pattern.name(),
                        nodes.join(","),
                        qos_core::units::Bandwidth::from_bytes_per_sec(rate.to_owned())
                    ),
                    JobBody::Flows { flows } => format!("{} explicit flows", flows.len()),
                };
                vec![
                    j.id.clone(),
                    j.owner.clone(),
                    what,
                    j.flow_count.to_string(),
                    format!("{} ms", j.lease_ms),
                ]
            });
            output::print_rows(header, rows, 3);
            Ok(ExitCode::SUCCESS)
        }
    }
}
