//! Why a flit network could not be built or run ([`FlitError`]): a leaf of the flit
//! model, so every part of it returns the one error without importing the model back.

/// Why a flit network could not be built or run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FlitError {
    /// The configuration is unusable: `key` is the path of the value at fault
    /// (`router.buffer`, `classes[2].rate`; empty when no one key is), so that a
    /// scenario file can point at its line.
    #[error("flit network: {message}")]
    Config {
        /// Path of the key at fault, relative to the network table.
        key: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// No flit moved for too long while flits were waiting.
    #[error(
        "deadlock: no flit moved for {idle} cycles (cycle {cycle}, {flits} flits in the network)"
    )]
    Deadlock {
        /// Cycle of detection.
        cycle: u64,
        /// Cycles without movement.
        idle: u64,
        /// Flits stuck.
        flits: u64,
    },
    /// More than 2^30 packets in flight at once.
    #[error("more than 2^30 packets in flight; lower the load or shorten the run")]
    TooManyPackets,
}

impl FlitError {
    /// A configuration error about `key`.
    pub fn config(key: &str, message: impl Into<String>) -> FlitError {
        FlitError::Config {
            key: key.to_string(),
            message: message.into(),
        }
    }
}
