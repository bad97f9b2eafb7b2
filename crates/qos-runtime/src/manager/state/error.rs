//! Why the master's books refuse an operation, typed: the HTTP layer alone turns each
//! kind into the protocol's error code and status (`docs/protocol.md`), so the books
//! never build wire errors. A rejection by admission control (thesis §3.3.1) is not an
//! error: it is a decision.

use crate::protocol::{ErrorCode, FlowSpec};

/// What a refused operation on the books was refused for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BooksError {
    /// The request is malformed or out of range (the message says which field).
    #[error("{0}")]
    Invalid(String),
    /// A node the topology does not have.
    #[error("no node '{0}' in the topology")]
    UnknownNode(String),
    /// A flow the books do not hold.
    #[error("no such flow: {0}")]
    UnknownFlow(FlowSpec),
    /// A job the books do not hold.
    #[error("no job '{0}'")]
    UnknownJob(String),
    /// An agent asked for a flow that does not start at its node.
    #[error("the agent of node '{agent}' may only request flows sourced at '{agent}', not at '{source_node}'")]
    WrongSource {
        /// The agent's node.
        agent: String,
        /// The flow's source node.
        source_node: String,
    },
    /// The caller may not act on what it named (another user's port or flow).
    #[error("{0}")]
    NotOwner(String),
    /// What the request would create exists already, or another agent holds the node.
    #[error("{0}")]
    Conflict(String),
}

impl BooksError {
    /// The protocol's error code for this kind of refusal (the HTTP status follows
    /// from it, `docs/protocol.md`).
    pub fn code(&self) -> ErrorCode {
        match self {
            BooksError::Invalid(_) | BooksError::WrongSource { .. } => ErrorCode::BadRequest,
            BooksError::UnknownNode(_) | BooksError::UnknownFlow(_) | BooksError::UnknownJob(_) => {
                ErrorCode::NotFound
            }
            BooksError::NotOwner(_) => ErrorCode::NotOwner,
            BooksError::Conflict(_) => ErrorCode::Conflict,
        }
    }
}
