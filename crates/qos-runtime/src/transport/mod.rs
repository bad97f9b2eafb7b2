//! Transport between node agents: UDP datagrams, one packet each, made reliable and
//! in order per flow (source port, destination port, priority) as GM guarantees
//! (thesis §4.1), with receive-side flow control.
//!
//! - [`wire`] — the packet format (zero-copy checked view + `Repr`), versioned.
//! - [`reliable`] — per-flow sender/receiver state machines: sequence numbers,
//!   cumulative + selective acks, retransmission timers, receive window.
//! - [`auth`] — every datagram sealed (AES-128-GCM, a key per pair of agents) and
//!   checked for its sender, tag and freshness before the transport sees it.
//! - [`link`] — the datagram device (UDP) and the fault-injection middleware.

pub mod auth;
pub mod link;
pub mod reliable;
pub mod wire;
