//! `clusterqos manager`: runs the master bandwidth resource manager (thesis §3.3, §4.3)
//! — admission, IDT assignment, best-effort shares, durable state, the agents' API.
//! The options are `qos_runtime::manager::launch::Options`, which checks them and runs
//! the master.

use std::process::ExitCode;

use qos_runtime::manager::launch;

/// Arguments.
pub type Args = launch::Options;

/// Runs the command.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    launch::run(&a)?;
    Ok(ExitCode::SUCCESS)
}
