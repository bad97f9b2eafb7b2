//! `clusterqos agent`: a node's local manager (thesis §4.3) and, given `--nodes`, its data
//! plane or (`--backend kernel`) Linux traffic control enforcing the grants. The options
//! are `qos_runtime::node::launch::Options`, which checks them and runs the agent.

use std::process::ExitCode;

use qos_runtime::node::launch;
pub use qos_runtime::node::launch::DEFAULT_SOCKET;

/// Arguments.
pub type Args = launch::Options;

/// Runs the command (also `testbed node`, which starts it in a testbed's host).
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    launch::run(a)?;
    Ok(ExitCode::SUCCESS)
}
