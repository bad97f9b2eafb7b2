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
    #[arg(long, value_enum, default_value_t = PolicyArg::Thesis)]
    pub policy: PolicyArg,
    /// Print the decisions as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--policy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyArg {
    /// Thesis §4.3: equal parts of the surplus at each node and switch port.
    Thesis,
    /// Weighted max-min fair shares (water-filling).
    MaxMin,
}

impl From<PolicyArg> for Policy {
    fn from(p: PolicyArg) -> Policy {
        match p {
            PolicyArg::Thesis => Policy::Thesis,
            PolicyArg::MaxMin => Policy::MaxMin,
        }
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = admit::replay(&args.file, args.policy.into())?;
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        admit::render_text(&report)
    };
    output::emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
