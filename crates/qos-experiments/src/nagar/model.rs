//! What every run of Nagar et al.'s experiments shares: the model's constants
//! ([`calibration`]), the set-up of a run on a crossbar ([`setup`], [`setup_with`]),
//! the run options and what one scenario produced, and the paper's message-size labels.
//! A leaf of the experiment, so its parts (tables, channels, factors, bounds, fit) use it
//! without importing the experiment back.

use std::sync::Arc;

use qos_core::topology::build;
use qos_core::topology::NodeId;
use qos_core::units::{Bytes, Duration, Time};
use qos_sim::myrinet::nic::via::ViaCalibration;
use qos_sim::myrinet::{Api, Calibration, FlowSpec, Rate, Setup, Workload};
use serde::Serialize;

use super::scenario::Variant;
use crate::check::Check;
use crate::report::{Figure, Table};

/// How long to run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Reduced sizes (tests): shorter runs, fewer points and iterations.
    pub quick: bool,
    /// Overrides every scenario's seed.
    pub seed: Option<u64>,
}

/// What one scenario produced.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// Scenario name.
    pub name: String,
    /// Title.
    pub title: String,
    /// What of the paper it reproduces.
    pub figure: String,
    /// Comparisons with the paper.
    pub checks: Vec<Check>,
    /// Plots.
    pub figures: Vec<Figure>,
    /// Result tables (the paper's layout, knees, the comparisons beyond it).
    pub tables: Vec<Table>,
    /// Simulated events (cost).
    pub events: u64,
}

/// The constants of a run of `variant`: the embedded VIA calibration (with QoSVIA's
/// ordered completions off for [`Variant::QosviaFcfsCompletions`]) and the Myrinet
/// model's network, with the VIA host's posting and polling costs.
pub fn calibration(variant: Variant) -> (Calibration, ViaCalibration) {
    let mut via = ViaCalibration::paper();
    if variant == Variant::QosviaFcfsCompletions {
        via.qosvia.ordered_completions = false;
    }
    let mut cal = Calibration::thesis();
    cal.host.post = via.host.post;
    cal.host.poll = via.host.poll;
    (cal, via)
}

/// A run of `flows` on a crossbar of `hosts` hosts under `variant`, measured in
/// [`warmup`, `until`).
pub(crate) fn setup(
    variant: Variant,
    hosts: u16,
    flows: Vec<FlowSpec>,
    warmup: Duration,
    until: Duration,
    seed: u64,
) -> Setup {
    let (_, via) = calibration(variant);
    setup_with(variant, via, hosts, flows, warmup, until, seed)
}

/// [`setup`] with the VIA constants `via` (a refit, a changed assumption).
pub(crate) fn setup_with(
    variant: Variant,
    via: ViaCalibration,
    hosts: u16,
    flows: Vec<FlowSpec>,
    warmup: Duration,
    until: Duration,
    seed: u64,
) -> Setup {
    let (mut calibration, _) = calibration(variant);
    calibration.host.post = via.host.post;
    calibration.host.poll = via.host.poll;
    // A crossbar of a few hosts with the thesis's defaults always builds.
    let topology = build::crossbar(hosts.max(2), &build::HostDefaults::thesis())
        .and_then(|b| b.build())
        .unwrap_or_else(|e| panic!("a crossbar of {hosts} hosts: {e}"));
    Setup {
        topology: Arc::new(topology),
        calibration,
        firmware: variant.firmware(),
        via,
        flows,
        control_latency: Duration::from_us(100),
        window: (Time::ZERO + warmup, Time::ZERO + until),
        timeline_bin: None,
        until: Time::ZERO + until,
        seed,
    }
}

/// A message size as the paper writes it, with its unit so that it reads as a word
/// (a check's `at`): "4B", "1K", "16K".
pub fn size_label(b: Bytes) -> String {
    let v = b.get();
    if v >= 1024 && v.is_multiple_of(1024) {
        format!("{}K", v / 1024)
    } else {
        format!("{v}B")
    }
}

/// Long enough for any ping-pong or ping-bulk run of the tables.
pub(crate) const UNTIL: Duration = Duration::from_ms(10_000);

/// One channel from node 0 to node 1 carrying `size` messages as `workload` says.
pub(crate) fn flow(size: Bytes, workload: Workload) -> FlowSpec {
    FlowSpec {
        name: "channel".into(),
        src: NodeId(0),
        dst: NodeId(1),
        message: size,
        rate: Rate::Idt(Duration::ZERO),
        workload,
        api: Api::Gm,
        start: Time::ZERO,
        stop: None,
    }
}
