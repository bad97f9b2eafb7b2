//! Starting the master from its command-line options (`clusterqos manager`; thesis
//! §3.3, §4.3): the topology file loaded, the options checked (every error names its
//! flag), turned into the master's [`Config`] — store (SQLite, or etcd with TLS,
//! authentication and witness; issue 18), lease, election, TLS, connection limits —
//! and the master served until it is stopped.

use std::path::PathBuf;
use std::sync::Arc;

use qos_core::besteffort::Policy;
use qos_core::units::{Duration, UnitError};

use super::serve::ConnLimits;
use super::store::etcd_config::{EtcdAuth, EtcdConfig, EtcdTls};
use super::store::{Location, Sync};
use super::{Config, ManagerError, StoreConfig};
use crate::auth::{Secret, SecretError};
use crate::tls::TlsError;

/// Everything a master is started with.
#[derive(Debug, Clone)]
pub struct Options {
    /// The cluster's topology file (TOML, docs/topology.md).
    pub topology: PathBuf,
    /// The SQLite database (when `store` is not given).
    pub db: PathBuf,
    /// Where the books are kept: `sqlite:PATH` or `etcd://HOST:PORT[,...][/PREFIX]`.
    pub store: Option<String>,
    /// etcd store: the URL agents reach this replica at.
    pub advertise: Option<String>,
    /// etcd store: how long a vanished leader keeps the election ("2s").
    pub election_ttl: String,
    /// etcd store: CA certificate of the members (makes the client use TLS).
    pub etcd_ca: Option<PathBuf>,
    /// etcd store: client certificate and key.
    pub etcd_identity: Option<(PathBuf, PathBuf)>,
    /// etcd store: user name and the file holding the password.
    pub etcd_auth: Option<(String, PathBuf)>,
    /// etcd store: the members' --max-txn-ops.
    pub etcd_max_txn_ops: usize,
    /// etcd store: transactions in flight at once.
    pub etcd_pipeline: usize,
    /// etcd store: while leading, compact etcd's history this often ("300s"; "0s"
    /// leaves compaction to etcd or to whoever else owns it).
    pub etcd_compact: String,
    /// etcd store: this replica's witness file.
    pub witness: Option<PathBuf>,
    /// Address to listen on.
    pub listen: String,
    /// File holding the agents' shared secret.
    pub secret: PathBuf,
    /// How best-effort flows share the surplus.
    pub policy: Policy,
    /// Silence after which a client's or an agent's flows are released ("10s").
    pub lease: String,
    /// Commit mode of the SQLite store.
    pub sync: Sync,
    /// Serve https:// with this certificate chain and key (PEM).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Mutual TLS: the CA agents' certificates must chain to.
    pub tls_client_ca: Option<PathBuf>,
    /// Start even if stored grants do not fit the topology, releasing them.
    pub drop_unfit_grants: bool,
    /// Most connections held at once (default: from the descriptor limit).
    pub max_connections: Option<usize>,
}

/// Why the master could not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// An option is wrong (the message names the flag).
    #[error("{0}")]
    Invalid(String),
    /// A file named by an option could not be read.
    #[error("{what}")]
    Read {
        /// The file, with its flag when it has one.
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A duration option could not be parsed.
    #[error("{flag} {text}")]
    Duration {
        flag: &'static str,
        text: String,
        #[source]
        source: UnitError,
    },
    /// The topology file is malformed (`file:line: message`).
    #[error(transparent)]
    Topology(#[from] qos_core::source::Located),
    /// The secret file.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The TLS files.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Stored grants do not fit the topology file `topology`.
    #[error("{topology}: {error}")]
    Unfit {
        topology: String,
        error: ManagerError,
    },
    /// The master failed.
    #[error(transparent)]
    Manager(ManagerError),
}

fn invalid<T>(message: impl Into<String>) -> Result<T, LaunchError> {
    Err(LaunchError::Invalid(message.into()))
}

/// A positive duration option.
fn positive(flag: &'static str, text: &str) -> Result<std::time::Duration, LaunchError> {
    let d: Duration = text.parse().map_err(|source| LaunchError::Duration {
        flag,
        text: text.to_string(),
        source,
    })?;
    if d.is_zero() {
        return invalid(format!("{flag} must be longer than zero"));
    }
    Ok(std::time::Duration::from_nanos(d.as_ns()))
}

impl Options {
    /// The store the options name.
    pub fn store(&self) -> Result<StoreConfig, LaunchError> {
        let location = match &self.store {
            Some(s) => s
                .parse::<Location>()
                .or_else(|e| invalid(format!("--store: {e}")))?,
            None => Location::Sqlite(self.db.clone()),
        };
        let etcd_only = [
            ("--advertise", self.advertise.is_some()),
            ("--etcd-ca", self.etcd_ca.is_some()),
            ("--etcd-cert", self.etcd_identity.is_some()),
            ("--etcd-user", self.etcd_auth.is_some()),
            ("--witness", self.witness.is_some()),
        ];
        let (endpoints, prefix) = match location {
            Location::Sqlite(path) => {
                if let Some((flag, _)) = etcd_only.iter().find(|(_, set)| *set) {
                    return invalid(format!(
                        "{flag} applies to an etcd store (--store etcd://...) only"
                    ));
                }
                return Ok(StoreConfig::Sqlite {
                    path,
                    sync: self.sync,
                });
            }
            Location::Etcd { endpoints, prefix } => (endpoints, prefix),
        };
        if self.etcd_max_txn_ops < 2 || self.etcd_pipeline == 0 {
            return invalid("--etcd-max-txn-ops must be at least 2 and --etcd-pipeline at least 1");
        }
        let tls = (self.etcd_ca.is_some() || self.etcd_identity.is_some()).then(|| EtcdTls {
            ca: self.etcd_ca.clone(),
            identity: self.etcd_identity.clone(),
        });
        let auth = match &self.etcd_auth {
            Some((user, file)) => {
                let password =
                    std::fs::read_to_string(file).map_err(|source| LaunchError::Read {
                        what: format!("--etcd-password-file {}", file.display()),
                        source,
                    })?;
                Some(EtcdAuth {
                    user: user.clone(),
                    password: password.trim_end_matches(['\n', '\r']).to_string(),
                })
            }
            None => None,
        };
        let compact: Duration =
            self.etcd_compact
                .parse()
                .map_err(|source| LaunchError::Duration {
                    flag: "--etcd-compact",
                    text: self.etcd_compact.clone(),
                    source,
                })?;
        Ok(StoreConfig::Etcd(EtcdConfig {
            compact_every: (!compact.is_zero())
                .then(|| std::time::Duration::from_nanos(compact.as_ns())),
            tls,
            auth,
            max_txn_ops: self.etcd_max_txn_ops,
            pipeline: self.etcd_pipeline,
            witness: self.witness.clone(),
            ..EtcdConfig::new(endpoints, &prefix)
        }))
    }

    /// The master's configuration: reads the topology, the secret and the TLS files.
    pub fn config(&self) -> Result<Config, LaunchError> {
        let name = self.topology.display().to_string();
        let text = std::fs::read_to_string(&self.topology).map_err(|source| LaunchError::Read {
            what: name.clone(),
            source,
        })?;
        let topology = qos_core::topology::file::load(&name, &text)?;
        let secret = Secret::load(&self.secret)?;
        let lease = positive("--lease", &self.lease)?;
        let store = self.store()?;
        let election_ttl = positive("--election-ttl", &self.election_ttl)?;
        if let Some(a) = &self.advertise {
            if !(a.starts_with("http://") || a.starts_with("https://")) || a.contains(',') {
                return invalid(format!(
                    "--advertise {a}: expected one http://HOST:PORT or https://HOST:PORT"
                ));
            }
        }
        let tls = match &self.tls {
            Some((cert, key)) => Some(crate::tls::server_config(
                cert,
                key,
                self.tls_client_ca.as_deref(),
            )?),
            None => None,
        };
        let mut conns = ConnLimits::default();
        if let Some(max) = self.max_connections {
            if max < 16 {
                return invalid("--max-connections must be at least 16");
            }
            conns = ConnLimits {
                max_connections: max,
                max_unauthenticated: (max / 4).clamp(4, 1024),
                ..conns
            };
        }
        Ok(Config {
            policy: self.policy,
            lease,
            store,
            advertise: self.advertise.clone(),
            election_ttl,
            tls,
            drop_unfit: self.drop_unfit_grants,
            conns,
            ..Config::new(Arc::new(topology), self.db.clone(), secret)
        })
    }
}

/// Starts the master the options describe and serves until it is stopped.
pub fn run(o: &Options) -> Result<(), LaunchError> {
    let config = o.config()?;
    crate::logging::init();
    super::run_blocking(config, &o.listen).map_err(|e| match e {
        // Name the topology the grants do not fit.
        e @ ManagerError::Unfit { .. } => LaunchError::Unfit {
            topology: o.topology.display().to_string(),
            error: e,
        },
        e => LaunchError::Manager(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &std::path::Path) -> Options {
        let topology = dir.join("topology.toml");
        std::fs::write(
            &topology,
            "[defaults]\nt = \"48us\"\nbmax = \"81.8MB/s\"\nlink = \"160MB/s\"\n\n[build]\nshape = \"crossbar\"\nhosts = 2\n",
        )
        .unwrap();
        let secret = dir.join("secret");
        std::fs::write(&secret, "abcdefghijklmnopqrstuvwxyz\n").unwrap();
        Options {
            topology,
            db: dir.join("m.db"),
            store: None,
            advertise: None,
            election_ttl: "2s".into(),
            etcd_ca: None,
            etcd_identity: None,
            etcd_auth: None,
            etcd_max_txn_ops: 128,
            etcd_pipeline: 1,
            etcd_compact: "300s".into(),
            witness: None,
            listen: "127.0.0.1:0".into(),
            secret,
            policy: Policy::Thesis,
            lease: "10s".into(),
            sync: Sync::Normal,
            tls: None,
            tls_client_ca: None,
            drop_unfit_grants: false,
            max_connections: None,
        }
    }

    #[test]
    fn a_good_configuration_carries_every_option() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.lease = "500ms".into();
        o.max_connections = Some(100);
        o.policy = Policy::MaxMin;
        let c = o.config().unwrap();
        assert_eq!(c.lease, std::time::Duration::from_millis(500));
        assert_eq!(c.election_ttl, std::time::Duration::from_secs(2));
        assert_eq!(
            (c.conns.max_connections, c.conns.max_unauthenticated),
            (100, 25)
        );
        assert_eq!(c.policy, Policy::MaxMin);
        assert!(matches!(
            c.store,
            StoreConfig::Sqlite {
                sync: Sync::Normal,
                ..
            }
        ));
    }

    #[test]
    fn bad_options_are_refused_naming_their_flag() {
        let dir = tempfile::tempdir().unwrap();
        type Spoil = fn(&mut Options);
        let cases: [(Spoil, &str); 8] = [
            (
                |o| o.lease = "0s".into(),
                "--lease must be longer than zero",
            ),
            (|o| o.lease = "soon".into(), "--lease soon"),
            (
                |o| o.election_ttl = "0ms".into(),
                "--election-ttl must be longer than zero",
            ),
            (
                |o| o.witness = Some("w".into()),
                "--witness applies to an etcd store",
            ),
            (|o| o.store = Some("ftp://x".into()), "--store: "),
            (
                |o| o.advertise = Some("x:1".into()),
                "--advertise applies to an etcd store",
            ),
            (
                |o| o.max_connections = Some(8),
                "--max-connections must be at least 16",
            ),
            (
                |o| o.topology = "/nonexistent.toml".into(),
                "/nonexistent.toml",
            ),
        ];
        for (spoil, expected) in cases {
            let mut o = opts(dir.path());
            spoil(&mut o);
            let e = o.config().map(|_| ()).unwrap_err().to_string();
            assert!(e.starts_with(expected), "{expected:?}: {e}");
        }
    }

    #[test]
    fn etcd_stores_take_their_tls_auth_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.store = Some("etcd://127.0.0.1:2379/cq/".into());
        o.etcd_max_txn_ops = 1;
        let e = o.store().unwrap_err().to_string();
        assert!(
            e.starts_with("--etcd-max-txn-ops must be at least 2"),
            "{e}"
        );
        o.etcd_max_txn_ops = 64;
        o.etcd_auth = Some(("root".into(), dir.path().join("missing")));
        let e = o.store().unwrap_err().to_string();
        assert!(e.starts_with("--etcd-password-file "), "{e}");
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret\r\n").unwrap();
        o.etcd_auth = Some(("root".into(), pw));
        o.etcd_ca = Some("ca.pem".into());
        let StoreConfig::Etcd(c) = o.store().unwrap() else {
            panic!("an etcd store")
        };
        assert_eq!(c.max_txn_ops, 64);
        assert_eq!(c.auth.unwrap().password, "s3cret");
        assert_eq!(c.tls.unwrap().ca, Some(PathBuf::from("ca.pem")));
        o.advertise = Some("http://a:1,http://b:1".into());
        let e = o.config().map(|_| ()).unwrap_err().to_string();
        assert!(
            e.starts_with("--advertise http://a:1,http://b:1: expected one"),
            "{e}"
        );
    }
}
