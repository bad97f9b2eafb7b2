//! What every backend of the master's store implements and returns: the writer
//! interface ([`Store`], one [`Job`] per decision), what a start reads back
//! ([`Restored`]), the errors, and the store identity's text form.

use crate::manager::state::{DbOp, FlowRow, JobRecord};

/// Why the store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("database {path}: {source}")]
    Sqlite {
        /// The database file.
        path: String,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A row that does not decode, or a schema this build cannot read.
    #[error("database {path}: bad row: {message}")]
    BadRow {
        /// The database file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The database, or the witness beside it, is damaged or missing.
    #[error("database {path}: {message}")]
    Damaged {
        /// The database file.
        path: String,
        /// What was found, and what the operator can do.
        message: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// etcd could not be reached or refused a request.
    #[cfg(feature = "etcd")]
    #[error("etcd store {store}: {source}")]
    Etcd {
        /// The endpoints and key prefix.
        store: String,
        /// What the client said.
        #[source]
        source: etcd_client::Error,
    },
    /// What etcd holds under the prefix is damaged, or disagrees with the witness.
    #[error("etcd store {store}: {message}")]
    EtcdDamaged {
        /// The endpoints and key prefix.
        store: String,
        /// What was found, and what the operator can do.
        message: String,
    },
    /// This build has no etcd client (built without the `etcd` feature).
    #[error(
        "etcd store {store}: this clusterqos was built without etcd support; rebuild it \
         with `--features etcd` (needs protoc, Debian protobuf-compiler)"
    )]
    NoEtcd {
        /// The endpoints and key prefix.
        store: String,
    },
    /// This replica lost its leadership while opening the store for its term.
    #[error("etcd store {store}: {message}")]
    Fenced {
        /// The endpoints and key prefix.
        store: String,
        /// What happened.
        message: String,
    },
}

/// Run after the commit holding a job is durable.
pub type Completion = Box<dyn FnOnce() + Send>;

/// One decision's writes and what to do once they are durable.
pub struct Job {
    /// Inserts and deletes, in order.
    pub ops: Vec<DbOp>,
    /// Pushes IDT updates and acknowledges the request.
    pub done: Completion,
}

/// What the store holds, read back when a master starts or a replica is elected.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Restored {
    /// Every flow, in grant order.
    pub rows: Vec<FlowRow>,
    /// The agent instance that held each node (by name).
    pub holders: Vec<(String, u64)>,
    /// Every job reservation.
    pub jobs: Vec<JobRecord>,
}

/// The writer of one master (one leadership term, for etcd).
pub trait Store: Send + std::marker::Sync {
    /// Queues `job`. Its completion runs after its writes are durable, after the
    /// completions of every job queued before it. If they cannot be made durable the
    /// completion is dropped unrun (the SQLite backend stops the process instead: its
    /// books would be ahead of its disk).
    fn submit(&self, job: Job);
}

/// A store identity written as 32 hex digits, as bytes.
pub(crate) fn parse_db_id(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 {
        return None;
    }
    u128::from_str_radix(text, 16).ok().map(u128::to_be_bytes)
}

/// A store identity as 32 hex digits.
#[cfg(feature = "etcd")]
pub(crate) fn hex_id(id: [u8; 16]) -> String {
    format!("{:032x}", u128::from_be_bytes(id))
}
