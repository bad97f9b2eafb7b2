//! The report writer used by every results command (`reproduce`, `run`, and the flit
//! network's latency-vs-load sweeps): a directory with `index.html`, one SVG plot per
//! figure, and CSV + JSON of every series and table (DESIGN.md, "Results").
//!
//! The API is general and knows nothing of the models: a [`Report`] is a title, free
//! text, [`Figure`]s made of named `(x, y)` [`Series`] with axis labels, and result
//! [`Table`]s. [`Report::write`] renders it; [`svg::render`] draws one figure on its own.
//!
//! Output is deterministic (no timestamps, fixed float formatting), so the same results
//! give byte-identical files.

pub mod check;
pub mod html;
pub mod svg;

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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
}

impl Series {
    /// A series drawn as a line with marked points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            style: Style::LinePoints,
        }
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
        }
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
                out.push_str(&format!("{},{},{}\n", csv_field(&s.name), num(x), num(y)));
            }
        }
        out
    }
}

/// A results table: named columns and rows of cells (already formatted text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// File stem of its CSV/JSON.
    pub id: String,
    /// Heading.
    pub title: String,
    /// Column names.
    pub columns: Vec<String>,
    /// Rows; each as long as `columns`.
    pub rows: Vec<Vec<String>>,
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
        }
    }
    /// Appends a row (padded or cut to the number of columns).
    pub fn push<I, S>(&mut self, row: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut r: Vec<String> = row.into_iter().map(Into::into).collect();
        r.resize(self.columns.len(), String::new());
        self.rows.push(r);
    }
    /// The table as CSV.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        let line = |cells: &[String]| {
            cells
                .iter()
                .map(|c| csv_field(c))
                .collect::<Vec<_>>()
                .join(",")
                + "\n"
        };
        out.push_str(&line(&self.columns));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
    /// The table as JSON: an array of objects keyed by column name.
    pub fn to_json_rows(&self) -> serde_json::Value {
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let mut m = serde_json::Map::new();
                for (c, v) in self.columns.iter().zip(r) {
                    m.insert(c.clone(), serde_json::Value::String(v.clone()));
                }
                serde_json::Value::Object(m)
            })
            .collect();
        serde_json::Value::Array(rows)
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

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be created or written.
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Two figures or tables share an id, or an id is not a safe file name.
    #[error("bad report item id '{0}': ids must be unique and use only letters, digits, '-', '_' or '.'")]
    BadId(String),
}

impl Report {
    /// An empty report with a title.
    pub fn new(title: impl Into<String>) -> Self {
        Report {
            title: title.into(),
            ..Report::default()
        }
    }

    /// Writes `index.html`, `report.json`, and per figure `<id>.svg`, `<id>.csv`,
    /// `<id>.json`, per table `<id>.csv`, `<id>.json` into `dir` (created if missing).
    /// Returns the paths written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
        self.check_ids()?;
        let mkdir = |p: &Path| {
            fs::create_dir_all(p).map_err(|source| ReportError::Io {
                path: p.to_path_buf(),
                source,
            })
        };
        mkdir(dir)?;
        let mut written = Vec::new();
        let mut put = |name: &str, text: &str| -> Result<(), ReportError> {
            let path = dir.join(name);
            fs::write(&path, text).map_err(|source| ReportError::Io {
                path: path.clone(),
                source,
            })?;
            written.push(path);
            Ok(())
        };
        for f in &self.figures {
            put(&format!("{}.svg", f.id), &svg::render(f))?;
            put(&format!("{}.csv", f.id), &f.to_csv())?;
            put(&format!("{}.json", f.id), &pretty(f))?;
        }
        for t in &self.tables {
            put(&format!("{}.csv", t.id), &t.to_csv())?;
            put(&format!("{}.json", t.id), &pretty(&t.to_json_rows()))?;
        }
        put("report.json", &pretty(self))?;
        put("index.html", &html::render(self))?;
        Ok(written)
    }

    fn check_ids(&self) -> Result<(), ReportError> {
        let mut seen = std::collections::BTreeSet::new();
        let ids = self
            .figures
            .iter()
            .map(|f| &f.id)
            .chain(self.tables.iter().map(|t| &t.id));
        for id in ids {
            let ok = !id.is_empty()
                && id != "index"
                && id != "report"
                && !id.starts_with('.')
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok || !seen.insert(id.clone()) {
                return Err(ReportError::BadId(id.clone()));
            }
        }
        Ok(())
    }
}

fn pretty<T: Serialize + ?Sized>(v: &T) -> String {
    // Serializing plain data (strings, finite or non-finite floats) cannot fail.
    serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".to_string()) + "\n"
}

/// Formats a number for CSV: shortest round-trip form, no exponent surprises.
pub(crate) fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        String::new()
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
        t.push(["a,b", "1"]);
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
        assert_eq!(tcsv, "metric,value\n\"a,b\",1\n");
        let html = fs::read_to_string(dir.path().join("index.html")).unwrap();
        assert!(html.contains("fig-1.svg") && html.contains("Two series &amp; a table."));
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
