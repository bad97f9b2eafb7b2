//! What a Yum et al. run measures (§6.2, §7): the deadline missing probability and
//! time of MPEG-2 frames (frames reassembled from their packets, deadlines by
//! [`qos_core::stream_metrics::DeadlineClock`]), the average latency of each traffic
//! class, and the connection rejection rate and set-up latency of admission control.
//!
//! Only what the measurement window holds counts: packets posted in it, frames
//! produced in it, connections that asked in it or before (set-up happens during the
//! warm-up). Confidence intervals come from batch means: the window is cut into equal
//! batches, each gives one estimate, and the 95 % interval is the Student-t interval of
//! their mean — frames of one stream, and packets in one queue, are correlated, so the
//! batches and not the frames are the independent samples.

use std::collections::{BTreeMap, HashMap};

use qos_core::stream_metrics::{Anchor, DeadlineClock, Deadlines};
use qos_core::units::{Duration, Time};
use serde::Serialize;

use super::traffic::{Message, TrafficClass};

/// A mean with its 95 % confidence half-width.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The point estimate.
    pub mean: f64,
    /// Half-width of the 95 % interval (NaN with fewer than two batches).
    pub half_width: f64,
    /// Batches the interval is made of.
    pub batches: u32,
}

/// Student-t 0.975 quantiles for 1 to 30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The 0.975 quantile of Student's t with `df` degrees of freedom (beyond 30, the
/// values at 40, 60, 120 and ∞ interpolated in 1/df).
pub fn t975(df: u32) -> f64 {
    match df {
        0 => f64::NAN,
        1..=30 => T975[df as usize - 1],
        _ => {
            let pts = [
                (30.0, 2.042),
                (40.0, 2.021),
                (60.0, 2.000),
                (120.0, 1.980),
                (f64::INFINITY, 1.960),
            ];
            let x = 1.0 / df as f64;
            for w in pts.windows(2) {
                let (a, b) = (1.0 / w[0].0, 1.0 / w[1].0);
                if x <= a && x >= b {
                    return w[1].1 + (w[0].1 - w[1].1) * (x - b) / (a - b);
                }
            }
            1.960
        }
    }
}

impl Estimate {
    /// `point` with the batch-means interval of `batches` (one value per batch).
    pub fn batch_means(point: f64, batches: &[f64]) -> Estimate {
        let n = batches.len();
        let half_width = if n < 2 {
            f64::NAN
        } else {
            let m = batches.iter().sum::<f64>() / n as f64;
            let var = batches.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
            t975(n as u32 - 1) * (var / n as f64).sqrt()
        };
        Estimate {
            mean: point,
            half_width,
            batches: n as u32,
        }
    }
}

/// Latency of one class: sums per batch.
#[derive(Debug, Clone, Default)]
struct Sums {
    total_ps: Vec<u128>,
    count: Vec<u64>,
}

/// DMP and DMT of every stream with the first deadlines at one [`Anchor`].
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DeadlineMeasures {
    /// Where the first deadlines lie.
    pub anchor: Anchor,
    /// Deadline missing probability (missed / delivered).
    pub dmp: Estimate,
    /// Mean deadline missing time of the frames that missed, ms.
    pub dmt_ms: Estimate,
    /// Frames delivered and missed (pooled).
    pub frames: Deadlines,
}

/// Everything measured in one run.
#[derive(Debug, Clone, Serialize)]
pub struct Measures {
    /// Deadline missing probability of MPEG-2 frames (missed / delivered), first
    /// deadlines at the run's anchor (`workload.deadline_anchor`).
    pub dmp: Estimate,
    /// Mean deadline missing time of the frames that missed, ms (the run's anchor).
    pub dmt_ms: Estimate,
    /// Frames delivered and missed (pooled; the run's anchor).
    pub frames: Deadlines,
    /// The same frames with the first deadlines at the other anchor.
    pub other_anchor: DeadlineMeasures,
    /// Mean latency per class (post to last flit delivered), µs.
    pub latency_us: BTreeMap<TrafficClass, Estimate>,
    /// Packets measured per class.
    pub packets: BTreeMap<TrafficClass, u64>,
    /// Mean queueing delay per class at the source HCA (WQE posted to header on the
    /// link; Table 3's "packet queueing delay"), µs.
    pub queueing_us: BTreeMap<TrafficClass, Estimate>,
    /// Mean latency per class from the WQE's post at the source HCA to the last flit
    /// delivered, µs: [`Measures::latency_us`] less any wait at the consumer (for a
    /// credit, or for room in a full send queue).
    pub posted_latency_us: BTreeMap<TrafficClass, Estimate>,
    /// Mean latency per class from the packet's header entering the network (the
    /// source HCA's link) to its last flit delivered, µs: [`Measures::posted_latency_us`]
    /// less the queueing delay at the HCA ([`Measures::queueing_us`]).
    pub network_latency_us: BTreeMap<TrafficClass, Estimate>,
    /// Flits delivered per class during the measurement window (whenever posted).
    pub delivered_flits: BTreeMap<TrafficClass, u64>,
    /// Real-time connections that asked.
    pub requested: u64,
    /// Of those, refused by admission control.
    pub rejected: u64,
    /// Mean time from probe to ACK or NACK, µs.
    pub setup_us: f64,
}

impl Measures {
    /// Rejected / requested connections (0 when none asked).
    pub fn rejection_rate(&self) -> f64 {
        if self.requested == 0 {
            0.0
        } else {
            self.rejected as f64 / self.requested as f64
        }
    }
}

/// Collects deliveries and set-ups during a run.
#[derive(Debug, Clone)]
pub struct Collector {
    from: Time,
    until: Time,
    /// Frames produced before this are counted.
    frames_until: Time,
    batches: u32,
    /// Packets received per (connection, session, frame) not yet complete.
    partial: HashMap<(u32, u32, u64), u32>,
    /// The run's anchor and the other one.
    anchors: [Anchor; 2],
    /// Deadline clocks per (connection, session), one per anchor.
    clocks: HashMap<(u32, u32), [DeadlineClock; 2]>,
    /// Per anchor, per batch.
    deadlines: [Vec<Deadlines>; 2],
    latency: BTreeMap<TrafficClass, Sums>,
    queueing: BTreeMap<TrafficClass, Sums>,
    posted: BTreeMap<TrafficClass, Sums>,
    network: BTreeMap<TrafficClass, Sums>,
    received: BTreeMap<TrafficClass, u64>,
    requested: u64,
    rejected: u64,
    setup_total: Duration,
}

impl Collector {
    /// Measures what happens in `[from, until)`, cut into `batches` (each frame is
    /// due by its stream's frame time, [`super::traffic::FramePart::period`]).
    pub fn new(from: Time, until: Time, batches: u32) -> Collector {
        Collector::with_frames(from, until, until, batches, Anchor::Generation)
    }

    /// As [`Collector::new`], counting only the frames produced before
    /// `frames_until` (batches of frames then split `[from, frames_until)`), the
    /// run's DMP and DMT with the first deadlines at `anchor` (the other anchor's
    /// beside them).
    pub fn with_frames(
        from: Time,
        until: Time,
        frames_until: Time,
        batches: u32,
        anchor: Anchor,
    ) -> Collector {
        let b = batches.max(1);
        let other = match anchor {
            Anchor::Generation => Anchor::FirstArrival,
            Anchor::FirstArrival => Anchor::Generation,
        };
        Collector {
            from,
            until,
            frames_until: frames_until.min(until).max(from),
            batches: b,
            partial: HashMap::new(),
            anchors: [anchor, other],
            clocks: HashMap::new(),
            deadlines: [
                vec![Deadlines::default(); b as usize],
                vec![Deadlines::default(); b as usize],
            ],
            latency: BTreeMap::new(),
            queueing: BTreeMap::new(),
            posted: BTreeMap::new(),
            network: BTreeMap::new(),
            received: BTreeMap::new(),
            requested: 0,
            rejected: 0,
            setup_total: Duration::ZERO,
        }
    }

    /// The batch of time `t` in `[from, until)`, if it is there.
    fn batch_in(&self, t: Time, until: Time) -> Option<usize> {
        if t < self.from || t >= until {
            return None;
        }
        let span = (until - self.from).as_ps() as u128;
        Some(((t - self.from).as_ps() as u128 * self.batches as u128 / span) as usize)
    }

    fn batch(&self, t: Time) -> Option<usize> {
        self.batch_in(t, self.until)
    }

    /// Message `m` (one packet) waited `wait` at its source HCA (counted, as its
    /// latency, when `m` was produced in the window).
    pub fn queued(&mut self, m: &Message, wait: Duration) {
        if let Some(b) = self.batch(m.at) {
            Self::add(&mut self.queueing, self.batches, m.class, b, wait);
        }
    }

    /// Message `m` (one packet) took `d` from its WQE's post to its delivery (counted
    /// when `m` was produced in the window).
    pub fn posted(&mut self, m: &Message, d: Duration) {
        if let Some(b) = self.batch(m.at) {
            Self::add(&mut self.posted, self.batches, m.class, b, d);
        }
    }

    /// Message `m` (one packet) took `d` from its header entering the network (the
    /// source HCA's link) to its delivery: its network latency, without the waits at
    /// the consumer and in the HCA (counted when `m` was produced in the window).
    pub fn in_network(&mut self, m: &Message, d: Duration) {
        if let Some(b) = self.batch(m.at) {
            Self::add(&mut self.network, self.batches, m.class, b, d);
        }
    }

    /// `flits` of `class` were delivered at `at`.
    pub fn received(&mut self, class: TrafficClass, flits: u32, at: Time) {
        if at >= self.from && at < self.until {
            *self.received.entry(class).or_default() += flits as u64;
        }
    }

    fn add(
        map: &mut BTreeMap<TrafficClass, Sums>,
        batches: u32,
        c: TrafficClass,
        b: usize,
        d: Duration,
    ) {
        let s = map.entry(c).or_default();
        if s.count.is_empty() {
            s.count = vec![0; batches as usize];
            s.total_ps = vec![0; batches as usize];
        }
        s.count[b] += 1;
        s.total_ps[b] += d.as_ps() as u128;
    }

    /// Message `m` (one packet) was delivered whole at `at`.
    pub fn delivered(&mut self, m: &Message, at: Time) {
        if let Some(b) = self.batch(m.at) {
            Self::add(
                &mut self.latency,
                self.batches,
                m.class,
                b,
                at.saturating_since(m.at),
            );
        }
        let (Some(conn), Some(f)) = (m.conn, m.frame) else {
            return;
        };
        let got = self.partial.entry((conn, f.session, f.index)).or_insert(0);
        *got += 1;
        if *got < f.packets {
            return;
        }
        self.partial.remove(&(conn, f.session, f.index));
        let anchors = self.anchors;
        let clocks = self
            .clocks
            .entry((conn, f.session))
            .or_insert_with(|| anchors.map(DeadlineClock::new));
        let late = [0, 1].map(|i| clocks[i].arrive(f.index, f.produced, at, f.period));
        if let Some(b) = self.batch_in(f.produced, self.frames_until) {
            for (i, late) in late.into_iter().enumerate() {
                let d = &mut self.deadlines[i][b];
                d.frames += 1;
                if let Some(l) = late {
                    d.missed += 1;
                    d.late_total += l;
                }
            }
        }
    }

    /// A connection's probe, sent at `asked`, was answered at `answered`.
    pub fn set_up(&mut self, asked: Time, answered: Time, admitted: bool) {
        if asked >= self.until {
            return;
        }
        self.requested += 1;
        if !admitted {
            self.rejected += 1;
        }
        self.setup_total += answered.saturating_since(asked);
    }

    /// Mean per class, µs, with its batch-means interval; `counts` gets the samples.
    fn means(
        sums: &BTreeMap<TrafficClass, Sums>,
        counts: &mut BTreeMap<TrafficClass, u64>,
    ) -> BTreeMap<TrafficClass, Estimate> {
        let mut out = BTreeMap::new();
        for (&c, s) in sums {
            let n: u64 = s.count.iter().sum();
            let total: u128 = s.total_ps.iter().sum();
            let per: Vec<f64> = s
                .count
                .iter()
                .zip(&s.total_ps)
                .filter(|(&k, _)| k > 0)
                .map(|(&k, &t)| t as f64 / k as f64 / 1e6)
                .collect();
            let mean = if n == 0 {
                0.0
            } else {
                total as f64 / n as f64 / 1e6
            };
            out.insert(c, Estimate::batch_means(mean, &per));
            counts.insert(c, n);
        }
        out
    }

    /// DMP and DMT with anchor `i` (0 the run's, 1 the other).
    fn deadline_measures(&self, i: usize) -> DeadlineMeasures {
        let batches = &self.deadlines[i];
        let mut frames = Deadlines::default();
        for d in batches {
            frames.merge(d);
        }
        let dmp_b: Vec<f64> = batches.iter().map(|d| d.dmp()).collect();
        // DMT is the mean tardiness of the frames that missed, so a batch without a miss
        // has none to give — except when no frame of the whole run misses: then every
        // batch that counted frames was late by exactly 0, and the run's DMT is 0 with
        // an interval of 0 (as its DMP is), not undefined. A run that counted no frame
        // has no DMT interval.
        let dmt_b: Vec<f64> = if frames.missed == 0 {
            batches
                .iter()
                .filter(|d| d.frames > 0)
                .map(|_| 0.0)
                .collect()
        } else {
            batches
                .iter()
                .filter(|d| d.missed > 0)
                .map(|d| d.dmt().as_secs_f64() * 1e3)
                .collect()
        };
        DeadlineMeasures {
            anchor: self.anchors[i],
            dmp: Estimate::batch_means(frames.dmp(), &dmp_b),
            dmt_ms: Estimate::batch_means(frames.dmt().as_secs_f64() * 1e3, &dmt_b),
            frames,
        }
    }

    /// The measures.
    pub fn finish(&self) -> Measures {
        let own = self.deadline_measures(0);
        let mut packets = BTreeMap::new();
        let latency_us = Self::means(&self.latency, &mut packets);
        let queueing_us = Self::means(&self.queueing, &mut BTreeMap::new());
        let posted_latency_us = Self::means(&self.posted, &mut BTreeMap::new());
        let network_latency_us = Self::means(&self.network, &mut BTreeMap::new());
        Measures {
            dmp: own.dmp,
            dmt_ms: own.dmt_ms,
            frames: own.frames,
            other_anchor: self.deadline_measures(1),
            latency_us,
            packets,
            queueing_us,
            posted_latency_us,
            network_latency_us,
            delivered_flits: self.received.clone(),
            requested: self.requested,
            rejected: self.rejected,
            setup_us: if self.requested == 0 {
                0.0
            } else {
                self.setup_total.as_secs_f64() * 1e6 / self.requested as f64
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iba::traffic::FramePart;

    fn ms(x: f64) -> Time {
        Time::ZERO + Duration::from_ps((x * 1e9).round() as u64)
    }

    fn packet(conn: u32, index: u64, packet: u32, packets: u32, produced: f64) -> Message {
        Message {
            at: ms(produced),
            src: 0,
            dst: 1,
            class: TrafficClass::RealTime,
            lane: 0,
            flits: 40,
            conn: Some(conn),
            frame: Some(FramePart {
                index,
                packet,
                packets,
                produced: ms(produced),
                period: Duration::from_ms(33),
                session: 0,
            }),
            last: false,
        }
    }

    #[test]
    fn student_t_quantiles() {
        assert_eq!(t975(9), 2.262);
        assert!((t975(1000) - 1.96).abs() < 0.01);
        assert!(t975(45) < 2.021 && t975(45) > 2.000);
        assert!(t975(0).is_nan());
    }

    #[test]
    fn batch_means_give_the_t_interval_of_the_batch_values() {
        let e = Estimate::batch_means(2.0, &[1.0, 2.0, 3.0]);
        // s = 1, n = 3: 4.303 / sqrt(3).
        assert!((e.half_width - 4.303 / 3f64.sqrt()).abs() < 1e-12);
        assert!(Estimate::batch_means(1.0, &[1.0]).half_width.is_nan());
    }

    #[test]
    fn a_frame_arrives_with_its_last_packet_and_misses_by_the_deadline_rule() {
        let mut c =
            Collector::with_frames(Time::ZERO, ms(1000.0), ms(1000.0), 2, Anchor::FirstArrival);
        // Frame 0 (two packets) completes at 5 ms: the clock starts there.
        c.delivered(&packet(7, 0, 0, 2, 0.0), ms(1.0));
        c.delivered(&packet(7, 0, 1, 2, 0.0), ms(5.0));
        // Frame 1 (one packet) due at 38 ms, arrives at 40: 2 ms late.
        c.delivered(&packet(7, 1, 0, 1, 33.0), ms(40.0));
        // Frame 2, in the second batch, due at 40 + 33 = 73 after the miss; on time.
        c.delivered(&packet(7, 2, 0, 1, 600.0), ms(73.0));
        let m = c.finish();
        assert_eq!((m.frames.frames, m.frames.missed), (3, 1));
        assert!((m.dmp.mean - 1.0 / 3.0).abs() < 1e-12);
        assert!((m.dmt_ms.mean - 2.0).abs() < 1e-9);
        // Batch DMPs 1/2 and 0.
        assert_eq!(m.dmp.batches, 2);
        assert!((m.dmp.half_width - 12.706 * 0.25).abs() < 1e-9);
        assert_eq!(m.packets[&TrafficClass::RealTime], 4);
        // From generation + one period (33 ms for frame 0, produced at 0) nothing
        // misses: frame 1 is due at 66, frame 2 at 99.
        assert_eq!(m.other_anchor.anchor, Anchor::Generation);
        assert_eq!(m.other_anchor.frames.frames, 3);
        assert_eq!(m.other_anchor.frames.missed, 0);
        // A run where no frame misses: DMT 0 in each of its two batches, so 0 ± 0; with
        // one miss, only the batch that had it gives a DMT, and one batch no interval.
        let none = m.other_anchor.dmt_ms;
        assert_eq!((none.mean, none.half_width, none.batches), (0.0, 0.0, 2));
        assert_eq!(m.dmt_ms.batches, 1);
        assert!(m.dmt_ms.half_width.is_nan());
    }

    #[test]
    fn only_the_window_counts_and_rejections_are_counted() {
        let mut c = Collector::new(ms(10.0), ms(20.0), 2);
        let mut m = packet(1, 0, 0, 1, 5.0);
        m.conn = None;
        m.frame = None;
        m.class = TrafficClass::BestEffort;
        c.delivered(&m, ms(6.0));
        m.at = ms(12.0);
        c.delivered(&m, ms(12.5));
        c.set_up(ms(1.0), ms(1.1), true);
        c.set_up(ms(2.0), ms(2.3), false);
        c.set_up(ms(25.0), ms(25.1), false);
        let r = c.finish();
        assert_eq!(r.packets[&TrafficClass::BestEffort], 1);
        assert!((r.latency_us[&TrafficClass::BestEffort].mean - 500.0).abs() < 1e-6);
        assert_eq!((r.requested, r.rejected), (2, 1));
        assert!((r.rejection_rate() - 0.5).abs() < 1e-12);
        assert!((r.setup_us - 200.0).abs() < 1e-6);
    }

    #[test]
    fn a_packets_latency_splits_into_the_consumer_the_hca_and_the_network() {
        // Produced at 12 ms, posted at 13 (waited 1 ms for a credit), header on the link
        // at 13.25 (0.25 ms in the HCA), delivered at 13.75: 1.75 ms from the message,
        // 0.75 from the post, 0.5 in the network.
        let mut c = Collector::new(ms(10.0), ms(20.0), 2);
        let mut m = packet(1, 0, 0, 1, 12.0);
        m.conn = None;
        m.frame = None;
        m.class = TrafficClass::BestEffort;
        let (posted, injected, at) = (ms(13.0), ms(13.25), ms(13.75));
        c.delivered(&m, at);
        c.queued(&m, injected.saturating_since(posted));
        c.posted(&m, at.saturating_since(posted));
        c.in_network(&m, at.saturating_since(injected));
        // Produced before the window: not counted.
        m.at = ms(5.0);
        c.in_network(&m, Duration::from_ps(1_000_000_000));
        let r = c.finish();
        let be = TrafficClass::BestEffort;
        let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(near(r.latency_us[&be].mean, 1750.0));
        assert!(near(r.posted_latency_us[&be].mean, 750.0));
        assert!(near(r.queueing_us[&be].mean, 250.0));
        assert!(near(r.network_latency_us[&be].mean, 500.0));
    }
}
