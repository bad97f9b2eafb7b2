//! One run of a Yum cluster at one offered load: the flit network built from the
//! configuration, driven through its hooks ([`crate::flit::hooks`]) by a policy that
//! plays every consumer and HCA — it posts the workload's messages as WQEs on queue
//! pairs ([`super::hca`]), sets up real-time connections with probes (§4.1), charges
//! and releases reservations in the routers as probes, releases and final packets
//! pass ([`super::admission`]), reloads the VL arbiters with the WRR weights of the
//! admitted connections (§3.3), and measures ([`super::metrics`]).
//!
//! The policy itself is [`super::driver`]. Frames are counted when produced in the measurement window, less two frame times
//! at its end, so that every counted frame's packets are posted inside the window and
//! are waited for by the drain.

use std::cell::RefCell;
use std::rc::Rc;

use qos_core::units::Time;
use serde::Serialize;

use super::admission::{lane_map, unweighted, Admission};
use super::config::{Completion, IbaConfig, Shape};
use super::congestion::{buffer_of, CongestionSpec, Credits};
use super::driver::Driver;
use super::hca::{Adapters, QpGate, SharedGate};
use super::metrics::{Collector, Measures};
use super::peak::{EnergyGate, PowerControlSpec, RtPower};
use super::power::{FlitEnergy, PowerMeter, PowerSummary};
use super::powerherd::Herd;
use super::source_rate::{Allocation, SourceRate};
use super::throttle::Throttle;
use super::traffic::TrafficClass;
use super::traffic::Workload;
use crate::flit::config::{
    ClassConfig, FlitConfig, HcaConfig, HcaModel, Pattern, Phases, Process, RouterConfig,
};
use crate::flit::governor::Governor;
use crate::flit::topology::Fabric;
use crate::flit::Network;

pub use super::error::IbaError;

/// What one run produced.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutput {
    /// The offered load.
    pub load: f64,
    /// DMP, DMT, latencies, rejections.
    pub measures: Measures,
    /// Real-time connections in the workload.
    pub connections: usize,
    /// The connections admitted at least once (all that asked, without admission
    /// control), by number.
    pub admitted: Vec<u32>,
    /// The real-time load the workload offers: its connections' mean rates per node,
    /// a fraction of the link (the connections a case leaves silent not counted).
    pub offered_rt_load: f64,
    /// The load that entered: best effort's share of the offered load plus the mean
    /// rates of the admitted connections, per node, a fraction of the link.
    pub admitted_load: f64,
    /// Real-time messages dropped at a full send queue.
    pub dropped: u64,
    /// Real-time attempts refused for want of a credit (credit-based congestion
    /// control; each is tried again later).
    pub credit_refusals: u64,
    /// Best-effort messages that waited for a credit.
    pub credit_waits: u64,
    /// ALO, Self-Tuned or source rate control: times a node's DMA was refused a data
    /// packet (once per node and cycle it asked).
    pub throttled: u64,
    /// Self-Tuned: its threshold at the end of the run, in full buffers.
    pub threshold: f64,
    /// Reliable service: ACKs of data messages that came back to their sources.
    pub data_acks: u64,
    /// The network's power over the measurement window (with `[power]`).
    pub power: Option<PowerSummary>,
    /// Peak power control: probes refused for want of a router's real-time power
    /// budget.
    pub power_refused: u64,
    /// Peak power control: times a best-effort packet was held back by its HCA's
    /// energy budget (once per node and cycle asked).
    pub energy_held: u64,
    /// PowerHerd: router-windows in which a router was held back at its budget.
    pub herd_held: u64,
    /// Data flits delivered per node per cycle in the measurement window, a fraction
    /// of the link (accepted throughput).
    pub throughput: f64,
    /// Mean and highest utilisation of the cabled router links.
    pub link_utilisation_avg: f64,
    /// Highest link utilisation.
    pub link_utilisation_max: f64,
    /// Cycles simulated.
    pub cycles: u64,
    /// Length of a cycle (ps).
    pub cycle_ps: u64,
    /// Flit hops simulated.
    pub flit_hops: u64,
    /// Measured packets did not all drain in time.
    pub saturated: bool,
    /// Highest reservation on any link at the end, a fraction of its capacity (0
    /// without admission control).
    pub reserved_max: f64,
    /// Sessions ended by their final data packet (with `workload.lifetime`).
    pub ended_by_final: u64,
    /// Sessions ended by a release packet (nothing left to send, or the final packet
    /// dropped at a full send queue).
    pub ended_by_release: u64,
    /// Flits moved per wall-clock second are the caller's to measure; this is the
    /// fabric's size.
    pub routers: u32,
}

/// The flit network of `cfg`: its topology, Yum's (or BookSim's) router, the HCA, the
/// three traffic classes (control on VL15, real time, best effort; indices as
/// [`TrafficClass`]), no traffic of its own, the phases in cycles.
pub fn flit_config(cfg: &IbaConfig, seed: u64) -> FlitConfig {
    let n = &cfg.network;
    let arb = unweighted(&n.lanes, &cfg.arbitration);
    let class = |name: &str, vls: Vec<u8>, len: u32, priority: u8| ClassConfig {
        name: name.into(),
        vls,
        packet_flits: len,
        packet_mix: Vec::new(),
        priority,
        rate: 0.0,
        process: Process::Poisson,
        pattern: Pattern::UniformOthers,
        keep_lane: true,
    };
    FlitConfig {
        topology: n.topology.topology(),
        router: RouterConfig {
            buffer: n.vl_buffer,
            delays: n.pipeline.delays(),
            allocator: Some(n.crossbar.allocator()),
            output_arbitration: arb.clone(),
            input_arbitration: qos_core::vlarb::VlArbConfig::RoundRobin,
            lane_order: Default::default(),
            output_buffer: Some(n.output_buffer),
            credit_delay: None,
            use_noc_latency: None,
            routing_delay: None,
            input_speedup: None,
            alloc_iters: None,
            wait_for_tail_credit: None,
            hold_switch_for_packet: None,
            priority: Default::default(),
        },
        hca: HcaConfig {
            model: Some(HcaModel::Dma),
            vl_buffer: Some(cfg.hca.vl_buffer),
            arbitration: arb,
        },
        classes: vec![
            class("control", vec![15], cfg.workload.control.packet_flits, 3),
            class(
                "real-time",
                n.lanes.real_time.clone(),
                cfg.workload.packet_flits,
                2,
            ),
            class(
                "best-effort",
                n.lanes.best_effort.clone(),
                cfg.workload.packet_flits,
                1,
            ),
        ],
        streams: vec![],
        phases: Phases {
            drain_max: n.cycles(cfg.run.drain).max(1),
            ..Phases::fixed(n.cycles(cfg.run.warmup), n.cycles(cfg.run.measure).max(1))
        },
        seed,
        watchdog: 100_000,
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;

/// Runs `cfg` (validated) at offered `load` with `seed`; `progress` hears the cycle.
pub fn run(
    cfg: &IbaConfig,
    load: f64,
    seed: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<RunOutput, IbaError> {
    let fc = flit_config(cfg, seed);
    let mut net = Network::new(&fc)?;
    let fab = net.fabric().clone();
    let wl = Workload::new(cfg, load, seed);
    let wl_conns = wl.connections().to_vec();
    let mut adapters = Adapters::new(fab.nodes, &cfg.hca)?;
    for c in wl.connections() {
        adapters.open(c.id, c.src, c.dst, &cfg.hca)?;
    }
    let adapters = Rc::new(RefCell::new(adapters));
    let throttle =
        Throttle::new(&cfg.congestion, &fab, &cfg.network.lanes).map(|t| Rc::new(RefCell::new(t)));
    let mut gates: Vec<SharedGate> = Vec::new();
    if let Some(t) = &throttle {
        gates.push(t.clone());
    }
    let pc = power_control(cfg, &fab, wl.connections().len())?;
    if let Some(e) = &pc.energy {
        gates.push(e.clone());
    }
    if let Some(g) = pc.governor {
        net.set_governor(g);
    }
    let source_rate = match cfg.congestion {
        CongestionSpec::SourceRate(spec) => {
            let premium: Vec<_> = wl
                .connections()
                .iter()
                .map(|c| (c.src, c.dst, c.solicit))
                .collect();
            adapters
                .borrow_mut()
                .best_effort_per_destination(&cfg.hca)?;
            let adm = Admission::new(&fab, cfg);
            let alloc = Allocation::new(&fab, &adm, cfg.network.link, &spec, &premium)
                .map_err(|e| IbaError::SourceRate(Box::new(e)))?;
            let g = Rc::new(RefCell::new(SourceRate::new(
                alloc,
                spec.burst,
                cfg.network.cycle().as_ps(),
            )));
            gates.push(g.clone());
            Some(g)
        }
        _ => None,
    };
    net.set_injection_gate(Box::new(QpGate(adapters.clone(), gates.clone())));
    let lanes = lane_map(&fab, cfg, seed);
    if let Some(m) = &lanes {
        net.set_lane_map(m.clone());
    }
    let adm = cfg.admission.enabled.then(|| {
        let mut a = Admission::new(&fab, cfg);
        a.set_lane_map(lanes);
        a
    });
    let paths = match &adm {
        Some(a) => wl
            .connections()
            .iter()
            .map(|c| a.path_on(&fab, c.src, c.dst, c.lane))
            .collect(),
        None => Vec::new(),
    };
    let cycle_ps = cfg.network.cycle().as_ps();
    let w0 = fc.phases.warmup;
    let w1 = w0 + fc.phases.measure;
    let period = wl.longest_frame_period();
    let from = Time::from_ps(w0 * cycle_ps);
    let until = Time::from_ps(w1 * cycle_ps);
    let frames_until = Time::from_ps(
        until
            .as_ps()
            .saturating_sub(2 * period.as_ps())
            .max(from.as_ps() + 1),
    );
    let collector = Collector::with_frames(
        from,
        until,
        frames_until,
        cfg.run.batches,
        cfg.workload.deadline_anchor,
    );
    let n = wl.connections().len();
    let credits = match cfg.congestion {
        CongestionSpec::Credits {
            best_effort,
            cq,
            buffer_packets,
            ..
        } => {
            if cfg.hca.completion == Completion::Dma {
                adapters.borrow_mut().track_dma();
            }
            let k = match cfg.network.topology {
                Shape::Mesh { k } => k,
                Shape::Crossbar { .. } => 0,
            };
            let m =
                buffer_packets.unwrap_or(buffer_of(cfg.hca.vl_buffer, cfg.workload.packet_flits));
            let conns: Vec<_> = wl.connections().iter().map(|c| c.solicit).collect();
            Some(Credits::new(
                fab.nodes,
                cq,
                k,
                best_effort,
                m,
                cfg.network.link,
                &conns,
            ))
        }
        _ => None,
    };
    let mut d = Driver::new(cfg, wl, adapters, adm, paths, collector, credits);
    d.throttle = throttle.clone();
    d.gates = gates;
    d.rt_power = pc.rt;
    d.herd = pc.herd;
    d.meter = cfg
        .power
        .map(|p| PowerMeter::new(p, cfg.network.flit_bits, cycle_ps as f64 * 1e-12, w0, w1));
    let r = net.run_hooked(&mut d, progress)?;
    if let Some(e) = d.take_error() {
        return Err(e);
    }
    let reserved_max = d.adm.as_ref().map_or(0.0, |a| {
        (0..a.ledger.len() as u32)
            .map(qos_core::admission::probe::LinkId)
            .filter(|&l| !a.ledger.capacity(l).is_zero())
            .map(|l| {
                a.ledger.reserved(l).bytes_per_sec() as f64
                    / a.ledger.capacity(l).bytes_per_sec() as f64
            })
            .fold(0.0, f64::max)
    });
    let routers = net.fabric().routers;
    let measures = d.collector.finish();
    let flits: u64 = measures
        .delivered_flits
        .iter()
        .filter(|(c, _)| **c != TrafficClass::Control)
        .map(|(_, f)| f)
        .sum();
    let admitted: Vec<u32> = (0..n as u32).filter(|&c| d.admitted[c as usize]).collect();
    let per_node = |ids: &mut dyn Iterator<Item = u32>| {
        let sum: u64 = ids.map(|c| wl_conns[c as usize].mean.bytes_per_sec()).sum();
        sum as f64 / (fab.nodes as f64 * cfg.network.link.bytes_per_sec() as f64)
    };
    let only = cfg.workload.streams.as_deref();
    let offered_rt_load =
        per_node(&mut (0..n as u32).filter(|c| only.is_none_or(|o| o.contains(c))));
    let admitted_rt_load = per_node(&mut admitted.iter().copied());
    let (_, be) = cfg.workload.mix.split(load, cfg.network.link);
    let admitted_load =
        admitted_rt_load + be.bytes_per_sec() as f64 / cfg.network.link.bytes_per_sec() as f64;
    let (credit_refusals, credit_waits) = d
        .credits
        .as_ref()
        .map_or((0, 0), |c| (c.rt_refusals, c.be_waits));
    Ok(RunOutput {
        load,
        throughput: flits as f64 / (fab.nodes as f64 * fc.phases.measure.max(1) as f64),
        measures,
        connections: n,
        admitted,
        offered_rt_load,
        admitted_load,
        dropped: d.dropped,
        credit_refusals,
        credit_waits,
        data_acks: d.data_acks,
        power: d.meter.as_ref().map(|m| m.summary()),
        power_refused: d.rt_power.as_ref().map_or(0, |p| p.refused),
        energy_held: pc.energy.as_ref().map_or(0, |e| e.borrow().held),
        herd_held: d.herd.as_ref().map_or(0, |h| h.held_windows),
        throttled: throttle.as_ref().map_or(0, |t| t.borrow().throttled)
            + source_rate.as_ref().map_or(0, |g| g.borrow().held),
        threshold: throttle.as_ref().map_or(0.0, |t| t.borrow().threshold),
        link_utilisation_avg: r.link_utilisation_avg,
        link_utilisation_max: r.link_utilisation_max,
        cycles: r.cycles,
        cycle_ps,
        flit_hops: r.flit_hops,
        saturated: r.saturated,
        reserved_max,
        ended_by_final: d.ended.0,
        ended_by_release: d.ended.1,
        routers,
    })
}

/// A run's power control, built from `[power_control]`.
struct PowerControl {
    energy: Option<Rc<RefCell<EnergyGate>>>,
    rt: Option<RtPower>,
    governor: Option<Governor>,
    herd: Option<Herd>,
}

/// Peak power control's budgets (real-time per router, best-effort per HCA) or
/// PowerHerd's per-router caps, for `cfg` on `fab` with `conns` connections.
fn power_control(cfg: &IbaConfig, fab: &Fabric, conns: usize) -> Result<PowerControl, IbaError> {
    let mut pc = PowerControl {
        energy: None,
        rt: None,
        governor: None,
        herd: None,
    };
    let (Some(spec), Some(e)) = (&cfg.power_control, &cfg.power) else {
        return Ok(pc);
    };
    let n = &cfg.network;
    let fe = FlitEnergy::new(e, n.flit_bits);
    let cycle_s = n.cycle().as_ps() as f64 * 1e-12;
    match *spec {
        PowerControlSpec::Credits {
            peak_w,
            real_time_share,
            ..
        } => {
            if let Some((p, fe)) = cfg.be_params() {
                pc.energy = Some(Rc::new(RefCell::new(EnergyGate::new(fab, fe, &p)?)));
            }
            if cfg.admission.enabled {
                let share = real_time_share.unwrap_or(cfg.workload.mix.0);
                pc.rt = Some(RtPower::new(
                    peak_w * share,
                    fab.routers,
                    conns,
                    fe,
                    n.flit_bits,
                ));
            }
        }
        PowerControlSpec::Powerherd {
            peak_w,
            window,
            share,
        } => {
            let cap = peak_w * window as f64 * cycle_s * 1e12 / fab.routers.max(1) as f64;
            pc.governor = Some(Governor::new(
                fab.routers as usize,
                fab.total_ports(),
                &fab.hca_port,
                fe.hop,
                fe.injection,
                cap,
            ));
            pc.herd = Some(Herd::new(fab, window, share));
        }
    }
    Ok(pc)
}

#[cfg(test)]
#[path = "congestion_tests.rs"]
mod congestion_tests;

#[cfg(test)]
#[path = "power_control_tests.rs"]
mod power_control_tests;
