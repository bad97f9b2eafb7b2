//! The errors of the experiments library, in one leaf module: [`Error`], why an
//! experiment could not run, and the errors of the parts it wraps (the thesis's model
//! runs, flit scenario runs, Yum's runs, the report writer). They name only the models'
//! and the core's types, so every experiment can return them without an import cycle;
//! each part re-exports its own error where it is used.

use std::path::PathBuf;

use qos_core::source::Located;
use qos_sim::flit::FlitError;
use qos_sim::iba::run::IbaError;

/// Why an experiment could not run (a miss is not an error: it is a failed check).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A scenario file is wrong (with its file and line).
    #[error(transparent)]
    Scenario(#[from] Located),
    /// The thesis's model could not run a scenario.
    #[error(transparent)]
    Model(#[from] RunError),
    /// A flit scenario's run failed.
    #[error(transparent)]
    Flit(ScenarioError),
    /// Yum et al.'s experiments could not run.
    #[error(transparent)]
    Yum(#[from] YumError),
    /// No scenario or experiment of that name.
    #[error("no scenario '{name}' (known: {known})")]
    Unknown {
        /// What was asked.
        name: String,
        /// What exists.
        known: String,
    },
    /// The report directory could not be written.
    #[error("writing the report: {0}")]
    Report(#[from] ReportError),
    /// A real experiment failed (testbed, data plane, traffic).
    #[error("{0:#}")]
    Real(anyhow::Error),
}

/// A scenario the model could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// The cluster could not be built (e.g. a flow without a route).
    #[error("{scenario}: the model cannot be built: {why}")]
    Model {
        /// Scenario name.
        scenario: String,
        /// What is wrong.
        why: String,
    },
    /// The model's IDT sweep never leaves Bmax, so T cannot be measured.
    #[error("{scenario}: the model's IDT sweep does not fall below Bmax; T cannot be measured")]
    NoKnee {
        /// Scenario name.
        scenario: String,
    },
}

/// Why a flit scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A file is malformed or a value out of range (`file:line: message`).
    #[error(transparent)]
    Parse(#[from] Located),
    /// A run failed (deadlock, too many packets).
    #[error("{file}: {source}")]
    Run {
        /// File name.
        file: String,
        /// Cause.
        source: FlitError,
    },
}

/// Why a run of the reproduction failed.
#[derive(Debug, thiserror::Error)]
pub enum YumError {
    /// A run failed.
    #[error("{scenario}, case {case}, load {load}: {source}")]
    Run {
        /// Scenario.
        scenario: String,
        /// Case.
        case: String,
        /// Load.
        load: f64,
        /// Why.
        source: IbaError,
    },
}

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be created or written.
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Two figures or tables share an id, or an id is not a safe file name.
    #[error("bad report item id '{0}': ids must be unique and use only letters, digits, '-', '_' or '.'")]
    BadId(String),
}
