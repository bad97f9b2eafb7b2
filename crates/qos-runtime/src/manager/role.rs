//! Whether this master leads, and the books of its term (only the
//! leader admits).
//!
//! A *term* is one stretch of leadership: the books rebuilt from the store when it
//! began, the store's writer for it, and the agents' event streams opened during it.
//! A master on SQLite has one term for its whole run. A replica on etcd has a term
//! each time it wins the election; when it loses leadership the term is dropped —
//! its writer stopped, its agents' streams closed so that they go to the new leader —
//! and the replica answers as a follower until it wins again, with books rebuilt
//! from the store then.
//!
//! Handlers take the current term once and work on it; a handler still holding a
//! term that ended can change only that term's books, whose writer commits nothing
//! more: its request is never acknowledged.
//!
//! A replica answers only while it can *prove* it leads ([`LeaseProof`]): its term's
//! etcd lease is live by its own monotonic clock — a refresh sent at `t` and
//! acknowledged keeps the lease until at least `t + TTL` in etcd, so until then, less
//! a safety margin, no other replica can have been elected. A replica stopped or cut
//! off past that (SIGSTOP, a network partition) refuses every request from the moment
//! it resumes, before it has even learnt that it was deposed: it never answers from
//! the books of a term that may have ended.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use qos_core::topology::NodeId;

use super::hub::{Books, Hub};
use super::state::{Snapshot, State};
use super::store::Store;
use crate::protocol::{ErrorCode, WireError};

/// One term of leadership.
pub struct Term {
    /// The books.
    pub state: Mutex<State>,
    /// The writer.
    pub store: Box<dyn Store>,
    /// Agents' event streams.
    pub hub: Arc<Hub>,
    /// The term's number: the create revision of the election key in etcd; 0 on SQLite.
    pub number: i64,
}

impl Books for Term {
    fn snapshot(&self, node: (NodeId, &str)) -> Snapshot {
        self.state.lock().expect("state lock").node_snapshot(node)
    }
}

/// How long a term's lease is provably live, by this process's monotonic clock
/// (which keeps counting while the process is stopped).
#[derive(Debug)]
pub struct LeaseProof {
    base: Instant,
    /// Nanoseconds after `base` until which the lease is provably live.
    until: AtomicU64,
    margin: Duration,
}

impl LeaseProof {
    /// A lease of `ttl` whose grant (or last refresh) was requested at `sent`; the
    /// proof ends `margin` before etcd could let it expire.
    pub fn new(sent: Instant, ttl: Duration, margin: Duration) -> Arc<LeaseProof> {
        let p = LeaseProof {
            base: sent,
            until: AtomicU64::new(0),
            margin,
        };
        p.refreshed(sent, ttl);
        Arc::new(p)
    }

    /// A refresh requested at `sent` was acknowledged with `ttl` left.
    pub fn refreshed(&self, sent: Instant, ttl: Duration) {
        let until = (sent + ttl).checked_sub(self.margin).unwrap_or(sent);
        let ns = until.saturating_duration_since(self.base).as_nanos() as u64;
        self.until.fetch_max(ns, Ordering::AcqRel);
    }

    /// Whether the lease is provably live now.
    pub fn live(&self) -> bool {
        let now = self.base.elapsed().as_nanos() as u64;
        now < self.until.load(Ordering::Acquire)
    }

    /// The proof ends now (the lease was lost).
    pub fn end(&self) {
        self.until.store(0, Ordering::Release);
    }
}

struct Inner {
    term: Option<Arc<Term>>,
    /// The proof that the term's lease is live (`None`: a single master, always
    /// leading for its whole run).
    proof: Option<Arc<LeaseProof>>,
    /// The leader's URL as last seen, when this replica follows.
    leader: Option<String>,
    /// How many terms this replica has led.
    terms: u64,
}

/// This master's role.
pub struct Role {
    inner: RwLock<Inner>,
    /// This replica's own URL (what it tells others when it leads).
    advertise: Option<String>,
}

impl Role {
    /// A follower that knows no leader yet.
    pub fn follower(advertise: Option<String>) -> Role {
        Role {
            inner: RwLock::new(Inner {
                term: None,
                proof: None,
                leader: None,
                terms: 0,
            }),
            advertise,
        }
    }

    /// The current term, if this master leads and can prove it now.
    pub fn term(&self) -> Option<Arc<Term>> {
        let i = self.inner.read().expect("role lock");
        if i.proof.as_ref().is_some_and(|p| !p.live()) {
            return None;
        }
        i.term.clone()
    }

    /// Whether this master leads (and can prove it now).
    pub fn is_leader(&self) -> bool {
        self.term().is_some()
    }

    /// Whether the leadership this replica holds is still provable now: call just
    /// before answering from a term's books (a read or a refusal; a grant's commit is
    /// fenced in the store instead).
    pub fn still_leads(&self, term: &Term) -> bool {
        self.term().is_some_and(|t| std::ptr::eq(&*t, term))
    }

    /// How many terms this master has led.
    pub fn terms(&self) -> u64 {
        self.inner.read().expect("role lock").terms
    }

    /// This master leads, with `term`, for its whole run (a single master).
    pub fn promote(&self, term: Arc<Term>) {
        self.promote_while(term, None);
    }

    /// This master leads, with `term`, while `proof` holds (`None`: always).
    pub fn promote_while(&self, term: Arc<Term>, proof: Option<Arc<LeaseProof>>) {
        let mut i = self.inner.write().expect("role lock");
        i.term = Some(term);
        i.proof = proof;
        i.leader = self.advertise.clone();
        i.terms += 1;
    }

    /// This master no longer leads: its term ends, and every agent stream opened in
    /// it is closed (the agents reconnect and find the new leader).
    pub fn demote(&self) {
        let old = {
            let mut i = self.inner.write().expect("role lock");
            i.leader = None;
            i.proof = None;
            i.term.take()
        };
        if let Some(t) = old {
            t.hub.close_all();
        }
    }

    /// The leader, as last observed (followers).
    pub fn set_leader(&self, url: Option<String>) {
        let mut i = self.inner.write().expect("role lock");
        if i.term.is_none() {
            i.leader = url;
        }
    }

    /// The leader's URL, if known (this master's own when it leads; none while it
    /// holds a term it can no longer prove).
    pub fn leader(&self) -> Option<String> {
        let i = self.inner.read().expect("role lock");
        if i.term.is_some() && i.proof.as_ref().is_some_and(|p| !p.live()) {
            return None;
        }
        i.leader.clone()
    }

    /// This master's own URL, if it was given one.
    pub fn advertise(&self) -> Option<&str> {
        self.advertise.as_deref()
    }

    /// The reply of a follower to a request only the leader can answer: `503
    /// unavailable`, retryable, naming the leader when known.
    pub fn not_leader(&self) -> WireError {
        let message = match self.leader() {
            Some(url) => {
                format!("this manager replica is not the leader; the leader is {url} (retry there)")
            }
            None => "this manager replica is not the leader and no leader is elected yet \
                     (failover in progress); retry shortly"
                .to_string(),
        };
        WireError::new(ErrorCode::Unavailable, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_proof_lasts_until_the_ttl_less_the_margin_from_the_request_and_refreshes_extend_it()
    {
        let sent = Instant::now();
        let p = LeaseProof::new(sent, Duration::from_millis(300), Duration::from_millis(100));
        assert!(p.live());
        std::thread::sleep(Duration::from_millis(250));
        assert!(!p.live(), "past sent + ttl - margin");
        p.refreshed(Instant::now(), Duration::from_millis(300));
        assert!(p.live());
        // An older refresh acknowledged late never shortens the proof.
        p.refreshed(sent, Duration::from_millis(300));
        assert!(p.live());
        p.end();
        assert!(!p.live());
    }
}
