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
//! - [`flow`] — flow identity (source port, target port, priority) and class: premium
//!   with a bandwidth, best-effort with a weight (thesis §2.1, §4.2.1).
//! - [`topology`] — hosts with T/Bmax and send/receive/combined limits, switches, links,
//!   deterministic source routes; builders and the TOML format (thesis §3.5, Fig 5.4).
//! - [`admission`] — the reservation ledger and call admission (thesis §3.3.1), and the
//!   per-link ledger of probe-based admission in the routers (Yum §4.1).
//! - [`besteffort`] — best-effort shares: the thesis rule and weighted max-min (§3.3.2, §4.3).
//! - [`calibrate`] — T and Bmax from an IDT sweep: one definition of the knee (§5.3).
//! - [`vlarb`] — virtual-lane arbitration (Yum §3.3): FCFS, round-robin, WRR tables with
//!   fast or slow pointers, IBA two-level arbitration, weights from admitted connections.
//! - [`iba`] — InfiniBand channel-adapter bookkeeping (Yum §3.2): lanes per traffic
//!   class, SL→VL tables, queue pairs, WQEs, completion queues, prioritized QP scheduling.
//! - [`pattern`] — a parallel job's communication pattern over its node list (all-to-all,
//!   ring, nearest-neighbour, one-to-many) as flows.
//! - [`text`] — a count with its noun in the right number ("1 miss", "2 misses").
//! - [`stream_metrics`] — deadline missing probability/time (Yum §6.2) and jitter
//!   fraction θ (Nagar §4) of a stream at its receiver.

#![forbid(unsafe_code)]

pub mod admission;
pub mod besteffort;
pub mod calibrate;
pub mod flow;
pub mod iba;
pub mod pattern;
pub mod sched;
pub mod source;
pub mod stream_metrics;
pub mod text;
pub mod topology;
pub mod units;
pub mod vlarb;
