//! The node agent's data plane — the software NIC (thesis §3.2.1, §4.2.2): the one
//! trusted component that moves every application packet, so rate control cannot be
//! bypassed.
//!
//! - [`segment`] — message → packets, packet size from the path MTU.
//! - [`clock`] — the agent's RTC and deadline-based waiting (batching, no µs sleeps).
//! - [`engine`] — send engine (segmentation, qos-core scheduler, transport) and receive
//!   engine (in-order reassembly into posted buffers, completions).
//! - [`harness`] — data planes + in-process applications for measurements (calibrate).
//! - [`seam`] — follows the local manager's IDT table into the running data plane.
//! - [`service`] — the agent's data-plane service: ports for local applications over
//!   shared memory ([`crate::shm`]), the engine loop, sleeping.

pub mod clock;
pub mod engine;
pub mod harness;
pub mod seam;
pub mod segment;
pub mod service;

#[cfg(test)]
mod tests;
