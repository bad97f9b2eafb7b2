//! `clusterqos bench network`: how fast the flit-level network simulates (Yum et al.
//! §6.1, issue 10 point 9). The benchmark is `qos_experiments::bench::network`; this
//! parses its flags and prints its summary and scaling table, or JSON.

use std::process::ExitCode;

use qos_experiments::bench::network::{self, Options};

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Mesh side k of the reference run.
    #[arg(long, default_value_t = 8)]
    k: u32,
    /// Injection rate, packets per node per cycle.
    #[arg(long, default_value_t = 0.008)]
    rate: f64,
    /// Warm-up cycles.
    #[arg(long, default_value_t = 10_000)]
    warmup: u64,
    /// Measured cycles.
    #[arg(long, default_value_t = 30_000)]
    measure: u64,
    /// Also run these mesh sides (comma-separated) for the scaling table.
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<u32>,
    /// Injection rate of the scaling table, packets per node per cycle.
    #[arg(long, default_value_t = 0.002)]
    scaling_rate: f64,
    /// Scale the scaling table's rate by 8/k: every size then runs at the same fraction
    /// of its bisection bound (4/k flits/node/cycle) as 8×8 at `--scaling-rate`, so the
    /// flit-hops per node-cycle stay about constant.
    #[arg(long)]
    scale_rate: bool,
    /// Runs per point; the median time is reported.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Configuration: `reference` (Yum's router with BookSim2's stage delays) or
    /// `booksim2` (BookSim2's router and terminal cycle for cycle).
    #[arg(long, value_enum, default_value_t = Preset::Reference)]
    preset: Preset,
    /// Another simulator's cycles per CPU-second on the same configuration, to print
    /// the ratio.
    #[arg(long)]
    compare: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Which configuration is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Preset {
    /// [`FlitConfig::reference`].
    Reference,
    /// [`FlitConfig::booksim2`] on a mesh.
    Booksim2,
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let opts = Options {
        k: a.k,
        rate: a.rate,
        warmup: a.warmup,
        measure: a.measure,
        sizes: a.sizes,
        scaling_rate: a.scaling_rate,
        scale_rate: a.scale_rate,
        repeat: a.repeat,
        preset: match a.preset {
            Preset::Reference => network::Preset::Reference,
            Preset::Booksim2 => network::Preset::Booksim2,
        },
        compare: a.compare,
        seed: a.seed,
    };
    let out = network::run(&opts)?;
    if a.json {
        output::print_json(&out)?;
    } else {
        print!("{}", out.summary(&opts));
        if let Some(t) = out.scaling_table(&opts) {
            println!("{}", t.title);
            output::print_table(&t, 1);
        }
    }
    Ok(ExitCode::SUCCESS)
}
