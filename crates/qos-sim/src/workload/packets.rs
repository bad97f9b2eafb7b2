//! From source emissions to the packets an HCA is handed (Yum et al. §6.1–6.2): frames
//! and messages cut into packets of a fixed number of flits ("each frame is fragmented
//! into 40-flit size packets (except possibly the last packet of a frame)"), the input
//! regulator that removes the bursts of MPEG streams (§7.1: a token bucket), and the
//! periodic control traffic ("ten packets per 33.3 ms … only one VL (VL15) is assigned
//! for this traffic", 10-flit packets).

use qos_core::units::{Bytes, Duration, Time};
use serde::{Deserialize, Serialize};

use super::Emission;

/// Packet lengths in flits of a `size`-byte unit: full packets of `packet_flits`
/// flits of `flit_bytes` bytes, the last one shorter when the size is not a multiple
/// (at least one flit; a zero-byte unit is one one-flit packet).
pub fn packet_flits(size: Bytes, flit_bytes: u32, packet_flits: u32) -> impl Iterator<Item = u32> {
    let fb = flit_bytes.max(1) as u64;
    let pf = packet_flits.max(1) as u64;
    let flits = size.get().div_ceil(fb).max(1);
    let full = flits / pf;
    let last = flits % pf;
    (0..full)
        .map(move |_| pf as u32)
        .chain((last > 0).then_some(last as u32))
}

/// A token-bucket regulator (rate ρ, depth σ): a packet leaves when the bucket holds
/// tokens for all its bytes; tokens accrue at ρ up to σ. Packets leave in arrival
/// order. Over any interval of length t the bytes released are at most σ + ρ·t.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// ρ in bytes per second.
    rate: i128,
    /// σ in bytes × 10^12 (the unit of `tokens`).
    depth: i128,
    /// Tokens at `at`, in bytes × 10^12 (so that ρ · picoseconds is exact); negative
    /// after a packet larger than the depth.
    tokens: i128,
    at: Time,
    /// When the previous packet left (packets keep arrival order).
    free: Time,
}

/// A regulator's parameters as a scenario writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketSpec {
    /// ρ, bytes per second.
    pub rate: qos_core::units::Bandwidth,
    /// σ, bytes (at least one packet).
    pub depth: Bytes,
}

const PS: i128 = 1_000_000_000_000;

impl TokenBucket {
    /// A full bucket at `start`. `None` for a zero rate or depth.
    pub fn new(spec: BucketSpec, start: Time) -> Option<TokenBucket> {
        if spec.rate.is_zero() || spec.depth.is_zero() {
            return None;
        }
        let depth = spec.depth.get() as i128 * PS;
        Some(TokenBucket {
            rate: spec.rate.bytes_per_sec() as i128,
            depth,
            tokens: depth,
            at: start,
            free: start,
        })
    }

    fn refill(&mut self, t: Time) {
        if t > self.at {
            let dt = (t - self.at).as_ps() as i128;
            self.tokens = (self.tokens + dt * self.rate).min(self.depth);
            self.at = t;
        }
    }

    /// When a packet of `size` bytes arriving at `arrival` leaves (taking its
    /// tokens). A packet larger than the depth leaves once the bucket is full and
    /// leaves it in debt, so the long-run rate still holds.
    pub fn release(&mut self, arrival: Time, size: Bytes) -> Time {
        let t = arrival.max(self.free);
        self.refill(t);
        let size = size.get() as i128 * PS;
        let need = size.min(self.depth);
        let out = if self.tokens >= need {
            t
        } else {
            let wait = (need - self.tokens + self.rate - 1) / self.rate;
            let out = t + Duration::from_ps(wait.min(u64::MAX as i128) as u64);
            self.refill(out);
            out
        };
        self.tokens -= size;
        self.free = out;
        out
    }
}

/// Evenly spaced packets of one size: `count` per `period`, the first at `phase` after
/// `start` (the paper's control traffic: ten 10-flit packets per 33.3 ms, or per ON+OFF
/// period with ON/OFF sources).
#[derive(Debug, Clone)]
pub struct Periodic {
    next: Time,
    gap: Duration,
    size: Bytes,
    index: u64,
}

impl Periodic {
    /// `count` units of `size` every `period`, from `start + phase`. `None` for no
    /// count or period.
    pub fn new(
        start: Time,
        phase: Duration,
        period: Duration,
        count: u32,
        size: Bytes,
    ) -> Option<Periodic> {
        if count == 0 || period.is_zero() {
            return None;
        }
        let gap = Duration::from_ps((period.as_ps() / count as u64).max(1));
        Some(Periodic {
            next: start + phase,
            gap,
            size,
            index: 0,
        })
    }
}

impl Iterator for Periodic {
    type Item = Emission;
    fn next(&mut self) -> Option<Emission> {
        let e = Emission {
            at: self.next,
            size: self.size,
            index: self.index,
        };
        self.index += 1;
        self.next += self.gap;
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qos_core::units::Bandwidth;

    #[test]
    fn frames_are_cut_into_40_flit_packets_and_a_shorter_last_one() {
        // 16-byte (128-bit) flits: a 40-flit packet carries 640 bytes.
        let v: Vec<u32> = packet_flits(Bytes::new(2000), 16, 40).collect();
        assert_eq!(v, vec![40, 40, 40, 5]);
        let v: Vec<u32> = packet_flits(Bytes::new(1280), 16, 40).collect();
        assert_eq!(v, vec![40, 40]);
        let v: Vec<u32> = packet_flits(Bytes::new(1), 16, 40).collect();
        assert_eq!(v, vec![1]);
        let v: Vec<u32> = packet_flits(Bytes::ZERO, 16, 40).collect();
        assert_eq!(v, vec![1]);
    }

    fn spec(rate: u64, depth: u64) -> BucketSpec {
        BucketSpec {
            rate: Bandwidth::from_bytes_per_sec(rate),
            depth: Bytes::new(depth),
        }
    }

    #[test]
    fn a_burst_leaves_at_the_bucket_rate_after_the_depth() {
        // 1000 B/s, depth 100 B: ten 100-byte packets at t = 0 leave 0.1 s apart.
        let mut b = TokenBucket::new(spec(1000, 100), Time::ZERO).unwrap();
        let out: Vec<u64> = (0..10)
            .map(|_| b.release(Time::ZERO, Bytes::new(100)).as_ps())
            .collect();
        let want: Vec<u64> = (0..10).map(|i| i * 100_000_000_000).collect();
        assert_eq!(out, want);
        // After a long idle period the bucket is full again, never fuller.
        let t = Time::from_ps(100 * PS as u64);
        assert_eq!(b.release(t, Bytes::new(100)), t);
        assert!(b.release(t, Bytes::new(100)) > t);
    }

    #[test]
    fn released_bytes_never_exceed_depth_plus_rate_times_interval() {
        let mut b = TokenBucket::new(spec(10_000, 640), Time::ZERO).unwrap();
        let mut rng = 12345u64;
        let mut at = Time::ZERO;
        let mut rel = Vec::new();
        for _ in 0..2000 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            at += Duration::from_us(rng >> 50);
            let size = 1 + (rng >> 33) % 640;
            let out = b.release(at, Bytes::new(size));
            assert!(out >= at);
            if let Some(&(last, _)) = rel.last() {
                assert!(out >= last, "order kept");
            }
            rel.push((out, size));
        }
        // Every window [rel[i], rel[j]] carries at most σ + ρ·(t_j − t_i) bytes.
        for i in (0..rel.len()).step_by(37) {
            let mut bytes = 0u64;
            for j in i..rel.len().min(i + 300) {
                bytes += rel[j].1;
                let dt = (rel[j].0 - rel[i].0).as_ps() as f64 / 1e12;
                assert!(bytes as f64 <= 640.0 + 10_000.0 * dt + 1e-6, "{i}..{j}");
            }
        }
    }

    #[test]
    fn control_traffic_is_ten_packets_per_frame_time() {
        let period = Duration::from_ps(33_333_333_333);
        let p = Periodic::new(
            Time::ZERO,
            Duration::from_ms(1),
            period,
            10,
            Bytes::new(160),
        )
        .unwrap();
        let v: Vec<Emission> = p.take(20).collect();
        assert_eq!(v[0].at, Time::ZERO + Duration::from_ms(1));
        assert_eq!((v[10].at - v[0].at).as_ps(), 33_333_333_330);
        assert!(Periodic::new(Time::ZERO, Duration::ZERO, period, 0, Bytes::new(1)).is_none());
    }
}
