//! BookSim2's sample periods and stability rule (`TrafficManager::_SingleSim` in
//! BookSim2's `trafficmanager.cpp`), as a state machine the engine's run loop drives
//! at the end of every sample period and every 1,000 cycles of the drain.
//!
//! A run is cut into sample periods of `phases.sample_period` cycles from cycle 0 (the
//! ends of the warm-up and of the measurement are period ends too when they fall
//! between two). At the end of every period:
//! - **Stability** (`latency_thres`): for each class, the mean over the latencies of
//!   the packets delivered since the statistics were last cleared (every packet during
//!   the warm-up, measured packets after it) and the ages of all its flits in flight
//!   (a packet is in flight from the moment it reaches the front of its source queue)
//!   is compared with `phases.abort_latency`; above it, the run stops as unstable.
//! - **Warm-up**: a fixed warm-up ends after `phases.warmup` cycles (BookSim2's
//!   `warmup_periods`); with `phases.warmup_converge` it ends at the first period whose
//!   mean latency and accepted rate changed by at most `warmup_thres` and
//!   `acc_warmup_thres` (relative) from the period before (BookSim2's
//!   `warmup_periods = 0`). Statistics are cleared at the start of every other warm-up
//!   period and when the measurement starts.
//! - **Measurement**: it ends after three successive periods whose latency and
//!   accepted rate changed by at most `stopping_thres` and `acc_stopping_thres`, or when
//!   `warmup + measure` cycles have run (BookSim2's `max_samples`; with
//!   `phases.stop_converged = false`, always the latter); a warm-up that has
//!   not converged by then makes the run unstable ("too many sample periods needed to
//!   converge").
//! - **Drain**: every 1,000 cycles the stability test is repeated over the measured
//!   packets delivered and every flit in flight; and once the measured packets have
//!   all arrived, their mean latency is compared with `abort_latency` one last time
//!   (BookSim2 has no check there, so a run whose drain ends between two checks could
//!   report a mean above the threshold as stable).

use super::config::Phases;
use super::stats::{Collector, StopReason};

/// Cycles between two stability checks of the drain (BookSim2's).
pub(super) const DRAIN_CHECK: u64 = 1_000;

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Warming up: nothing is measured.
    Warming,
    /// Measuring: packets created now are measured.
    Running,
    /// Waiting for the measured packets.
    Draining,
}

/// What the run does after a period ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Step {
    /// Go on in the same phase.
    Go,
    /// The measurement starts now.
    Measure,
    /// The measurement ends now: drain.
    Drain,
    /// Stop: the run is unstable (and the class mean that said so, when a latency did).
    Unstable(StopReason, f64),
}

/// BookSim2's `_SingleSim` as a state machine.
#[derive(Debug, Clone)]
pub(super) struct Sampler {
    period: u64,
    /// End of a fixed warm-up; `None` while a converging warm-up goes on.
    warmup_end: Option<u64>,
    /// End of the last sample period (warm-up and measurement together).
    last: u64,
    thres: Option<f64>,
    warm: (f64, f64),
    stop: (f64, f64),
    stop_converged: bool,
    pub phase: Phase,
    /// Periods ended so far (BookSim2's `total_phases`).
    periods: u64,
    converged: u32,
    prev: Vec<(f64, f64)>,
    clear_last: bool,
    /// Cycle the statistics were last cleared (BookSim2's `_reset_time`).
    pub reset_at: u64,
    /// The next cycle whose start ends a period (or a drain step).
    pub next: u64,
    nodes: f64,
}

impl Sampler {
    /// The sampler of `phases` for `classes` classes over `nodes` nodes.
    pub fn new(phases: &Phases, classes: usize, nodes: u32) -> Sampler {
        let last = phases.warmup.saturating_add(phases.measure);
        let mut s = Sampler {
            period: phases.sample_period.max(1),
            warmup_end: (!phases.warmup_converge).then_some(phases.warmup),
            last,
            thres: phases.abort_latency,
            warm: (phases.warmup_thres, phases.acc_warmup_thres),
            stop: (phases.stopping_thres, phases.acc_stopping_thres),
            stop_converged: phases.stop_converged,
            phase: Phase::Warming,
            periods: 0,
            converged: 0,
            prev: vec![(0.0, 0.0); classes],
            clear_last: false,
            reset_at: 0,
            next: 0,
            nodes: nodes.max(1) as f64,
        };
        if s.warmup_end == Some(0) {
            s.phase = Phase::Running;
        }
        s.next = s.boundary_after(0);
        s
    }

    /// The first period end after cycle `t`.
    fn boundary_after(&self, t: u64) -> u64 {
        let mut b = (t / self.period + 1).saturating_mul(self.period);
        if let Some(w) = self.warmup_end {
            if w > t {
                b = b.min(w);
            }
        }
        b.min(self.last.max(t + 1))
    }

    /// Whether the period starting at cycle `t` (the run's first, or one just begun)
    /// starts with cleared statistics: every other warm-up period, and the first
    /// measured one.
    pub fn clears_at_start(&mut self) -> bool {
        let c = self.clear_last || (self.phase == Phase::Warming && self.periods.is_multiple_of(2));
        self.clear_last = false;
        c
    }

    /// The period ending at the start of cycle `now` is over: BookSim2's checks, and
    /// what to do next. `stats` holds what was delivered since the last clear.
    pub fn end_period(&mut self, now: u64, stats: &Collector) -> Step {
        let mut lat_change = false;
        let mut acc_change = false;
        let span = now.saturating_sub(self.reset_at).max(1) as f64;
        for c in 0..self.prev.len() {
            if let Some(t) = self.thres {
                let m = stats.abort_mean(c, now);
                if m > t {
                    self.phase = Phase::Draining;
                    return Step::Unstable(StopReason::LatencyThres, m);
                }
            }
            let cur_lat = stats.recent_lat[c] as f64 / stats.recent_n[c] as f64;
            let cur_acc = stats.recent_acc[c] as f64 / span / self.nodes;
            let (pl, pa) = self.prev[c];
            // As BookSim2: a change is relative to the current value, and a
            // comparison with NaN (nothing delivered) fails.
            let dl = ((cur_lat - pl) / cur_lat).abs();
            let da = ((cur_acc - pa) / cur_acc).abs();
            self.prev[c] = (cur_lat, cur_acc);
            let (tl, ta) = if self.phase == Phase::Warming {
                self.warm
            } else {
                self.stop
            };
            lat_change |= tl >= 0.0 && dl > tl;
            acc_change |= ta >= 0.0 && da > ta;
        }
        let steady = !lat_change && !acc_change;
        let mut step = Step::Go;
        match self.phase {
            Phase::Warming => {
                let warmed = match self.warmup_end {
                    Some(w) => now >= w,
                    None => steady,
                };
                if warmed {
                    self.clear_last = true;
                    self.phase = Phase::Running;
                    self.warmup_end = Some(now);
                    step = Step::Measure;
                }
            }
            Phase::Running => {
                if steady && self.stop_converged {
                    self.converged += 1;
                } else {
                    self.converged = 0;
                }
            }
            Phase::Draining => {}
        }
        self.periods += 1;
        let more = now < self.last && (self.phase != Phase::Running || self.converged < 3);
        if !more {
            if self.phase == Phase::Running {
                self.phase = Phase::Draining;
                self.next = now.saturating_add(DRAIN_CHECK);
                // (A warm-up that converged in the last period leaves an empty
                // measurement, as in BookSim2.)
                return Step::Drain;
            }
            self.phase = Phase::Draining;
            return Step::Unstable(StopReason::NotWarmedUp, 0.0);
        }
        self.next = self.boundary_after(now);
        step
    }

    /// A drain step ends at the start of cycle `now`: the stability test over the
    /// measured packets delivered and every flit in flight.
    pub fn drain_check(&mut self, now: u64, stats: &Collector) -> Option<f64> {
        self.next = now.saturating_add(DRAIN_CHECK);
        let t = self.thres?;
        (0..self.prev.len())
            .map(|c| stats.abort_mean(c, now))
            .find(|&m| m > t)
    }

    /// The measured packets have all arrived: the last check, on their mean latency.
    pub fn final_check(&self, stats: &Collector) -> Option<f64> {
        let t = self.thres?;
        (0..self.prev.len())
            .map(|c| stats.recent_lat[c] as f64 / stats.recent_n[c].max(1) as f64)
            .find(|&m| m > t)
    }
}
