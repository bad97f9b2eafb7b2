//! Port-socket connections waiting for their open request: what the service loop keeps
//! for each, and how long it waits (a leaf module, so the loop and the port handling
//! can both name them without importing each other).

use std::os::fd::OwnedFd;

use qos_core::units::{Duration, Time};

/// A Unix connection accepted on the port socket whose open request has not come yet.
pub(super) struct Setup {
    /// The accepted connection.
    pub(super) conn: OwnedFd,
    /// Its peer's uid (for the per-uid cap on waiting connections).
    pub(super) uid: u32,
    /// When it was accepted.
    pub(super) since: Time,
}

/// How long a new connection has to send its open request.
pub(super) const SETUP_WAIT: Duration = Duration::from_ms(1000);
