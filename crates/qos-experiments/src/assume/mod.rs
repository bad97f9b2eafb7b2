//! Declared assumptions (DESIGN.md, "experiments"): every value a reproduction chose
//! where its paper is silent is declared in the scenario file that uses it — its value,
//! the range the paper leaves open, why that value, and the paper's words that leave it
//! open — and used by reference where it applies, so that no choice hides in a number
//! and `reproduce PAPER --sensitivity` ([`crate::sensitivity`]) can run each at the
//! ends of its range.
//!
//! ```toml
//! [[assumption]]
//! name = "knee-margin"              # lower-case words joined by '-'
//! value = 5.0
//! range = [2.5, 10.0]               # numbers or quantities ("500us", "2ms");
//! # alternatives = [false]          # or the other values (words, lists, switches)
//! why = "One step of the load sweep: the knee's resolution."
//! quote = "after 62 MBytes/sec"     # the paper's words that leave it open
//! cite = "§4.2"                     # where they are
//!
//! [[expect]]
//! margin = { assumption = "knee-margin" }   # the value goes here
//! ```
//!
//! [`resolve`] checks the declarations (each error at `file:line`), puts each value
//! where it is referenced and blanks the `[[assumption]]` tables, keeping every line
//! where it was, so that a paper's parser reads an ordinary scenario and its errors
//! still name the line the user wrote. [`with_value`] gives the same text with one
//! assumption set to another value (an end of its range).

#[cfg(test)]
mod tests;

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use qos_core::source::{parse_toml, Located};
use qos_core::units::{Bandwidth, Bytes, Duration};
use serde::{Deserialize, Serialize};
use toml::Spanned;
use toml_edit::{ImDocument, Item, Table, Value};

/// The key of a table that refers to an assumption: `{ assumption = "name" }`.
pub const REFERENCE: &str = "assumption";

/// `[[assumption]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AssumptionDef {
    name: Spanned<String>,
    value: Spanned<toml::Value>,
    range: Option<Spanned<Vec<Spanned<toml::Value>>>>,
    alternatives: Option<Spanned<Vec<Spanned<toml::Value>>>>,
    why: Spanned<String>,
    quote: Spanned<String>,
    cite: Spanned<String>,
}

/// The declarations of a file; the rest of it is the paper's to read.
#[derive(Debug, Deserialize)]
struct Declarations {
    #[serde(default)]
    assumption: Vec<AssumptionDef>,
}

/// What the paper leaves open: a range of numbers or quantities, or other values.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Open {
    /// From `.0` to `.1` (inclusive; numbers, or quantities of one kind).
    Range(toml::Value, toml::Value),
    /// The other values it could take (words, lists, switches).
    Alternatives(Vec<toml::Value>),
}

/// One declared assumption.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assumption {
    /// Its name (lower-case words joined by '-').
    pub name: String,
    /// The value the scenario uses.
    pub value: toml::Value,
    /// What the paper leaves open.
    pub open: Open,
    /// Why this value.
    pub why: String,
    /// The paper's words that leave it open.
    pub quote: String,
    /// Where they are (section, figure, table).
    pub cite: String,
    /// The line of its `name` in the file.
    pub line: usize,
    /// How many places use it.
    pub uses: usize,
}

impl Assumption {
    /// The values a sensitivity run tries: the ends of the range (those other than the
    /// value), or the alternatives.
    pub fn ends(&self) -> Vec<toml::Value> {
        let all = match &self.open {
            Open::Range(lo, hi) => vec![lo.clone(), hi.clone()],
            Open::Alternatives(v) => v.clone(),
        };
        let mut out: Vec<toml::Value> = Vec::new();
        for v in all {
            if !same(&v, &self.value) && !out.iter().any(|o| same(o, &v)) {
                out.push(v);
            }
        }
        out
    }

    /// What is open, as tables show it: "0.06 to 0.105", "one of false".
    pub fn open_text(&self) -> String {
        match &self.open {
            Open::Range(lo, hi) => format!("{} to {}", show(lo), show(hi)),
            Open::Alternatives(v) => format!(
                "one of {}",
                v.iter().map(show).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// Two values equal as the scenario reads them (5 and 5.0 are the same number).
fn same(a: &toml::Value, b: &toml::Value) -> bool {
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// A value as tables show it: numbers and quantities bare ("0.1", "2ms"), lists in
/// brackets.
pub fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

/// The kind of a quantity a range is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quantity {
    Number,
    Time,
    Rate,
    Size,
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Quantity::Number => "a number",
            Quantity::Time => "a time",
            Quantity::Rate => "a bandwidth",
            Quantity::Size => "a size",
        })
    }
}

/// A value as a magnitude to compare: numbers, and times, bandwidths and sizes written
/// with their units.
fn magnitude(v: &toml::Value) -> Option<(Quantity, f64)> {
    if let Some(x) = number(v) {
        return Some((Quantity::Number, x));
    }
    let s = v.as_str()?;
    if let Ok(d) = Duration::from_str(s) {
        return Some((Quantity::Time, d.as_ps() as f64));
    }
    if let Ok(b) = Bandwidth::from_str(s) {
        return Some((Quantity::Rate, b.bytes_per_sec() as f64));
    }
    Bytes::from_str(s)
        .ok()
        .filter(|_| s.trim().parse::<f64>().is_err())
        .map(|b| (Quantity::Size, b.get() as f64))
}

/// A scenario's text with its assumptions resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The text a paper's parser reads: every reference replaced by its value, the
    /// `[[assumption]]` tables blanked, every other line where it was.
    pub text: String,
    /// The declarations, in file order.
    pub assumptions: Vec<Assumption>,
}

fn at(file: &str, text: &str, span: Range<usize>, msg: impl Into<String>) -> Located {
    Located::at(file, text, span.start, msg)
}

/// A value written on one line, as TOML.
fn inline(v: &toml::Value) -> Option<String> {
    let s = v.to_string();
    (!s.contains('\n')).then_some(s)
}

/// Checks one declaration.
fn check(file: &str, text: &str, d: &AssumptionDef) -> Result<Assumption, Located> {
    let here = |span: Range<usize>, msg: String| Err(at(file, text, span, msg));
    let name = d.name.get_ref();
    let good_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-');
    if !good_name {
        return here(
            d.name.span(),
            format!(
                "assumption name '{name}': lower-case letters, digits and '-' (\"knee-margin\")"
            ),
        );
    }
    for (key, s) in [("why", &d.why), ("quote", &d.quote), ("cite", &d.cite)] {
        if s.get_ref().trim().is_empty() {
            let what = match key {
                "why" => "why this value",
                "quote" => "the paper's words that leave it open",
                _ => "where those words are (section, figure, table)",
            };
            return here(
                s.span(),
                format!("assumption `{name}`: `{key}` must say {what}"),
            );
        }
    }
    let value = d.value.get_ref();
    if matches!(value, toml::Value::Datetime(_)) || inline(value).is_none() {
        return here(
            d.value.span(),
            format!(
                "assumption `{name}`: a value is a number, a word, a switch or a list, on one line"
            ),
        );
    }
    let open = match (&d.range, &d.alternatives) {
        (Some(_), Some(a)) => {
            return here(
                a.span(),
                format!("assumption `{name}`: give `range` or `alternatives`, not both"),
            )
        }
        (None, None) => {
            return here(
                d.name.span(),
                format!(
                    "assumption `{name}` needs `range = [low, high]` (numbers or quantities) or `alternatives = [...]`: what the paper leaves open"
                ),
            )
        }
        (Some(r), None) => {
            let ends = r.get_ref();
            if ends.len() != 2 {
                return here(
                    r.span(),
                    format!("assumption `{name}`: a range is [low, high], two values"),
                );
            }
            let Some((kind, v)) = magnitude(value) else {
                return here(
                    d.value.span(),
                    format!(
                        "assumption `{name}`: a range needs a number or a quantity (\"2ms\", \"33MB/s\", \"4KiB\"); give `alternatives` for other values"
                    ),
                );
            };
            let mut m = Vec::new();
            for e in ends {
                match magnitude(e.get_ref()) {
                    Some((k, x)) if k == kind => m.push(x),
                    _ => {
                        return here(
                            e.span(),
                            format!(
                                "assumption `{name}`: the range's ends must be {kind}, as its value is"
                            ),
                        )
                    }
                }
            }
            if m[0] >= m[1] {
                return here(
                    r.span(),
                    format!("assumption `{name}`: the range's low end must be below its high end"),
                );
            }
            if !(m[0] <= v && v <= m[1]) {
                return here(
                    d.value.span(),
                    format!(
                        "assumption `{name}`: value {} is outside its range {} to {}",
                        show(value),
                        show(ends[0].get_ref()),
                        show(ends[1].get_ref())
                    ),
                );
            }
            Open::Range(ends[0].get_ref().clone(), ends[1].get_ref().clone())
        }
        (None, Some(a)) => {
            if a.get_ref().is_empty() {
                return here(
                    a.span(),
                    format!("assumption `{name}`: alternatives lists the other values it could take"),
                );
            }
            for e in a.get_ref() {
                let ok = std::mem::discriminant(e.get_ref()) == std::mem::discriminant(value)
                    || (number(e.get_ref()).is_some() && number(value).is_some());
                if !ok || inline(e.get_ref()).is_none() {
                    return here(
                        e.span(),
                        format!(
                            "assumption `{name}`: an alternative is of the value's type ({}), on one line",
                            value.type_str()
                        ),
                    );
                }
            }
            Open::Alternatives(a.get_ref().iter().map(|e| e.get_ref().clone()).collect())
        }
    };
    Ok(Assumption {
        name: name.clone(),
        value: value.clone(),
        open,
        why: d.why.get_ref().trim().to_string(),
        quote: d.quote.get_ref().trim().to_string(),
        cite: d.cite.get_ref().trim().to_string(),
        line: qos_core::source::line_of(text, d.name.span().start).0,
        uses: 0,
    })
}

/// A reference found in the document: the name and the span of the whole
/// `{ assumption = "name" }`, and the span of the name.
struct Reference {
    name: String,
    span: Range<usize>,
}

/// Collects the references in `v` (recursing into arrays and tables).
fn refs_in_value(
    file: &str,
    text: &str,
    v: &Value,
    out: &mut Vec<Reference>,
) -> Result<(), Located> {
    match v {
        Value::InlineTable(t) if t.contains_key(REFERENCE) => {
            let span = v.span().unwrap_or(0..0);
            let name = t.get(REFERENCE).and_then(|n| n.as_str());
            match name {
                Some(n) if t.len() == 1 => out.push(Reference {
                    name: n.to_string(),
                    span,
                }),
                _ => {
                    return Err(at(
                        file,
                        text,
                        span,
                        "a reference to an assumption is `{ assumption = \"name\" }`, alone",
                    ))
                }
            }
        }
        Value::InlineTable(t) => {
            for (_, x) in t.iter() {
                refs_in_value(file, text, x, out)?;
            }
        }
        Value::Array(a) => {
            for x in a.iter() {
                refs_in_value(file, text, x, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn refs_in_table(
    file: &str,
    text: &str,
    t: &Table,
    out: &mut Vec<Reference>,
) -> Result<(), Located> {
    for (_, item) in t.iter() {
        match item {
            Item::Value(v) => refs_in_value(file, text, v, out)?,
            Item::Table(t) => refs_in_table(file, text, t, out)?,
            Item::ArrayOfTables(a) => {
                for t in a.iter() {
                    refs_in_table(file, text, t, out)?;
                }
            }
            Item::None => {}
        }
    }
    Ok(())
}

/// The byte ranges of the `[[assumption]]` tables (to blank), and an error where
/// `assumption` is anything else.
fn declaration_spans(
    file: &str,
    text: &str,
    doc: &ImDocument<&str>,
) -> Result<Vec<Range<usize>>, Located> {
    match doc.get(REFERENCE) {
        None => Ok(Vec::new()),
        Some(Item::ArrayOfTables(a)) => Ok(a.iter().filter_map(|t| t.span()).collect()),
        Some(other) => Err(at(
            file,
            text,
            other.span().unwrap_or(0..0),
            "`assumption` is a list of tables: write each as [[assumption]]",
        )),
    }
}

/// Checks the declarations of scenario `text` (named `file`) and the references to
/// them, and gives the text a paper's parser reads (module documentation). Errors name
/// `file:line`: a value outside its range, an unknown or unused name, a missing `why`.
pub fn resolve(file: &str, text: &str) -> Result<Resolved, Located> {
    let doc = ImDocument::parse(text).map_err(|e| {
        let msg = e.message().trim().replace('\n', " ");
        match e.span() {
            Some(s) => at(file, text, s, msg),
            None => Located::whole(file, msg),
        }
    })?;
    let blank = declaration_spans(file, text, &doc)?;
    if blank.is_empty() && !text.contains(REFERENCE) {
        return Ok(Resolved {
            text: text.to_string(),
            assumptions: Vec::new(),
        });
    }
    let mut refs = Vec::new();
    refs_in_table(file, text, doc.as_table(), &mut refs)?;
    if let Some(r) = refs
        .iter()
        .find(|r| blank.iter().any(|b| b.contains(&r.span.start)))
    {
        return Err(at(
            file,
            text,
            r.span.clone(),
            "an assumption's declaration cannot refer to another assumption",
        ));
    }
    let decl: Declarations = parse_toml(file, text)?;
    let mut assumptions: Vec<Assumption> = Vec::new();
    for d in &decl.assumption {
        let a = check(file, text, d)?;
        if assumptions.iter().any(|b| b.name == a.name) {
            return Err(at(
                file,
                text,
                d.name.span(),
                format!("assumption `{}` is declared twice", a.name),
            ));
        }
        assumptions.push(a);
    }
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for r in &refs {
        let Some(a) = assumptions.iter_mut().find(|a| a.name == r.name) else {
            let known: Vec<&str> = decl
                .assumption
                .iter()
                .map(|d| d.name.get_ref().as_str())
                .collect();
            return Err(at(
                file,
                text,
                r.span.clone(),
                if known.is_empty() {
                    format!(
                        "no assumption `{}` is declared (declare it in [[assumption]])",
                        r.name
                    )
                } else {
                    format!(
                        "no assumption `{}` is declared (declared: {})",
                        r.name,
                        known.join(", ")
                    )
                },
            ));
        };
        a.uses += 1;
        // Checked to fit on one line when declared.
        edits.push((r.span.clone(), inline(&a.value).unwrap_or_default()));
    }
    if let Some((a, d)) = assumptions
        .iter()
        .zip(&decl.assumption)
        .find(|(a, _)| a.uses == 0)
    {
        return Err(at(
            file,
            text,
            d.name.span(),
            format!(
                "assumption `{}` is declared but used nowhere: write `{{ assumption = \"{}\" }}` where its value goes",
                a.name, a.name
            ),
        ));
    }
    for b in blank {
        let spaces: String = text[b.clone()]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        edits.push((b, spaces));
    }
    Ok(Resolved {
        text: splice(text, edits),
        assumptions,
    })
}

/// `text` with each range replaced (ranges do not overlap).
fn splice(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    let mut out = text.to_string();
    for (r, s) in edits {
        out.replace_range(r, &s);
    }
    out
}

/// The declared assumptions of scenario `text` (checked as [`resolve`] does).
pub fn declared(file: &str, text: &str) -> Result<Vec<Assumption>, Located> {
    resolve(file, text).map(|r| r.assumptions)
}

/// Scenario `text` with assumption `name` declared at `value` instead (an end of its
/// range, for a sensitivity run): the rest of the file as written.
pub fn with_value(
    file: &str,
    text: &str,
    name: &str,
    value: &toml::Value,
) -> Result<String, Located> {
    let decl: Declarations = parse_toml(file, text)?;
    let d = decl
        .assumption
        .iter()
        .find(|d| d.name.get_ref() == name)
        .ok_or_else(|| Located::whole(file, format!("no assumption `{name}` is declared")))?;
    let v = inline(value).ok_or_else(|| {
        at(
            file,
            text,
            d.value.span(),
            format!("assumption `{name}`: a value fits on one line"),
        )
    })?;
    Ok(splice(text, vec![(d.value.span(), v)]))
}
