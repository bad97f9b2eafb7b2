//! The discrete-event engine: integer picosecond time ([`Time`]), a future-event queue
//! with a deterministic tie-break, and a seeded random number generator.
//!
//! Events at the same instant are delivered in the order they were scheduled (each gets
//! a sequence number), so a run depends only on the scenario and the seed: the same
//! inputs give bit-identical results (DESIGN.md, "Determinism"). The engine is generic
//! over the event type; the models decide what an event means.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use qos_core::units::{Duration, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha12Rng;

/// An event waiting in the queue, ordered by (time, sequence number).
#[derive(Debug)]
struct Entry<E> {
    at: Time,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// The simulation clock and future-event list.
#[derive(Debug)]
pub struct EventQueue<E> {
    now: Time,
    seq: u64,
    heap: BinaryHeap<Reverse<Entry<E>>>,
    delivered: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        EventQueue {
            now: Time::ZERO,
            seq: 0,
            heap: BinaryHeap::new(),
            delivered: 0,
        }
    }
    /// The current simulated time (the time of the last event popped).
    pub fn now(&self) -> Time {
        self.now
    }
    /// Schedules `event` at `at`; an instant in the past is treated as now.
    pub fn schedule_at(&mut self, at: Time, event: E) {
        let at = at.max(self.now);
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            event,
        }));
    }
    /// Schedules `event` after `delay`.
    pub fn schedule_in(&mut self, delay: Duration, event: E) {
        let at = self.now.saturating_add(delay);
        self.schedule_at(at, event);
    }
    /// Pops the next event and advances the clock to it.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let Reverse(e) = self.heap.pop()?;
        self.now = e.at;
        self.delivered += 1;
        Some((e.at, e.event))
    }
    /// The time of the next event, if any.
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }
    /// Events still queued.
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
    /// Events delivered so far (a cost measure for benchmarks).
    pub fn delivered(&self) -> u64 {
        self.delivered
    }
}

/// Where a model component puts its own future events: an [`EventQueue`] of its event
/// type, or a view of a bigger model's queue that wraps them.
pub trait Schedule<E> {
    /// Schedules `event` at `at` (an instant in the past means now).
    fn schedule_at(&mut self, at: Time, event: E);
}

impl<E> Schedule<E> for EventQueue<E> {
    fn schedule_at(&mut self, at: Time, event: E) {
        EventQueue::schedule_at(self, at, event);
    }
}

/// The simulation's random number generator: ChaCha12 seeded from a `u64`, so a seed
/// names one exact stream on every platform.
#[derive(Debug, Clone)]
pub struct SimRng(ChaCha12Rng);

impl SimRng {
    /// The stream for `seed`.
    pub fn new(seed: u64) -> Self {
        SimRng(ChaCha12Rng::seed_from_u64(seed))
    }
    /// An independent stream derived from this seed and a stream number (one per model
    /// component, so adding a component does not shift the others' draws).
    pub fn stream(seed: u64, stream: u64) -> Self {
        let mut r = ChaCha12Rng::seed_from_u64(seed);
        r.set_stream(stream);
        SimRng(r)
    }
    /// A uniform draw in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.0.gen::<f64>()
    }
    /// A uniform integer in `[0, n)`; zero when `n` is zero.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.0.gen_range(0..n)
        }
    }
    /// A duration uniformly drawn in `[0, max]`, in whole picoseconds.
    pub fn jitter(&mut self, max: Duration) -> Duration {
        Duration::from_ps(self.below(max.as_ps().saturating_add(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_in_time_order_and_fifo_within_an_instant() {
        let mut q = EventQueue::new();
        q.schedule_at(Time::from_ps(30), "c");
        q.schedule_at(Time::from_ps(10), "a1");
        q.schedule_at(Time::from_ps(10), "a2");
        q.schedule_at(Time::from_ps(20), "b");
        q.schedule_at(Time::from_ps(10), "a3");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["a1", "a2", "a3", "b", "c"]);
        assert_eq!(q.now(), Time::from_ps(30));
        assert_eq!(q.delivered(), 5);
    }

    #[test]
    fn scheduling_in_the_past_means_now() {
        let mut q = EventQueue::new();
        q.schedule_at(Time::from_ps(50), 1);
        q.pop();
        q.schedule_at(Time::from_ps(5), 2);
        assert_eq!(q.pop(), Some((Time::from_ps(50), 2)));
    }

    #[test]
    fn same_seed_same_stream_and_streams_differ() {
        let a: Vec<u64> = (0..5).map(|_| SimRng::new(7).below(1000)).collect();
        let mut r1 = SimRng::new(7);
        let mut r2 = SimRng::new(7);
        let s1: Vec<u64> = (0..50).map(|_| r1.below(1 << 40)).collect();
        let s2: Vec<u64> = (0..50).map(|_| r2.below(1 << 40)).collect();
        assert_eq!(s1, s2);
        assert!(a.iter().all(|&v| v == a[0]));
        let mut x = SimRng::stream(7, 1);
        let mut y = SimRng::stream(7, 2);
        let sx: Vec<u64> = (0..20).map(|_| x.below(1 << 40)).collect();
        let sy: Vec<u64> = (0..20).map(|_| y.below(1 << 40)).collect();
        assert_ne!(sx, sy);
    }
}
