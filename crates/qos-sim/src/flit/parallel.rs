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
//! Why the result is the same for every N, and the same as without threads: the only
//! evaluations of a cycle whose order could matter, headers taking free lanes of one
//! router's outputs, take them oldest packet first, ties in an order drawn from the
//! cycle and the router (`Hot::allocate_heads`; BookSim2's separable allocator is
//! order-free by itself), so
//! no outcome depends on the order in which evaluations were scheduled; scheduling
//! keeps the earliest cycle asked for, whatever the order of the asks; and what one
//! router does in a cycle reaches another
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

use super::records::{Outbox, Requests, Tally};

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
    pub reqs: Box<Requests>,
    pub va_list: Vec<u32>,
    pub va_allowed: Vec<u32>,
    pub va_touched: Vec<u32>,
    pub heads: Vec<u128>,
    pub outbox: Outbox,
    /// Output ports of this partition's routers whose buffers it filled first this
    /// cycle (the serial phase lists them for the links).
    pub ob_ports: Vec<u32>,
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

/// Where the time of a run on threads went, measured by its calling thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ThreadsProfile {
    /// Cycles run on threads (idle cycles jumped over are not run).
    pub cycles: u64,
    /// Wall-clock nanoseconds in phases 1 and 2 (every thread, barriers included).
    pub parallel_ns: u64,
    /// Wall-clock nanoseconds in the serial phase (outboxes, HCAs).
    pub serial_ns: u64,
    /// Flits and evaluations that crossed a partition boundary.
    pub crossings: u64,
}

/// What the cycle loop needs of a run on threads.
pub(super) struct Ctx<'p> {
    pub pool: &'p Pool,
    pub work: &'p dyn Work,
}

/// The work of a cycle on threads: phases 1 and 2 of partition `i`.
pub(super) trait Work: Sync {
    /// Phase 1 (evaluations, VC allocation) of partition `i` at cycle `now`.
    ///
    /// # Safety
    /// Called by one thread per partition, between the barriers of [`Pool`].
    unsafe fn phase1(&self, i: usize, now: u32);
    /// Phase 2 (the routers' steps) of partition `i` at cycle `now`.
    ///
    /// # Safety
    /// As `phase1`.
    unsafe fn phase2(&self, i: usize, now: u32);
}

/// No work: what the barriers alone cost ([`sync_cost`]).
struct Idle;

impl Work for Idle {
    unsafe fn phase1(&self, _: usize, _: u32) {}
    unsafe fn phase2(&self, _: usize, _: u32) {}
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
        // Spin briefly (the other threads are usually a few hundred nanoseconds
        // behind), then give the core away: on a loaded machine a spinning thread
        // would hold up the very thread it waits for.
        if spins < 200 {
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

    /// Phases 1 and 2 of cycle `now` of partition `i`, with the barrier between them.
    fn phases(&self, work: &dyn Work, i: usize, now: u32) {
        // SAFETY: this thread is partition i's alone, inside the barriers.
        unsafe { work.phase1(i, now) };
        self.woken.fetch_add(1, Ordering::AcqRel);
        wait(self, || self.woken.load(Ordering::Acquire) == self.threads);
        // SAFETY: as above, after every partition's phase 1.
        unsafe { work.phase2(i, now) };
        self.stepped.fetch_add(1, Ordering::AcqRel);
    }

    /// The loop of worker thread `i` (partitions 1 and up; the calling thread runs
    /// partition 0 in [`Pool::cycle`]) until [`Pool::stop`].
    pub fn worker(&self, work: &dyn Work, i: usize) {
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
            self.phases(work, i, self.now.load(Ordering::Acquire));
        }
    }

    /// Phases 1 and 2 of cycle `now` on every thread, partition 0 on this one;
    /// returns when all are done.
    pub fn cycle(&self, work: &dyn Work, now: u32) {
        let _watch = Watch(self);
        self.woken.store(0, Ordering::Relaxed);
        self.stepped.store(0, Ordering::Relaxed);
        self.now.store(now, Ordering::Relaxed);
        self.go.fetch_add(1, Ordering::AcqRel);
        self.phases(work, 0, now);
        wait(self, || {
            self.stepped.load(Ordering::Acquire) == self.threads
        });
    }

    /// Lets the workers return.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// What one cycle of a run on `threads` threads costs in synchronisation alone: the
/// mean wall-clock nanoseconds per cycle of `cycles` cycles with no work (the start
/// of the cycle and its two barriers), measured here.
pub fn sync_cost(threads: usize, cycles: u32) -> f64 {
    let pool = Pool::new(threads.max(1));
    let t = std::time::Instant::now();
    std::thread::scope(|s| {
        for i in 1..pool.threads {
            let pool = &pool;
            s.spawn(move || pool.worker(&Idle, i));
        }
        for now in 0..cycles {
            pool.cycle(&Idle, now);
        }
        pool.stop();
    });
    t.elapsed().as_nanos() as f64 / cycles.max(1) as f64
}
