//! `clusterqos schedule` — the rate-control dispatch table for a set of flows
//! (thesis §3.2.2, Fig 3.3, Table 3.1).
//!
//! Every flow is always backlogged from t = 0 and the NIC makes one decision per time
//! unit T (IDTs are integers in units of T, as in the thesis, which normalises them to
//! T). With no arguments the flows are A (IDT 2) and B (IDT 3) over 12 steps: thesis
//! Table 3.1. The table has a row per quantity (t, each flow's NDT before the decision,
//! the flow dispatched) and a column per step; runs longer than
//! [`WIDE_TABLE_STEPS`] steps are printed with a row per step instead.

use std::process::ExitCode;

use anyhow::{bail, Context};
use qos_core::sched::rate::{dispatch_table, summarize, TableStep};
use qos_core::units::Duration;
use serde::Serialize;

use crate::output;

/// Longest run printed with a column per step.
const WIDE_TABLE_STEPS: u64 = 24;
/// Most steps accepted (the table is kept in memory).
const MAX_STEPS: u64 = 100_000;
/// Most flows accepted.
const MAX_FLOWS: usize = 64;

/// Print the rate-control dispatch table for a set of flows (thesis Table 3.1).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "With no --flow, uses A=2 and B=3, which over 12 steps is thesis Table 3.1.\n\
                  Every flow is always backlogged; one decision is made per time unit."
)]
pub struct Args {
    /// A flow and its inter-packet dispatch time in time units, e.g. `--flow A=2`
    /// (repeatable; IDT a positive integer).
    #[arg(long = "flow", value_name = "NAME=IDT")]
    flows: Vec<String>,
    /// Number of time steps (decisions) to show [default: 12].
    #[arg(long, value_name = "N")]
    steps: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// A validated flow.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Flow {
    name: String,
    idt: u64,
}

/// Parses `NAME=IDT`.
fn parse_flow(text: &str) -> anyhow::Result<Flow> {
    let Some((name, idt)) = text.split_once('=') else {
        bail!("invalid --flow '{text}': expected NAME=IDT, e.g. A=2");
    };
    let name = name.trim();
    if name.is_empty() {
        bail!("invalid --flow '{text}': the flow needs a name, e.g. A=2");
    }
    let idt: u64 = match idt.trim().parse() {
        Ok(v) if v > 0 => v,
        _ => bail!(
            "invalid --flow '{text}': IDT must be a positive integer number of time units \
             (IDT >= T, thesis §3.2.2)"
        ),
    };
    Ok(Flow {
        name: name.to_string(),
        idt,
    })
}

fn parse_steps(text: Option<&str>) -> anyhow::Result<u64> {
    let Some(text) = text else {
        return Ok(12);
    };
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_STEPS).contains(&n) => Ok(n),
        _ => bail!("invalid --steps '{text}': expected an integer from 1 to {MAX_STEPS}"),
    }
}

fn parse_flows(texts: &[String]) -> anyhow::Result<Vec<Flow>> {
    if texts.is_empty() {
        return Ok(vec![
            Flow {
                name: "A".into(),
                idt: 2,
            },
            Flow {
                name: "B".into(),
                idt: 3,
            },
        ]);
    }
    if texts.len() > MAX_FLOWS {
        bail!("too many flows: {} given, at most {MAX_FLOWS}", texts.len());
    }
    let mut flows: Vec<Flow> = Vec::with_capacity(texts.len());
    for text in texts {
        let flow = parse_flow(text)?;
        if flows.iter().any(|f| f.name == flow.name) {
            bail!(
                "invalid --flow '{text}': flow '{}' is given twice",
                flow.name
            );
        }
        flows.push(flow);
    }
    Ok(flows)
}

#[derive(Debug, Serialize)]
struct JsonFlow<'a> {
    name: &'a str,
    idt: u64,
    dispatched: u64,
}

#[derive(Debug, Serialize)]
struct JsonStep<'a> {
    t: u64,
    /// NDT of each flow before the decision, in the order of `flows`.
    ndt: Vec<u64>,
    dispatched: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    scheduler: &'static str,
    flows: Vec<JsonFlow<'a>>,
    steps: Vec<JsonStep<'a>>,
    ratio: String,
    expected_ratio: Option<String>,
    /// Sum of 1/IDT: packets asked for per time unit (at most 1 can be sent).
    demand: f64,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let flows = parse_flows(&args.flows)?;
    let steps = parse_steps(args.steps.as_deref())?;
    let unit = Duration::from_ps(1);
    let idts: Vec<Duration> = flows.iter().map(|f| Duration::from_ps(f.idt)).collect();
    let table = dispatch_table(&idts, unit, steps);
    let summary = summarize(&flows.iter().map(|f| f.idt).collect::<Vec<_>>(), &table);
    let (counts, observed, expected, demand) = (
        summary.counts,
        summary.ratio,
        summary.expected_ratio,
        summary.demand,
    );

    if args.json {
        let report = Report {
            scheduler: "rate-control",
            flows: flows
                .iter()
                .zip(&counts)
                .map(|(f, &dispatched)| JsonFlow {
                    name: &f.name,
                    idt: f.idt,
                    dispatched,
                })
                .collect(),
            steps: table
                .iter()
                .map(|s| JsonStep {
                    t: s.t.as_ps(),
                    ndt: s.ndt.iter().map(|t| t.as_ps()).collect(),
                    dispatched: s.dispatched.map(|i| flows[i].name.as_str()),
                })
                .collect(),
            ratio: observed,
            expected_ratio: expected,
            demand,
        };
        output::print_json(&report).context("writing JSON")?;
        return Ok(ExitCode::SUCCESS);
    }

    let described: Vec<String> = flows
        .iter()
        .map(|f| format!("{} (IDT {})", f.name, f.idt))
        .collect();
    println!(
        "Rate control (thesis §3.2.2): flows {}, one decision per time unit, {} steps.",
        described.join(", "),
        steps
    );
    println!("NDT values are shown before each decision; '-' means nothing was due.");
    println!("{}", render(&flows, &table, steps <= WIDE_TABLE_STEPS));
    let sent: Vec<String> = flows
        .iter()
        .zip(&counts)
        .map(|(f, c)| format!("{} {}", f.name, c))
        .collect();
    let names: Vec<&str> = flows.iter().map(|f| f.name.as_str()).collect();
    let expected = expected.unwrap_or_else(|| "too large to print".to_string());
    println!(
        "Packets dispatched: {}. Ratio {} = {observed} (1/IDT gives {expected}).",
        sent.join(", "),
        names.join(":")
    );
    if demand > 1.0 + 1e-9 {
        println!(
            "Note: the flows ask for {demand:.3} packets per time unit (sum of 1/IDT) but one \
             can be sent, so rates fall below 1/IDT; the thesis's manager admits only sets \
             with sum <= 1."
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The table, a column per step (`wide`) or a row per step.
fn render(flows: &[Flow], table: &[TableStep], wide: bool) -> comfy_table::Table {
    let dispatched = |s: &TableStep| {
        s.dispatched
            .map_or_else(|| "-".to_string(), |i| flows[i].name.clone())
    };
    let ndt_label = |f: &Flow| format!("ndt_{}", f.name);
    if wide {
        let mut header = vec!["t".to_string()];
        header.extend(table.iter().map(|s| s.t.as_ps().to_string()));
        let mut t = output::table(header);
        for (i, f) in flows.iter().enumerate() {
            let mut row = vec![ndt_label(f)];
            row.extend(table.iter().map(|s| s.ndt[i].as_ps().to_string()));
            t.add_row(row);
        }
        let mut row = vec!["dispatched".to_string()];
        row.extend(table.iter().map(dispatched));
        t.add_row(row);
        output::align_numbers(&mut t, 1);
        t
    } else {
        let mut header = vec!["t".to_string()];
        header.extend(flows.iter().map(ndt_label));
        header.push("dispatched".to_string());
        let mut t = output::table(header);
        for s in table {
            let mut row = vec![s.t.as_ps().to_string()];
            row.extend(s.ndt.iter().map(|n| n.as_ps().to_string()));
            row.push(dispatched(s));
            t.add_row(row);
        }
        output::align_numbers(&mut t, 0);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_parse_and_reject_bad_input() {
        assert_eq!(
            parse_flow(" A = 2 ").unwrap(),
            Flow {
                name: "A".into(),
                idt: 2
            }
        );
        for bad in ["A=x", "A", "=2", "A=0", "A=-1", "A=1.5"] {
            assert!(parse_flow(bad).is_err(), "{bad}");
        }
        let dup = parse_flows(&["A=2".into(), "A=3".into()]).unwrap_err();
        assert!(dup.to_string().contains("given twice"));
        assert!(parse_steps(Some("0")).is_err());
        assert!(parse_steps(Some("100001")).is_err());
        assert_eq!(parse_steps(None).unwrap(), 12);
    }
}
