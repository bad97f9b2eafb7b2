//! Real traffic for `reproduce gulati --real` and `bench dataplane-overhead`: streams of
//! messages between applications on data-plane ports (the client library, as a user
//! program would), the arrival time of every message, rates over windows — what the
//! thesis's test programs measure (§5.1) — and a ping-pong for round trips (Fig 5.2).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use qos_client::{Port, PortOptions};

/// One stream of messages from a port on one data plane to a port on another.
#[derive(Debug, Clone)]
pub struct Stream {
    pub src_socket: PathBuf,
    pub src_port: u16,
    pub dst_socket: PathBuf,
    pub dst_node: String,
    pub dst_port: u16,
    pub message: usize,
}

/// Messages the sender keeps queued at the agent: enough to keep the flow backlogged,
/// few enough that a stopped flow stops within milliseconds.
const DEPTH: usize = 32;

/// A receiving thread's result: (seconds since start, bytes) of every message.
type Received = JoinHandle<anyhow::Result<Vec<(f64, u32)>>>;

struct Sender {
    active: Arc<AtomicBool>,
    thread: JoinHandle<anyhow::Result<()>>,
}

/// Streams running on their own threads; each sends only while active.
pub struct Traffic {
    t0: Instant,
    done: Arc<AtomicBool>,
    senders: Vec<Sender>,
    receivers: Vec<Received>,
}

/// Arrivals of every stream: (seconds since start, bytes).
pub struct Arrivals(pub Vec<Vec<(f64, u32)>>);

impl Traffic {
    /// Opens every port (receivers first, so nothing arrives at a closed port) and starts
    /// the threads; streams are inactive until [`Traffic::set_active`].
    pub fn start(streams: &[Stream]) -> anyhow::Result<Traffic> {
        let done = Arc::new(AtomicBool::new(false));
        let mut rx_ports = Vec::new();
        for s in streams {
            let p = Port::open(
                PortOptions::new(&s.dst_socket)
                    .port(s.dst_port)
                    .max_message(s.message),
            )
            .with_context(|| format!("opening port {} on {}", s.dst_port, s.dst_node))?;
            rx_ports.push(p);
        }
        let mut tx_ports = Vec::new();
        for s in streams {
            let p = Port::open(
                PortOptions::new(&s.src_socket)
                    .port(s.src_port)
                    .max_message(s.message),
            )
            .with_context(|| format!("opening port {}", s.src_port))?;
            tx_ports.push(p);
        }
        let t0 = Instant::now();
        let receivers = rx_ports
            .into_iter()
            .map(|mut p| {
                let done = done.clone();
                std::thread::spawn(move || {
                    let mut at = Vec::new();
                    while !done.load(Ordering::Relaxed) {
                        match p.recv(Duration::from_millis(50)) {
                            Ok(m) => at.push((t0.elapsed().as_secs_f64(), m.data.len() as u32)),
                            Err(qos_client::Error::Timeout) => {}
                            Err(e) => return Err(anyhow!("receiving: {e}")),
                        }
                    }
                    Ok(at)
                })
            })
            .collect();
        let senders = tx_ports
            .into_iter()
            .zip(streams)
            .map(|(mut p, s)| {
                let active = Arc::new(AtomicBool::new(false));
                let (a, done, s) = (active.clone(), done.clone(), s.clone());
                let thread = std::thread::spawn(move || {
                    let data = vec![0x5au8; s.message];
                    while !done.load(Ordering::Relaxed) {
                        if a.load(Ordering::Relaxed) {
                            p.wait_sends(DEPTH, Duration::from_secs(10))
                                .map_err(|e| anyhow!("sending to {}: {e}", s.dst_node))?;
                            p.send(&s.dst_node, s.dst_port, 0, &data)
                                .map_err(|e| anyhow!("sending to {}: {e}", s.dst_node))?;
                        } else {
                            // Completions of what is still queued, then rest.
                            let _ = p.wait_sends(DEPTH, Duration::from_millis(2));
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                    Ok(())
                });
                Sender { active, thread }
            })
            .collect();
        Ok(Traffic {
            t0,
            done,
            senders,
            receivers,
        })
    }

    /// Seconds since the streams' common start.
    pub fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Starts or stops stream `i`.
    pub fn set_active(&self, i: usize, on: bool) {
        self.senders[i].active.store(on, Ordering::Relaxed);
    }

    /// Stops everything and returns the arrivals.
    pub fn finish(self) -> anyhow::Result<Arrivals> {
        for s in &self.senders {
            s.active.store(false, Ordering::Relaxed);
        }
        // Let queued messages land before the receivers stop.
        std::thread::sleep(Duration::from_millis(300));
        self.done.store(true, Ordering::Relaxed);
        let mut first_err = None;
        for s in self.senders {
            match s.thread.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => first_err = first_err.or(Some(anyhow!("a sender thread panicked"))),
            }
        }
        let mut all = Vec::new();
        for r in self.receivers {
            match r.join() {
                Ok(Ok(v)) => all.push(v),
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(anyhow!("a receiver thread panicked")),
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(Arrivals(all)),
        }
    }
}

impl Arrivals {
    /// Bytes per second of stream `i` over [from, to) seconds.
    pub fn rate(&self, i: usize, from: f64, to: f64) -> f64 {
        let bytes: u64 = self.0[i]
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, b)| u64::from(*b))
            .sum();
        bytes as f64 / (to - from).max(1e-9)
    }

    /// Rate of stream `i` in consecutive bins of `bin` seconds up to `end`: (bin middle, B/s).
    pub fn series(&self, i: usize, bin: f64, end: f64) -> Vec<(f64, f64)> {
        let n = (end / bin).ceil() as usize;
        (0..n)
            .map(|k| {
                let a = k as f64 * bin;
                (a + bin / 2.0, self.rate(i, a, a + bin))
            })
            .collect()
    }
}

/// Runs all `streams` at once for `secs` and returns their rates (B/s) over the steady
/// part: from `warm` seconds to the end. Checks `stop` every 50 ms.
pub fn run_together(
    streams: &[Stream],
    secs: f64,
    warm: f64,
    stop: &dyn Fn() -> bool,
) -> anyhow::Result<Vec<f64>> {
    let t = Traffic::start(streams)?;
    for i in 0..streams.len() {
        t.set_active(i, true);
    }
    while t.now() < secs {
        if stop() {
            let _ = t.finish();
            anyhow::bail!("interrupted");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let a = t.finish()?;
    Ok((0..streams.len()).map(|i| a.rate(i, warm, secs)).collect())
}

/// Two ports that bounce messages: `a` on one data plane, `b` on another.
pub struct PingPong {
    a: Port,
    b: Port,
    b_node: String,
    a_node: String,
}

impl PingPong {
    pub fn open(
        a_socket: &std::path::Path,
        b_socket: &std::path::Path,
        max: usize,
    ) -> anyhow::Result<PingPong> {
        let a = Port::open(PortOptions::new(a_socket).port(21).max_message(max))?;
        let b = Port::open(PortOptions::new(b_socket).port(22).max_message(max))?;
        Ok(PingPong {
            a_node: a.node().to_string(),
            b_node: b.node().to_string(),
            a,
            b,
        })
    }

    /// Every round trip of `iterations` ping-pongs of `size` bytes, in microseconds.
    pub fn round_trips_us(&mut self, size: usize, iterations: usize) -> anyhow::Result<Vec<f64>> {
        let data = vec![3u8; size];
        let wait = Duration::from_secs(5);
        let mut v = Vec::with_capacity(iterations);
        for _ in 0..iterations.max(1) {
            let t = Instant::now();
            self.a.send(&self.b_node, 22, 0, &data)?;
            let m = self.b.recv(wait)?;
            self.b.send(&self.a_node, 21, 0, &m.data)?;
            self.a.recv(wait)?;
            v.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(v)
    }

    /// Bandwidth (B/s) of `count` back-to-back messages of `size` bytes from a to b:
    /// bytes over the time from the first send to the last arrival. (Not from a later
    /// arrival: messages the agent has already placed in posted buffers are taken by
    /// the application in a burst whenever it gets the CPU back, so arrival times at
    /// the application are not delivery times; only the whole span is.)
    pub fn bandwidth(&mut self, size: usize, count: usize) -> anyhow::Result<f64> {
        let data = vec![7u8; size];
        let wait = Duration::from_secs(10);
        let (a, b, b_node) = (&mut self.a, &mut self.b, self.b_node.as_str());
        let t = Instant::now();
        let secs = std::thread::scope(|sc| -> anyhow::Result<f64> {
            let tx = sc.spawn(move || -> anyhow::Result<()> {
                for _ in 0..count {
                    a.send(b_node, 22, 0, &data)?;
                }
                a.flush(wait)?;
                Ok(())
            });
            for _ in 0..count {
                b.recv(wait)?;
            }
            let secs = t.elapsed().as_secs_f64();
            tx.join().map_err(|_| anyhow!("sender panicked"))??;
            Ok(secs)
        })?;
        Ok((size * count) as f64 / secs.max(1e-9))
    }
}

/// The `q` quantile of `v` by linear interpolation (sorts it); 0 when empty.
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}
