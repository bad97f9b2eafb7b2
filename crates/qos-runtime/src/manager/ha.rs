//! Leader election of the manager replicas through etcd: several manager
//! replicas, one leader; followers take over from etcd alone.
//!
//! Each replica, in a loop:
//!
//! 1. takes an etcd lease of [`Config::election_ttl`] and keeps it alive;
//! 2. campaigns with etcd's election API under `<prefix>leader`, its URL as the value
//!    (etcd elects the oldest campaigner; the others wait in line). While it waits it
//!    follows, and tells clients who leads;
//! 3. once elected, opens the store for its term ([`EtcdStore::open_term`]: every key
//!    read back and checked, the store claimed), rebuilds the books from it — ledger,
//!    best-effort shares, IDTs, each node's agent instance — under the restart rules
//!    (unfit grants refuse the term, holders keep their node for one lease, every
//!    lease starts afresh), and leads, compacting etcd's history meanwhile
//!    ([`compactor`]);
//! 4. stops leading as soon as it learns that its lease is gone (the keep-alive says
//!    so, or none succeeded for a whole TTL) or its writer was fenced, revokes its
//!    lease so that the next in line is elected at once, and starts over.
//!
//! Safety never rests on step 4's timing: every commit is fenced by the election key
//! ([`super::store::etcd`]), so a leader that does not yet know it was deposed cannot
//! commit. And a leader answers nothing — no read, no refusal — once it cannot prove
//! its lease live by its own clock ([`LeaseProof`], [`proof_margin`]), so one that was
//! stopped or cut off never answers from books another leader has moved past.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::Client;
use tokio::sync::{mpsc, oneshot};

use super::config::Config;
use super::hub::Hub;
use super::leader_watch;
use super::role::{LeaseProof, Term};
use super::shared::Shared;
use super::startup::{rebuild, ManagerError};
use super::store::etcd::compact::compactor;
use super::store::etcd::{topology_fingerprint, EtcdStore, Fence};
use super::store::StoreError;
use crate::shutdown::Stop;

/// A task that is aborted when this goes.
struct Guard(tokio::task::JoinHandle<()>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a term ended, or could not begin.
enum End {
    /// Try again (after a pause if it never began).
    Retry(String),
    /// Give up: the store cannot be served from.
    Fatal(ManagerError),
}

/// One replica's election loop.
pub(super) struct Ha {
    shared: Arc<Shared>,
    store: EtcdStore,
    config: Config,
    fatal: Option<oneshot::Sender<ManagerError>>,
    /// The lease held now and its TTL, to revoke when stopping.
    lease: Option<(i64, Duration)>,
}

impl Ha {
    pub(super) fn new(
        shared: Arc<Shared>,
        store: EtcdStore,
        config: Config,
        fatal: oneshot::Sender<ManagerError>,
    ) -> Ha {
        Ha {
            shared,
            store,
            config,
            fatal: Some(fatal),
            lease: None,
        }
    }

    fn ttl_secs(&self) -> i64 {
        // etcd counts leases in whole seconds.
        (self.config.election_ttl.as_millis().div_ceil(1000) as i64).max(1)
    }

    /// One term: lease, campaign, lead until the leadership goes.
    async fn term(&mut self) -> End {
        let client = self.store.client();
        let etcd = |e: etcd_client::Error| End::Retry(format!("etcd: {e}"));
        let mut leases = client.lease_client();
        let asked = Instant::now();
        let grant = match leases.grant(self.ttl_secs(), None).await {
            Ok(g) => g,
            Err(e) => return etcd(e),
        };
        let (id, ttl) = (grant.id(), Duration::from_secs(grant.ttl().max(1) as u64));
        self.lease = Some((id, ttl));
        let proof = LeaseProof::new(asked, ttl, proof_margin(ttl));
        let (lost_tx, mut lost) = mpsc::unbounded_channel::<String>();
        let _keeper = Guard(tokio::spawn(keep_alive(
            client.clone(),
            id,
            ttl,
            lost_tx.clone(),
            proof.clone(),
        )));
        let me = self.shared.role.advertise().unwrap_or_default().to_string();
        let mut election = client.election_client();
        let won = tokio::select! {
            r = election.campaign(self.store.election(), me.clone(), id) => r,
            why = lost.recv() => return End::Retry(why.unwrap_or_default()),
        };
        let key = match won {
            Ok(mut r) => match r.take_leader() {
                Some(k) => k,
                None => return End::Retry("etcd's campaign reply named no leader key".into()),
            },
            Err(e) => return etcd(e),
        };
        let fence = Fence {
            key: key.key().to_vec(),
            rev: key.rev(),
        };
        let t0 = Instant::now();
        let fp = topology_fingerprint(&self.config.topology);
        let (writer, restored, other) = match self
            .store
            .open_term(&fence, &fp, ttl, lost_tx.clone())
            .await
        {
            Ok(x) => x,
            Err(e @ (StoreError::Etcd { .. } | StoreError::Fenced { .. })) => {
                return End::Retry(e.to_string())
            }
            Err(e) => return End::Fatal(ManagerError::Store(e)),
        };
        if let Some(other) = other {
            tracing::warn!(stored = %other, ours = %fp,
                "the previous leader ran with another topology; every stored grant is checked against this one");
        }
        let now = Instant::now();
        let (state, dropped) = match rebuild(&self.config, restored, &writer, now).await {
            Ok(x) => x,
            Err(e @ (ManagerError::Unfit { .. } | ManagerError::UnfitJobs { .. })) => {
                return End::Fatal(e)
            }
            Err(e) => return End::Retry(e.to_string()),
        };
        if !dropped.is_empty() {
            tracing::warn!(
                dropped = dropped.len(),
                "released stored grants that do not fit the topology (--drop-unfit-grants)"
            );
        }
        let flows = state.len();
        let _compactor = self
            .store
            .config()
            .compact_every
            .map(|every| Guard(tokio::spawn(compactor(self.store.clone(), every))));
        self.shared.role.promote_while(
            Arc::new(Term {
                state: Mutex::new(state),
                store: Box::new(writer),
                hub: Arc::new(Hub::new(self.shared.metrics.clone(), self.config.hub)),
                number: fence.rev,
            }),
            Some(proof.clone()),
        );
        tracing::info!(term = fence.rev, flows, took_ms = t0.elapsed().as_millis() as u64, url = %me,
            "elected: leading with the books rebuilt from etcd");
        let why = lost.recv().await.unwrap_or_default();
        proof.end();
        self.shared.role.demote();
        tracing::warn!(term = fence.rev, reason = %why, "no longer leading");
        self.resign().await;
        End::Retry(why)
    }

    /// Gives the election up now (revoking the lease deletes the election key), so
    /// the next replica in line is elected without waiting for the TTL.
    async fn resign(&mut self) {
        if let Some((id, ttl)) = self.lease.take() {
            revoke(&self.store.client(), id, 2 * ttl + Duration::from_secs(1)).await;
        }
    }
}

/// Revokes lease `id`, trying again until etcd answers or `patience` has passed.
///
/// A replica steps down most often because etcd did not answer (a member died, and
/// with it, when it was etcd's Raft leader, every write until the others elect one:
/// 1 to 2 election timeouts, sometimes more). Revoking fails at once meanwhile, and a
/// lease left behind keeps the next replica in line waiting until it runs out — which
/// takes longer than its TTL, since etcd's new Raft leader extends every lease. So the
/// revocation is retried until it goes through; `patience` (past which the lease has
/// run out anyway) only bounds a stop while etcd is down.
async fn revoke(client: &Client, id: i64, patience: Duration) {
    let deadline = Instant::now() + patience;
    let mut leases = client.lease_client();
    let mut backoff = Duration::from_millis(50);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left.min(Duration::from_secs(1)), leases.revoke(id)).await {
            Ok(Ok(_)) => return,
            Ok(Err(e)) if e.to_string().contains("not found") => return,
            _ if Instant::now() >= deadline => {
                tracing::warn!(
                    lease = id,
                    "could not revoke the election lease: the next replica is elected once it runs out"
                );
                return;
            }
            _ => {
                tokio::time::sleep(backoff.min(deadline.saturating_duration_since(Instant::now())))
                    .await;
                backoff = (backoff * 2).min(Duration::from_millis(200));
            }
        }
    }
}

/// The election loop of a replica, until `stop`.
pub(super) async fn run(mut ha: Ha, mut stop: Stop) {
    let _observer = Guard(tokio::spawn(observe(
        ha.shared.clone(),
        ha.store.client(),
        ha.store.election(),
        ha.config.leader_probe,
    )));
    let mut pause = Duration::from_millis(100);
    loop {
        let began = ha.shared.role.terms();
        let end = tokio::select! {
            end = ha.term() => end,
            _ = stop.wait() => break,
        };
        match end {
            End::Fatal(e) => {
                tracing::error!(error = %e, "this replica cannot lead from this store; stopping");
                ha.shared.role.demote();
                ha.resign().await;
                if let Some(tx) = ha.fatal.take() {
                    let _ = tx.send(e);
                }
                return;
            }
            End::Retry(why) => {
                // A campaign that failed may have left its key in the line; revoking
                // the lease takes it out rather than block the election for a TTL.
                ha.resign().await;
                if ha.shared.role.terms() > began {
                    pause = Duration::from_millis(100);
                } else {
                    tracing::warn!(reason = %why, "not elected; campaigning again");
                    let wait = pause;
                    pause = (pause * 2).min(Duration::from_millis(500));
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = stop.wait() => break,
                    }
                }
            }
        }
    }
    // Stopping: a leader hands over at once.
    ha.shared.role.demote();
    ha.resign().await;
}

/// How long before a lease could expire in etcd a replica stops proving it leads: a
/// tenth of the TTL, at least 100 ms — room for the rate of this machine's clock to
/// differ from etcd's (NTP slews by at most 0.05 %) and for a request in progress to be
/// answered. The lease is refreshed every quarter of its TTL, so a leader whose etcd
/// answers never loses its proof.
fn proof_margin(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(100))
}

/// Keeps lease `id` alive, refreshing it every quarter of its `ttl` and extending
/// `proof` with each refresh acknowledged (from the time it was sent); says on `lost`
/// when it is gone: etcd answers that it expired, or no refresh succeeded for a whole
/// `ttl` (etcd then has let it expire, or is about to).
async fn keep_alive(
    client: Client,
    id: i64,
    ttl: Duration,
    lost: mpsc::UnboundedSender<String>,
    proof: Arc<LeaseProof>,
) {
    let period = (ttl / 4).max(Duration::from_millis(100));
    let mut last_ok = Instant::now();
    let mut leases = client.lease_client();
    loop {
        let attempt = async {
            let (mut keeper, mut stream) = leases.keep_alive(id).await?;
            loop {
                let sent = Instant::now();
                keeper.keep_alive().await?;
                match tokio::time::timeout(period.max(Duration::from_millis(500)), stream.message())
                    .await
                {
                    Ok(Ok(Some(r))) if r.ttl() > 0 => {
                        last_ok = Instant::now();
                        proof.refreshed(sent, Duration::from_secs(r.ttl() as u64));
                    }
                    Ok(Ok(Some(_))) => return Ok::<bool, etcd_client::Error>(true),
                    Ok(Ok(None)) | Err(_) => return Ok(false),
                    Ok(Err(e)) => return Err(e),
                }
                if last_ok.elapsed() >= ttl {
                    return Ok(false);
                }
                tokio::time::sleep(period).await;
            }
        };
        let expired = matches!(attempt.await, Ok(true));
        if expired {
            let _ = lost.send("the election lease expired (etcd says so)".into());
            return;
        }
        if last_ok.elapsed() >= ttl {
            let _ = lost.send(format!(
                "no lease refresh succeeded for {} ms: the election lease has run out",
                ttl.as_millis()
            ));
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Follows who leads, for followers' redirects; while another replica leads, watches
/// its process ([`leader_watch`], every `probe`; `None`: not watched).
async fn observe(shared: Arc<Shared>, client: Client, name: String, probe: Option<Duration>) {
    loop {
        let mut election = client.election_client();
        let mut watch: Option<(i64, Guard)> = None;
        if let Ok(mut stream) = election.observe(name.clone()).await {
            while let Ok(Some(r)) = stream.message().await {
                let leader = r.kv().and_then(|kv| {
                    let url = std::str::from_utf8(kv.value()).ok()?.to_string();
                    Some((url, kv.lease()))
                });
                let url = leader.as_ref().map(|(u, _)| u.clone());
                if let (Some((url, lease)), Some(every)) = (&leader, probe) {
                    let mine = shared.role.advertise() == Some(url.as_str());
                    if !mine && watch.as_ref().map(|w| w.0) != Some(*lease) && *lease != 0 {
                        let task = leader_watch::watch(client.clone(), url.clone(), *lease, every);
                        watch = Some((*lease, Guard(tokio::spawn(task))));
                    } else if mine {
                        watch = None;
                    }
                }
                shared.role.set_leader(url);
            }
        }
        drop(watch);
        shared.role.set_leader(None);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    /// Against a real etcd (the `etcd` binary on the PATH; `scripts/test` runs them).
    mod etcd {
        use std::time::Duration;

        use etcd_client::Client;

        use super::super::revoke;
        use crate::etcd_local::LocalEtcd;

        fn signal(etcd: &LocalEtcd, sig: libc::c_int) {
            let pid = etcd.pid(0).expect("the member runs") as libc::pid_t;
            // SAFETY: kill only sends a signal, to the member this test started.
            assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        }

        /// A leader that steps down while etcd does not answer (its Raft leader died,
        /// the others are electing one) revokes its lease once etcd answers again,
        /// rather than give up and leave the next replica waiting for it to run out.
        #[test]
        #[ignore = "needs etcd: the etcd binary (Debian etcd-server) on the PATH"]
        fn a_resigning_leaders_lease_is_revoked_once_etcd_answers_again() {
            let dir = tempfile::tempdir().unwrap();
            let etcd = LocalEtcd::start(&dir.path().join("etcd"), 1).unwrap();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let client = Client::connect(etcd.endpoints(), None).await.unwrap();
                let id = client.lease_client().grant(60, None).await.unwrap().id();
                // etcd stops answering for longer than a few quick tries take.
                signal(&etcd, libc::SIGSTOP);
                let revoking = tokio::spawn({
                    let client = client.clone();
                    async move { revoke(&client, id, Duration::from_secs(120)).await }
                });
                tokio::time::sleep(Duration::from_secs(5)).await;
                signal(&etcd, libc::SIGCONT);
                revoking.await.unwrap();
                // Gone, long before its 60 s would have run out.
                let left = client
                    .lease_client()
                    .time_to_live(id, None)
                    .await
                    .unwrap()
                    .ttl();
                assert_eq!(left, -1, "the lease is still there, {left} s left");
            });
        }
    }
}
