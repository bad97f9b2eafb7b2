//! Seven synthetic MPEG-2 stream classes standing in for the seven traces of Yum et al.
//! §6.2 ("generated from real MPEG-2 traces [36], where there are 7 video traces with
//! different bandwidth requirements"). The traces (Caminero et al., CANPC'99) are not
//! available and the paper states neither their rates nor their frame-size statistics,
//! so each class here says where its numbers come from:
//!
//! - **Mean rates** span MPEG-2 Main Profile at Main Level, the profile of 720×480,
//!   30 frame/s video, whose level caps the rate at 15 Mbit/s (ISO/IEC 13818-2, Table
//!   8-13): 2, 3, 4, 5, 6, 8 and 10 Mbit/s — an *assumption*, chosen so that the classes
//!   differ in "bandwidth requirements" by a factor of 5 as the paper's do, with a mean
//!   over the seven of 5.43 Mbit/s.
//! - **I : P : B mean frame sizes**: the middle class uses the ratio MPEG-2's Test Model
//!   5 encoder aims at (TM5 §10.1, target bit allocation: initial complexities
//!   X_i = 160·R/115, X_p = 60·R/115, X_b = 42·R/115 with K_p = 1.0, K_b = 1.4, so
//!   T_i : T_p : T_b = 160 : 60 : 30 = 5.33 : 2 : 1). The others are *assumptions* around
//!   it: low-motion content (talking heads) has larger I frames relative to the
//!   predicted ones, high-motion content (sports) smaller, from 8 : 2.5 : 1 to 3 : 1.8 : 1.
//! - **Variation**: each frame lognormal around its type's mean with coefficient of
//!   variation `cv`, times a per-GOP scene factor with coefficient of variation
//!   `scene_cv` ([`super::mpeg::Synthetic`]) — *assumptions*, larger for high-motion
//!   classes.
//!
//! Every stream has the GOP IBBPBBPBBPBB at 30 frames/s (§6.2). Its **peak rate**, the
//! p_i a probe carries for the Limit of High Priority (§3.3), is taken as the mean
//! I-frame size sent within one frame time; its **requested bandwidth** r_i is its mean
//! rate.

use qos_core::units::Bandwidth;
use serde::Serialize;

use super::mpeg::{Synthetic, GOP};

/// Frames per second of the paper's MPEG-2 streams.
pub const FPS: f64 = 30.0;

/// One class of synthetic MPEG-2 streams.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StreamClass {
    /// Name in tables.
    pub name: &'static str,
    /// Mean rate, Mbit/s.
    pub mbit_per_sec: f64,
    /// Mean I : P : B frame sizes.
    pub ratio: [f64; 3],
    /// Coefficient of variation of a frame's size within its type.
    pub cv: f64,
    /// Coefficient of variation of the per-GOP scene factor.
    pub scene_cv: f64,
    /// Where the numbers come from.
    pub source: &'static str,
}

const ASSUMED: &str = "assumed: MP@ML rate (≤ 15 Mbit/s, ISO/IEC 13818-2 Table 8-13); \
                       I:P:B around TM5's 5.33:2:1";

/// The seven classes, lowest rate first.
pub const CLASSES: [StreamClass; 7] = [
    StreamClass {
        name: "mpeg2-a (low motion)",
        mbit_per_sec: 2.0,
        ratio: [8.0, 2.5, 1.0],
        cv: 0.15,
        scene_cv: 0.15,
        source: ASSUMED,
    },
    StreamClass {
        name: "mpeg2-b",
        mbit_per_sec: 3.0,
        ratio: [7.0, 2.4, 1.0],
        cv: 0.2,
        scene_cv: 0.2,
        source: ASSUMED,
    },
    StreamClass {
        name: "mpeg2-c",
        mbit_per_sec: 4.0,
        ratio: [6.0, 2.2, 1.0],
        cv: 0.2,
        scene_cv: 0.25,
        source: ASSUMED,
    },
    StreamClass {
        name: "mpeg2-d (TM5)",
        mbit_per_sec: 5.0,
        ratio: [160.0 / 30.0, 2.0, 1.0],
        cv: 0.25,
        scene_cv: 0.3,
        source: "mean rate assumed; I:P:B = 160:60:30, the target bit allocation of \
                 MPEG-2 Test Model 5 §10.1 (X_i, X_p, X_b = 160, 60, 42 × R/115; \
                 K_p = 1.0, K_b = 1.4)",
    },
    StreamClass {
        name: "mpeg2-e",
        mbit_per_sec: 6.0,
        ratio: [4.5, 2.0, 1.0],
        cv: 0.25,
        scene_cv: 0.3,
        source: ASSUMED,
    },
    StreamClass {
        name: "mpeg2-f",
        mbit_per_sec: 8.0,
        ratio: [3.8, 1.9, 1.0],
        cv: 0.3,
        scene_cv: 0.35,
        source: ASSUMED,
    },
    StreamClass {
        name: "mpeg2-g (high motion)",
        mbit_per_sec: 10.0,
        ratio: [3.0, 1.8, 1.0],
        cv: 0.3,
        scene_cv: 0.4,
        source: ASSUMED,
    },
];

impl StreamClass {
    /// Mean rate r_i.
    pub fn mean_rate(&self) -> Bandwidth {
        Bandwidth::from_bits_per_sec((self.mbit_per_sec * 1e6).round() as u64)
    }

    /// The generator of this class's frames.
    pub fn synthetic(&self) -> Synthetic {
        Synthetic {
            mean_rate: self.mean_rate(),
            fps: FPS,
            ratio: self.ratio,
            cv: self.cv,
            scene_cv: self.scene_cv,
        }
    }

    /// Peak rate p_i: the mean I frame sent within one frame time.
    pub fn peak_rate(&self) -> Bandwidth {
        let i = self.synthetic().mean_sizes()[0];
        Bandwidth::from_bytes_per_sec((i * FPS).round() as u64)
    }

    /// Mean size of an I, P and B frame in bytes.
    pub fn mean_sizes(&self) -> [f64; 3] {
        self.synthetic().mean_sizes()
    }
}

/// Mean rate over the seven classes (a stream drawn uniformly among them).
pub fn mean_rate() -> Bandwidth {
    let bits: f64 = CLASSES.iter().map(|c| c.mbit_per_sec * 1e6).sum::<f64>() / 7.0;
    Bandwidth::from_bits_per_sec(bits.round() as u64)
}

/// Frames per GOP, for documentation and tests.
pub fn gop_len() -> usize {
    GOP.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use qos_core::units::Time;

    #[test]
    fn seven_classes_with_increasing_rates_and_valid_shapes() {
        assert_eq!(CLASSES.len(), 7);
        assert!(CLASSES
            .windows(2)
            .all(|w| w[0].mbit_per_sec < w[1].mbit_per_sec));
        assert_eq!(CLASSES[6].mbit_per_sec / CLASSES[0].mbit_per_sec, 5.0);
        for c in &CLASSES {
            let [i, p, b] = c.ratio;
            assert!(i > p && p > b && b == 1.0, "{}", c.name);
            assert!(c.peak_rate() > c.mean_rate());
            assert!(!c.source.is_empty());
        }
        assert!((mean_rate().bytes_per_sec() as f64 * 8.0 / 1e6 - 5.4286).abs() < 1e-3);
    }

    #[test]
    fn the_tm5_class_has_tm5s_target_ratio_and_its_mean_rate() {
        let c = CLASSES[3];
        let [i, p, b] = c.mean_sizes();
        assert!((i / b - 16.0 / 3.0).abs() < 1e-9 && (p / b - 2.0).abs() < 1e-9);
        // One GOP of 1 I, 3 P and 8 B frames carries 12 frame times at the mean rate.
        let gop = i + 3.0 * p + 8.0 * b;
        let want = c.mean_rate().bytes_per_sec() as f64 * gop_len() as f64 / FPS;
        assert!((gop / want - 1.0).abs() < 1e-9);
        // Peak: the I frame in one frame time = 5.33/(1·5.33 + 3·2 + 8·1) · 12 times
        // the mean rate.
        let peak = c.peak_rate().bytes_per_sec() as f64 / c.mean_rate().bytes_per_sec() as f64;
        assert!((peak - 12.0 * (16.0 / 3.0) / (16.0 / 3.0 + 6.0 + 8.0)).abs() < 1e-3);
    }

    #[test]
    fn generated_streams_keep_their_class_mean_rate() {
        for c in [CLASSES[0], CLASSES[6]] {
            let f = c.synthetic().frames(Time::ZERO, 9).unwrap();
            let n = 30 * 400;
            let bytes: u64 = f.take(n).map(|e| e.size.get()).sum();
            let rate = bytes as f64 / (n as f64 / FPS);
            let want = c.mean_rate().bytes_per_sec() as f64;
            assert!(
                (rate / want - 1.0).abs() < 0.05,
                "{}: {rate} vs {want}",
                c.name
            );
        }
    }
}
