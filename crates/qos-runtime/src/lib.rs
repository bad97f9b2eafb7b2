//! The real runtime of clusterqos (thesis §3.3, §4.3): a bandwidth resource manager
//! service and the node agent that plays the NIC firmware's part on Linux hosts.
//!
//! Map of the crate:
//! - [`protocol`] — the versioned wire protocol (HTTP/JSON between agents and master,
//!   JSON Lines on the agent's Unix socket); `docs/protocol.md` documents it.
//! - [`auth`] — the agents' shared secret, checked in constant time.
//! - [`metrics`] — counters and Prometheus text rendering.
//! - [`manager`] — the master: books ([`manager::state`], which take requests checked at
//!   the edge and refuse with typed errors), durable store
//!   ([`manager::store`]: SQLite or etcd), leadership ([`manager::role`]), update push
//!   ([`manager::hub`]), endpoints ([`manager::http`]).
//! - [`etcd_local`] — a local etcd cluster on loopback (tests, benchmark, chaos runs).
//! - [`agent`] — the local manager on each node: registers, holds the node's IDT table
//!   (which its enforcement backend follows through the `agent::enforcer::Enforcer`
//!   seam), serves local clients on a Unix socket.
//! - [`node`] — the one launcher: `clusterqos agent`'s options, and the agent started
//!   with its backend (data plane, kernel, or none).
//! - [`shutdown`] — Ctrl-C/SIGTERM, and the stop tokens of every long-running task.
//! - [`master_client`] — the HTTP client agents (and tools) use to talk to the master.
//! - [`bench`] — the manager benchmark (decisions per second, decision latency).
//! - [`logging`] — structured logs (tracing) for the long-running commands.
//! - [`client`] — the application's API: `request_bandwidth`, `best_effort`, `release`,
//!   `flows`.
//! - [`kernel`] — the agent's other enforcement backend: grants and shares as Linux
//!   traffic control (htb classes, u32 filters) over rtnetlink, for unmodified programs.
//! - [`dataplane`], [`transport`] — the agent's data plane: segmentation, rate-controlled
//!   dispatch and reliable UDP delivery (fed by the agent's IDT table).

pub mod agent;
pub mod auth;
pub mod bench;
pub mod client;
pub mod dataplane;
pub mod etcd_local;
pub mod kernel;
pub mod logging;
pub mod manager;
pub mod master_client;
pub mod metrics;
pub mod node;
pub mod protocol;
pub mod shm;
pub mod shutdown;
pub mod testbed;
pub mod tls;
pub mod transport;
