//! qos-runtime (arrives with its issue).

pub mod dataplane;
pub mod shm;
pub mod transport;
