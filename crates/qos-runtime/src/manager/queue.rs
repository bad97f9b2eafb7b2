//! The line of job requests waiting for room (`wait_s`): first come first served.
//! Only the request at the head of the line tries to reserve; it leaves the line when
//! it is granted or its time runs out, and every release wakes the line. So of two
//! jobs that each fit alone but not together, the first holds all of its flows and the
//! second waits, holding nothing, until the first is released.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// The waiting line.
#[derive(Debug, Default)]
pub struct JobQueue {
    line: Mutex<Line>,
    freed: Notify,
}

#[derive(Debug, Default)]
struct Line {
    next: u64,
    waiting: BTreeSet<u64>,
}

impl JobQueue {
    /// Takes a ticket at the end of the line.
    pub fn join(&self) -> u64 {
        let mut l = self.line.lock().expect("queue lock");
        let t = l.next;
        l.next += 1;
        l.waiting.insert(t);
        t
    }

    /// Whether `ticket` is at the head of the line.
    pub fn is_head(&self, ticket: u64) -> bool {
        self.line.lock().expect("queue lock").waiting.first() == Some(&ticket)
    }

    /// How many wait ahead of `ticket`.
    pub fn ahead(&self, ticket: u64) -> usize {
        self.line
            .lock()
            .expect("queue lock")
            .waiting
            .range(..ticket)
            .count()
    }

    /// `ticket` leaves the line (granted, refused or out of time); the next one is
    /// woken.
    pub fn leave(&self, ticket: u64) {
        self.line
            .lock()
            .expect("queue lock")
            .waiting
            .remove(&ticket);
        self.freed();
    }

    /// Capacity was freed (a job or flow released or expired): the line tries again.
    pub fn freed(&self) {
        self.freed.notify_waiters();
    }

    /// A wake-up to wait for; create it (and `enable` it) before looking, so a release
    /// between the look and the wait is not missed.
    pub fn notified(&self) -> Notified<'_> {
        self.freed.notified()
    }
}
