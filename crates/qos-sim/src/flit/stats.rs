//! Statistics of a flit-network run, BookSim-style: packets created during the
//! measurement window are measured; their latency (creation to tail arrival, source
//! queueing included) is kept per class and per CBR stream; offered and accepted
//! throughput count flits created / delivered inside the window; per-link utilisation
//! is flits sent on each router output during the window per cycle. The collector
//! also keeps what BookSim2's `latency_thres` rule looks at.

use serde::{Deserialize, Serialize};

/// Latency summary in cycles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Latency {
    /// Packets counted.
    pub packets: u64,
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

impl Latency {
    /// Summary of `samples` (sorted in place).
    pub fn of(samples: &mut [u32]) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        samples.sort_unstable();
        let n = samples.len();
        let pct = |q: f64| samples[((q * n as f64).ceil() as usize).clamp(1, n) - 1] as u64;
        Latency {
            packets: n as u64,
            avg: samples.iter().map(|&x| x as f64).sum::<f64>() / n as f64,
            p50: pct(0.5),
            p99: pct(0.99),
            max: samples[n - 1] as u64,
        }
    }
}

/// Results of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassResult {
    /// Class name.
    pub name: String,
    /// Flits created per node per cycle in the window.
    pub offered: f64,
    /// Flits delivered per node per cycle in the window.
    pub accepted: f64,
    /// Packet latency (creation to tail arrival).
    pub latency: Latency,
    /// Mean network latency (head injection to tail arrival).
    pub network_latency: f64,
}

/// Results of one CBR stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowResult {
    /// Stream name.
    pub name: String,
    /// Packet latency.
    pub latency: Latency,
    /// Flits delivered per cycle in the window.
    pub accepted: f64,
}

/// Why a run stopped before its planned end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// BookSim2's `latency_thres` rule: a class's mean latency (delivered packets and
    /// flits in flight) passed `phases.abort_latency`.
    LatencyThres,
    /// A converging warm-up (`phases.warmup_converge`) had not converged when the run's
    /// sample periods were used up.
    NotWarmedUp,
    /// The measurement converged (three successive sample periods within
    /// `phases.stopping_thres`) before `phases.measure` cycles.
    Converged,
    /// Under the stability rule (`phases.abort_latency` set), no flit moved for
    /// `watchdog` cycles while flits waited: the network deadlocked, and the run is
    /// unstable. (BookSim2 warns and runs on until a sample's end finds the ages of the
    /// stuck flits past `latency_thres`; ours stops at the detection. Without the rule
    /// a deadlock is an error.)
    Deadlock,
}

/// How a run that stopped before its planned end was cut short, and the window its
/// figures cover.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stop {
    /// Why.
    pub reason: StopReason,
    /// The cycle it stopped at (the measurement's end, for a converged one).
    pub at: u64,
    /// The window the rates and link utilisation are taken over: the measurement's
    /// start to its end, or, for a run stopped during its warm-up, the last clear of
    /// the statistics to the stop (BookSim2's `_reset_time`).
    pub window: (u64, u64),
    /// The class mean that passed `phases.abort_latency` (`latency_thres` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
}

/// Results of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Per class.
    pub classes: Vec<ClassResult>,
    /// Per stream.
    pub flows: Vec<FlowResult>,
    /// All classes together.
    pub total: ClassResult,
    /// Mean utilisation over connected router output links, ejection included (flits/cycle).
    pub link_utilisation_avg: f64,
    /// Busiest router output link.
    pub link_utilisation_max: f64,
    /// Per global router output port (flits/cycle in the window).
    pub link_utilisation: Vec<f64>,
    /// Cycles simulated (warm-up, measurement and drain).
    pub cycles: u64,
    /// Flits moved across a router crossbar, all phases.
    pub flit_hops: u64,
    /// Measured packets did not all arrive within `drain_max`, or the run was stopped
    /// as unstable: the load is past saturation.
    pub saturated: bool,
    /// BookSim2's stability rule (`phases.abort_latency`, [`super::sampling`]) found the
    /// run unstable; its figures cover the window it measured ([`RunResult::stop`]).
    #[serde(default)]
    pub unstable: bool,
    /// How the run was cut short, when it was (absent for a run that measured its
    /// whole window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Stop>,
}

/// Accumulators filled by the engine.
#[derive(Debug, Clone, Default)]
pub struct Collector {
    pub(crate) lat: Vec<Vec<u32>>,
    pub(crate) net_lat_sum: Vec<u64>,
    pub(crate) offered: Vec<u64>,
    pub(crate) accepted: Vec<u64>,
    pub(crate) flow_lat: Vec<Vec<u32>>,
    pub(crate) flow_acc: Vec<u64>,
    pub(crate) link: Vec<u64>,
    /// Per class: flits of packets that reached the front of their send queue and are
    /// not yet delivered (BookSim2's flits in flight), and the sum of their creation
    /// cycles.
    pub(crate) flight_flits: Vec<u64>,
    pub(crate) flight_created: Vec<u64>,
    /// Per class, since the statistics were last cleared (BookSim2's `_ClearStats`):
    /// the latency sum and count of the packets delivered (every packet in warm-up,
    /// measured packets after it), the flits delivered before the drain, the flits of
    /// the packets created, and the latencies of the packets delivered in warm-up.
    pub(crate) recent_lat: Vec<u64>,
    pub(crate) recent_n: Vec<u64>,
    pub(crate) recent_acc: Vec<u64>,
    pub(crate) recent_off: Vec<u64>,
    pub(crate) recent_samples: Vec<Vec<u32>>,
}

impl Collector {
    /// Empty accumulators for `classes`, `flows` and `ports`.
    pub fn new(classes: usize, flows: usize, ports: usize) -> Self {
        Collector {
            lat: vec![Vec::new(); classes],
            net_lat_sum: vec![0; classes],
            offered: vec![0; classes],
            accepted: vec![0; classes],
            flow_lat: vec![Vec::new(); flows],
            flow_acc: vec![0; flows],
            link: vec![0; ports],
            flight_flits: vec![0; classes],
            flight_created: vec![0; classes],
            recent_lat: vec![0; classes],
            recent_n: vec![0; classes],
            recent_acc: vec![0; classes],
            recent_off: vec![0; classes],
            recent_samples: vec![Vec::new(); classes],
        }
    }

    /// Forgets what was delivered and created so far (BookSim2's `_ClearStats`).
    pub fn clear_recent(&mut self) {
        for c in 0..self.recent_lat.len() {
            self.recent_lat[c] = 0;
            self.recent_n[c] = 0;
            self.recent_acc[c] = 0;
            self.recent_off[c] = 0;
            self.recent_samples[c].clear();
        }
    }

    /// What BookSim2 compares with `latency_thres` for class `c` at the start of cycle
    /// `now`: the mean over the class's packets delivered since the last clear (their
    /// latency) and its flits in flight (their age). NaN when there is neither (no
    /// comparison holds, as in BookSim2).
    pub fn abort_mean(&self, c: usize, now: u64) -> f64 {
        let n = self.recent_n[c] + self.flight_flits[c];
        let ages = self.flight_flits[c] * now - self.flight_created[c];
        (self.recent_lat[c] + ages) as f64 / n as f64
    }
}
