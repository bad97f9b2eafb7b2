//! A node's services (thesis §4.3: "a set of manager processes, one on each node"),
//! started one way: [`launch`] turns `clusterqos agent`'s options into the agent's
//! configuration and its enforcement backend, and [`serve`] runs the agent with that
//! backend behind the `Enforcer` seam until it is stopped. The agent, the data plane
//! and the kernel backend know nothing of each other; only this module names them all.

pub mod launch;
pub mod serve;
