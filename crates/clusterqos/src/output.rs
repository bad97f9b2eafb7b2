//! Rendering helpers shared by the subcommands: plain-text tables and JSON.

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, ContentArrangement, Table};
use serde::Serialize;

/// A new table with the project's look and the given header.
pub fn table<I, S>(header: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: Into<Cell>,
{
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    t
}

/// Right-aligns every column from `first` on (numbers read better that way).
pub fn align_numbers(t: &mut Table, first: usize) {
    let n = t.column_count();
    for i in first..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Prints `rows` under `header` with the project's look, numbers right-aligned from
/// column `first` on.
pub fn print_rows<I, S>(header: I, rows: impl IntoIterator<Item = Vec<String>>, first: usize)
where
    I: IntoIterator<Item = S>,
    S: Into<Cell>,
{
    let mut t = table(header);
    for row in rows {
        t.add_row(row);
    }
    align_numbers(&mut t, first);
    println!("{t}");
}

/// Prints a library's table (`qos_experiments::report::Table`) as [`print_rows`] does:
/// numbers at the precision the table shows them.
pub fn print_table(table: &qos_experiments::report::Table, first: usize) {
    print_rows(table.columns.clone(), table.shown_rows(), first);
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Writes `text` to stdout; a closed pipe (`| head`) ends the output quietly.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write the output"))
        }
        _ => Ok(()),
    }
}

/// The error's own message only: library errors that already contain their causes
/// (`file:line: ...`) would otherwise have them repeated by `{:#}`.
pub fn one_line(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}
