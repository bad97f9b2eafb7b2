//! Why a run of Yum et al.'s cluster failed ([`IbaError`]), a value at fault
//! ([`ConfigError`]) and why source rate control's manager could not allocate
//! ([`AllocError`]): a leaf of the model, so its parts return them without importing
//! the model back.

use qos_core::admission::probe::ProbeError;
use qos_core::admission::AdmitError;
use qos_core::iba::queues::QueueError;
use qos_core::topology::build::TopologyError;

use crate::flit::FlitError;

/// A value at fault: the key path and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    /// Key path in the scenario (`network.link`, `workload.real_time.mean_on`).
    pub path: String,
    /// What is wrong, in one line.
    pub message: String,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum IbaError {
    /// A value at fault (checked by [`super::IbaConfig::validate`]; a run meets it only with
    /// a configuration that was not validated).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The flit network refused the configuration or deadlocked.
    #[error(transparent)]
    Flit(#[from] FlitError),
    /// A queue-pair operation failed.
    #[error("HCA queues: {0}")]
    Queue(#[from] QueueError),
    /// The reservation ledger was misused (a bug, reported rather than hidden).
    #[error("admission: {0}")]
    Probe(#[from] ProbeError),
    /// Source rate control's manager could not allocate (a bug, reported).
    #[error(transparent)]
    SourceRate(Box<AllocError>),
}

/// Why the manager could not allocate (a fabric the `qos_core` topology cannot
/// express; a bug, reported).
#[derive(Debug, thiserror::Error)]
pub enum AllocError {
    /// The topology was refused.
    #[error("source rate control: {0}")]
    Topology(#[from] TopologyError),
    /// A best-effort flow was refused.
    #[error("source rate control: {0}")]
    Admit(#[from] AdmitError),
    /// A router link whose other end does not lead back.
    #[error("source rate control: router port {0} is cabled one way only")]
    OneWay(u32),
}
