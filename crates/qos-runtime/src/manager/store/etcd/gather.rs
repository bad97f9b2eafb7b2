//! The etcd writer's gathering rule: how long a free writer holds back the decisions
//! waiting before it sends them as one transaction (group commit, see [`super::writer`]).
//!
//! Clients that all got their answers from one commit send their next requests soon
//! after, but one after the other: the manager reads and admits them in turn, so the
//! last of sixteen comes about a millisecond after the first on a loaded 2-core
//! machine. A writer that sent as soon as anything waited would send the first of them
//! alone, and the rest would wait for that transaction: transactions would alternate
//! between one decision and all the others, and etcd would pay for twice as many. So at
//! each commit the writer *wants* the decisions waiting then plus those the commit
//! answered (their requesters are the ones likely to ask again at once), and a free
//! writer waits until that many wait — while they keep coming: it sends once none has
//! come for `wait`, and at the latest `HOLD_MAX_WAITS × wait` after the oldest; never
//! once what waits fills a transaction. Timing the hold from the latest arrival, not
//! from the oldest, lets a transaction take every returning client however long their
//! turn-around spreads, and still sends at once when they stop coming. A lone client
//! never waits: its last transaction carried one decision. `wait` zero turns the rule
//! off (`manager --etcd-gather 0s`).
use std::time::{Duration, Instant};

/// The longest hold, in `wait`s from the oldest decision waiting.
pub(super) const HOLD_MAX_WAITS: u32 = 4;

/// The rule's state for one writer.
#[derive(Debug, Clone)]
pub(super) struct Gather {
    wait: Duration,
    /// Decisions the writer waits for before it sends (0: none).
    want: usize,
    /// When the oldest decision waiting came, if any waits.
    oldest: Option<Instant>,
    /// When the latest decision waiting came, if any waits.
    latest: Option<Instant>,
    /// Decisions waiting at the last note.
    seen: usize,
}

impl Gather {
    /// The rule with the longest hold `wait` (zero: never hold).
    pub fn new(wait: Duration) -> Gather {
        Gather {
            wait,
            want: 0,
            oldest: None,
            latest: None,
            seen: 0,
        }
    }

    /// Notes how many decisions wait at `now` (call on every turn of the writer's
    /// loop, after taking in what arrived).
    pub fn note(&mut self, now: Instant, waiting: usize) {
        if waiting == 0 {
            self.oldest = None;
            self.latest = None;
        } else {
            self.oldest.get_or_insert(now);
            if waiting > self.seen || self.latest.is_none() {
                self.latest = Some(now);
            }
        }
        self.seen = waiting;
    }

    /// Until when a free writer holds back the `waiting` decisions (`ops` writes
    /// together, `room` writes fit in one transaction); `None`: send them now.
    pub fn hold(&self, now: Instant, waiting: usize, ops: usize, room: usize) -> Option<Instant> {
        if self.wait.is_zero() || waiting == 0 || waiting >= self.want || ops >= room {
            return None;
        }
        let quiet = self.latest.unwrap_or(now) + self.wait;
        let cap = self.oldest.unwrap_or(now) + self.wait * HOLD_MAX_WAITS;
        let until = quiet.min(cap);
        (now < until).then_some(until)
    }

    /// The hold ran out without the decisions wanted: send what waits.
    pub fn expired(&mut self) {
        self.want = 0;
    }

    /// A transaction was sent with what waited.
    pub fn sent(&mut self) {
        self.want = 0;
        self.oldest = None;
        self.latest = None;
        self.seen = 0;
    }

    /// A commit answered `answered` decisions while `waiting` waited.
    pub fn committed(&mut self, waiting: usize, answered: usize) {
        self.want = waiting + answered;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A closed loop over a fake store, driven through the rule as the writer drives
    /// it (one transaction in flight): `clients` clients each ask, get their answer
    /// when the transaction carrying their decision commits (`commit` after it was
    /// sent), and ask again `think + i × stagger` later (client `i`). Returns the
    /// decisions each transaction carried, and the decisions per second.
    fn closed_loop(
        gather: Duration,
        clients: usize,
        commit: Duration,
        think: Duration,
        stagger: Duration,
        transactions: usize,
    ) -> (Vec<usize>, f64) {
        let t0 = Instant::now();
        let mut rule = Gather::new(gather);
        let room = 127;
        // When each client's next request reaches the writer (None: waiting for its
        // answer).
        let mut next: Vec<Option<Instant>> = (0..clients)
            .map(|i| Some(t0 + stagger * i as u32))
            .collect();
        let mut waiting: Vec<usize> = Vec::new();
        // The transaction in flight: its clients and when it commits.
        let mut inflight: Option<(Vec<usize>, Instant)> = None;
        let mut now = t0;
        let mut sizes = Vec::new();
        let mut decisions = 0usize;
        while sizes.len() < transactions {
            // A free writer reads its queue as requests come; one with a transaction
            // in flight reads it when that commits (one in flight: no room for more).
            arrive(&mut next, &mut waiting, now);
            rule.note(now, waiting.len());
            if inflight.is_none() {
                let arrival = next.iter().flatten().min().copied();
                if waiting.is_empty() {
                    now = arrival.expect("a client asks");
                    continue;
                }
                if let Some(until) = rule.hold(now, waiting.len(), waiting.len(), room) {
                    match arrival {
                        Some(a) if a < until => now = a,
                        _ => {
                            now = until;
                            rule.expired();
                        }
                    }
                    continue;
                }
                let jobs = std::mem::take(&mut waiting);
                sizes.push(jobs.len());
                inflight = Some((jobs, now + commit));
                rule.sent();
            }
            let (jobs, done) = inflight.take().expect("in flight");
            now = done;
            arrive(&mut next, &mut waiting, now);
            rule.committed(waiting.len(), jobs.len());
            decisions += jobs.len();
            for i in jobs {
                next[i] = Some(now + think + stagger * i as u32);
            }
        }
        let secs = (now - t0).as_secs_f64();
        (sizes, decisions as f64 / secs)
    }

    /// Requests that reached the writer by `now` join the queue.
    fn arrive(next: &mut [Option<Instant>], waiting: &mut Vec<usize>, now: Instant) {
        for (i, at) in next.iter_mut().enumerate() {
            if at.is_some_and(|t| t <= now) {
                waiting.push(i);
                *at = None;
            }
        }
    }

    fn mean(v: &[usize]) -> f64 {
        v.iter().sum::<usize>() as f64 / v.len() as f64
    }

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn returning_clients_are_gathered_into_one_transaction_instead_of_alternating() {
        // 16 clients, a 1.5 ms commit, answers turned into new requests 100..250 µs
        // later (10 µs apart): the first returning client finds the writer free.
        let run = |gather| closed_loop(gather, 16, 1500 * US, 100 * US, 10 * US, 400);
        let (with, rate_with) = run(500 * US);
        let (without, rate_without) = run(Duration::ZERO);
        let (m_with, m_without) = (mean(&with[20..]), mean(&without[20..]));
        eprintln!(
            "with the rule {m_with:.2} decisions per transaction, {rate_with:.0}/s; \
             without {m_without:.2}, {rate_without:.0}/s"
        );
        // With the rule every transaction after the start carries all 16.
        assert!(
            m_with >= 15.5,
            "gathered: {m_with:.2} per transaction {:?}",
            &with[..24]
        );
        // Without it, they alternate: one decision, then the fifteen that waited.
        assert!(
            m_without <= 9.0,
            "without the rule: {m_without:.2} per transaction {:?}",
            &without[..24]
        );
        // And the held 150 µs costs less than the extra commit it saves.
        assert!(
            rate_with > 1.3 * rate_without,
            "{rate_with:.0} against {rate_without:.0} decisions/s"
        );
    }

    #[test]
    fn returning_clients_spread_over_more_than_the_wait_still_share_one_transaction() {
        // 16 clients coming back one after the other 60 µs apart (the manager admits
        // them in turn): the last comes 900 µs after the first, longer than the 500 µs
        // wait. Timed from the latest arrival the hold takes them all; timed from the
        // oldest it would send the first nine and leave the rest for the next commit.
        let (sizes, rate) = closed_loop(500 * US, 16, 1500 * US, 100 * US, 60 * US, 400);
        let m = mean(&sizes[20..]);
        eprintln!("spread returns: {m:.2} decisions per transaction, {rate:.0}/s");
        assert!(
            m >= 15.5,
            "gathered: {m:.2} per transaction {:?}",
            &sizes[..24]
        );
    }

    #[test]
    fn the_hold_ends_after_a_quiet_wait_or_at_its_cap() {
        let t0 = Instant::now();
        let mut g = Gather::new(500 * US);
        g.committed(0, 16);
        // Decisions keep coming every 300 µs: each pushes the end of the hold on ...
        for i in 0..6u32 {
            let now = t0 + 300 * US * i;
            g.note(now, i as usize + 1);
            let until = g.hold(now, i as usize + 1, i as usize + 1, 127);
            let expected = (now + 500 * US).min(t0 + 500 * US * HOLD_MAX_WAITS);
            assert_eq!(until, (now < expected).then_some(expected), "arrival {i}");
        }
        // ... but never past the cap, 4 waits after the oldest.
        assert_eq!(g.hold(t0 + 2000 * US, 6, 6, 127), None);
        // Nothing new for a wait: the hold ends then, whatever is still wanted.
        let mut g = Gather::new(500 * US);
        g.committed(0, 16);
        g.note(t0, 3);
        g.note(t0 + 200 * US, 3);
        assert_eq!(g.hold(t0 + 200 * US, 3, 3, 127), Some(t0 + 500 * US));
    }

    #[test]
    fn a_lone_client_never_waits_and_the_hold_is_bounded() {
        // One client: every transaction carries one, and the rule never holds it (the
        // rate is one decision per commit + think time).
        let (sizes, rate) = closed_loop(500 * US, 1, 1000 * US, 100 * US, US, 50);
        assert!(sizes.iter().all(|&n| n == 1));
        let best = 1.0 / 1100e-6;
        assert!(rate > 0.99 * best, "{rate:.0} against {best:.0}/s");
        // A writer wanting 4 with 1 waiting holds until the oldest's wait ends, then
        // sends; nothing is held once a transaction's worth waits.
        let t0 = Instant::now();
        let mut g = Gather::new(500 * US);
        g.committed(2, 2);
        g.note(t0, 1);
        assert_eq!(g.hold(t0 + 100 * US, 1, 1, 127), Some(t0 + 500 * US));
        assert_eq!(g.hold(t0 + 500 * US, 1, 1, 127), None);
        assert_eq!(g.hold(t0, 3, 127, 127), None);
        assert_eq!(g.hold(t0, 4, 4, 127), None);
        g.sent();
        assert_eq!(
            g.hold(t0, 1, 1, 127),
            None,
            "a sent transaction resets the want"
        );
        assert_eq!(Gather::new(Duration::ZERO).hold(t0, 1, 1, 127), None);
    }
}
