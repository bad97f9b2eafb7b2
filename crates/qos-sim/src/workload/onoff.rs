//! ON/OFF and Poisson sources (Yum et al. §6.2): "during the OFF period, the source does
//! not generate any packets, while during the ON period, packets are generated according
//! to the given injection rate … to avoid traffic burst, the generation is evenly
//! scattered. The ON/OFF model with exponentially distributed ON and OFF times";
//! best-effort traffic "follows the Poisson distribution".

use qos_core::units::{Bytes, Duration, Time};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};

use super::Emission;

/// An ON/OFF source: exponential ON and OFF periods, packets of `size` evenly spaced at
/// `interval` while ON (the first at the start of each ON period).
#[derive(Debug, Clone)]
pub struct OnOff {
    size: Bytes,
    interval: Duration,
    on: Exp<f64>,
    off: Exp<f64>,
    rng: ChaCha8Rng,
    next: Time,
    on_until: Time,
    index: u64,
}

impl OnOff {
    /// A source starting with an ON period at `start`. `mean_on`, `mean_off` and
    /// `interval` must be positive.
    pub fn new(
        start: Time,
        mean_on: Duration,
        mean_off: Duration,
        interval: Duration,
        size: Bytes,
        seed: u64,
    ) -> Option<OnOff> {
        if mean_on.is_zero() || mean_off.is_zero() || interval.is_zero() {
            return None;
        }
        let on = Exp::new(1.0 / mean_on.as_ps() as f64).ok()?;
        let off = Exp::new(1.0 / mean_off.as_ps() as f64).ok()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let first = Duration::from_ps(on.sample(&mut rng).round() as u64);
        Some(OnOff {
            size,
            interval,
            on,
            off,
            rng,
            next: start,
            on_until: start + first,
            index: 0,
        })
    }

    /// The long-run fraction of time ON: mean_on / (mean_on + mean_off).
    pub fn duty(mean_on: Duration, mean_off: Duration) -> f64 {
        let (a, b) = (mean_on.as_ps() as f64, mean_off.as_ps() as f64);
        a / (a + b).max(1.0)
    }
}

impl Iterator for OnOff {
    type Item = Emission;
    fn next(&mut self) -> Option<Emission> {
        while self.next >= self.on_until {
            // OFF, then a new ON period starting where the OFF one ends — but never
            // closer than one interval to the last packet: the source's rate is a peak.
            let off = Duration::from_ps(self.off.sample(&mut self.rng).round() as u64);
            let on = Duration::from_ps(self.on.sample(&mut self.rng).round() as u64);
            self.next = (self.on_until + off).max(self.next);
            self.on_until = self.on_until + off + on;
        }
        let e = Emission {
            at: self.next,
            size: self.size,
            index: self.index,
        };
        self.index += 1;
        self.next += self.interval;
        Some(e)
    }
}

/// Poisson arrivals of `size`-byte units at `rate` per second.
#[derive(Debug, Clone)]
pub struct Poisson {
    size: Bytes,
    gap: Exp<f64>,
    rng: ChaCha8Rng,
    now: Time,
    index: u64,
}

impl Poisson {
    /// A source from `start`; `per_second` must be positive and finite.
    pub fn new(start: Time, per_second: f64, size: Bytes, seed: u64) -> Option<Poisson> {
        if !(per_second.is_finite() && per_second > 0.0) {
            return None;
        }
        let gap = Exp::new(per_second / 1e12).ok()?;
        Some(Poisson {
            size,
            gap,
            rng: ChaCha8Rng::seed_from_u64(seed),
            now: start,
            index: 0,
        })
    }
}

impl Iterator for Poisson {
    type Item = Emission;
    fn next(&mut self) -> Option<Emission> {
        self.now += Duration::from_ps(self.gap.sample(&mut self.rng).round() as u64);
        let e = Emission {
            at: self.now,
            size: self.size,
            index: self.index,
        };
        self.index += 1;
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_off_packets_are_evenly_spaced_while_on_and_the_duty_cycle_holds() {
        let (on, off) = (Duration::from_ms(2), Duration::from_ms(6));
        let src = OnOff::new(
            Time::ZERO,
            on,
            off,
            Duration::from_us(10),
            Bytes::new(640),
            7,
        )
        .unwrap();
        let horizon = Time::ZERO + Duration::from_ms(20_000);
        let v: Vec<Emission> = src.take_while(|e| e.at < horizon).collect();
        // Gaps are the interval inside an ON period, longer across an OFF one.
        let gaps: Vec<u64> = v.windows(2).map(|w| (w[1].at - w[0].at).as_ps()).collect();
        assert!(gaps.iter().all(|&g| g >= Duration::from_us(10).as_ps()));
        let at_rate = gaps
            .iter()
            .filter(|&&g| g == Duration::from_us(10).as_ps())
            .count();
        assert!(at_rate as f64 > 0.95 * gaps.len() as f64);
        // Packets sent = duty · horizon / interval, within 5 % over 2,500 periods.
        let want = OnOff::duty(on, off) * 20.0 / 1e-5;
        assert!(
            (v.len() as f64 / want - 1.0).abs() < 0.05,
            "{} vs {want}",
            v.len()
        );
    }

    #[test]
    fn poisson_rates_hold_and_seeds_reproduce() {
        let horizon = Time::ZERO + Duration::from_ms(1000);
        let a: Vec<Emission> = Poisson::new(Time::ZERO, 10_000.0, Bytes::new(640), 3)
            .unwrap()
            .take_while(|e| e.at < horizon)
            .collect();
        assert!(
            (a.len() as f64 / 10_000.0 - 1.0).abs() < 0.05,
            "{}",
            a.len()
        );
        let b: Vec<Emission> = Poisson::new(Time::ZERO, 10_000.0, Bytes::new(640), 3)
            .unwrap()
            .take_while(|e| e.at < horizon)
            .collect();
        assert_eq!(a, b);
        assert!(Poisson::new(Time::ZERO, 0.0, Bytes::new(1), 1).is_none());
    }
}
