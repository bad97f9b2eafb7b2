//! One module per subcommand; each has `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod admit;
pub mod schedule;
