//! The thesis's modified SDMA (thesis §3.2.2, §4.2.2, §5.2): IDT/NDT rate control
//! picks the next packet against the LANai RTC, every packet of a message but the last
//! is MTU-sized, and each dispatch costs the rate-control bookkeeping (find the
//! minimum NDT, add the IDT).

use qos_core::sched::rate::RateControl as RateScheduler;
use qos_core::units::Duration;

use super::mcp::{Mcp, SdmaPolicy};
use crate::myrinet::calibration::{Lanai, Segmentation};

/// The rate-control MCP.
pub type RateControlMcp = Mcp<RateControl>;

/// The rate-control SDMA policy.
#[derive(Debug)]
pub struct RateControl;

impl SdmaPolicy for RateControl {
    type Scheduler = RateScheduler;

    /// Full-MTU packets and a shorter last one ("all packets (other than the last
    /// one) for a message are MTU-sized", §5.2).
    fn segment(len: u64, mtu: u64) -> Vec<u64> {
        Segmentation::FullMtu.cut(len, mtu)
    }

    /// `lanai.rate_control` per dispatch (tuned against the < 1 % overhead of §5.2).
    fn dispatch_overhead(lanai: &Lanai) -> Duration {
        lanai.rate_control
    }
}
