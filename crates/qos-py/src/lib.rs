//! `clusterqos._native`: the Rust core under the `clusterqos` Python package.
//! Thin: every call goes to the same library functions the `clusterqos` command uses
//! (`qos_experiments::sweep` for scenarios and sweeps' tasks, `qos_experiments::gulati`
//! for `reproduce`, `qos_runtime` for the manager and agent clients), releases the
//! interpreter while it simulates, and hands results back as the JSON the command
//! prints with `--json`, which the Python side turns into DataFrames. Errors become the
//! package's exceptions carrying the command's one-line message (`file:line: ...`).
//!
//! Map of the crate:
//! - [`errors`] — the exception classes and which error maps to which.
//! - [`scenario`] — resolve, validate, edit (sweep parameters), run, sweep tasks,
//!   reproduce, TOML and JSON conversions.
//! - [`clients`] — the master's HTTP client and the node agent's socket client.

use pyo3::prelude::*;

mod clients;
mod errors;
mod scenario;

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ClusterqosError", py.get_type::<errors::ClusterqosError>())?;
    m.add("ScenarioError", py.get_type::<errors::ScenarioError>())?;
    m.add("SimulationError", py.get_type::<errors::SimulationError>())?;
    m.add("ManagerError", py.get_type::<errors::ManagerError>())?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    scenario::register(m)?;
    clients::register(m)?;
    Ok(())
}
