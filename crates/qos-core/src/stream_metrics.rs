//! Quality measures of a real-time stream at its receiver, as the papers define them:
//!
//! - **Deadline missing probability and time** (Yum et al. §6.2): frames of a 30 frame/s
//!   video have deadlines 33.3 ms apart; "the deadline for each frame is determined by
//!   adding 33.3 ms to the previous deadline … if a previous frame missed its deadline, a
//!   new deadline is set by adding 33.3 ms to the arrival time of the previous frame". DMP
//!   is the fraction of delivered frames that missed, DMT the mean lateness of those.
//!   The paper does not say where the first deadline lies ([`Anchor`]): by default one
//!   frame time after the first frame was generated (a frame is due before the next one
//!   is produced); the other end of that choice is the first frame's own arrival, which
//!   leaves no slack at all, so that every later microsecond of jitter is a miss.
//! - **Jitter fraction θ** (Nagar et al. §4): a message received more than the negotiated
//!   inter-arrival time after the previous one has a jitter of the difference; θ is the
//!   mean jitter over all messages divided by the negotiated inter-arrival time. The
//!   fraction of messages with any jitter is reported beside it. For a variable-bit-rate
//!   channel, whose source does not emit at the negotiated spacing, [`jitter_against`]
//!   counts the inter-receipt time beyond the inter-*emission* time (the paper does not
//!   say how it measured its VBR jitter; for a CBR source both are the same).
//!
//! Time is an argument (arrival times in the caller's clock, simulated or real).

use serde::{Deserialize, Serialize};

use crate::units::{Duration, Time};

/// DMP and DMT of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Deadlines {
    /// Frames delivered.
    pub frames: u64,
    /// Frames that arrived after their deadline.
    pub missed: u64,
    /// Sum of the lateness of missed frames.
    pub late_total: Duration,
}

impl Deadlines {
    /// Deadline missing probability: missed / delivered (0 with no frames).
    pub fn dmp(&self) -> f64 {
        if self.frames == 0 {
            0.0
        } else {
            self.missed as f64 / self.frames as f64
        }
    }

    /// Mean deadline missing time of the missed frames (zero when none missed).
    pub fn dmt(&self) -> Duration {
        if self.missed == 0 {
            Duration::ZERO
        } else {
            self.late_total / self.missed
        }
    }

    /// Adds another stream's counts (DMP and DMT over several streams).
    pub fn merge(&mut self, other: &Deadlines) {
        self.frames += other.frames;
        self.missed += other.missed;
        self.late_total += other.late_total;
    }
}

/// Where a stream's first deadline lies, which the paper leaves open (§6.2 gives only
/// how each deadline follows from the previous one).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Anchor {
    /// One frame time after the first frame was generated: it is due before the next
    /// frame is produced, as every later frame is due one frame time after the one
    /// before.
    #[default]
    Generation,
    /// The first frame's own arrival: it never misses, and a later frame misses as
    /// soon as it arrives later after its predecessor than one frame time allows —
    /// zero slack.
    FirstArrival,
}

/// The deadline rule applied one frame at a time, as a simulator sees frames complete.
/// Frames are numbered; a frame that never arrives (dropped at its source) moves the
/// next deadline by one more period, so later frames keep the stream's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeadlineClock {
    anchor: Anchor,
    /// (index, deadline, arrival, missed) of the last frame seen.
    last: Option<(u64, Time, Time, bool)>,
}

impl DeadlineClock {
    /// A clock whose first deadline lies at `anchor`.
    pub fn new(anchor: Anchor) -> DeadlineClock {
        DeadlineClock { anchor, last: None }
    }

    /// Frame `index`, generated at `produced`, arrived at `at` (frames must come in
    /// increasing index order). Returns its lateness if it missed its deadline.
    pub fn arrive(
        &mut self,
        index: u64,
        produced: Time,
        at: Time,
        period: Duration,
    ) -> Option<Duration> {
        let deadline = match (self.last, self.anchor) {
            (None, Anchor::FirstArrival) => at,
            (None, Anchor::Generation) => produced + period,
            (Some((prev, deadline, arrival, missed)), _) => {
                let gap = period * index.saturating_sub(prev).max(1);
                if missed {
                    arrival + gap
                } else {
                    deadline + gap
                }
            }
        };
        let late = (at > deadline).then(|| at - deadline);
        self.last = Some((index, deadline, at, late.is_some()));
        late
    }
}

/// Applies the deadline rule to the arrival times of consecutive frames of one stream,
/// frame period `period` (33.3 ms for 30 frames/s), the first deadline at the first
/// arrival ([`Anchor::FirstArrival`]: the generation times are not known here).
/// Arrivals must be in frame order.
pub fn deadlines(arrivals: &[Time], period: Duration) -> Deadlines {
    let mut d = Deadlines::default();
    let mut clock = DeadlineClock::new(Anchor::FirstArrival);
    for (i, &a) in arrivals.iter().enumerate() {
        d.frames += 1;
        if let Some(late) = clock.arrive(i as u64, a, a, period) {
            d.missed += 1;
            d.late_total += late;
        }
    }
    d
}

/// Jitter of one QoS channel.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Jitter {
    /// Messages received after the first (each has an inter-receipt time).
    pub intervals: u64,
    /// Messages whose inter-receipt time exceeded the negotiated inter-arrival time.
    pub jittered: u64,
    /// Sum of the jitter durations.
    pub total: Duration,
    /// The negotiated inter-arrival time.
    pub negotiated: Duration,
}

impl Jitter {
    /// θ: mean jitter duration over all messages / negotiated inter-arrival time.
    pub fn fraction(&self) -> f64 {
        if self.intervals == 0 || self.negotiated.is_zero() {
            return 0.0;
        }
        self.total.as_ps() as f64 / self.intervals as f64 / self.negotiated.as_ps() as f64
    }

    /// The fraction of messages that incurred any jitter.
    pub fn jittered_fraction(&self) -> f64 {
        if self.intervals == 0 {
            0.0
        } else {
            self.jittered as f64 / self.intervals as f64
        }
    }

    /// Adds another channel of the same negotiated rate (θ of a class).
    pub fn merge(&mut self, other: &Jitter) {
        self.intervals += other.intervals;
        self.jittered += other.jittered;
        self.total += other.total;
    }
}

/// The jitter of a channel from its receipt times (in order) and its negotiated
/// inter-arrival time.
pub fn jitter(receipts: &[Time], negotiated: Duration) -> Jitter {
    let mut j = Jitter {
        negotiated,
        ..Jitter::default()
    };
    for w in receipts.windows(2) {
        let gap = w[1] - w[0];
        j.intervals += 1;
        if gap > negotiated {
            j.jittered += 1;
            j.total += gap - negotiated;
        }
    }
    j
}

/// The jitter of a channel whose source emits irregularly: message `k` has a jitter of
/// `max(0, (r_k − r_{k−1}) − (e_k − e_{k−1}))`, its inter-receipt time beyond its
/// inter-emission time; θ still divides the mean by `negotiated` (the channel's mean
/// inter-arrival time). `pairs` are (emitted, received) in message order. With
/// emissions exactly `negotiated` apart this is [`jitter`].
pub fn jitter_against(pairs: &[(Time, Time)], negotiated: Duration) -> Jitter {
    let mut j = Jitter {
        negotiated,
        ..Jitter::default()
    };
    for w in pairs.windows(2) {
        let (emitted, received) = (
            w[1].0.saturating_since(w[0].0),
            w[1].1.saturating_since(w[0].1),
        );
        j.intervals += 1;
        if received > emitted {
            j.jittered += 1;
            j.total += received - emitted;
        }
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> Time {
        Time::ZERO + Duration::from_ps((x * 1e9).round() as u64)
    }

    #[test]
    fn frames_on_time_never_miss() {
        let period = Duration::from_us(33_333);
        let a: Vec<Time> = (0..10).map(|k| ms(k as f64 * 33.0)).collect();
        let d = deadlines(&a, period);
        assert_eq!((d.frames, d.missed), (10, 0));
        assert_eq!(d.dmp(), 0.0);
        assert_eq!(d.dmt(), Duration::ZERO);
    }

    #[test]
    fn after_a_miss_the_next_deadline_counts_from_the_late_arrival() {
        let period = Duration::from_ms(33);
        // Deadlines 0, 33, 66 ...; frame 2 arrives at 70 (4 ms late): frame 3's deadline
        // is 70 + 33 = 103, not 99, so an arrival at 100 is on time; frame 4's deadline
        // is then 136, and 140 misses by 4 again.
        let a = [ms(0.0), ms(30.0), ms(70.0), ms(100.0), ms(140.0)];
        let d = deadlines(&a, period);
        assert_eq!((d.frames, d.missed), (5, 2));
        assert_eq!(d.late_total, Duration::from_ms(8));
        assert!((d.dmp() - 0.4).abs() < 1e-12);
        assert_eq!(d.dmt(), Duration::from_ms(4));
    }

    #[test]
    fn a_dropped_frame_moves_the_next_deadline_by_one_more_period() {
        let period = Duration::from_ms(33);
        let mut c = DeadlineClock::new(Anchor::FirstArrival);
        let t0 = Time::ZERO;
        assert_eq!(c.arrive(0, t0, ms(0.0), period), None);
        // Frame 1 never arrives; frame 2's deadline is 66.
        assert_eq!(c.arrive(2, t0, ms(65.0), period), None);
        assert_eq!(
            c.arrive(3, t0, ms(101.0), period),
            Some(Duration::from_ms(2))
        );
        // After the miss, frame 4's deadline is 101 + 33 = 134.
        assert_eq!(c.arrive(4, t0, ms(134.0), period), None);
    }

    #[test]
    fn the_generation_anchor_gives_each_frame_one_frame_time_of_slack() {
        let period = Duration::from_ms(33);
        // Frames generated at 0, 33, 66, 99 and delivered 2, 35.5, 68, 100.5 ms later
        // than that (jitter of 1.5 ms): from generation + one period every frame is on
        // time; anchored at the first arrival (2 ms) the jittered frames miss.
        let gen = [0.0, 33.0, 66.0, 99.0];
        let at = [2.0, 35.5, 68.0, 100.5];
        let run = |anchor| {
            let mut c = DeadlineClock::new(anchor);
            (0..4)
                .filter_map(|k| c.arrive(k as u64, ms(gen[k]), ms(at[k]), period))
                .count()
        };
        assert_eq!(run(Anchor::Generation), 0);
        assert_eq!(run(Anchor::FirstArrival), 1);
        // The first frame itself misses when it arrives more than a period after its
        // generation.
        let mut c = DeadlineClock::new(Anchor::Generation);
        assert_eq!(
            c.arrive(0, ms(0.0), ms(34.0), period),
            Some(Duration::from_ms(1))
        );
        // ... and the next deadline then counts from its arrival: 34 + 33.
        assert_eq!(c.arrive(1, ms(33.0), ms(67.0), period), None);
        assert_eq!(
            c.arrive(2, ms(66.0), ms(101.0), period),
            Some(Duration::from_ms(1))
        );
    }

    #[test]
    fn jitter_counts_only_gaps_beyond_the_negotiated_interval() {
        // Negotiated 10 ms; gaps 10, 12, 8, 15: jitters 0, 2, 0, 5 → mean 1.75 ms over 4.
        let r = [ms(0.0), ms(10.0), ms(22.0), ms(30.0), ms(45.0)];
        let j = jitter(&r, Duration::from_ms(10));
        assert_eq!((j.intervals, j.jittered), (4, 2));
        assert_eq!(j.total, Duration::from_ms(7));
        assert!((j.fraction() - 0.175).abs() < 1e-12);
        assert!((j.jittered_fraction() - 0.5).abs() < 1e-12);
        assert_eq!(jitter(&r[..1], Duration::from_ms(10)).fraction(), 0.0);
    }

    #[test]
    fn vbr_jitter_counts_receipt_gaps_beyond_emission_gaps() {
        // Emitted at 0, 5, 25, 30 (a burst, a pause); received 2, 9, 27, 40: gaps 7, 18,
        // 13 against 5, 20, 5 → jitters 2, 0, 8 → θ = 10/3 / 10 (negotiated 10 ms).
        let pairs = [
            (ms(0.0), ms(2.0)),
            (ms(5.0), ms(9.0)),
            (ms(25.0), ms(27.0)),
            (ms(30.0), ms(40.0)),
        ];
        let j = jitter_against(&pairs, Duration::from_ms(10));
        assert_eq!((j.intervals, j.jittered), (3, 2));
        assert_eq!(j.total, Duration::from_ms(10));
        assert!((j.fraction() - 1.0 / 3.0).abs() < 1e-12);
        // Evenly emitted at the negotiated spacing: the same as the CBR rule.
        let r = [ms(1.0), ms(11.0), ms(23.0), ms(31.0), ms(46.0)];
        let even: Vec<(Time, Time)> = (0..5).map(|k| (ms(10.0 * k as f64), r[k])).collect();
        assert_eq!(
            jitter_against(&even, Duration::from_ms(10)),
            jitter(&r, Duration::from_ms(10))
        );
    }
}
