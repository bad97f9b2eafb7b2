//! The extension points at work: a policy's probe turned around into an ACK by the
//! header hook, a release absorbed at a router, packets posted by a policy and DMA'd
//! in the order its injection gate picks, the periodic hook's cadence, and output
//! arbiters reloaded by the hook.

use std::collections::VecDeque;

use qos_core::vlarb::VlArbConfig;

use super::config::*;
use super::hooks::*;
use super::{FlitError, Network};

fn cfg(ports: u32, measure: u64) -> FlitConfig {
    let class = |name: &str, vls: &[u8], priority: u8| ClassConfig {
        name: name.into(),
        vls: vls.to_vec(),
        packet_flits: 40,
        packet_mix: Vec::new(),
        priority,
        rate: 0.0,
        process: Process::Bernoulli,
        pattern: Pattern::UniformOthers,
        keep_lane: false,
    };
    FlitConfig {
        topology: TopologySpec::Crossbar { ports },
        router: RouterConfig {
            buffer: 10,
            delays: DelaySpec::Preset(DelayPreset::Yum),
            allocator: Some(Allocator::VlArbiters),
            output_arbitration: VlArbConfig::RoundRobin,
            input_arbitration: VlArbConfig::RoundRobin,
            lane_order: Default::default(),
            output_buffer: None,
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
            vl_buffer: Some(10),
            ..HcaConfig::default()
        },
        classes: vec![class("control", &[15], 2), class("data", &[0, 1], 1)],
        streams: vec![],
        phases: Phases {
            drain_max: 20_000,
            ..Phases::fixed(0, measure)
        },
        seed: 1,
        watchdog: 5_000,
    }
}

/// Posts its packets at given cycles, turns probes around at the destination's router,
/// absorbs releases, records what it sees.
#[derive(Default)]
struct Policy {
    plan: VecDeque<(u64, Post)>,
    headers: Vec<(Kind, u32, Place)>,
    delivered: Vec<(Kind, u32, u32, u64)>,
    injected: Vec<u32>,
    ticks: Vec<u64>,
    period: u64,
    reload: bool,
}

impl Hooks for Policy {
    fn header(&mut self, h: &Header, at: &Place, out: &mut Outputs<'_>) -> Verdict {
        self.headers.push((h.kind, h.tag, *at));
        if self.reload {
            out.set(at.out_port, VlArbConfig::Fcfs.build().unwrap());
        }
        match h.kind {
            Kind::Probe if at.to_node == Some(h.dst) => Verdict::TurnAround {
                kind: Kind::Ack,
                aux: 77,
            },
            Kind::Release => Verdict::Absorb,
            _ => Verdict::Pass,
        }
    }
    fn delivered(&mut self, d: &Delivered) {
        self.delivered.push((d.kind, d.tag, d.aux, d.at));
    }
    fn injected(&mut self, d: &Delivered) {
        self.injected.push(d.tag);
    }
    fn cycle<N: Net>(&mut self, now: u64, net: &mut Poster<'_, N>) -> Result<(), FlitError> {
        while self.plan.front().is_some_and(|(t, _)| *t <= now) {
            let (_, p) = self.plan.pop_front().unwrap();
            net.post(p)?;
        }
        Ok(())
    }
    fn next_time(&self, _now: u64) -> Option<u64> {
        self.plan.front().map(|(t, _)| *t)
    }
    fn period(&self) -> u64 {
        self.period
    }
    fn periodic<N: Net>(&mut self, now: u64, _net: &mut Poster<'_, N>) {
        self.ticks.push(now);
    }
}

fn post(kind: Kind, src: u32, dst: u32, class: u8, vl: u8, len: u32, tag: u32) -> Post {
    Post {
        src,
        dst,
        class,
        vl,
        len,
        kind,
        tag,
        aux: 0,
    }
}

#[test]
fn a_probe_is_turned_around_at_the_destinations_router_and_its_ack_reaches_the_source() {
    let mut net = Network::new(&cfg(4, 500)).unwrap();
    let mut p = Policy {
        plan: VecDeque::from([(10, post(Kind::Probe, 0, 3, 0, 15, 1, 42))]),
        ..Policy::default()
    };
    let r = net.run_hooked(&mut p, &mut |_| {}).unwrap();
    assert!(!r.saturated);
    // Seen once at the only router, routed towards node 3.
    assert_eq!(p.headers.len(), 1);
    let (kind, tag, at) = p.headers[0];
    assert_eq!(
        (kind, tag, at.router, at.to_node, at.from_node),
        (Kind::Probe, 42, 0, Some(3), Some(0))
    );
    // The ACK, tagged as the probe was, arrives at node 0 with the hook's payload.
    assert_eq!(p.delivered.len(), 1);
    let (k, t, aux, _) = p.delivered[0];
    assert_eq!((k, t, aux), (Kind::Ack, 42, 77));
    assert_eq!(p.injected, vec![42]);
}

#[test]
fn an_absorbed_release_leaves_the_network_empty_and_data_passes_untouched() {
    let mut net = Network::new(&cfg(4, 500)).unwrap();
    let mut p = Policy {
        plan: VecDeque::from([
            (5, post(Kind::Release, 1, 2, 0, 15, 1, 7)),
            (6, post(Kind::Data, 1, 2, 1, 0, 40, 8)),
            (6, post(Kind::Final, 2, 1, 1, 1, 40, 9)),
        ]),
        ..Policy::default()
    };
    let r = net.run_hooked(&mut p, &mut |_| {}).unwrap();
    assert!(!r.saturated);
    // The data packet never reaches the hook; the release and the final packet do.
    let kinds: Vec<Kind> = p.headers.iter().map(|h| h.0).collect();
    assert!(kinds.contains(&Kind::Release) && kinds.contains(&Kind::Final));
    assert!(!kinds.contains(&Kind::Data));
    let got: Vec<(Kind, u32)> = p.delivered.iter().map(|d| (d.0, d.1)).collect();
    assert!(got.contains(&(Kind::Data, 8)) && got.contains(&(Kind::Final, 9)));
    assert!(!got.iter().any(|d| d.0 == Kind::Release));
    // Both 40-flit data packets were accepted in the window.
    assert!((r.classes[1].accepted * 4.0 * 500.0 - 80.0).abs() < 1e-9);
}

/// Hands packets to the DMA last posted first.
#[derive(Default)]
struct Lifo {
    q: Vec<Vec<(u32, u8)>>,
    done: Vec<u32>,
}

impl InjectionGate for Lifo {
    fn enqueue(&mut self, node: usize, _class: usize, pkt: u32, lane: u8, _now: u64) {
        if self.q.len() <= node {
            self.q.resize(node + 1, Vec::new());
        }
        self.q[node].push((pkt, lane));
    }
    fn pick(&mut self, node: usize, room: &dyn Fn(u8) -> bool, _now: u64) -> Option<u32> {
        let q = self.q.get_mut(node)?;
        match q.last() {
            Some(&(p, l)) if room(l) => {
                q.pop();
                Some(p)
            }
            _ => None,
        }
    }
    fn dma_done(&mut self, _node: usize, pkt: u32, _now: u64) {
        self.done.push(pkt);
    }
}

#[test]
fn the_injection_gate_decides_which_packet_the_dma_takes() {
    let mut net = Network::new(&cfg(4, 2000)).unwrap();
    net.set_injection_gate(Box::new(Lifo::default()));
    let plan: VecDeque<(u64, Post)> = (0..4)
        .map(|i| (3, post(Kind::Final, 0, 1, 1, 0, 20, i)))
        .collect();
    let mut p = Policy {
        plan,
        ..Policy::default()
    };
    net.run_hooked(&mut p, &mut |_| {}).unwrap();
    // All four on one lane, posted in one cycle: they leave in the gate's order.
    assert_eq!(p.injected, vec![3, 2, 1, 0]);
    let order: Vec<u32> = p.delivered.iter().map(|d| d.1).collect();
    assert_eq!(order, vec![3, 2, 1, 0]);
}

#[test]
fn the_periodic_hook_runs_every_n_cycles_even_across_idle_time() {
    let mut net = Network::new(&cfg(4, 1000)).unwrap();
    let mut p = Policy {
        period: 100,
        reload: true,
        plan: VecDeque::from([(450, post(Kind::Probe, 2, 1, 0, 15, 1, 1))]),
        ..Policy::default()
    };
    net.run_hooked(&mut p, &mut |_| {}).unwrap();
    assert_eq!(p.ticks, (0..=10).map(|i| i * 100).collect::<Vec<_>>());
    assert_eq!(p.delivered.len(), 1);
}

#[test]
fn a_post_outside_its_class_lanes_is_an_error() {
    let mut net = Network::new(&cfg(4, 100)).unwrap();
    let mut p = Policy {
        plan: VecDeque::from([(1, post(Kind::Data, 0, 1, 1, 15, 40, 0))]),
        ..Policy::default()
    };
    assert!(net.run_hooked(&mut p, &mut |_| {}).is_err());
}
