//! Keeping the etcd client off dead members (`kill -9` of one etcd member
//! must not stop the manager while a quorum survives).
//!
//! etcd's Rust client balances requests over every endpoint it was given and keeps
//! sending some of them to a member that is down (etcd-client issue 39, left to
//! applications): a campaign, a lease refresh or a commit fails with "tcp connect
//! error" again and again, and a replica waiting to take over can keep failing its
//! campaign for seconds after the leader died. So each endpoint is probed on its own
//! connection (etcd's Status call, which a member without a raft leader refuses too)
//! every [`PERIOD`]; one that does not answer within [`PATIENCE`] is taken out of the
//! client's list, and put back once it answers again. The last endpoint listed is
//! never taken out: with every member silent, requests fail with etcd's own errors.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

/// How often each endpoint is probed.
pub const PERIOD: Duration = Duration::from_millis(250);
/// How long a probe may take.
pub const PATIENCE: Duration = Duration::from_secs(1);
/// How long a new term looks for etcd's Raft leader before it commits through
/// every member instead.
pub const FIND_LEADER: Duration = Duration::from_millis(250);

/// The probes; they stop when this goes.
pub struct Watch(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Watch {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Starts probing each of `endpoints` (as given to `client`), inside a tokio runtime.
pub fn watch(client: &Client, endpoints: &[String], opts: &ConnectOptions, tls: bool) -> Watch {
    if endpoints.len() < 2 {
        return Watch(Vec::new());
    }
    let listed = Arc::new(Mutex::new(vec![true; endpoints.len()]));
    let scheme = if tls { "https://" } else { "http://" };
    Watch(
        endpoints
            .iter()
            .enumerate()
            .map(|(i, ep)| {
                let uri = if ep.contains("://") {
                    ep.clone()
                } else {
                    format!("{scheme}{ep}")
                };
                tokio::spawn(probe_loop(
                    client.clone(),
                    i,
                    ep.clone(),
                    uri,
                    opts.clone(),
                    listed.clone(),
                ))
            })
            .collect(),
    )
}

/// A client of its own for the member that leads etcd's Raft among `endpoints`
/// (`None`: fewer than two endpoints, or no member says it leads within
/// [`FIND_LEADER`]; the members are asked at once, so a dead one delays nothing).
/// The writer commits through it: a transaction sent to a follower is forwarded to
/// the Raft leader, and the follower answers only once it has applied the entry
/// itself — a hop and a wait more per commit (docs/ha-manager.md, "Decisions per
/// second").
pub async fn raft_leader(endpoints: &[String], opts: &ConnectOptions) -> Option<Client> {
    if endpoints.len() < 2 {
        return None;
    }
    let mut asked = tokio::task::JoinSet::new();
    for ep in endpoints {
        let (ep, opts) = (ep.clone(), opts.clone());
        asked.spawn(async move {
            let c = Client::connect([ep], Some(opts)).await.ok()?;
            let s = c.maintenance_client().status().await.ok()?;
            let leads = s.leader() != 0 && s.header().is_some_and(|h| h.member_id() == s.leader());
            leads.then_some(c)
        });
    }
    let first = async {
        while let Some(r) = asked.join_next().await {
            if let Ok(Some(c)) = r {
                return Some(c);
            }
        }
        None
    };
    tokio::time::timeout(FIND_LEADER, first)
        .await
        .ok()
        .flatten()
}

/// Whether the member at `ep` answers, on its own connection `conn` (made when
/// missing).
async fn answers(ep: &str, conn: &mut Option<Client>, opts: &ConnectOptions) -> bool {
    if conn.is_none() {
        match tokio::time::timeout(PATIENCE, Client::connect([ep], Some(opts.clone()))).await {
            Ok(Ok(c)) => *conn = Some(c),
            _ => return false,
        }
    }
    let mut m = conn.as_ref().expect("connected above").maintenance_client();
    let ok = matches!(tokio::time::timeout(PATIENCE, m.status()).await, Ok(Ok(_)));
    if !ok {
        // A fresh connection next time (the old one may be stuck).
        *conn = None;
    }
    ok
}

async fn probe_loop(
    client: Client,
    i: usize,
    ep: String,
    uri: String,
    opts: ConnectOptions,
    listed: Arc<Mutex<Vec<bool>>>,
) {
    let mut conn = None;
    let mut first = true;
    loop {
        // The first probe at once: a replica started while a member is down must
        // not campaign through it.
        if !std::mem::take(&mut first) {
            tokio::time::sleep(PERIOD).await;
        }
        let ok = answers(&ep, &mut conn, &opts).await;
        // Decide under the lock, change the client's list after it.
        let change = {
            let mut l = listed.lock().expect("endpoint list lock");
            let others = l.iter().enumerate().filter(|(j, x)| *j != i && **x).count();
            match (ok, l[i]) {
                (false, true) if others > 0 => {
                    l[i] = false;
                    Some(false)
                }
                (true, false) => {
                    l[i] = true;
                    Some(true)
                }
                _ => None,
            }
        };
        match change {
            Some(false) => {
                tracing::warn!(endpoint = %ep, "etcd member does not answer: no longer used until it does");
                if let Err(e) = client.remove_endpoint(&uri).await {
                    tracing::warn!(endpoint = %ep, error = %e, "cannot take the etcd member out");
                }
            }
            Some(true) => {
                tracing::info!(endpoint = %ep, "etcd member answers again: used again");
                if let Err(e) = client.add_endpoint(&ep).await {
                    tracing::warn!(endpoint = %ep, error = %e, "cannot put the etcd member back");
                }
            }
            None => {}
        }
    }
}
