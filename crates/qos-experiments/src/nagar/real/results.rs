//! What one run of Nagar et al.'s Figs 3–4 on real traffic measured: per class
//! ([`ClassResult`]), per scheduler at one load ([`Run`]) and per load ([`Point`]).

use serde::Serialize;

/// One class of one run.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ClassResult {
    /// Jitter fraction θ.
    pub theta: f64,
    /// Fraction of messages with jitter.
    pub jittered: f64,
    /// Messages measured (intervals between receipts).
    pub messages: u64,
    /// Emissions skipped because the channel's send buffers were all in flight.
    pub skipped: u64,
    /// Mean one-way latency (posting to receipt), ms.
    pub latency_ms: f64,
}

/// One scheduler at one load.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// The discipline's name.
    pub scheduler: &'static str,
    /// Per class, in [`super::params::CLASSES_MB_S`] order.
    pub classes: Vec<ClassResult>,
    /// The generator's 99th-percentile lateness against the schedule, µs (the host's
    /// own noise at the source).
    pub source_late_p99_us: f64,
    /// What the best-effort channel got, MB/s (with one).
    pub best_effort_mb_s: Option<f64>,
    /// The sending agent's counters: retransmissions, dispatch rounds ended by the link
    /// pacer, and by rate control.
    pub retransmits: u64,
    pub link_paced: u64,
    pub held_back: u64,
    /// Packets the sending host's link queue dropped during the run.
    pub sender_queue_drops: u64,
}

impl Run {
    /// The largest θ of any class.
    pub fn worst_theta(&self) -> f64 {
        self.classes.iter().map(|c| c.theta).fold(0.0, f64::max)
    }
}

/// One load of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Whether a greedy best-effort channel ran beside the classes.
    pub best_effort: bool,
    /// Channels in each class.
    pub channels_per_class: u32,
    /// The load in the paper's MB/s (6 per channel per class).
    pub paper_load_mb_s: f64,
    /// The offered load as a fraction of the measured Bmax.
    pub load_fraction: f64,
    /// Every discipline, in [`super::params::DISCIPLINES`] order.
    pub runs: Vec<Run>,
}

impl Point {
    /// The run of the discipline named.
    pub fn run(&self, name: &str) -> Option<&Run> {
        self.runs.iter().find(|r| r.scheduler == name)
    }
}
