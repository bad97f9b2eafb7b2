//! `clusterqos from-booksim FILE.cfg [KEY=VALUE ...]` — the BookSim2-equivalent flit
//! scenario of a BookSim2 configuration file, as TOML (`qos_experiments::flit::booksim`
//! reads the file as BookSim2 does and refuses what the equivalent does not model, at
//! the line at fault). `clusterqos run FILE.cfg` runs the same scenario directly.

use std::process::ExitCode;

use anyhow::Context;

/// Write the BookSim2-equivalent scenario of a BookSim2 configuration file.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: clusterqos from-booksim mesh.cfg injection_rate=0.01 \
                        --rates 0.002,0.004,0.006 --out mesh.toml\n\
                        KEY=VALUE arguments override the file, as on BookSim2's command line."
)]
pub struct Args {
    /// The BookSim2 configuration file.
    file: String,
    /// BookSim2 settings overriding the file (`injection_rate=0.01 seed=2`).
    #[arg(value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// The scenario's load sweep, packets per node per cycle (default: the one
    /// `injection_rate` of the file).
    #[arg(long, value_name = "R,R,...", value_delimiter = ',')]
    rates: Option<Vec<f64>>,
    /// Write the scenario here instead of to standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&args.file).with_context(|| format!("reading {}", args.file))?;
    let text = qos_core::source::decode_text(&args.file, bytes)?;
    let toml = qos_experiments::flit::booksim::scenario(
        &args.file,
        &text,
        &args.sets,
        args.rates.as_deref(),
    )?;
    match &args.out {
        Some(p) => std::fs::write(p, toml).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{toml}"),
    }
    Ok(ExitCode::SUCCESS)
}
