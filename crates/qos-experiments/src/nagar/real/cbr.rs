//! CBR channels on real data-plane ports for `reproduce nagar --real` (Nagar §4.1,
//! Figs 3–4): a workload generator on the sending node posts each channel's messages
//! at its negotiated spacing (one thread, every channel's next emission on a timer
//! heap, as the paper's "carefully designed workload generators"), and one receiving
//! application per channel takes its messages off its port and notes when each
//! arrived. The paper measures jitter from "the time difference between successive
//! receipt of messages at the receiver"; so does [`ChannelRecord::jitter`], with
//! qos-core's definition (`stream_metrics::jitter`).
//!
//! The generator never blocks on a channel: a channel whose queue at the agent is full
//! (all its send buffers in flight) skips that emission and counts it, so one
//! backlogged channel cannot delay the others' emissions. A skipped message leaves a
//! gap at the receiver, which counts as jitter there, as it would for the application.
//!
//! A plan may add one best-effort channel (the BE channel of the paper's Fig 5): a
//! greedy sender on its own thread keeps [`BE_DEPTH`] large messages queued at the
//! agent, so it takes whatever the scheduler gives it; its receiver counts the bytes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use anyhow::{anyhow, Context};
use qos_client::{Port, PortOptions};
use qos_core::stream_metrics::{self, Jitter};
use qos_core::units::{Duration, Time};
use qos_runtime::dataplane::harness::Harness;
use qos_runtime::shm::client::PortClient;
use qos_runtime::shm::region::{SendDesc, CQ_ERROR, CQ_SENT};

/// Send buffers per channel at the agent: a channel more than this many messages
/// behind skips its next emission.
pub const SEND_SLOTS: u64 = 16;

/// One CBR channel from the sending node (harness node 0).
#[derive(Debug, Clone)]
pub struct Channel {
    /// Index of its class.
    pub class: usize,
    /// Source port on the sending node.
    pub src_port: u16,
    /// Harness node index of the receiver.
    pub dst: usize,
    /// Destination port on the receiver.
    pub dst_port: u16,
    /// Negotiated inter-arrival time (message size / negotiated bandwidth), seconds.
    pub period: f64,
    /// First emission, seconds after the start.
    pub phase: f64,
}

/// A greedy best-effort channel from the sending node.
#[derive(Debug, Clone)]
pub struct BestEffort {
    /// Source port on the sending node.
    pub src_port: u16,
    /// Harness node index of the receiver.
    pub dst: usize,
    /// Destination port.
    pub dst_port: u16,
    /// Message size, bytes.
    pub message: usize,
}

/// Messages the best-effort sender keeps queued at its agent.
pub const BE_DEPTH: usize = 8;

/// What one run sends.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Every CBR channel.
    pub channels: Vec<Channel>,
    /// Message size of the CBR channels, bytes.
    pub message: usize,
    /// Emissions stop this many seconds after the start.
    pub secs: f64,
    /// A best-effort channel beside them, if any.
    pub best_effort: Option<BestEffort>,
}

/// What a run measured: every CBR channel, and the best-effort receiver's arrivals
/// (seconds after the start, bytes).
#[derive(Debug, Clone, Default)]
pub struct Records {
    pub channels: Vec<ChannelRecord>,
    pub best_effort: Vec<(f64, usize)>,
}

impl Records {
    /// Best-effort payload received in [`from`, `to`) seconds, B/s.
    pub fn best_effort_rate(&self, from: f64, to: f64) -> f64 {
        let bytes: usize = self
            .best_effort
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, b)| b)
            .sum();
        bytes as f64 / (to - from).max(1e-9)
    }
}

/// What happened to one channel.
#[derive(Debug, Clone, Default)]
pub struct ChannelRecord {
    /// When each message was posted, seconds after the start.
    pub emitted: Vec<f64>,
    /// How late each posting was against its schedule, seconds.
    pub late: Vec<f64>,
    /// When each message was received by the application, seconds after the start
    /// (in order: delivery is reliable and in order per flow).
    pub received: Vec<f64>,
    /// Emissions skipped because the channel's send buffers were all in flight.
    pub skipped: u64,
}

/// Seconds as qos-core time.
fn time(secs: f64) -> Time {
    Time::ZERO + Duration::from_ps((secs.max(0.0) * 1e12).round() as u64)
}

impl ChannelRecord {
    /// Receipt times of the messages emitted at or after `warm` seconds.
    fn steady_receipts(&self, warm: f64) -> &[f64] {
        let first = self.emitted.iter().position(|&e| e >= warm);
        match first {
            Some(k) if k < self.received.len() => &self.received[k..],
            _ => &[],
        }
    }

    /// The jitter of the messages emitted from `warm` seconds on, against the
    /// negotiated inter-arrival time `period` (seconds).
    pub fn jitter(&self, warm: f64, period: f64) -> Jitter {
        let r: Vec<Time> = self
            .steady_receipts(warm)
            .iter()
            .map(|&s| time(s))
            .collect();
        stream_metrics::jitter(&r, Duration::from_secs_f64(period))
    }

    /// One-way latencies (receipt − posting, seconds) of the messages emitted from
    /// `warm` seconds on.
    pub fn latencies(&self, warm: f64) -> Vec<f64> {
        self.emitted
            .iter()
            .zip(&self.received)
            .filter(|(e, _)| **e >= warm)
            .map(|(e, r)| r - e)
            .collect()
    }
}

/// Receives on one port until told to stop: (receipt time, bytes) of every message.
type Receiver = std::thread::JoinHandle<anyhow::Result<Vec<(f64, usize)>>>;

/// A thread taking messages off `p` until `done`, noting when each arrived.
fn receiver(mut p: Port, t0: Instant, done: Arc<AtomicBool>) -> Receiver {
    std::thread::spawn(move || {
        let mut at = Vec::new();
        while !done.load(Ordering::Relaxed) {
            match p.recv(StdDuration::from_millis(20)) {
                Ok(m) => at.push((t0.elapsed().as_secs_f64(), m.data.len())),
                Err(qos_client::Error::Timeout) => {}
                Err(e) => return Err(anyhow!("receiving: {e}")),
            }
        }
        Ok(at)
    })
}

/// The greedy best-effort sender: keeps [`BE_DEPTH`] messages queued at the agent
/// until `stop`.
fn greedy(
    p: PortClient,
    dst: u32,
    be: BestEffort,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<anyhow::Result<()>> {
    std::thread::spawn(move || {
        let slot = (be.message as u64).next_multiple_of(64);
        let slots = (BE_DEPTH as u64)
            .min(p.region().layout.buffer_bytes / slot)
            .min(u64::from(p.region().layout.send_slots) - 1);
        let mut free: Vec<u64> = (0..slots).map(|i| i * slot).collect();
        let data = vec![0xbeu8; be.message];
        for &o in &free {
            p.region().write(o, &data);
        }
        while !stop.load(Ordering::Relaxed) {
            while let Some(o) = free.pop() {
                let d = SendDesc {
                    offset: o,
                    len: be.message as u32,
                    dst_node: dst,
                    cookie: o,
                    dst_port: be.dst_port,
                    priority: 0,
                    _pad: [0; 5],
                };
                if !p.post_send(d)? {
                    free.push(o);
                    break;
                }
            }
            if let Some(c) = p.wait(StdDuration::from_millis(5))? {
                if c.kind == CQ_ERROR {
                    anyhow::bail!("a best-effort message failed at the agent (code {})", c.len);
                }
                if c.kind == CQ_SENT {
                    free.push(c.cookie);
                }
            }
        }
        Ok(())
    })
}

/// Runs `plan` on the harness's data planes (node 0 sends) and returns what every
/// channel's receiver measured. `stop` is checked every few milliseconds (Ctrl-C).
pub fn run(h: &Harness, plan: &Plan, stop: &dyn Fn() -> bool) -> anyhow::Result<Records> {
    let done = Arc::new(AtomicBool::new(false));
    // Receivers first, so nothing arrives at a closed port.
    let mut rx_ports = Vec::new();
    for c in &plan.channels {
        let p = Port::open(
            PortOptions::new(&h.sockets[c.dst])
                .port(c.dst_port)
                .max_message(plan.message),
        )
        .with_context(|| format!("opening port {} on {}", c.dst_port, h.nodes[c.dst].name))?;
        rx_ports.push(p);
    }
    let mut senders = Vec::new();
    for c in &plan.channels {
        let p = PortClient::open(&h.sockets[0], Some(c.src_port))
            .with_context(|| format!("opening port {} on {}", c.src_port, h.nodes[0].name))?;
        let dst = p
            .node_index(&h.nodes[c.dst].name)
            .with_context(|| format!("the data plane does not know {}", h.nodes[c.dst].name))?;
        senders.push((p, dst));
    }
    let slot = (plan.message as u64).next_multiple_of(64);
    let data = vec![0x5au8; plan.message];
    let mut free: Vec<Vec<u64>> = Vec::new();
    for (p, _) in &senders {
        let slots = SEND_SLOTS
            .min(p.region().layout.buffer_bytes / slot)
            .min(u64::from(p.region().layout.send_slots) - 1);
        let offsets: Vec<u64> = (0..slots).map(|i| i * slot).collect();
        for &o in &offsets {
            p.region().write(o, &data);
        }
        free.push(offsets);
    }
    let slots: Vec<usize> = free.iter().map(Vec::len).collect();
    // The best-effort channel's ports, if any.
    let be_ports = match &plan.best_effort {
        Some(be) => {
            let rx = Port::open(
                PortOptions::new(&h.sockets[be.dst])
                    .port(be.dst_port)
                    .max_message(be.message),
            )
            .with_context(|| format!("opening port {} on {}", be.dst_port, h.nodes[be.dst].name))?;
            let tx = PortClient::open(&h.sockets[0], Some(be.src_port))
                .with_context(|| format!("opening port {}", be.src_port))?;
            let dst = tx.node_index(&h.nodes[be.dst].name).with_context(|| {
                format!("the data plane does not know {}", h.nodes[be.dst].name)
            })?;
            Some((rx, tx, dst, be.clone()))
        }
        None => None,
    };
    let t0 = Instant::now();
    let receivers: Vec<Receiver> = rx_ports
        .into_iter()
        .map(|p| receiver(p, t0, done.clone()))
        .collect();
    let stop_be = Arc::new(AtomicBool::new(false));
    let be_threads = be_ports.map(|(rx, tx, dst, be)| {
        (
            receiver(rx, t0, done.clone()),
            greedy(tx, dst, be, stop_be.clone()),
        )
    });

    let mut records = vec![ChannelRecord::default(); plan.channels.len()];
    let generated = generate(plan, &senders, &mut free, &mut records, t0, stop);
    stop_be.store(true, Ordering::Relaxed);
    let be_sent = be_threads.map(|(rx, tx)| {
        let sent = tx
            .join()
            .map_err(|_| anyhow!("the best-effort sender panicked"));
        (rx, sent)
    });
    if generated.is_ok() {
        // Let what is queued land (the agents keep sending after the generator stops):
        // until every channel's messages are acknowledged (all its send buffers back)
        // or two seconds have passed, then a little more for the applications to take
        // the last ones.
        let grace = Instant::now() + StdDuration::from_secs(2);
        while Instant::now() < grace {
            for (k, (p, _)) in senders.iter().enumerate() {
                while let Some(c) = p.poll()? {
                    if c.kind == CQ_SENT || c.kind == CQ_ERROR {
                        free[k].push(c.cookie);
                    }
                }
            }
            if free.iter().zip(&slots).all(|(f, &n)| f.len() == n) {
                break;
            }
            std::thread::sleep(StdDuration::from_millis(5));
        }
        std::thread::sleep(StdDuration::from_millis(100));
    }
    done.store(true, Ordering::Relaxed);
    let mut arrived_at = Vec::new();
    for r in receivers {
        arrived_at.push(
            r.join()
                .map_err(|_| anyhow!("a receiving thread panicked"))?,
        );
    }
    let best_effort = match be_sent {
        Some((rx, sent)) => {
            let got = rx
                .join()
                .map_err(|_| anyhow!("a receiving thread panicked"))?;
            sent??;
            got?
        }
        None => Vec::new(),
    };
    generated?;
    for (rec, got) in records.iter_mut().zip(arrived_at) {
        rec.received = got?.into_iter().map(|(t, _)| t).collect();
    }
    Ok(Records {
        channels: records,
        best_effort,
    })
}

/// The generator: every channel's emissions in time order until `plan.secs`.
fn generate(
    plan: &Plan,
    senders: &[(PortClient, u32)],
    free: &mut [Vec<u64>],
    records: &mut [ChannelRecord],
    t0: Instant,
    stop: &dyn Fn() -> bool,
) -> anyhow::Result<()> {
    // (scheduled time in ns, emission number, channel)
    let mut heap: BinaryHeap<Reverse<(u64, u64, usize)>> = plan
        .channels
        .iter()
        .enumerate()
        .map(|(i, c)| Reverse(((c.phase * 1e9) as u64, 0, i)))
        .collect();
    let end_ns = (plan.secs * 1e9) as u64;
    let mut last_stop_check = Instant::now();
    while let Some(Reverse((at_ns, n, i))) = heap.pop() {
        if at_ns >= end_ns {
            break;
        }
        let target = t0 + StdDuration::from_nanos(at_ns);
        loop {
            let now = Instant::now();
            if now >= target {
                break;
            }
            if last_stop_check.elapsed() > StdDuration::from_millis(50) {
                if stop() {
                    anyhow::bail!("interrupted");
                }
                last_stop_check = Instant::now();
            }
            std::thread::sleep((target - now).min(StdDuration::from_millis(20)));
        }
        let c = &plan.channels[i];
        let (p, dst) = &senders[i];
        while let Some(done) = p.poll()? {
            if done.kind == CQ_SENT || done.kind == CQ_ERROR {
                free[i].push(done.cookie);
            }
            if done.kind == CQ_ERROR {
                anyhow::bail!(
                    "a message of channel port {} failed at the agent (code {})",
                    c.src_port,
                    done.len
                );
            }
        }
        let rec = &mut records[i];
        match free[i].pop() {
            Some(offset) => {
                let d = SendDesc {
                    offset,
                    len: plan.message as u32,
                    dst_node: *dst,
                    cookie: offset,
                    dst_port: c.dst_port,
                    priority: 0,
                    _pad: [0; 5],
                };
                if p.post_send(d)? {
                    let now = t0.elapsed().as_secs_f64();
                    rec.emitted.push(now);
                    rec.late.push((now - at_ns as f64 / 1e9).max(0.0));
                } else {
                    free[i].push(offset);
                    rec.skipped += 1;
                }
            }
            None => rec.skipped += 1,
        }
        // The schedule, not the actual posting, sets the next emission: lateness
        // does not accumulate.
        let next = c.phase + (n + 1) as f64 * c.period;
        heap.push(Reverse(((next * 1e9) as u64, n + 1, i)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Receipts 10 ms apart but for one 4 ms late message (gaps 14 then 6): one jitter
    /// of 4 ms over the 5 intervals after the warm-up; the first message, emitted in
    /// the warm-up, is left out.
    #[test]
    fn jitter_counts_steady_messages_against_the_negotiated_spacing() {
        let rec = ChannelRecord {
            emitted: vec![0.0, 0.1, 0.11, 0.12, 0.13, 0.14, 0.15],
            late: vec![0.0; 7],
            received: vec![0.001, 0.101, 0.111, 0.125, 0.131, 0.141, 0.151],
            skipped: 0,
        };
        let j = rec.jitter(0.05, 0.010);
        assert_eq!((j.intervals, j.jittered), (5, 1));
        assert!(
            (j.fraction() - 0.004 / 5.0 / 0.010).abs() < 1e-9,
            "{}",
            j.fraction()
        );
        let lat = rec.latencies(0.05);
        assert_eq!(lat.len(), 6);
        assert!((lat[2] - 0.005).abs() < 1e-12);
    }

    #[test]
    fn undelivered_messages_shorten_the_series_without_shifting_it() {
        // Three emitted in the steady part, two received: the pairs stay aligned.
        let rec = ChannelRecord {
            emitted: vec![0.0, 1.0, 2.0, 3.0],
            late: vec![0.0; 4],
            received: vec![0.5, 1.5, 2.5],
            skipped: 0,
        };
        assert_eq!(rec.latencies(0.9), vec![0.5, 0.5]);
        assert_eq!(rec.jitter(0.9, 1.0).intervals, 1);
        assert_eq!(rec.jitter(3.5, 1.0).intervals, 0);
    }
}
