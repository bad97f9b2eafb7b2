//! Support shared by the process tests: the built binary and children that do not outlive
//! their test.

use std::process::Child;

pub mod loopback;
pub mod other_user;
pub mod real;
pub mod testbed;

/// The `clusterqos` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_clusterqos");

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
