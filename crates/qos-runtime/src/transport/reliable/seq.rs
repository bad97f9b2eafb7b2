//! What both halves of the reliable transport share (thesis §4.1's reliable delivery
//! over UDP): sequence-space comparison, fresh connection ids, retransmission settings.

use qos_core::units::Duration;
use rand::Rng;

/// `a < b` in sequence space (wrapping, RFC 1982 style).
pub fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// A fresh random id for a connection or a receiver instance (never zero).
pub fn fresh_id() -> u32 {
    let mut rng = rand::thread_rng();
    loop {
        let id: u32 = rng.gen();
        if id != 0 {
            return id;
        }
    }
}

/// Retransmission settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetxConfig {
    /// First retransmission timeout.
    pub rto: Duration,
    /// Upper bound on the backed-off timeout.
    pub max_rto: Duration,
    /// A hole is retransmitted at once when this many later packets are selectively acked.
    pub dup_threshold: u32,
    /// A flow whose oldest unacknowledged packet, or whose window probes, have gone this
    /// long without an answer gives up: the peer is taken for gone.
    pub give_up: Duration,
}

impl Default for RetxConfig {
    fn default() -> Self {
        RetxConfig {
            rto: Duration::from_ms(20),
            max_rto: Duration::from_ms(500),
            dup_threshold: 3,
            give_up: Duration::from_secs(10),
        }
    }
}
