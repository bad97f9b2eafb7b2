//! Whole runs with congestion control at the HCAs: credits hold best effort
//! back at the consumers and shorten the HCA's queue, the reliable-service variant
//! returns them with the receivers' ACKs, real-time consumers without a credit try
//! again and lose nothing, and the CQ layouts all run (links ten times slower than
//! the paper's, as in the other run tests).

use crate::iba::config::{Completion, IbaConfig};
use crate::iba::congestion::{CongestionSpec, CqLayout};
use crate::iba::run::{run, RunOutput};
use crate::iba::traffic::TrafficClass;

/// A 4×4 mesh with best effort only (every data lane but VL0), no control traffic.
fn mesh(extra: &str) -> IbaConfig {
    let text = format!(
        "[network]\ntopology = {{ kind = \"mesh\", k = 4 }}\nlink = \"160Mbit/s\"\nlanes = {{ real_time = [0], best_effort = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14] }}\n{extra}\n[workload]\nloads = [0.95]\nmix = 0.0\nreal_time = {{ kind = \"mpeg\" }}\ncontrol = {{ count = 0 }}\n[run]\nwarmup = \"3ms\"\nmeasure = \"20ms\"\ndrain = \"10ms\"\nbatches = 4\n"
    );
    let c: IbaConfig = toml::from_str(&text).unwrap();
    c.validate().unwrap();
    c
}

fn queue(r: &RunOutput) -> f64 {
    r.measures.queueing_us[&TrafficClass::BestEffort].mean
}

#[test]
fn credits_hold_best_effort_back_and_shorten_the_hca_queue() {
    let free = run(&mesh(""), 0.95, 1, &mut |_| {}).unwrap();
    let cred = mesh("[congestion]\nkind = \"credits\"\nbest_effort = 4");
    let c = run(&cred, 0.95, 1, &mut |_| {}).unwrap();
    assert_eq!(free.credit_waits, 0);
    assert!(c.credit_waits > 0, "{c:?}");
    // Four messages at most in the HCA: their queueing delay is a fraction of the
    // uncontrolled one, whose queue grows without bound past saturation.
    assert!(
        queue(&c) < 0.5 * queue(&free),
        "{} vs {}",
        queue(&c),
        queue(&free)
    );
    assert!(c.throughput > 0.5, "{}", c.throughput);
    // The wait moved to the consumer: latency counts it.
    let lat = c.measures.latency_us[&TrafficClass::BestEffort].mean;
    assert!(lat > queue(&c));
}

#[test]
fn the_reliable_service_returns_credits_with_the_receivers_acks() {
    // One credit per HCA: with completion at injection the next message goes as the
    // last one's tail leaves; with the reliable service it waits for the packet's trip
    // and its ACK's, so a node sends less than the link carries.
    let injected = mesh("[congestion]\nkind = \"credits\"\nbest_effort = 1");
    let mut acked = injected.clone();
    acked.hca.completion = Completion::Acknowledged;
    let a = run(&injected, 0.95, 1, &mut |_| {}).unwrap();
    let b = run(&acked, 0.95, 1, &mut |_| {}).unwrap();
    assert_eq!(a.data_acks, 0);
    let delivered = b.measures.packets[&TrafficClass::BestEffort];
    assert!(
        b.data_acks >= delivered,
        "{} ACKs for {delivered}",
        b.data_acks
    );
    assert!(
        b.throughput < 0.8 * a.throughput,
        "{} vs {}",
        b.throughput,
        a.throughput
    );
    // At the DMA: the credit comes back before the packet leaves the HCA, so a second
    // message is in the HCA while the first one leaves.
    let mut dma = injected.clone();
    dma.hca.completion = Completion::Dma;
    let d = run(&dma, 0.95, 1, &mut |_| {}).unwrap();
    assert!(queue(&d) > queue(&a), "{} vs {}", queue(&d), queue(&a));
}

#[test]
fn every_cq_layout_runs_and_splits_the_same_credits() {
    for cq in [CqLayout::Global, CqLayout::Separate, CqLayout::Quad] {
        let mut c = mesh("");
        c.congestion = CongestionSpec::Credits {
            best_effort: 30,
            cq,
            buffer_packets: None,
            retry: qos_core::units::Duration::from_us(32),
        };
        c.validate().unwrap();
        let r = run(&c, 0.95, 2, &mut |_| {}).unwrap();
        assert!(r.credit_waits > 0, "{cq:?}");
        assert!(r.throughput > 0.5, "{cq:?}: {}", r.throughput);
    }
}

#[test]
fn real_time_consumers_without_a_credit_try_again_and_lose_nothing() {
    // Unregulated MPEG frames post all their packets at once; a stream of a few
    // Mbit/s on a 160 Mbit/s link starts with a handful of credits.
    let text = "[network]\ntopology = { kind = \"crossbar\", ports = 4 }\nlink = \"160Mbit/s\"\n[congestion]\nkind = \"credits\"\nbest_effort = 100\nretry = \"50us\"\n[admission]\nenabled = false\n[workload]\nloads = [0.8]\nreal_time = { kind = \"mpeg\" }\n[run]\nwarmup = \"20ms\"\nmeasure = \"120ms\"\ndrain = \"20ms\"\nbatches = 4\n";
    let c: IbaConfig = toml::from_str(text).unwrap();
    c.validate().unwrap();
    let r = run(&c, 0.8, 1, &mut |_| {}).unwrap();
    assert!(r.credit_refusals > 0, "{r:?}");
    assert_eq!(r.dropped, 0);
    assert!(r.measures.frames.frames > 0);
    assert!(r.measures.packets[&TrafficClass::RealTime] > 0);
}

#[test]
fn alo_and_self_tuned_hold_data_packets_back_under_load() {
    for kind in ["alo", "self_tuned"] {
        let c = mesh(&format!("[congestion]\nkind = \"{kind}\""));
        let r = run(&c, 0.95, 1, &mut |_| {}).unwrap();
        assert!(r.throttled > 0, "{kind}: {r:?}");
        assert!(r.throughput > 0.3, "{kind}: {}", r.throughput);
        assert_eq!(r.credit_waits, 0);
        if kind == "self_tuned" {
            // The threshold moved from its start (1 % of the buffers, 12 of 1200).
            assert!(r.threshold != 12.0 && r.threshold >= 1.0, "{}", r.threshold);
        }
    }
}

#[test]
fn credits_bind_on_unregulated_frames_and_change_the_run() {
    // Fig 5's set-up at a tenth of the link speed: MPEG frames handed over whole (no
    // input regulator), no admission control. A stream's C_i credits hold its I
    // frame's burst at the consumer, so the other streams' packets are not queued
    // behind it in the HCA.
    let cfg = |congestion: &str| {
        let t = format!("[network]\ntopology = {{ kind = \"crossbar\", ports = 8 }}\nlink = \"160Mbit/s\"\n{congestion}\n[admission]\nenabled = false\n[workload]\nloads = [0.6]\nreal_time = {{ kind = \"mpeg\" }}\n[run]\nwarmup = \"20ms\"\nmeasure = \"100ms\"\ndrain = \"20ms\"\nbatches = 4\n");
        let c: IbaConfig = toml::from_str(&t).unwrap();
        c.validate().unwrap();
        c
    };
    let none = run(&cfg(""), 0.6, 2, &mut |_| {}).unwrap();
    let credits = "[congestion]\nkind = \"credits\"\nbest_effort = 200";
    let c = run(&cfg(credits), 0.6, 2, &mut |_| {}).unwrap();
    assert_eq!(none.credit_refusals + none.credit_waits, 0);
    assert!(c.credit_refusals > 0, "{c:?}");
    let rt = TrafficClass::RealTime;
    let posted = |r: &RunOutput| r.measures.posted_latency_us[&rt].mean;
    let latency = |r: &RunOutput| r.measures.latency_us[&rt].mean;
    // From the post to the delivery a real-time packet no longer waits behind whole
    // frames of other streams...
    assert!(
        posted(&c) < 0.5 * posted(&none),
        "{} vs {}",
        posted(&c),
        posted(&none)
    );
    // ... and from the consumer's hand-over too, the wait for a credit included.
    assert!(
        latency(&c) < 0.8 * latency(&none),
        "{} vs {}",
        latency(&c),
        latency(&none)
    );
}
