//! The Myrinet network at packet granularity (thesis §2.3, §4.1): 1.28 Gbit/s links and
//! 16-port crossbar switches with cut-through (wormhole) switching, round-robin output
//! arbitration and backpressure.
//!
//! Model. Every directed link is a *channel*: a host's uplink into its switch, or a
//! switch output port. A packet's head acquires the channels of its source route one
//! after another, spending the switch latency in each switch. A channel that is busy
//! (or, for the last one, a destination NIC with no free receive buffer) makes the head
//! wait; while it waits the whole worm stalls and keeps every channel it already holds
//! (Myrinet's slack buffers are a few dozen bytes, neglected here), which is how one
//! blocked packet holds the links behind it. When a channel frees, the waiting heads are
//! served round-robin over the input ports they come from. Once the head reaches the
//! destination the body streams at the slowest link's rate: the tail leaves the source
//! at `t0 + stall + wire/bw`, passes channel j `j` switch latencies later (freeing it),
//! and is in the destination NIC's buffer after the last switch.

use std::collections::HashMap;
use std::sync::Arc;

use qos_core::topology::{NodeId, Topology};
use qos_core::units::{Bandwidth, Duration, Time};

use super::nic::Body;
use super::{Calibration, Cluster, Event};

/// A packet on its way through the network.
#[derive(Debug, Clone)]
pub struct Packet {
    /// Source host.
    pub src: u32,
    /// Destination host.
    pub dst: u32,
    /// Bytes on the wire (payload + header).
    pub wire: u64,
    /// What it carries.
    pub body: Body,
    path: Arc<[u32]>,
    hop: usize,
    t0: Time,
    stall: Duration,
    wait_since: Option<Time>,
}

impl Packet {
    fn needs_buffer(&self) -> bool {
        matches!(self.body, Body::Data(_))
    }
}

/// One directed link.
#[derive(Debug, Clone)]
struct Channel {
    cap: Bandwidth,
    holder: Option<u32>,
    /// Waiting heads: (input channel they come from, packet).
    waiting: Vec<(u32, u32)>,
    /// Input channel served last (round-robin pointer).
    last_in: u32,
    /// The host this channel leads to, for the last hop of a route.
    to_node: Option<u32>,
}

/// Channels, routes and packets in flight.
#[derive(Debug)]
pub struct Fabric {
    chans: Vec<Channel>,
    nodes: u32,
    paths: HashMap<(u32, u32), Arc<[u32]>>,
    pkts: Vec<Option<Packet>>,
    free: Vec<u32>,
    latency: Duration,
    /// Per host: its downlink channel.
    downlink: Vec<u32>,
}

impl Fabric {
    /// The channels of `topo`.
    pub fn new(topo: &Topology, cal: &Calibration) -> Fabric {
        let nodes = topo.nodes().len() as u32;
        let mut chans: Vec<Channel> = topo
            .nodes()
            .iter()
            .map(|n| Channel {
                cap: n.uplink.min(cal.network.link),
                holder: None,
                waiting: Vec::new(),
                last_in: u32::MAX,
                to_node: None,
            })
            .collect();
        chans.resize(
            nodes as usize + topo.port_count(),
            Channel {
                cap: cal.network.link,
                holder: None,
                waiting: Vec::new(),
                last_in: u32::MAX,
                to_node: None,
            },
        );
        for (si, s) in topo.switches().iter().enumerate() {
            for (pi, p) in s.ports.iter().enumerate() {
                if let Some(link) = p {
                    let pr = qos_core::topology::PortRef {
                        switch: qos_core::topology::SwitchId(si as u32),
                        port: pi as u16,
                    };
                    let c = &mut chans[nodes as usize + topo.port_index(pr)];
                    c.cap = link.capacity.min(cal.network.link);
                    if let qos_core::topology::Peer::Node(n) = link.peer {
                        c.to_node = Some(n.0);
                    }
                }
            }
        }
        let downlink = topo
            .nodes()
            .iter()
            .map(|n| nodes + topo.port_index(n.attach) as u32)
            .collect();
        Fabric {
            chans,
            nodes,
            paths: HashMap::new(),
            pkts: Vec::new(),
            free: Vec::new(),
            latency: cal.network.switch_latency,
            downlink,
        }
    }

    /// The channels from `src` to `dst`: its uplink, then the route's output ports.
    pub fn path(&mut self, topo: &Topology, src: u32, dst: u32) -> Arc<[u32]> {
        if let Some(p) = self.paths.get(&(src, dst)) {
            return p.clone();
        }
        // Routes of every flow were checked when the cluster was built.
        let route = topo
            .route(NodeId(src), NodeId(dst))
            .map(|r| r.hops)
            .unwrap_or_default();
        let mut v = vec![src];
        v.extend(
            route
                .iter()
                .map(|h| self.nodes + topo.port_index(*h) as u32),
        );
        let p: Arc<[u32]> = v.into();
        self.paths.insert((src, dst), p.clone());
        p
    }

    /// Stores a new packet; returns its handle.
    pub fn alloc(&mut self, src: u32, dst: u32, wire: u64, body: Body, path: Arc<[u32]>) -> u32 {
        let p = Packet {
            src,
            dst,
            wire,
            body,
            path,
            hop: 0,
            t0: Time::ZERO,
            stall: Duration::ZERO,
            wait_since: None,
        };
        match self.free.pop() {
            Some(i) => {
                self.pkts[i as usize] = Some(p);
                i
            }
            None => {
                self.pkts.push(Some(p));
                self.pkts.len() as u32 - 1
            }
        }
    }

    /// A packet in flight. Handles come only from [`Fabric::alloc`].
    pub fn get(&self, p: u32) -> &Packet {
        self.pkts[p as usize]
            .as_ref()
            .expect("packet handle used after release")
    }

    /// Forgets a delivered packet.
    pub fn release(&mut self, p: u32) -> Packet {
        let pkt = self.pkts[p as usize].take().expect("packet released twice");
        self.free.push(p);
        pkt
    }

    /// The channel leading to host `n`.
    pub fn downlink(&self, n: u32) -> u32 {
        self.downlink[n as usize]
    }
}

impl Cluster {
    /// The source NIC starts transmitting packet `p` now.
    pub(crate) fn inject(&mut self, p: u32) {
        let now = self.q.now();
        if let Some(pkt) = self.fabric.pkts[p as usize].as_mut() {
            pkt.t0 = now;
            pkt.hop = 0;
        }
        self.request(p);
    }

    fn can_grant(&self, ch: u32, p: u32) -> bool {
        let c = &self.fabric.chans[ch as usize];
        if c.holder.is_some() {
            return false;
        }
        let pkt = self.fabric.get(p);
        let last = pkt.hop + 1 == pkt.path.len();
        !(last && pkt.needs_buffer() && self.nics[pkt.dst as usize].rx_free() == 0)
    }

    fn request(&mut self, p: u32) {
        let (ch, from) = {
            let pkt = self.fabric.get(p);
            let from = if pkt.hop == 0 {
                u32::MAX
            } else {
                pkt.path[pkt.hop - 1]
            };
            (pkt.path[pkt.hop], from)
        };
        if self.can_grant(ch, p) {
            self.grant(ch, p);
        } else {
            let now = self.q.now();
            if let Some(pkt) = self.fabric.pkts[p as usize].as_mut() {
                pkt.wait_since = Some(now);
            }
            self.fabric.chans[ch as usize].waiting.push((from, p));
        }
    }

    fn grant(&mut self, ch: u32, p: u32) {
        let now = self.q.now();
        let lat = self.fabric.latency;
        self.fabric.chans[ch as usize].holder = Some(p);
        let Some(pkt) = self.fabric.pkts[p as usize].as_mut() else {
            return;
        };
        if let Some(w) = pkt.wait_since.take() {
            pkt.stall += now - w;
        }
        if pkt.hop + 1 < pkt.path.len() {
            self.q.schedule_in(lat, Event::HeadArrive(p));
            return;
        }
        // The head holds the whole path: the body streams at the slowest link's rate.
        let bw = pkt
            .path
            .iter()
            .map(|&c| self.fabric.chans[c as usize].cap)
            .min()
            .unwrap_or(self.cal.network.link);
        let depart = pkt.t0 + pkt.stall + Cluster::xfer(bw, pkt.wire);
        let depart = depart.max(now);
        let n = pkt.path.len();
        let needs = pkt.needs_buffer();
        let dst = pkt.dst;
        let path = pkt.path.clone();
        if needs {
            self.nics[dst as usize].take_rx_buffer();
        }
        self.q.schedule_at(depart, Event::TailLeft(p));
        for (j, &c) in path.iter().enumerate() {
            self.q
                .schedule_at(depart + lat * j as u64, Event::ChannelFree(c));
        }
        self.q
            .schedule_at(depart + lat * (n as u64 - 1), Event::TailArrive(p));
    }

    pub(crate) fn head_arrive(&mut self, p: u32) {
        if let Some(pkt) = self.fabric.pkts[p as usize].as_mut() {
            pkt.hop += 1;
        }
        self.request(p);
    }

    pub(crate) fn channel_free(&mut self, ch: u32) {
        self.fabric.chans[ch as usize].holder = None;
        self.try_grant(ch);
    }

    /// Grants a free channel to the next waiting head, round-robin over input ports.
    pub(crate) fn try_grant(&mut self, ch: u32) {
        let c = &self.fabric.chans[ch as usize];
        if c.holder.is_some() || c.waiting.is_empty() {
            return;
        }
        let last = c.last_in;
        // Candidates that may go now, ordered cyclically after the last input served.
        let mut best: Option<(u64, usize)> = None;
        for (i, &(from, p)) in c.waiting.iter().enumerate() {
            if !self.can_grant(ch, p) {
                continue;
            }
            let key = (from.wrapping_sub(last).wrapping_sub(1)) as u64;
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, i));
            }
        }
        if let Some((_, i)) = best {
            let (from, p) = self.fabric.chans[ch as usize].waiting.remove(i);
            self.fabric.chans[ch as usize].last_in = from;
            self.grant(ch, p);
        }
    }

    /// A receive buffer freed at host `n`: a packet blocked on it may go on.
    pub(crate) fn rx_buffer_freed(&mut self, n: u32) {
        let ch = self.fabric.downlink(n);
        debug_assert_eq!(self.fabric.chans[ch as usize].to_node, Some(n));
        self.try_grant(ch);
    }
}
