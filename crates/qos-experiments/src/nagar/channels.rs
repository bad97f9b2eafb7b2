//! Nagar Figs 3–6 in the model, and the comparisons beyond the paper: one sender, one
//! receiver per class of QoS channels and one for the best-effort channel; at each load
//! point of the sweep the channels of every class are opened and their sources run, and
//! the receiving applications' receipt times give each class's jitter fraction θ, the
//! fraction of messages with jitter, and the best-effort channel's 1-way latency.
//!
//! Knees are read off the sweeps as the scenario's `[knee]` says. Variants behind
//! admission control ask qos-core's ledger for each QoS channel's bandwidth against
//! the sending node's capacity, which is measured on the model first (a channel
//! offering far more than the NIC can carry, as the thesis measured Bmax).

use qos_core::admission::Ledger;
use qos_core::besteffort;
use qos_core::flow::{Endpoint, Flow, FlowKey};
use qos_core::stream_metrics::Jitter;
use qos_core::topology::{build, NodeCapacity, NodeId, RateParams};
use qos_core::units::{Bandwidth, Bytes, Duration, Time};
use qos_sim::engine::SimRng;
use qos_sim::iba::metrics::Estimate;
use qos_sim::myrinet::{Api, Cluster, FlowSpec, Outcome, Rate, Workload};
use qos_sim::workload::mpeg::Synthetic;
use qos_sim::workload::spec::Spec;
use serde::Serialize;

use super::model::{setup, Options, Results};
use super::scenario::{variant, Defaults, FrameMessage, Metric, Scenario, Variant};
use crate::check::{Check, Comparison, Mechanism, MetricId, Refusals, Unit};
use crate::report::{Cell, Figure, Scale, Series, Table};
use crate::Error;

/// Frames per second of the MPEG-1 streams (Rose's traces, [16] of the paper).
const MPEG_FPS: f64 = 25.0;

/// One load point of one variant.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Total injected load (MB/s).
    pub load: f64,
    /// Load of the channels admitted, plus best-effort (MB/s).
    pub admitted: f64,
    /// QoS channels that asked.
    pub channels: u32,
    /// Of those, refused by admission control.
    pub refused: u32,
    /// Per class: θ, fraction of messages with jitter, intervals between receipts they
    /// were taken over.
    pub classes: Vec<(f64, f64, u64)>,
    /// Per class: the class has channels at this load but none of their messages
    /// emitted in the window was received before its end (the channels refused by
    /// admission control, or a backlog outlasting the run), so θ and the fraction are
    /// not measured: left out of the figures.
    #[serde(skip_serializing_if = "none_set")]
    pub unmeasured: Vec<bool>,
    /// Best-effort mean 1-way latency (µs); None if nothing arrived in the window.
    pub be_latency_us: Option<f64>,
    /// Per class: the 95 % half-widths of θ and of the fraction with jitter over the
    /// seeded replications (None with one replication).
    pub intervals: Vec<(Option<f64>, Option<f64>)>,
    /// The 95 % half-width of the best-effort latency over the replications.
    pub be_interval_us: Option<f64>,
}

/// The sweep of one variant.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    /// The variant.
    pub variant: Variant,
    /// The capacity admission control used (MB/s), if any.
    pub capacity: Option<f64>,
    /// The points, in load order.
    pub points: Vec<Point>,
}

fn none_set(v: &[bool]) -> bool {
    !v.contains(&true)
}

impl Point {
    /// Whether θ and the fraction of class `c` were measured (see `unmeasured`).
    fn measured(&self, c: usize) -> bool {
        !self.unmeasured.get(c).copied().unwrap_or(false)
    }
}

impl Sweep {
    /// Where θ of class `c` first exceeds `theta`, interpolated (None: never). A point
    /// where θ was not measured (see [`Point::unmeasured`]) counts as beyond it.
    pub fn knee(&self, c: usize, theta: f64) -> Option<f64> {
        crossing(
            self.points
                .iter()
                .map(|p| (p.load, p.measured(c).then_some(p.classes[c].0))),
            theta,
        )
    }

    /// Where the best-effort latency first exceeds `limit` µs (nothing received counts
    /// as beyond it).
    pub fn be_saturation(&self, limit: f64) -> Option<f64> {
        crossing(self.points.iter().map(|p| (p.load, p.be_latency_us)), limit)
    }
}

/// The first x where y exceeds `limit`, linearly interpolated between points; a
/// missing y is beyond any limit (and interpolation stops at the point before it).
fn crossing(points: impl Iterator<Item = (f64, Option<f64>)>, limit: f64) -> Option<f64> {
    let mut prev: Option<(f64, f64)> = None;
    for (x, y) in points {
        match (y, prev) {
            (Some(y), _) if y <= limit => prev = Some((x, y)),
            (Some(y), Some((x0, y0))) => return Some(x0 + (limit - y0) / (y - y0) * (x - x0)),
            (None, Some((x0, _))) => return Some(x0 + (x - x0) / 2.0),
            (_, None) => return Some(x),
        }
    }
    None
}

/// Frames sampled to find how many messages a frame becomes on average.
const FRAMES_SAMPLED: usize = 12_000;

/// The mean number of messages a frame of `stream` becomes when cut into messages of
/// at most `limit` (a seeded sample of its frames; 1 when no frame is cut).
fn messages_per_frame(stream: &Synthetic, limit: Bytes) -> f64 {
    let Some(frames) = stream.frames(Time::ZERO, 1) else {
        return 1.0;
    };
    let pieces: u64 = frames
        .take(FRAMES_SAMPLED)
        .map(|e| e.size.get().div_ceil(limit.get().max(1)).max(1))
        .sum();
    pieces as f64 / FRAMES_SAMPLED as f64
}

/// A class's source, the largest message it posts, and its negotiated inter-arrival
/// time of messages (QoSVIA's Vtick). An MPEG channel's frames are cut as the
/// scenario's `frame_message` says; its Vtick is then the frame interval over the
/// mean number of messages per frame.
fn source(s: &Scenario, c: usize, message: Bytes, phase: Duration) -> (Spec, Bytes, Duration) {
    let class = &s.class[c];
    match class.streams {
        Some(n) => {
            let per = Bandwidth::from_bytes_per_sec(
                (class.rate.bytes_per_sec() as f64 / f64::from(n)).round() as u64,
            );
            let stream = Synthetic::new(per, MPEG_FPS);
            let spec = Spec::Mpeg { streams: n, stream };
            let cut = s.frame_message.unwrap_or(FrameMessage::Frame);
            let frames = spec.mean_interval().unwrap_or(Duration::MAX);
            let interval = match cut {
                FrameMessage::Frame => frames,
                FrameMessage::Cut(limit) => Duration::from_ps(
                    (frames.as_ps() as f64 / messages_per_frame(&stream, limit)).round() as u64,
                ),
            };
            (spec, cut.limit(), interval)
        }
        None => {
            let period = class.rate.transfer_time(message).unwrap_or(Duration::MAX);
            (
                Spec::Cbr {
                    period,
                    phase: Duration::from_ps(phase.as_ps() % period.as_ps().max(1)),
                },
                message,
                period,
            )
        }
    }
}

fn duration(s: &Scenario, opt: Options) -> (Duration, Duration) {
    let d = s.duration.unwrap_or(Defaults::DURATION);
    let w = s.warmup.unwrap_or(d / 10);
    if opt.quick {
        ((d / 5).max(Duration::from_ms(20)), w / 5)
    } else {
        (d, w)
    }
}

/// The sending node's capacity for `message`-byte messages under `variant`, measured
/// as the thesis measured Bmax (§5.3): unregulated streams that post whenever they
/// hold a send token, one to each of `receivers` receivers (one receiver alone would
/// be the bottleneck), their delivered bandwidth summed. (Open-loop sources far above
/// capacity would measure less: with no flow control the LANai drowns in doorbells.)
fn capacity(variant: Variant, message: Bytes, receivers: u32, seed: u64) -> (Bandwidth, u64) {
    let n = receivers.max(1);
    let flows = (0..n)
        .map(|r| FlowSpec {
            name: format!("capacity {r}"),
            src: NodeId(0),
            dst: NodeId(r + 1),
            message,
            rate: Rate::Idt(Duration::ZERO),
            workload: Workload::Stream,
            api: Api::Gm,
            start: Time::ZERO,
            stop: None,
        })
        .collect();
    let run = setup(
        variant,
        n as u16 + 1,
        flows,
        Duration::from_ms(5),
        Duration::from_ms(25),
        seed,
    );
    let o = match Cluster::new(run) {
        Ok(c) => c.run(),
        Err(e) => panic!("a crossbar run always builds: {e}"),
    };
    let total: f64 = o.flows.iter().map(|f| f.window_mb_s).sum();
    (
        Bandwidth::from_bytes_per_sec((total * 1e6) as u64),
        o.events,
    )
}

/// Which QoS channels (class, index) the ledger admits, in class order, and the
/// best-effort channel's share.
fn admit(
    s: &Scenario,
    counts: &[u32],
    capacity: Bandwidth,
    message: Bytes,
) -> (Vec<Vec<bool>>, Option<Bandwidth>) {
    let hosts = (s.class.len() + 2) as u16;
    let defaults = build::HostDefaults {
        rate: RateParams {
            t: capacity.transfer_time(message).unwrap_or(Duration::MAX),
            bmax: capacity,
        },
        capacity: NodeCapacity::peak(capacity),
        link: Bandwidth::from_mb_per_sec(160.0),
    };
    let topo = match build::crossbar(hosts, &defaults).and_then(|b| b.build()) {
        Ok(t) => std::sync::Arc::new(t),
        Err(e) => panic!("a crossbar of {hosts} hosts: {e}"),
    };
    let mut ledger = Ledger::new(topo);
    let mut port = 0u16;
    let key = |dst: usize, port: u16| FlowKey {
        src: Endpoint {
            node: NodeId(0),
            port,
        },
        dst: Endpoint {
            node: NodeId(dst as u32),
            port,
        },
        priority: 0,
    };
    let mut admitted = Vec::new();
    for (c, &n) in counts.iter().enumerate() {
        let mut v = Vec::new();
        for i in 0..n {
            port += 1;
            let f = Flow::premium(
                &format!("{}-{i}", s.class[c].name),
                NodeId(0),
                NodeId(1),
                s.class[c].rate,
            )
            .with_key(key(c + 1, port));
            v.push(ledger.request(f).is_ok());
        }
        admitted.push(v);
    }
    let be = s.best_effort.as_ref().map(|_| {
        port += 1;
        let k = key(s.class.len() + 1, port);
        // A best-effort registration never fails on a node of the topology.
        let _ = ledger.request(Flow::best_effort("best-effort", NodeId(0), NodeId(1)).with_key(k));
        besteffort::thesis_rule(&ledger)
            .into_iter()
            .find(|sh| sh.key == k)
            .map_or(Bandwidth::ZERO, |sh| sh.rate)
    });
    (admitted, be)
}

/// One load point of one variant: `replications` runs (each with its own seeded
/// phases and seed) pooled.
fn point(s: &Scenario, v: Variant, i: usize, cap: Option<Bandwidth>, opt: Options) -> (Point, u64) {
    point_with(s, v, i, cap, opt, &|_| {}, false)
}

/// [`point`] with the VIA constants changed by `tweak` and, if `spread`, every channel
/// to a receiver of its own (see [`replication_with`]).
pub(crate) fn point_with(
    s: &Scenario,
    v: Variant,
    i: usize,
    cap: Option<Bandwidth>,
    opt: Options,
    tweak: &dyn Fn(&mut qos_sim::myrinet::nic::via::ViaCalibration),
    spread: bool,
) -> (Point, u64) {
    let reps = s.replications.unwrap_or(Defaults::REPLICATIONS).max(1);
    let mut jitters = vec![Jitter::default(); s.class.len()];
    let (mut be_sum, mut be_n) = (0.0, 0u32);
    let mut events = 0;
    let mut admitted = 0.0;
    let mut refused = 0;
    // Each replication's own values, for the intervals.
    let mut per_rep: Vec<Vec<(f64, f64)>> = vec![Vec::new(); s.class.len()];
    let mut be_reps = Vec::new();
    for r in 0..reps {
        let (js, be, (adm, no), o) = replication_with(s, v, i, cap, opt, r, tweak, spread);
        events += o.events;
        admitted = adm;
        refused = no;
        for ((acc, j), rep) in jitters.iter_mut().zip(js).zip(&mut per_rep) {
            rep.push((j.fraction(), j.jittered_fraction()));
            acc.negotiated = j.negotiated;
            acc.merge(&j);
        }
        if let Some(l) = be {
            be_sum += l;
            be_n += 1;
            be_reps.push(l);
        }
    }
    // The half-width of the mean of the replications' values (None with one).
    let half = |xs: &[f64]| -> Option<f64> {
        let h = Estimate::batch_means(0.0, xs).half_width;
        h.is_finite().then_some(h)
    };
    (
        Point {
            load: s.loads()[i],
            admitted,
            channels: s.channels[i].get_ref().iter().sum(),
            refused,
            unmeasured: jitters
                .iter()
                .enumerate()
                .map(|(c, j)| {
                    j.intervals == 0 && s.channels[i].get_ref().get(c).is_some_and(|&n| n > 0)
                })
                .collect(),
            classes: jitters
                .iter()
                .map(|j| (j.fraction(), j.jittered_fraction(), j.intervals))
                .collect(),
            // A replication where nothing arrived leaves the point without a latency.
            be_latency_us: (be_n == reps && s.best_effort.is_some())
                .then(|| be_sum / f64::from(be_n)),
            intervals: per_rep
                .iter()
                .map(|r| {
                    let t: Vec<f64> = r.iter().map(|x| x.0).collect();
                    let j: Vec<f64> = r.iter().map(|x| x.1).collect();
                    (half(&t), half(&j))
                })
                .collect(),
            be_interval_us: if be_n == reps { half(&be_reps) } else { None },
        },
        events,
    )
}

/// One run of a load point (replication `rep`), with the VIA constants changed by
/// `tweak` and, if `spread`, every channel to a receiver of its own (no two messages
/// meet at a receiving NIC): per class the pooled jitter, the best-effort mean
/// latency, the admitted load, the outcome.
#[allow(clippy::too_many_arguments)]
pub(crate) fn replication_with(
    s: &Scenario,
    v: Variant,
    i: usize,
    cap: Option<Bandwidth>,
    opt: Options,
    rep: u32,
    tweak: &dyn Fn(&mut qos_sim::myrinet::nic::via::ViaCalibration),
    spread: bool,
) -> (Vec<Jitter>, Option<f64>, (f64, u32), Outcome) {
    let counts = s.channels[i].get_ref();
    let message = s.message.unwrap_or(Defaults::MESSAGE);
    let seed = opt
        .seed
        .or(s.seed)
        .unwrap_or(crate::experiment::DEFAULT_SEED)
        + u64::from(rep);
    let (until, warmup) = duration(s, opt);
    let receiver = |class: usize, flow: usize| {
        NodeId(if spread {
            flow as u32 + 1
        } else {
            class as u32 + 1
        })
    };
    let (admitted, be_share) = match cap {
        Some(c) if v.admits() => admit(s, counts, c, message),
        _ => (
            counts.iter().map(|&n| vec![true; n as usize]).collect(),
            None,
        ),
    };
    // Phases from the point's own stream: the same for every variant.
    let mut rng = SimRng::stream(seed, i as u64 + 1);
    let mut flows = Vec::new();
    let mut classes = Vec::new();
    let mut admitted_load = 0.0;
    for (c, admitted) in admitted.iter().enumerate() {
        let mut ids = Vec::new();
        for (k, &ok) in admitted.iter().enumerate() {
            let phase = Duration::from_ps(rng.below(u64::MAX / 2));
            if !ok {
                continue;
            }
            let (spec, largest, interval) = source(s, c, message, phase);
            admitted_load += s.class[c].rate.mb_per_sec();
            ids.push(flows.len());
            flows.push(FlowSpec {
                name: format!("{} #{k}", s.class[c].name),
                src: NodeId(0),
                dst: receiver(c, flows.len()),
                message: largest,
                rate: Rate::Idt(interval),
                workload: Workload::Emit(spec),
                api: Api::Gm,
                start: Time::ZERO,
                stop: None,
            });
        }
        classes.push(ids);
    }
    let be_index = s.best_effort.as_ref().map(|b| {
        admitted_load += b.rate.mb_per_sec();
        // Rate control paces the best-effort channel at its share; VirtualClock gives
        // it an infinite Vtick.
        let idt = match (v, be_share) {
            (Variant::PviaRateControl, Some(share)) => {
                share.transfer_time(message).unwrap_or(Duration::MAX)
            }
            _ => Duration::ZERO,
        };
        flows.push(FlowSpec {
            name: "best-effort".into(),
            src: NodeId(0),
            dst: receiver(s.class.len(), flows.len()),
            message,
            rate: Rate::Idt(idt),
            workload: Workload::Emit(Spec::Poisson {
                per_second: b.rate.bytes_per_sec() as f64 / message.get() as f64,
            }),
            api: Api::Gm,
            start: Time::ZERO,
            stop: None,
        });
        flows.len() - 1
    });
    let hosts = if spread {
        flows.len() as u16 + 1
    } else {
        s.class.len() as u16 + 2
    };
    let runs = s.runs(v);
    let (_, mut via) = super::model::calibration(runs);
    tweak(&mut via);
    // The scenario's choice of completion order, but for the variant defined by its
    // absence.
    if let (Some(ordered), false) = (
        s.ordered_completions,
        runs == Variant::QosviaFcfsCompletions,
    ) {
        via.qosvia.ordered_completions = ordered;
    }
    let run = super::model::setup_with(runs, via, hosts, flows, warmup, until, seed);
    let o = match Cluster::new(run) {
        Ok(c) => c.run(),
        Err(e) => panic!("a crossbar run always builds: {e}"),
    };
    let jitters = classes
        .iter()
        .map(|ids| {
            let mut j = Jitter::default();
            for &f in ids {
                if let Some(x) = o.flows[f].jitter {
                    j.negotiated = x.negotiated;
                    j.merge(&x);
                }
            }
            j
        })
        .collect();
    let be = be_index.and_then(|b| o.flows[b].mean_latency_us);
    let refused = admitted.iter().flatten().filter(|ok| !**ok).count() as u32;
    (jitters, be, (admitted_load, refused), o)
}

/// Runs a channels scenario: its results and the sweeps they were read from.
pub fn run(s: &Scenario, opt: Options) -> Result<(Results, Vec<Sweep>), Error> {
    let mut out = Results {
        name: s.name.clone(),
        title: s.title.clone(),
        figure: s.figure.clone(),
        checks: Vec::new(),
        figures: Vec::new(),
        tables: Vec::new(),
        events: 0,
    };
    let message = s.message.unwrap_or(Defaults::MESSAGE);
    let seed = opt
        .seed
        .or(s.seed)
        .unwrap_or(crate::experiment::DEFAULT_SEED);
    // Quick runs keep every other point (and the last).
    let idx: Vec<usize> = (0..s.channels.len())
        .filter(|i| !opt.quick || i % 2 == 0 || *i + 1 == s.channels.len())
        .collect();
    let mut sweeps = Vec::new();
    for v in s.variants() {
        let cap = if v.admits() {
            let receivers = s.class.len() as u32 + u32::from(s.best_effort.is_some());
            let (c, ev) = capacity(s.runs(v), message, receivers, seed);
            out.events += ev;
            Some(c)
        } else {
            None
        };
        let mut points = Vec::new();
        for &i in &idx {
            let (p, events) = point(s, v, i, cap, opt);
            out.events += events;
            points.push(p);
        }
        sweeps.push(Sweep {
            variant: v,
            capacity: cap.map(|c| c.mb_per_sec()),
            points,
        });
    }
    checks(s, &sweeps, &idx, &mut out);
    figures(s, &sweeps, &mut out);
    if s.knee.is_some() || s.best_effort.is_some() {
        out.tables.push(knee_table(s, &sweeps));
    }
    if s.knee_grid.thetas.len() > 1 || s.knee_grid.classes.len() > 1 {
        out.tables.push(knee_grid_table(s, &sweeps));
    }
    Ok((out, sweeps))
}

fn sweep(sweeps: &[Sweep], v: Variant) -> Option<&Sweep> {
    sweeps.iter().find(|w| w.variant == v)
}

/// A variant's value of a metric and the half-width of its interval.
type ValueOf<'a> = dyn Fn(Variant) -> (f64, Option<f64>) + 'a;

fn checks(s: &Scenario, sweeps: &[Sweep], idx: &[usize], out: &mut Results) {
    let class_index = |name: &str| s.class.iter().position(|c| c.name == name);
    let knee_class = s.knee.as_ref().and_then(|k| class_index(k.class.get_ref()));
    let knee_of = |v: Variant| -> f64 {
        match (sweep(sweeps, v), knee_class, &s.knee) {
            (Some(w), Some(c), Some(k)) => w.knee(c, k.theta).unwrap_or(f64::INFINITY),
            _ => f64::NAN,
        }
    };
    let be_limit = s
        .knee
        .as_ref()
        .and_then(|k| k.be_latency)
        .map(|d| d.as_us_f64());
    let sat_of = |v: Variant| -> f64 {
        match (sweep(sweeps, v), be_limit) {
            (Some(w), Some(l)) => w.be_saturation(l).unwrap_or(f64::INFINITY),
            _ => f64::NAN,
        }
    };
    // The sweep point of a load, if it was run.
    let at_point = |load: f64| -> Option<usize> {
        let i = s.point(load)?;
        idx.iter().position(|&j| j == i)
    };
    for e in &s.expect {
        let m = e.metric();
        let Some(a) = e.case.as_ref().and_then(variant) else {
            continue;
        };
        let b = e.vs_case.as_ref().and_then(variant);
        let name = &s.name;
        // The value of a variant, and the half-width of its interval.
        let (value, label): (Box<ValueOf>, &str) = match m {
            Metric::Knee => (Box::new(|v| (knee_of(v), None)), "knee"),
            Metric::BeSaturation => (Box::new(|v| (sat_of(v), None)), "best-effort saturation"),
            _ => {
                let Some(p) = e.load.as_ref().and_then(|l| at_point(*l.get_ref())) else {
                    // The point was left out of a quick run.
                    continue;
                };
                let c = e.class.as_ref().and_then(|c| class_index(c.get_ref()));
                let label = match m {
                    Metric::Theta => "θ",
                    Metric::Jittered => "messages with jitter",
                    _ => "best-effort latency",
                };
                (
                    Box::new(move |v: Variant| {
                        let Some(w) = sweep(sweeps, v) else {
                            return (f64::NAN, None);
                        };
                        let pt = &w.points[p];
                        match (m, c) {
                            // Not measured (`Point::unmeasured`): θ beyond any bound, as
                            // for a best-effort class with nothing received; the fraction
                            // unknown.
                            (Metric::Theta, Some(c)) if !pt.measured(c) => (f64::INFINITY, None),
                            (Metric::Jittered, Some(c)) if !pt.measured(c) => (f64::NAN, None),
                            (Metric::Theta, Some(c)) => (pt.classes[c].0, pt.intervals[c].0),
                            (Metric::Jittered, Some(c)) => (pt.classes[c].1, pt.intervals[c].1),
                            (Metric::BeLatency, _) => {
                                (pt.be_latency_us.unwrap_or(f64::INFINITY), pt.be_interval_us)
                            }
                            _ => (f64::NAN, None),
                        }
                    }),
                    label,
                )
            }
        };
        let mut id = MetricId::new(name, label).flow(a.name());
        if let Some(l) = &e.load {
            id = id.at(format!("{} MB/s", l.get_ref()));
        }
        if let Some(c) = &e.class {
            id = id.case(c.get_ref().clone());
        }
        let check = match b {
            Some(b) => {
                let ((x, hx), (y, hy)) = (value(a), value(b));
                let id = id.reference(b.name());
                e.check(
                    id,
                    x / y,
                    Some(Comparison::new(x, y).with_intervals(hx, hy)),
                )
            }
            None => e.check(id, value(a).0, None),
        };
        out.checks.push(check);
    }
    // Beyond the paper: knees and saturation shown, never checked.
    if s.expect.is_empty() {
        for w in sweeps {
            // A variant behind admission control shows what it refused at the top load.
            let refusals = w.points.last().filter(|_| w.variant.admits()).map(|p| {
                (
                    Refusals {
                        refused: f64::from(p.refused) / f64::from(p.channels.max(1)),
                        admitted_load: p.admitted,
                    },
                    Mechanism::Admission,
                )
            });
            let mut show = |id: MetricId, x: f64| {
                let mut c = Check::shown(id, Unit::MbPerSec, x).with_note(not_reached(x, w));
                if let Some((r, m)) = refusals {
                    c = c.crediting(m).with_refusals(r);
                }
                out.checks.push(c);
            };
            if knee_class.is_some() {
                show(
                    MetricId::new(&s.name, "knee").flow(w.variant.name()),
                    knee_of(w.variant),
                );
            }
            if be_limit.is_some() {
                show(
                    MetricId::new(&s.name, "best-effort saturation").flow(w.variant.name()),
                    sat_of(w.variant),
                );
            }
        }
    }
}

fn not_reached(x: f64, w: &Sweep) -> String {
    let top = w.points.last().map_or(0.0, |p| p.load);
    if x.is_finite() {
        String::new()
    } else {
        format!("not reached up to {top:.0} MB/s (shown as inf)")
    }
}

fn figures(s: &Scenario, sweeps: &[Sweep], out: &mut Results) {
    let stem = s.name.clone();
    for (c, class) in s.class.iter().enumerate() {
        let mut theta = Figure::new(
            format!("{stem}-theta-{c}"),
            format!("{} {}: θ of the {} class", s.figure, s.title, class.name),
            "total injected load (MB/s)",
            "jitter fraction θ",
        );
        let mut jit = Figure::new(
            format!("{stem}-jittered-{c}"),
            format!("{}: messages with jitter, {} class", s.figure, class.name),
            "total injected load (MB/s)",
            "fraction of messages with jitter",
        );
        // Where θ and the fraction are not measured (`Point::unmeasured`) the point is
        // left out rather than shown as 0.
        let measured = |p: &&Point| p.measured(c);
        for w in sweeps {
            let name = w.variant.name();
            theta.series.push(Series::new(
                name,
                w.points
                    .iter()
                    .filter(measured)
                    .map(|p| (p.load, p.classes[c].0))
                    .collect(),
            ));
            jit.series.push(Series::new(
                name,
                w.points
                    .iter()
                    .filter(measured)
                    .map(|p| (p.load, p.classes[c].1))
                    .collect(),
            ));
        }
        if sweeps
            .iter()
            .any(|w| w.points.iter().any(|p| !p.measured(c)))
        {
            let note = "Points where no message of the class emitted in the window was received before its end (its channels refused by admission control, or a backlog that outlasts the run) are left out: θ is not measured there.";
            theta = theta.with_caption(note);
            jit = jit.with_caption(note);
        }
        out.figures.push(theta);
        out.figures.push(jit);
    }
    if s.best_effort.is_some() {
        let mut be = Figure::new(
            format!("{stem}-be-latency"),
            format!("{}: best-effort 1-way latency", s.figure),
            "total injected load (MB/s)",
            "mean 1-way latency (µs)",
        )
        .with_caption("Points where no best-effort message arrived in the window are left out.");
        be.y_scale = Scale::Log10;
        for w in sweeps {
            be.series.push(Series::new(
                w.variant.name(),
                w.points
                    .iter()
                    .filter_map(|p| p.be_latency_us.map(|l| (p.load, l)))
                    .collect(),
            ));
        }
        out.figures.push(be);
    }
}

fn knee_table(s: &Scenario, sweeps: &[Sweep]) -> Table {
    let mut t = Table::new(
        format!("{}-knees", s.name),
        format!(
            "{}: knees, best-effort saturation and admitted load (inf: beyond the sweep)",
            s.figure
        ),
        [
            "firmware",
            "knee (MB/s)",
            "best-effort saturation (MB/s)",
            "capacity admitted against (MB/s)",
            "admitted at the top load (MB/s)",
        ],
    );
    let knee_class = s
        .knee
        .as_ref()
        .and_then(|k| s.class.iter().position(|c| &c.name == k.class.get_ref()));
    for w in sweeps {
        let knee = match (knee_class, &s.knee) {
            (Some(c), Some(k)) => w.knee(c, k.theta).unwrap_or(f64::INFINITY),
            _ => f64::NAN,
        };
        let sat = match s.knee.as_ref().and_then(|k| k.be_latency) {
            Some(l) if s.best_effort.is_some() => {
                w.be_saturation(l.as_us_f64()).unwrap_or(f64::INFINITY)
            }
            _ => f64::NAN,
        };
        t.push([
            Cell::from(w.variant.name()),
            Cell::fixed(knee, 1),
            Cell::fixed(sat, 1),
            Cell::maybe(w.capacity).with_digits(1),
            Cell::maybe(w.points.last().map(|p| p.admitted)).with_digits(1),
        ]);
    }
    t
}

/// The knees read off the same sweeps at every threshold and class of the scenario's
/// knee grid (the declared ones and the ends of their declared ranges): what the
/// knees depend on, at no extra run.
fn knee_grid_table(s: &Scenario, sweeps: &[Sweep]) -> Table {
    let mut t = Table::new(
        format!("{}-knees-across", s.name),
        format!(
            "{}: knees (MB/s) at each declared knee threshold and class (inf: beyond the sweep)",
            s.figure
        ),
        ["knee threshold (θ)", "knee class", "declared"]
            .into_iter()
            .map(String::from)
            .chain(sweeps.iter().map(|w| format!("knee {} (MB/s)", w.variant))),
    );
    let g = &s.knee_grid;
    for (ci, class) in g.classes.iter().enumerate() {
        let Some(c) = s.class.iter().position(|k| &k.name == class) else {
            continue;
        };
        for (ti, &theta) in g.thetas.iter().enumerate() {
            let declared = if ci == 0 && ti == 0 { "yes" } else { "" };
            t.push(
                [
                    Cell::from(theta),
                    Cell::from(class.as_str()),
                    Cell::from(declared),
                ]
                .into_iter()
                .chain(
                    sweeps
                        .iter()
                        .map(|w| Cell::fixed(w.knee(c, theta).unwrap_or(f64::INFINITY), 1)),
                )
                .collect::<Vec<_>>(),
            );
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossings_interpolate_and_treat_missing_values_as_beyond() {
        let pts = [(10.0, Some(0.0)), (20.0, Some(0.05)), (30.0, Some(0.25))];
        let k = crossing(pts.iter().copied(), 0.1).unwrap();
        assert!((k - 22.5).abs() < 1e-9, "{k}");
        assert_eq!(crossing(pts.iter().copied(), 1.0), None);
        // Already above at the first point: the first load.
        assert_eq!(crossing(pts.iter().copied(), -1.0), Some(10.0));
        // Nothing arrived at 30: half-way from the last point below.
        let gap = [(10.0, Some(100.0)), (30.0, None)];
        assert_eq!(crossing(gap.iter().copied(), 1000.0), Some(20.0));
    }
}
