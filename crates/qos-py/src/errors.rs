//! The package's exceptions: errors are Python exceptions carrying the same
//! one-line message (file:line). Each message is what `clusterqos` prints after
//! `error: ` for the same input.
//!
//! - `ClusterqosError` — base of them all.
//! - `ScenarioError` — the input is wrong: a scenario (with `file:line`), a sweep key or
//!   value, an unknown scenario name.
//! - `SimulationError` — a valid scenario could not run (a deadlock, a model that
//!   cannot be built).
//! - `ManagerError` — the manager or the agent refused or could not be reached; its
//!   `code` attribute is the protocol's error code (`not_owner`, `unavailable`, ...).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use qos_experiments::flit::scenario::ScenarioError as FlitScenarioError;
use qos_experiments::sweep::SweepError;
use qos_sim::flit::FlitError;

create_exception!(
    clusterqos,
    ClusterqosError,
    PyException,
    "Base class of the errors clusterqos raises."
);
create_exception!(
    clusterqos,
    ScenarioError,
    ClusterqosError,
    "A scenario, a sweep parameter or a scenario name is wrong; the message names file:line."
);
create_exception!(
    clusterqos,
    SimulationError,
    ClusterqosError,
    "A valid scenario could not run (deadlock, a model that cannot be built)."
);
create_exception!(
    clusterqos,
    ManagerError,
    ClusterqosError,
    "The manager or agent refused a call or could not be reached; `code` says why."
);

enum Kind {
    Input,
    Run,
    Other,
}

fn kind(e: &SweepError) -> Kind {
    match e {
        SweepError::Read { .. }
        | SweepError::Resolve(_)
        | SweepError::Scenario(_)
        | SweepError::Param(_) => Kind::Input,
        SweepError::Flit(f) => match f {
            FlitScenarioError::Run {
                source: FlitError::Config { .. },
                ..
            } => Kind::Input,
            FlitScenarioError::Run { .. } => Kind::Run,
            _ => Kind::Input,
        },
        SweepError::Experiment(x) => match x {
            qos_experiments::Error::Scenario(_) | qos_experiments::Error::Unknown { .. } => {
                Kind::Input
            }
            qos_experiments::Error::Model(_) => Kind::Run,
            _ => Kind::Other,
        },
        SweepError::At { source, .. } => kind(source),
        _ => Kind::Other,
    }
}

/// The exception for a scenario or sweep error, with its one-line message.
pub fn sweep(e: SweepError) -> PyErr {
    let msg = e.to_string();
    match kind(&e) {
        Kind::Input => ScenarioError::new_err(msg),
        Kind::Run => SimulationError::new_err(msg),
        Kind::Other => ClusterqosError::new_err(msg),
    }
}

/// The exception for an experiments-crate error (`reproduce`).
pub fn experiment(e: qos_experiments::Error) -> PyErr {
    sweep(SweepError::Experiment(e))
}

/// A `ScenarioError` saying `msg`.
pub fn input(msg: impl Into<String>) -> PyErr {
    ScenarioError::new_err(msg.into())
}

/// A `ManagerError` saying `msg`, its `code` attribute set to `code`.
pub fn manager(py: Python<'_>, code: &str, msg: impl Into<String>) -> PyErr {
    let err = ManagerError::new_err(msg.into());
    // Setting an attribute on a fresh exception instance cannot fail in practice;
    // if it did, the exception would still carry its message.
    let _ = err.value(py).setattr("code", code);
    err
}
