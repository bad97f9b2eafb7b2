//! The device queues of the VIA LCPs (Nagar §2.2–2.3, §3.3): requests ordered by a
//! [`Key`] — first come, first served (SVIA, PVIA), or VirtualClock stamp (QoSVIA) —
//! and the host DMA engine with its hardware request queue ([`Hdma`]), where QoSVIA's
//! mid-queue insertions never go within `guard` entries of the head (§3.3: "tolerating
//! slight inaccuracies … where the position for insertion is very close to the head").

use std::collections::{BTreeMap, VecDeque};

use qos_core::units::{Duration, Time};

use super::super::sram::Buf;
use super::super::{Outputs, Timer};

/// The order of a request: its VirtualClock stamp ([`Time::NEVER`] for best-effort
/// channels and for first-come-first-served firmware), then its arrival number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key {
    /// The doorbell's `auxVC`.
    pub stamp: Time,
    /// Arrival order.
    pub seq: u64,
}

/// A queue of requests kept in [`Key`] order, or appended at the tail.
#[derive(Debug)]
pub(crate) struct OrderedQueue<T> {
    items: VecDeque<(Key, T)>,
}

impl<T> Default for OrderedQueue<T> {
    fn default() -> Self {
        OrderedQueue {
            items: VecDeque::new(),
        }
    }
}

impl<T> OrderedQueue<T> {
    /// Appends at the tail (FCFS).
    pub fn push_back(&mut self, key: Key, item: T) {
        self.items.push_back((key, item));
    }

    /// Where an insertion of `key` goes: after every entry with a smaller or equal key,
    /// but not within the first `guard` entries. It passes that many entries.
    pub fn position(&self, key: Key, guard: usize) -> usize {
        let p = self.items.partition_point(|(k, _)| *k <= key);
        p.max(guard.min(self.items.len()))
    }

    /// Inserts in key order (see [`OrderedQueue::position`]); returns the position.
    pub fn insert(&mut self, key: Key, item: T, guard: usize) -> usize {
        let p = self.position(key, guard);
        self.items.insert(p, (key, item));
        p
    }

    /// Takes the head.
    pub fn pop_front(&mut self) -> Option<(Key, T)> {
        self.items.pop_front()
    }

    /// The entries, head first.
    pub fn iter(&self) -> impl Iterator<Item = &(Key, T)> {
        self.items.iter()
    }

    /// Entries queued.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// What a host DMA request moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobKind {
    /// Send descriptor, host → NIC.
    SendDesc,
    /// Send data, host → NIC.
    SendData,
    /// Send completion status, NIC → host.
    SendStatus,
    /// Receive descriptor, host → NIC (SVIA fetches it when the message arrives).
    RecvDesc,
    /// Receive data, NIC → host.
    RecvData,
    /// Receive completion status, NIC → host.
    RecvStatus,
}

/// One host DMA request (the pages of a buffer travel as one request here: the engine
/// spends a set-up per page, and cannot finish before the LCP has programmed the last
/// page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Job {
    /// The message.
    pub msg: Buf,
    /// What it moves.
    pub kind: JobKind,
    /// Engine time for all its pages.
    pub time: Duration,
    /// Engine time of its last page alone.
    pub last: Duration,
    /// When the LCP finishes programming its last page.
    pub programmed: Time,
}

/// The host DMA engine: one request at a time from its hardware queue; finished
/// requests wait for the LCP to notice them, in the order they finished or, when the
/// LCP takes them by stamp, in key order.
#[derive(Debug, Default)]
pub(crate) struct Hdma {
    /// Requests not started, in service order.
    pub queue: OrderedQueue<Job>,
    busy: Option<(Key, Job, Time)>,
    /// Finished requests by the order the LCP takes them in.
    done: BTreeMap<(Key, u64), Job>,
    /// Order the finished requests by their key (else by when they finished).
    by_key: bool,
    finished: u64,
    /// Since when a finished request has been waiting (None: none is).
    done_since: Option<Time>,
    /// How long the engine has been occupied by requests (started ones in full).
    pub occupied: Duration,
}

impl Hdma {
    /// An idle engine whose finished requests the LCP takes by key (`by_key`) or in
    /// the order they finished.
    pub fn new(by_key: bool) -> Hdma {
        Hdma {
            by_key,
            ..Hdma::default()
        }
    }

    /// Queues a request (at the tail, or in key order with `guard`) and starts it if
    /// the engine is idle. Returns the position it was queued at.
    pub fn submit(
        &mut self,
        now: Time,
        key: Key,
        job: Job,
        ordered: Option<usize>,
        out: &mut Outputs,
    ) -> usize {
        let p = match ordered {
            Some(guard) => self.queue.insert(key, job, guard),
            None => {
                self.queue.push_back(key, job);
                self.queue.len() - 1
            }
        };
        self.start(now, out);
        p
    }

    fn start(&mut self, now: Time, out: &mut Outputs) {
        if self.busy.is_some() {
            return;
        }
        let Some((key, job)) = self.queue.pop_front() else {
            return;
        };
        let end = (now + job.time).max(job.programmed.max(now) + job.last);
        self.occupied += end.saturating_since(now);
        self.busy = Some((key, job, end));
        out.arm(end, Timer::HostDma);
    }

    /// The request in service finished at `now` (its timer): it joins the finished
    /// ones, the next one starts, and it is returned.
    pub fn complete(&mut self, now: Time, out: &mut Outputs) -> Option<Job> {
        match self.busy {
            Some((key, job, end)) if end == now => {
                self.busy = None;
                self.finished += 1;
                let order = if self.by_key {
                    key
                } else {
                    Key {
                        stamp: Time::ZERO,
                        seq: self.finished,
                    }
                };
                self.done.insert((order, self.finished), job);
                self.done_since.get_or_insert(now);
                self.start(now, out);
                Some(job)
            }
            _ => None,
        }
    }

    /// Since when a finished request has been waiting for the LCP.
    pub fn done_since(&self) -> Option<Time> {
        self.done_since
    }

    /// The LCP takes the next finished request.
    pub fn take_done(&mut self) -> Option<Job> {
        let (_, job) = self.done.pop_first()?;
        if self.done.is_empty() {
            self.done_since = None;
        }
        Some(job)
    }
}
