//! Durable state of the master (one store interface, two backends): the
//! granted flows, their owners, the agent instance holding each node and the store's
//! identity, behind one small interface, [`Store`].
//!
//! A leader queues each decision's writes as a [`Job`], in the order it took the
//! decisions, with the books locked; the backend groups the jobs waiting into one
//! commit (group commit) and runs each job's completion — which pushes the IDT updates
//! and acknowledges the request — only once that commit is durable, in submission
//! order. A job whose writes cannot commit never has its completion run: its request
//! is never acknowledged.
//!
//! - [`sqlite`]: an embedded database beside one master (the default; no server).
//! - [`etcd`]: etcd v3, shared by several master replicas of which one leads; every
//!   commit is a transaction fenced by the leader's election key, so a deposed leader
//!   can never commit (`docs/ha-manager.md`).
//!
//! On opening, both read every row back and check it: a checksum
//! per row, the count and digest of the rows against what the last commit recorded,
//! and the store's identity and last transaction against the [`witness`] file.

mod check;
#[cfg(test)]
mod contract;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod etcd_config;
mod schema;
pub mod sqlite;
mod witness;

use std::path::PathBuf;

use super::state::{DbOp, FlowRow};
pub use sqlite::{SqliteStore, Sync};

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
}

/// The writer of one master (one leadership term, for etcd).
pub trait Store: Send + std::marker::Sync {
    /// Queues `job`. Its completion runs after its writes are durable, after the
    /// completions of every job queued before it. If they cannot be made durable the
    /// completion is dropped unrun (the SQLite backend stops the process instead: its
    /// books would be ahead of its disk).
    fn submit(&self, job: Job);
}

/// Where the books are kept: `sqlite:PATH` or `etcd://HOST:PORT[,HOST:PORT...][/PREFIX]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite database file.
    Sqlite(PathBuf),
    /// etcd endpoints (`host:port`) and the key prefix (ends with `/`).
    Etcd {
        /// `host:port` of each member to try.
        endpoints: Vec<String>,
        /// Every key of the manager starts with it.
        prefix: String,
    },
}

impl std::str::FromStr for Location {
    type Err = String;

    fn from_str(text: &str) -> Result<Location, String> {
        if let Some(path) = text.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err(
                    "sqlite: needs a file path (sqlite:/var/lib/clusterqos/manager.db)".into(),
                );
            }
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        let Some(rest) = text.strip_prefix("etcd://") else {
            return Err(format!(
                "store `{text}`: expected sqlite:PATH or etcd://HOST:PORT[,HOST:PORT...][/PREFIX]"
            ));
        };
        let (hosts, prefix) = match rest.split_once('/') {
            Some((h, p)) => (h, p),
            None => (rest, "clusterqos"),
        };
        let prefix = prefix.trim_matches('/');
        if prefix.is_empty() || prefix.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(format!(
                "store `{text}`: the key prefix must be non-empty, without spaces or control characters"
            ));
        }
        let mut endpoints = Vec::new();
        for h in hosts.split(',') {
            let ok = h
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !ok {
                return Err(format!(
                    "store `{text}`: endpoint `{h}` is not HOST:PORT (etcd's client port, usually 2379)"
                ));
            }
            endpoints.push(h.to_string());
        }
        Ok(Location::Etcd {
            endpoints,
            prefix: format!("/{prefix}/"),
        })
    }
}

/// A store identity written as 32 hex digits, as bytes.
fn parse_db_id(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 {
        return None;
    }
    u128::from_str_radix(text, 16).ok().map(u128::to_be_bytes)
}

/// A store identity as 32 hex digits.
#[cfg(feature = "etcd")]
fn hex_id(id: [u8; 16]) -> String {
    format!("{:032x}", u128::from_be_bytes(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(
            "sqlite:/tmp/m.db".parse::<Location>().unwrap(),
            Location::Sqlite("/tmp/m.db".into())
        );
        assert_eq!(
            "etcd://127.0.0.1:2379,10.0.0.2:2379"
                .parse::<Location>()
                .unwrap(),
            Location::Etcd {
                endpoints: vec!["127.0.0.1:2379".into(), "10.0.0.2:2379".into()],
                prefix: "/clusterqos/".into()
            }
        );
        assert_eq!(
            "etcd://h:1/team-a/qos/".parse::<Location>().unwrap(),
            Location::Etcd {
                endpoints: vec!["h:1".into()],
                prefix: "/team-a/qos/".into()
            }
        );
        for bad in [
            "",
            "sqlite:",
            "etcd://",
            "etcd://h",
            "etcd://h:x",
            "etcd://h:1,/p",
            "mysql://h:1",
            "etcd://h:1/ /",
        ] {
            assert!(bad.parse::<Location>().is_err(), "{bad:?} parsed");
        }
    }
}
