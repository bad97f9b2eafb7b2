//! The LCP's polling loop (Nagar §3.2, "Event Notification"): the LANai visits its
//! devices in a fixed circular order, spending `check` on each visit, and handles an
//! event only when its visit comes round — "there could be a gap between the event
//! occurrence and when the LANai responds to it (depending on how busy the LANai is)".
//!
//! While the LCP spins with nothing to do, no simulation events are spent on the loop:
//! [`PollLoop::next`] computes exactly which visit first finds an event, from where
//! and when the spinning began.

use qos_core::units::{Duration, Time};

/// A circular polling loop over `N` devices.
#[derive(Debug, Clone)]
pub(crate) struct PollLoop<const N: usize> {
    check: Duration,
    /// Spinning since this time, about to visit `pos`.
    since: Time,
    pos: usize,
    /// Per device: from when its oldest unhandled event is visible (None: none).
    ready: [Option<Time>; N],
}

impl<const N: usize> PollLoop<N> {
    /// A loop spending `check` per device visit, at device 0 from time zero.
    pub fn new(check: Duration) -> Self {
        PollLoop {
            check,
            since: Time::ZERO,
            pos: 0,
            ready: [None; N],
        }
    }

    /// Device `d`'s oldest unhandled event is visible from `at` (None: it has none).
    pub fn set_ready(&mut self, d: usize, at: Option<Time>) {
        self.ready[d] = at;
    }

    /// The LCP finished handling an event of device `d` at `now`: the loop goes on
    /// with the next device.
    pub fn resume_after(&mut self, d: usize, now: Time) {
        self.since = now;
        self.pos = (d + 1) % N;
    }

    /// The first visit that finds an event: (device, when its check is over and the
    /// handler starts). None when no device has an event.
    pub fn next(&self) -> Option<(usize, Time)> {
        let round = self.check.as_ps() * N as u64;
        (0..N)
            .filter_map(|d| {
                let r = self.ready[d]?;
                let k = ((d + N - self.pos) % N) as u64;
                let first = self.since + Duration::from_ps(self.check.as_ps() * k);
                let visit = if first >= r {
                    first
                } else if round == 0 {
                    r
                } else {
                    let rounds = (r - first).as_ps().div_ceil(round);
                    first + Duration::from_ps(rounds * round)
                };
                Some((visit, k, d))
            })
            .min()
            .map(|(visit, _, d)| (d, visit + self.check))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> Time {
        Time::ZERO + Duration::from_ns(ns)
    }

    #[test]
    fn an_event_waits_for_its_devices_visit() {
        // Four devices, 100 ns per visit, spinning from t = 0 at device 0: device d is
        // visited at 100·d + 400·m.
        let mut l = PollLoop::<4>::new(Duration::from_ns(100));
        assert_eq!(l.next(), None);
        // Device 2 ready at 250 ns: the visit at 200 misses it, the one at 600 finds
        // it; the handler starts when that check is over, at 700.
        l.set_ready(2, Some(t(250)));
        assert_eq!(l.next(), Some((2, t(700))));
        // Device 3 ready at 250 too: visited at 300, first.
        l.set_ready(3, Some(t(250)));
        assert_eq!(l.next(), Some((3, t(400))));
        // After handling it until 1000, the loop goes on at device 0: device 2 is
        // visited at 1000 + 200.
        l.set_ready(3, None);
        l.resume_after(3, t(1000));
        assert_eq!(l.next(), Some((2, t(1300))));
    }

    #[test]
    fn a_free_loop_notices_at_once() {
        let mut l = PollLoop::<2>::new(Duration::ZERO);
        l.set_ready(1, Some(t(70)));
        assert_eq!(l.next(), Some((1, t(70))));
        l.set_ready(0, Some(t(70)));
        assert_eq!(l.next(), Some((0, t(70))));
    }
}
