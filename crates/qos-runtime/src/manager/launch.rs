//! Starting the master from its command-line options (`clusterqos manager`; thesis
//! §3.3, §4.3): the topology file loaded, the options checked (every error names its
//! flag), turned into the master's [`Config`] — store (SQLite, or etcd with TLS,
//! authentication and witness), lease, election, TLS, connection limits —
//! and the master served until it is stopped.

use std::path::PathBuf;
use std::sync::Arc;

use qos_core::besteffort::Policy;
use qos_core::units::{Duration, UnitError};

use super::serve::ConnLimits;
use super::store::etcd_config::{CommitVia, EtcdAuth, EtcdConfig, EtcdTls, FlowKeys};
use super::store::{Location, Sync};
use super::{Config, ManagerError, StoreConfig};
use crate::auth::{Secret, SecretError};
use crate::tls::TlsError;

/// Everything a master is started with: `clusterqos manager`'s options, parsed by clap.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The cluster's topology (TOML, docs/topology.md): nodes with T and Bmax, switches, links.
    #[arg(long)]
    pub topology: PathBuf,
    /// The SQLite database holding granted flows (created if missing); the same as
    /// `--store sqlite:PATH`.
    #[arg(
        long,
        default_value = "clusterqos-manager.db",
        conflicts_with = "store"
    )]
    pub db: PathBuf,
    /// Where the books are kept: `sqlite:PATH` (one manager), or
    /// `etcd://HOST:PORT[,HOST:PORT...][/PREFIX]` (replicas sharing etcd elect one
    /// leader; docs/ha-manager.md). Default: sqlite:clusterqos-manager.db.
    #[arg(long)]
    pub store: Option<String>,
    /// etcd store: the URL agents reach this replica at, which followers name when they
    /// redirect (default: http(s)://the --listen address).
    #[arg(long)]
    pub advertise: Option<String>,
    /// etcd store: how long a leader that vanished without resigning keeps the
    /// election (etcd rounds it up to whole seconds and to its own minimum).
    #[arg(long, default_value = "2s")]
    pub election_ttl: String,
    /// etcd store: how often a follower connects to the leader's --advertise address;
    /// once the leader has answered, two refused connections in a row (its process
    /// died) make the follower revoke its election lease, so that the next replica
    /// takes over at once instead of a TTL later. 0s: never (the TTL alone).
    #[arg(long, default_value = "100ms")]
    pub leader_probe: String,
    /// etcd store: CA certificate (PEM) of the etcd members; makes the client use TLS.
    #[arg(long)]
    pub etcd_ca: Option<PathBuf>,
    /// etcd store: client certificate (PEM) when etcd asks for one.
    #[arg(long, requires = "etcd_key")]
    pub etcd_cert: Option<PathBuf>,
    /// etcd store: the private key (PEM) of --etcd-cert.
    #[arg(long, requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,
    /// etcd store: user name, when etcd has authentication on.
    #[arg(long, requires = "etcd_password_file")]
    pub etcd_user: Option<String>,
    /// etcd store: file holding the password of --etcd-user.
    #[arg(long, requires = "etcd_user")]
    pub etcd_password_file: Option<PathBuf>,
    /// etcd store: the members' --max-txn-ops (writes per transaction).
    #[arg(long, default_value_t = 128)]
    pub etcd_max_txn_ops: usize,
    /// etcd store: transactions in flight at once. 1 is group commit (decisions made
    /// while a transaction is in flight all go in the next); more pipelines them, but
    /// a transaction that reaches etcd before its predecessor is refused and sent
    /// again, which measured slower on one machine.
    #[arg(long, default_value_t = 1)]
    pub etcd_pipeline: usize,
    /// etcd store: while fewer decisions wait than its last commit suggests, a free
    /// writer holds them back as long as more keep coming: it sends once none has come
    /// for this long, and at the latest four times this long after the first ("0s":
    /// never hold). Fewer, larger transactions under concurrent load; a lone client
    /// never waits.
    #[arg(long, default_value = "500us")]
    pub etcd_gather: String,
    /// etcd store: where the writer sends its commits: `leader` (etcd's Raft leader,
    /// on a connection of its own, found when a term begins; every member after its
    /// first failure) or `any` (balanced over every member: a follower forwards to the
    /// leader, a hop more per commit).
    #[arg(long, value_enum, default_value_t = CommitVia::Leader)]
    pub etcd_commit_via: CommitVia,
    /// etcd store: how granted flows lie in etcd's keys: `per-flow` (one key per
    /// flow: a grant is a put, a release a delete) or `grouped` (one key per
    /// transaction, at most 16 flows, holding the flows it granted that are not
    /// released yet: one put for a commit's grants, but a release rewrites its key;
    /// measured: less etcd CPU per grant, more per release). A store written either
    /// way opens either way.
    #[arg(long, value_enum, default_value_t = FlowKeys::PerFlow)]
    pub etcd_flow_keys: FlowKeys,
    /// etcd store: while leading, compact etcd's history this often (up to the revision
    /// seen one period before); "0s" leaves compaction to etcd
    /// (--auto-compaction-retention) or to whoever else owns it.
    #[arg(long, default_value = "300s")]
    pub etcd_compact: String,
    /// etcd store: this replica's witness file, recording the last transaction it
    /// committed; a store found behind it (etcd restored from an older snapshot) or
    /// another store is refused.
    #[arg(long)]
    pub witness: Option<PathBuf>,
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub listen: String,
    /// File holding the agents' shared secret (at least 16 printable characters).
    #[arg(long)]
    pub secret: PathBuf,
    /// How best-effort flows share the surplus: the thesis rule or weighted max-min.
    #[arg(long, value_enum, default_value = "thesis")]
    pub policy: Policy,
    /// Silence after which a client's or an agent's flows are released ("10s", "500ms").
    #[arg(long, default_value = "10s")]
    pub lease: String,
    /// Commit mode: `full` flushes every group commit to the device (survives power
    /// loss); `normal` writes it to the OS without fsync (survives a crash of the
    /// manager, not of the machine).
    #[arg(long, value_enum, default_value = "full")]
    pub sync: Sync,
    /// Serve https:// with this certificate chain (PEM); agents then need --tls-ca.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: agents must present a certificate issued by this CA (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Start even if granted flows in the database do not fit the topology, releasing
    /// them (each is logged). Without it such a start is refused, naming them.
    #[arg(long)]
    pub drop_unfit_grants: bool,
    /// Most connections held at once (default: from the descriptor limit, which is
    /// raised to its hard limit); beyond it new connections are answered 503.
    #[arg(long)]
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
            ("--etcd-cert", self.etcd_cert.is_some()),
            ("--etcd-user", self.etcd_user.is_some()),
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
        let identity = self.etcd_cert.clone().zip(self.etcd_key.clone());
        let tls = (self.etcd_ca.is_some() || identity.is_some()).then(|| EtcdTls {
            ca: self.etcd_ca.clone(),
            identity,
        });
        let auth = match self
            .etcd_user
            .as_ref()
            .zip(self.etcd_password_file.as_ref())
        {
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
        let gather: Duration =
            self.etcd_gather
                .parse()
                .map_err(|source| LaunchError::Duration {
                    flag: "--etcd-gather",
                    text: self.etcd_gather.clone(),
                    source,
                })?;
        Ok(StoreConfig::Etcd(EtcdConfig {
            gather: std::time::Duration::from_nanos(gather.as_ns()),
            compact_every: (!compact.is_zero())
                .then(|| std::time::Duration::from_nanos(compact.as_ns())),
            tls,
            auth,
            max_txn_ops: self.etcd_max_txn_ops,
            pipeline: self.etcd_pipeline,
            commit_via_leader: self.etcd_commit_via == CommitVia::Leader,
            flow_keys: self.etcd_flow_keys,
            witness: self.witness.clone(),
            ..EtcdConfig::new(endpoints, &prefix)
        }))
    }

    /// The master's configuration: reads the topology, the secret and the TLS files.
    pub fn config(&self) -> Result<Config, LaunchError> {
        let name = self.topology.display().to_string();
        let bytes = std::fs::read(&self.topology).map_err(|source| LaunchError::Read {
            what: name.clone(),
            source,
        })?;
        let text = qos_core::source::decode_text(&name, bytes)?;
        let topology = qos_core::topology::file::load(&name, &text)?;
        let secret = Secret::load(&self.secret)?;
        let lease = positive("--lease", &self.lease)?;
        let store = self.store()?;
        let election_ttl = positive("--election-ttl", &self.election_ttl)?;
        let leader_probe = match self.leader_probe.trim() {
            "0" | "0s" | "0ms" => None,
            text => Some(positive("--leader-probe", text)?),
        };
        if let Some(a) = &self.advertise {
            if !(a.starts_with("http://") || a.starts_with("https://")) || a.contains(',') {
                return invalid(format!(
                    "--advertise {a}: expected one http://HOST:PORT or https://HOST:PORT"
                ));
            }
        }
        let tls = match self.tls_cert.as_ref().zip(self.tls_key.as_ref()) {
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
            leader_probe,
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
            leader_probe: "100ms".into(),
            etcd_ca: None,
            etcd_cert: None,
            etcd_key: None,
            etcd_user: None,
            etcd_password_file: None,
            etcd_max_txn_ops: 128,
            etcd_pipeline: 1,
            etcd_gather: "500us".into(),
            etcd_commit_via: CommitVia::Leader,
            etcd_flow_keys: FlowKeys::PerFlow,
            etcd_compact: "300s".into(),
            witness: None,
            listen: "127.0.0.1:0".into(),
            secret,
            policy: Policy::Thesis,
            lease: "10s".into(),
            sync: Sync::Normal,
            tls_cert: None,
            tls_key: None,
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
        o.etcd_user = Some("root".into());
        o.etcd_password_file = Some(dir.path().join("missing"));
        let e = o.store().unwrap_err().to_string();
        assert!(e.starts_with("--etcd-password-file "), "{e}");
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret\r\n").unwrap();
        o.etcd_password_file = Some(pw);
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
