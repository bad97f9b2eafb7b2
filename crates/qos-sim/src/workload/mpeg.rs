//! MPEG video streams: frame sizes from a trace file, or from a synthetic GOP generator
//! when no trace is at hand (the papers' traces — Yum et al.'s seven MPEG-2 traces [36],
//! Nagar et al.'s MPEG-1 traces of Rose [16] — are not available here).
//!
//! **Trace files**: one frame per line, in display order: a size, or a frame type and a
//! size (`I 43200`); `#` starts a comment; sizes in bits (the unit of Rose's MPEG-1
//! traces) or bytes, as the caller says. Errors name the file and line.
//!
//! **Synthetic streams** ([`Synthetic`]): the GOP `IBBPBBPBBPBB` repeated at a frame rate,
//! mean frame sizes in the ratio I : P : B given by the class (default 5 : 2.5 : 1), each
//! frame's size lognormal around its type's mean (coefficient of variation `cv`, default
//! 0.25), and a per-GOP scene factor, lognormal with mean 1 (`scene_cv`, default 0.3),
//! scaling every frame of the GOP: the slow, scene-driven variation of real video.
//! Scaled so the long-run mean rate is the class's. The ratios and variations are
//! assumptions of the order seen in published MPEG trace statistics, not fitted to the
//! papers' traces; they are parameters of every scenario that uses them.

use qos_core::source::Located;
use qos_core::units::{Bandwidth, Bytes, Duration, Time};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};

use super::Emission;

/// The GOP of both papers' streams.
pub const GOP: &str = "IBBPBBPBBPBB";

/// Frame type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameType {
    /// Intra-coded.
    I,
    /// Predicted.
    P,
    /// Bidirectional.
    B,
}

/// Unit of a trace file's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeUnit {
    /// Bits (Rose's MPEG traces).
    Bits,
    /// Bytes.
    Bytes,
}

/// Frame sizes read from a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Sizes in frame order.
    pub frames: Vec<Bytes>,
}

impl Trace {
    /// Parses a trace file's text (`file` names it in errors).
    pub fn parse(file: &str, text: &str, unit: SizeUnit) -> Result<Trace, Located> {
        let mut frames = Vec::new();
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let here = offset;
            offset += line.len();
            let body = line.split('#').next().unwrap_or("").trim();
            if body.is_empty() {
                continue;
            }
            let fields: Vec<&str> = body.split_whitespace().collect();
            let size = match fields.as_slice() {
                [s] => *s,
                [t, s] if matches!(*t, "I" | "P" | "B" | "i" | "p" | "b") => *s,
                _ => {
                    return Err(Located::at(
                        file,
                        text,
                        here,
                        format!(
                        "expected a frame size, or a frame type (I, P, B) and a size, not '{body}'"
                    ),
                    ))
                }
            };
            let v: u64 = size.parse().map_err(|_| {
                Located::at(
                    file,
                    text,
                    here,
                    format!(
                        "'{size}' is not a whole number of {}",
                        match unit {
                            SizeUnit::Bits => "bits",
                            SizeUnit::Bytes => "bytes",
                        }
                    ),
                )
            })?;
            let bytes = match unit {
                SizeUnit::Bits => v.div_ceil(8),
                SizeUnit::Bytes => v,
            };
            frames.push(Bytes::new(bytes));
        }
        if frames.is_empty() {
            return Err(Located::whole(file, "the trace has no frames"));
        }
        Ok(Trace { frames })
    }

    /// Mean rate at `fps` frames per second.
    pub fn mean_rate(&self, fps: f64) -> Bandwidth {
        let total: u64 = self.frames.iter().map(|b| b.get()).sum();
        Bandwidth::from_bytes_per_sec((total as f64 / self.frames.len() as f64 * fps) as u64)
    }
}

/// A synthetic stream's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Synthetic {
    /// Long-run mean rate.
    pub mean_rate: Bandwidth,
    /// Frames per second (30 for Yum's MPEG-2, 25 for Rose's MPEG-1 traces).
    pub fps: f64,
    /// Mean size of I, P and B frames relative to each other.
    pub ratio: [f64; 3],
    /// Coefficient of variation of a frame's size within its type.
    pub cv: f64,
    /// Coefficient of variation of the per-GOP scene factor.
    pub scene_cv: f64,
}

impl Synthetic {
    /// A stream of `mean_rate` at `fps` with the default shape.
    pub fn new(mean_rate: Bandwidth, fps: f64) -> Synthetic {
        Synthetic {
            mean_rate,
            fps,
            ratio: [5.0, 2.5, 1.0],
            cv: 0.25,
            scene_cv: 0.3,
        }
    }

    /// Mean sizes (bytes) of I, P and B frames giving the mean rate over a GOP.
    pub fn mean_sizes(&self) -> [f64; 3] {
        let per_gop = self.mean_rate.bytes_per_sec() as f64 * GOP.len() as f64 / self.fps;
        let (i, p, b) = count_types();
        let unit = per_gop / (i * self.ratio[0] + p * self.ratio[1] + b * self.ratio[2]);
        [
            unit * self.ratio[0],
            unit * self.ratio[1],
            unit * self.ratio[2],
        ]
    }

    /// The frames of one stream from `start`, seeded.
    pub fn frames(&self, start: Time, seed: u64) -> Option<Frames> {
        self.frames_from(start, seed, 0)
    }

    /// The frames of one stream whose first frame, at `start`, is frame `first` of the
    /// GOP pattern (streams joined part-way through a GOP, so that the I frames of
    /// streams started together do not coincide). Frames keep their index.
    pub fn frames_from(&self, start: Time, seed: u64, first: u64) -> Option<Frames> {
        if !(self.fps.is_finite() && self.fps > 0.0 && self.cv >= 0.0 && self.scene_cv >= 0.0)
            || self.ratio.iter().any(|r| !(r.is_finite() && *r > 0.0))
        {
            return None;
        }
        Some(Frames {
            means: self.mean_sizes(),
            frame: lognormal(1.0, self.cv)?,
            scene: lognormal(1.0, self.scene_cv)?,
            scene_now: 1.0,
            period: Duration::from_ps((1e12 / self.fps).round() as u64),
            start,
            rng: ChaCha8Rng::seed_from_u64(seed),
            first,
            index: first,
        })
    }
}

fn count_types() -> (f64, f64, f64) {
    let c = |t| GOP.chars().filter(|&x| x == t).count() as f64;
    (c('I'), c('P'), c('B'))
}

/// A lognormal distribution with the given mean and coefficient of variation.
fn lognormal(mean: f64, cv: f64) -> Option<LogNormal<f64>> {
    let s2 = (1.0 + cv * cv).ln();
    LogNormal::new(mean.ln() - s2 / 2.0, s2.sqrt()).ok()
}

/// The type of frame `index` of a stream.
pub fn frame_type(index: u64) -> FrameType {
    match GOP.as_bytes()[(index % GOP.len() as u64) as usize] {
        b'I' => FrameType::I,
        b'P' => FrameType::P,
        _ => FrameType::B,
    }
}

/// The frames of a synthetic stream, one every 1/fps.
#[derive(Debug, Clone)]
pub struct Frames {
    means: [f64; 3],
    frame: LogNormal<f64>,
    scene: LogNormal<f64>,
    scene_now: f64,
    period: Duration,
    start: Time,
    rng: ChaCha8Rng,
    first: u64,
    index: u64,
}

impl Iterator for Frames {
    type Item = Emission;
    fn next(&mut self) -> Option<Emission> {
        if self.index.is_multiple_of(GOP.len() as u64) || self.index == self.first {
            self.scene_now = self.scene.sample(&mut self.rng);
        }
        let t = frame_type(self.index) as usize;
        let size = (self.means[t] * self.scene_now * self.frame.sample(&mut self.rng)).max(1.0);
        let e = Emission {
            at: self.start + self.period * (self.index - self.first),
            size: Bytes::new(size.round() as u64),
            index: self.index,
        };
        self.index += 1;
        Some(e)
    }
}

/// The frames of a trace, one every 1/fps, from frame `offset` (streams started at
/// different points of one trace, as the papers' simulators do), wrapping around.
pub fn trace_frames(
    trace: &Trace,
    fps: f64,
    start: Time,
    offset: usize,
) -> impl Iterator<Item = Emission> + '_ {
    let period = Duration::from_ps((1e12 / fps.max(1e-9)).round() as u64);
    let n = trace.frames.len();
    (0u64..).map(move |i| Emission {
        at: start + period * i,
        size: trace.frames[(offset + i as usize) % n],
        index: i,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_parse_in_bits_or_bytes_and_errors_name_the_line() {
        let t = Trace::parse(
            "t.txt",
            "# Rose format\n43200\nB 8000\n\n16000 # P\n",
            SizeUnit::Bits,
        )
        .unwrap();
        assert_eq!(
            t.frames,
            vec![Bytes::new(5400), Bytes::new(1000), Bytes::new(2000)]
        );
        assert_eq!(t.mean_rate(30.0).bytes_per_sec(), (8400 / 3) * 30);
        let e = Trace::parse("t.txt", "100\n200\nx 9\n", SizeUnit::Bytes).unwrap_err();
        assert!(e.to_string().starts_with("t.txt:3"), "{e}");
        let e = Trace::parse("t.txt", "100\n-5\n", SizeUnit::Bytes).unwrap_err();
        assert!(e.to_string().starts_with("t.txt:2"), "{e}");
        assert!(Trace::parse("t.txt", "# nothing\n", SizeUnit::Bytes).is_err());
    }

    #[test]
    fn synthetic_streams_have_their_mean_rate_gop_shape_and_frame_rate() {
        let s = Synthetic::new(Bandwidth::from_bytes_per_sec(500_000), 30.0);
        let frames: Vec<Emission> = s.frames(Time::ZERO, 1).unwrap().take(30 * 600).collect();
        let total: u64 = frames.iter().map(|f| f.size.get()).sum();
        let rate = total as f64 / 600.0;
        assert!((rate / 500_000.0 - 1.0).abs() < 0.03, "{rate}");
        // 33.3 ms apart.
        assert_eq!((frames[1].at - frames[0].at).as_ps(), 33_333_333_333);
        let mean = |t: FrameType| {
            let v: Vec<f64> = frames
                .iter()
                .filter(|f| frame_type(f.index) == t)
                .map(|f| f.size.get() as f64)
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        let (i, p, b) = (mean(FrameType::I), mean(FrameType::P), mean(FrameType::B));
        assert!(
            (i / b / 5.0 - 1.0).abs() < 0.05 && (p / b / 2.5 - 1.0).abs() < 0.05,
            "{i} {p} {b}"
        );
        // Same seed, same stream; another seed, another.
        let again: Vec<Emission> = s.frames(Time::ZERO, 1).unwrap().take(100).collect();
        assert_eq!(again, frames[..100]);
        let other: Vec<Emission> = s.frames(Time::ZERO, 2).unwrap().take(100).collect();
        assert_ne!(other, frames[..100]);
    }

    #[test]
    fn trace_streams_start_at_an_offset_and_wrap() {
        let t = Trace {
            frames: vec![Bytes::new(1), Bytes::new(2), Bytes::new(3)],
        };
        let v: Vec<u64> = trace_frames(&t, 25.0, Time::ZERO, 2)
            .take(4)
            .map(|e| e.size.get())
            .collect();
        assert_eq!(v, vec![3, 1, 2, 3]);
    }
}
