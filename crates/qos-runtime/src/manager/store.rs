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

pub(crate) mod api;
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

pub use api::{Completion, Job, Restored, Store, StoreError};
pub use sqlite::{SqliteStore, Sync};

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
