//! The tables of checks every reproduction prints and reports: on the terminal, one
//! line per check (what, kind, role, published, measured, how it compares, verdict);
//! in the report, one column per field (numbers in full in the CSV), and where each
//! published value comes from with the notes.

use crate::check::{Check, Kind, Summary};

use super::{Cell, Table};

/// The checks as the terminal shows them: the measured value beside the published one,
/// the deviation or what decided an ordering, the verdict; the simulated value beside a
/// real one, and what a refusing mechanism refused, when any check has them.
pub fn checks_display(checks: &[&Check]) -> Table {
    let real = checks.iter().any(|c| c.simulated.is_some());
    let refusals = checks.iter().any(|c| c.refusals.is_some());
    let mut cols = vec!["experiment", "check", "kind", "role", "unit", "published"];
    if real {
        cols.push("simulated");
    }
    cols.extend(["measured", "deviation", "verdict"]);
    if refusals {
        cols.push("refused");
    }
    let mut t = Table::new("checks", "Published against measured", cols);
    for c in checks {
        let mut row: Vec<Cell> = vec![
            c.id.experiment.clone().into(),
            c.label.clone().into(),
            c.kind.name().into(),
            role_shown(c).into(),
            c.unit.name().into(),
            Cell::maybe(c.published.as_ref().map(|p| p.value)),
        ];
        if real {
            row.push(Cell::maybe(c.simulated));
        }
        row.extend([
            Cell::from(c.measured),
            c.deviation_text().into(),
            c.verdict.name().into(),
        ]);
        if refusals {
            row.push(c.refusals.map_or(Cell::Empty, |r| {
                Cell::Text(format!("{:.1} %", 100.0 * r.refused))
            }));
        }
        t.push(row);
    }
    t
}

/// A shown value has no role: nothing is claimed of it.
fn role_shown(c: &Check) -> &'static str {
    if c.kind == Kind::Shown {
        "—"
    } else {
        c.role.name()
    }
}

/// The columns of [`checks_table`] the report's page shows (the CSV and JSON have all).
const PAGE: &[&str] = &[
    "experiment",
    "label",
    "kind",
    "role",
    "mechanism",
    "unit",
    "published",
    "measured",
    "deviation",
    "interval",
    "margin",
    "verdict",
    "refused",
    "admitted load",
];

/// Every check, one column per field: the report's `checks.csv` and `checks.json`.
pub fn checks_table(checks: &[&Check]) -> Table {
    let mut t = Table::new(
        "checks",
        "Published against measured",
        [
            "experiment",
            "metric",
            "case",
            "flow",
            "reference",
            "at",
            "window",
            "label",
            "kind",
            "role",
            "mechanism",
            "unit",
            "mode",
            "published",
            "tolerance",
            "measured",
            "simulated",
            "deviation",
            "compared",
            "against",
            "interval",
            "margin",
            "differentiated",
            "verdict",
            "refused",
            "admitted load",
        ],
    );
    for c in checks {
        let cmp = c.comparison.as_ref();
        t.push([
            Cell::from(&c.id.experiment),
            Cell::from(&c.id.metric),
            Cell::from(c.id.case.clone()),
            Cell::from(c.id.flow.clone()),
            Cell::from(c.id.reference.clone()),
            Cell::from(c.id.at.clone()),
            Cell::from(c.id.window.clone()),
            Cell::from(&c.label),
            Cell::from(c.kind.name()),
            Cell::from(role_shown(c)),
            c.mechanism.map_or(Cell::Empty, |m| m.name().into()),
            Cell::from(c.unit.name()),
            Cell::from(c.mode.name()),
            Cell::maybe(c.published.as_ref().map(|p| p.value)),
            Cell::maybe(c.mode.tolerance()),
            Cell::from(c.measured),
            Cell::maybe(c.simulated),
            if c.published.is_some() {
                Cell::fixed(c.deviation, 4)
            } else {
                Cell::Empty
            },
            Cell::maybe(cmp.map(|x| x.value)),
            Cell::maybe(cmp.map(|x| x.reference)),
            Cell::maybe(cmp.and_then(|x| x.interval)),
            Cell::maybe(cmp.and_then(|x| x.margin)),
            c.differentiated.map_or(Cell::Empty, Cell::from),
            Cell::from(c.verdict.name()),
            Cell::maybe(c.refusals.map(|r| r.refused)),
            Cell::maybe(c.refusals.map(|r| r.admitted_load)),
        ]);
    }
    t.page_columns(PAGE);
    t
}

/// Where every published value comes from, which cases ran identically, and the notes.
pub fn sources_table(checks: &[&Check]) -> Table {
    let mut t = Table::new(
        "sources",
        "Where each published value comes from",
        [
            "experiment",
            "label",
            "kind",
            "role",
            "source kind",
            "source",
            "identical runs",
            "note",
        ],
    );
    for c in checks {
        t.push([
            Cell::from(&c.id.experiment),
            Cell::from(&c.label),
            Cell::from(c.kind.name()),
            Cell::from(role_shown(c)),
            c.published
                .as_ref()
                .map_or(Cell::Empty, |p| p.source.kind().into()),
            c.published
                .as_ref()
                .map_or(Cell::Empty, |p| p.source.text().into()),
            Cell::from(c.comparison.as_ref().and_then(|x| x.identical.clone())),
            Cell::from(c.note.clone()),
        ]);
    }
    t
}

/// The summary of `checks` and the sentence that says what its kinds mean.
pub fn summary_paragraphs(summary: &Summary) -> Vec<String> {
    vec![
        format!("{summary}."),
        "A value is a number the paper prints, checked two-sided (10 %, ratios 3 %); a bound \
         is one the paper states, checked one-sided; an ordering (the paper says one case \
         beats another) passes only when the difference exceeds the runs' own 95 % \
         confidence interval or the stated margin, and is not differentiated otherwise — \
         neither a pass nor a miss; shown values carry no claim. A prediction is a value \
         nothing was tuned to, a fit one the model was tuned to, an identity one that holds \
         by construction."
            .into(),
    ]
}
