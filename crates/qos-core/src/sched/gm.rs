//! Unmodified GM's send queues: the baseline the thesis's rate control replaces
//! (thesis §4.1, Fig 4.2).
//!
//! GM arranges its send queues in three levels:
//!
//! 1. a circular *connection queue*, one entry per remote node with which communication
//!    is active ([`FlowParams::connection`]);
//! 2. per connection, a circular queue of the *sub-ports* (port and priority,
//!    [`FlowParams::subport`]) communicating over it;
//! 3. per sub-port, a FIFO of *send tokens* (one per posted message).
//!
//! One connection and its sub-port are the "head". One packet is sent from the first
//! sendable token of the head sub-port; then the head connection's sub-port queue is
//! rotated, and so is the connection queue. Entries with nothing sendable leave their
//! queue and rejoin at the back when they get a token again. (Tokens waiting only for
//! acknowledgement are not modelled: a token leaves when its last packet is sent.)
//!
//! The result is fairness per *destination node*, then per sub-port — not per flow and
//! not by any reservation, which is what the thesis sets out to fix.
//!
//! Flows that share a (connection, sub-port) share its token FIFO, in posting order.
//! (The maps below are only looked up, never iterated, so order stays deterministic.)

use std::collections::{HashMap, VecDeque};

use super::scheduler::{Decision, FlowId, FlowParams, Scheduler};
use crate::units::Time;

#[derive(Debug, Clone, Copy)]
struct GmFlow {
    connection: u32,
    subport: u32,
    backlog: u64,
}

/// A send token: packets of one message still to send.
#[derive(Debug, Clone, Copy)]
struct Token {
    flow: FlowId,
    left: u32,
}

/// GM's connection → sub-port → send-token rotation (thesis §4.1, Fig 4.2).
#[derive(Debug, Clone, Default)]
pub struct GmRotation {
    flows: Vec<Option<GmFlow>>,
    /// Circular connection queue: connections with a sendable token; front is the head.
    connections: VecDeque<u32>,
    /// Per active connection, its circular sub-port queue; front is the head.
    subports: HashMap<u32, VecDeque<u32>>,
    /// Per active (connection, sub-port), its sendable tokens in posting order.
    tokens: HashMap<(u32, u32), VecDeque<Token>>,
}

impl GmRotation {
    /// An empty scheduler.
    pub fn new() -> Self {
        Self::default()
    }

    /// The connection queue, head first (remote nodes with something to send).
    pub fn connection_queue(&self) -> impl Iterator<Item = u32> + '_ {
        self.connections.iter().copied()
    }

    /// A connection's sub-port queue, head first.
    pub fn subport_queue(&self, connection: u32) -> impl Iterator<Item = u32> + '_ {
        self.subports
            .get(&connection)
            .into_iter()
            .flatten()
            .copied()
    }

    fn push_token(&mut self, connection: u32, subport: u32, token: Token) {
        let fifo = self.tokens.entry((connection, subport)).or_default();
        fifo.push_back(token);
        if fifo.len() == 1 {
            let ring = self.subports.entry(connection).or_default();
            ring.push_back(subport);
            if ring.len() == 1 {
                self.connections.push_back(connection);
            }
        }
    }

    /// Takes `flow`'s tokens out of its sub-port FIFO, keeping the queues consistent.
    fn take_tokens(&mut self, flow: FlowId, connection: u32, subport: u32) -> Vec<Token> {
        let Some(fifo) = self.tokens.get_mut(&(connection, subport)) else {
            return Vec::new();
        };
        let (mine, rest): (VecDeque<Token>, VecDeque<Token>) =
            fifo.drain(..).partition(|t| t.flow == flow);
        *fifo = rest;
        if fifo.is_empty() {
            self.tokens.remove(&(connection, subport));
            if let Some(ring) = self.subports.get_mut(&connection) {
                ring.retain(|&s| s != subport);
                if ring.is_empty() {
                    self.subports.remove(&connection);
                    self.connections.retain(|&c| c != connection);
                }
            }
        }
        mine.into()
    }
}

impl Scheduler for GmRotation {
    fn add_flow(&mut self, flow: FlowId, params: FlowParams) {
        let i = flow.0 as usize;
        if i >= self.flows.len() {
            self.flows.resize(i + 1, None);
        }
        let moved = match self.flows[i] {
            Some(f) if (f.connection, f.subport) != (params.connection, params.subport) => {
                self.take_tokens(flow, f.connection, f.subport)
            }
            _ => Vec::new(),
        };
        let backlog = self.flows[i].map_or(0, |f| f.backlog);
        self.flows[i] = Some(GmFlow {
            connection: params.connection,
            subport: params.subport,
            backlog,
        });
        // Tokens of a flow that moved go to the back of its new sub-port, in order.
        for token in moved {
            self.push_token(params.connection, params.subport, token);
        }
    }

    fn remove_flow(&mut self, flow: FlowId) {
        if let Some(f) = self.flows.get_mut(flow.0 as usize).and_then(Option::take) {
            self.take_tokens(flow, f.connection, f.subport);
        }
    }

    fn enqueue(&mut self, _now: Time, flow: FlowId, packets: u32) {
        let Some(Some(f)) = self.flows.get_mut(flow.0 as usize) else {
            return;
        };
        if packets == 0 {
            return;
        }
        f.backlog += u64::from(packets);
        let (c, s) = (f.connection, f.subport);
        self.push_token(
            c,
            s,
            Token {
                flow,
                left: packets,
            },
        );
    }

    fn next(&mut self, _now: Time) -> Decision {
        let Some(&connection) = self.connections.front() else {
            return Decision::Idle;
        };
        let ring = self
            .subports
            .get_mut(&connection)
            .expect("an active connection has sub-ports");
        let subport = *ring
            .front()
            .expect("an active connection has a head sub-port");
        let fifo = self
            .tokens
            .get_mut(&(connection, subport))
            .expect("an active sub-port has tokens");
        // One packet from the first sendable token of the head sub-port.
        let token = fifo.front_mut().expect("an active sub-port has a token");
        let flow = token.flow;
        token.left -= 1;
        if token.left == 0 {
            fifo.pop_front();
        }
        let subport_still_sendable = !fifo.is_empty();
        if let Some(Some(f)) = self.flows.get_mut(flow.0 as usize) {
            f.backlog -= 1;
        }
        // Rotate the head connection's sub-port queue...
        ring.pop_front();
        if subport_still_sendable {
            ring.push_back(subport);
        } else {
            self.tokens.remove(&(connection, subport));
        }
        // ...and the connection queue.
        self.connections.pop_front();
        if ring.is_empty() {
            self.subports.remove(&connection);
        } else {
            self.connections.push_back(connection);
        }
        Decision::Dispatch(flow)
    }

    fn backlog(&self, flow: FlowId) -> u64 {
        self.flows
            .get(flow.0 as usize)
            .and_then(Option::as_ref)
            .map_or(0, |f| f.backlog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(connection: u32, subport: u32) -> FlowParams {
        FlowParams {
            connection,
            subport,
            ..FlowParams::default()
        }
    }
    fn order(gm: &mut GmRotation, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| match gm.next(Time::ZERO) {
                Decision::Dispatch(f) => f.0,
                Decision::Idle => u32::MAX,
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    /// Flows 0 and 1 go to node X on sub-ports 0 and 1; flow 2 goes to node Y.
    fn two_nodes() -> GmRotation {
        let mut gm = GmRotation::new();
        gm.add_flow(FlowId(0), at(7, 0));
        gm.add_flow(FlowId(1), at(7, 1));
        gm.add_flow(FlowId(2), at(9, 0));
        for f in 0..3 {
            gm.enqueue(Time::ZERO, FlowId(f), 1_000);
        }
        gm
    }

    #[test]
    fn rotation_alternates_connections_then_sub_ports() {
        let mut gm = two_nodes();
        assert_eq!(gm.connection_queue().collect::<Vec<_>>(), [7, 9]);
        assert_eq!(gm.subport_queue(7).collect::<Vec<_>>(), [0, 1]);
        // Head X/0, then Y/0, then X/1 (X's sub-ports rotated), then Y/0, ...
        assert_eq!(order(&mut gm, 8), [0, 2, 1, 2, 0, 2, 1, 2]);
        // Node Y's single flow gets half the NIC, the two flows to X a quarter each:
        // GM is fair per destination node, not per flow.
        let counts = order(&mut gm, 400).iter().fold([0; 3], |mut c, &f| {
            c[f as usize] += 1;
            c
        });
        assert_eq!(counts, [100, 100, 200]);
    }

    #[test]
    fn tokens_on_one_sub_port_are_sent_in_posting_order() {
        let mut gm = GmRotation::new();
        gm.add_flow(FlowId(0), at(1, 0));
        gm.add_flow(FlowId(1), at(1, 0));
        gm.enqueue(Time::ZERO, FlowId(0), 2);
        gm.enqueue(Time::ZERO, FlowId(1), 1);
        gm.enqueue(Time::ZERO, FlowId(0), 1);
        assert_eq!(order(&mut gm, 5), [0, 0, 1, 0, u32::MAX]);
        assert_eq!(gm.connection_queue().count(), 0);
    }

    #[test]
    fn an_idle_connection_rejoins_at_the_back() {
        let mut gm = GmRotation::new();
        gm.add_flow(FlowId(0), at(1, 0));
        gm.add_flow(FlowId(1), at(2, 0));
        gm.enqueue(Time::ZERO, FlowId(0), 1);
        gm.enqueue(Time::ZERO, FlowId(1), 3);
        assert_eq!(order(&mut gm, 2), [0, 1]);
        gm.enqueue(Time::ZERO, FlowId(0), 2);
        assert_eq!(gm.connection_queue().collect::<Vec<_>>(), [2, 1]);
        assert_eq!(order(&mut gm, 5), [1, 0, 1, 0, u32::MAX]);
    }

    #[test]
    fn removing_and_moving_flows_keeps_the_queues_consistent() {
        let mut gm = two_nodes();
        gm.remove_flow(FlowId(2));
        assert_eq!(gm.connection_queue().collect::<Vec<_>>(), [7]);
        assert_eq!(gm.backlog(FlowId(2)), 0);
        // Flow 1 moves to node 9: its queued packets go with it.
        gm.add_flow(FlowId(1), at(9, 3));
        assert_eq!(gm.backlog(FlowId(1)), 1_000);
        assert_eq!(gm.subport_queue(7).collect::<Vec<_>>(), [0]);
        assert_eq!(gm.subport_queue(9).collect::<Vec<_>>(), [3]);
        assert_eq!(order(&mut gm, 4), [0, 1, 0, 1]);
        gm.remove_flow(FlowId(0));
        gm.remove_flow(FlowId(1));
        assert_eq!(gm.next(Time::ZERO), Decision::Idle);
    }
}
