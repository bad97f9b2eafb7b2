//! The replicated backend of the master's store: the books in etcd v3,
//! shared by every manager replica; one of them, elected through etcd
//! (`manager::ha`), writes.
//!
//! A leader opens the store for its term with [`EtcdStore::open_term`]: it reads
//! every key back at one revision and checks it (as the SQLite backend checks its
//! file: a checksum per value, the count and digest of the flows against the meta
//! key, the identity and last transaction against the witness file), then *claims*
//! the store with a first transaction that writes its term into the meta key. Every
//! later commit ([`writer`]) is one etcd transaction that goes through only if
//!
//! 1. the leader's election key still exists with the revision it was created at —
//!    once the leader's lease ran out or it resigned, the key is gone, and so is
//!    every commit it still sends (fencing: a deposed leader, paused, partitioned or
//!    slow, can never commit, whatever its clocks say); and
//! 2. the meta key still holds exactly what the previous commit wrote — the commits
//!    form one chain, so pipelined transactions apply in order or not at all, and a
//!    commit sent twice (a retry after a lost reply) applies once.
//!
//! A grant is acknowledged only after its transaction committed, that is, after a
//! quorum of etcd members has it.

mod codec;
pub mod compact;
mod endpoints;
mod gather;
mod groups;
mod writer;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetOptions, Identity, TlsOptions, Txn,
    TxnOp, TxnOpResponse,
};
use tokio::sync::mpsc;

use super::api::{Restored, StoreError};
use super::check::Account;
use super::witness::{self, Found};
pub use codec::{topology_fingerprint, Fence};
use codec::{Keys, Meta};
pub use writer::EtcdWriter;

/// Keys read per range request when a store is loaded.
const PAGE: i64 = 2048;

pub use super::etcd_config::{EtcdAuth, EtcdConfig, EtcdTls};

/// A connection to the store.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    /// How `client` was made (the writer's own connection to the Raft leader too).
    opts: ConnectOptions,
    keys: Keys,
    config: Arc<EtcdConfig>,
    /// Probes of the members, keeping dead ones out of the client's list; they stop
    /// with the last clone.
    _watch: Arc<endpoints::Watch>,
}

/// What a load found.
struct Loaded {
    restored: Restored,
    /// The meta key's value and fields; `None` for a store never written.
    meta: Option<(Vec<u8>, Meta)>,
    /// The flows by group: each flow key's id and the flows it holds.
    groups: Vec<(i64, Vec<crate::manager::state::FlowRow>)>,
}

impl EtcdStore {
    /// Connects (lazily: members are dialled when first used; with authentication the
    /// first token is fetched now).
    pub async fn connect(config: &EtcdConfig) -> Result<EtcdStore, StoreError> {
        let store = config.name();
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            // etcd closes connections that ping more often than every 5 s
            // (--grpc-keepalive-min-time): a broken link is found within 15 s.
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            .with_keep_alive_while_idle(true)
            // A member cut off from the others refuses requests instead of holding
            // them (and a campaign) until it rejoins.
            .with_require_leader(true);
        if let Some(a) = &config.auth {
            opts = opts.with_user(a.user.clone(), a.password.clone());
        }
        if let Some(t) = &config.tls {
            let read = |p: &PathBuf| {
                std::fs::read(p).map_err(|source| StoreError::Io {
                    path: p.display().to_string(),
                    source,
                })
            };
            let mut tls = TlsOptions::new();
            if let Some(ca) = &t.ca {
                tls = tls.ca_certificate(Certificate::from_pem(read(ca)?));
            }
            if let Some((cert, key)) = &t.identity {
                tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
            }
            opts = opts.with_tls(tls);
        }
        let client = Client::connect(&config.endpoints, Some(opts.clone()))
            .await
            .map_err(|source| StoreError::Etcd { store, source })?;
        let watch = endpoints::watch(&client, &config.endpoints, &opts, config.tls.is_some());
        Ok(EtcdStore {
            client,
            opts,
            keys: Keys::new(&config.prefix),
            config: Arc::new(config.clone()),
            _watch: Arc::new(watch),
        })
    }

    /// The client (the election shares its connections).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The election's name.
    pub fn election(&self) -> String {
        self.keys.election()
    }

    /// The configuration.
    pub fn config(&self) -> &EtcdConfig {
        &self.config
    }

    fn etcd(&self) -> impl Fn(etcd_client::Error) -> StoreError + '_ {
        move |source| StoreError::Etcd {
            store: self.config.name(),
            source,
        }
    }

    fn damaged(&self, message: String) -> StoreError {
        StoreError::EtcdDamaged {
            store: self.config.name(),
            message,
        }
    }

    /// Every key of `prefix` at `revision`, in key order.
    async fn range(
        &self,
        prefix: &str,
        revision: i64,
    ) -> Result<Vec<etcd_client::KeyValue>, StoreError> {
        let mut kv = self.client.kv_client();
        let end = codec::range_end(prefix);
        let mut from = prefix.as_bytes().to_vec();
        let mut out = Vec::new();
        loop {
            let opts = GetOptions::new()
                .with_range(end.clone())
                .with_revision(revision)
                .with_limit(PAGE);
            let mut r = kv
                .get(from.clone(), Some(opts))
                .await
                .map_err(self.etcd())?;
            let more = r.more();
            let kvs = r.take_kvs();
            if let Some(last) = kvs.last() {
                from = last.key().to_vec();
                from.push(0);
            }
            let n = kvs.len();
            out.extend(kvs);
            if !more || n == 0 {
                return Ok(out);
            }
        }
    }

    /// Reads every key of the store at one revision and checks it.
    async fn load(&self) -> Result<Loaded, StoreError> {
        let mut kv = self.client.kv_client();
        let mut r = kv.get(self.keys.meta(), None).await.map_err(self.etcd())?;
        let revision = r.header().map_or(0, |h| h.revision());
        let meta = r
            .take_kvs()
            .into_iter()
            .next()
            .map(|kv| kv.value().to_vec());
        let flows = self.range(&self.keys.flows(), revision).await?;
        let agents = self.range(&self.keys.agents(), revision).await?;
        let jobs = self.range(&self.keys.jobs(), revision).await?;
        let mut restored = Restored::default();
        let (mut rows, mut digest) = (0u64, 0u64);
        let mut seen = std::collections::HashSet::new();
        let mut groups = Vec::with_capacity(flows.len());
        for kv in &flows {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let id = self
                .keys
                .flow_id(kv.key())
                .ok_or_else(|| self.damaged(format!("key {key:?} is not a flow key")))?;
            let group = codec::decode_flows(kv.value())
                .map_err(|m| self.damaged(format!("flow {key}: {m}: the value is damaged")))?;
            if group.is_empty() {
                return Err(self.damaged(format!(
                    "flow {key} holds no flow: it was changed outside the manager; restore the \
                     store from a snapshot"
                )));
            }
            let mut held = Vec::with_capacity(group.len());
            for (row, ok) in group {
                // A group's key names its first grant: every flow in it is that one or
                // a later one, and each flow is in one group.
                if !ok || row.id < id || !seen.insert(row.id) {
                    return Err(self.damaged(format!(
                        "flow {key} fails its checksum (it now reads: flow {} id {} named {:?}, {:?}, \
                         owner uid {} pid {}): it was changed outside the manager; restore the store \
                         from a snapshot",
                        row.spec, row.id, row.name, row.class, row.owner.uid, row.owner.pid
                    )));
                }
                rows += 1;
                digest = digest.wrapping_add(super::schema::id_digest(row.id));
                restored.rows.push(row.clone());
                held.push(row);
            }
            groups.push((id, held));
        }
        restored.rows.sort_by_key(|r| r.id);
        for kv in &agents {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let node = key[self.keys.agents().len()..].to_string();
            let instance = codec::decode_holder(&node, kv.value()).ok_or_else(|| {
                self.damaged(format!(
                    "the agent key of node {node:?} fails its checksum: it was changed outside the manager"
                ))
            })?;
            restored.holders.push((node, instance));
        }
        for kv in &jobs {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let id = key[self.keys.jobs().len()..].to_string();
            let job = codec::decode_job(&id, kv.value()).ok_or_else(|| {
                self.damaged(format!(
                    "the key of job {id:?} fails its checksum: it was changed outside the manager"
                ))
            })?;
            restored.jobs.push(job);
        }
        let meta = match meta {
            None if restored.rows.is_empty() && restored.holders.is_empty() => None,
            None => {
                return Err(self.damaged(format!(
                    "holds {} flow keys but no meta key {}: keys were deleted outside the manager; \
                     restore the store from a snapshot",
                    restored.rows.len(),
                    self.keys.meta()
                )))
            }
            Some(bytes) => {
                let m = codec::decode_meta(&bytes).map_err(|e| {
                    self.damaged(format!(
                        "the meta key {} {e}: it was changed outside the manager",
                        self.keys.meta()
                    ))
                })?;
                if (m.rows, m.digest) != (rows, digest) {
                    return Err(self.damaged(format!(
                        "holds {rows} flows where transaction {} left {} (or other flows): keys were \
                         deleted or added outside the manager; restore the store from a snapshot",
                        m.seq, m.rows
                    )));
                }
                Some((bytes, m))
            }
        };
        Ok(Loaded {
            restored,
            meta,
            groups,
        })
    }

    /// Checks what was loaded against this replica's witness file.
    fn compare_witness(&self, meta: Option<&Meta>, found: Found) -> Result<(), StoreError> {
        let Some(path) = &self.config.witness else {
            return Ok(());
        };
        let w = match found {
            Found::Absent => return Ok(()),
            Found::Unreadable => {
                return Err(self.damaged(format!(
                    "the witness {} is unreadable (both records fail their checksums); move it \
                     away to start anyway",
                    path.display()
                )))
            }
            Found::Record(w) => w,
        };
        let Some(m) = meta else {
            return Err(self.damaged(format!(
                "the store is empty, but the witness {} records store {} at transaction {} with {} \
                 flows: this is another etcd cluster or prefix, or the keys were deleted; restore \
                 the store, or move the witness away to start empty",
                path.display(),
                super::api::hex_id(w.db_id),
                w.seq,
                w.rows
            )));
        };
        if w.db_id != m.db_id {
            return Err(self.damaged(format!(
                "this is store {}, but the witness {} records store {}: another etcd cluster or \
                 prefix; point --store at the right one, or move the witness away to accept this one",
                super::api::hex_id(m.db_id),
                path.display(),
                super::api::hex_id(w.db_id)
            )));
        }
        if w.seq > m.seq {
            return Err(self.damaged(format!(
                "the store ends at transaction {} ({} flows), but transaction {} ({} flows) was \
                 committed and acknowledged: {} transactions are missing (etcd restored from an \
                 older snapshot?); restore the store, or move {} away to accept the loss",
                m.seq,
                m.rows,
                w.seq,
                w.rows,
                w.seq - m.seq,
                path.display()
            )));
        }
        Ok(())
    }

    /// Opens the store for the leadership term `fence`: loads and checks every key,
    /// then claims the store with a transaction writing the term (and `topology`'s
    /// fingerprint) into the meta key. Returns the term's writer, what the store
    /// holds, and the stored topology fingerprint of the previous leader if it
    /// differs. The writer says on `lost` why it stopped, if it stops by itself
    /// (fenced, or etcd unreachable for `patience`).
    pub async fn open_term(
        &self,
        fence: &Fence,
        topology: &str,
        patience: Duration,
        lost: mpsc::UnboundedSender<String>,
    ) -> Result<(EtcdWriter, Restored, Option<String>), StoreError> {
        let wfound = match &self.config.witness {
            Some(p) => witness::read(p).map_err(|source| StoreError::Io {
                path: p.display().to_string(),
                source,
            })?,
            None => Found::Absent,
        };
        for _attempt in 0..3 {
            let loaded = self.load().await?;
            self.compare_witness(loaded.meta.as_ref().map(|(_, m)| m), wfound)?;
            let (meta_cmp, next, other_topology) = match &loaded.meta {
                None => (
                    Compare::create_revision(self.keys.meta(), CompareOp::Equal, 0),
                    Meta {
                        db_id: rand::random::<u128>().to_be_bytes(),
                        seq: 1,
                        rows: 0,
                        digest: 0,
                        term: fence.rev,
                        topology: topology.to_string(),
                    },
                    None,
                ),
                Some((bytes, m)) => (
                    Compare::value(self.keys.meta(), CompareOp::Equal, bytes.clone()),
                    Meta {
                        seq: m.seq + 1,
                        term: fence.rev,
                        topology: topology.to_string(),
                        ..m.clone()
                    },
                    (m.topology != topology).then(|| m.topology.clone()),
                ),
            };
            let next_bytes = codec::encode_meta(&next);
            let txn = Txn::new()
                .when([
                    Compare::create_revision(fence.key.clone(), CompareOp::Equal, fence.rev),
                    meta_cmp,
                ])
                .and_then([TxnOp::put(self.keys.meta(), next_bytes.clone(), None)])
                .or_else([TxnOp::get(fence.key.clone(), None)]);
            let r = self
                .client
                .kv_client()
                .txn(txn)
                .await
                .map_err(self.etcd())?;
            if !r.succeeded() {
                let held = r.op_responses().into_iter().any(|op| match op {
                    TxnOpResponse::Get(g) => g
                        .kvs()
                        .first()
                        .is_some_and(|kv| kv.create_revision() == fence.rev),
                    _ => false,
                });
                if !held {
                    return Err(StoreError::Fenced {
                        store: self.config.name(),
                        message: "leadership lost before the store was claimed".into(),
                    });
                }
                // The meta key moved between the load and the claim: load again.
                continue;
            }
            let account = Account {
                db_id: next.db_id,
                seq: next.seq,
                rows: next.rows,
                digest: next.digest,
            };
            let witness = match &self.config.witness {
                Some(p) => Some(witness::Witness::open(p, account.record(), wfound).map_err(
                    |source| StoreError::Io {
                        path: p.display().to_string(),
                        source,
                    },
                )?),
                None => None,
            };
            let pinned = if self.config.commit_via_leader {
                endpoints::raft_leader(&self.config.endpoints, &self.opts).await
            } else {
                None
            };
            let writer = writer::spawn(writer::Setup {
                client: self.client.clone(),
                pinned,
                keys: self.keys.clone(),
                fence: fence.clone(),
                meta: next,
                meta_bytes: next_bytes,
                groups: groups::Groups::new(
                    loaded.groups,
                    self.config.flow_keys == super::etcd_config::FlowKeys::PerFlow,
                ),
                witness,
                max_ops: self.config.max_txn_ops.max(2),
                pipeline: self.config.pipeline.max(1),
                gather: self.config.gather,
                patience,
                lost,
                store: self.config.name(),
            });
            return Ok((writer, loaded.restored, other_topology));
        }
        Err(StoreError::Fenced {
            store: self.config.name(),
            message: "the meta key kept changing while this replica claimed the store: \
                      another writer is active under this prefix"
                .into(),
        })
    }

    /// Reads the store (tests and tools): every flow and holder, checked.
    pub async fn read(&self) -> Result<Restored, StoreError> {
        Ok(self.load().await?.restored)
    }
}

#[cfg(test)]
mod tests;
