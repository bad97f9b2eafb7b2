//! Pushing IDT updates to agents (thesis §4.3: "all relevant managers are apprised of
//! the updates in IDT values").
//!
//! Each agent holds one server-sent-events stream; the hub keeps one queue per node.
//! A change is delivered only to the nodes whose tables it touches. Every stream starts
//! with a snapshot of the node's whole table, so a reconnecting agent re-syncs without
//! help; updates after it carry increasing sequence numbers.
//!
//! Queues are bounded (a stream nobody reads grew the master by
//! hundreds of megabytes). A subscriber that falls more than [`HubLimits`] behind has
//! its queue dropped — the memory goes back at once — and is marked for a re-sync:
//! when its reader asks for the next event it gets a fresh snapshot of the node's
//! table instead, then only the changes the snapshot does not already hold (each
//! change carries the books' version, [`Changes::version`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::stream::Stream;
use qos_core::topology::NodeId;
use tokio::sync::Notify;

use super::state::{Changes, Snapshot};
use crate::metrics::Metrics;
use crate::protocol::job::JobInfo;
use crate::protocol::{AgentEvent, FlowSpec, IdtEntry};

/// A stream or connection closed since the last [`release_freed_memory`].
static STREAM_CLOSED: AtomicBool = AtomicBool::new(false);

/// How the program's global allocator hands the memory one thread freed back, when it
/// is not the system's (set once by the binary, e.g. to mimalloc's `mi_collect`).
static RELEASE_HOOK: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Bumped by [`note_freed`] (a connection closed): a worker runs the hook when it parks
/// after a bump, so the worker that freed a connection's buffers hands its pages back.
static RELEASE_ROUND: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

thread_local! {
    static RELEASED_ROUND: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Sets what [`release_freed_memory`] calls besides glibc's trim: the binary's own
/// allocator's way of returning a thread's freed memory to the system. The first call
/// wins.
pub fn set_release_hook(hook: fn()) {
    let _ = RELEASE_HOOK.set(hook);
}

/// Runs the release hook on this thread if a release was asked since it last did (for
/// the runtime's `on_thread_park`: an allocator such as mimalloc keeps freed pages per
/// thread, so each worker must hand back its own, and does so when it goes idle).
pub fn release_on_park() {
    let round = RELEASE_ROUND.load(Ordering::Acquire);
    if RELEASED_ROUND.with(|r| r.replace(round)) != round {
        if let Some(hook) = RELEASE_HOOK.get() {
            hook();
        }
    }
}

/// Hands the memory that closed streams and connections freed back to the operating
/// system. Allocators keep freed memory for reuse — glibc in the arena of the thread
/// that freed it, mimalloc in pages it purges only when it next allocates — so a
/// burst of closed connections (3,000 slow bodies) left an idle master tens of
/// megabytes larger. Called once a second by the reaper task, so a burst of closes
/// costs one trim: glibc's `malloc_trim`, and the hook of the binary's allocator on
/// this thread and, as each goes idle after a close, on every other worker
/// ([`release_on_park`]).
pub fn release_freed_memory() {
    if STREAM_CLOSED.swap(false, Ordering::AcqRel) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only walks the allocator's own arenas.
        unsafe {
            libc::malloc_trim(0);
        }
        if let Some(hook) = RELEASE_HOOK.get() {
            hook();
        }
    }
}

/// Notes that buffers were freed (a connection closed) for [`release_freed_memory`],
/// and starts a release round: the worker that freed them hands its pages back when it
/// next goes idle ([`release_on_park`]).
pub(crate) fn note_freed() {
    STREAM_CLOSED.store(true, Ordering::Release);
    RELEASE_ROUND.fetch_add(1, Ordering::AcqRel);
}

/// The books a stream re-syncs from: those of the term that opened it
/// ([`super::role::Term`]). A trait so that the hub needs nothing of the terms.
pub trait Books: Send + Sync {
    /// `node`'s table as the books hold it now.
    fn snapshot(&self, node: (NodeId, &str)) -> Snapshot;
}

/// How far a subscriber may fall behind before it is re-synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubLimits {
    /// Undelivered update events.
    pub max_events: usize,
    /// Undelivered rows (upserts plus removals) in them.
    pub max_rows: usize,
}

impl Default for HubLimits {
    /// 4,096 events or 16,384 rows (a few megabytes) per agent.
    fn default() -> Self {
        HubLimits {
            max_events: 4096,
            max_rows: 16_384,
        }
    }
}

/// An update waiting for its reader.
#[derive(Default)]
struct Pending {
    version: u64,
    upsert: Vec<IdtEntry>,
    remove: Vec<FlowSpec>,
    jobs: Vec<Arc<JobInfo>>,
    jobs_gone: Vec<String>,
}

impl Pending {
    /// What it counts against [`HubLimits::max_rows`]: a job counts as one row.
    fn rows(&self) -> usize {
        self.upsert.len() + self.remove.len() + self.jobs.len() + self.jobs_gone.len()
    }
}

#[derive(Default)]
struct Queue {
    events: VecDeque<Pending>,
    rows: usize,
    /// The queue overflowed: the next event is a fresh snapshot.
    resync: bool,
    /// Changes of this version or older are in the snapshot already sent.
    delivered_through: u64,
}

/// One node's event stream, as the hub and the stream's reader share it.
pub struct Subscriber {
    queue: Mutex<Queue>,
    notify: Notify,
    /// The reader went away, or a newer stream replaced this one.
    closed: AtomicBool,
}

/// The agents' event queues, by node name.
pub struct Hub {
    subs: Mutex<HashMap<String, Arc<Subscriber>>>,
    /// The term ended: every stream is closed, and a new one ends after its snapshot.
    closed: AtomicBool,
    seq: Mutex<HashMap<String, u64>>,
    metrics: Arc<Metrics>,
    limits: HubLimits,
}

impl Hub {
    /// No subscribers yet.
    pub fn new(metrics: Arc<Metrics>, limits: HubLimits) -> Self {
        Hub {
            subs: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            seq: Mutex::new(HashMap::new()),
            metrics,
            limits,
        }
    }

    fn next_seq(&self, node: &str) -> u64 {
        let mut seq = self.seq.lock().expect("hub lock");
        let s = seq.entry(node.to_string()).or_insert(0);
        *s += 1;
        *s
    }

    /// Opens `node`'s stream (replacing an older one), starting with `snapshot`, the
    /// table at books version `version`. Call with the master's books locked, so no
    /// decision falls between the snapshot and the subscription. `term` is the term
    /// whose books the stream re-syncs from.
    pub fn subscribe(
        self: &Arc<Self>,
        term: Arc<dyn Books>,
        node: (NodeId, &str),
        snapshot: Snapshot,
    ) -> impl Stream<Item = AgentEvent> + Send + 'static {
        let sub = Arc::new(Subscriber {
            queue: Mutex::new(Queue {
                delivered_through: snapshot.version,
                ..Queue::default()
            }),
            notify: Notify::new(),
            closed: AtomicBool::new(false),
        });
        {
            let mut subs = self.subs.lock().expect("hub lock");
            if self.closed.load(Ordering::Acquire) {
                // The term ended: the reader gets the snapshot, then the end.
                sub.closed.store(true, Ordering::Release);
            } else if let Some(old) = subs.insert(node.1.to_string(), sub.clone()) {
                old.close();
            }
        }
        let first = AgentEvent::Snapshot {
            seq: self.next_seq(node.1),
            flows: snapshot.flows,
            jobs: snapshot.jobs,
        };
        let reader = Reader {
            hub: self.clone(),
            term,
            node: (node.0, node.1.to_string()),
            sub,
            first: Some(first),
        };
        futures_util::stream::unfold(reader, |mut r| async move {
            let ev = r.next().await?;
            Some((ev, r))
        })
    }

    /// Undelivered (events, rows) queued for `node`'s stream, if it has one open.
    pub fn queued(&self, node: &str) -> Option<(usize, usize)> {
        let sub = self.subs.lock().expect("hub lock").get(node)?.clone();
        if sub.closed.load(Ordering::Acquire) {
            return None;
        }
        let q = sub.queue.lock().expect("queue lock");
        Some((q.events.len(), q.rows))
    }

    /// Whether `node` has an event stream whose reader is still there.
    pub fn streaming(&self, node: &str) -> bool {
        self.subs
            .lock()
            .expect("hub lock")
            .get(node)
            .is_some_and(|s| !s.closed.load(Ordering::Acquire))
    }

    /// Ends the term's streams: every reader gets the end of its stream (its agent
    /// reconnects), and streams opened later end after their snapshot.
    pub fn close_all(&self) {
        let subs = {
            let mut subs = self.subs.lock().expect("hub lock");
            self.closed.store(true, Ordering::Release);
            std::mem::take(&mut *subs)
        };
        for s in subs.values() {
            s.close();
        }
    }

    /// Queues `changes` for exactly the nodes they name that have a stream open; a
    /// queue that would pass the limits is dropped and its reader re-synced.
    pub fn publish(&self, changes: Changes) {
        if changes.is_empty() {
            return;
        }
        let mut subs = self.subs.lock().expect("hub lock");
        let version = changes.version;
        let mut per_node: std::collections::BTreeMap<String, Pending> = changes
            .per_node
            .into_iter()
            .map(|(node, (upsert, remove))| {
                let p = Pending {
                    version,
                    upsert,
                    remove,
                    ..Pending::default()
                };
                (node, p)
            })
            .collect();
        for (info, held) in &changes.jobs {
            for node in info.followers() {
                if !subs.contains_key(node) {
                    continue;
                }
                let p = per_node.entry(node.to_string()).or_insert_with(|| Pending {
                    version,
                    ..Pending::default()
                });
                if *held {
                    p.jobs.push(info.clone());
                } else {
                    p.jobs_gone.push(info.id.clone());
                }
            }
        }
        for (node, pending) in per_node {
            let Some(sub) = subs.get(&node) else { continue };
            if sub.closed.load(Ordering::Acquire) {
                subs.remove(&node);
                continue;
            }
            let rows = pending.rows();
            {
                let mut q = sub.queue.lock().expect("queue lock");
                if q.events.len() >= self.limits.max_events || q.rows + rows > self.limits.max_rows
                {
                    // Fallen behind: give the memory back now; a snapshot replaces it.
                    q.events = VecDeque::new();
                    q.rows = 0;
                    if !q.resync {
                        q.resync = true;
                        self.metrics.resyncs.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(node = %node, "agent event stream fell behind; it will re-sync from a snapshot");
                    }
                } else {
                    q.rows += rows;
                    q.events.push_back(pending);
                }
            }
            sub.notify.notify_one();
            self.metrics.pushes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Subscriber {
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // Free the queue now rather than when the last handle goes.
        *self.queue.lock().expect("queue lock") = Queue::default();
        self.notify.notify_one();
    }
}

/// The reading end of one stream; closes its subscriber when dropped (the agent's
/// connection went).
struct Reader {
    hub: Arc<Hub>,
    term: Arc<dyn Books>,
    node: (NodeId, String),
    sub: Arc<Subscriber>,
    first: Option<AgentEvent>,
}

impl Reader {
    async fn next(&mut self) -> Option<AgentEvent> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            let notified = self.sub.notify.notified();
            if self.sub.closed.load(Ordering::Acquire) {
                return None;
            }
            let resync = {
                let mut q = self.sub.queue.lock().expect("queue lock");
                if std::mem::take(&mut q.resync) {
                    true
                } else if let Some(p) = q.events.pop_front() {
                    q.rows -= p.rows();
                    if p.version <= q.delivered_through {
                        continue; // already in the last snapshot
                    }
                    return Some(AgentEvent::Update {
                        seq: self.hub.next_seq(&self.node.1),
                        upsert: p.upsert,
                        remove: p.remove,
                        jobs: p.jobs,
                        jobs_gone: p.jobs_gone,
                    });
                } else {
                    false
                }
            };
            if resync {
                let s = self.term.snapshot((self.node.0, &self.node.1));
                self.sub.queue.lock().expect("queue lock").delivered_through = s.version;
                return Some(AgentEvent::Snapshot {
                    seq: self.hub.next_seq(&self.node.1),
                    flows: s.flows,
                    jobs: s.jobs,
                });
            }
            notified.await;
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.sub.close();
        note_freed();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;
    use std::time::Duration;

    /// This test's runtime's threads the release hook ran on, in order.
    static RELEASED: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn this_thread() -> Option<String> {
        let name = std::thread::current().name()?.to_string();
        name.starts_with("release-test-").then_some(name)
    }

    fn record() {
        if let Some(name) = this_thread() {
            RELEASED.lock().unwrap().push(name);
        }
    }

    /// mimalloc keeps freed pages per thread, so every worker that freed a closed
    /// connection's buffers must hand its own back once it is idle: 3,000 closed slow
    /// bodies left an idle master 31-35 MB above its start when only the reaper's own
    /// thread did.
    #[test]
    fn every_worker_that_freed_buffers_hands_them_back_when_idle() {
        super::set_release_hook(record);
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .thread_name_fn(|| {
                format!(
                    "release-test-{}",
                    NEXT.fetch_add(1, super::Ordering::Relaxed)
                )
            })
            .on_thread_park(super::release_on_park)
            .enable_all()
            .build()
            .unwrap();
        let freed_on = rt.block_on(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            RELEASED.lock().unwrap().clear();
            // Connections closing on whichever workers run them.
            let closes: Vec<_> = (0..64)
                .map(|i| {
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(i % 8)).await;
                        super::note_freed();
                        this_thread()
                    })
                })
                .collect();
            let mut freed_on = HashSet::new();
            for close in closes {
                freed_on.extend(close.await.unwrap());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            freed_on
        });
        let released: HashSet<String> = RELEASED.lock().unwrap().iter().cloned().collect();
        assert!(!freed_on.is_empty());
        assert!(
            freed_on.is_subset(&released),
            "buffers freed on {freed_on:?}, handed back on {released:?}"
        );
    }
}
