//! What `reproduce nagar --real` measured and how it is shown: the results (per load,
//! scheduler and class), the θ table, the figures (Figs 3–4 on the testbed), the notes
//! and the report.

use serde::Serialize;

use crate::check::{Check, Summary};
use crate::report::checks::{checks_table, sources_table, summary_paragraphs};
use crate::report::{Cell, Figure, Report, Series, Table};

use super::cbr;
use super::params::{
    BEST_EFFORT_CHANNELS, BE_PACKETS_PER_MESSAGE, CLASS_NAMES, DISCIPLINES, PACKETS_PER_MESSAGE,
    PAPER_LINK_MB_S,
};
use super::results::{ClassResult, Point};

/// What a real run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RealResults {
    /// Comparisons with the paper.
    pub checks: Vec<Check>,
    /// Counts of the checks.
    pub summary: Summary,
    /// Link rate of the testbed, B/s (wire bytes).
    pub link_rate_bytes_per_sec: u64,
    /// Payload the link carries in full packets, B/s.
    pub payload_capacity_bytes_per_sec: f64,
    /// Measured Bmax of the sender (one unregulated flow), B/s.
    pub bmax_bytes_per_sec: f64,
    /// Payload bytes per packet.
    pub packet_payload: usize,
    /// Message size, bytes.
    pub message_bytes: usize,
    /// What one of the paper's MB/s is here, B/s (Bmax / 160).
    pub unit_bytes_per_sec: f64,
    /// Seconds measured per run (after the warm-up).
    pub measured_secs: f64,
    /// Seconds of each run not measured (the warm-up).
    pub warmup_secs: f64,
    /// Seed of the phases.
    pub seed: u64,
    /// Whether the generator, receivers and agents ran at real-time priority.
    pub realtime: bool,
    /// The sweep.
    pub points: Vec<Point>,
    /// A replicate study instead of the sweep (`--replicates`): every seed's pair of
    /// runs, and per load, run length and class what the seeds give.
    pub replicates: Vec<super::replicates::Replicate>,
    pub separations: Vec<super::replicates::Separation>,
    /// Plots.
    #[serde(skip)]
    pub figures: Vec<Figure>,
    /// Notes for the report.
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// What the transport and the pacer did over the whole sweep.
pub(super) fn transport_note(points: &[Point]) -> String {
    let runs = points.iter().flat_map(|p| &p.runs);
    let (mut retx, mut drops, mut skipped, mut paced) = (0, 0, 0, 0);
    for r in runs {
        retx += r.retransmits;
        drops += r.sender_queue_drops;
        paced += r.link_paced;
        skipped += r.classes.iter().map(|c| c.skipped).sum::<u64>();
    }
    format!(
        "Over the sweep the sending agents retransmitted {retx} packets, the sender's link queue \
         dropped {drops}, the generator skipped {skipped} emissions (a channel with all its \
         send buffers in flight) and the link pacer ended {paced} dispatch rounds (per run in \
         the JSON)."
    )
}

pub(super) fn notes(r: &RealResults) -> Vec<String> {
    let capacity = r.payload_capacity_bytes_per_sec;
    let (bmax, payload) = (r.bmax_bytes_per_sec, r.packet_payload);
    vec![
        format!(
            "Scaling: the paper's card sends at Myrinet's {PAPER_LINK_MB_S} MB/s; a class of X MB/s \
             sends X/{PAPER_LINK_MB_S} of the measured Bmax here ({:.2} MB/s of payload; the link \
             carries {:.2} MB/s of payload in full packets), so one paper MB/s is {:.1} kB/s. \
             Messages are {} packets ({} bytes, ~4 KB as the simulated reproduction assumes). Rates \
             and transfer times shrink by the same factor: the experiment is the paper's, slowed \
             {:.0} times.",
            bmax / 1e6,
            capacity / 1e6,
            bmax / PAPER_LINK_MB_S / 1e3,
            PACKETS_PER_MESSAGE,
            payload * PACKETS_PER_MESSAGE,
            PAPER_LINK_MB_S * 1e6 / bmax.max(1.0)
        ),
        format!(
            "Loads: 1 to 5 channels per class (the paper's 6 to 30 MB/s, up to 19 % of the link), \
             then 10 to 25 (up to 94 %): the paper could not load its platform more (its VIA had no \
             flow control, §4.1) and expected the differences at higher loads. Each run: {:.0} s, the \
             first {:.1} s not measured; channels start at seeded random phases, the same for every \
             scheduler at a load; each scheduler runs in fresh data planes, paced to the link rate \
             so that the backlog waits in the scheduler, not in the kernel's FIFO queue below it.",
            r.measured_secs + r.warmup_secs,
            r.warmup_secs
        ),
        format!(
            "Measured as the paper did: θ and the fraction of messages with jitter from the \
             receiving applications' receipt times (mean jitter over all messages / negotiated \
             inter-arrival time; a receipt later than the negotiated time after the previous one \
             has the difference as jitter). The generator's lateness (p99 column) and the \
             receiving threads' wake-ups are the host's own noise, which every scheduler sees \
             alike. {}",
            if r.realtime {
                "The paper assumes a QoS-aware OS scheduler under its generator (§4): the \
                 generator, the receivers and the agents ran at real-time priority (SCHED_FIFO)."
            } else {
                "They ran WITHOUT real-time priority (not permitted here): on a loaded host the \
                 time-sharing scheduler's delays show as jitter under every packet scheduler."
            }
        ),
        "Schedulers: rate control and VirtualClock get every channel's reservation (VirtualClock's \
         Vtick is the time one packet takes at the reserved rate); fcfs is VirtualClock with no \
         reservations, every channel best-effort and served first come first served — PVIA's \
         order, so QoSVIA against PVIA is virtual-clock against fcfs; round robin and GM ignore \
         reservations."
            .into(),
        format!(
            "Best-effort (beyond the paper's platform; the BE channel of its simulated Fig 5): at \
             {} channels per class the classes run again beside a greedy best-effort channel from \
             the same sender to a fifth host, {} messages of {} bytes always queued at the agent. \
             It has no reservation: VirtualClock serves it when no stamped packet waits; rate \
             control paces it at what the reservations leave of Bmax, as the thesis's manager \
             shares it; fcfs, round robin and GM serve it like any channel.",
            BEST_EFFORT_CHANNELS.map(|k| k.to_string()).join(" and "),
            cbr::BE_DEPTH,
            payload * BE_PACKETS_PER_MESSAGE
        ),
    ]
}

pub(super) fn figures(points: &[Point]) -> Vec<Figure> {
    let mut out = Vec::new();
    for (c, name) in CLASS_NAMES.iter().enumerate() {
        let mut theta = Figure::new(
            format!("real-fig-3-theta-{c}"),
            format!("Fig 3 on the testbed: θ of the {name} class"),
            "offered load / Bmax",
            "jitter fraction θ",
        );
        let mut jit = Figure::new(
            format!("real-fig-4-jittered-{c}"),
            format!("Fig 4 on the testbed: messages with jitter, {name} class"),
            "offered load / Bmax",
            "fraction of messages with jitter",
        );
        for d in &DISCIPLINES {
            let pts = |f: &dyn Fn(&ClassResult) -> f64| -> Vec<(f64, f64)> {
                points
                    .iter()
                    .filter(|p| !p.best_effort)
                    .filter_map(|p| p.run(d.name).map(|r| (p.load_fraction, f(&r.classes[c]))))
                    .collect()
            };
            theta.series.push(Series::new(d.name, pts(&|x| x.theta)));
            jit.series.push(Series::new(d.name, pts(&|x| x.jittered)));
        }
        out.push(theta);
        out.push(jit);
    }
    out
}

/// θ, messages with jitter and latency of every class, scheduler and load.
pub fn results_table(r: &RealResults) -> Table {
    let mut t = Table::new(
        "real-fig-3-4",
        "Figs 3-4 on the testbed: θ and messages with jitter per class and scheduler",
        [
            "channels/class",
            "paper load (MB/s)",
            "load (fraction of Bmax)",
            "best-effort channel",
            "scheduler",
            "θ 1 MB/s",
            "θ 2 MB/s",
            "θ 3 MB/s",
            "jittered 1 MB/s",
            "jittered 2 MB/s",
            "jittered 3 MB/s",
            "mean latency (ms)",
            "best-effort (MB/s)",
            "source late p99 (us)",
        ],
    );
    for p in &r.points {
        for run in &p.runs {
            let mut row = vec![
                Cell::from(p.channels_per_class),
                Cell::fixed(p.paper_load_mb_s, 0),
                Cell::fixed(p.load_fraction, 3),
                Cell::from(p.best_effort),
                Cell::from(run.scheduler),
            ];
            row.extend(run.classes.iter().map(|c| Cell::fixed(c.theta, 4)));
            row.extend(run.classes.iter().map(|c| Cell::fixed(c.jittered, 4)));
            let (n, sum) = run.classes.iter().fold((0u64, 0.0), |(n, s), c| {
                (n + c.messages, s + c.latency_ms * c.messages as f64)
            });
            row.push(Cell::fixed(sum / (n.max(1)) as f64, 2));
            row.push(Cell::maybe(run.best_effort_mb_s).with_digits(2));
            row.push(Cell::fixed(run.source_late_p99_us, 0));
            t.push(row);
        }
    }
    t
}

/// The schedulers compared.
fn disciplines_table() -> Table {
    let mut t = Table::new(
        "real-schedulers",
        "The packet schedulers compared (the agent's data plane)",
        [
            "name",
            "agent --scheduler",
            "reservations in its table",
            "what",
        ],
    );
    for d in &DISCIPLINES {
        t.push([
            Cell::from(d.name),
            Cell::from(d.kind.name()),
            Cell::from(d.reserved),
            Cell::from(d.about),
        ]);
    }
    t
}

/// Title of the report of a real run.
pub const TITLE: &str = "Nagar et al., Figs 3-4 on real traffic: CBR classes under five packet schedulers on a testbed of network namespaces, alone and beside a best-effort channel";

/// The report of a real run.
pub fn report(r: &RealResults, title: &str) -> Report {
    let mut report = Report::new(title);
    report.summary.extend(summary_paragraphs(&r.summary));
    report.summary.push(format!(
        "Testbed: 1 sender, 3 class receivers and a best-effort receiver, links shaped to {} B/s each way (tbf); measured \
         Bmax {:.2} MB/s; {}-byte messages; {:.0} s measured per run, seed {}.",
        r.link_rate_bytes_per_sec,
        r.bmax_bytes_per_sec / 1e6,
        r.message_bytes,
        r.measured_secs,
        r.seed
    ));
    report.summary.push(
        "Orderings, not values: the figures' values are not in the paper's text, and the \
         testbed is not the paper's platform; the checks are the orderings §4.1 states (QoSVIA \
         ~ virtual-clock against PVIA ~ fcfs), θ bounds where the reservations fit the link, \
         and, beside a best-effort channel, that reservation-aware schedulers keep every \
         class's θ below round robin's and GM's."
            .into(),
    );
    if r.separations.is_empty() {
        report.tables.push(results_table(r));
    } else {
        report.tables.push(super::replicates::table(&r.separations));
    }
    let refs: Vec<&Check> = r.checks.iter().collect();
    report.tables.push(checks_table(&refs));
    report.tables.push(sources_table(&refs));
    report.tables.push(disciplines_table());
    report.figures = r.figures.clone();
    report.notes = r.notes.clone();
    report
}
