//! Unit tests of the fabric's mechanisms, on hand-built injections
//! with exact times: cut-through timing, backpressure from a full receive buffer,
//! worm holding across a cascade, round-robin output arbitration.
//!
//! Constants of the thesis calibration used below: 160 MB/s links, 0.5 µs per switch,
//! 16 header bytes, so a 4 KiB packet (4112 B on the wire) streams in 25.7 µs.

use std::sync::Arc;

use qos_core::topology::{build, NodeId, Topology};
use qos_core::units::{Bandwidth, Duration, Time};

use super::{Fabric, FabricEvent, Notice};
use crate::engine::EventQueue;
use crate::myrinet::calibration::Calibration;
use crate::myrinet::ids::{AppId, ChannelId, FlowKey};
use crate::myrinet::packet::{Body, Data, Packet};

/// Picoseconds from a time in tenths of a microsecond (25.7 µs = `t(257)`).
fn t(tenths_us: u64) -> Time {
    Time::from_ps(tenths_us * 100_000)
}

/// What the bench saw come out of the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// The tail left this source NIC.
    Left(u32),
    /// Packet `tag` from `src` is whole in `dst`.
    Arrived { src: u32, dst: u32, tag: u64 },
}

/// The fabric alone, with a scripted set of NICs around it.
struct Net {
    f: Fabric,
    q: EventQueue<FabricEvent>,
    now: Time,
    log: Vec<(Time, Seen)>,
    /// Per source: packets to inject back to back, each when the previous tail left.
    backlog: Vec<Vec<Packet>>,
}

fn topo_crossbar(hosts: u16) -> Arc<Topology> {
    Arc::new(
        build::crossbar(hosts, &build::HostDefaults::thesis())
            .and_then(|b| b.build())
            .unwrap(),
    )
}

/// Two switches `s0`, `s1` with hosts n0, n1 on s0 and n2, n3 on s1.
fn topo_cascade() -> Arc<Topology> {
    let d = build::HostDefaults::thesis();
    Arc::new(
        build::cascade(2, 2, &d, Bandwidth::from_mb_per_sec(160.0))
            .and_then(|b| b.build())
            .unwrap(),
    )
}

fn packet(src: u32, dst: u32, tag: u64, len: u64) -> Packet {
    Packet {
        src: NodeId(src),
        dst: NodeId(dst),
        wire: len + 16,
        body: Body::Data(Data {
            flow: FlowKey::forward(AppId(src)),
            seq: tag,
            len,
            last: true,
            negotiated: None,
        }),
    }
}

impl Net {
    /// `buffers[n]` free receive buffers at host n.
    fn new(topo: Arc<Topology>, buffers: &[u32]) -> Net {
        let n = topo.nodes().len();
        let b = buffers.to_vec();
        Net {
            f: Fabric::new(topo, &Calibration::thesis(), |node| b[node.0 as usize]),
            q: EventQueue::new(),
            now: Time::ZERO,
            log: Vec::new(),
            backlog: vec![Vec::new(); n],
        }
    }

    fn notice(&mut self, n: Option<Notice>) {
        match n {
            None => {}
            Some(Notice::TailLeft(src)) => {
                self.log.push((self.now, Seen::Left(src.0)));
                if let Some(p) = self.backlog[src.0 as usize].pop() {
                    self.f.inject(self.now, p, &mut self.q);
                }
            }
            Some(Notice::Arrived(p)) => {
                let tag = match p.body {
                    Body::Data(d) => d.seq,
                    Body::Ack(_) => u64::MAX,
                };
                self.log.push((
                    self.now,
                    Seen::Arrived {
                        src: p.src.0,
                        dst: p.dst.0,
                        tag,
                    },
                ));
            }
        }
    }

    /// Delivers every event up to `until`, then stands at `until`.
    fn run_until(&mut self, until: Time) {
        while self.q.peek_time().is_some_and(|at| at <= until) {
            let (at, ev) = self.q.pop().unwrap();
            self.now = at;
            let n = self.f.handle(at, ev, &mut self.q);
            self.notice(n);
        }
        self.now = until;
    }

    fn inject(&mut self, at: Time, p: Packet) {
        self.run_until(at);
        self.f.inject(at, p, &mut self.q);
    }

    /// Queues packets a source sends back to back after the one in flight.
    fn then(&mut self, src: u32, mut packets: Vec<Packet>) {
        packets.reverse();
        self.backlog[src as usize] = packets;
    }

    fn free_buffer(&mut self, at: Time, n: u32) {
        self.run_until(at);
        self.f.receive_buffer_freed(at, NodeId(n), &mut self.q);
    }

    fn arrivals(&self) -> Vec<(Time, u32, u64)> {
        self.log
            .iter()
            .filter_map(|&(t, s)| match s {
                Seen::Arrived { src, tag, .. } => Some((t, src, tag)),
                Seen::Left(_) => None,
            })
            .collect()
    }

    fn uplink(&self, n: u32) -> ChannelId {
        ChannelId(n)
    }
}

#[test]
fn an_uncontended_packet_streams_at_link_rate_behind_its_head() {
    let mut net = Net::new(topo_crossbar(4), &[4; 4]);
    net.inject(Time::ZERO, packet(0, 1, 7, 4096));
    net.run_until(Time::NEVER);
    assert_eq!(
        net.log,
        vec![
            (t(257), Seen::Left(0)),
            (
                t(262),
                Seen::Arrived {
                    src: 0,
                    dst: 1,
                    tag: 7
                }
            )
        ]
    );
    // The destination's buffer is taken until its NIC frees it.
    assert_eq!(net.f.credits(NodeId(1)), 3);
}

#[test]
fn a_full_receive_buffer_stops_the_worm_which_holds_its_channels_until_freed() {
    // Host 1 has one receive buffer, which the first packet takes.
    let mut net = Net::new(topo_crossbar(4), &[4, 1, 4, 4]);
    net.inject(Time::ZERO, packet(0, 1, 1, 4096));
    // A second packet for host 1 reaches the switch at 30.5 µs and must wait; a third
    // packet of the same source, for idle host 3, queues behind it in the NIC's link.
    net.inject(t(300), packet(2, 1, 2, 4096));
    net.inject(t(400), packet(2, 3, 3, 4096));
    net.run_until(t(1000));
    assert_eq!(net.arrivals(), vec![(t(262), 0, 1)]);
    let blocked = net.f.holder(net.uplink(2));
    assert!(blocked.is_some());
    assert_eq!(net.f.holder(net.f.downlink(NodeId(1))), None);
    assert_eq!(net.f.holder(net.f.downlink(NodeId(3))), None);

    // Host 1's NIC frees the buffer at 100 µs: the worm goes on from where it stood;
    // its tail leaves at t0 + stall + 25.7 = 30 + 69.5 + 25.7 µs, and frees the uplink
    // for the third packet, which waited there since 40 µs.
    net.free_buffer(t(1000), 1);
    net.run_until(Time::NEVER);
    assert_eq!(
        net.arrivals(),
        vec![(t(262), 0, 1), (t(1257), 2, 2), (t(1514), 2, 3)]
    );
    let left: Vec<Time> = net
        .log
        .iter()
        .filter(|(_, s)| *s == Seen::Left(2))
        .map(|&(t, _)| t)
        .collect();
    assert_eq!(left, vec![t(1252), t(1509)]);
    assert_eq!(net.f.credits(NodeId(1)), 0);
}

#[test]
fn acknowledgements_pass_a_full_receive_buffer() {
    let mut net = Net::new(topo_crossbar(4), &[4, 0, 4, 4]);
    let ack = Packet {
        src: NodeId(0),
        dst: NodeId(1),
        wire: 32,
        body: Body::Ack(vec![(FlowKey::forward(AppId(1)), 3)]),
    };
    net.inject(Time::ZERO, ack);
    net.run_until(Time::NEVER);
    // 32 B take 0.2 µs at 160 MB/s, less than the head needs to reach the switch's
    // output (0.5 µs): the tail leaves when the head holds the path, and is through
    // the switch 0.5 µs later.
    assert_eq!(net.arrivals(), vec![(t(10), 0, u64::MAX)]);
}

#[test]
fn a_blocked_worm_holds_the_trunk_of_a_cascade_and_blocks_traffic_to_an_idle_host() {
    // n0 → n2 crosses the trunk s0 → s1 and stalls at n2 (no free buffer); n1 → n3
    // needs the same trunk, so it waits although n3 is idle.
    let mut net = Net::new(topo_cascade(), &[4, 4, 0, 4]);
    net.inject(Time::ZERO, packet(0, 2, 1, 4096));
    net.inject(t(50), packet(1, 3, 2, 4096));
    net.run_until(t(500));
    assert!(net.arrivals().is_empty());
    let path_a = net.f.path(NodeId(0), NodeId(2));
    let trunk = path_a[1];
    assert_eq!(path_a.len(), 3);
    assert_eq!(net.f.path(NodeId(1), NodeId(3))[1], trunk);
    // The first worm holds its uplink and the trunk; the second holds only its uplink.
    let a = net.f.holder(path_a[0]);
    assert!(a.is_some());
    assert_eq!(net.f.holder(trunk), a);
    assert!(net.f.holder(net.uplink(1)).is_some());
    assert_eq!(net.f.holder(net.f.downlink(NodeId(3))), None);

    // n2 frees a buffer at 50 µs. The first head waited at s1 since 1 µs:
    // tail leaves 0 + 49 + 25.7 = 74.7 µs, passes the trunk at 75.2, arrives at 75.7.
    // The second head gets the trunk at 75.2 (stalled 69.7 µs since 5.5), is at s1 at
    // 75.7 and finds n3 free: tail leaves 5 + 69.7 + 25.7 = 100.4, arrives 101.4 µs.
    net.free_buffer(t(500), 2);
    net.run_until(Time::NEVER);
    assert_eq!(net.arrivals(), vec![(t(757), 0, 1), (t(1014), 1, 2)]);
}

#[test]
fn a_free_output_goes_to_the_next_input_after_the_last_served_not_the_longest_waiting() {
    // Host 3's port: host 2's packet takes it at once; host 1's head waits and is
    // served next (the last input served is now 1). While host 1's packet streams,
    // host 0's head arrives (30.5 µs), then host 2's again (40.5 µs). Round-robin
    // after input 1 serves input 2 before input 0, although input 0 waited longer and
    // has the lower number.
    let mut net = Net::new(topo_crossbar(4), &[4; 4]);
    net.inject(Time::ZERO, packet(2, 3, 0, 4096));
    net.inject(t(10), packet(1, 3, 1, 4096));
    net.inject(t(300), packet(0, 3, 2, 4096));
    net.inject(t(400), packet(2, 3, 3, 4096));
    net.run_until(Time::NEVER);
    let got: Vec<(Time, u32)> = net.arrivals().iter().map(|&(t, s, _)| (t, s)).collect();
    // Each takes the port as soon as the previous tail has passed it (26.2 µs after
    // its own start, one packet time after the previous arrival).
    assert_eq!(
        got,
        vec![(t(262), 2), (t(519), 1), (t(776), 2), (t(1033), 0)]
    );
}

#[test]
fn three_inputs_streaming_to_one_port_take_turns() {
    // Hosts 0, 1, 2 each send packets back to back to host 3. Whenever the port
    // frees, the other two heads are waiting (the freed host's next head arrives just
    // after): round-robin serves them cyclically, where a fixed priority would let
    // hosts 0 and 1 starve host 2.
    let mut net = Net::new(topo_crossbar(4), &[4, 4, 4, 1000]);
    for src in [0, 1, 2] {
        net.then(src, (1..30).map(|i| packet(src, 3, i, 4096)).collect());
    }
    for src in [0, 1, 2] {
        net.inject(Time::ZERO, packet(src, 3, 0, 4096));
    }
    net.run_until(Time::NEVER);
    let order: Vec<u32> = net.arrivals().iter().take(30).map(|&(_, s, _)| s).collect();
    assert_eq!(order, [0, 1, 2].repeat(10));
}

#[test]
fn an_output_port_is_shared_per_input_not_per_source() {
    // n0 and n1 (behind the trunk) and n3 (local) all stream to n2. s1's port to n2
    // alternates between its two inputs, the trunk and n3's link, so n3 gets half of
    // it and the two hosts behind the trunk a quarter each (thesis §2.3, Fig 2.4).
    let mut net = Net::new(topo_cascade(), &[4, 4, 1000, 4]);
    for src in [0, 1, 3] {
        net.then(src, (1..40).map(|i| packet(src, 2, i, 4096)).collect());
    }
    for src in [0, 1, 3] {
        net.inject(Time::ZERO, packet(src, 2, 0, 4096));
    }
    net.run_until(Time::NEVER);
    let first: Vec<u32> = net.arrivals().iter().take(40).map(|&(_, s, _)| s).collect();
    let count = |s| first.iter().filter(|&&x| x == s).count();
    assert_eq!((count(0), count(1), count(3)), (10, 10, 20));
    // Inputs alternate strictly: every other packet is n3's.
    assert!(first
        .chunks(2)
        .all(|c| c.iter().filter(|&&s| s == 3).count() == 1));
    // The port is never idle between packets: one 25.7 µs packet after another.
    let times: Vec<Time> = net.arrivals().iter().take(40).map(|&(t, _, _)| t).collect();
    assert!(times
        .windows(2)
        .all(|w| w[1] - w[0] == Duration::from_ps(25_700_000)));
}
