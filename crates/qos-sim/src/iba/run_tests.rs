//! Whole runs of a small Yum cluster (links ten times slower than the paper's so that
//! a run takes a fraction of a second): admission refuses what does not fit and never
//! over-commits a link, without it nothing is refused, frames are measured, the same
//! seed gives the same results, a mesh runs as a crossbar does, streams replay trace
//! files, and connections that end give their reservations back.

use super::*;
use crate::iba::config::LifetimeSpec;
use crate::iba::traffic::TrafficClass;

fn cfg(topology: &str, real_time: &str, extra: &str) -> IbaConfig {
    let c = unchecked(topology, real_time, extra);
    c.validate().unwrap();
    c
}

fn unchecked(topology: &str, real_time: &str, extra: &str) -> IbaConfig {
    let text = format!(
        "[network]\ntopology = {topology}\nlink = \"160Mbit/s\"\n{extra}\n[workload]\nloads = [0.8]\nreal_time = {real_time}\n[run]\nwarmup = \"20ms\"\nmeasure = \"120ms\"\ndrain = \"20ms\"\nbatches = 4\n"
    );
    toml::from_str(&text).unwrap()
}

const MPEG: &str = "{ kind = \"mpeg\", regulator = { kind = \"smooth\" } }";
const XBAR: &str = "{ kind = \"crossbar\", ports = 4 }";

#[test]
fn admission_refuses_what_does_not_fit_and_never_over_commits_a_link() {
    // Soliciting peak rates at 90 % load asks for more than the links carry.
    let c = cfg(XBAR, MPEG, "[admission]\nsolicit = \"peak\"");
    let r = run(&c, 0.9, 1, &mut |_| {}).unwrap();
    let m = &r.measures;
    assert_eq!(m.requested as usize, r.connections);
    assert!(m.rejected > 0 && m.rejected < m.requested, "{m:?}");
    assert!(
        r.reserved_max <= 1.0 && r.reserved_max > 0.8,
        "{}",
        r.reserved_max
    );
    assert!(m.setup_us > 0.0);
    assert!(m.frames.frames > 0);
}

#[test]
fn without_admission_every_connection_sends() {
    let c = cfg(XBAR, MPEG, "[admission]\nenabled = false");
    let r = run(&c, 0.9, 1, &mut |_| {}).unwrap();
    assert_eq!(r.measures.rejected, 0);
    assert_eq!(r.measures.requested as usize, r.connections);
    assert_eq!(r.reserved_max, 0.0);
    assert!(r.measures.frames.frames > 0);
    let rt = r.measures.packets[&TrafficClass::RealTime];
    assert!(rt > 0);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let c = cfg(XBAR, MPEG, "");
    let a = serde_json::to_string(&run(&c, 0.6, 3, &mut |_| {}).unwrap()).unwrap();
    let b = serde_json::to_string(&run(&c, 0.6, 3, &mut |_| {}).unwrap()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn on_off_connections_on_a_mesh_are_admitted_hop_by_hop() {
    let c = cfg(
        "{ kind = \"mesh\", k = 3 }",
        "{ kind = \"on_off\", mean_on = \"5ms\", mean_off = \"15ms\", rate = \"40Mbit/s\" }",
        "[admission]\nsolicit = \"peak\"",
    );
    let r = run(&c, 0.5, 2, &mut |_| {}).unwrap();
    assert_eq!(r.routers, 9);
    let m = &r.measures;
    assert!(m.rejected > 0, "{m:?}");
    assert!(r.reserved_max <= 1.0);
    assert!(m.packets[&TrafficClass::RealTime] > 0);
    assert!(m.packets[&TrafficClass::Control] > 0);
    assert!(!r.saturated);
}

#[test]
fn streams_replayed_from_a_trace_are_admitted_and_measured() {
    // One stream class of 150 kB frames at 25 frames/s (3.75 MB/s), written as a
    // trace in bits; links of 160 Mbit/s (20 MB/s) carry 80 % x 80 % of it as real
    // time, about four streams a node.
    let mut c = unchecked(
        XBAR,
        "{ kind = \"mpeg\", traces = [{ file = \"t.txt\", unit = \"bits\", fps = 25 }], regulator = { kind = \"smooth\" } }",
        "",
    );
    let trace = "1200000\n1200000\n1200000\n";
    if let crate::iba::config::RealTimeSpec::Mpeg { traces, .. } = &mut c.workload.real_time {
        traces[0].load("t.txt", trace).unwrap();
    }
    c.validate().unwrap();
    let r = run(&c, 0.8, 1, &mut |_| {}).unwrap();
    let m = &r.measures;
    assert_eq!(r.connections, 4 * 3, "{m:?}");
    assert_eq!(m.rejected, 0);
    // 120 ms measured less two 40 ms frame times: 40 ms of frames, one per stream
    // each 40 ms: one or two per stream.
    assert!(
        m.frames.frames >= 12 && m.frames.frames <= 24,
        "{}",
        m.frames.frames
    );
}

fn with_lifetime(mut c: IbaConfig, hold_ms: u64, idle_ms: u64) -> IbaConfig {
    c.workload.lifetime = Some(LifetimeSpec {
        hold: qos_core::units::Duration::from_ms(hold_ms),
        idle: qos_core::units::Duration::from_ms(idle_ms),
    });
    c.validate().unwrap();
    c
}

#[test]
fn connections_that_end_release_every_link_with_their_final_packet_and_ask_again() {
    // Sessions of about 10 ms in a 160 ms run: with idle times of hours each connection
    // asks once, and by the end every reservation has been given back.
    let peak = cfg(XBAR, MPEG, "[admission]\nsolicit = \"peak\"");
    let r = run(
        &with_lifetime(peak.clone(), 10, 10_000_000),
        0.9,
        1,
        &mut |_| {},
    )
    .unwrap();
    let m = &r.measures;
    assert_eq!(m.requested as usize, r.connections);
    assert!(m.rejected > 0);
    let admitted = m.requested - m.rejected;
    assert_eq!(r.ended_by_final + r.ended_by_release, admitted, "{r:?}");
    assert!(r.ended_by_final > 0);
    assert_eq!(r.reserved_max, 0.0, "every reservation released");
    // With a short idle time connections ask again, and refused ones get in later.
    let r = run(&with_lifetime(peak, 30, 5), 0.9, 1, &mut |_| {}).unwrap();
    let m = &r.measures;
    assert!(m.requested as usize > 2 * r.connections, "{m:?}");
    assert!(r.ended_by_final > 0 && r.ended_by_final + r.ended_by_release > r.connections as u64);
    assert!(r.reserved_max <= 1.0);
    assert!(m.frames.frames > 0);
    // Without admission control sessions end and start again too, never refused.
    let free = cfg(XBAR, MPEG, "[admission]\nenabled = false");
    let r = run(&with_lifetime(free, 30, 5), 0.9, 1, &mut |_| {}).unwrap();
    assert_eq!(r.measures.rejected, 0);
    assert!(r.measures.requested as usize > 2 * r.connections);
}

#[test]
fn a_case_without_admission_can_be_fed_exactly_the_streams_another_admitted() {
    let peak = cfg(XBAR, MPEG, "[admission]\nsolicit = \"peak\"");
    let a = run(&peak, 0.9, 1, &mut |_| {}).unwrap();
    let admitted = a.measures.requested - a.measures.rejected;
    assert_eq!(a.admitted.len() as u64, admitted);
    assert!(a.admitted_load < a.offered_rt_load + 0.2 * 0.9, "{a:?}");
    let mut free = cfg(XBAR, MPEG, "[admission]\nenabled = false");
    let all = run(&free, 0.9, 1, &mut |_| {}).unwrap();
    assert_eq!(all.admitted.len(), all.connections);
    assert!(
        (all.admitted_load - 0.9).abs() < 0.05,
        "{}",
        all.admitted_load
    );
    free.workload.streams = Some(std::sync::Arc::new(a.admitted.clone()));
    let same = run(&free, 0.9, 1, &mut |_| {}).unwrap();
    assert_eq!(same.admitted, a.admitted);
    assert_eq!(same.measures.requested, admitted);
    assert!((same.admitted_load - a.admitted_load).abs() < 1e-12);
    assert!((same.offered_rt_load - a.admitted_load + 0.2 * 0.9).abs() < 1e-9);
}
