//! A port the data plane serves (thesis §4.1: a GM port opened by a process): its
//! number, the Unix connection it was opened on, its shared-memory region and doorbell,
//! and the completions waiting for room in its ring.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::shm::region::{CompletionDesc, Doorbell, Region};

pub(super) struct PortConn {
    pub(super) port: u16,
    /// The opening process's uid and pid (for the per-user limits).
    pub(super) uid: u32,
    pub(super) pid: u32,
    pub(super) conn: OwnedFd,
    pub(super) region: Arc<Region>,
    pub(super) app_bell: Doorbell,
    pub(super) backlog: VecDeque<CompletionDesc>,
}
