//! The rate-control dispatch table for a set of flows (`clusterqos schedule`; thesis
//! §3.2.2, Fig 3.3, Table 3.1).
//!
//! Every flow is always backlogged from t = 0 and the NIC makes one decision per time
//! unit T (IDTs are integers in units of T, as in the thesis, which normalises them to
//! T). With no flows given they are A (IDT 2) and B (IDT 3) over 12 steps: thesis
//! Table 3.1. The table has a row per quantity (t, each flow's NDT before the decision,
//! the flow dispatched) and a column per step; runs longer than [`WIDE_TABLE_STEPS`]
//! steps have a row per step instead. The scheduler is
//! [`qos_core::sched::rate::dispatch_table`].

use crate::report::Table;
use qos_core::sched::rate::{dispatch_table, summarize, DispatchSummary, TableStep};
use qos_core::units::Duration;
use serde::Serialize;

/// Longest run shown with a column per step.
pub const WIDE_TABLE_STEPS: u64 = 24;
/// Most steps accepted (the table is kept in memory).
pub const MAX_STEPS: u64 = 100_000;
/// Most flows accepted.
pub const MAX_FLOWS: usize = 64;

/// A flow given as `NAME=IDT` that cannot be used, or a step count out of range (the
/// message names the flag and the value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(String);

/// A validated flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// Its name.
    pub name: String,
    /// Its inter-packet dispatch time, in time units.
    pub idt: u64,
}

fn bad<T>(message: String) -> Result<T, ScheduleError> {
    Err(ScheduleError(message))
}

/// Parses `NAME=IDT`.
pub fn parse_flow(text: &str) -> Result<Flow, ScheduleError> {
    let Some((name, idt)) = text.split_once('=') else {
        return bad(format!(
            "invalid --flow '{text}': expected NAME=IDT, e.g. A=2"
        ));
    };
    let name = name.trim();
    if name.is_empty() {
        return bad(format!(
            "invalid --flow '{text}': the flow needs a name, e.g. A=2"
        ));
    }
    let idt: u64 = match idt.trim().parse() {
        Ok(v) if v > 0 => v,
        _ => {
            return bad(format!(
                "invalid --flow '{text}': IDT must be a positive integer number of time \
                 units (IDT >= T, thesis §3.2.2)"
            ))
        }
    };
    Ok(Flow {
        name: name.to_string(),
        idt,
    })
}

/// Parses the number of steps (default 12).
pub fn parse_steps(text: Option<&str>) -> Result<u64, ScheduleError> {
    let Some(text) = text else {
        return Ok(12);
    };
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_STEPS).contains(&n) => Ok(n),
        _ => bad(format!(
            "invalid --steps '{text}': expected an integer from 1 to {MAX_STEPS}"
        )),
    }
}

/// Parses every `NAME=IDT` (none: A=2 and B=3); names must differ.
pub fn parse_flows(texts: &[String]) -> Result<Vec<Flow>, ScheduleError> {
    if texts.is_empty() {
        let flow = |name: &str, idt| Flow {
            name: name.into(),
            idt,
        };
        return Ok(vec![flow("A", 2), flow("B", 3)]);
    }
    if texts.len() > MAX_FLOWS {
        return bad(format!(
            "too many flows: {} given, at most {MAX_FLOWS}",
            texts.len()
        ));
    }
    let mut flows: Vec<Flow> = Vec::with_capacity(texts.len());
    for text in texts {
        let flow = parse_flow(text)?;
        if flows.iter().any(|f| f.name == flow.name) {
            return bad(format!(
                "invalid --flow '{text}': flow '{}' is given twice",
                flow.name
            ));
        }
        flows.push(flow);
    }
    Ok(flows)
}

/// The flows' dispatch table over a number of steps.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The flows, in the order given.
    pub flows: Vec<Flow>,
    /// Decisions made.
    pub steps: u64,
    /// Each decision.
    pub table: Vec<TableStep>,
    /// Packets per flow, their ratio against 1/IDT, the demand.
    pub summary: DispatchSummary,
}

/// One flow in the JSON form.
#[derive(Debug, Serialize)]
pub struct JsonFlow<'a> {
    name: &'a str,
    idt: u64,
    dispatched: u64,
}

/// One decision in the JSON form.
#[derive(Debug, Serialize)]
pub struct JsonStep<'a> {
    t: u64,
    /// NDT of each flow before the decision, in the order of `flows`.
    ndt: Vec<u64>,
    dispatched: Option<&'a str>,
}

/// The JSON form of a schedule.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    scheduler: &'static str,
    flows: Vec<JsonFlow<'a>>,
    steps: Vec<JsonStep<'a>>,
    ratio: &'a str,
    expected_ratio: Option<&'a str>,
    /// Sum of 1/IDT: packets asked for per time unit (at most 1 can be sent).
    demand: f64,
}

impl Schedule {
    /// The flows `NAME=IDT` (default A=2, B=3) over `steps` decisions (default 12).
    pub fn new(flows: &[String], steps: Option<&str>) -> Result<Schedule, ScheduleError> {
        let flows = parse_flows(flows)?;
        let steps = parse_steps(steps)?;
        let idts: Vec<Duration> = flows.iter().map(|f| Duration::from_ps(f.idt)).collect();
        let table = dispatch_table(&idts, Duration::from_ps(1), steps);
        let summary = summarize(&flows.iter().map(|f| f.idt).collect::<Vec<_>>(), &table);
        Ok(Schedule {
            flows,
            steps,
            table,
            summary,
        })
    }

    /// The JSON form.
    pub fn report(&self) -> Report<'_> {
        Report {
            scheduler: "rate-control",
            flows: self
                .flows
                .iter()
                .zip(&self.summary.counts)
                .map(|(f, &dispatched)| JsonFlow {
                    name: &f.name,
                    idt: f.idt,
                    dispatched,
                })
                .collect(),
            steps: self
                .table
                .iter()
                .map(|s| JsonStep {
                    t: s.t.as_ps(),
                    ndt: s.ndt.iter().map(|t| t.as_ps()).collect(),
                    dispatched: s.dispatched.map(|i| self.flows[i].name.as_str()),
                })
                .collect(),
            ratio: &self.summary.ratio,
            expected_ratio: self.summary.expected_ratio.as_deref(),
            demand: self.summary.demand,
        }
    }

    /// Whether the table has a column per step (else a row per step).
    pub fn wide(&self) -> bool {
        self.steps <= WIDE_TABLE_STEPS
    }

    /// What the text form says above the table.
    pub fn heading(&self) -> String {
        let described: Vec<String> = self
            .flows
            .iter()
            .map(|f| format!("{} (IDT {})", f.name, f.idt))
            .collect();
        format!(
            "Rate control (thesis §3.2.2): flows {}, one decision per time unit, {} steps.\n\
             NDT values are shown before each decision; '-' means nothing was due.",
            described.join(", "),
            self.steps
        )
    }

    /// The table: a column per step ([`Schedule::wide`]) or a row per step.
    pub fn to_table(&self) -> Table {
        let dispatched = |s: &TableStep| {
            s.dispatched
                .map_or_else(|| "-".to_string(), |i| self.flows[i].name.clone())
        };
        let ndt_label = |f: &Flow| format!("ndt_{}", f.name);
        let mut header = vec!["t".to_string()];
        if self.wide() {
            header.extend(self.table.iter().map(|s| s.t.as_ps().to_string()));
            let mut t = Table::new("schedule", "Dispatch table", header);
            for (i, f) in self.flows.iter().enumerate() {
                let mut row = vec![ndt_label(f)];
                row.extend(self.table.iter().map(|s| s.ndt[i].as_ps().to_string()));
                t.push(row);
            }
            let mut row = vec!["dispatched".to_string()];
            row.extend(self.table.iter().map(dispatched));
            t.push(row);
            t
        } else {
            header.extend(self.flows.iter().map(ndt_label));
            header.push("dispatched".to_string());
            let mut t = Table::new("schedule", "Dispatch table", header);
            for s in &self.table {
                let mut row = vec![s.t.as_ps().to_string()];
                row.extend(s.ndt.iter().map(|n| n.as_ps().to_string()));
                row.push(dispatched(s));
                t.push(row);
            }
            t
        }
    }

    /// What the text form says under the table: packets per flow and their ratio
    /// against 1/IDT, and a note when the flows ask for more than one packet per unit.
    pub fn conclusion(&self) -> String {
        let sent: Vec<String> = self
            .flows
            .iter()
            .zip(&self.summary.counts)
            .map(|(f, c)| format!("{} {}", f.name, c))
            .collect();
        let names: Vec<&str> = self.flows.iter().map(|f| f.name.as_str()).collect();
        let expected = self
            .summary
            .expected_ratio
            .as_deref()
            .unwrap_or("too large to print");
        let mut s = format!(
            "Packets dispatched: {}. Ratio {} = {} (1/IDT gives {expected}).",
            sent.join(", "),
            names.join(":"),
            self.summary.ratio
        );
        let demand = self.summary.demand;
        if demand > 1.0 + 1e-9 {
            s += &format!(
                "\nNote: the flows ask for {demand:.3} packets per time unit (sum of 1/IDT) \
                 but one can be sent, so rates fall below 1/IDT; the thesis's manager admits \
                 only sets with sum <= 1."
            );
        }
        s
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

    #[test]
    fn the_default_is_thesis_table_3_1() {
        let s = Schedule::new(&[], None).unwrap();
        assert!(s.wide());
        let t = s.to_table();
        // t, ndt_A, ndt_B rows plus dispatched; a column per step after the label.
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.columns.len(), 13);
        assert_eq!(
            t.shown_rows()[2][1..].join(" "),
            "A B A B A - A B A B A -",
            "thesis Table 3.1's dispatch row"
        );
        assert!(s
            .conclusion()
            .starts_with("Packets dispatched: A 6, B 4. Ratio A:B = 3:2"));
        let long = Schedule::new(&["A=1".into(), "B=1".into()], Some("30")).unwrap();
        assert!(!long.wide());
        assert_eq!(long.to_table().rows.len(), 30);
        assert!(long.conclusion().contains("Note: the flows ask for 2.000"));
    }
}
