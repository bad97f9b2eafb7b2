//! The tables every reproduction prints and reports (`reproduce gulati`, `reproduce
//! nagar`): each check against its published value, and where each published value
//! comes from with the note on a miss.

use qos_sim::report::check::Check;
use qos_sim::report::Table;

/// The checks as the terminal shows them.
pub fn checks_table(checks: &[&Check]) -> Table {
    let mut t = Table::new(
        "checks",
        "Published against simulated",
        [
            "experiment",
            "metric",
            "kind",
            "unit",
            "published",
            "simulated",
            "deviation",
            "ok",
        ],
    );
    for c in checks {
        t.push([
            c.id.experiment.clone(),
            c.label.clone(),
            c.kind(),
            c.unit.to_string(),
            c.published
                .as_ref()
                .map_or("—".into(), |p| qos_sim::report::check::number(p.value)),
            qos_sim::report::check::number(c.measured),
            c.deviation_text(),
            c.verdict().into(),
        ]);
    }
    t
}

/// Where every published value comes from, and the notes on misses.
pub fn sources_table(checks: &[&Check]) -> Table {
    let mut t = Table::new(
        "sources",
        "Where each published value comes from",
        ["experiment", "metric", "kind", "source", "note"],
    );
    for c in checks {
        t.push([
            c.id.experiment.clone(),
            c.label.clone(),
            c.kind(),
            c.published
                .as_ref()
                .map_or("—".into(), |p| p.source.to_string()),
            c.note.clone().unwrap_or_default(),
        ]);
    }
    t
}
