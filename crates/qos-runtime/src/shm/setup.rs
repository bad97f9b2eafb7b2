//! The port set-up protocol spoken on the agent's SOCK_SEQPACKET Unix socket (GM's driver
//! role, thesis §4.1): one JSON message each way, after which everything goes through
//! the shared region. The request names the port (or lets the agent choose); the reply
//! carries the region's layout and the node list, with three descriptors attached (the
//! port's memfd, the agent's doorbell, the port's doorbell). `docs/dataplane.md` has the
//! messages.

use serde::{Deserialize, Serialize};

use super::region::Layout;

/// Set-up protocol version spoken on the port socket.
pub const SETUP_VERSION: u32 = 1;

/// An application's request: `{"version":1,"op":"open","port":N|null}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenRequest {
    pub version: u32,
    pub op: String,
    #[serde(default)]
    pub port: Option<u16>,
}

/// The agent's answer to an open request (the memfd and two eventfds ride along).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenReply {
    pub version: u32,
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub port: u16,
    #[serde(default)]
    pub node: String,
    #[serde(default)]
    pub nodes: Vec<String>,
    #[serde(default)]
    pub layout: Option<Layout>,
    #[serde(default)]
    pub packet_payload: usize,
}

impl OpenReply {
    /// A refusal saying why.
    pub fn refused(error: String) -> OpenReply {
        OpenReply {
            version: SETUP_VERSION,
            ok: false,
            error: Some(error),
            port: 0,
            node: String::new(),
            nodes: vec![],
            layout: None,
            packet_payload: 0,
        }
    }
}
