//! One module per subcommand; each has `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod admit;
pub mod agent;
pub mod bench;
pub mod calibrate;
pub mod exec;
pub mod job;
pub mod manager;
pub mod release;
pub mod reproduce;
pub mod request;
pub mod run;
pub mod schedule;
pub mod status;
pub mod sweep;
pub mod testbed;
