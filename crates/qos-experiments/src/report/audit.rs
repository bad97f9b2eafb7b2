//! A program's reading of a report directory's data files, as a check: every CSV parses
//! (RFC 4180 quoting), each column holds numbers or words and never both, no word is a
//! number dressed for a reader ("+5.9% (±10%)", "bound ≤ 1.000", "12/40 (30.0 %)"), and
//! every number of a table's CSV is exactly its JSON's (full precision). The tests of
//! every report writer run it; it says what is wrong, file and cell.

use std::path::Path;

/// The fields of every record of CSV `text` (quotes, doubled quotes and line breaks
/// inside quotes as RFC 4180 has them).
pub fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, '\r') => {}
            (false, c) => field.push(c),
        }
    }
    if quoted {
        return Err("a quoted field is not closed".into());
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    Ok(rows)
}

/// Whether a word is a number dressed for a reader rather than a plain word: a cell
/// that starts as a number and goes on with a percent, a ± or a bound sign
/// ("+5.9% (±10%)", "30.0 %"), a fraction of counts ("12/40 (30.0 %)"), or a bound
/// ("bound ≤ 1.000"). Prose (a note) may use the signs: it starts with a word.
fn dressed(cell: &str) -> bool {
    let cell = cell.trim();
    if cell.starts_with("bound ≤") || cell.starts_with("bound ≥") {
        return true;
    }
    let numeric_start = cell
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.'));
    let fraction = cell.split_once('/').is_some_and(|(a, b)| {
        a.parse::<u64>().is_ok()
            && b.split(' ')
                .next()
                .is_some_and(|x| x.parse::<u64>().is_ok())
    });
    numeric_start && (cell.contains(['%', '±', '≤', '≥']) || fraction)
}

/// What is wrong with the CSV files of report directory `dir` (nothing: empty).
pub fn audit(dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![format!("{}: not a directory", dir.display())];
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();
    if files.is_empty() {
        problems.push(format!("{}: no CSV files", dir.display()));
    }
    for path in files {
        let name = path.display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        let rows = match parse_csv(&text) {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        let Some((header, body)) = rows.split_first() else {
            problems.push(format!("{name}: empty"));
            continue;
        };
        for (i, r) in body.iter().enumerate() {
            if r.len() != header.len() {
                problems.push(format!(
                    "{name}: row {} has {} fields, the header {}",
                    i + 2,
                    r.len(),
                    header.len()
                ));
            }
        }
        for (c, col) in header.iter().enumerate() {
            let cells: Vec<&str> = body
                .iter()
                .filter_map(|r| r.get(c).map(String::as_str))
                .filter(|x| !x.is_empty())
                .collect();
            let numbers = cells.iter().filter(|x| x.parse::<f64>().is_ok()).count();
            if numbers > 0 && numbers < cells.len() {
                let word = cells.iter().find(|x| x.parse::<f64>().is_err());
                problems.push(format!(
                    "{name}: column '{col}' mixes numbers and words ({word:?})"
                ));
            }
            if let Some(d) = cells.iter().find(|x| dressed(x)) {
                problems.push(format!(
                    "{name}: column '{col}' holds {d:?}, a number dressed as text"
                ));
            }
        }
        // A table's CSV beside its JSON rows: the same numbers, in full.
        let json = path.with_extension("json");
        let rows_json: Option<Vec<serde_json::Map<String, serde_json::Value>>> =
            std::fs::read_to_string(&json)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
        if let Some(objs) = rows_json {
            for (r, obj) in body.iter().zip(&objs) {
                for (c, col) in header.iter().enumerate() {
                    let (Some(cell), Some(serde_json::Value::Number(n))) = (r.get(c), obj.get(col))
                    else {
                        continue;
                    };
                    // serde_json's reader (without its float_roundtrip feature)
                    // may land one unit in the last place off what Rust's writer
                    // wrote; anything more is a rounded number.
                    let same = match (cell.parse::<f64>(), n.as_f64()) {
                        (Ok(a), Some(b)) => a == b || (a - b).abs() <= 4.0 * f64::EPSILON * b.abs(),
                        _ => false,
                    };
                    if !same {
                        problems.push(format!("{name}: column '{col}' holds {cell}, its JSON {n}"));
                    }
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_read_as_rfc_4180_has_them() {
        let rows = parse_csv("a,b\n\"x, \"\"y\"\"\",2.5\n\"two\nlines\",\n").unwrap();
        assert_eq!(
            rows,
            vec![
                vec!["a".to_string(), "b".into()],
                vec!["x, \"y\"".into(), "2.5".into()],
                vec!["two\nlines".into(), "".into()],
            ]
        );
        assert!(parse_csv("\"open").is_err());
    }

    #[test]
    fn display_strings_and_mixed_columns_are_found() {
        for d in ["+5.9% (±10%)", "bound ≤ 1.000", "12/40 (30.0 %)", "30.0 %"] {
            assert!(dressed(d), "{d}");
        }
        for w in [
            "2 MB/s",
            "(10T/3, 10T/7) ratio flow 2/flow 1",
            "load 0.6",
            "pass",
        ] {
            assert!(!dressed(w), "{w}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), "x,y\n1,2\nyes,+3.1% (±10%)\n").unwrap();
        let p = audit(dir.path());
        assert_eq!(p.len(), 3, "{p:?}");
        std::fs::write(dir.path().join("a.csv"), "x,y\n1,\n2.5,inf\n").unwrap();
        std::fs::write(dir.path().join("a.json"), "[{\"x\": 1}, {\"x\": 2.5}]").unwrap();
        assert!(audit(dir.path()).is_empty(), "{:?}", audit(dir.path()));
        std::fs::write(dir.path().join("a.json"), "[{\"x\": 1}, {\"x\": 2.4}]").unwrap();
        assert_eq!(audit(dir.path()).len(), 1);
    }
}
