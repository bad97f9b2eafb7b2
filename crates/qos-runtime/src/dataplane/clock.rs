//! The agent's real-time clock (the LANai RTC of thesis §4.2.1, here CLOCK_MONOTONIC in
//! picoseconds as qos-core's `Time`) and deadline-based waiting.
//!
//! The OS cannot sleep for single microseconds, so the data plane never sleeps per
//! packet: it dispatches every packet whose NDT has passed in one batch, then sleeps
//! until shortly before the next NDT (with 1 µs timer slack) or spins when that is
//! closer than [`SPIN_BELOW`]. Rate control's NDT += IDT bookkeeping then makes up for
//! any lateness, so rates hold over 10 ms windows.

use std::num::NonZeroU64;
use std::os::fd::BorrowedFd;
use std::time::Instant;

use rustix::event::{poll, PollFd, PollFlags, Timespec};

use qos_core::units::{Duration, Time};

/// Waits shorter than this are spun (yielding) rather than slept.
pub const SPIN_BELOW: Duration = Duration::from_us(60);

/// Monotonic clock as qos-core `Time`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    pub fn new() -> Self {
        // Ask for 1 µs timer slack so sleeps end close to their deadline (best effort:
        // the default slack only makes sleeps end up to 50 µs later).
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1000));
        Clock {
            base: Instant::now(),
        }
    }
    pub fn now(&self) -> Time {
        Time::from_ps(self.base.elapsed().as_nanos() as u64 * 1000)
    }
}

/// Waits until one of `fds` is readable or `deadline` (if any) is reached, whichever
/// comes first. Short waits spin; returns at once if `deadline` has passed.
pub fn wait(clock: &Clock, fds: &[BorrowedFd<'_>], deadline: Option<Time>) {
    let now = clock.now();
    let timeout = match deadline {
        Some(d) if d <= now => return,
        Some(d) => Some(d.saturating_since(now)),
        None => None,
    };
    if let Some(t) = timeout {
        if t < SPIN_BELOW {
            while clock.now() < deadline.unwrap_or(Time::ZERO) {
                std::hint::spin_loop();
            }
            return;
        }
    }
    let mut pfds = poll_set(fds);
    let ts = timeout.map(|t| {
        // Wake a little early and spin the rest.
        let ns = t.as_ns().saturating_sub(SPIN_BELOW.as_ns() / 2);
        Timespec {
            tv_sec: (ns / 1_000_000_000) as i64,
            tv_nsec: (ns % 1_000_000_000) as i64,
        }
    });
    // An interrupted or failed wait only ends the sleep early: the loop looks again.
    let _ = poll(&mut pfds, ts.as_ref());
}

/// Polls for work until `until`: returns true as soon as `work()` says so or one of
/// `fds` is readable, false when the time is up. A bounded spin before sleeping saves
/// the wake-up (several µs on a busy host) when the next descriptor or packet comes
/// soon; it costs CPU only while traffic is flowing, never when the agent is idle.
pub fn spin_for_work(
    clock: &Clock,
    fds: &[BorrowedFd<'_>],
    until: Time,
    work: impl Fn() -> bool,
) -> bool {
    let mut pfds = poll_set(fds);
    let zero = Timespec::default();
    loop {
        if work() {
            return true;
        }
        if matches!(poll(&mut pfds, Some(&zero)), Ok(n) if n > 0) {
            return true;
        }
        if clock.now() >= until {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// A `poll` set waiting for `fds` to become readable.
fn poll_set<'a>(fds: &[BorrowedFd<'a>]) -> Vec<PollFd<'a>> {
    fds.iter()
        .map(|fd| PollFd::from_borrowed_fd(*fd, PollFlags::IN))
        .collect()
}
