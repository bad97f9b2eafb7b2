//! InfiniBand channel-adapter bookkeeping as Yum et al. use it (§3.2, Fig 2; IBA vol. 1
//! ch. 7 and 10): service levels and their virtual lanes, and the queues a consumer
//! works with — queue pairs, work queue elements, completion queues — with the HCA's
//! prioritized QP scheduler. Pure types: the simulator's HCA (`qos-sim`) moves the
//! flits; time is an argument (cycles).
//!
//! - [`Lanes`] — which virtual lanes each traffic class may use: VL15 for control
//!   traffic at the highest priority, the data lanes VL0–VL14 split between real-time
//!   and best-effort traffic (the paper: 11 real-time lanes for an 80:20 mix, §7.1).
//! - [`SlToVl`] — the IBA SL→VL mapping table of a port.
//! - [`queues`] — [`queues::ChannelAdapter`]: QPs with a send queue and a receive queue,
//!   CQs, WQEs posted by consumers, doorbell queues per traffic class served highest
//!   class first and FCFS within a class (the prioritized QP scheduling of §3.2), CQEs
//!   posted when a WQE completes. Where a send completes (when its last flit is moved
//!   by the DMA, when it has entered the network, or when the receiver acknowledged
//!   it) is a parameter: the credit-based congestion control of §4.2 counts CQEs.

pub mod queues;

use serde::{Deserialize, Serialize};

use crate::vlarb::{CONTROL_VL, MAX_VLS};

/// A service level, 0–15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Sl(pub u8);

/// Why a lane or SL configuration is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaneError {
    /// A lane beyond VL15, or VL15 given to data traffic.
    #[error("virtual lane {0} cannot carry data traffic (VL0-VL14; VL15 is for control traffic)")]
    DataLane(u8),
    /// A service level beyond 15.
    #[error("service level {0} out of range (0-15)")]
    Sl(u8),
    /// A lane given to both classes or listed twice.
    #[error("virtual lane {0} is listed twice")]
    Duplicate(u8),
    /// A class without lanes.
    #[error("the {0} class has no virtual lane")]
    Empty(&'static str),
}

/// The lanes of each traffic class (§3.1: "VLs are statically assigned to different
/// traffic classes during initial system configuration").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lanes {
    /// Real-time lanes (MPEG-2 and ON/OFF connections).
    pub real_time: Vec<u8>,
    /// Best-effort lanes.
    pub best_effort: Vec<u8>,
}

impl Lanes {
    /// The paper's split for an 80:20 real-time : best-effort mix: 11 real-time lanes
    /// (VL0–VL10, §7.1: "for 80% real-time traffic, 11 VLs are assigned"), the other
    /// four data lanes (VL11–VL14) best effort, VL15 control.
    pub fn yum() -> Self {
        Lanes {
            real_time: (0..11).collect(),
            best_effort: (11..15).collect(),
        }
    }

    /// Checks that each class has lanes, that they are data lanes, and that no lane is
    /// shared.
    pub fn validate(&self) -> Result<(), LaneError> {
        if self.real_time.is_empty() {
            return Err(LaneError::Empty("real-time"));
        }
        if self.best_effort.is_empty() {
            return Err(LaneError::Empty("best-effort"));
        }
        let mut seen = 0u32;
        for &v in self.real_time.iter().chain(&self.best_effort) {
            if v as usize >= CONTROL_VL {
                return Err(LaneError::DataLane(v));
            }
            if seen & (1 << v) != 0 {
                return Err(LaneError::Duplicate(v));
            }
            seen |= 1 << v;
        }
        Ok(())
    }

    /// The control lane.
    pub fn control(&self) -> u8 {
        CONTROL_VL as u8
    }
}

/// A port's SL→VL mapping table (IBA §7.6.6): the lane a packet of each service level
/// uses. Data service levels map to data lanes; the management lane VL15 is not in the
/// table (subnet management packets use it directly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlToVl([u8; MAX_VLS]);

impl SlToVl {
    /// A table from lane per SL.
    pub fn new(table: [u8; MAX_VLS]) -> Result<Self, LaneError> {
        if let Some(&v) = table.iter().find(|&&v| v as usize >= CONTROL_VL) {
            return Err(LaneError::DataLane(v));
        }
        Ok(SlToVl(table))
    }

    /// SL i on VL i mod `lanes` (the identity when `lanes` is 15).
    pub fn modulo(lanes: u8) -> Self {
        let lanes = lanes.clamp(1, CONTROL_VL as u8);
        let mut t = [0u8; MAX_VLS];
        for (sl, v) in t.iter_mut().enumerate() {
            *v = sl as u8 % lanes;
        }
        SlToVl(t)
    }

    /// The lane of service level `sl`.
    pub fn vl(&self, sl: Sl) -> Result<u8, LaneError> {
        self.0
            .get(sl.0 as usize)
            .copied()
            .ok_or(LaneError::Sl(sl.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_split_has_eleven_real_time_lanes_and_control_on_vl15() {
        let l = Lanes::yum();
        l.validate().unwrap();
        assert_eq!(l.real_time.len(), 11);
        assert_eq!(l.best_effort, vec![11, 12, 13, 14]);
        assert_eq!(l.control(), 15);
    }

    #[test]
    fn lanes_must_be_data_lanes_used_once() {
        let mut l = Lanes::yum();
        l.best_effort.push(15);
        assert_eq!(l.validate(), Err(LaneError::DataLane(15)));
        let mut l = Lanes::yum();
        l.best_effort.push(0);
        assert_eq!(l.validate(), Err(LaneError::Duplicate(0)));
        let l = Lanes {
            real_time: vec![],
            best_effort: vec![1],
        };
        assert_eq!(l.validate(), Err(LaneError::Empty("real-time")));
    }

    #[test]
    fn sl_to_vl_maps_service_levels_to_data_lanes() {
        let t = SlToVl::modulo(4);
        assert_eq!(t.vl(Sl(0)).unwrap(), 0);
        assert_eq!(t.vl(Sl(5)).unwrap(), 1);
        assert_eq!(t.vl(Sl(16)), Err(LaneError::Sl(16)));
        let mut raw = [0u8; 16];
        raw[3] = 15;
        assert_eq!(SlToVl::new(raw), Err(LaneError::DataLane(15)));
    }
}
