//! Zhang's VirtualClock as QoS-VIA adapts it to the NIC (Nagar et al. §3.3).
//!
//! Each channel (flow) has a `Vtick` — the ideal spacing of its packets, derived from its
//! bandwidth — and a running `auxVC`. Every packet arrival on the channel at time `now`
//! does
//!
//! ```text
//! auxVC = max(now, auxVC) + Vtick
//! stamp the packet with auxVC
//! ```
//!
//! and packets are served in increasing stamp order. A send descriptor (message) of `k`
//! packets posted at `now` counts as `k` arrivals at `now`, so its packets are stamped
//! `s, s + Vtick, …`: per packet, like the thesis's rate control, so that long messages
//! do not take more than their share.
//!
//! The QoS-VIA firmware itself stamps one value per *doorbell* (Nagar §3.3: the Vtick is
//! the ideal inter-arrival time of the channel's messages) and keeps its own
//! timestamp-ordered device queues: [`VirtualClock::stamp`] is that rule alone, on the
//! same per-channel clocks, without queuing anything here.
//!
//! VirtualClock is work-conserving: it never holds a packet back ([`Decision::WaitUntil`]
//! is never returned), it only orders them. Equal stamps go in arrival order.
//!
//! Best-effort channels (`vtick: None`) have an infinite Vtick: their packets are served
//! only when no finite-stamped packet waits, and among themselves **first come, first
//! served** by arrival, as PVIA serves all channels (Nagar §3.3: "FCFS … used in PVIA").
//! As the paper warns, a saturating reserved channel can therefore starve best-effort
//! ones.

use std::collections::VecDeque;

use super::heap::IndexedHeap;
use super::scheduler::{Decision, FlowId, FlowParams, Scheduler};
use crate::units::{Duration, Time};

/// Packets of one message on a reserved channel: stamps `first, first + vtick, …`.
#[derive(Debug, Clone, Copy)]
struct Run {
    first: Time,
    vtick: Duration,
    count: u32,
    /// Arrival order, the tie-break among equal stamps.
    seq: u64,
}

#[derive(Debug, Clone, Default)]
struct Channel {
    /// `None` for best-effort.
    vtick: Option<Duration>,
    aux_vc: Time,
    /// Stamped packets still queued (reserved channels only).
    runs: VecDeque<Run>,
    backlog: u64,
}

/// The VirtualClock packet scheduler (Nagar §3.3).
#[derive(Debug, Clone, Default)]
pub struct VirtualClock {
    channels: Vec<Option<Channel>>,
    /// Reserved channels with queued packets, keyed by their head packet's stamp.
    stamped: IndexedHeap<(Time, u64, u32)>,
    /// Best-effort arrivals in order: (channel, packets still to send).
    best_effort: VecDeque<(FlowId, u32)>,
    next_seq: u64,
}

impl VirtualClock {
    /// An empty scheduler.
    pub fn new() -> Self {
        Self::default()
    }

    /// The channel's current `auxVC` (the stamp of its latest arrival), if registered.
    pub fn aux_vc(&self, flow: FlowId) -> Option<Time> {
        self.channel(flow).map(|c| c.aux_vc)
    }

    /// The stamp of the packet this channel would send next, if it is a reserved
    /// channel with packets queued.
    pub fn head_stamp(&self, flow: FlowId) -> Option<Time> {
        self.channel(flow)?.runs.front().map(|r| r.first)
    }

    /// Stamps one doorbell of `flow` rung at `now` (Nagar §3.3):
    /// `auxVC ← max(now, auxVC) + Vtick`, and returns the new `auxVC`. Nothing is
    /// queued: the caller orders its own queues by the stamp. `None` for a best-effort
    /// channel (infinite Vtick: it goes after every stamped request) or one that is not
    /// registered.
    pub fn stamp(&mut self, now: Time, flow: FlowId) -> Option<Time> {
        let c = self.channels.get_mut(flow.0 as usize)?.as_mut()?;
        let vtick = c.vtick?;
        c.aux_vc = c.aux_vc.max(now).saturating_add(vtick);
        Some(c.aux_vc)
    }

    fn channel(&self, flow: FlowId) -> Option<&Channel> {
        self.channels.get(flow.0 as usize).and_then(Option::as_ref)
    }

    fn rekey(&mut self, flow: FlowId) {
        let head = self.channels[flow.0 as usize]
            .as_ref()
            .and_then(|c| c.runs.front().copied());
        match head {
            Some(r) => self.stamped.set(flow.0, (r.first, r.seq, flow.0)),
            None => {
                self.stamped.remove(flow.0);
            }
        }
    }
}

impl Scheduler for VirtualClock {
    fn add_flow(&mut self, flow: FlowId, params: FlowParams) {
        let i = flow.0 as usize;
        if i >= self.channels.len() {
            self.channels.resize(i + 1, None);
        }
        if let Some(c) = &mut self.channels[i] {
            if c.vtick.is_some() == params.vtick.is_some() {
                // Queued packets keep the stamps they got; new arrivals use the new Vtick.
                c.vtick = params.vtick;
                return;
            }
        }
        // A new channel, or one switching between reserved and best-effort: its queued
        // packets are requeued, in order, under the new class as if they arrived at the
        // channel's current auxVC.
        let (queued, aux_vc) = self.channels[i]
            .as_ref()
            .map_or((0, Time::ZERO), |c| (c.backlog, c.aux_vc));
        self.remove_flow(flow);
        self.channels[i] = Some(Channel {
            vtick: params.vtick,
            aux_vc,
            ..Channel::default()
        });
        let mut left = queued;
        while left > 0 {
            let k = left.min(u64::from(u32::MAX)) as u32;
            self.enqueue(aux_vc, flow, k);
            left -= u64::from(k);
        }
    }

    fn remove_flow(&mut self, flow: FlowId) {
        if let Some(slot) = self.channels.get_mut(flow.0 as usize) {
            if let Some(c) = slot.take() {
                if c.vtick.is_none() && c.backlog > 0 {
                    self.best_effort.retain(|&(f, _)| f != flow);
                }
            }
            self.stamped.remove(flow.0);
        }
    }

    fn enqueue(&mut self, now: Time, flow: FlowId, packets: u32) {
        if packets == 0 {
            return;
        }
        let Some(Some(c)) = self.channels.get_mut(flow.0 as usize) else {
            return;
        };
        c.backlog += u64::from(packets);
        let seq = self.next_seq;
        self.next_seq += 1;
        match c.vtick {
            None => self.best_effort.push_back((flow, packets)),
            Some(vtick) => {
                // auxVC = max(now, auxVC) + Vtick for each of the packets.
                let first = c.aux_vc.max(now).saturating_add(vtick);
                c.aux_vc = first.saturating_add(Duration::from_ps(
                    vtick.as_ps().saturating_mul(u64::from(packets - 1)),
                ));
                c.runs.push_back(Run {
                    first,
                    vtick,
                    count: packets,
                    seq,
                });
                if c.runs.len() == 1 {
                    self.rekey(flow);
                }
            }
        }
    }

    fn next(&mut self, _now: Time) -> Decision {
        if let Some((_, index)) = self.stamped.peek() {
            let flow = FlowId(index);
            let c = self.channels[index as usize]
                .as_mut()
                .expect("every stamped channel is registered");
            c.backlog -= 1;
            let run = c.runs.front_mut().expect("a stamped channel has a run");
            run.count -= 1;
            if run.count == 0 {
                c.runs.pop_front();
            } else {
                run.first = run.first.saturating_add(run.vtick);
            }
            self.rekey(flow);
            return Decision::Dispatch(flow);
        }
        if let Some((flow, left)) = self.best_effort.front_mut() {
            let flow = *flow;
            *left -= 1;
            if *left == 0 {
                self.best_effort.pop_front();
            }
            if let Some(Some(c)) = self.channels.get_mut(flow.0 as usize) {
                c.backlog -= 1;
            }
            return Decision::Dispatch(flow);
        }
        Decision::Idle
    }

    fn backlog(&self, flow: FlowId) -> u64 {
        self.channel(flow).map_or(0, |c| c.backlog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(units: u64) -> Time {
        Time::from_ps(units)
    }
    fn reserved(vtick: u64) -> FlowParams {
        FlowParams {
            vtick: Some(Duration::from_ps(vtick)),
            ..FlowParams::default()
        }
    }
    fn drain(vc: &mut VirtualClock, now: u64) -> Vec<u32> {
        let mut out = vec![];
        while let Decision::Dispatch(f) = vc.next(t(now)) {
            out.push(f.0);
        }
        out
    }

    /// Worked example: channel 0 with Vtick 4, channel 1 with Vtick 10.
    #[test]
    fn stamps_follow_aux_vc_max_now_plus_vtick() {
        let mut vc = VirtualClock::new();
        vc.add_flow(FlowId(0), reserved(4));
        vc.add_flow(FlowId(1), reserved(10));
        // t = 0: two packets on channel 0 → stamps 4, 8.
        vc.enqueue(t(0), FlowId(0), 2);
        assert_eq!(vc.aux_vc(FlowId(0)), Some(t(8)));
        // t = 3: one packet on channel 1 → stamp max(3, 0) + 10 = 13.
        vc.enqueue(t(3), FlowId(1), 1);
        assert_eq!(vc.aux_vc(FlowId(1)), Some(t(13)));
        // t = 5: channel 0 is ahead of real time: max(5, 8) + 4 = 12.
        vc.enqueue(t(5), FlowId(0), 1);
        assert_eq!(vc.aux_vc(FlowId(0)), Some(t(12)));
        // t = 30: channel 0 was idle, its clock catches up with real time: 30 + 4.
        assert_eq!(drain(&mut vc, 6), [0, 0, 0, 1]); // stamps 4, 8, 12, 13
        vc.enqueue(t(30), FlowId(0), 1);
        assert_eq!(vc.aux_vc(FlowId(0)), Some(t(34)));
        assert_eq!(vc.head_stamp(FlowId(0)), Some(t(34)));
    }

    /// The firmware's per-doorbell rule on the same clocks: Vtick 4, doorbells at 0, 1,
    /// 2 (the channel runs ahead of real time: 4, 8, 12), then at 30 after an idle spell
    /// (34); best-effort and unknown channels get no stamp.
    #[test]
    fn doorbell_stamps_follow_the_same_rule_without_queuing() {
        let mut vc = VirtualClock::new();
        vc.add_flow(FlowId(0), reserved(4));
        vc.add_flow(FlowId(1), FlowParams::default());
        let stamps: Vec<Option<Time>> = [0, 1, 2, 30]
            .iter()
            .map(|&n| vc.stamp(t(n), FlowId(0)))
            .collect();
        assert_eq!(stamps, [Some(t(4)), Some(t(8)), Some(t(12)), Some(t(34))]);
        assert_eq!(vc.backlog(FlowId(0)), 0);
        assert_eq!(vc.next(t(40)), Decision::Idle);
        assert_eq!(vc.stamp(t(5), FlowId(1)), None);
        assert_eq!(vc.stamp(t(5), FlowId(7)), None);
    }

    #[test]
    fn packets_are_served_in_stamp_order_across_channels() {
        let mut vc = VirtualClock::new();
        vc.add_flow(FlowId(0), reserved(2));
        vc.add_flow(FlowId(1), reserved(3));
        vc.enqueue(t(0), FlowId(0), 3); // 2, 4, 6
        vc.enqueue(t(0), FlowId(1), 3); // 3, 6, 9
                                        // Tie at 6: channel 0 arrived first.
        assert_eq!(drain(&mut vc, 0), [0, 1, 0, 0, 1, 1]);
    }

    #[test]
    fn best_effort_goes_only_when_no_stamped_packet_waits_then_fcfs() {
        let mut vc = VirtualClock::new();
        vc.add_flow(FlowId(0), FlowParams::default()); // best-effort
        vc.add_flow(FlowId(1), FlowParams::default()); // best-effort
        vc.add_flow(FlowId(2), reserved(1_000_000));
        vc.enqueue(t(0), FlowId(0), 2);
        vc.enqueue(t(1), FlowId(1), 1);
        vc.enqueue(t(2), FlowId(0), 1);
        vc.enqueue(t(3), FlowId(2), 2);
        assert_eq!(vc.aux_vc(FlowId(0)), Some(t(0)), "best-effort has no clock");
        assert_eq!(drain(&mut vc, 4), [2, 2, 0, 0, 1, 0]);
        assert_eq!(vc.backlog(FlowId(0)), 0);
    }

    #[test]
    fn removing_a_channel_drops_its_queued_packets() {
        let mut vc = VirtualClock::new();
        vc.add_flow(FlowId(0), reserved(1));
        vc.add_flow(FlowId(1), FlowParams::default());
        vc.add_flow(FlowId(2), FlowParams::default());
        vc.enqueue(t(0), FlowId(0), 3);
        vc.enqueue(t(0), FlowId(1), 3);
        vc.enqueue(t(0), FlowId(2), 1);
        vc.remove_flow(FlowId(0));
        vc.remove_flow(FlowId(1));
        assert_eq!(drain(&mut vc, 0), [2]);
        assert_eq!(vc.next(t(0)), Decision::Idle);
    }

    #[test]
    fn changing_class_keeps_the_queued_packets() {
        let mut vc = VirtualClock::new();
        vc.add_flow(FlowId(0), FlowParams::default());
        vc.enqueue(t(0), FlowId(0), 2);
        vc.add_flow(FlowId(0), reserved(5));
        assert_eq!(vc.backlog(FlowId(0)), 2);
        assert_eq!(vc.head_stamp(FlowId(0)), Some(t(5)));
        assert_eq!(drain(&mut vc, 0), [0, 0]);
    }

    proptest! {
        /// Backlogged reserved channels with sum(1/Vtick) <= 1, one packet per time unit:
        /// every packet leaves no later than its stamp, so after t slots channel i has
        /// sent at least floor(t / Vtick_i) packets — its reserved share, never starved.
        #[test]
        fn reserved_channels_get_at_least_their_share(
            vticks in proptest::collection::vec(prop::sample::select(vec![2u64, 3, 4, 5, 6, 8, 10, 12, 20, 30]), 1..8),
            best_effort in 0usize..3,
        ) {
            // Keep sum(1/vtick) <= 1 by dropping from the front.
            let mut vticks = vticks;
            while vticks.iter().map(|&v| 1.0 / v as f64).sum::<f64>() > 1.0 + 1e-12 {
                vticks.remove(0);
            }
            let mut vc = VirtualClock::new();
            for (i, &v) in vticks.iter().enumerate() {
                vc.add_flow(FlowId(i as u32), reserved(v));
                vc.enqueue(t(0), FlowId(i as u32), 5_000);
            }
            for j in 0..best_effort {
                let f = FlowId((vticks.len() + j) as u32);
                vc.add_flow(f, FlowParams::default());
                vc.enqueue(t(0), f, 5_000);
            }
            let mut count = vec![0u64; vticks.len() + best_effort];
            for slot in 0..2_000u64 {
                if let Decision::Dispatch(f) = vc.next(t(slot)) {
                    count[f.0 as usize] += 1;
                }
                for (i, &v) in vticks.iter().enumerate() {
                    prop_assert!(count[i] >= (slot + 1) / v, "channel {i} behind at slot {slot}");
                }
            }
            let total: u64 = count.iter().sum();
            prop_assert_eq!(total, 2_000, "work-conserving");
        }
    }
}
