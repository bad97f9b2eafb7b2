//! Reliable in-order delivery per flow (GM's guarantee, thesis §4.1: "reliable delivery
//! between end-points ... message order is preserved for messages of the same priority
//! between the same sending and receiving ports"), rebuilt over UDP.
//!
//! Pure state machines with time passed in, like qos-core: [`SendFlow`] ([`send`]) keeps
//! packets until the receiving port has taken them (cumulative + 64-bit selective acks
//! say which arrived, a "delivered" mark which the port took), marks packets for
//! retransmission on a timer with exponential back-off and on SACK holes, and never
//! sends past the receiver's window. It puts nothing on the wire itself: the engine asks
//! it for the next packet to resend or the room for new ones each time the packet
//! scheduler grants the flow a packet, so resends are paced like first copies.
//! [`RecvFlow`] ([`recv`]) accepts packets in any order, hands them up strictly in
//! sequence, and advertises a window of `capacity` packets counted from the first packet
//! the upper layer has not yet taken — so a slow receiver stops its sender (no loss) and
//! holds at most `capacity` packets per flow (no unbounded memory).
//!
//! Connections. A sequence space belongs to a connection, named by a
//! random connection id the sender picks when it starts the space at zero, and by a
//! random receiver id the receiver picks when it creates its state. Packets carry both
//! (the receiver id the sender has heard, zero before the first ack). So:
//! - a restarted *sender* starts with a new connection id: the receiver drops the old
//!   connection's state and starts the new one ([`RecvConn::classify`] says `New`), and
//!   ignores stray packets of the retired connection;
//! - a restarted *receiver* holds no state for the connection a packet names with a
//!   non-zero receiver id: it answers with a reset; or it answers an ack with a new
//!   receiver id: either way the sender learns the receiver lost its state
//!   ([`AckVerdict::PeerRestarted`]) and starts a new connection;
//! - a sender that hears nothing for [`RetxConfig::give_up`] while packets are due
//!   gives up ([`GaveUp`]) instead of resending forever.
//!
//! A message's send completes when the receiving port has taken every packet of it (into
//! a posted buffer, GM's receive token), not merely when the receiving agent holds them:
//! so a receiver that restarts loses only messages its sender then reports as failed.

mod recv;
mod send;
mod seq;
#[cfg(test)]
mod tests;

pub use recv::{Accepted, ConnVerdict, RecvConn, RecvFlow};
pub use send::{AckVerdict, GaveUp, SendFlow};
pub use seq::{fresh_id, seq_lt, RetxConfig};

pub use crate::transport::wire::AckInfo;
