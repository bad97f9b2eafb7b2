//! `clusterqos admit FILE` — replays a topology and an ordered list of requests and
//! releases through admission control (thesis §3.3.1) and prints each decision and the
//! best-effort shares after each step (`qos_experiments::admit`; script format in
//! `examples/admit-*.toml`). Bad input gives one `file:line` error and exit status 2.

use std::path::PathBuf;
use std::process::ExitCode;

use qos_core::besteffort::Policy;
use qos_experiments::admit;

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Admission script: a topology and [[step]]s of requests and releases (TOML).
    pub file: PathBuf,
    /// How best-effort flows share the surplus: the thesis rule (equal parts of each
    /// resource's surplus, minimum along the path) or weighted max-min fair shares.
    #[arg(long, value_enum, default_value = "thesis")]
    pub policy: Policy,
    /// Print the decisions as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = admit::replay(&args.file, args.policy)?;
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        admit::render_text(&report)
    };
    output::emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
