//! The traffic mix of Yum et al. §6.2 and §7: an offered load per node as a fraction of
//! the link bandwidth, split between real-time and best-effort traffic ("most of the
//! results … are presented for a real-time to best-effort ratio of 80:20"; 50:50 for
//! peak power control), with the real-time share made of MPEG-2 streams drawn among
//! the seven classes ([`super::classes`]) until the node's real-time load is reached.

use qos_core::units::Bandwidth;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::classes::CLASSES;

/// The real-time fraction of the offered load (0.8 for the paper's 80:20).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Mix(pub f64);

impl Default for Mix {
    fn default() -> Self {
        Mix(0.8)
    }
}

impl Mix {
    /// Whether the fraction is in 0..=1.
    pub fn is_valid(self) -> bool {
        (0.0..=1.0).contains(&self.0)
    }

    /// (real-time, best-effort) bandwidth per node for an offered `load` (fraction of
    /// `link`).
    pub fn split(self, load: f64, link: Bandwidth) -> (Bandwidth, Bandwidth) {
        let total = load.max(0.0) * link.bytes_per_sec() as f64;
        let rt = total * self.0.clamp(0.0, 1.0);
        (
            Bandwidth::from_bytes_per_sec(rt.round() as u64),
            Bandwidth::from_bytes_per_sec((total - rt).round() as u64),
        )
    }
}

/// Stream classes (indices into [`CLASSES`]) drawn uniformly at random until their
/// mean rates add up to `target`: the last stream drawn is kept when it brings the sum
/// closer to the target than leaving it out would.
pub fn fill_streams(target: Bandwidth, rng: &mut impl Rng) -> Vec<usize> {
    let want = target.bytes_per_sec();
    let mut out = Vec::new();
    let mut sum = 0u64;
    while sum < want {
        let c = rng.gen_range(0..CLASSES.len());
        let r = CLASSES[c].mean_rate().bytes_per_sec();
        if sum + r > want && sum + r - want > want - sum {
            break;
        }
        out.push(c);
        sum += r;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_default_mix_is_80_20_of_the_offered_load() {
        // 70 % of a 1.6 Gbit/s link: 112 MB/s real time, 28 MB/s best effort.
        let link = Bandwidth::from_bits_per_sec(1_600_000_000);
        let (rt, be) = Mix::default().split(0.7, link);
        assert_eq!(rt.bytes_per_sec(), 112_000_000);
        assert_eq!(be.bytes_per_sec(), 28_000_000);
        assert!(!Mix(1.2).is_valid());
    }

    #[test]
    fn streams_fill_a_nodes_real_time_load_to_within_one_stream() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let target = Bandwidth::from_bytes_per_sec(128_000_000);
        for _ in 0..50 {
            let s = fill_streams(target, &mut rng);
            let sum: u64 = s
                .iter()
                .map(|&c| CLASSES[c].mean_rate().bytes_per_sec())
                .sum();
            let half_biggest = CLASSES[6].mean_rate().bytes_per_sec() / 2;
            assert!(
                sum.abs_diff(target.bytes_per_sec()) <= half_biggest,
                "{sum}"
            );
        }
        assert!(fill_streams(Bandwidth::ZERO, &mut rng).is_empty());
    }
}
