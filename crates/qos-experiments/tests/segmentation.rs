//! Thesis §5.2: unmodified GM cuts a message into equal chunks, the rate-control MCP
//! into full-MTU packets and a shorter last one. In the model that, not the
//! rate-control bookkeeping, is what moves the bandwidth of a message just above a
//! multiple of the MTU: its full-MTU packets leave the LANai idle with every SRAM send
//! buffer taken.

use std::sync::Arc;

use qos_core::topology::{build, NodeId};
use qos_core::units::{Bytes, Duration, Time};
use qos_sim::myrinet::calibration::Segmentation;
use qos_sim::myrinet::nic::via::ViaCalibration;
use qos_sim::myrinet::{
    Api, Calibration, Cluster, Firmware, FlowSpec, Outcome, Rate, Setup, Workload,
};

/// The thesis's bandwidth test (§5.1) between two hosts: 200 × 64 KB worth of messages.
fn pump(firmware: Firmware, segmentation: Segmentation, size: u64) -> Outcome {
    pump_with(firmware, segmentation, size, 4)
}

fn pump_with(firmware: Firmware, segmentation: Segmentation, size: u64, buffers: u32) -> Outcome {
    let mut calibration = Calibration::thesis();
    calibration.packet.segmentation = segmentation;
    calibration.nic.send_buffers = buffers;
    let flow = FlowSpec {
        name: "f".into(),
        src: NodeId(0),
        dst: NodeId(1),
        message: Bytes::new(size),
        rate: Rate::Idt(Duration::ZERO),
        workload: Workload::Pump {
            messages: (200 * 65536 / size).min(2000),
        },
        api: Api::Gm,
        start: Time::ZERO,
        stop: None,
    };
    let topology = build::crossbar(2, &build::HostDefaults::thesis())
        .and_then(|b| b.build())
        .unwrap();
    Cluster::new(Setup {
        topology: Arc::new(topology),
        calibration,
        firmware,
        via: ViaCalibration::paper(),
        flows: vec![flow],
        control_latency: Duration::from_us(100),
        window: (Time::ZERO, Time::from_ps(u64::MAX / 4)),
        timeline_bin: None,
        until: Time::from_ps(u64::MAX / 2),
        seed: 1,
    })
    .unwrap()
    .run()
}

fn mb_s(o: &Outcome) -> f64 {
    o.flows[0].pump_mb_s.unwrap()
}

/// Share of the run the sender's LANai had nothing to run with its send buffers taken.
fn starved(o: &Outcome) -> f64 {
    o.busy[0].idle_send_buffers_full.as_us_f64() / o.end_us
}

#[test]
fn full_mtu_packets_cost_bandwidth_just_above_a_multiple_of_the_mtu() {
    let size = 16_640; // 4 KiB × 4 + 256 B
    let equal = pump(Firmware::Gm, Segmentation::EqualChunks, size);
    let full = pump(Firmware::Gm, Segmentation::FullMtu, size);
    let loss = 1.0 - mb_s(&full) / mb_s(&equal);
    assert!(
        loss > 0.04,
        "GM equal chunks {} MB/s, full MTU {}",
        mb_s(&equal),
        mb_s(&full)
    );
    // Where the time goes: the sender's processor, all but busy with equal chunks,
    // waits with every send buffer taken with full-MTU packets.
    assert!(starved(&equal) < 0.005, "{}", starved(&equal));
    assert!(starved(&full) > 0.04, "{}", starved(&full));
    // Sixteen send buffers instead of four give most of it back.
    let more = pump_with(Firmware::Gm, Segmentation::FullMtu, size, 16);
    assert!(1.0 - mb_s(&more) / mb_s(&equal) < 0.02, "{}", mb_s(&more));
    assert!(starved(&more) < 0.01, "{}", starved(&more));
    // A multiple of the MTU is cut the same way by both rules.
    let aligned = [Segmentation::EqualChunks, Segmentation::FullMtu]
        .map(|s| mb_s(&pump(Firmware::Gm, s, 16_384)));
    assert_eq!(aligned[0], aligned[1]);
}

#[test]
fn rate_control_bookkeeping_alone_costs_under_one_and_a_half_percent() {
    // The same segmentation for both MCPs: what is left is rate control's 0.3 µs per
    // dispatch (tuned against the < 1 % of §5.2).
    for size in [256, 4096, 6144, 13_000, 16_640, 65_536] {
        let gm = pump(Firmware::Gm, Segmentation::EqualChunks, size);
        let rc = pump(Firmware::RateControl, Segmentation::EqualChunks, size);
        let loss = 1.0 - mb_s(&rc) / mb_s(&gm);
        assert!((-0.002..0.015).contains(&loss), "{size} B: {loss}");
    }
}
