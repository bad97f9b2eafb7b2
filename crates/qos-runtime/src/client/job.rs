//! A job reservation as a tool writes it (`clusterqos job reserve`, the Slurm prolog):
//! a TOML file or command-line values turned into the protocol's [`JobRequest`], and
//! the keeper that renews a job's lease while a process (the scheduler's controller)
//! lives — so the controller's death releases the job one lease later.
//!
//! ```toml
//! id = "slurm-1234"
//! owner = "slurm"
//! pattern = "all-to-all"       # or ring, nearest-neighbour, one-to-many
//! nodes = ["h0", "h1", "h2"]
//! rate = "10MB/s"              # each flow
//! wait = "30s"                 # optional: wait in line for room
//! lease = "30s"                # optional
//! # or, instead of pattern/nodes/rate, explicit flows:
//! # [[flow]]
//! # src = "h0"
//! # dst = "h1"
//! # rate = "5MB/s"
//! # src_port = 7001           # optional, both or neither: the flow's packets are
//! # dst_port = 7002           # those from src_port or to dst_port (else: the job's cgroup)
//! ```

use std::time::Duration as StdDuration;

use qos_core::units::{Bandwidth, Duration};
use serde::Deserialize;

use crate::master_client::MasterClient;
use crate::protocol::job::{JobBody, JobFlow, JobRequest, Pattern};
use crate::protocol::{ErrorCode, WireError};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowFile {
    src: String,
    dst: String,
    rate: String,
    /// The flow's packets: those from this port at `src` or to `dst_port` at `dst`
    /// (both or neither; neither: told by the job's cgroup).
    #[serde(default)]
    src_port: u16,
    #[serde(default)]
    dst_port: u16,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFile {
    id: String,
    owner: String,
    pattern: Option<String>,
    nodes: Option<Vec<String>>,
    rate: Option<String>,
    #[serde(default)]
    flow: Vec<FlowFile>,
    wait: Option<String>,
    lease: Option<String>,
}

/// A bandwidth such as "10MB/s", as bytes/s.
pub fn rate(text: &str) -> Result<u64, String> {
    text.parse::<Bandwidth>()
        .map(|b| b.bytes_per_sec())
        .map_err(|e| format!("rate '{text}': {e}"))
}

/// A duration such as "30s", in whole milliseconds.
pub fn millis(what: &str, text: &str) -> Result<u64, String> {
    text.parse::<Duration>()
        .map(|d| d.as_ps() / 1_000_000_000)
        .map_err(|e| format!("{what} '{text}': {e}"))
}

/// The body of a pattern job.
pub fn pattern_body(pattern: &str, nodes: &[String], rate_text: &str) -> Result<JobBody, String> {
    Ok(JobBody::Pattern {
        pattern: pattern.parse::<Pattern>()?,
        nodes: nodes.to_vec(),
        rate: rate(rate_text)?,
        class: "premium".into(),
    })
}

/// Parses a job file (`name` for messages); errors say `name:line` where TOML can.
pub fn parse_file(name: &str, text: &str) -> Result<JobRequest, String> {
    let f: JobFile = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        match line {
            Some(l) => format!("{name}:{l}: {}", e.message()),
            None => format!("{name}: {}", e.message()),
        }
    })?;
    let at = |m: String| format!("{name}: {m}");
    let body =
        match (&f.pattern, &f.nodes, &f.rate, f.flow.is_empty()) {
            (Some(p), Some(n), Some(r), true) => pattern_body(p, n, r).map_err(at)?,
            (None, None, None, false) => JobBody::Flows {
                flows: f
                    .flow
                    .iter()
                    .map(|x| {
                        Ok(JobFlow {
                            src: x.src.clone(),
                            dst: x.dst.clone(),
                            rate: rate(&x.rate)?,
                            src_port: x.src_port,
                            dst_port: x.dst_port,
                            class: "premium".into(),
                        })
                    })
                    .collect::<Result<_, String>>()
                    .map_err(at)?,
            },
            _ => return Err(at(
                "give either `pattern`, `nodes` and `rate`, or [[flow]] tables (src, dst, rate)"
                    .into(),
            )),
        };
    Ok(JobRequest {
        id: f.id,
        owner: f.owner,
        body,
        lease_ms: f
            .lease
            .as_deref()
            .map(|l| millis("lease", l))
            .transpose()
            .map_err(at)?,
        wait_s: f
            .wait
            .as_deref()
            .map(|w| millis("wait", w).map(|ms| ms.div_ceil(1000) as u32))
            .transpose()
            .map_err(at)?,
        process: None,
    })
}

/// Renews job `id` every third of `lease` while process `pid` lives; returns when
/// the process is gone (the job then expires one lease later, unless released) or
/// the job is (released: `not_found`). Other errors (the manager away) are retried.
pub async fn keep_while(
    master: &MasterClient,
    id: &str,
    owner: &str,
    lease: StdDuration,
    pid: u32,
) -> Result<(), WireError> {
    let period = (lease / 3).max(StdDuration::from_millis(50));
    tracing::info!(
        job = id,
        pid,
        period_ms = period.as_millis() as u64,
        "keeping the job's lease"
    );
    loop {
        if !crate::agent::process_alive(pid) {
            tracing::info!(job = id, pid, "the process is gone: no more renewals");
            return Ok(());
        }
        match master.renew_job(id, owner).await {
            Ok(()) => {}
            Err(e) if e.code == ErrorCode::NotFound => {
                tracing::info!(
                    job = id,
                    "the job is gone (released or expired): no more renewals"
                );
                return Ok(());
            }
            Err(e) if e.code == ErrorCode::NotOwner => return Err(e),
            Err(e) => tracing::warn!(job = id, error = %e.message, "renewal failed; retrying"),
        }
        tokio::time::sleep(period).await;
    }
}

/// A small runtime for a tool's calls to the manager.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
