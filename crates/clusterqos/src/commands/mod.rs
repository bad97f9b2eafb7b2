//! One module per subcommand; each has `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod admit;
#[cfg(feature = "runtime")]
pub mod agent;
pub mod bench;
#[cfg(feature = "runtime")]
pub mod calibrate;
#[cfg(feature = "runtime")]
pub mod exec;
pub mod experiment;
pub mod from_booksim;
#[cfg(feature = "runtime")]
pub mod job;
#[cfg(feature = "runtime")]
pub mod manager;
#[cfg(feature = "runtime")]
pub mod release;
pub mod reproduce;
#[cfg(feature = "runtime")]
pub mod request;
pub mod run;
pub mod schedule;
#[cfg(feature = "runtime")]
pub mod status;
pub mod sweep;
#[cfg(feature = "runtime")]
pub mod testbed;
