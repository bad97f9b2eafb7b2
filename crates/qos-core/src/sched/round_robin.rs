//! The two round-robin disciplines of existing user-level network protocols (thesis
//! §2.2, Fig 2.3), the baselines rate control is measured against.
//!
//! - [`MessageRoundRobin`] (Fig 2.3a): send descriptors are serviced round-robin, each
//!   *whole* — a flow whose messages are three packets long gets three times the NIC of
//!   a flow with one-packet messages.
//! - [`InterleavedRoundRobin`] (Fig 2.3b): descriptors are serviced in several passes,
//!   one packet per backlogged flow per turn, so NIC use is uniform whatever the message
//!   sizes.
//!
//! Both are work-conserving (never [`Decision::WaitUntil`]) and ignore IDTs. A flow that
//! becomes backlogged joins the end of the round.

use std::collections::VecDeque;

use super::scheduler::{Decision, FlowId, FlowParams, Scheduler};
use crate::units::Time;

/// Flows that have packets, in service order, and per flow its queued messages.
#[derive(Debug, Clone, Default)]
struct Round {
    /// `messages[flow]`: remaining packets of each queued message, oldest first;
    /// `None` for an unregistered flow.
    messages: Vec<Option<VecDeque<u32>>>,
    backlog: Vec<u64>,
    /// Backlogged flows; the front one is served next.
    ring: VecDeque<FlowId>,
}

impl Round {
    fn add(&mut self, flow: FlowId) {
        let i = flow.0 as usize;
        if i >= self.messages.len() {
            self.messages.resize(i + 1, None);
            self.backlog.resize(i + 1, 0);
        }
        self.messages[i].get_or_insert_with(VecDeque::new);
    }

    fn remove(&mut self, flow: FlowId) {
        let i = flow.0 as usize;
        if let Some(slot) = self.messages.get_mut(i) {
            if slot.take().is_some() && self.backlog[i] > 0 {
                self.ring.retain(|&f| f != flow);
            }
            self.backlog[i] = 0;
        }
    }

    fn enqueue(&mut self, flow: FlowId, packets: u32) {
        let i = flow.0 as usize;
        let Some(Some(queue)) = self.messages.get_mut(i) else {
            return;
        };
        if packets == 0 {
            return;
        }
        queue.push_back(packets);
        if self.backlog[i] == 0 {
            self.ring.push_back(flow);
        }
        self.backlog[i] += u64::from(packets);
    }

    /// Sends one packet from the front flow's oldest message. Returns the flow and
    /// whether that message is now complete.
    fn send_one(&mut self) -> Option<(FlowId, bool)> {
        let flow = *self.ring.front()?;
        let i = flow.0 as usize;
        let queue = self.messages[i]
            .as_mut()
            .expect("every flow in the ring is registered");
        let head = queue.front_mut().expect("a flow in the ring has a message");
        *head -= 1;
        let done = *head == 0;
        if done {
            queue.pop_front();
        }
        self.backlog[i] -= 1;
        Some((flow, done))
    }

    /// Moves the front flow to the back of the round, or out of it if it has nothing left.
    fn rotate(&mut self) {
        if let Some(flow) = self.ring.pop_front() {
            if self.backlog[flow.0 as usize] > 0 {
                self.ring.push_back(flow);
            }
        }
    }

    fn backlog(&self, flow: FlowId) -> u64 {
        self.backlog.get(flow.0 as usize).copied().unwrap_or(0)
    }
}

/// Round-robin over backlogged flows; `WHOLE_MESSAGE` says when the turn passes: after
/// a whole send descriptor (Fig 2.3a) or after every packet (Fig 2.3b). Use the aliases
/// [`MessageRoundRobin`] and [`InterleavedRoundRobin`].
#[derive(Debug, Clone, Default)]
pub struct RoundRobin<const WHOLE_MESSAGE: bool> {
    round: Round,
}

/// Whole send descriptors round-robin (thesis Fig 2.3a).
pub type MessageRoundRobin = RoundRobin<true>;

/// One packet per backlogged flow per turn (thesis Fig 2.3b).
pub type InterleavedRoundRobin = RoundRobin<false>;

impl<const WHOLE_MESSAGE: bool> RoundRobin<WHOLE_MESSAGE> {
    /// An empty scheduler.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<const WHOLE_MESSAGE: bool> Scheduler for RoundRobin<WHOLE_MESSAGE> {
    fn add_flow(&mut self, flow: FlowId, _params: FlowParams) {
        self.round.add(flow);
    }
    fn remove_flow(&mut self, flow: FlowId) {
        self.round.remove(flow);
    }
    fn enqueue(&mut self, _now: Time, flow: FlowId, packets: u32) {
        self.round.enqueue(flow, packets);
    }
    fn next(&mut self, _now: Time) -> Decision {
        match self.round.send_one() {
            None => Decision::Idle,
            Some((flow, message_done)) => {
                if message_done || !WHOLE_MESSAGE {
                    self.round.rotate();
                }
                Decision::Dispatch(flow)
            }
        }
    }
    fn backlog(&self, flow: FlowId) -> u64 {
        self.round.backlog(flow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: FlowId = FlowId(0);
    const B: FlowId = FlowId(1);

    /// Fig 2.3: A posts 3-packet messages, B 1-packet messages, both always backlogged.
    fn fig_2_3(s: &mut dyn Scheduler, slots: u64) -> (u64, u64, String) {
        s.add_flow(A, FlowParams::default());
        s.add_flow(B, FlowParams::default());
        for _ in 0..slots {
            s.enqueue(Time::ZERO, A, 3);
            s.enqueue(Time::ZERO, B, 1);
        }
        let (mut a, mut b, mut order) = (0, 0, String::new());
        for slot in 0..slots {
            match s.next(Time::from_ps(slot)) {
                Decision::Dispatch(A) => {
                    a += 1;
                    order.push('A');
                }
                Decision::Dispatch(B) => {
                    b += 1;
                    order.push('B');
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        (a, b, order)
    }

    #[test]
    fn message_round_robin_gives_three_packet_messages_three_times_the_nic() {
        let (a, b, order) = fig_2_3(&mut MessageRoundRobin::new(), 400);
        assert!(order.starts_with("AAABAAABAAAB"), "{order}");
        assert_eq!((a, b), (300, 100));
    }

    #[test]
    fn interleaved_round_robin_gives_one_to_one_whatever_the_message_size() {
        let (a, b, order) = fig_2_3(&mut InterleavedRoundRobin::new(), 400);
        assert!(order.starts_with("ABABABAB"), "{order}");
        assert_eq!((a, b), (200, 200));
    }

    #[test]
    fn interleaving_keeps_each_flows_packets_in_message_order() {
        let mut s = InterleavedRoundRobin::new();
        s.add_flow(A, FlowParams::default());
        s.add_flow(B, FlowParams::default());
        s.enqueue(Time::ZERO, A, 2);
        s.enqueue(Time::ZERO, B, 1);
        s.enqueue(Time::ZERO, A, 1);
        let got: Vec<_> = (0..5).map(|_| s.next(Time::ZERO)).collect();
        use Decision::*;
        assert_eq!(
            got,
            [Dispatch(A), Dispatch(B), Dispatch(A), Dispatch(A), Idle]
        );
        assert_eq!(s.backlog(A), 0);
    }

    #[test]
    fn removing_a_flow_mid_message_passes_the_turn_on() {
        let mut s = MessageRoundRobin::new();
        s.add_flow(A, FlowParams::default());
        s.add_flow(B, FlowParams::default());
        s.enqueue(Time::ZERO, A, 5);
        s.enqueue(Time::ZERO, B, 2);
        assert_eq!(s.next(Time::ZERO), Decision::Dispatch(A));
        s.remove_flow(A);
        assert_eq!(s.backlog(A), 0);
        assert_eq!(s.next(Time::ZERO), Decision::Dispatch(B));
        assert_eq!(s.next(Time::ZERO), Decision::Dispatch(B));
        assert_eq!(s.next(Time::ZERO), Decision::Idle);
        // Packets for an unregistered flow are ignored.
        s.enqueue(Time::ZERO, A, 1);
        assert_eq!(s.next(Time::ZERO), Decision::Idle);
    }

    proptest! {
        /// With n backlogged flows, every flow sends within n turns: interleaved RR
        /// serves each flow once in every n consecutive packets, message RR once in every
        /// n consecutive messages.
        #[test]
        fn no_flow_waits_more_than_one_round(sizes in proptest::collection::vec(1u32..6, 1..10)) {
            let n = sizes.len();
            let mut irr = InterleavedRoundRobin::new();
            let mut mrr = MessageRoundRobin::new();
            for (i, &size) in sizes.iter().enumerate() {
                for s in [&mut irr as &mut dyn Scheduler, &mut mrr] {
                    s.add_flow(FlowId(i as u32), FlowParams::default());
                    for _ in 0..50 {
                        s.enqueue(Time::ZERO, FlowId(i as u32), size);
                    }
                }
            }
            let irr_order: Vec<u32> = (0..20 * n).map(|_| match irr.next(Time::ZERO) {
                Decision::Dispatch(f) => f.0,
                other => panic!("{other:?}"),
            }).collect();
            for window in irr_order.windows(n) {
                let mut seen = vec![false; n];
                for &f in window { seen[f as usize] = true; }
                prop_assert!(seen.iter().all(|&s| s));
            }
            let longest: u32 = sizes.iter().sum();
            let mrr_order: Vec<u32> = (0..20 * longest).map(|_| match mrr.next(Time::ZERO) {
                Decision::Dispatch(f) => f.0,
                other => panic!("{other:?}"),
            }).collect();
            // Each round of n messages sends sum(sizes) packets, flow i's `sizes[i]` of them.
            for (r, round) in mrr_order.chunks(longest as usize).enumerate() {
                for (i, &size) in sizes.iter().enumerate() {
                    let got = round.iter().filter(|&&f| f == i as u32).count() as u32;
                    prop_assert_eq!(got, size, "round {}", r);
                }
            }
        }
    }
}
