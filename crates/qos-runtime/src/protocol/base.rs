//! The protocol's basic types (`docs/protocol.md`), shared by every message and by the
//! job messages (`super::job`): who owns a reservation, the error reply, name and
//! bandwidth limits. A leaf module, so that the messages may use it both ways.

use serde::{Deserialize, Serialize};

/// Longest node name or flow name accepted.
pub const MAX_NAME_LEN: usize = 64;
/// Largest bandwidth a request may name: 1 PB/s.
pub const MAX_BANDWIDTH: u64 = 1_000_000_000_000_000;

/// Checks a name: 1..=64 characters, no control characters.
pub fn check_name(what: &str, name: &str) -> Result<(), WireError> {
    if name.is_empty() || name.chars().count() > MAX_NAME_LEN {
        return Err(WireError::new(
            ErrorCode::BadRequest,
            format!("{what} must have 1 to {MAX_NAME_LEN} characters"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(WireError::new(
            ErrorCode::BadRequest,
            format!("{what} must not contain control characters"),
        ));
    }
    Ok(())
}

/// Who owns a flow: a process on a node, as the node's agent saw it through the Unix
/// socket's peer credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    /// User id of the owning process.
    pub uid: u32,
    /// Process id whose life holds the reservation (see the lease in docs/protocol.md).
    pub pid: u32,
}

/// Largest user id an owner may have: 2^31 − 1. Linux's `uid_t` is 32 bits, but
/// 4294967295 is `(uid_t) -1` ("no user") and ids from 2^31 up break tools that keep
/// them signed, so no account has one.
pub const MAX_UID: u32 = (1 << 31) - 1;
/// Largest process id Linux can give (`PID_MAX_LIMIT`, 2^22).
pub const MAX_PID: u32 = 1 << 22;

impl Owner {
    /// Refuses an owner no process can be: a uid above [`MAX_UID`], a pid of 0 or above
    /// [`MAX_PID`].
    pub fn check(&self) -> Result<(), WireError> {
        if self.uid > MAX_UID {
            return Err(WireError::new(
                ErrorCode::BadRequest,
                format!("owner uid {} is out of range (0 ..= {MAX_UID})", self.uid),
            ));
        }
        if self.pid == 0 || self.pid > MAX_PID {
            return Err(WireError::new(
                ErrorCode::BadRequest,
                format!("owner pid {} is out of range (1 ..= {MAX_PID})", self.pid),
            ));
        }
        Ok(())
    }
}

/// Machine-readable error codes (the `code` field of every error reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Missing or different protocol version.
    VersionMismatch,
    /// Missing or wrong credentials.
    Unauthorized,
    /// Malformed or out-of-range request.
    BadRequest,
    /// A node, port or flow the master does not know.
    NotFound,
    /// The flow belongs to another user.
    NotOwner,
    /// A flow with this key exists.
    Conflict,
    /// Message over the size limit.
    TooLarge,
    /// The path exists, the method does not (HTTP 405).
    MethodNotAllowed,
    /// A body that is not `Content-Type: application/json` (HTTP 415).
    UnsupportedMediaType,
    /// The request did not arrive whole within the deadline (HTTP 408).
    Timeout,
    /// The master could not be reached or failed (agent side).
    Unavailable,
    /// Internal failure (e.g. the database); nothing was changed.
    Internal,
}

impl ErrorCode {
    /// The HTTP status used for this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::VersionMismatch | ErrorCode::BadRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::NotOwner => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::Conflict => 409,
            ErrorCode::TooLarge => 413,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::Timeout => 408,
            ErrorCode::Unavailable => 503,
            ErrorCode::Internal => 500,
        }
    }
}

/// An error reply: `{"code": "...", "message": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code:?})")]
pub struct WireError {
    /// What kind of error.
    pub code: ErrorCode,
    /// One line for people.
    pub message: String,
}

impl WireError {
    /// An error of `code` saying `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        WireError {
            code,
            message: message.into(),
        }
    }
}
