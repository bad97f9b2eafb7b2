//! The report writer used by every results command (`reproduce`, `run`, `sweep`): a
//! directory with `index.html`, one SVG plot per figure, and CSV + JSON of every series
//! and table (DESIGN.md, "Results").
//!
//! The API is general and knows nothing of the models: a [`Report`] is a title, free
//! text, [`Figure`]s made of named `(x, y)` [`Series`] with axis labels, and result
//! [`Table`]s whose cells are numbers or words ([`Cell`]). [`Report::write`] renders it.
//! Drawing is behind one seam, [`svg::render`]: a figure's data in, an SVG document out.
//! CSV holds numbers in full precision (as the JSON does) and plain words, one column
//! per field; tables round numbers only where they are shown.
//!
//! Output is deterministic (no timestamps, fixed float formatting), so the same results
//! give byte-identical files.

pub mod audit;
pub mod checks;
pub mod draw;
pub mod html;
pub mod pdf;
pub mod plot;
pub mod svg;
mod write;

use serde::{Deserialize, Serialize};

pub use crate::error::ReportError;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Style {
    /// Points joined by a line, each point marked.
    #[default]
    LinePoints,
    /// Points joined by a line.
    Line,
    /// Marked points only.
    Scatter,
    /// A step function: each y holds until the next x (time series of rates).
    Step,
}

/// How an axis maps values to positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scale {
    /// Linear.
    #[default]
    Linear,
    /// Logarithmic, base 2 (message sizes 4 B … 64 KB).
    Log2,
    /// Logarithmic, base 10.
    Log10,
}

/// One named line or point set of a figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// The points, in drawing order.
    pub points: Vec<(f64, f64)>,
    /// How to draw it.
    #[serde(default)]
    pub style: Style,
    /// Series of one group share a colour (a flow's measured and published values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Values quoted from the paper, not measured here: hollow markers, drawn beside
    /// (categorical axis) or around (numeric axis) the measured ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub published: bool,
}

impl Series {
    /// A series drawn as a line with marked points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            style: Style::LinePoints,
            group: None,
            published: false,
        }
    }
    /// Values quoted from a paper, drawn as hollow markers.
    pub fn published(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            style: Style::Scatter,
            published: true,
            ..Series::new(name, points)
        }
    }
    /// The same series in colour group `group`.
    pub fn in_group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }
    /// The same series drawn in `style`.
    pub fn with_style(mut self, style: Style) -> Self {
        self.style = style;
        self
    }
}

/// One plot: axes with labels and scales, and its series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// File stem of its SVG/CSV/JSON (letters, digits, '-', '_', '.').
    pub id: String,
    /// Title printed above the plot (e.g. "Fig 5.3: Effect of IDT on the achieved bandwidth").
    pub title: String,
    /// Label of the x axis, with its unit.
    pub x_label: String,
    /// Label of the y axis, with its unit.
    pub y_label: String,
    /// The series.
    pub series: Vec<Series>,
    /// x scale.
    #[serde(default)]
    pub x_scale: Scale,
    /// y scale.
    #[serde(default)]
    pub y_scale: Scale,
    /// Fixed x range; computed from the data when `None`.
    #[serde(default)]
    pub x_range: Option<(f64, f64)>,
    /// Fixed y range; computed from the data (including 0 for linear axes) when `None`.
    #[serde(default)]
    pub y_range: Option<(f64, f64)>,
    /// A sentence under the plot.
    #[serde(default)]
    pub caption: String,
    /// Names of the x axis's categories, when it has categories rather than numbers:
    /// point x = k (1-based) belongs to category k, shown by its name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub x_categories: Vec<String>,
}

impl Figure {
    /// A figure with linear axes and no series yet.
    pub fn new(
        id: impl Into<String>,
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        Figure {
            id: id.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            x_range: None,
            y_range: None,
            caption: String::new(),
            x_categories: Vec::new(),
        }
    }
    /// Makes the x axis categorical: point x = k (1-based) is category `names[k-1]`.
    pub fn with_categories<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.x_categories = names.into_iter().map(Into::into).collect();
        self
    }
    /// Adds a series.
    pub fn with_series(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }
    /// Sets the x scale.
    pub fn with_x_scale(mut self, s: Scale) -> Self {
        self.x_scale = s;
        self
    }
    /// Sets the caption.
    pub fn with_caption(mut self, c: impl Into<String>) -> Self {
        self.caption = c.into();
        self
    }
    /// The figure's data as CSV: `series,x,y`, one row per point.
    pub fn to_csv(&self) -> String {
        let mut out = format!(
            "series,{},{}\n",
            csv_field(&self.x_label),
            csv_field(&self.y_label)
        );
        for s in &self.series {
            for &(x, y) in &s.points {
                // A categorical x is written as its category's name.
                let x = match self.category(x) {
                    Some(name) => csv_field(name),
                    None => num(x),
                };
                out.push_str(&format!("{},{x},{}\n", csv_field(&s.name), num(y)));
            }
        }
        out
    }
    /// The name of category `x` (1-based) of a categorical figure.
    pub fn category(&self, x: f64) -> Option<&str> {
        let k = x.round();
        (k >= 1.0 && (x - k).abs() < 1e-9)
            .then(|| self.x_categories.get(k as usize - 1))
            .flatten()
            .map(String::as_str)
    }
}

/// One cell of a table: a number (rounded where it is shown, in full in CSV and JSON),
/// a word or phrase, or nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A number and how many decimals to show (None: [`crate::check::number`]'s rule).
    Number(f64, Option<u8>),
    /// Text: a name, a label, a plain word.
    Text(String),
    /// No value.
    Empty,
}

impl Cell {
    /// A number shown with `digits` decimals.
    pub fn fixed(v: f64, digits: u8) -> Cell {
        Cell::Number(v, Some(digits))
    }

    /// A number, or nothing.
    pub fn maybe(v: Option<f64>) -> Cell {
        v.map_or(Cell::Empty, Cell::from)
    }

    /// The same cell, a number shown with `digits` decimals.
    pub fn with_digits(self, digits: u8) -> Cell {
        match self {
            Cell::Number(v, _) => Cell::Number(v, Some(digits)),
            c => c,
        }
    }

    /// Whether it holds a number.
    pub fn is_number(&self) -> bool {
        matches!(self, Cell::Number(..))
    }

    /// The cell as a table shows it ("—" for nothing, "inf" beyond a sweep).
    pub fn shown(&self) -> String {
        match self {
            Cell::Number(v, _) if v.is_nan() => "—".into(),
            Cell::Number(v, _) if v.is_infinite() => format!("{v}"),
            Cell::Number(v, Some(d)) => format!("{v:.*}", *d as usize),
            Cell::Number(v, None) => crate::check::number(*v),
            Cell::Text(t) => t.clone(),
            Cell::Empty => "—".into(),
        }
    }

    /// The cell as CSV holds it: a number in full (shortest exact form; "inf", "-inf";
    /// nothing for NaN), text as written, nothing for nothing.
    pub fn csv(&self) -> String {
        match self {
            Cell::Number(v, _) => num(*v),
            Cell::Text(t) => csv_field(t),
            Cell::Empty => String::new(),
        }
    }

    /// The cell as JSON holds it: a number (null for NaN or infinity), a string, null.
    pub fn json(&self) -> serde_json::Value {
        match self {
            Cell::Number(v, _) => serde_json::Number::from_f64(*v)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Cell::Text(t) => serde_json::Value::String(t.clone()),
            Cell::Empty => serde_json::Value::Null,
        }
    }
}

impl From<f64> for Cell {
    fn from(v: f64) -> Cell {
        Cell::Number(v, None)
    }
}

impl From<u64> for Cell {
    fn from(v: u64) -> Cell {
        Cell::Number(v as f64, Some(0))
    }
}

impl From<usize> for Cell {
    fn from(v: usize) -> Cell {
        Cell::Number(v as f64, Some(0))
    }
}

impl From<u32> for Cell {
    fn from(v: u32) -> Cell {
        Cell::Number(f64::from(v), Some(0))
    }
}

impl From<bool> for Cell {
    fn from(v: bool) -> Cell {
        Cell::Text(if v { "yes" } else { "no" }.into())
    }
}

impl From<String> for Cell {
    fn from(t: String) -> Cell {
        Cell::Text(t)
    }
}

impl From<&String> for Cell {
    fn from(t: &String) -> Cell {
        Cell::Text(t.clone())
    }
}

impl From<&str> for Cell {
    fn from(t: &str) -> Cell {
        Cell::Text(t.to_string())
    }
}

impl From<Option<String>> for Cell {
    fn from(t: Option<String>) -> Cell {
        t.map_or(Cell::Empty, Cell::Text)
    }
}

impl Serialize for Cell {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Cell {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Cell, D::Error> {
        Ok(match serde_json::Value::deserialize(d)? {
            serde_json::Value::Number(n) => Cell::from(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(t) => Cell::Text(t),
            serde_json::Value::Bool(b) => Cell::from(b),
            _ => Cell::Empty,
        })
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

/// A results table: named columns and rows of [`Cell`]s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// File stem of its CSV/JSON.
    pub id: String,
    /// Heading.
    pub title: String,
    /// Column names (with their units: "latency (us)").
    pub columns: Vec<String>,
    /// Rows; each as long as `columns`.
    pub rows: Vec<Vec<Cell>>,
    /// The columns the report's page shows, by index (None: all); CSV and JSON hold
    /// every column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<Vec<usize>>,
}

impl Table {
    /// A table with the given columns and no rows.
    pub fn new<I, S>(id: impl Into<String>, title: impl Into<String>, columns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Table {
            id: id.into(),
            title: title.into(),
            columns: columns.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            page: None,
        }
    }
    /// Shows only the columns named `names` on the report's page.
    pub fn page_columns(&mut self, names: &[&str]) {
        self.page = Some(
            self.columns
                .iter()
                .enumerate()
                .filter(|(_, c)| names.contains(&c.as_str()))
                .map(|(i, _)| i)
                .collect(),
        );
    }
    /// The indices of the columns the page shows.
    pub fn page_indices(&self) -> Vec<usize> {
        self.page
            .clone()
            .unwrap_or_else(|| (0..self.columns.len()).collect())
    }
    /// Appends a row (padded or cut to the number of columns).
    pub fn push<I, S>(&mut self, row: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<Cell>,
    {
        let mut r: Vec<Cell> = row.into_iter().map(Into::into).collect();
        r.resize(self.columns.len(), Cell::Empty);
        self.rows.push(r);
    }
    /// The table as CSV: numbers in full precision, words as written.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        out.push_str(
            &(self
                .columns
                .iter()
                .map(|c| csv_field(c))
                .collect::<Vec<_>>()
                .join(",")
                + "\n"),
        );
        for r in &self.rows {
            out.push_str(&(r.iter().map(Cell::csv).collect::<Vec<_>>().join(",") + "\n"));
        }
        out
    }
    /// The table as JSON: an array of objects keyed by column name, numbers as numbers.
    pub fn to_json_rows(&self) -> serde_json::Value {
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let mut m = serde_json::Map::new();
                for (c, v) in self.columns.iter().zip(r) {
                    m.insert(c.clone(), v.json());
                }
                serde_json::Value::Object(m)
            })
            .collect();
        serde_json::Value::Array(rows)
    }
    /// The rows as a table shows them.
    pub fn shown_rows(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|r| r.iter().map(Cell::shown).collect())
            .collect()
    }
}

/// A whole report: what `index.html` shows.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Report {
    /// Page title.
    pub title: String,
    /// Paragraphs printed under the title (plain text).
    pub summary: Vec<String>,
    /// Tables, shown first.
    pub tables: Vec<Table>,
    /// Figures, shown after the tables.
    pub figures: Vec<Figure>,
    /// Paragraphs printed at the end (assumptions, notes).
    pub notes: Vec<String>,
}

impl Report {
    /// An empty report with a title.
    pub fn new(title: impl Into<String>) -> Self {
        Report {
            title: title.into(),
            ..Report::default()
        }
    }
}

/// Formats a number for CSV: shortest round-trip form ("inf" and "-inf" as Python's
/// `float()` reads them; nothing for NaN).
pub(crate) fn num(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else {
        format!("{v}")
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Escapes text for HTML and SVG.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn sample() -> Report {
        let mut r = Report::new("Sample");
        r.summary.push("Two series & a table.".into());
        r.figures.push(
            Figure::new(
                "fig-1",
                "Bandwidth vs IDT",
                "IDT (ticks)",
                "Bandwidth (MB/s)",
            )
            .with_series(Series::new(
                "GM",
                vec![(0.0, 81.8), (96.0, 81.8), (192.0, 42.0)],
            ))
            .with_series(
                Series::new("MPI", vec![(0.0, 50.0), (192.0, 40.0)]).with_style(Style::Scatter),
            ),
        );
        let mut t = Table::new("checks", "Checks", ["metric", "value"]);
        t.push([Cell::from("a,b"), Cell::fixed(1.0 / 3.0, 2)]);
        r.tables.push(t);
        r
    }

    #[test]
    fn write_produces_html_svg_csv_and_json_for_every_item() {
        let dir = tempfile::tempdir().unwrap();
        let files = sample().write(dir.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for n in [
            "fig-1.svg",
            "fig-1.csv",
            "fig-1.json",
            "checks.csv",
            "checks.json",
            "report.json",
            "index.html",
        ] {
            assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
        }
        let csv = fs::read_to_string(dir.path().join("fig-1.csv")).unwrap();
        assert!(csv.starts_with("series,IDT (ticks),Bandwidth (MB/s)\nGM,0,81.8\n"));
        let tcsv = fs::read_to_string(dir.path().join("checks.csv")).unwrap();
        assert_eq!(tcsv, "metric,value\n\"a,b\",0.3333333333333333\n");
        assert_eq!(t_shown(&sample()), "0.33");
        let html = fs::read_to_string(dir.path().join("index.html")).unwrap();
        assert!(html.contains("fig-1.svg") && html.contains("Two series &amp; a table."));
    }

    fn t_shown(r: &Report) -> String {
        r.tables[0].shown_rows()[0][1].clone()
    }

    #[test]
    fn same_report_gives_byte_identical_files() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        sample().write(a.path()).unwrap();
        sample().write(b.path()).unwrap();
        for n in ["index.html", "fig-1.svg", "report.json"] {
            assert_eq!(
                fs::read(a.path().join(n)).unwrap(),
                fs::read(b.path().join(n)).unwrap()
            );
        }
    }

    #[test]
    fn unsafe_or_duplicate_ids_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = sample();
        r.figures[0].id = "../x".into();
        assert!(matches!(r.write(dir.path()), Err(ReportError::BadId(_))));
        let mut r = sample();
        r.tables[0].id = "fig-1".into();
        assert!(matches!(r.write(dir.path()), Err(ReportError::BadId(_))));
    }
}
