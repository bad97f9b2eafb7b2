//! Placeholder until the command lands.
use std::process::ExitCode;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
