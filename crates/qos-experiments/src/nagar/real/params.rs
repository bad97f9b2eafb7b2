//! The constants of Nagar et al.'s Figs 3–4 on real traffic: the paper's link and
//! classes, the loads swept (channels per class), message sizes in packets, and the
//! packet schedulers compared. A leaf, so the sweep, its checks, replicates and report
//! use it without importing the experiment back.

use qos_core::sched::SchedulerKind;
use serde::Serialize;

/// The link rate of the paper's card (Myrinet, 1.28 Gbit/s; the model's NSDMA rate),
/// MB/s: the paper's MB/s become fractions of the testbed's Bmax through it.
pub const PAPER_LINK_MB_S: f64 = 160.0;

/// The paper's classes, MB/s.
pub const CLASSES_MB_S: [f64; 3] = [1.0, 2.0, 3.0];

/// Class names as the paper writes them.
pub const CLASS_NAMES: [&str; 3] = ["1 MB/s", "2 MB/s", "3 MB/s"];

/// Channels per class at the paper's loads (6 to 30 MB/s).
pub const PAPER_CHANNELS: [u32; 5] = [1, 2, 3, 4, 5];

/// Channels per class beyond the paper's loads: up to 150 "MB/s", 94 % of the link.
pub const BEYOND_CHANNELS: [u32; 4] = [10, 15, 20, 25];

/// Channels per class of a quick run.
pub const QUICK_CHANNELS: [u32; 3] = [1, 5, 25];

/// Channels per class run again beside the best-effort channel (quick: the last only).
pub const BEST_EFFORT_CHANNELS: [u32; 2] = [5, 25];

/// Packets per best-effort message (~64 KB, as the thesis's bulk messages).
pub const BE_PACKETS_PER_MESSAGE: usize = 45;

/// Packets per message: ~4 KB in whole packets, so that the bytes a scheduler charges
/// per packet are the bytes sent.
pub const PACKETS_PER_MESSAGE: usize = 3;

/// Real-time priority (SCHED_FIFO) of the experiment's threads.
pub const RT_PRIORITY: i32 = 20;

/// One packet-scheduler configuration of the comparison.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Discipline {
    /// Its name in tables and checks.
    pub name: &'static str,
    /// The agent's scheduler.
    pub kind: SchedulerKind,
    /// Whether the channels' reservations are in the agent's table (VirtualClock's
    /// Vtick comes from them; without them every channel is best-effort).
    pub reserved: bool,
    /// What it is.
    pub about: &'static str,
}

/// The schedulers compared, in table order.
pub const DISCIPLINES: [Discipline; 5] = [
    Discipline {
        name: "rate-control",
        kind: SchedulerKind::RateControl,
        reserved: true,
        about: "IDT/NDT rate control, each channel paced at its reservation (Gulati §3.2.2)",
    },
    Discipline {
        name: "virtual-clock",
        kind: SchedulerKind::VirtualClock,
        reserved: true,
        about: "VirtualClock, Vtick from each channel's reservation (QoSVIA, Nagar §3.3)",
    },
    Discipline {
        name: "fcfs",
        kind: SchedulerKind::VirtualClock,
        reserved: false,
        about:
            "first come first served: VirtualClock with no reservations (PVIA's order, Nagar §3.3)",
    },
    Discipline {
        name: "round-robin",
        kind: SchedulerKind::MessageRoundRobin,
        reserved: true,
        about: "whole messages round robin over the channels (Gulati Fig 2.3a)",
    },
    Discipline {
        name: "gm",
        kind: SchedulerKind::Gm,
        reserved: true,
        about: "GM's rotation over destination nodes, then ports, one packet each (Gulati §4.1)",
    },
];
