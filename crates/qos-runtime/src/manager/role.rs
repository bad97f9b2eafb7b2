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

use std::sync::{Arc, Mutex, RwLock};

use qos_core::topology::NodeId;

use super::hub::{Books, Hub};
use super::state::State;
use super::store::Store;
use crate::protocol::{ErrorCode, IdtEntry, WireError};

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
    fn snapshot(&self, node: NodeId) -> (Vec<IdtEntry>, u64) {
        let st = self.state.lock().expect("state lock");
        (st.snapshot(node), st.version())
    }
}

struct Inner {
    term: Option<Arc<Term>>,
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
                leader: None,
                terms: 0,
            }),
            advertise,
        }
    }

    /// The current term, if this master leads.
    pub fn term(&self) -> Option<Arc<Term>> {
        self.inner.read().expect("role lock").term.clone()
    }

    /// Whether this master leads.
    pub fn is_leader(&self) -> bool {
        self.inner.read().expect("role lock").term.is_some()
    }

    /// How many terms this master has led.
    pub fn terms(&self) -> u64 {
        self.inner.read().expect("role lock").terms
    }

    /// This master leads, with `term`.
    pub fn promote(&self, term: Arc<Term>) {
        let mut i = self.inner.write().expect("role lock");
        i.term = Some(term);
        i.leader = self.advertise.clone();
        i.terms += 1;
    }

    /// This master no longer leads: its term ends, and every agent stream opened in
    /// it is closed (the agents reconnect and find the new leader).
    pub fn demote(&self) {
        let old = {
            let mut i = self.inner.write().expect("role lock");
            i.leader = None;
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

    /// The leader's URL, if known (this master's own when it leads).
    pub fn leader(&self) -> Option<String> {
        self.inner.read().expect("role lock").leader.clone()
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
