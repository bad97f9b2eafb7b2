//! `clusterqos bench dataplane-overhead`: the cost of rate control in the agent's data
//! plane (thesis §5.2: "less than 1 %" in latency and bandwidth), unpaced and paced.
//! The benchmark is `qos_experiments::overhead::bench`; this parses
//! its flags and prints its tables, or JSON.

use std::process::ExitCode;

use anyhow::Context;
use qos_core::sched::SchedulerKind;
use qos_core::units::Duration;
use qos_experiments::overhead::bench::{self, Settings};
use qos_experiments::overhead::{self, Plan};
use qos_runtime::dataplane::harness::PACING_MARGIN;
use qos_runtime::transport::auth::{BenchSeal, Protection};

use crate::output;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// ABBA quads per size (each: four blocks, two with rate control on, two off).
    #[arg(long, default_value_t = 60)]
    pub quads: usize,
    /// Message sizes in bytes, comma-separated (default: the thesis's 4 B .. 64 KiB).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Round trips per block (all are pooled).
    #[arg(long, default_value_t = 25)]
    pub round_trips: usize,
    /// Bytes per block's bandwidth figure (20 ..= 1000 messages).
    #[arg(long, default_value_t = 4 << 20)]
    pub pump_bytes: usize,
    /// Bootstrap resamples for the 95 % intervals.
    #[arg(long, default_value_t = 2000)]
    pub resamples: usize,
    /// Bootstrap seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Scheduler for "rate control off": gm (GM rotation, the thesis's baseline),
    /// interleaved-round-robin, message-round-robin or virtual-clock.
    #[arg(long, default_value = "gm")]
    pub off: SchedulerKind,
    /// Microseconds the agents poll for work before sleeping (0: sleep at once).
    #[arg(long, default_value_t = 0)]
    pub spin_us: u64,
    /// Which runs: both (paced, then unpaced), paced (flows' IDT just below the fastest
    /// packet time), unpaced (IDT 0).
    #[arg(long, value_enum, default_value_t = Pacing::Both)]
    pub pacing: Pacing,
    /// The paced run's IDT as a fraction of the fastest time per packet (0.05 ..= 1).
    #[arg(long, default_value_t = PACING_MARGIN)]
    pub margin: f64,
    /// How the agents protect their datagrams: authenticated (the agent's default),
    /// encrypted, or one of two controls agents have no setting for: off (no seal, no
    /// trailer: what protection costs on the same data plane) and headers-only (the
    /// same trailer and per-datagram work as authenticated, the payload outside the
    /// tag: what of that cost the payload's bytes are).
    #[arg(long, value_enum, default_value_t = BenchProtection::Authenticated)]
    pub data_protection: BenchProtection,
    #[arg(long)]
    pub json: bool,
}

/// The agents' protection in the benchmark: the agent's two, or a control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchProtection {
    Authenticated,
    Encrypted,
    HeadersOnly,
    Off,
}

impl BenchProtection {
    fn sealing(self) -> (Protection, BenchSeal) {
        match self {
            BenchProtection::Authenticated => (Protection::Authenticated, BenchSeal::Whole),
            BenchProtection::Encrypted => (Protection::Encrypted, BenchSeal::Whole),
            BenchProtection::HeadersOnly => (Protection::Authenticated, BenchSeal::HeadersOnly),
            BenchProtection::Off => (Protection::Authenticated, BenchSeal::Off),
        }
    }
}

/// Which flows' IDTs the overhead runs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pacing {
    Both,
    Paced,
    Unpaced,
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let (protection, bench_seal) = a.data_protection.sealing();
    let settings = Settings {
        plan: Plan {
            sizes: if a.sizes.is_empty() {
                overhead::SIZES.to_vec()
            } else {
                a.sizes.clone()
            },
            quads: a.quads,
            round_trips: a.round_trips,
            pump_bytes: a.pump_bytes,
            resamples: a.resamples,
            seed: a.seed,
            off: a.off,
        },
        pacing: match a.pacing {
            Pacing::Both => bench::Pacing::Both,
            Pacing::Paced => bench::Pacing::Paced,
            Pacing::Unpaced => bench::Pacing::Unpaced,
        },
        margin: a.margin,
        spin: Duration::from_us(a.spin_us),
        protection,
        bench_seal,
    };
    let start = std::time::Instant::now();
    let mut progress = |d: usize, n: usize| {
        if d == n || d.is_multiple_of((n / 10).max(1)) {
            eprintln!(
                "[{:6.1} s] {d}/{n} quads of a size",
                start.elapsed().as_secs_f64()
            );
        }
    };
    let o = bench::run(&settings, &mut progress, &mut |line| eprintln!("{line}"))?;
    if a.json {
        output::print_json(&o.json(a.spin_us).context("the benchmark made no run")?)?;
        return Ok(ExitCode::SUCCESS);
    }
    for (heading, r) in o.runs() {
        println!("{heading}");
        output::print_table(&bench::table(r), 0);
        println!("{}", bench::summary(r, a.spin_us, o.seconds));
    }
    println!("Idle agents: {:.3} % CPU.", o.idle_agent_cpu_pct);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use qos_core::sched::SchedulerKind;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::Args,
    }

    fn parse(args: &str) -> Result<super::Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.split_whitespace())).map(|c| c.args)
    }

    #[test]
    fn flags_parse_with_their_defaults() {
        let a = parse("").unwrap();
        let got = (a.quads, a.round_trips, a.resamples, a.seed, a.spin_us);
        assert_eq!(got, (60, 25, 2000, 1, 0));
        assert!(a.sizes.is_empty() && !a.json && a.off == SchedulerKind::Gm);
        assert_eq!(a.pacing, super::Pacing::Both);
        assert_eq!(a.data_protection, super::BenchProtection::Authenticated);
        let off = parse("--data-protection off").unwrap().data_protection;
        assert_eq!(off.sealing().1, super::BenchSeal::Off);
        let h = parse("--data-protection headers-only")
            .unwrap()
            .data_protection;
        assert_eq!(
            h.sealing(),
            (
                super::Protection::Authenticated,
                super::BenchSeal::HeadersOnly
            )
        );
        assert_eq!(
            parse("--pacing unpaced").unwrap().pacing,
            super::Pacing::Unpaced
        );
        let a = parse(
            "--quads 7 --sizes 4,65536 --round-trips 9 --pump-bytes 4096 --resamples 50 \
             --seed 3 --spin-us 20 --off interleaved-round-robin --json",
        )
        .unwrap();
        assert_eq!(a.sizes, vec![4, 65536]);
        let got = (
            a.quads,
            a.round_trips,
            a.pump_bytes,
            a.resamples,
            a.seed,
            a.spin_us,
        );
        assert_eq!(got, (7, 9, 4096, 50, 3, 20));
        assert!(a.json && a.off == SchedulerKind::InterleavedRoundRobin);
        assert!(parse("--pacing sometimes").is_err() && parse("--off fifo").is_err());
    }
}
