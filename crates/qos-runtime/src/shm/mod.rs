//! GM-style user-level ports on Linux (thesis §2.2, §4.1): the Unix socket is used only
//! to set a port up; message buffers, the send and receive descriptor queues and the
//! completion queue live in a memfd shared by the application and its agent, so posting
//! a message costs no system call while the agent is busy. Idle sides sleep on eventfd
//! doorbells. This module is the shared-memory mechanics both ends use; the agent's
//! service that serves ports is `dataplane::service`.
//!
//! - [`ring`] — lock-free SPSC descriptor rings with atomics, robust to a hostile peer.
//! - [`region`] — the shared region's layout, descriptors, doorbells.
//! - [`fdpass`] — SCM_RIGHTS, SO_PEERCRED, SOCK_SEQPACKET helpers.
//! - [`setup`] — the port set-up messages (request, reply) on the Unix socket.
//! - [`client`] — the application's end of a port.

pub mod client;
pub mod fdpass;
pub mod region;
pub mod ring;
pub mod setup;
