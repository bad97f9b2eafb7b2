//! A source described by a few numbers ([`Spec`]), turned into its emissions
//! ([`Emissions`]) when a run starts: constant bit rate at a phase, Poisson, or an
//! aggregate of MPEG streams (Nagar et al. §4.2: a VBR channel carrying 20, 40 or 80
//! MPEG-1 streams). Hosts of the Myrinet model post one message per emission.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use qos_core::units::{Bytes, Duration, Time};

use super::mpeg::{Frames, Synthetic};
use super::onoff::Poisson;
use super::Emission;

/// What a source emits (the unit size is given when it starts, except for MPEG).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spec {
    /// One unit every `period`, the first at `start + phase`.
    Cbr {
        /// Spacing.
        period: Duration,
        /// Offset of the first unit from the start.
        phase: Duration,
    },
    /// Poisson arrivals at `per_second` units per second.
    Poisson {
        /// Mean rate in units per second.
        per_second: f64,
    },
    /// `streams` independent synthetic MPEG streams merged in time order, each starting
    /// at a seeded random point within its first frame period; one unit per frame.
    Mpeg {
        /// How many streams.
        streams: u32,
        /// The shape and rate of each.
        stream: Synthetic,
    },
}

impl Spec {
    /// The emissions from `start`, units of `size` (MPEG: frame sizes), seeded. `None`
    /// for parameters that describe no source (a zero period or rate, no streams).
    pub fn emissions(&self, start: Time, size: Bytes, seed: u64) -> Option<Emissions> {
        match *self {
            Spec::Cbr { period, phase } => {
                if period.is_zero() {
                    return None;
                }
                Some(Emissions::Cbr {
                    next: start + phase,
                    period,
                    size,
                    index: 0,
                })
            }
            Spec::Poisson { per_second } => {
                Poisson::new(start, per_second, size, seed).map(|p| Emissions::Poisson(Box::new(p)))
            }
            Spec::Mpeg { streams, stream } => {
                if streams == 0 {
                    return None;
                }
                let period = Duration::from_ps((1e12 / stream.fps.max(1e-9)).round() as u64);
                let mut offsets = crate::engine::SimRng::stream(seed, u64::from(streams));
                let frames = (0..streams)
                    .map(|i| {
                        let phase = offsets.jitter(period);
                        stream.frames(
                            start + phase,
                            seed.wrapping_mul(1_000_003).wrapping_add(u64::from(i)),
                        )
                    })
                    .collect::<Option<Vec<Frames>>>()?;
                Some(Emissions::Merged(Merge::new(frames)))
            }
        }
    }

    /// The mean spacing of the units (the negotiated inter-arrival time of a channel
    /// carrying this source), if the source has one.
    pub fn mean_interval(&self) -> Option<Duration> {
        match *self {
            Spec::Cbr { period, .. } => Some(period),
            Spec::Poisson { per_second } if per_second > 0.0 => {
                Some(Duration::from_ps((1e12 / per_second).round() as u64))
            }
            Spec::Mpeg { streams, stream } if streams > 0 && stream.fps > 0.0 => Some(
                Duration::from_ps((1e12 / (stream.fps * f64::from(streams))).round() as u64),
            ),
            _ => None,
        }
    }
}

/// The emissions of a [`Spec`], in time order.
#[derive(Debug, Clone)]
pub enum Emissions {
    /// Periodic.
    Cbr {
        /// The next unit's time.
        next: Time,
        /// Spacing.
        period: Duration,
        /// Unit size.
        size: Bytes,
        /// The next unit's index.
        index: u64,
    },
    /// Poisson.
    Poisson(Box<Poisson>),
    /// Several streams merged.
    Merged(Merge<Frames>),
}

impl Iterator for Emissions {
    type Item = Emission;
    fn next(&mut self) -> Option<Emission> {
        match self {
            Emissions::Cbr {
                next,
                period,
                size,
                index,
            } => {
                let e = Emission {
                    at: *next,
                    size: *size,
                    index: *index,
                };
                *next += *period;
                *index += 1;
                Some(e)
            }
            Emissions::Poisson(p) => p.next(),
            Emissions::Merged(m) => m.next(),
        }
    }
}

/// Several time-ordered emission streams merged into one, in time order (ties: the
/// stream listed first); indices are renumbered along the merged stream.
#[derive(Debug, Clone)]
pub struct Merge<I> {
    streams: Vec<I>,
    heads: BinaryHeap<Reverse<(Time, usize)>>,
    pending: Vec<Option<Emission>>,
    index: u64,
}

impl<I: Iterator<Item = Emission>> Merge<I> {
    /// Merges `streams`.
    pub fn new(mut streams: Vec<I>) -> Merge<I> {
        let mut heads = BinaryHeap::new();
        let pending: Vec<Option<Emission>> = streams
            .iter_mut()
            .enumerate()
            .map(|(i, s)| {
                let e = s.next();
                if let Some(e) = e {
                    heads.push(Reverse((e.at, i)));
                }
                e
            })
            .collect();
        Merge {
            streams,
            heads,
            pending,
            index: 0,
        }
    }
}

impl<I: Iterator<Item = Emission>> Iterator for Merge<I> {
    type Item = Emission;
    fn next(&mut self) -> Option<Emission> {
        let Reverse((_, i)) = self.heads.pop()?;
        let mut e = self.pending[i].take()?;
        if let Some(n) = self.streams[i].next() {
            self.heads.push(Reverse((n.at, i)));
            self.pending[i] = Some(n);
        }
        e.index = self.index;
        self.index += 1;
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qos_core::units::Bandwidth;

    #[test]
    fn cbr_emits_at_its_phase_then_every_period() {
        let s = Spec::Cbr {
            period: Duration::from_us(100),
            phase: Duration::from_us(30),
        };
        let v: Vec<u64> = s
            .emissions(Time::ZERO, Bytes::kib(4), 1)
            .unwrap()
            .take(3)
            .map(|e| e.at.since_epoch().as_ps())
            .collect();
        assert_eq!(v, [30_000_000, 130_000_000, 230_000_000]);
        assert_eq!(s.mean_interval(), Some(Duration::from_us(100)));
        let zero = Spec::Cbr {
            period: Duration::ZERO,
            phase: Duration::ZERO,
        };
        assert!(zero.emissions(Time::ZERO, Bytes::kib(4), 1).is_none());
    }

    #[test]
    fn merged_mpeg_streams_are_in_time_order_at_the_aggregate_rate() {
        let stream = Synthetic::new(Bandwidth::from_bytes_per_sec(47_500), 25.0);
        let s = Spec::Mpeg {
            streams: 20,
            stream,
        };
        assert_eq!(s.mean_interval(), Some(Duration::from_ms(2)));
        let horizon = Time::ZERO + Duration::from_ms(60_000);
        let v: Vec<Emission> = s
            .emissions(Time::ZERO, Bytes::new(1), 5)
            .unwrap()
            .take_while(|e| e.at < horizon)
            .collect();
        assert!(v.windows(2).all(|w| w[0].at <= w[1].at));
        assert!(v.iter().enumerate().all(|(i, e)| e.index == i as u64));
        // 20 streams × 25 frames/s over 60 s, and 20 × 47.5 kB/s = 0.95 MB/s.
        assert_eq!(v.len(), 20 * 25 * 60);
        let rate = v.iter().map(|e| e.size.get()).sum::<u64>() as f64 / 60.0;
        assert!((rate / 950_000.0 - 1.0).abs() < 0.03, "{rate}");
        // Same seed, same aggregate.
        let again: Vec<Emission> = s
            .emissions(Time::ZERO, Bytes::new(1), 5)
            .unwrap()
            .take(50)
            .collect();
        assert_eq!(again, v[..50]);
    }
}
