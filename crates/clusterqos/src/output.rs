//! Rendering helpers shared by the subcommands: plain-text tables and JSON.

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, ContentArrangement, Table};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
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

/// Prints a library's table (`qos_sim::report::Table`) as [`print_rows`] does.
pub fn print_table(table: &qos_sim::report::Table, first: usize) {
    print_rows(table.columns.clone(), table.rows.clone(), first);
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

/// An error as the one line the command prints: its message and each cause the message
/// does not already contain, joined by ": ". Errors that quote their cause in their own
/// message (`cannot read F: {source}`) and also expose it as their source would
/// otherwise print it twice; line breaks inside a message become spaces.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// A progress bar of `len` steps drawn with `template` on stderr, hidden with `--json`
/// or when stderr is not a terminal.
pub fn bar(len: u64, json: bool, template: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}
