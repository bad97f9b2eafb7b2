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
    /// The connection's session (its request number; deadlines restart with each).
    pub session: u32,
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
    /// The last message of its connection's session: the final data packet, which
    /// releases the reservations as it passes (§4.1).
    pub last: bool,
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
const K_LIFE: u64 = 5;

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

    /// How long session `session` of connection `c` lasts once admitted, and how long
    /// the connection then waits before it asks again (also after a refusal); `None`
    /// when connections last the whole run.
    pub fn lifetime(&self, c: u32, session: u32) -> Option<(Duration, Duration)> {
        let l = self.cfg.workload.lifetime?;
        let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(
            sub_seed(self.seed, K_LIFE, c as u64),
            K_LIFE,
            session as u64,
        ));
        let mut exp = |mean: Duration| {
            let u: f64 = rng.gen_range(f64::EPSILON..1.0);
            Duration::from_ps(((-u.ln()) * mean.as_ps() as f64).round().max(1.0) as u64)
        };
        let hold = exp(l.hold);
        let idle = exp(l.idle);
        Some((hold, idle))
    }

    /// The messages of session `session` of connection `c` from `start` (its
    /// admission), in time order; with connection lifetimes, up to the end of its
    /// holding time (the frame then in progress finished), the last one marked.
    pub fn stream(
        &self,
        c: u32,
        start: Time,
        session: u32,
    ) -> Box<dyn Iterator<Item = Message> + Send> {
        let inner = self.stream_forever(c, start, session);
        match self.lifetime(c, session) {
            Some((hold, _)) => Box::new(Ending {
                inner: inner.peekable(),
                end: start + hold,
                done: false,
            }),
            None => inner,
        }
    }

    fn stream_forever(
        &self,
        c: u32,
        start: Time,
        session: u32,
    ) -> Box<dyn Iterator<Item = Message> + Send> {
        let conn = self.connections[c as usize];
        let seed = match session {
            0 => sub_seed(self.seed, K_STREAM, c as u64),
            k => sub_seed(sub_seed(self.seed, K_STREAM, c as u64), K_STREAM, k as u64),
        };
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
            frame: frame.map(|f| FramePart { session, ..f }),
            last: false,
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
                    last: false,
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
                        last: false,
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

/// A session's messages up to its end: none that starts a frame (or is not part of
/// one) at or after `end`; the last one marked.
struct Ending<I: Iterator<Item = Message>> {
    inner: std::iter::Peekable<I>,
    end: Time,
    done: bool,
}

/// Whether `m` may be cut off at the end of a session: it does not continue a frame.
fn starts_anew(m: &Message) -> bool {
    m.frame.is_none_or(|f| f.packet == 0)
}

impl<I: Iterator<Item = Message>> Iterator for Ending<I> {
    type Item = Message;
    fn next(&mut self) -> Option<Message> {
        if self.done {
            return None;
        }
        let mut m = self.inner.next()?;
        if m.at >= self.end && starts_anew(&m) {
            self.done = true;
            return None;
        }
        let last = self
            .inner
            .peek()
            .is_none_or(|n| n.at >= self.end && starts_anew(n));
        if last {
            self.done = true;
            m.last = true;
        }
        Some(m)
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
                    session: 0,
                };
                self.pending.push((self.msg)(at, flits, Some(part)));
            }
            self.pending.reverse();
        }
        self.pending.pop()
    }
}

#[cfg(test)]
#[path = "traffic_tests.rs"]
mod tests;
