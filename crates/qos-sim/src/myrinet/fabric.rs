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
//!
//! The fabric is a component of its own: packets come in with [`Fabric::inject`] and
//! receive buffers come back with [`Fabric::receive_buffer_freed`]. It times itself
//! with its own events ([`FabricEvent`], put where it is told to with
//! [`Schedule`]) and reports to the NICs with a [`Notice`] — a tail that left its NIC,
//! a packet that arrived — returned by the event that caused it; it knows nothing of
//! what a NIC does with them. (A call that schedules never also notifies, so applying
//! the notice after the call keeps the order of everything the fabric does.)

#[cfg(test)]
mod tests;

use std::sync::Arc;

use qos_core::topology::{NodeId, PortRef, SwitchId, Topology};
use qos_core::units::{Bandwidth, Duration, Time};

use super::calibration::Calibration;
use super::flow::xfer;
use super::ids::{ChannelId, PacketId};
use super::packet::Packet;
use crate::engine::Schedule;

/// What happens inside the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricEvent {
    /// The head of a packet reached the next switch.
    HeadArrive(PacketId),
    /// The tail of a packet left its source NIC.
    TailLeft(PacketId),
    /// The tail of a packet passed a channel, freeing it.
    ChannelFree(ChannelId),
    /// A whole packet is in its destination NIC.
    TailArrive(PacketId),
}

/// What the fabric tells a NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The tail of the packet this host's NIC was injecting has left it.
    TailLeft(NodeId),
    /// A packet is whole in its destination NIC (`packet.dst`).
    Arrived(Packet),
}

/// A packet on its way through the network.
#[derive(Debug, Clone)]
struct InFlight {
    packet: Packet,
    path: Arc<[ChannelId]>,
    hop: usize,
    t0: Time,
    stall: Duration,
    wait_since: Option<Time>,
}

/// One directed link.
#[derive(Debug, Clone)]
struct Channel {
    cap: Bandwidth,
    holder: Option<PacketId>,
    /// Waiting heads: (input channel they come from, packet).
    waiting: Vec<(u32, PacketId)>,
    /// Input channel served last (round-robin pointer).
    last_in: u32,
}

/// The input "channel" of a head still in its source NIC.
const FROM_NIC: u32 = u32::MAX;

/// Channels, routes, packets in flight and the destinations' free receive buffers.
#[derive(Debug)]
pub struct Fabric {
    topo: Arc<Topology>,
    chans: Vec<Channel>,
    nodes: u32,
    /// Per source host: the paths used so far, sorted by destination.
    paths: Vec<Vec<(NodeId, Arc<[ChannelId]>)>>,
    pkts: Vec<Option<InFlight>>,
    free: Vec<u32>,
    latency: Duration,
    link: Bandwidth,
    /// Per host: its downlink channel.
    downlink: Vec<ChannelId>,
    /// Per host: free receive buffers of its NIC.
    credits: Vec<u32>,
}

impl Fabric {
    /// The channels of `topo`; host `n`'s NIC has `receive_buffers(n)` free receive
    /// buffers.
    pub fn new(
        topo: Arc<Topology>,
        cal: &Calibration,
        receive_buffers: impl Fn(NodeId) -> u32,
    ) -> Fabric {
        let nodes = topo.nodes().len() as u32;
        let channel = |cap| Channel {
            cap,
            holder: None,
            waiting: Vec::new(),
            last_in: u32::MAX,
        };
        let mut chans: Vec<Channel> = topo
            .nodes()
            .iter()
            .map(|n| channel(n.uplink.min(cal.network.link)))
            .collect();
        chans.resize(
            nodes as usize + topo.port_count(),
            channel(cal.network.link),
        );
        for (si, s) in topo.switches().iter().enumerate() {
            for (pi, p) in s.ports.iter().enumerate() {
                if let Some(link) = p {
                    let pr = PortRef {
                        switch: SwitchId(si as u32),
                        port: pi as u16,
                    };
                    chans[nodes as usize + topo.port_index(pr)].cap =
                        link.capacity.min(cal.network.link);
                }
            }
        }
        let downlink = topo
            .nodes()
            .iter()
            .map(|n| ChannelId(nodes + topo.port_index(n.attach) as u32))
            .collect();
        let credits = (0..nodes).map(|n| receive_buffers(NodeId(n))).collect();
        Fabric {
            topo,
            chans,
            nodes,
            paths: vec![Vec::new(); nodes as usize],
            pkts: Vec::new(),
            free: Vec::new(),
            latency: cal.network.switch_latency,
            link: cal.network.link,
            downlink,
            credits,
        }
    }

    /// The channels from `src` to `dst`: its uplink, then the route's output ports
    /// (empty when there is no route; the cluster checks routes when it is built).
    pub fn path(&mut self, src: NodeId, dst: NodeId) -> Arc<[ChannelId]> {
        let known = &self.paths[src.0 as usize];
        let at = match known.binary_search_by_key(&dst, |(d, _)| *d) {
            Ok(i) => return known[i].1.clone(),
            Err(i) => i,
        };
        let route = self
            .topo
            .route(src, dst)
            .map(|r| r.hops)
            .unwrap_or_default();
        let mut v = vec![ChannelId(src.0)];
        v.extend(
            route
                .iter()
                .map(|h| ChannelId(self.nodes + self.topo.port_index(*h) as u32)),
        );
        let p: Arc<[ChannelId]> = v.into();
        self.paths[src.0 as usize].insert(at, (dst, p.clone()));
        p
    }

    /// The channel leading to host `n`.
    pub fn downlink(&self, n: NodeId) -> ChannelId {
        self.downlink[n.0 as usize]
    }

    /// The packet holding channel `ch`, if any.
    pub fn holder(&self, ch: ChannelId) -> Option<PacketId> {
        self.chans[ch.0 as usize].holder
    }

    /// Free receive buffers at host `n` as the fabric counts them.
    pub fn credits(&self, n: NodeId) -> u32 {
        self.credits[n.0 as usize]
    }

    /// The source NIC starts transmitting `packet` now.
    pub fn inject(&mut self, now: Time, packet: Packet, out: &mut impl Schedule<FabricEvent>) {
        let path = self.path(packet.src, packet.dst);
        let pkt = InFlight {
            packet,
            path,
            hop: 0,
            t0: now,
            stall: Duration::ZERO,
            wait_since: None,
        };
        let p = match self.free.pop() {
            Some(i) => {
                self.pkts[i as usize] = Some(pkt);
                PacketId(i)
            }
            None => {
                self.pkts.push(Some(pkt));
                PacketId(self.pkts.len() as u32 - 1)
            }
        };
        self.request(now, p, out);
    }

    /// A receive buffer freed at host `n`: a packet blocked on it may go on.
    pub fn receive_buffer_freed(
        &mut self,
        now: Time,
        n: NodeId,
        out: &mut impl Schedule<FabricEvent>,
    ) {
        self.credits[n.0 as usize] += 1;
        let ch = self.downlink(n);
        self.try_grant(now, ch, out);
    }

    /// One of the fabric's own events is due; what a NIC must hear of it.
    pub fn handle(
        &mut self,
        now: Time,
        ev: FabricEvent,
        out: &mut impl Schedule<FabricEvent>,
    ) -> Option<Notice> {
        match ev {
            FabricEvent::HeadArrive(p) => {
                self.get_mut(p).hop += 1;
                self.request(now, p, out);
                None
            }
            FabricEvent::TailLeft(p) => Some(Notice::TailLeft(self.get(p).packet.src)),
            FabricEvent::ChannelFree(ch) => {
                self.chans[ch.0 as usize].holder = None;
                self.try_grant(now, ch, out);
                None
            }
            FabricEvent::TailArrive(p) => {
                let pkt = self.pkts[p.0 as usize]
                    .take()
                    .expect("a packet arrives once");
                self.free.push(p.0);
                Some(Notice::Arrived(pkt.packet))
            }
        }
    }

    /// A packet in flight. Handles come only from [`Fabric::inject`].
    fn get(&self, p: PacketId) -> &InFlight {
        self.pkts[p.0 as usize]
            .as_ref()
            .expect("packet handle used after delivery")
    }

    fn get_mut(&mut self, p: PacketId) -> &mut InFlight {
        self.pkts[p.0 as usize]
            .as_mut()
            .expect("packet handle used after delivery")
    }

    fn can_grant(&self, ch: ChannelId, p: PacketId) -> bool {
        if self.chans[ch.0 as usize].holder.is_some() {
            return false;
        }
        let pkt = self.get(p);
        let last = pkt.hop + 1 == pkt.path.len();
        !(last && pkt.packet.needs_receive_buffer() && self.credits[pkt.packet.dst.0 as usize] == 0)
    }

    fn request(&mut self, now: Time, p: PacketId, out: &mut impl Schedule<FabricEvent>) {
        let (ch, from) = {
            let pkt = self.get(p);
            let from = if pkt.hop == 0 {
                FROM_NIC
            } else {
                pkt.path[pkt.hop - 1].0
            };
            (pkt.path[pkt.hop], from)
        };
        if self.can_grant(ch, p) {
            self.grant(now, ch, p, out);
        } else {
            self.get_mut(p).wait_since = Some(now);
            self.chans[ch.0 as usize].waiting.push((from, p));
        }
    }

    fn grant(
        &mut self,
        now: Time,
        ch: ChannelId,
        p: PacketId,
        out: &mut impl Schedule<FabricEvent>,
    ) {
        let lat = self.latency;
        self.chans[ch.0 as usize].holder = Some(p);
        let pkt = self.pkts[p.0 as usize]
            .as_mut()
            .expect("packet handle used after delivery");
        if let Some(w) = pkt.wait_since.take() {
            pkt.stall += now - w;
        }
        if pkt.hop + 1 < pkt.path.len() {
            out.schedule_at(now.saturating_add(lat), FabricEvent::HeadArrive(p));
            return;
        }
        // The head holds the whole path: the body streams at the slowest link's rate.
        let bw = pkt
            .path
            .iter()
            .map(|&c| self.chans[c.0 as usize].cap)
            .min()
            .unwrap_or(self.link);
        let depart = (pkt.t0 + pkt.stall + xfer(bw, pkt.packet.wire)).max(now);
        if pkt.packet.needs_receive_buffer() {
            let c = &mut self.credits[pkt.packet.dst.0 as usize];
            *c = c.saturating_sub(1);
        }
        out.schedule_at(depart, FabricEvent::TailLeft(p));
        for (j, &c) in pkt.path.iter().enumerate() {
            out.schedule_at(depart + lat * j as u64, FabricEvent::ChannelFree(c));
        }
        out.schedule_at(
            depart + lat * (pkt.path.len() as u64 - 1),
            FabricEvent::TailArrive(p),
        );
    }

    /// Grants a free channel to the next waiting head, round-robin over input ports.
    fn try_grant(&mut self, now: Time, ch: ChannelId, out: &mut impl Schedule<FabricEvent>) {
        let c = &self.chans[ch.0 as usize];
        if c.holder.is_some() || c.waiting.is_empty() {
            return;
        }
        let last = c.last_in;
        // Candidates that may go now, ordered cyclically after the last input served.
        let mut best: Option<(u32, usize)> = None;
        for (i, &(from, p)) in c.waiting.iter().enumerate() {
            if !self.can_grant(ch, p) {
                continue;
            }
            let key = from.wrapping_sub(last).wrapping_sub(1);
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, i));
            }
        }
        if let Some((_, i)) = best {
            let (from, p) = self.chans[ch.0 as usize].waiting.remove(i);
            self.chans[ch.0 as usize].last_in = from;
            self.grant(now, ch, p, out);
        }
    }
}
