//! One module per subcommand; each has `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod admit;
pub mod bench;
pub mod schedule;
pub mod agent;
pub mod manager;
pub mod release;
pub mod request;
pub mod status;
pub mod reproduce;
pub mod run;
pub mod testbed;
pub mod calibrate;
