//! The workload of Yum et al. §6.2 as messages handed to the HCAs: each node's
//! real-time connections (MPEG-2 streams drawn among the seven classes, or ON/OFF
//! sources), its Poisson best-effort traffic and its control traffic on VL15, for one
//! offered load.
//!
//! Real-time connections are set up before they send: [`Workload::connections`] says
//! when each asks (its probe time), to whom, on which lane and for what bandwidth, and
//! [`Workload::stream`] gives its messages from the time it is admitted (or from its
//! request time when there is no admission control). Best-effort and control messages
//! need no set-up ([`Workload::background`]).
//!
//! Choices the paper leaves open, and what is done here:
//! - destinations are uniform over the *other* nodes; a connection's lane is uniform
//!   over the real-time lanes, a best-effort packet's over the best-effort lanes (§6.2);
//! - connections ask within the admission stagger window, at uniform random times;
//! - control packets are evenly spaced with a random phase per node;
//! - ON/OFF connections per node: as many as make the node's real-time load at their
//!   mean rate (duty × ON rate), at least one;
//! - a frame is handed over as its packets (one WQE each), all at the frame time, or
//!   at the times the token-bucket regulator releases them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use qos_core::units::{Bandwidth, Bytes, Duration, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::config::{IbaConfig, RealTimeSpec, RegulatorSpec, Solicit};
use crate::workload::classes::{StreamClass, CLASSES, FPS};
use crate::workload::mix::fill_streams;
use crate::workload::mpeg::{Frames, GOP};
use crate::workload::onoff::{OnOff, Poisson};
use crate::workload::packets::{packet_flits, BucketSpec, Periodic, TokenBucket};
use crate::workload::Emission;

/// Traffic class of a message: its doorbell queue at the HCA (0 is served first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrafficClass {
    /// Control traffic, VL15.
    Control = 0,
    /// Real-time connections.
    RealTime = 1,
    /// Best effort.
    BestEffort = 2,
}

/// Which packet of which frame a real-time message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramePart {
    /// Frame number within the stream.
    pub index: u64,
    /// Packet number within the frame.
    pub packet: u32,
    /// Packets in the frame.
    pub packets: u32,
    /// When the source produced the frame.
    pub produced: Time,
    /// The stream's frame time: each frame is due one after the previous one's
    /// deadline (§6.2).
    pub period: Duration,
}

/// One message (one packet, one WQE) handed to a source HCA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// When the consumer posts it.
    pub at: Time,
    /// Source node.
    pub src: u32,
    /// Destination node.
    pub dst: u32,
    /// Its class.
    pub class: TrafficClass,
    /// Its virtual lane.
    pub lane: u8,
    /// Its length.
    pub flits: u32,
    /// The real-time connection it belongs to.
    pub conn: Option<u32>,
    /// For MPEG streams: the frame it carries part of.
    pub frame: Option<FramePart>,
}

/// What a real-time connection is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Source {
    /// An MPEG-2 stream of class `class` ([`CLASSES`]).
    Mpeg {
        /// Index into [`CLASSES`].
        class: usize,
    },
    /// An MPEG stream replaying trace file `trace` (index into the scenario's traces).
    Trace {
        /// Index into `workload.real_time.traces`.
        trace: usize,
    },
    /// An ON/OFF source.
    OnOff,
}

/// A real-time connection and its request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Connection {
    /// Its number (index into [`Workload::connections`]).
    pub id: u32,
    /// Source node.
    pub src: u32,
    /// Destination node.
    pub dst: u32,
    /// Its real-time lane.
    pub lane: u8,
    /// When it sends its probe.
    pub request_at: Time,
    /// Bandwidth solicited (r_i).
    pub solicit: Bandwidth,
    /// Peak rate (p_i).
    pub peak: Bandwidth,
    /// Mean rate it actually sends.
    pub mean: Bandwidth,
    /// What it is.
    pub source: Source,
}

/// The workload of one configuration at one load.
#[derive(Debug, Clone)]
pub struct Workload {
    cfg: IbaConfig,
    load: f64,
    seed: u64,
    connections: Vec<Connection>,
}

/// A seed for stream `n` of kind `k` from the run's seed (SplitMix64 of the three).
fn sub_seed(seed: u64, k: u64, n: u64) -> u64 {
    let mut z =
        seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const K_CONN: u64 = 1;
const K_STREAM: u64 = 2;
const K_BE: u64 = 3;
const K_CTL: u64 = 4;

/// A destination among the nodes other than `src`.
fn other(rng: &mut impl Rng, nodes: u32, src: u32) -> u32 {
    let d = rng.gen_range(0..nodes - 1);
    if d >= src {
        d + 1
    } else {
        d
    }
}

impl Workload {
    /// The workload of `cfg` (validated) at offered `load`, seeded.
    pub fn new(cfg: &IbaConfig, load: f64, seed: u64) -> Workload {
        let nodes = cfg.network.topology.nodes();
        let (rt, _) = cfg.workload.mix.split(load, cfg.network.link);
        let lanes = &cfg.network.lanes.real_time;
        let stagger = cfg.admission.stagger.as_ps().max(1);
        let mut connections = Vec::new();
        for src in 0..nodes {
            let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(seed, K_CONN, src as u64));
            let sources: Vec<(Source, Bandwidth, Bandwidth)> = match &cfg.workload.real_time {
                RealTimeSpec::Mpeg { traces, .. } if !traces.is_empty() => {
                    let rates: Vec<Bandwidth> = traces.iter().map(|t| t.mean_rate()).collect();
                    fill_rates(rt, &rates, &mut rng)
                        .into_iter()
                        .map(|i| {
                            let t = &traces[i];
                            (Source::Trace { trace: i }, t.mean_rate(), t.peak_rate())
                        })
                        .collect()
                }
                RealTimeSpec::Mpeg { classes, .. } => {
                    let pick: Vec<usize> = if classes.is_empty() {
                        (0..CLASSES.len()).collect()
                    } else {
                        classes.clone()
                    };
                    fill_from(rt, &pick, &mut rng)
                        .into_iter()
                        .map(|c| {
                            let k = &CLASSES[c];
                            (Source::Mpeg { class: c }, k.mean_rate(), k.peak_rate())
                        })
                        .collect()
                }
                RealTimeSpec::OnOff {
                    mean_on,
                    mean_off,
                    rate,
                } => {
                    let duty = OnOff::duty(*mean_on, *mean_off);
                    let mean = Bandwidth::from_bytes_per_sec(
                        (rate.bytes_per_sec() as f64 * duty).round() as u64,
                    );
                    let n = if rt.is_zero() {
                        0
                    } else {
                        ((rt.bytes_per_sec() as f64 / mean.bytes_per_sec().max(1) as f64).round()
                            as usize)
                            .max(1)
                    };
                    vec![(Source::OnOff, mean, *rate); n]
                }
            };
            for (source, mean, peak) in sources {
                let id = connections.len() as u32;
                connections.push(Connection {
                    id,
                    src,
                    dst: other(&mut rng, nodes, src),
                    lane: lanes[rng.gen_range(0..lanes.len())],
                    request_at: Time::from_ps(rng.gen_range(0..stagger)),
                    solicit: match cfg.admission.solicit {
                        Solicit::Mean => mean,
                        Solicit::Peak => peak,
                    },
                    peak,
                    mean,
                    source,
                });
            }
        }
        Workload {
            cfg: cfg.clone(),
            load,
            seed,
            connections,
        }
    }

    /// The offered load.
    pub fn load(&self) -> f64 {
        self.load
    }

    /// Every real-time connection, in request order per node.
    pub fn connections(&self) -> &[Connection] {
        &self.connections
    }

    /// The messages of connection `c` from `start` (its admission), in time order.
    pub fn stream(&self, c: u32, start: Time) -> Box<dyn Iterator<Item = Message> + Send> {
        let conn = self.connections[c as usize];
        let seed = sub_seed(self.seed, K_STREAM, c as u64);
        let fb = self.cfg.network.flit_bytes();
        let pf = self.cfg.workload.packet_flits;
        let msg = move |at: Time, flits: u32, frame: Option<FramePart>| Message {
            at,
            src: conn.src,
            dst: conn.dst,
            class: TrafficClass::RealTime,
            lane: conn.lane,
            flits,
            conn: Some(conn.id),
            frame,
        };
        match (&self.cfg.workload.real_time, conn.source) {
            (RealTimeSpec::Mpeg { regulator, .. }, Source::Mpeg { class }) => {
                let k: &StreamClass = &CLASSES[class];
                // Joined at a random frame of the GOP, at a random phase of the frame
                // time: streams set up together do not send their I frames together.
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5851_F42D_4C95_7F2D);
                let first = rng.gen_range(0..GOP.len() as u64);
                let phase = Duration::from_ps(rng.gen_range(0..Self::frame_period().as_ps()));
                let start = start + phase;
                let frames: Frames = k
                    .synthetic()
                    .frames_from(start, seed, first)
                    .expect("the stream classes are valid");
                let bucket = Regulator::of(
                    regulator.as_ref(),
                    k.peak_rate(),
                    Self::frame_period(),
                    Bytes::new(pf as u64 * fb as u64),
                    start,
                );
                Box::new(FramePackets {
                    frames,
                    period: Self::frame_period(),
                    bucket,
                    flit_bytes: fb,
                    packet_flits: pf,
                    pending: Vec::new(),
                    msg,
                })
            }
            (
                RealTimeSpec::Mpeg {
                    regulator, traces, ..
                },
                Source::Trace { trace },
            ) => {
                let t = &traces[trace];
                let Some(frames) = t.frames.clone() else {
                    return Box::new(std::iter::empty());
                };
                // Joined at a random frame of the trace, at a random phase of the frame
                // time, as the papers' simulators start streams from one trace.
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5851_F42D_4C95_7F2D);
                let period = Duration::from_ps((1e12 / t.fps).round().max(1.0) as u64);
                let first = rng.gen_range(0..frames.frames.len());
                let phase = Duration::from_ps(rng.gen_range(0..period.as_ps()));
                let start = start + phase;
                let n = frames.frames.len();
                let replay = (0u64..).map(move |i| Emission {
                    at: start + period * i,
                    size: frames.frames[(first + (i % n as u64) as usize) % n],
                    index: i,
                });
                let bucket = Regulator::of(
                    regulator.as_ref(),
                    t.peak_rate(),
                    period,
                    Bytes::new(pf as u64 * fb as u64),
                    start,
                );
                Box::new(FramePackets {
                    frames: replay,
                    period,
                    bucket,
                    flit_bytes: fb,
                    packet_flits: pf,
                    pending: Vec::new(),
                    msg,
                })
            }
            (
                RealTimeSpec::OnOff {
                    mean_on, mean_off, ..
                },
                Source::OnOff,
            ) => {
                let bytes = Bytes::new(pf as u64 * fb as u64);
                let interval = conn
                    .peak
                    .transfer_time(bytes)
                    .unwrap_or(Duration::from_us(1))
                    .max(Duration::from_ps(1));
                let src = OnOff::new(start, *mean_on, *mean_off, interval, bytes, seed)
                    .expect("ON/OFF periods are positive");
                Box::new(src.map(move |e| msg(e.at, pf, None)))
            }
            _ => Box::new(std::iter::empty()),
        }
    }

    /// Best-effort and control messages of every node from time zero, in time order.
    pub fn background(&self) -> impl Iterator<Item = Message> + Send {
        let nodes = self.cfg.network.topology.nodes();
        let fb = self.cfg.network.flit_bytes() as u64;
        let pf = self.cfg.workload.packet_flits;
        let (_, be) = self
            .cfg
            .workload
            .mix
            .split(self.load, self.cfg.network.link);
        let per_second = be.bytes_per_sec() as f64 / (pf as u64 * fb) as f64;
        let be_lanes = self.cfg.network.lanes.best_effort.clone();
        let mut heads: BinaryHeap<Reverse<(Time, u32)>> = BinaryHeap::new();
        let mut sources: Vec<Box<dyn Iterator<Item = Message> + Send>> = Vec::new();
        for src in 0..nodes {
            let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(self.seed, K_BE, src as u64));
            if let Some(p) = Poisson::new(
                Time::ZERO,
                per_second,
                Bytes::new(pf as u64 * fb),
                rng.gen(),
            ) {
                let lanes = be_lanes.clone();
                sources.push(Box::new(p.map(move |e| Message {
                    at: e.at,
                    src,
                    dst: other(&mut rng, nodes, src),
                    class: TrafficClass::BestEffort,
                    lane: lanes[rng.gen_range(0..lanes.len())],
                    flits: pf,
                    conn: None,
                    frame: None,
                })));
            }
            {
                let c = self.cfg.workload.control;
                let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(self.seed, K_CTL, src as u64));
                let gap = c.period.as_ps() / c.count.max(1) as u64;
                let phase = Duration::from_ps(rng.gen_range(0..gap.max(1)));
                let bytes = Bytes::new(c.packet_flits as u64 * fb);
                if let Some(p) = Periodic::new(Time::ZERO, phase, c.period, c.count, bytes) {
                    sources.push(Box::new(p.map(move |e| Message {
                        at: e.at,
                        src,
                        dst: other(&mut rng, nodes, src),
                        class: TrafficClass::Control,
                        lane: qos_core::vlarb::CONTROL_VL as u8,
                        flits: c.packet_flits,
                        conn: None,
                        frame: None,
                    })));
                }
            }
        }
        let mut next: Vec<Option<Message>> = sources.iter_mut().map(|s| s.next()).collect();
        for (i, m) in next.iter().enumerate() {
            if let Some(m) = m {
                heads.push(Reverse((m.at, i as u32)));
            }
        }
        std::iter::from_fn(move || {
            let Reverse((_, i)) = heads.pop()?;
            let i = i as usize;
            let m = next[i].take()?;
            next[i] = sources[i].next();
            if let Some(n) = &next[i] {
                heads.push(Reverse((n.at, i as u32)));
            }
            Some(m)
        })
    }

    /// The frame period of the synthetic MPEG-2 streams.
    pub fn frame_period() -> Duration {
        Duration::from_ps((1e12 / FPS).round() as u64)
    }

    /// The longest frame time of this workload's streams (the synthetic classes' when
    /// it replays no trace).
    pub fn longest_frame_period(&self) -> Duration {
        match &self.cfg.workload.real_time {
            RealTimeSpec::Mpeg { traces, .. } if !traces.is_empty() => traces
                .iter()
                .map(|t| Duration::from_ps((1e12 / t.fps).round().max(1.0) as u64))
                .max()
                .unwrap_or_else(Self::frame_period),
            _ => Self::frame_period(),
        }
    }
}

/// Streams drawn uniformly among `rates` (indices into it) until `target` is reached,
/// the last one kept when it takes the sum nearer the target (as [`fill_streams`]).
fn fill_rates(target: Bandwidth, rates: &[Bandwidth], rng: &mut impl Rng) -> Vec<usize> {
    let want = target.bytes_per_sec();
    let mut out = Vec::new();
    let mut sum = 0u64;
    while sum < want && !rates.is_empty() {
        let i = rng.gen_range(0..rates.len());
        let r = rates[i].bytes_per_sec().max(1);
        if sum + r > want && sum + r - want > want - sum {
            break;
        }
        out.push(i);
        sum += r;
    }
    out
}

/// Classes drawn among `pick` until `target` is reached (as [`fill_streams`] over all
/// seven when `pick` is all of them).
fn fill_from(target: Bandwidth, pick: &[usize], rng: &mut impl Rng) -> Vec<usize> {
    if pick.len() == CLASSES.len() {
        return fill_streams(target, rng);
    }
    let want = target.bytes_per_sec();
    let mut out = Vec::new();
    let mut sum = 0u64;
    while sum < want && !pick.is_empty() {
        let c = pick[rng.gen_range(0..pick.len())];
        let r = CLASSES[c].mean_rate().bytes_per_sec();
        if sum + r > want && sum + r - want > want - sum {
            break;
        }
        out.push(c);
        sum += r;
    }
    out
}

/// How a frame's packets are released.
enum Regulator {
    /// All at the frame time.
    None,
    /// Through a token bucket.
    Bucket(TokenBucket),
    /// Evenly over the frame time.
    Smooth(Duration),
}

impl Regulator {
    /// The regulator `spec` of a stream of `peak` rate and frame `period`, with
    /// `packet`-sized packets, from `start`.
    fn of(
        spec: Option<&RegulatorSpec>,
        peak: Bandwidth,
        period: Duration,
        packet: Bytes,
        start: Time,
    ) -> Regulator {
        match spec {
            Some(RegulatorSpec::TokenBucket {
                rate_of_peak,
                depth_packets,
            }) => {
                let rate = (peak.bytes_per_sec() as f64 * rate_of_peak).round();
                Regulator::Bucket(
                    TokenBucket::new(
                        BucketSpec {
                            rate: Bandwidth::from_bytes_per_sec((rate as u64).max(1)),
                            depth: Bytes::new(*depth_packets as u64 * packet.get()),
                        },
                        start,
                    )
                    .expect("rate and depth are positive"),
                )
            }
            Some(RegulatorSpec::Smooth) => Regulator::Smooth(period),
            None => Regulator::None,
        }
    }
}

/// An MPEG stream's frames as packets, through the regulator when there is one.
struct FramePackets<I, F> {
    frames: I,
    /// The frame time.
    period: Duration,
    bucket: Regulator,
    flit_bytes: u32,
    packet_flits: u32,
    /// Packets of the current frame still to hand over, last first.
    pending: Vec<Message>,
    msg: F,
}

impl<I: Iterator<Item = Emission>, F: Fn(Time, u32, Option<FramePart>) -> Message> Iterator
    for FramePackets<I, F>
{
    type Item = Message;
    fn next(&mut self) -> Option<Message> {
        if self.pending.is_empty() {
            let f = self.frames.next()?;
            let sizes: Vec<u32> =
                packet_flits(f.size, self.flit_bytes, self.packet_flits).collect();
            let n = sizes.len() as u32;
            for (p, &flits) in sizes.iter().enumerate() {
                let at = match &mut self.bucket {
                    Regulator::Bucket(b) => {
                        b.release(f.at, Bytes::new(flits as u64 * self.flit_bytes as u64))
                    }
                    Regulator::Smooth(period) => {
                        // Over nine tenths of the frame time, the last packet at its
                        // end whatever the frame's size.
                        let span = period.as_ps() / 10 * 9;
                        let k = p as u64;
                        let off = if n > 1 { span / (n as u64 - 1) * k } else { 0 };
                        f.at + Duration::from_ps(off)
                    }
                    Regulator::None => f.at,
                };
                let part = FramePart {
                    index: f.index,
                    packet: p as u32,
                    packets: n,
                    produced: f.at,
                    period: self.period,
                };
                self.pending.push((self.msg)(at, flits, Some(part)));
            }
            self.pending.reverse();
        }
        self.pending.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iba::config::IbaConfig;

    fn cfg(real_time: &str, extra: &str) -> IbaConfig {
        let text = format!(
            "[network]\ntopology = {{ kind = \"crossbar\", ports = 8 }}\n{extra}\n[workload]\nloads = [0.8]\nreal_time = {real_time}\n[run]\nwarmup = \"1ms\"\nmeasure = \"10ms\"\n"
        );
        let c: IbaConfig = toml::from_str(&text).unwrap();
        c.validate().unwrap();
        c
    }

    #[test]
    fn mpeg_connections_fill_each_nodes_real_time_load_on_real_time_lanes() {
        let c = cfg("{ kind = \"mpeg\" }", "");
        let w = Workload::new(&c, 0.8, 1);
        // 80 % of 200 MB/s, 80 % of it real time: 128 MB/s per node.
        for n in 0..8 {
            let mine: Vec<&Connection> = w.connections().iter().filter(|x| x.src == n).collect();
            let sum: u64 = mine.iter().map(|x| x.mean.bytes_per_sec()).sum();
            assert!((sum as f64 / 128e6 - 1.0).abs() < 0.01, "node {n}: {sum}");
            assert!(mine.iter().all(|x| x.dst != n && x.lane <= 10));
            assert!(mine
                .iter()
                .all(|x| x.request_at < Time::ZERO + Duration::from_ms(1)));
            assert!(mine.iter().all(|x| x.solicit == x.mean && x.peak > x.mean));
        }
        // The same seed gives the same workload.
        let again = Workload::new(&c, 0.8, 1);
        assert_eq!(again.connections(), w.connections());
    }

    #[test]
    fn a_regulated_stream_spreads_each_frame_at_its_peak_rate() {
        let c = cfg(
            "{ kind = \"mpeg\", classes = [3], regulator = { kind = \"token_bucket\" } }",
            "",
        );
        let w = Workload::new(&c, 0.5, 2);
        let start = Time::ZERO + Duration::from_ms(2);
        let msgs: Vec<Message> = w.stream(0, start).take(2000).collect();
        assert!(msgs.windows(2).all(|p| p[0].at <= p[1].at));
        assert!(msgs
            .iter()
            .all(|m| m.at >= start && m.flits <= 40 && m.conn == Some(0)));
        // The stream joins within one frame time of its start.
        assert!(msgs[0].at < start + Workload::frame_period());
        // Every frame is whole: its packets numbered 0..n, in order.
        let mut i = 0;
        while i < msgs.len() {
            let f = msgs[i].frame.unwrap();
            if i + f.packets as usize > msgs.len() {
                break;
            }
            for k in 0..f.packets as usize {
                let g = msgs[i + k].frame.unwrap();
                assert_eq!((g.index, g.packet), (f.index, k as u32));
            }
            i += f.packets as usize;
        }
        // Packets of a large frame leave one packet time at the peak rate apart (640
        // bytes at the TM5 class's peak) once the one-packet bucket is empty.
        let peak = CLASSES[3].peak_rate().bytes_per_sec() as f64;
        let big = msgs
            .windows(3)
            .find(|w| {
                w.iter().all(|m| {
                    m.frame.unwrap().index == w[0].frame.unwrap().index
                        && m.frame.unwrap().packet > 0
                        && m.flits == 40
                })
            })
            .unwrap();
        let gap = (big[2].at - big[1].at).as_ps() as f64 / 1e12;
        assert!((gap - 640.0 / peak).abs() < 1e-9, "{gap}");
        // Unregulated, a frame's packets all go at the frame time.
        let c = cfg("{ kind = \"mpeg\", classes = [3] }", "");
        let w = Workload::new(&c, 0.5, 2);
        let burst: Vec<Message> = w.stream(0, start).take(3).collect();
        assert!(burst.iter().all(|m| m.at == burst[0].at));
        // Smoothed, every frame's last packet goes nine tenths of a frame time after
        // its first.
        let c = cfg(
            "{ kind = \"mpeg\", classes = [3], regulator = { kind = \"smooth\" } }",
            "",
        );
        let w = Workload::new(&c, 0.5, 2);
        let v: Vec<Message> = w.stream(0, start).take(500).collect();
        let f0 = v[0].frame.unwrap();
        let last = &v[f0.packets as usize - 1];
        let span = Workload::frame_period().as_ps() / 10 * 9;
        assert!((last.at - v[0].at).as_ps().abs_diff(span) < f0.packets as u64);
    }

    #[test]
    fn on_off_connections_make_the_load_at_their_mean_rate() {
        let c = cfg(
            "{ kind = \"on_off\", mean_on = \"2ms\", mean_off = \"6ms\", rate = \"400Mbit/s\" }",
            "",
        );
        let w = Workload::new(&c, 0.5, 3);
        // 80 MB/s real time per node at 12.5 MB/s mean each: 6.4, so 6 connections.
        assert_eq!(w.connections().iter().filter(|x| x.src == 0).count(), 6);
        let m: Vec<Message> = w.stream(0, Time::ZERO).take(3).collect();
        // 640-byte packets at 50 MB/s: 12.8 us apart while ON.
        assert_eq!((m[1].at - m[0].at).as_ps(), 12_800_000);
    }

    #[test]
    fn background_traffic_is_best_effort_at_its_share_plus_control_on_vl15() {
        let c = cfg("{ kind = \"mpeg\" }", "");
        let w = Workload::new(&c, 0.5, 4);
        let horizon = Time::ZERO + Duration::from_ms(100);
        let v: Vec<Message> = w.background().take_while(|m| m.at < horizon).collect();
        assert!(v.windows(2).all(|p| p[0].at <= p[1].at));
        let be = v.iter().filter(|m| m.class == TrafficClass::BestEffort);
        // 20 % of 100 MB/s per node for 0.1 s = 2 MB per node = 3,125 packets each.
        let n = be.clone().count() as f64;
        assert!((n / (8.0 * 3125.0) - 1.0).abs() < 0.05, "{n}");
        assert!(be
            .clone()
            .all(|m| (11..=14).contains(&m.lane) && m.dst != m.src));
        let ctl: Vec<&Message> = v
            .iter()
            .filter(|m| m.class == TrafficClass::Control)
            .collect();
        // Ten per 33.3 ms per node: 30 per node in 100 ms.
        assert!((ctl.len() as i64 - 240).abs() <= 8, "{}", ctl.len());
        assert!(ctl.iter().all(|m| m.lane == 15 && m.flits == 10));
    }

    /// A config replaying traces `texts` (bytes, 30 frames/s).
    fn traced(texts: &[&str], regulator: &str) -> IbaConfig {
        let files: Vec<String> = (0..texts.len())
            .map(|i| format!("{{ file = \"t{i}.txt\", unit = \"bytes\" }}"))
            .collect();
        let text = format!(
            "[network]\ntopology = {{ kind = \"crossbar\", ports = 4 }}\n[workload]\nloads = [0.5]\nreal_time = {{ kind = \"mpeg\", traces = [{}]{regulator} }}\n[run]\nwarmup = \"1ms\"\nmeasure = \"10ms\"\n",
            files.join(", ")
        );
        let mut c: IbaConfig = toml::from_str(&text).unwrap();
        // Not read yet: a run cannot start.
        assert_eq!(
            c.validate().unwrap_err().path,
            "workload.real_time.traces[0].file"
        );
        if let RealTimeSpec::Mpeg { traces, .. } = &mut c.workload.real_time {
            for (t, body) in traces.iter_mut().zip(texts) {
                let name = t.file.clone();
                t.load(&name, body).unwrap();
            }
        }
        c.validate().unwrap();
        c
    }

    #[test]
    fn trace_streams_fill_the_load_at_the_traces_mean_rates_and_replay_their_frames() {
        // Trace 0: 100 kB per frame on average (3 MB/s at 30 frames/s); trace 1: 1 MB
        // per frame (30 MB/s).
        let t0 = "# I B B P\nI 160000\nB 40000\nB 40000\nP 160000\n";
        let t1 = "1000000\n1000000\n";
        let c = traced(&[t0, t1], "");
        let w = Workload::new(&c, 0.5, 1);
        // 50 % of 200 MB/s, 80 % of it real time: 80 MB/s per node.
        for n in 0..4 {
            let mine: Vec<&Connection> = w.connections().iter().filter(|x| x.src == n).collect();
            let sum: u64 = mine.iter().map(|x| x.mean.bytes_per_sec()).sum();
            assert!(sum.abs_diff(80_000_000) <= 15_000_000, "node {n}: {sum}");
            for x in &mine {
                match x.source {
                    Source::Trace { trace: 0 } => {
                        assert_eq!(x.mean.bytes_per_sec(), 3_000_000);
                        assert_eq!(x.peak.bytes_per_sec(), 4_800_000);
                    }
                    Source::Trace { trace: 1 } => {
                        assert_eq!(x.mean.bytes_per_sec(), 30_000_000);
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        // A stream of trace 0 replays its frames in order from some frame, wrapping
        // around, one every 33.3 ms, each cut into packets of at most 40 16-byte flits.
        let c0 = w
            .connections()
            .iter()
            .find(|x| x.source == Source::Trace { trace: 0 })
            .unwrap();
        let msgs: Vec<Message> = w.stream(c0.id, Time::ZERO).take(2000).collect();
        let mut frames: Vec<(u64, u64, Time)> = Vec::new();
        for m in &msgs {
            let f = m.frame.unwrap();
            assert_eq!(f.period, Duration::from_ps(33_333_333_333));
            let bytes = m.flits as u64 * 16;
            match frames.last_mut() {
                Some(l) if l.0 == f.index => l.1 += bytes,
                _ => frames.push((f.index, bytes, f.produced)),
            }
        }
        frames.pop(); // may be cut by take()
        let sizes = [160_000u64, 40_000, 40_000, 160_000];
        let first = sizes.iter().position(|&s| s == frames[0].1).unwrap();
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.0, i as u64);
            assert_eq!(f.1, sizes[(first + i) % 4], "frame {i}");
            if i > 0 {
                assert_eq!((f.2 - frames[i - 1].2).as_ps(), 33_333_333_333);
            }
        }
        // Traces and classes are exclusive.
        let mut both = c.clone();
        if let RealTimeSpec::Mpeg { classes, .. } = &mut both.workload.real_time {
            classes.push(1);
        }
        assert_eq!(
            both.validate().unwrap_err().path,
            "workload.real_time.traces"
        );
    }
}
