//! The master bandwidth resource manager (thesis §3.3, §4.3): admits premium flows with
//! the three criteria of §3.3.1, assigns IDT = T·Bmax/B_req, keeps best-effort shares
//! current (§3.3.2), and pushes IDT changes to the agents whose flows changed.
//!
//! Laid out like a small service: [`state`] holds the books (no I/O), [`store`] makes
//! them durable (SQLite with group commit, or etcd shared by replicas), [`role`] says
//! whether this master leads and holds the books of its term, `ha` wins and loses
//! that leadership through etcd, [`hub`] pushes updates to agents, [`http`] is the
//! protocol's endpoints, [`serve`] the connections, [`startup`] rebuilds the books a
//! term starts from, and [`server`] is the loop: open the store, restore, serve, reap
//! expired leases, shut down. [`config`] and [`shared`] are what they share. This file
//! only names the parts; none of them imports it.

pub mod config;
#[cfg(feature = "etcd")]
mod ha;
pub mod http;
pub mod http_jobs;
pub mod hub;
pub mod launch;
#[cfg(feature = "etcd")]
mod leader_watch;
pub mod queue;
pub mod role;
pub mod serve;
pub mod server;
pub mod shared;
pub mod startup;
pub mod state;
pub mod store;

pub use config::{Config, StoreConfig};
pub use server::{run_blocking, start, ManagerHandle};
pub use shared::Shared;
pub use startup::{ManagerError, Unfit};
