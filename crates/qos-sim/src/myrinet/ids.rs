//! Typed identifiers of the Myrinet model: which application, which
//! direction of its traffic, which packet in flight, which network channel. They
//! replace the bare `u32`s (and the `2·app` / `2·app + 1` flow encoding) that the
//! components used to pass around.

use serde::Serialize;

/// One application of a setup: the index of its [`super::FlowSpec`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct AppId(pub u32);

impl AppId {
    /// The index into per-application tables.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Which way an application's messages go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Direction {
    /// From the flow's source host to its destination: the measured traffic.
    Forward,
    /// Back from the destination: the pump's final answer, the ping-pong's pong.
    Reply,
}

/// One direction of one application's traffic: what a NIC schedules, sequences and
/// acknowledges as a flow (GM's port pair and priority, thesis §4.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct FlowKey {
    /// The application.
    pub app: AppId,
    /// Which of its two directions.
    pub direction: Direction,
}

impl FlowKey {
    /// The forward flow of `app`.
    #[inline]
    pub fn forward(app: AppId) -> FlowKey {
        FlowKey {
            app,
            direction: Direction::Forward,
        }
    }

    /// The reply flow of `app`.
    #[inline]
    pub fn reply(app: AppId) -> FlowKey {
        FlowKey {
            app,
            direction: Direction::Reply,
        }
    }

    /// A dense number for per-flow tables (a packet scheduler's flow index), ordered as
    /// the keys are: application first, forward before reply. Schedulers break ties
    /// by this number (lower first), so the order is part of the model.
    #[inline]
    pub fn dense(self) -> u32 {
        let d = match self.direction {
            Direction::Forward => 0,
            Direction::Reply => 1,
        };
        self.app.0 * 2 + d
    }
}

/// A packet in flight in the fabric (a slot, reused once the packet is delivered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacketId(pub u32);

/// One directed link of the fabric: a host's uplink into its switch, or a switch
/// output port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChannelId(pub u32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_numbers_follow_the_key_order() {
        let keys = [
            FlowKey::forward(AppId(0)),
            FlowKey::reply(AppId(0)),
            FlowKey::forward(AppId(1)),
            FlowKey::reply(AppId(1)),
            FlowKey::forward(AppId(7)),
        ];
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert!(keys.windows(2).all(|w| w[0].dense() < w[1].dense()));
        assert_eq!(keys.map(FlowKey::dense), [0, 1, 2, 3, 14]);
    }
}
