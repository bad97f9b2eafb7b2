//! Unmodified GM's SDMA (thesis §4.1, Fig 4.2; §5.2): GM's connection → sub-port →
//! send-token rotation picks the next packet, and a message is cut into equal-size
//! chunks no larger than the MTU.

use qos_core::sched::gm::GmRotation;
use qos_core::units::Duration;

use super::mcp::{Mcp, SdmaPolicy};
use crate::myrinet::calibration::{Lanai, Segmentation};

/// The unmodified GM MCP.
pub type GmMcp = Mcp<Gm>;

/// Unmodified GM's SDMA policy.
#[derive(Debug)]
pub struct Gm;

impl SdmaPolicy for Gm {
    type Scheduler = GmRotation;

    /// `n = ⌈len / mtu⌉` chunks whose sizes differ by at most one byte, the larger
    /// ones first ("the original version of GM attempts to segment multi-packet
    /// messages into equal sized chunks", §5.2).
    fn segment(len: u64, mtu: u64) -> Vec<u64> {
        Segmentation::EqualChunks.cut(len, mtu)
    }

    /// GM's rotation costs nothing beyond preparing the packet (it is in the
    /// calibrated per-packet time).
    fn dispatch_overhead(_lanai: &Lanai) -> Duration {
        Duration::ZERO
    }
}
