//! The receive side's state per flow and per port (thesis §4.1: the MCP's RECV/RDMA
//! state): packets held for reassembly, the message being assembled into a posted
//! buffer, the flow's connection, and each port's posted receive buffers.

use std::collections::VecDeque;

use qos_core::units::Time;

use super::message::RecvTarget;
use crate::transport::reliable::{RecvConn, RecvFlow};

pub(super) struct RxPacket {
    pub(super) buf: Vec<u8>,
    pub(super) msg_seq: u32,
    pub(super) msg_len: u32,
    pub(super) offset: u32,
    pub(super) len: u32,
}

pub(super) struct Assembly {
    pub(super) msg_seq: u32,
    pub(super) msg_len: u32,
    pub(super) cookie: u64,
    pub(super) target: Option<Box<dyn RecvTarget>>,
}

pub(super) struct InFlow {
    pub(super) recv: RecvFlow<RxPacket>,
    pub(super) assembling: Option<Assembly>,
    pub(super) conn: RecvConn,
    /// When a packet of the flow last passed `admit`.
    pub(super) last_heard: Time,
}

#[derive(Default)]
pub(super) struct LocalPort {
    pub(super) posted: VecDeque<(u64, usize, Box<dyn RecvTarget>)>,
}
