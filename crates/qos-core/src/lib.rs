//! Pure algorithms of clusterqos: no I/O, no async, no clock reads, no globals.
//!
//! Every decision the simulator (`qos-sim`) and the real runtime (`qos-runtime`) make is
//! taken here, so a policy is written once and behaves the same in both. Time is always
//! passed in as an argument.
//!
//! Map of the crate:
//! - [`source`] — `file:line: message` errors for every TOML input ([`source::parse_toml`]).
//! - [`units`] — `Bandwidth`, `Time`, `Duration`, `Bytes`, parsed from "40MB/s", "250us", "4KiB".
//! - [`sched`] — packet schedulers behind one trait: rate control (IDT/NDT, thesis §3.2.2),
//!   VirtualClock (Nagar §3.3), message round-robin, interleaved round-robin, GM rotation.

pub mod sched;
pub mod source;
pub mod units;
