//! The operations of Nagar et al.'s Table 1 ([`Stage`]) and when each completed in a
//! run ([`StageTimes`]): what a VIA control program records, and what the NIC interface
//! reports. A leaf of the NIC model, so the interface does not import the VIA programs.

use qos_core::units::Duration;
use serde::Serialize;

/// The operations of Table 1, in its order: when each completes, counted from the send
/// doorbell (send side) or from the message reaching the LCP (receive side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Send: HDMA programmed for the descriptor.
    SendDescProg,
    /// Send: descriptor in SRAM.
    SendDescDown,
    /// Send: HDMA programmed for the data (every page).
    SendDataProg,
    /// Send: data in SRAM.
    SendDataDown,
    /// Send: message on the network.
    SendNsdmaDone,
    /// Send: HDMA programmed for the completion status.
    SendStatusProg,
    /// Send: completion status in host memory.
    SendStatusDone,
    /// Receive: HDMA programmed for the receive descriptor.
    RecvDescProg,
    /// Receive: receive descriptor in SRAM.
    RecvDescDown,
    /// Receive: HDMA programmed for the data (every page).
    RecvDataProg,
    /// Receive: data in host memory.
    RecvDataUp,
    /// Receive: HDMA programmed for the completion status.
    RecvStatusProg,
    /// Receive: completion status in host memory.
    RecvStatusDone,
}

impl Stage {
    /// Every stage, in Table 1's order.
    pub const ALL: [Stage; 13] = [
        Stage::SendDescProg,
        Stage::SendDescDown,
        Stage::SendDataProg,
        Stage::SendDataDown,
        Stage::SendNsdmaDone,
        Stage::SendStatusProg,
        Stage::SendStatusDone,
        Stage::RecvDescProg,
        Stage::RecvDescDown,
        Stage::RecvDataProg,
        Stage::RecvDataUp,
        Stage::RecvStatusProg,
        Stage::RecvStatusDone,
    ];

    /// The row name in scenario files ("send-desc-prog").
    pub fn name(self) -> &'static str {
        match self {
            Stage::SendDescProg => "send-desc-prog",
            Stage::SendDescDown => "send-desc-down",
            Stage::SendDataProg => "send-data-prog",
            Stage::SendDataDown => "send-data-down",
            Stage::SendNsdmaDone => "send-nsdma-done",
            Stage::SendStatusProg => "send-status-prog",
            Stage::SendStatusDone => "send-status-done",
            Stage::RecvDescProg => "recv-desc-prog",
            Stage::RecvDescDown => "recv-desc-down",
            Stage::RecvDataProg => "recv-data-prog",
            Stage::RecvDataUp => "recv-data-up",
            Stage::RecvStatusProg => "recv-status-prog",
            Stage::RecvStatusDone => "recv-status-done",
        }
    }

    /// The row as Table 1 labels it.
    pub fn label(self) -> &'static str {
        match self {
            Stage::SendDescProg => "Send HDMA Prog. (Desc.)",
            Stage::SendDescDown => "Send Desc. Down",
            Stage::SendDataProg => "Send HDMA Prog. (Data)",
            Stage::SendDataDown => "Send Data Down",
            Stage::SendNsdmaDone => "Send NSDMA Done",
            Stage::SendStatusProg => "Send HDMA Prog. (Status)",
            Stage::SendStatusDone => "Send Status Done",
            Stage::RecvDescProg => "Receive HDMA Prog. (Desc.)",
            Stage::RecvDescDown => "Receive Desc Down",
            Stage::RecvDataProg => "Receive HDMA Prog. (Data)",
            Stage::RecvDataUp => "Receive Data Up",
            Stage::RecvStatusProg => "Receive HDMA Prog. (Status)",
            Stage::RecvStatusDone => "Receive Status Done",
        }
    }

    /// The stage named `name` ([`Stage::name`]).
    pub fn parse(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// When each Table 1 operation completed, summed over the messages a NIC handled.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StageTimes {
    sum_ps: [u128; 13],
    count: [u64; 13],
}

impl StageTimes {
    /// Records that `stage` of a message completed `after` its origin.
    pub fn record(&mut self, stage: Stage, after: Duration) {
        let i = stage as usize;
        self.sum_ps[i] += u128::from(after.as_ps());
        self.count[i] += 1;
    }

    /// The mean completion time of `stage` (µs), if any message went through it.
    pub fn mean_us(&self, stage: Stage) -> Option<f64> {
        let i = stage as usize;
        (self.count[i] > 0).then(|| self.sum_ps[i] as f64 / self.count[i] as f64 / 1e6)
    }

    /// How many messages went through `stage`.
    pub fn count(&self, stage: Stage) -> u64 {
        self.count[stage as usize]
    }
}
