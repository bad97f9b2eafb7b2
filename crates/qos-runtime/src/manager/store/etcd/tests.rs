//! Tests of the etcd backend against a real etcd (one member on loopback, started by
//! each test): the store contract, fencing, and the witness. They need the `etcd`
//! binary (Debian: etcd-server), so they are ignored unless asked for
//! (`cargo test -- --ignored etcd::`, which `scripts/test` runs when it can).

use std::time::Duration;

use etcd_client::GetOptions;
use tokio::sync::mpsc;

use super::super::api::{Restored, Store};
use super::super::contract::{self as c, write, Harness};
use super::super::etcd_config::FlowKeys;
use super::{EtcdConfig, EtcdStore, Fence};
use crate::etcd_local::LocalEtcd;
use crate::manager::state::DbOp;

struct Etcd {
    dir: tempfile::TempDir,
    _cluster: LocalEtcd,
    rt: tokio::runtime::Runtime,
    config: EtcdConfig,
    store: EtcdStore,
    lease: Option<i64>,
    lost: Vec<mpsc::UnboundedReceiver<String>>,
}

impl Etcd {
    fn new() -> Etcd {
        Etcd::with_members(1)
    }

    /// The index of the member that leads etcd's Raft.
    fn raft_leader(&self) -> Option<usize> {
        self.rt.block_on(async {
            for (i, ep) in self._cluster.endpoints().iter().enumerate() {
                let Ok(c) = etcd_client::Client::connect([ep], None).await else {
                    continue;
                };
                let Ok(s) = c.maintenance_client().status().await else {
                    continue;
                };
                if s.header().is_some_and(|h| h.member_id() == s.leader()) {
                    return Some(i);
                }
            }
            None
        })
    }

    fn with_members(members: usize) -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let cluster = LocalEtcd::start(&dir.path().join("etcd"), members).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // Small transactions, several in flight: the contract holds through the
        // pipeline's reordering and resending too, not only with the default
        // one-at-a-time group commit.
        let config = EtcdConfig {
            witness: Some(dir.path().join("replica.witness")),
            max_txn_ops: 8,
            pipeline: 4,
            ..EtcdConfig::new(cluster.endpoints(), "/contract/")
        };
        let store = rt.block_on(EtcdStore::connect(&config)).unwrap();
        Etcd {
            dir,
            _cluster: cluster,
            rt,
            config,
            store,
            lease: None,
            lost: Vec::new(),
        }
    }

    /// Ends the previous term (revoking its lease) and wins a new election.
    fn elect(&mut self) -> Fence {
        let client = self.store.client();
        let old = self.lease.take();
        let (fence, id) = self.rt.block_on(async {
            let mut leases = client.lease_client();
            if let Some(id) = old {
                leases.revoke(id).await.unwrap();
            }
            let id = leases.grant(60, None).await.unwrap().id();
            let mut r = client
                .election_client()
                .campaign(self.store.election(), "test", id)
                .await
                .unwrap();
            let k = r.take_leader().unwrap();
            (
                Fence {
                    key: k.key().to_vec(),
                    rev: k.rev(),
                },
                id,
            )
        });
        self.lease = Some(id);
        fence
    }

    fn open_store(&mut self, store: EtcdStore) -> Result<(Box<dyn Store>, Restored), String> {
        let fence = self.elect();
        let (tx, rx) = mpsc::unbounded_channel();
        self.lost.push(rx);
        let _guard = self.rt.enter();
        self.rt
            .block_on(store.open_term(&fence, "topology", Duration::from_secs(5), tx))
            .map(|(w, r, _)| (Box::new(w) as Box<dyn Store>, r))
            .map_err(|e| e.to_string())
    }

    fn flow_key(&self, id: i64) -> String {
        super::codec::Keys::new(&self.config.prefix).flow(id)
    }
}

impl Harness for Etcd {
    fn open(&mut self) -> Result<(Box<dyn Store>, Restored), String> {
        self.open_store(self.store.clone())
    }

    fn tamper_flow(&mut self, id: i64) {
        let key = self.flow_key(id);
        let mut kv = self.store.client().kv_client();
        self.rt.block_on(async {
            let r = kv.get(key.clone(), None).await.unwrap();
            let v = String::from_utf8(r.kvs()[0].value().to_vec()).unwrap();
            let changed = v.replacen("\"bandwidth\":", "\"bandwidth\":9", 1);
            assert_ne!(v, changed);
            kv.put(key, changed, None).await.unwrap();
        });
    }

    fn delete_flow(&mut self, id: i64) {
        let key = self.flow_key(id);
        let mut kv = self.store.client().kv_client();
        self.rt.block_on(async {
            assert_eq!(kv.delete(key, None).await.unwrap().deleted(), 1);
        });
    }
}

mod contract {
    use super::*;

    #[test]
    #[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
    fn rows_and_holders_come_back_as_committed() {
        c::rows_and_holders_come_back_as_committed(&mut Etcd::new());
    }

    #[test]
    #[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
    fn completions_run_once_each_in_submission_order() {
        c::completions_run_once_each_in_submission_order(&mut Etcd::new());
    }

    #[test]
    #[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
    fn a_changed_value_is_refused() {
        c::a_changed_value_is_refused(&mut Etcd::new());
    }

    #[test]
    #[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
    fn a_flow_deleted_outside_is_refused() {
        c::a_flow_deleted_outside_is_refused(&mut Etcd::new());
    }
}

#[test]
#[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
fn a_transactions_grants_share_a_key_and_releases_rewrite_it_in_either_layout() {
    for flow_keys in [FlowKeys::Grouped, FlowKeys::PerFlow] {
        let mut e = Etcd::new();
        e.config.flow_keys = flow_keys;
        e.store = e.rt.block_on(EtcdStore::connect(&e.config)).unwrap();
        let (s, _) = e.open().unwrap();
        // Three grants in one transaction, then one of them and a later one released.
        write(&*s, (1..=3).map(|i| DbOp::Insert(c::row(i))).collect());
        write(&*s, vec![DbOp::Insert(c::row(4)), DbOp::Insert(c::row(5))]);
        write(&*s, vec![c::delete(2), c::delete(5)]);
        let client = e.store.client();
        let keys = e.rt.block_on(async {
            let r = client
                .kv_client()
                .get(
                    "/contract/flows/",
                    Some(GetOptions::new().with_prefix().with_keys_only()),
                )
                .await
                .unwrap();
            r.kvs().len()
        });
        let want = match flow_keys {
            FlowKeys::Grouped => 2,
            FlowKeys::PerFlow => 3,
        };
        assert_eq!(keys, want, "{flow_keys:?}");
        drop(s);
        // Reopened (in the other layout too): the flows granted and not released.
        e.config.flow_keys = match flow_keys {
            FlowKeys::Grouped => FlowKeys::PerFlow,
            FlowKeys::PerFlow => FlowKeys::Grouped,
        };
        e.store = e.rt.block_on(EtcdStore::connect(&e.config)).unwrap();
        let (s, r) = e.open().unwrap();
        assert_eq!(r.rows, [1, 3, 4].map(c::row).to_vec(), "{flow_keys:?}");
        write(&*s, vec![c::delete(3), DbOp::Insert(c::row(6))]);
        drop(s);
        let (_s, r) = e.open().unwrap();
        assert_eq!(r.rows, [1, 4, 6].map(c::row).to_vec(), "{flow_keys:?}");
    }
}

#[test]
#[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
fn a_deposed_leaders_commits_are_refused_and_never_acknowledged() {
    let mut e = Etcd::new();
    let (old, _) = e.open().unwrap();
    write(&*old, vec![DbOp::Insert(c::row(1))]);
    // The old leader's lease goes (it expired while the leader was paused, or another
    // replica revoked it): its election key is deleted with it.
    let lease = e.lease.unwrap();
    let client = e.store.client();
    e.rt.block_on(async { client.lease_client().revoke(lease).await.unwrap() });
    // Its next commit is refused by etcd: the completion never runs.
    let (tx, rx) = std::sync::mpsc::channel();
    old.submit(super::super::api::Job {
        ops: vec![DbOp::Insert(c::row(2))],
        done: Box::new(move || {
            let _ = tx.send(());
        }),
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(30)),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected),
        "a deposed leader's grant was acknowledged"
    );
    let why = e.rt.block_on(e.lost[0].recv()).unwrap();
    assert!(why.contains("deposed"), "{why}");
    // The refused transaction's decision counts among those dropped.
    assert!(why.ends_with("(1 decision never acknowledged)"), "{why}");
    // And so are all later ones, even once a new leader writes.
    e.lease = None;
    let (new, r) = e.open().unwrap();
    assert_eq!(r.rows, vec![c::row(1)]);
    write(&*new, vec![DbOp::Insert(c::row(3))]);
    let (tx, rx) = std::sync::mpsc::channel();
    old.submit(super::super::api::Job {
        ops: vec![DbOp::Insert(c::row(4))],
        done: Box::new(move || {
            let _ = tx.send(());
        }),
    });
    assert!(rx.recv_timeout(Duration::from_secs(5)).is_err());
    drop(new);
    let rows = e.rt.block_on(e.store.read()).unwrap().rows;
    assert_eq!(rows, vec![c::row(1), c::row(3)]);
}

#[test]
#[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
fn another_store_or_an_older_one_under_the_witness_is_refused() {
    let mut e = Etcd::new();
    let (s, _) = e.open().unwrap();
    write(&*s, vec![DbOp::Insert(c::row(1))]);
    // A copy of every key now, as an old snapshot would hold them.
    let client = e.store.client();
    let saved = e.rt.block_on(async {
        let mut kv = client.kv_client();
        let r = kv
            .get("/contract/", Some(GetOptions::new().with_prefix()))
            .await
            .unwrap();
        r.kvs()
            .iter()
            .filter(|kv| !kv.key().starts_with(b"/contract/leader"))
            .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
            .collect::<Vec<_>>()
    });
    write(&*s, vec![DbOp::Insert(c::row(2))]);
    write(&*s, vec![DbOp::Insert(c::row(3))]);
    drop(s);

    // Another prefix (another cluster, or the keys deleted): empty, but witnessed.
    let other = EtcdConfig {
        prefix: "/elsewhere/".into(),
        ..e.config.clone()
    };
    let store = e.rt.block_on(EtcdStore::connect(&other)).unwrap();
    let err = e.open_store(store).err().unwrap();
    assert!(err.contains("the store is empty, but the witness"), "{err}");

    // The old snapshot put back: transactions are missing.
    e.rt.block_on(async {
        let mut kv = client.kv_client();
        kv.delete(
            "/contract/flows/",
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await
        .unwrap();
        for (k, v) in saved {
            kv.put(k, v, None).await.unwrap();
        }
    });
    let err = e.open().err().unwrap();
    assert!(err.contains("transactions are missing"), "{err}");
    // Moving the witness away accepts the older store.
    std::fs::remove_file(e.dir.path().join("replica.witness")).unwrap();
    let (_s, r) = e.open().unwrap();
    assert_eq!(r.rows, vec![c::row(1)]);
}

#[test]
#[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
fn the_leaders_compactor_forgets_old_history_and_the_store_opens_from_what_is_left() {
    let mut e = Etcd::new();
    let (s, _) = e.open().unwrap();
    write(&*s, vec![DbOp::Insert(c::row(1))]);
    let old = e.rt.block_on(e.store.revision()).unwrap();
    write(&*s, vec![DbOp::Insert(c::row(2))]);
    write(&*s, vec![c::delete(1)]);
    let client = e.store.client();
    let meta_at = |rev: i64| {
        let mut kv = client.kv_client();
        e.rt.block_on(kv.get("/contract/meta", Some(GetOptions::new().with_revision(rev))))
    };
    assert!(meta_at(old).is_ok(), "history is kept until compacted");
    // The compactor compacts up to the revision it saw one period earlier: with
    // commits going on, the revision of the first writes is soon forgotten.
    let task = e.rt.spawn(super::compact::compactor(
        e.store.clone(),
        Duration::from_millis(20),
    ));
    let mut n = 3;
    let forgotten = loop {
        match meta_at(old) {
            Err(err) if err.to_string().contains("compacted") => break true,
            Err(err) => panic!("{err}"),
            Ok(_) if n > 10_000 => break false,
            Ok(_) => {
                write(&*s, vec![DbOp::Insert(c::row(n))]);
                write(&*s, vec![c::delete(n)]);
                n += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    task.abort();
    assert!(
        forgotten,
        "the history at revision {old} was never compacted"
    );
    // The store is whole: a new term reads it back and checks it.
    drop(s);
    let (_s, r) = e.open().unwrap();
    assert_eq!(r.rows, vec![c::row(2)]);
}

#[test]
#[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
fn with_a_member_dead_requests_go_to_the_members_alive() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = LocalEtcd::start(&dir.path().join("etcd"), 3).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The store is given members 0 and 1; member 2 only keeps the quorum.
    let store = rt
        .block_on(EtcdStore::connect(&EtcdConfig::new(
            cluster.endpoints()[..2].to_vec(),
            "/alive/",
        )))
        .unwrap();
    let client = store.client();
    let get = || {
        let mut kv = client.kv_client();
        rt.block_on(async {
            matches!(
                tokio::time::timeout(Duration::from_secs(10), kv.get("/alive/x", None)).await,
                Ok(Ok(_))
            )
        })
    };
    // Until 100 requests in a row succeed (a bounded number of tries).
    let settles = || {
        let (mut streak, mut tries) = (0, 0);
        while streak < 100 && tries < 5_000 {
            tries += 1;
            if get() {
                streak += 1;
            } else {
                streak = 0;
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        streak >= 100
    };
    assert!(settles(), "requests failed with every member alive");
    // Member 0 dies; 1 and 2 keep a quorum. etcd's client balances over every
    // endpoint it was given, a dead one too (etcd-client issue 39): the store takes
    // a member that does not answer out of the list.
    cluster.kill(0);
    assert!(settles(), "requests kept going to the dead member 0");
    // Member 0 comes back and member 1 dies: only member 0 of the store's list is
    // left, so requests succeed only if it was put back.
    cluster.restart(0).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let back = (0..5_000).any(|_| {
        let ok = get();
        if !ok {
            std::thread::sleep(Duration::from_millis(10));
        }
        ok
    });
    assert!(back);
    cluster.kill(1);
    assert!(
        settles(),
        "member 0 was not put back in the list once it answered"
    );
}

#[test]
#[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
fn commits_go_on_when_the_raft_leader_they_were_sent_to_dies() {
    // The writer commits through its own connection to etcd's Raft leader; when that
    // member dies, it must fall back to the members alive, not lose its term.
    let mut e = Etcd::with_members(3);
    let (w, _) = e.open().unwrap();
    write(&*w, vec![DbOp::Insert(c::row(1))]);
    let leader = e.raft_leader().expect("a member leads");
    e._cluster.kill(leader);
    for id in 2..12 {
        write(&*w, vec![DbOp::Insert(c::row(id))]);
    }
    assert!(
        e.lost.iter_mut().all(|l| l.try_recv().is_err()),
        "the term went on"
    );
    drop(w);
    let (_, restored) = e.open().unwrap();
    assert_eq!(restored.rows.len(), 11);
}
