//! How long a real run must be for VirtualClock and first come first served to be told
//! apart (`reproduce nagar --real --replicates N`): at a few loads, each run length is
//! run with N seeds (each seed its own channel phases, the same for both schedulers),
//! VirtualClock and fcfs back to back; per class, the seeds' paired differences of θ
//! give the replicate variance and a 95 % interval of the mean difference. The two are
//! *separated* at a run length when that interval excludes 0 — the question the
//! sweep's one-run orderings cannot answer, since one run per scheduler has no
//! interval.

use qos_sim::iba::metrics::Estimate;
use serde::Serialize;

use super::params::CLASS_NAMES;
use super::results::Run;
use crate::report::{Cell, Table};

/// What to run: `seeds` seeds at each of `secs` run lengths and each load.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Seeds per load and run length (the phases of seed s + k, k < seeds).
    pub seeds: u32,
    /// Run lengths, seconds (each with the sweep's warm-up before it).
    pub secs: Vec<f64>,
    /// Loads: channels per class, with the greedy best-effort channel or not.
    pub loads: Vec<(u32, bool)>,
}

/// The schedulers compared: QoSVIA's discipline and PVIA's order.
pub const PAIR: [&str; 2] = ["virtual-clock", "fcfs"];

/// Parses a load of `--replicate-loads`: channels per class, `+be` for the best-effort
/// channel beside them ("25+be").
pub fn parse_load(s: &str) -> Option<(u32, bool)> {
    let (k, be) = match s.strip_suffix("+be") {
        Some(k) => (k, true),
        None => (s, false),
    };
    k.trim().parse().ok().filter(|k| *k > 0).map(|k| (k, be))
}

/// One seed at one load and run length: both schedulers.
#[derive(Debug, Clone, Serialize)]
pub struct Replicate {
    /// Channels per class.
    pub channels_per_class: u32,
    /// With the best-effort channel.
    pub best_effort: bool,
    /// Seconds measured.
    pub secs: f64,
    /// The phases' seed.
    pub seed: u64,
    /// VirtualClock's run, then fcfs's.
    pub runs: [Run; 2],
}

/// One class at one load and run length, over the seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Separation {
    /// Channels per class.
    pub channels_per_class: u32,
    /// With the best-effort channel.
    pub best_effort: bool,
    /// Seconds measured per run.
    pub secs: f64,
    /// The class.
    pub class: &'static str,
    /// Seeds.
    pub seeds: usize,
    /// Mean θ under VirtualClock and under fcfs.
    pub vc_theta: f64,
    pub fcfs_theta: f64,
    /// Standard deviation of θ over the seeds (replicate variance), each scheduler.
    pub vc_sd: f64,
    pub fcfs_sd: f64,
    /// Mean of the seeds' differences VirtualClock − fcfs, and the half-width of its
    /// 95 % interval (t distribution; NaN with one seed).
    pub diff: f64,
    pub half_width: f64,
    /// Whether the interval excludes 0: the two are told apart.
    pub separated: bool,
}

fn sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return f64::NAN;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// Per load, run length and class, what the seeds give.
pub fn separations(reps: &[Replicate]) -> Vec<Separation> {
    let mut keys: Vec<(u32, bool, f64)> = Vec::new();
    for r in reps {
        let k = (r.channels_per_class, r.best_effort, r.secs);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = Vec::new();
    for (k, be, secs) in keys {
        let mine: Vec<&Replicate> = reps
            .iter()
            .filter(|r| (r.channels_per_class, r.best_effort, r.secs) == (k, be, secs))
            .collect();
        for (c, class) in CLASS_NAMES.iter().enumerate() {
            let vc: Vec<f64> = mine.iter().map(|r| r.runs[0].classes[c].theta).collect();
            let fc: Vec<f64> = mine.iter().map(|r| r.runs[1].classes[c].theta).collect();
            let d: Vec<f64> = vc.iter().zip(&fc).map(|(a, b)| a - b).collect();
            let n = d.len() as f64;
            let diff = d.iter().sum::<f64>() / n;
            let half_width = Estimate::batch_means(diff, &d).half_width;
            out.push(Separation {
                channels_per_class: k,
                best_effort: be,
                secs,
                class,
                seeds: d.len(),
                vc_theta: vc.iter().sum::<f64>() / n,
                fcfs_theta: fc.iter().sum::<f64>() / n,
                vc_sd: sd(&vc),
                fcfs_sd: sd(&fc),
                diff,
                half_width,
                separated: half_width.is_finite() && diff.abs() > half_width,
            });
        }
    }
    out
}

/// The table of [`separations`].
pub fn table(seps: &[Separation]) -> Table {
    let mut t = Table::new(
        "fig-3-4-real-replicates",
        "VirtualClock against fcfs over seeds: θ per class, its spread over the seeds, and \
         the 95 % interval of the mean paired difference",
        [
            "load (ch/class)",
            "run (s)",
            "class",
            "seeds",
            "θ virtual-clock",
            "sd",
            "θ fcfs",
            "sd",
            "virtual-clock − fcfs",
            "± (95 %)",
            "told apart",
        ],
    );
    for s in seps {
        t.push([
            Cell::from(format!(
                "{}{}",
                s.channels_per_class,
                if s.best_effort { " + BE" } else { "" }
            )),
            Cell::fixed(s.secs, 0),
            Cell::from(s.class),
            Cell::from(s.seeds as u64),
            Cell::fixed(s.vc_theta, 4),
            Cell::fixed(s.vc_sd, 4),
            Cell::fixed(s.fcfs_theta, 4),
            Cell::fixed(s.fcfs_sd, 4),
            Cell::fixed(s.diff, 4),
            Cell::fixed(s.half_width, 4),
            Cell::from(match (s.separated, s.diff < 0.0) {
                (false, _) => "no",
                (true, true) => "yes: virtual-clock lower",
                (true, false) => "yes: fcfs lower",
            }),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nagar::real::results::ClassResult;

    fn run(name: &'static str, theta: [f64; 3]) -> Run {
        Run {
            scheduler: name,
            classes: theta
                .iter()
                .map(|&t| ClassResult {
                    theta: t,
                    ..ClassResult::default()
                })
                .collect(),
            source_late_p99_us: 0.0,
            best_effort_mb_s: None,
            retransmits: 0,
            link_paced: 0,
            held_back: 0,
            sender_queue_drops: 0,
        }
    }

    #[test]
    fn a_consistent_paired_difference_is_told_apart_and_noise_is_not() {
        let rep = |seed, vc: [f64; 3], fcfs: [f64; 3]| Replicate {
            channels_per_class: 5,
            best_effort: false,
            secs: 6.0,
            seed,
            runs: [run("virtual-clock", vc), run("fcfs", fcfs)],
        };
        // Class 1: VirtualClock lower by ~0.002 in every seed though the seeds' own θ
        // vary ten times more. Class 2: differences of both signs. Class 3: equal.
        let reps = [
            rep(1, [0.010, 0.010, 0.003], [0.012, 0.008, 0.003]),
            rep(2, [0.030, 0.020, 0.003], [0.0321, 0.023, 0.003]),
            rep(3, [0.050, 0.010, 0.003], [0.0519, 0.006, 0.003]),
        ];
        let s = separations(&reps);
        assert_eq!(s.len(), 3);
        assert!(s[0].separated && s[0].diff < 0.0, "{:?}", s[0]);
        assert!(s[0].vc_sd > 5.0 * s[0].half_width / 3.0, "{:?}", s[0]);
        assert!(!s[1].separated, "{:?}", s[1]);
        assert!(!s[2].separated, "{:?}", s[2]);
        // One seed gives no interval.
        assert!(!separations(&reps[..1])[0].separated);
        assert_eq!(parse_load("25+be"), Some((25, true)));
        assert_eq!(parse_load("5"), Some((5, false)));
        assert_eq!(parse_load("0"), None);
        assert_eq!(parse_load("x"), None);
    }
}
