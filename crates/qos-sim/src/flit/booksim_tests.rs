//! Tests of the BookSim2-equivalent configuration: each mechanism
//! that makes ours behave as BookSim2's `iq_router` and terminal, checked against a
//! figure derived from BookSim2's code or measured with BookSim2 (its head,
//! booksim/booksim2 28f4329; the runs are in docs/flit-network.md).

use super::config::*;
use super::engine::Network;
use super::sampling::Sampler;
use super::stats::{Collector, StopReason};
use super::topology::Ties;
use super::{simulate, FlitConfig};

/// The BookSim2-equivalent network on `top` with one class at `rate`.
fn booksim2(top: TopologySpec, rate: f64, warmup: u64, measure: u64) -> FlitConfig {
    let mut c = FlitConfig::booksim2(top, rate);
    c.phases = Phases {
        drain_max: 20_000,
        ..Phases::fixed(warmup, measure)
    };
    c
}

/// `c` with BookSim2's delays written stage by stage, so that its allocator, HCA and
/// torus rules may be set to others.
fn unnamed(mut c: FlitConfig) -> FlitConfig {
    c.router.delays = DelaySpec::Stages(c.delays());
    c.router.allocator = Some(c.allocator());
    c.hca.model = Some(c.hca_model());
    c
}

fn torus(k: u32) -> TopologySpec {
    TopologySpec::Torus {
        k,
        n: 2,
        ties: Some(Ties::Random),
        dateline: Some(Dateline::OnEntry),
        routing: MeshRouting::Dor,
    }
}

fn stream(src: u32, dst: u32, period: u64) -> StreamConfig {
    StreamConfig {
        name: format!("{src}->{dst}"),
        src,
        dst,
        class: "data".into(),
        period,
        start: 0,
    }
}

#[test]
fn booksim2_zero_load_is_four_cycles_a_router_on_a_mesh_and_five_on_a_torus() {
    // BookSim2: a header takes VC allocation, switch allocation and traversal (3) and
    // a channel read one cycle after its latency (1 on a mesh, 2 between torus
    // routers with use_noc_latency, 1 without); injection and ejection add 2 + 2.
    for (top, noc, per_router, extra) in [
        (TopologySpec::mesh(4), None, 4, 2),
        (TopologySpec::mesh(4), Some(false), 4, 2),
        (torus(4), None, 5, 1),
        (torus(4), Some(false), 4, 2),
    ] {
        let fab = top.fabric().unwrap();
        for len in [1u32, 40] {
            let mut cfg = booksim2(top.clone(), 0.0, 0, 10);
            cfg.router.use_noc_latency = noc;
            cfg.classes[0].packet_flits = len;
            for (src, dst) in [(0, 15), (5, 6), (3, 3), (0, 10)] {
                cfg.streams = vec![stream(src, dst, 1_000_000)];
                let r = simulate(&cfg).unwrap();
                let h = fab.routers_on_path(src, dst) as u64;
                let want = per_router * h + extra + (len as u64 - 1);
                assert_eq!(
                    r.flows[0].latency.max, want,
                    "{top:?} {noc:?} {src}->{dst} len {len}"
                );
                assert_eq!(cfg.delays().zero_load(h, len as u64), want);
            }
        }
    }
}

/// Accepted flits/node/cycle of saturating 1000-flit packets on a 2×2 mesh, one lane
/// of `buffer` flits, transpose traffic (two nodes cross two router links, two send to
/// themselves through one router).
fn two_by_two_one_lane(buffer: u16) -> f64 {
    let mut cfg = booksim2(TopologySpec::mesh(2), 0.01, 2_000, 6_000);
    cfg.router.buffer = buffer;
    cfg.classes[0].vls = vec![0];
    cfg.classes[0].packet_flits = 1000;
    cfg.classes[0].pattern = Pattern::Transpose;
    cfg.phases.drain_max = 0;
    simulate(&cfg).unwrap().total.accepted
}

#[test]
fn booksim2_credit_trips_pace_small_buffers_as_booksim2_does() {
    // BookSim2 (k = 2, num_vcs = 1, packet_size = 1000, transpose, injection 0.01)
    // accepts 0.3332 flits/node/cycle at every node with 2-flit buffers and 0.4998
    // with 3-flit ones: a router link's credit loop (3 to the far buffer, 3 back) and
    // the terminal's ejection loop (3 to the terminal, 3 back) both take 6 cycles.
    let two = two_by_two_one_lane(2);
    assert!((two - 2.0 / 6.0).abs() < 2e-3, "{two}");
    let three = two_by_two_one_lane(3);
    assert!((three - 3.0 / 6.0).abs() < 2e-3, "{three}");
}

#[test]
fn source_queue_sends_one_packet_at_a_time_in_creation_order() {
    // A packet every 20 cycles from one node, 40 flits each: BookSim2's terminal
    // sends them one after another, so packet n waits 20·n cycles for the ones
    // before it and then takes exactly its zero-load latency.
    let mut cfg = booksim2(TopologySpec::Crossbar { ports: 2 }, 0.0, 0, 200);
    cfg.streams = vec![stream(0, 1, 20)];
    let r = simulate(&cfg).unwrap();
    let zl = cfg.delays().zero_load(1, 40);
    let lat = &r.flows[0].latency;
    assert_eq!(lat.packets, 10);
    assert_eq!(lat.max, zl + 20 * 9);
    assert!((lat.avg - (zl as f64 + 20.0 * 4.5)).abs() < 1e-9, "{lat:?}");
}

#[test]
fn source_queue_lanes_do_not_carry_packets_side_by_side() {
    // Two-flit buffers: one lane carries 2 flits per 6-cycle credit loop (BookSim2:
    // 0.3332). BookSim2's terminal sends one packet at a time, so a saturating stream
    // gets one lane's worth: a 40-flit packet's 20 pairs of flits start 6 cycles apart,
    // its tail leaves 115 cycles after its header and the next header, on the next
    // lane with a credit, one cycle later: 40 flits per 116 cycles. Yum's DMA HCA
    // spreads packets over the four lanes and sends them side by side.
    let run = |model: HcaModel| {
        let mut cfg = unnamed(booksim2(
            TopologySpec::Crossbar { ports: 2 },
            0.0,
            1_000,
            6_000,
        ));
        cfg.router.buffer = 2;
        cfg.hca.model = Some(model);
        cfg.streams = vec![stream(0, 1, 1)];
        cfg.phases.drain_max = 0;
        simulate(&cfg).unwrap().flows[0].accepted
    };
    let queue = run(HcaModel::SourceQueue);
    assert!((queue - 40.0 / 116.0).abs() < 1e-3, "{queue}");
    let dma = run(HcaModel::Dma);
    assert!(dma > 0.6, "{dma}");
}

#[test]
fn separable_allocator_reaches_booksim2s_transpose_saturation_throughput() {
    // BookSim2 on the 8×8 mesh with transpose traffic far past saturation (0.05
    // packets/node/cycle, 10,000 warm-up and 20,000 measured cycles) accepts 0.3437
    // flits/node/cycle.
    let mut cfg = booksim2(TopologySpec::mesh(8), 0.05, 10_000, 20_000);
    cfg.classes[0].pattern = Pattern::Transpose;
    cfg.phases.drain_max = 0;
    let acc = simulate(&cfg).unwrap().total.accepted;
    assert!((acc - 0.3437).abs() < 0.002, "{acc}");
}

#[test]
fn booksim2_torus_rules_carry_heavy_uniform_load_without_deadlock() {
    // Random ties and lane halves chosen on entering a dimension (BookSim2's
    // dim_order_torus) keep the rings free of deadlock past saturation.
    for k in [4u32, 5] {
        let cfg = booksim2(torus(k), 0.05, 1_000, 4_000);
        let r = simulate(&FlitConfig {
            phases: Phases {
                drain_max: 1,
                ..cfg.phases
            },
            ..cfg
        })
        .unwrap();
        assert!(r.total.accepted > 0.3, "k = {k}: {}", r.total.accepted);
    }
}

#[test]
fn random_ties_split_half_way_traffic_between_both_ways() {
    // Node 0 to node 2 on a 4-ring (a 4×4 torus row) is half-way round: BookSim2 sends
    // about half of such packets each way, ours with `ties = "plus"` all the + way.
    let run = |ties: Ties| {
        let mut cfg = unnamed(booksim2(
            TopologySpec::Torus {
                k: 4,
                n: 2,
                ties: Some(ties),
                dateline: Some(Dateline::OnEntry),
                routing: MeshRouting::Dor,
            },
            0.0,
            0,
            4_000,
        ));
        cfg.streams = vec![stream(0, 2, 100)];
        let r = simulate(&cfg).unwrap();
        // Router 0's output ports 0 (+x) and 1 (−x).
        (r.link_utilisation[0], r.link_utilisation[1])
    };
    let (plus, minus) = run(Ties::Plus);
    assert!(plus > 0.3 && minus == 0.0, "{plus} {minus}");
    let (plus, minus) = run(Ties::Random);
    assert!(plus > 0.1 && minus > 0.1, "{plus} {minus}");
    assert!(
        (plus - minus).abs() < 0.5 * (plus + minus),
        "{plus} {minus}"
    );
}

#[test]
fn abort_latency_stops_a_run_past_saturation_as_booksim2_does() {
    // BookSim2 aborts when, at the end of a sample period, the mean over delivered
    // packets' latencies and in-flight flits' ages exceeds latency_thres.
    let mut cfg = booksim2(TopologySpec::mesh(4), 0.05, 2_000, 8_000);
    cfg.phases.abort_latency = Some(500.0);
    cfg.phases.sample_period = 1_000;
    let r = simulate(&cfg).unwrap();
    assert!(r.unstable && r.saturated, "{r:?}");
    assert!(
        r.cycles < 10_000 && r.cycles.is_multiple_of(1_000),
        "{}",
        r.cycles
    );
    cfg.classes[0].rate = 0.004;
    let r = simulate(&cfg).unwrap();
    assert!(!r.unstable && !r.saturated);
}

#[test]
fn abort_mean_averages_delivered_latencies_and_in_flight_ages() {
    let mut c = Collector::new(1, 0, 1);
    // Two packets delivered with latencies 100 and 300; three flits created at cycles
    // 50, 50 and 80 still in flight at cycle 100 (ages 50, 50, 20).
    c.recent_lat[0] = 400;
    c.recent_n[0] = 2;
    c.flight_flits[0] = 3;
    c.flight_created[0] = 180;
    assert!((c.abort_mean(0, 100) - (400.0 + 120.0) / 5.0).abs() < 1e-9);
    c.clear_recent();
    assert!((c.abort_mean(0, 100) - 40.0).abs() < 1e-9);
}

#[test]
fn a_torus_past_saturation_is_unstable_and_below_it_stable() {
    // 0.05 packets of 40 flits per node and cycle is 2 flits, twice what a terminal can
    // even inject; 0.004 (0.16 flits) is far below the torus's saturation (0.011 on
    // the 8x8 torus, docs/flit-network.md).
    let run = |rate: f64| {
        let mut cfg = FlitConfig::booksim2(torus(4), rate);
        cfg.phases = Phases {
            sample_period: 1_000,
            ..Phases::new(2_000, 8_000)
        };
        simulate(&cfg).unwrap()
    };
    let r = run(0.05);
    assert!(r.unstable && r.saturated, "{r:?}");
    assert_eq!(r.stop.unwrap().reason, StopReason::LatencyThres);
    let r = run(0.004);
    assert!(
        !r.unstable && !r.saturated && r.stop.is_none_or(|s| s.reason == StopReason::Converged)
    );
}

#[test]
fn a_run_stopped_early_divides_its_rates_by_the_window_it_measured() {
    // Far past saturation the latency_thres rule stops the run within a few sample
    // periods; what it offered is still the configured rate (40 flits x 0.05), which
    // it would not be if the flits were divided by the planned 20,000-cycle window.
    let mut cfg = FlitConfig::booksim2(TopologySpec::mesh(4), 0.05);
    cfg.phases = Phases {
        sample_period: 1_000,
        ..Phases::new(1_000, 20_000)
    };
    let r = simulate(&cfg).unwrap();
    let stop = r.stop.expect("stopped early");
    assert!(
        r.unstable && stop.reason == StopReason::LatencyThres,
        "{r:?}"
    );
    assert!(stop.at <= 11_000, "stopped at {}", stop.at);
    assert_eq!(stop.window.1, stop.at);
    assert!(stop.window.1 > stop.window.0);
    let want = 0.05 * 40.0;
    assert!(
        (r.total.offered - want).abs() < 0.15 * want,
        "offered {} flits/node/cycle over {:?}",
        r.total.offered,
        stop.window
    );
    assert!(r.total.accepted > 0.0 && r.total.accepted < r.total.offered);
}

#[test]
fn a_drained_mean_just_above_latency_thres_is_unstable() {
    // Measured packets all delivered with a mean of 520.9 cycles against
    // latency_thres 500: unstable (BookSim2's drain checks only every 1,000 cycles and
    // could miss it); exactly 500 is not above it.
    let phases = Phases::new(1_000, 1_000);
    let sampler = Sampler::new(&phases, 1, 16);
    let mut c = Collector::new(1, 0, 1);
    c.recent_lat[0] = 5_209;
    c.recent_n[0] = 10;
    let m = sampler.final_check(&c).expect("520.9 > 500 is unstable");
    assert!((m - 520.9).abs() < 1e-9);
    c.recent_lat[0] = 5_000;
    assert_eq!(sampler.final_check(&c), None);
    let off = Sampler::new(&Phases::fixed(1_000, 1_000), 1, 16);
    c.recent_lat[0] = 5_209;
    assert_eq!(off.final_check(&c), None, "no rule without abort_latency");
}

#[test]
fn an_odd_lane_count_on_a_torus_splits_its_dateline_halves_as_booksim2() {
    // dim_order_torus: the lower half is the lanes less the top floor(n / 2), the upper
    // the lanes less the bottom floor(n / 2): with 3 lanes {0, 1} and {1, 2}; with 4,
    // {0, 1} and {2, 3}. The crossing rule keeps its own halves ({0, 1} and {2}).
    let halves = |lanes: u8, on_entry: bool| {
        let dateline = if on_entry {
            Dateline::OnEntry
        } else {
            Dateline::Crossing
        };
        let top = TopologySpec::Torus {
            k: 4,
            n: 2,
            ties: None,
            dateline: Some(dateline),
            routing: MeshRouting::Dor,
        };
        let mut cfg = FlitConfig::booksim2(top, 0.01);
        if !on_entry {
            cfg.router.delays = DelaySpec::Preset(DelayPreset::Reference);
        }
        cfg.classes[0].vls = (0..lanes).collect();
        let net = Network::new(&cfg).unwrap();
        (net.class_lo[0], net.class_hi[0])
    };
    assert_eq!(halves(3, true), (0b011, 0b110));
    assert_eq!(halves(4, true), (0b0011, 0b1100));
    assert_eq!(halves(3, false), (0b011, 0b100));
}

/// BookSim2's `xy_yx_mesh` on the 8×8 mesh of `scenarios/flit/booksim-extra/
/// mesh8-xy-yx-transpose.cfg` (4 VCs × 8 flits, 10-flit packets, transpose) at 0.025
/// packets/node/cycle, where BookSim2 is stable under `xy_yx` and unstable under `dor`
/// (seed 1, 4,000-cycle periods): here too, over a shorter run. Transpose under
/// dimension order loads the X links of one triangle only; with half the packets going
/// Y first, both orders share the load. With every packet in one order (the route bit
/// never drawn) the run is as unstable as under `dor`, with half the lanes.
#[test]
fn xy_yx_spreads_transpose_over_both_orders_as_booksim2() {
    use crate::flit::config::MeshRouting;
    let run = |routing: MeshRouting| simulate(&mesh8_transpose(routing, 0.025)).unwrap();
    let dor = run(MeshRouting::Dor);
    let xy_yx = run(MeshRouting::XyYx);
    assert!(dor.unstable, "dor: {:?}", dor.total.latency);
    assert!(!xy_yx.unstable, "xy_yx: {:?}", xy_yx.total.latency);
    assert!(xy_yx.total.latency.avg < 60.0, "{:?}", xy_yx.total.latency);
}

/// BookSim2's `xy_yx_mesh` gives the ascending order a class's VCs less the last
/// `⌊n/2⌋` and the descending order the VCs less the first `⌊n/2⌋` (`available_vcs =
/// (vcEnd - vcBegin + 1) / 2`, then `vcEnd -= available_vcs` or `vcBegin +=
/// available_vcs`): with an odd count the middle VC is in both; a packet may be
/// injected on any of them.
#[test]
fn xy_yx_splits_the_lanes_as_booksim2() {
    use crate::flit::config::MeshRouting;
    for (vls, xy, yx) in [
        (vec![0, 1, 2], 0b011, 0b110),
        (vec![0, 1, 2, 3, 4], 0b00111, 0b11100),
        (vec![0, 1, 2, 3], 0b0011, 0b1100),
        (vec![0, 1], 0b01, 0b10),
    ] {
        let mut c = FlitConfig::booksim2(
            TopologySpec::Mesh {
                k: 4,
                n: 2,
                routing: MeshRouting::XyYx,
            },
            0.01,
        );
        c.classes[0].vls = vls.clone();
        let net = Network::new(&c).unwrap();
        assert_eq!((net.class_lo[0], net.class_hi[0]), (xy, yx), "{vls:?}");
        assert_eq!(net.class_inject[0], xy | yx, "{vls:?}");
    }
}

/// `xy_yx` with three VCs can deadlock (the middle VC serves both orders and a packet
/// on it turns Y-first at the next router): on this network far past saturation it
/// does in both simulators (BookSim2 28f43299 with the same settings, `latency_thres`
/// out of reach and `deadlock_warn_timeout = 500`, warns "Possible network deadlock"
/// on seeds 0–3). Under the stability rule the run ends as unstable with its own stop
/// reason; without the rule it is the watchdog's error; dimension order on the same
/// network never deadlocks.
#[test]
fn a_deadlock_is_an_unstable_run_under_the_stability_rule() {
    use crate::flit::config::MeshRouting;
    let cfg = |routing: MeshRouting, abort: Option<f64>| {
        let mut c = FlitConfig::booksim2(
            TopologySpec::Mesh {
                k: 8,
                n: 2,
                routing,
            },
            0.1,
        );
        c.classes[0].vls = vec![0, 1, 2];
        c.router.buffer = 4;
        c.classes[0].packet_flits = 5;
        c.phases.sample_period = 1_000;
        c.phases.warmup = 1_000;
        c.phases.measure = 8_000;
        c.phases.drain_max = 1_000;
        c.phases.abort_latency = abort;
        c.watchdog = 500;
        c
    };
    // Only the watchdog can stop it: a deadlock, as an unstable run.
    let r = simulate(&cfg(MeshRouting::XyYx, Some(1e12))).expect("an unstable run");
    let stop = r.stop.expect("stopped early");
    assert_eq!(stop.reason, StopReason::Deadlock, "{stop:?}");
    assert!(r.unstable && stop.at < 9_000, "{stop:?}");
    // BookSim2's default threshold: unstable, whichever rule sees it first.
    assert!(
        simulate(&cfg(MeshRouting::XyYx, Some(500.0)))
            .unwrap()
            .unstable
    );
    // No stability rule: the watchdog's error.
    assert!(matches!(
        simulate(&cfg(MeshRouting::XyYx, None)),
        Err(crate::flit::FlitError::Deadlock { .. })
    ));
    // Dimension order: saturated, never deadlocked.
    let dor = simulate(&cfg(MeshRouting::Dor, Some(1e12))).unwrap();
    assert!(
        dor.stop.is_none_or(|s| s.reason != StopReason::Deadlock),
        "{:?}",
        dor.stop
    );
}

/// BookSim2's `valiant_mesh` draws the intermediate node with `RandomInt(gNodes - 1)`,
/// whose bound is inclusive: every node, the source and destination included;
/// `romm_mesh` (`rand_min_intr_mesh`) each coordinate between the source's and the
/// destination's, both included.
#[test]
fn valiant_and_romm_draw_their_intermediate_nodes_as_booksim2() {
    use crate::flit::config::MeshRouting;
    let draws = |routing: MeshRouting, src: u32, dst: u32| {
        let c = FlitConfig::booksim2(
            TopologySpec::Mesh {
                k: 8,
                n: 2,
                routing,
            },
            0.01,
        );
        let mut net = Network::new(&c).unwrap();
        let mut seen = vec![0u32; 64];
        for _ in 0..64_000 {
            seen[net.intermediate(src, dst) as usize] += 1;
        }
        seen
    };
    // Valiant from (1,1) = 9 to (4,3) = 28: all 64 nodes, 1,000 each.
    let v = draws(MeshRouting::Valiant, 9, 28);
    for (n, &c) in v.iter().enumerate() {
        assert!(
            (850..1150).contains(&c),
            "valiant: node {n} drawn {c} times"
        );
    }
    // ROMM from (4,3) = 28 to (1,1) = 9: x in 1..=4, y in 1..=3, 12 nodes, 5,333 each.
    let r = draws(MeshRouting::Romm, 28, 9);
    for (n, &c) in r.iter().enumerate() {
        let (x, y) = (n % 8, n / 8);
        if (1..=4).contains(&x) && (1..=3).contains(&y) {
            assert!(
                (4_900..5_800).contains(&c),
                "romm: node {n} drawn {c} times"
            );
        } else {
            assert_eq!(c, 0, "romm: node {n} outside the quadrant");
        }
    }
}

/// Router traversals per flit on an 8×8 mesh under uniform traffic: a minimal route
/// (`dor`, `romm`) crosses 5.25 links on average, so 6.25 routers; `valiant` goes to a
/// uniform intermediate node first, 2 × 5.25 + 1 = 11.5 routers.
#[test]
fn valiant_doubles_the_path_and_romm_keeps_it_minimal() {
    use crate::flit::config::MeshRouting;
    let routers_per_flit = |routing: MeshRouting| {
        routers_per_flit(TopologySpec::Mesh {
            k: 8,
            n: 2,
            routing,
        })
    };
    let dor = routers_per_flit(MeshRouting::Dor);
    let romm = routers_per_flit(MeshRouting::Romm);
    let valiant = routers_per_flit(MeshRouting::Valiant);
    assert!((dor - 6.25).abs() < 0.1, "dor {dor}");
    assert!((romm - 6.25).abs() < 0.1, "romm {romm}");
    assert!((valiant - 11.5).abs() < 0.2, "valiant {valiant}");
}

/// BookSim2's `valiant_mesh` does not split the lanes at a packet's destination router,
/// even for a packet passing it in phase one, which may then go on towards its
/// intermediate node on a phase-two lane: with two VCs that closes a cycle of lane
/// dependencies, and with three the middle VC serves both phases. Far past saturation
/// (6×6, 2-flit buffers, 5-flit packets, 0.2 packets/node/cycle, stability rule off),
/// BookSim2 28f43299 with the same settings warns "Possible network deadlock" thousands
/// of times with 2 and 3 VCs (seeds 1, 2) and never with 4 (seeds 1–4); so does this
/// model. With the lanes split at the destination too, 2 VCs run without deadlock.
#[test]
fn valiant_deadlocks_where_booksim2s_does() {
    use crate::flit::config::MeshRouting;
    for (vls, seed, deadlocks) in [
        (vec![0, 1], 1, true),
        (vec![0, 1], 2, true),
        (vec![0, 1, 2], 1, true),
        (vec![0, 1, 2, 3], 1, false),
        (vec![0, 1, 2, 3], 2, false),
    ] {
        let mut c = FlitConfig::booksim2(
            TopologySpec::Mesh {
                k: 6,
                n: 2,
                routing: MeshRouting::Valiant,
            },
            0.2,
        );
        c.classes[0].vls = vls.clone();
        c.classes[0].packet_flits = 5;
        c.router.buffer = 2;
        c.phases.abort_latency = None;
        c.phases.sample_period = 1_000;
        c.phases.warmup = 1_000;
        c.phases.measure = 6_000;
        c.phases.drain_max = 1_000;
        c.watchdog = 500;
        c.seed = seed;
        let r = simulate(&c);
        if deadlocks {
            assert!(
                matches!(r, Err(crate::flit::FlitError::Deadlock { .. })),
                "{vls:?} seed {seed}: {r:?}"
            );
        } else {
            assert!(r.is_ok(), "{vls:?} seed {seed}: {r:?}");
        }
    }
}

/// BookSim2's `valiant_torus` splits the VCs twice, by dateline class then by phase,
/// with ranges: `ring_available = n / 2`, ring part 0 `vcEnd -= ring_available`, part 1
/// `vcBegin += ring_available`, then `ph_available = ring_available / 2`, phase 0
/// `vcEnd -= ph_available`, phase 1 `vcBegin += ph_available`. The engine's halves and
/// [`crate::flit::router::phase_lanes`] give the same lanes for 4 to 15 VCs.
#[test]
fn valiant_on_a_torus_takes_booksim2s_quarters_of_the_lanes() {
    use crate::flit::config::MeshRouting;
    for n in 4u32..=15 {
        let mut c = FlitConfig::booksim2(
            TopologySpec::Torus {
                k: 4,
                n: 2,
                ties: None,
                dateline: None,
                routing: MeshRouting::Valiant,
            },
            0.01,
        );
        c.classes[0].vls = (0..n as u8).collect();
        let net = Network::new(&c).unwrap();
        let class = (1u32 << n) - 1;
        let range = |b: u32, e: u32| (b..=e).fold(0u32, |m, l| m | 1 << l);
        let ra = n / 2;
        let pa = ra / 2;
        for ring in 0..2 {
            let (b, e) = if ring == 0 {
                (0, n - 1 - ra)
            } else {
                (ra, n - 1)
            };
            let half = if ring == 0 {
                net.class_lo[0]
            } else {
                net.class_hi[0]
            };
            assert_eq!(half, range(b, e), "{n} VCs, ring part {ring}");
            for phase in 0..2 {
                let want = if phase == 0 {
                    range(b, e - pa)
                } else {
                    range(b + pa, e)
                };
                let got = crate::flit::router::phase_lanes(class, half, phase == 1);
                assert_eq!(got, want, "{n} VCs, ring part {ring}, phase {phase}");
            }
        }
    }
}

/// Router traversals per flit on an 8×8 torus under uniform traffic: dimension order
/// crosses 2 links per ring on average (0, 1, 2, 3, 4, 3, 2, 1), so 5 routers; `valiant`
/// goes to a uniform intermediate node first: 2 × 4 + 1 = 9.
#[test]
fn valiant_on_a_torus_doubles_the_path() {
    use crate::flit::config::MeshRouting;
    let routers_per_flit = |routing: MeshRouting| {
        routers_per_flit(TopologySpec::Torus {
            k: 8,
            n: 2,
            ties: None,
            dateline: None,
            routing,
        })
    };
    let dor = routers_per_flit(MeshRouting::Dor);
    let valiant = routers_per_flit(MeshRouting::Valiant);
    assert!((dor - 5.0).abs() < 0.1, "dor {dor}");
    assert!((valiant - 9.0).abs() < 0.15, "valiant {valiant}");
}

/// BookSim2's `adaptive_xy_yx_mesh` picks at the first router the order whose output
/// has fewer credits in use: under transpose on an 8×8 mesh that carries 0.035
/// packets/node/cycle (BookSim2 28f43299, `mesh8-adaptive-xy-yx-transpose.cfg` seed 1:
/// 50.7 cycles), where the order drawn at random (`xy_yx`) is past saturation (its
/// saturation there is 0.03 in both simulators). Runs on one thread only: the choice
/// reads the neighbouring routers' buffers.
#[test]
fn adaptive_xy_yx_picks_the_order_with_fewer_credits_in_use() {
    use crate::flit::config::MeshRouting;
    let cfg = |routing: MeshRouting| mesh8_transpose(routing, 0.035);
    let random = simulate(&cfg(MeshRouting::XyYx)).unwrap();
    let adaptive = simulate(&cfg(MeshRouting::AdaptiveXyYx)).unwrap();
    assert!(
        random.unstable || random.total.latency.avg > 150.0,
        "xy_yx: {:?}",
        random.total.latency
    );
    assert!(
        !adaptive.unstable,
        "adaptive_xy_yx: {:?}",
        adaptive.total.latency
    );
    assert!(
        adaptive.total.latency.avg < 70.0,
        "{:?}",
        adaptive.total.latency
    );
    let mut net = Network::new(&cfg(MeshRouting::AdaptiveXyYx)).unwrap();
    net.set_threads(2).unwrap();
    let e = net.run().unwrap_err().to_string();
    assert!(e.contains("runs on one thread"), "{e}");
}

/// The 8×8 mesh of `scenarios/flit/booksim-extra/mesh8-xy-yx-transpose.cfg` (4 VCs × 8
/// flits, 10-flit packets, transpose) under `routing` at `rate`, in short phases.
fn mesh8_transpose(routing: crate::flit::config::MeshRouting, rate: f64) -> FlitConfig {
    let mut c = FlitConfig::booksim2(
        TopologySpec::Mesh {
            k: 8,
            n: 2,
            routing,
        },
        rate,
    );
    c.router.buffer = 8;
    c.classes[0].packet_flits = 10;
    c.classes[0].pattern = Pattern::Transpose;
    c.phases.sample_period = 1_000;
    c.phases.warmup = 1_000;
    c.phases.measure = 3_000;
    c.phases.drain_max = 3_000;
    c
}

/// Router traversals per flit on `topology` (64 nodes) under uniform traffic at 0.002
/// packets/node/cycle: the flits through every router output over those delivered.
fn routers_per_flit(topology: TopologySpec) -> f64 {
    let mut c = FlitConfig::booksim2(topology.clone(), 0.002);
    c.phases.sample_period = 2_000;
    c.phases.warmup = 2_000;
    c.phases.measure = 20_000;
    c.phases.stop_converged = false;
    let r = simulate(&c).unwrap();
    assert!(!r.unstable, "{topology:?}");
    let through: f64 = r.link_utilisation.iter().sum();
    through / (r.total.accepted * 64.0)
}

/// The 4-ary 3-tree of scenarios/flit/booksim-extra/fattree4x3.cfg (64 nodes, 8-flit
/// packets, 4 VCs of 8 flits, separable allocators, uniform traffic) at `rate`.
fn fat_tree_4x3(rate: f64, seed: u64) -> FlitConfig {
    let mut c = booksim2(TopologySpec::FatTree { k: 4, n: 3 }, rate, 2_000, 6_000);
    c.classes[0].vls = vec![0, 1, 2, 3];
    c.classes[0].packet_flits = 8;
    c.router.buffer = 8;
    c.seed = seed;
    c
}

#[test]
fn a_fat_tree_spreads_its_packets_over_the_up_ports_as_booksim2() {
    // BookSim2 on fattree4x3.cfg (seeds 1-3, 4,000-cycle samples): 31.1 cycles at
    // 0.02 packets/node/cycle, 54.2 at 0.06 (54.0, 54.2, 54.5). `nca` draws each up
    // port at random; with every packet taking the first up port the tree's few upper
    // links carry all the traffic between subtrees (7,505 cycles at 0.02, seeds 1-2).
    for (rate, booksim) in [(0.02, 31.1), (0.06, 54.2)] {
        let mut sum = 0.0;
        for seed in 1..=2 {
            let r = simulate(&fat_tree_4x3(rate, seed)).unwrap();
            assert!(!r.unstable, "{rate}: unstable");
            sum += r.total.latency.avg;
        }
        let mean = sum / 2.0;
        assert!(
            (mean - booksim).abs() < 0.05 * booksim,
            "{rate}: {mean:.1} cycles, BookSim2 {booksim}"
        );
    }
}

#[test]
fn use_noc_latency_and_vl15_data_are_booksim2s_alone() {
    // `use_noc_latency` is BookSim2's key; VL15 carries data beside other lanes only
    // under BookSim2's allocators (Yum's VL arbiters serve it before every lane).
    let mut c = FlitConfig::reference(4, 0.01);
    c.router.use_noc_latency = Some(false);
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("router.use_noc_latency"), "{e}");
    let mut c = FlitConfig::reference(4, 0.01);
    c.classes[0].vls = (0..16).collect();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("VL15"), "{e}");
    let mut c = FlitConfig::booksim2(TopologySpec::mesh(4), 0.01);
    c.classes[0].vls = (0..16).collect();
    c.validate().unwrap();
}

/// BookSim2's `sim_type = throughput` on a 4×4 mesh past saturation (4 VCs × 4 flits,
/// 5-flit packets, uniform at 0.15 packets/node/cycle, 0.75 flits offered; one
/// 1,000-cycle warm-up sample, three measured).
fn throughput_4x4(stop_sources: bool, seed: u64) -> FlitConfig {
    let mut c = booksim2(TopologySpec::mesh(4), 0.15, 1_000, 3_000);
    c.classes[0].vls = vec![0, 1, 2, 3];
    c.classes[0].packet_flits = 5;
    c.router.buffer = 4;
    c.seed = seed;
    c.phases.sample_period = 1_000;
    c.phases.drain_max = 3_000;
    c.phases.warmup_thres = -1.0;
    c.phases.stopping_thres = -1.0;
    c.phases.stop_sources = stop_sources;
    c
}

#[test]
fn a_throughput_simulation_stops_the_sources_and_drains_as_booksim2() {
    // BookSim2 on the same network (`sim_type = throughput`, sample_period = 1000,
    // warmup_periods = 1, max_samples = 4, seeds 1-3): accepted 0.6682, 0.6716 and
    // 0.6709 flits/node/cycle, mean latency 265.6, 261.0 and 273.1 cycles over the
    // packets generated in the measurement, the run over at cycle 4,059-4,067: its
    // terminals stop at the measurement's end and the network drains in ~60 cycles.
    let (mut acc, mut lat) = (0.0, 0.0);
    for seed in 1..=3 {
        let r = simulate(&throughput_4x4(true, seed)).unwrap();
        assert!(!r.unstable && !r.saturated, "seed {seed}: {:?}", r.stop);
        assert!(r.cycles < 4_200, "seed {seed}: drained at {}", r.cycles);
        acc += r.total.accepted / 3.0;
        lat += r.total.latency.avg / 3.0;
    }
    assert!((acc - 0.6702).abs() < 0.02 * 0.6702, "accepted {acc}");
    assert!((lat - 266.6).abs() < 0.05 * 266.6, "latency {lat}");
    // With the sources still injecting (BookSim2's latency simulation) every packet
    // created in the measurement is generated and measured, the queues' backlog too:
    // the drain takes ~900 cycles (to 4,928) and the mean latency is 296 cycles.
    let r = simulate(&throughput_4x4(false, 1)).unwrap();
    assert!(r.cycles > 4_500, "drained at {}", r.cycles);
    assert!(
        r.total.latency.avg > 1.05 * lat,
        "latency {}",
        r.total.latency.avg
    );
    // The stop is BookSim2's terminal's (the source queue).
    let mut c = throughput_4x4(true, 1);
    c.hca.model = Some(HcaModel::Dma);
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("phases.stop_sources"), "{e}");
}
