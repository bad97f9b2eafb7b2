//! One run of the flit network on several threads (`--threads N`): the routers are cut
//! into contiguous blocks (rows of a mesh or torus), one partition per thread, and
//! every cycle runs in three phases separated by barriers:
//!
//! 1. every partition evaluates its due input VCs and runs its VC allocation;
//! 2. every partition steps its routers; what a router does to an input VC of another
//!    partition (a flit written into it, an evaluation of it) and the flits that reach
//!    an HCA wait in the partition's [`Outbox`];
//! 3. one thread applies the outboxes in partition order, then steps the HCAs (the
//!    serial phase, [`super::engine`]).
//!
//! Why the result is the same for every N (1 included): the evaluations due in a
//! cycle run in ascending VC order (`Hot::canonical`), so no outcome depends on the
//! order in which they were scheduled; scheduling keeps the earliest cycle asked for,
//! whatever the order of the asks; and what one router does in a cycle reaches another
//! router no earlier than the next cycle, except a flit written into a VC its owner
//! pops in the same cycle and a credit returning at once, which reach the same state
//! either way (see `Hot::forward`). The tests compare the JSON of runs on one and on
//! several threads.
//!
//! Sharing: the partitions write the network's arrays through raw pointers, each only
//! the records of its own routers and input VCs, except that a router writes the
//! `feeder` word of the downstream VC its packet holds in phase 1 (read by that VC's
//! owner only in phase 2) and reads downstream credit state in phase 1 (written by its
//! owner only in phase 2). The barriers order everything else.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::records::{Outbox, Tally};
use super::router::Hot;

/// A partition's own state: its wheel, router lists, scratch and outbox.
#[derive(Default)]
pub(super) struct Part {
    /// Input VCs owned: `vc_lo .. vc_lo + vc_len`.
    pub vc_lo: usize,
    pub vc_len: usize,
    pub wheel: Vec<Vec<u32>>,
    pub wheel_len: usize,
    pub arb_list: Vec<u32>,
    pub spare_list: Vec<u32>,
    pub req: Vec<u32>,
    pub req_src: Vec<u16>,
    pub req_in: Vec<u64>,
    pub va_list: Vec<u32>,
    pub va_allowed: Vec<u32>,
    pub va_touched: Vec<u32>,
    pub outbox: Outbox,
    /// The counters this cycle's phases changed (deltas from [`Part::start`]).
    pub tally: Tally,
}

/// The counters a partition starts a cycle with: high enough that decrements never
/// wrap, so the serial phase reads the change as a difference.
pub(super) const START: u64 = 1 << 62;

impl Part {
    /// Resets the counters before a cycle.
    pub fn start(&mut self) {
        self.tally.in_network = START;
        self.tally.outstanding = START;
        self.tally.moved = 0;
        self.tally.flit_hops = 0;
        self.tally.wheel_len = self.wheel_len;
    }
}

/// Something that builds a partition's router view: the network's arrays behind raw
/// pointers (see the module's notes on sharing).
pub(super) trait MakeHot: Sync {
    /// The view of partition `part` (its wheel, lists, scratch and outbox, the shared
    /// wheel `shared`).
    ///
    /// # Safety
    /// The caller keeps to the phase discipline of the module: no two threads write
    /// the same record, and the network is not otherwise used while views live.
    unsafe fn hot<'x>(&self, part: &'x mut Part, shared: &'x [Vec<u32>]) -> Hot<'x>;
}

/// What the cycle loop needs of a run on threads.
pub(super) struct Ctx<'p> {
    pub pool: &'p Pool,
    pub mk: &'p dyn MakeHot,
    /// The partitions (partition 0 is stepped by the loop's own thread) and the shared
    /// wheel.
    pub parts: *mut Part,
    pub shared: *const Vec<Vec<u32>>,
}

/// The threads' meeting points.
#[derive(Default)]
pub(super) struct Pool {
    threads: usize,
    /// Cycle generation to run (workers run each new one) and its cycle.
    go: AtomicU64,
    now: AtomicU32,
    /// Threads done with phase 1, and with phase 2.
    woken: AtomicUsize,
    stepped: AtomicUsize,
    stop: AtomicBool,
    /// A thread panicked: the others give up instead of waiting for it.
    dead: AtomicBool,
}

/// Spins, then yields, until `cond` holds; panics if another thread died.
fn wait(pool: &Pool, cond: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !cond() {
        if pool.dead.load(Ordering::Relaxed) {
            panic!("a thread of the parallel run panicked");
        }
        spins = spins.saturating_add(1);
        if spins < 2000 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Sets `dead` if its thread unwinds.
struct Watch<'p>(&'p Pool);

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.dead.store(true, Ordering::Relaxed);
        }
    }
}

impl Pool {
    pub fn new(threads: usize) -> Pool {
        Pool {
            threads,
            ..Pool::default()
        }
    }

    /// Phases 1 and 2 of cycle `now` of one partition, between the barriers.
    fn phases(&self, mk: &dyn MakeHot, part: &mut Part, shared: &[Vec<u32>], now: u32) {
        part.start();
        // SAFETY: phase 1 of this partition; see the module's notes.
        let mut h = unsafe { mk.hot(part, shared) };
        h.wake(now);
        h.allocate_vcs(now);
        let t = h.tally;
        drop(h);
        part.tally = t;
        self.woken.fetch_add(1, Ordering::AcqRel);
        wait(self, || self.woken.load(Ordering::Acquire) == self.threads);
        // SAFETY: phase 2 of this partition.
        let mut h = unsafe { mk.hot(part, shared) };
        h.tally = t;
        h.step_routers(now);
        let t = h.tally;
        drop(h);
        part.tally = t;
        part.wheel_len = t.wheel_len;
        self.stepped.fetch_add(1, Ordering::AcqRel);
    }

    /// The loop of worker thread `i` (partitions 1 and up; the calling thread runs
    /// partition 0 in [`Pool::cycle`]).
    ///
    /// # Safety
    /// `part` and `shared` point to live partition state and shared wheel for the
    /// whole run, and partition `i` is touched by this thread alone.
    pub unsafe fn worker(&self, mk: &dyn MakeHot, part: *mut Part, shared: *const Vec<Vec<u32>>) {
        let _watch = Watch(self);
        let mut seen = 0u64;
        loop {
            wait(self, || {
                self.stop.load(Ordering::Acquire) || self.go.load(Ordering::Acquire) > seen
            });
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            seen = self.go.load(Ordering::Acquire);
            let now = self.now.load(Ordering::Acquire);
            // SAFETY: see the function's contract; the serial phase does not touch
            // the partition until `stepped` counts this thread.
            let (part, shared) = unsafe { (&mut *part, &*shared) };
            self.phases(mk, part, shared, now);
        }
    }

    /// Phases 1 and 2 of cycle `now` on every thread, partition 0 on this one;
    /// returns when all are done.
    ///
    /// # Safety
    /// As [`Pool::worker`], for partition 0.
    pub unsafe fn cycle(
        &self,
        mk: &dyn MakeHot,
        part0: *mut Part,
        shared: *const Vec<Vec<u32>>,
        now: u32,
    ) {
        let _watch = Watch(self);
        self.woken.store(0, Ordering::Relaxed);
        self.stepped.store(0, Ordering::Relaxed);
        self.now.store(now, Ordering::Relaxed);
        self.go.fetch_add(1, Ordering::AcqRel);
        // SAFETY: the function's contract.
        let (part, shared) = unsafe { (&mut *part0, &*shared) };
        self.phases(mk, part, shared, now);
        wait(self, || {
            self.stepped.load(Ordering::Acquire) == self.threads
        });
    }

    /// Lets the workers return.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }
}
