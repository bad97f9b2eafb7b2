//! Writing a [`Report`] to its directory: `index.html` ([`super::html`]), `report.json`,
//! and per figure its SVG ([`super::svg`]), a PDF where a font allows ([`super::pdf`]),
//! CSV and JSON; per table CSV and JSON. The report's data types know nothing of their
//! files, so the drawing modules can use them without importing this one back.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{html, pdf, svg, Report, ReportError};

impl Report {
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
        let mut put = |name: &str, bytes: &[u8]| -> Result<(), ReportError> {
            let path = dir.join(name);
            fs::write(&path, bytes).map_err(|source| ReportError::Io {
                path: path.clone(),
                source,
            })?;
            written.push(path);
            Ok(())
        };
        // PDF beside each SVG where this machine has a font for its text; the index page
        // says why when it has none.
        let pdf = pdf::available();
        for f in &self.figures {
            put(&format!("{}.svg", f.id), svg::render(f).as_bytes())?;
            if pdf.is_ok() {
                if let Ok(bytes) = pdf::render(f) {
                    put(&format!("{}.pdf", f.id), &bytes)?;
                }
            }
            put(&format!("{}.csv", f.id), f.to_csv().as_bytes())?;
            put(&format!("{}.json", f.id), pretty(f).as_bytes())?;
        }
        for t in &self.tables {
            put(&format!("{}.csv", t.id), t.to_csv().as_bytes())?;
            put(
                &format!("{}.json", t.id),
                pretty(&t.to_json_rows()).as_bytes(),
            )?;
        }
        put("report.json", pretty(self).as_bytes())?;
        put("index.html", html::render(self, pdf.err()).as_bytes())?;
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
