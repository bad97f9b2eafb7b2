//! Why admission control refused a request (thesis §3.3.1), typed: the resource short
//! and the numbers, or a request above the source NIC's Bmax. The HTTP layer renders it
//! as the protocol's rejection.

use qos_core::admission::Rejection;

/// A refused request: a decision, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A resource on the flow's path is short (criterion 1, 2 or 3).
    Resource(Rejection),
    /// The request alone exceeds what the source NIC can pace (IDT would be below T).
    AboveBmax {
        /// The source node.
        node: String,
        /// What was asked, bytes/s.
        requested: u64,
        /// The node's Bmax, bytes/s.
        bmax: u64,
        /// The reason in one line.
        message: String,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Resource(r) => write!(f, "rejected: {r}"),
            Refusal::AboveBmax { message, .. } => f.write_str(message),
        }
    }
}
