//! Unit tests of the NIC mechanisms, on one NIC driven with
//! hand-built inputs: delayed cumulative acknowledgements, send completion, receive
//! buffers, GM rotation against rate control (thesis Table 3.1), segmentation.

use qos_core::topology::NodeId;
use qos_core::units::{Duration, Time};

use super::gm::{Gm, GmMcp};
use super::mcp::SdmaPolicy;
use super::rate_control::{RateControl, RateControlMcp};
use super::testbench::{config, data, open, us, Bench, Input};
use super::{Nic, Output, Outputs};
use crate::myrinet::calibration::Calibration;
use crate::myrinet::flow::xfer;
use crate::myrinet::ids::{AppId, FlowKey};
use crate::myrinet::packet::{Body, Packet};

fn ack(src: u32, entries: Vec<(FlowKey, u64)>) -> Packet {
    Packet {
        src: NodeId(src),
        dst: NodeId(0),
        wire: 32,
        body: Body::Ack(entries),
    }
}

const A: FlowKey = FlowKey {
    app: AppId(0),
    direction: crate::myrinet::ids::Direction::Forward,
};
const B: FlowKey = FlowKey {
    app: AppId(1),
    direction: crate::myrinet::ids::Direction::Forward,
};

#[test]
fn several_data_packets_get_one_cumulative_ack_after_the_ack_delay() {
    let cal = Calibration::thesis();
    let mut b = Bench::new(RateControlMcp::new(NodeId(0), &config()));
    // Three 1 KiB packets of flow A and one of flow B from node 5, 20 µs apart, then
    // one more of A long after the first acknowledgement went out.
    b.at(us(0), Input::Arrive(data(5, A, 0, 1024, false)));
    b.at(us(20), Input::Arrive(data(5, B, 0, 1024, true)));
    b.at(us(40), Input::Arrive(data(5, A, 1, 1024, false)));
    b.at(us(60), Input::Arrive(data(5, A, 2, 1024, true)));
    b.at(us(300), Input::Arrive(data(5, A, 3, 1024, true)));
    b.run();

    let acks: Vec<(Time, NodeId, Body)> = b
        .injected()
        .into_iter()
        .map(|(t, p)| (t, p.dst, p.body.clone()))
        .collect();
    // The timer starts when RECV has handled the first packet; the acknowledgement
    // is injected once the SEND handler has built it: 9.65 + 100 + 12 µs.
    let recv = cal.in_packet_cost(1024).0;
    let first = Time::ZERO + recv + cal.lanai.ack_delay + cal.lanai.ack_send;
    assert_eq!(first, Time::from_ps(121_650_000));
    let second = us(300) + recv + cal.lanai.ack_delay + cal.lanai.ack_send;
    assert_eq!(
        acks,
        vec![
            (first, NodeId(5), Body::Ack(vec![(A, 3), (B, 1)])),
            (second, NodeId(5), Body::Ack(vec![(A, 4)])),
        ]
    );
    // Every data packet frees its receive buffer once RDMA has copied it out, and
    // reaches the host; messages end where their last packet does.
    assert_eq!(b.count(|o| *o == Output::ReceiveBufferFreed), 5);
    let to_host: Vec<(FlowKey, bool)> = b
        .log
        .iter()
        .filter_map(|(_, o)| match o {
            Output::ToHost { flow, last, .. } => Some((*flow, *last)),
            _ => None,
        })
        .collect();
    assert_eq!(
        to_host,
        vec![(A, false), (B, true), (A, false), (A, true), (A, true)]
    );
}

#[test]
fn the_receive_buffer_is_freed_when_rdma_has_copied_the_packet_to_the_host() {
    let cal = Calibration::thesis();
    let mut b = Bench::new(RateControlMcp::new(NodeId(0), &config()));
    b.at(us(0), Input::Arrive(data(5, A, 0, 1024, true)));
    b.run();
    // RECV, then the host DMA write, then the RDMA handler.
    let (recv, rdma) = cal.in_packet_cost(1024);
    let dma = cal.pci.setup + xfer(cal.pci.write, 1024);
    let done = Time::ZERO + recv + dma + rdma;
    assert_eq!(
        b.log[..2],
        [
            (done, Output::ReceiveBufferFreed),
            (
                done,
                Output::ToHost {
                    flow: A,
                    bytes: 1024,
                    last: true
                }
            )
        ]
    );
}

#[test]
fn acknowledgements_take_no_receive_buffer() {
    let mut b = Bench::new(RateControlMcp::new(NodeId(0), &config()));
    b.at(us(0), Input::Arrive(ack(5, vec![(A, 7)])));
    b.run();
    assert_eq!(b.count(|o| *o == Output::ReceiveBufferFreed), 0);
}

#[test]
fn a_message_completes_only_when_all_its_packets_are_acknowledged() {
    let mut nic = RateControlMcp::new(NodeId(0), &config());
    open(&mut nic, A, 1, Duration::ZERO);
    let mut b = Bench::new(nic);
    // Two messages of two full packets each: sequence numbers 0-1 and 2-3.
    b.at(us(0), Input::Post(A, 8192));
    b.at(us(0), Input::Post(A, 8192));
    b.at(us(1000), Input::Arrive(ack(1, vec![(A, 1)])));
    b.at(us(1100), Input::Arrive(ack(1, vec![(A, 3)])));
    b.at(us(1200), Input::Arrive(ack(1, vec![(A, 4)])));
    b.run();
    assert_eq!(b.data().len(), 4);
    let done: Vec<Time> = b
        .log
        .iter()
        .filter(|(_, o)| *o == Output::SendCompleted(A))
        .map(|(t, _)| *t)
        .collect();
    // Up to 1: nothing whole; up to 3: the first message; up to 4: the second. The
    // handler costs the acknowledgement plus one completion per message.
    let lanai = Calibration::thesis().lanai;
    assert_eq!(
        done,
        vec![
            us(1100) + lanai.ack_recv + lanai.send_complete,
            us(1200) + lanai.ack_recv + lanai.send_complete,
        ]
    );
}

/// Posts one message of six full packets for A (IDT 2T) and for B (IDT 3T), T = 100 µs,
/// at time zero, and returns the injected data packets.
fn table_3_1(nic: impl Nic) -> Vec<(Time, FlowKey, u64)> {
    let t = Duration::from_us(100);
    let mut nic = nic;
    open(&mut nic, A, 1, t * 2);
    open(&mut nic, B, 2, t * 3);
    let mut b = Bench::new(nic);
    b.at(us(0), Input::Post(A, 6 * 4096));
    b.at(us(0), Input::Post(B, 6 * 4096));
    b.run();
    b.data()
}

#[test]
fn rate_control_dispatches_in_the_order_of_thesis_table_3_1() {
    let cal = Calibration::thesis();
    let got = table_3_1(RateControlMcp::new(NodeId(0), &config()));
    let order: Vec<FlowKey> = got.iter().map(|&(_, f, _)| f).collect();
    // Table 3.1: A B A B A - A B A B A (then B's last two).
    assert_eq!(order, [A, B, A, B, A, A, B, A, B, A, B, B]);
    // The two descriptors take 8 µs each, so A becomes sendable at 8 µs (NDT = RTC)
    // and B at 16 µs. SDMA first decides at 16 µs, then A's packets are due every
    // 200 µs from 8 µs: each is injected one SDMA + host DMA + SEND after its NDT.
    let one = cal.out_packet_cost(4096).0
        + cal.lanai.rate_control
        + cal.pci.setup
        + xfer(cal.pci.read, 4096)
        + cal.out_packet_cost(4096).1;
    let a: Vec<Time> = got
        .iter()
        .filter(|&&(_, f, _)| f == A)
        .map(|&(t, _, _)| t)
        .collect();
    let due = [16, 208, 408, 608, 808, 1008];
    assert_eq!(a, due.map(|d| us(d) + one));
    // B alone at its NDTs 316 and 916 µs goes just as fast.
    let b: Vec<Time> = got
        .iter()
        .filter(|&&(_, f, _)| f == B)
        .map(|&(t, _, _)| t)
        .collect();
    assert_eq!(b[1], us(316) + one);
    assert_eq!(b[3], us(916) + one);
}

#[test]
fn gm_rotates_between_connections_whatever_the_idts() {
    let got = table_3_1(GmMcp::new(NodeId(0), &config()));
    let order: Vec<FlowKey> = got.iter().map(|&(_, f, _)| f).collect();
    assert_eq!(order, [A, B].repeat(6));
    // Back to back, as fast as the processor goes: all twelve are out before rate
    // control has sent seven (its seventh, B's, is due at 616 µs).
    let rc = table_3_1(RateControlMcp::new(NodeId(0), &config()));
    assert!(got[11].0 < rc[6].0, "{:?} {:?}", got[11].0, rc[6].0);
    assert!(rc[6].0 > us(616));
}

#[test]
fn gm_cuts_messages_into_equal_chunks_and_rate_control_into_full_mtus() {
    assert_eq!(Gm::segment(10_000, 4096), [3334, 3333, 3333]);
    assert_eq!(RateControl::segment(10_000, 4096), [4096, 4096, 1808]);
    for seg in [Gm::segment, RateControl::segment] {
        assert_eq!(seg(0, 4096), [0]);
        assert_eq!(seg(4096, 4096), [4096]);
        assert_eq!(seg(3 * 4096, 4096), [4096; 3]);
        let s = seg(8193, 4096);
        assert_eq!((s.len(), s.iter().sum::<u64>()), (3, 8193));
        assert!(s.iter().all(|&l| l <= 4096));
    }
    // And the NICs put those sizes on the wire, each with its header.
    for (nic, want) in [
        (
            super::any::AnyNic::new(super::Firmware::Gm, NodeId(0), &config()),
            [3334, 3333, 3333],
        ),
        (
            super::any::AnyNic::new(super::Firmware::RateControl, NodeId(0), &config()),
            [4096, 4096, 1808],
        ),
    ] {
        let mut nic = nic;
        open(&mut nic, A, 1, Duration::ZERO);
        let mut b = Bench::new(nic);
        b.at(us(0), Input::Post(A, 10_000));
        b.run();
        let lens: Vec<u64> = b.data().iter().map(|&(_, _, l)| l).collect();
        assert_eq!(lens, want);
        let wires: Vec<u64> = b.injected().iter().map(|(_, p)| p.wire).collect();
        assert_eq!(wires, want.map(|l| l + 16));
    }
}

#[test]
fn receive_work_runs_before_queued_send_work() {
    // A descriptor and a data packet wait while the processor handles a first
    // descriptor: RECV goes first although it came last.
    let cal = Calibration::thesis();
    let mut nic = RateControlMcp::new(NodeId(0), &config());
    open(&mut nic, A, 1, Duration::ZERO);
    open(&mut nic, B, 2, Duration::ZERO);
    let mut b = Bench::new(nic);
    b.at(us(0), Input::Post(A, 64));
    b.at(us(1), Input::Post(B, 64));
    b.at(us(2), Input::Arrive(data(5, A, 0, 64, true)));
    b.run();
    // The acknowledgement timer is armed when RECV ends: after A's descriptor only
    // (B's descriptor would have put it 8 µs later).
    let recv = cal.in_packet_cost(64).0;
    let ack_at = Time::ZERO + cal.lanai.sdma_message + recv + cal.lanai.ack_delay;
    let (t, p) = b
        .injected()
        .into_iter()
        .find(|(_, p)| matches!(p.body, Body::Ack(_)))
        .unwrap();
    assert_eq!(p.dst, NodeId(5));
    assert_eq!(t, ack_at + cal.lanai.ack_send);
}

#[test]
fn set_idt_changes_the_rate_from_the_next_dispatch() {
    let mut nic = RateControlMcp::new(NodeId(0), &config());
    open(&mut nic, A, 1, Duration::from_us(200));
    let mut out = Outputs::new();
    nic.set_idt(Time::ZERO, A, Duration::from_us(400), &mut out);
    assert!(out.is_empty());
    assert_eq!(nic.idt(A), Some(Duration::from_us(400)));
    let mut b = Bench::new(nic);
    b.at(us(0), Input::Post(A, 3 * 4096));
    b.run();
    let t: Vec<Time> = b.data().iter().map(|&(t, _, _)| t).collect();
    assert_eq!(t[1] - t[0], Duration::from_us(400));
    assert_eq!(t[2] - t[1], Duration::from_us(400));
}
