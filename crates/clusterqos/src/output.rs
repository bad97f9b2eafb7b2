//! Rendering helpers shared by the subcommands: plain-text tables and JSON.

use comfy_table::{
    presets::UTF8_BORDERS_ONLY, CellAlignment, ColumnConstraint, ContentArrangement, Table, Width,
};
use serde::Serialize;
use unicode_width::UnicodeWidthStr;

/// Narrowest terminal a table is fitted to; a narrower reported width (0 from some CI
/// pseudo-terminals) is taken as unknown rather than squeezing every column to a letter.
const MIN_WIDTH: u16 = 20;

/// Longest word a column is kept wide enough for; a longer one (a path, a URL) may wrap.
const MAX_WORD: usize = 40;

/// The width tables are fitted to: `COLUMNS` when set, else the terminal's when stdout is
/// one; `None` (lines as long as they need) in a pipe or a log, or when the width
/// reported is below [`MIN_WIDTH`].
pub fn terminal_width() -> Option<u16> {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok());
    let width = columns.or_else(|| {
        std::io::IsTerminal::is_terminal(&std::io::stdout())
            .then(|| Table::new().width())
            .flatten()
    });
    width.filter(|&w| w >= MIN_WIDTH)
}

/// `rows` under `header` as a table with the project's look, numbers right-aligned from
/// column `first` on, fitted to `width` when given: cells wrap at spaces, never inside a
/// word (every column is at least as wide as its longest word, up to [`MAX_WORD`]), so a
/// table wider than the terminal runs past it rather than splitting "deviation" into
/// "deviati/on". Without a width nothing wraps.
pub fn render<I, S>(
    header: I,
    rows: impl IntoIterator<Item = Vec<String>>,
    first: usize,
    width: Option<u16>,
) -> String
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let header: Vec<String> = header.into_iter().map(Into::into).collect();
    let rows: Vec<Vec<String>> = rows.into_iter().collect();
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(header.clone());
    for row in &rows {
        t.add_row(row.clone());
    }
    align_numbers(&mut t, first);
    match width {
        Some(w) => {
            t.set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(w);
            let longest_word = |cell: &String| {
                cell.split_whitespace()
                    .map(UnicodeWidthStr::width)
                    .max()
                    .unwrap_or(0)
            };
            for (i, column) in t.column_iter_mut().enumerate() {
                let word = std::iter::once(&header[i])
                    .chain(rows.iter().filter_map(|r| r.get(i)))
                    .map(longest_word)
                    .max()
                    .unwrap_or(0)
                    .min(MAX_WORD);
                let padded = u16::try_from(word).unwrap_or(u16::MAX) + column.padding_width();
                column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(padded)));
            }
        }
        None => {
            t.set_content_arrangement(ContentArrangement::Disabled);
        }
    }
    t.to_string()
}

/// Right-aligns every column from `first` on (numbers read better that way).
fn align_numbers(t: &mut Table, first: usize) {
    let n = t.column_count();
    for i in first..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Prints `rows` under `header` ([`render`] at the [`terminal_width`]).
pub fn print_rows<I, S>(header: I, rows: impl IntoIterator<Item = Vec<String>>, first: usize)
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    println!("{}", render(header, rows, first, terminal_width()));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Vec<&'static str>, Vec<Vec<String>>) {
        let header = vec![
            "experiment",
            "metric",
            "kind",
            "unit",
            "published",
            "measured",
            "deviation",
            "ok",
        ];
        let row = |e: &str, m: &str| {
            [
                e,
                m,
                "prediction",
                "MB/s",
                "81.8",
                "80.2",
                "-2.0% (±10%)",
                "yes",
            ]
            .map(String::from)
            .to_vec()
        };
        let rows = vec![
            row(
                "idt-sweep",
                "knee of the bandwidth curve against the inter-packet dispatch time",
            ),
            row(
                "fig-5.5",
                "premium flow A bandwidth with three best-effort flows",
            ),
        ];
        (header, rows)
    }

    /// The words of `text` as the table shows them: borders and padding removed.
    fn words(text: &str) -> Vec<String> {
        text.lines()
            .flat_map(|l| l.split(|c: char| "│┆╭╮╰╯─┈═╞╡├┤┼".contains(c) || c.is_whitespace()))
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn at_80_columns_cells_wrap_between_words_never_inside_one() {
        let (header, rows) = sample();
        let text = render(header.clone(), rows.clone(), 4, Some(80));
        let shown = words(&text);
        for w in header.iter().map(|h| h.to_string()).chain(
            rows.iter()
                .flatten()
                .flat_map(|c| c.split_whitespace().map(String::from)),
        ) {
            assert!(shown.contains(&w), "{w:?} split or missing:\n{text}");
        }
    }

    #[test]
    fn a_table_whose_words_fit_is_fitted_to_the_width() {
        let (header, rows) = sample();
        // Short words: the longest of each column fit 78 columns together.
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|c| c.replace("best-effort", "BE"))
                    .collect()
            })
            .collect();
        let header: Vec<&str> = header.into_iter().filter(|h| *h != "experiment").collect();
        let rows: Vec<Vec<String>> = rows.into_iter().map(|r| r[1..].to_vec()).collect();
        for width in [78, 80, 100] {
            let text = render(header.clone(), rows.clone(), 3, Some(width));
            let widest = text.lines().map(UnicodeWidthStr::width).max().unwrap();
            assert!(widest <= usize::from(width), "{widest} > {width}:\n{text}");
        }
    }

    #[test]
    fn without_a_width_nothing_wraps() {
        let (header, rows) = sample();
        let text = render(header, rows, 4, None);
        // Header, separator, two rows, top and bottom borders.
        assert_eq!(text.lines().count(), 6, "{text}");
    }

    #[test]
    fn a_reported_width_of_zero_is_no_width() {
        // No other test reads or sets COLUMNS.
        std::env::set_var("COLUMNS", "0");
        assert_eq!(terminal_width(), None);
        std::env::set_var("COLUMNS", "100");
        assert_eq!(terminal_width(), Some(100));
        std::env::remove_var("COLUMNS");
    }
}
