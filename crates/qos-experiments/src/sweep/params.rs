//! Sweep parameters: what `--over key=v1,v2` and `--seeds 1..10`
//! mean, and how one point's values are written into a scenario's TOML text.
//!
//! A key is a dotted path into the scenario file, in the file's own schema:
//! `network.router.buffer`, `network.classes.0.rate` (an element of an array by
//! index), `network.classes.data.rate` (an element of an array of tables by its
//! `name`), `message`, `flow.1.idt`. Values are TOML values (`4`, `0.01`, `true`,
//! `[1, 2]`, `{ kind = "mesh", k = 4 }`, `"quoted"`); anything that does not read as one
//! is a string (`64KiB`, `2T`). The edit keeps the rest of the file as written
//! (`toml_edit`), so an error found when the edited scenario is loaded still names the
//! line the user wrote.

use std::fmt;

use serde::{Deserialize, Serialize};
use toml_edit::{Array, DocumentMut, InlineTable, Item, TableLike, Value};

/// Most runs one sweep may expand to.
pub const MAX_TASKS: usize = 1_000_000;

/// Why a sweep's parameters are unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// A `--over` argument without `=` or without values.
    #[error("--over {0}: expected KEY=V1,V2,... (e.g. network.router.buffer=4,8)")]
    Syntax(String),
    /// A key that does not lead to a value of the scenario.
    #[error("sweep key `{key}`: {why}")]
    Key {
        /// The dotted key.
        key: String,
        /// What is wrong.
        why: String,
    },
    /// A `--seeds` argument that is not a list or range of seeds.
    #[error("--seeds {0}: expected seeds such as 1..10 (1 to 10), 1..=10, 1,2,5 or 7")]
    Seeds(String),
    /// A value that has no TOML form (JSON null, a number out of range).
    #[error("sweep key `{key}`: {why}")]
    Value {
        /// The dotted key.
        key: String,
        /// What is wrong.
        why: String,
    },
    /// More runs than [`MAX_TASKS`].
    #[error("the sweep expands to {0} runs, more than the {MAX_TASKS} allowed")]
    TooMany(u128),
}

/// One swept key and the values it takes, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// Dotted path into the scenario.
    pub key: String,
    /// The values, as JSON (how results carry them).
    pub values: Vec<serde_json::Value>,
}

impl Param {
    /// Parses `KEY=V1,V2,...` (commas inside brackets, braces or quotes do not split).
    pub fn parse(arg: &str) -> Result<Param, ParamError> {
        let syntax = || ParamError::Syntax(arg.to_string());
        let (key, rest) = arg.split_once('=').ok_or_else(syntax)?;
        let key = key.trim();
        if key.is_empty() || rest.trim().is_empty() {
            return Err(syntax());
        }
        let values = split_values(rest)
            .into_iter()
            .map(|v| toml_to_json(&read_value(v)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| ParamError::Value {
                key: key.to_string(),
                why,
            })?;
        if values.is_empty() {
            return Err(syntax());
        }
        Ok(Param {
            key: key.to_string(),
            values,
        })
    }
}

/// Splits `v1,v2` at commas outside brackets, braces and quotes.
fn split_values(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut quote, mut start) = (0i32, None::<char>, 0);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(text[start..].trim());
    out.retain(|v| !v.is_empty());
    out
}

/// A command-line value: TOML if it reads as TOML, else the text as a string.
fn read_value(text: &str) -> Value {
    text.parse::<Value>()
        .unwrap_or_else(|_| Value::from(text.to_string()))
}

/// Parses `--seeds`: `A..B` (A to B inclusive, as people read it), `A..=B`, a
/// comma-separated list, or one seed.
pub fn parse_seeds(arg: &str) -> Result<Vec<u64>, ParamError> {
    let bad = || ParamError::Seeds(arg.to_string());
    let num = |s: &str| s.trim().parse::<u64>().map_err(|_| bad());
    let t = arg.trim();
    if let Some((a, b)) = t.split_once("..") {
        let (a, b) = (num(a)?, num(b.strip_prefix('=').unwrap_or(b))?);
        if b < a {
            return Err(bad());
        }
        if (b - a) as usize >= MAX_TASKS {
            return Err(ParamError::TooMany(u128::from(b - a) + 1));
        }
        return Ok((a..=b).collect());
    }
    let seeds = t.split(',').map(num).collect::<Result<Vec<_>, _>>()?;
    if seeds.is_empty() {
        return Err(bad());
    }
    Ok(seeds)
}

/// A JSON value as TOML (objects become inline tables).
pub fn json_to_toml(v: &serde_json::Value) -> Result<Value, String> {
    Ok(match v {
        serde_json::Value::Null => return Err("null has no TOML form".into()),
        serde_json::Value::Bool(b) => Value::from(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(_)) if n.is_u64() => {
                return Err(format!("{n} is larger than TOML integers allow"))
            }
            (None, Some(f)) => Value::from(f),
            _ => return Err(format!("{n} has no TOML form")),
        },
        serde_json::Value::String(s) => Value::from(s.clone()),
        serde_json::Value::Array(a) => {
            let mut arr = Array::new();
            for x in a {
                arr.push(json_to_toml(x)?);
            }
            Value::Array(arr)
        }
        serde_json::Value::Object(o) => {
            let mut t = InlineTable::new();
            for (k, x) in o {
                t.insert(k, json_to_toml(x)?);
            }
            Value::InlineTable(t)
        }
    })
}

/// A TOML value as JSON (dates become strings).
pub fn toml_to_json(v: &Value) -> Result<serde_json::Value, String> {
    Ok(match v {
        Value::String(s) => serde_json::Value::String(s.value().clone()),
        Value::Integer(i) => serde_json::Value::from(*i.value()),
        Value::Float(f) => serde_json::Number::from_f64(*f.value())
            .map(serde_json::Value::Number)
            .ok_or_else(|| format!("{} has no JSON form", f.value()))?,
        Value::Boolean(b) => serde_json::Value::Bool(*b.value()),
        Value::Datetime(d) => serde_json::Value::String(d.value().to_string()),
        Value::Array(a) => {
            serde_json::Value::Array(a.iter().map(toml_to_json).collect::<Result<Vec<_>, _>>()?)
        }
        Value::InlineTable(t) => {
            let mut m = serde_json::Map::new();
            for (k, x) in t.iter() {
                m.insert(k.to_string(), toml_to_json(x)?);
            }
            serde_json::Value::Object(m)
        }
    })
}

/// One point's values: `key = value` pairs in sweep order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Assignment(pub Vec<(String, serde_json::Value)>);

impl fmt::Display for Assignment {
    /// `network.router.buffer=4 network.classes.0.rate=0.01` (or `(none)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(no parameters)");
        }
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{k}={}", show(v))?;
        }
        Ok(())
    }
}

/// A value as tables show it: strings bare, everything else as JSON.
pub fn show(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value as a table cell: a number as a number (shown as written), anything else
/// as tables show it.
pub fn cell(v: &(String, serde_json::Value)) -> crate::report::Cell {
    match v.1.as_f64() {
        Some(x) => {
            let shortest = format!("{x}");
            let decimals = shortest.split_once('.').map_or(0, |(_, d)| d.len());
            crate::report::Cell::fixed(x, decimals.min(12) as u8)
        }
        None => crate::report::Cell::from(show(&v.1)),
    }
}

/// Every combination of `over`'s values, the first key varying slowest.
pub fn combinations(over: &[Param]) -> Result<Vec<Assignment>, ParamError> {
    let total = over
        .iter()
        .try_fold(1u128, |n, p| n.checked_mul(p.values.len() as u128))
        .unwrap_or(u128::MAX);
    if total > MAX_TASKS as u128 {
        return Err(ParamError::TooMany(total));
    }
    let mut out = vec![Assignment::default()];
    for p in over {
        out = out
            .into_iter()
            .flat_map(|a| {
                p.values.iter().map(move |v| {
                    let mut b = a.clone();
                    b.0.push((p.key.clone(), v.clone()));
                    b
                })
            })
            .collect();
    }
    Ok(out)
}

/// Writes `assignment` into TOML `text` (the rest of the text kept as written).
pub fn apply(text: &str, assignment: &Assignment) -> Result<String, ParamError> {
    if assignment.0.is_empty() {
        return Ok(text.to_string());
    }
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| ParamError::Key {
            key: assignment.0[0].0.clone(),
            why: format!("the scenario is not valid TOML: {}", e.message()),
        })?;
    for (key, v) in &assignment.0 {
        let value = json_to_toml(v).map_err(|why| ParamError::Value {
            key: key.clone(),
            why,
        })?;
        let path: Vec<&str> = key.split('.').map(str::trim).collect();
        if path.iter().any(|c| c.is_empty()) {
            return Err(ParamError::Key {
                key: key.clone(),
                why: "empty component in the dotted path".into(),
            });
        }
        set_in_table(doc.as_table_mut(), &path, value, "").map_err(|why| ParamError::Key {
            key: key.clone(),
            why,
        })?;
    }
    Ok(doc.to_string())
}

fn join(at: &str, c: &str) -> String {
    if at.is_empty() {
        c.to_string()
    } else {
        format!("{at}.{c}")
    }
}

/// Sets `path` under table `t` (`at`: the path walked so far, for messages). A missing
/// last key is added (the scenario's schema then says whether it exists); a missing
/// table on the way is created.
fn set_in_table(
    t: &mut dyn TableLike,
    path: &[&str],
    value: Value,
    at: &str,
) -> Result<(), String> {
    let (first, rest) = (path[0], &path[1..]);
    let here = join(at, first);
    if rest.is_empty() {
        match t.get_mut(first) {
            Some(Item::Value(old)) => {
                let decor = old.decor().clone();
                *old = value;
                *old.decor_mut() = decor;
            }
            Some(Item::Table(_) | Item::ArrayOfTables(_)) => {
                return Err(format!(
                    "`{here}` is a table; name a value inside it (e.g. {here}.KEY)"
                ))
            }
            Some(item) => *item = Item::Value(value),
            None => {
                t.insert(first, Item::Value(value));
            }
        }
        return Ok(());
    }
    if t.get(first).is_none() {
        t.insert(first, Item::Value(Value::InlineTable(InlineTable::new())));
    }
    let item = t
        .get_mut(first)
        .ok_or_else(|| format!("cannot add `{here}`"))?;
    set_in_item(item, rest, value, &here)
}

fn set_in_item(item: &mut Item, path: &[&str], value: Value, at: &str) -> Result<(), String> {
    match item {
        Item::Table(t) => set_in_table(t, path, value, at),
        Item::Value(Value::InlineTable(t)) => set_in_table(t, path, value, at),
        Item::ArrayOfTables(arr) => {
            let names: Vec<Option<String>> = arr
                .iter()
                .map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string))
                .collect();
            let i = element(path[0], &names, at)?;
            let t = arr.get_mut(i).ok_or_else(|| format!("no element {i}"))?;
            if path.len() == 1 {
                return Err(format!(
                    "`{}` is a table; name a value inside it",
                    join(at, path[0])
                ));
            }
            set_in_table(t, &path[1..], value, &join(at, path[0]))
        }
        Item::Value(Value::Array(arr)) => set_in_array(arr, path, value, at),
        Item::Value(_) => Err(format!(
            "`{at}` is a single value, so `{}` does not exist",
            join(at, path[0])
        )),
        Item::None => Err(format!("`{at}` does not exist")),
    }
}

fn set_in_array(arr: &mut Array, path: &[&str], value: Value, at: &str) -> Result<(), String> {
    let names: Vec<Option<String>> = arr
        .iter()
        .map(|v| {
            v.as_inline_table()
                .and_then(|t| t.get("name"))
                .and_then(|n| n.as_str())
                .map(str::to_string)
        })
        .collect();
    let i = element(path[0], &names, at)?;
    let here = join(at, path[0]);
    if path.len() == 1 {
        let old = arr.get(i).ok_or_else(|| format!("no element {i}"))?;
        let mut value = value;
        *value.decor_mut() = old.decor().clone();
        arr.replace(i, value);
        return Ok(());
    }
    match arr.get_mut(i) {
        Some(Value::InlineTable(t)) => set_in_table(t, &path[1..], value, &here),
        Some(Value::Array(a)) => set_in_array(a, &path[1..], value, &here),
        _ => Err(format!(
            "`{here}` is a single value, so `{}` does not exist",
            join(&here, path[1])
        )),
    }
}

/// The element of an array named by index or by its `name`.
fn element(component: &str, names: &[Option<String>], at: &str) -> Result<usize, String> {
    if let Ok(i) = component.parse::<usize>() {
        return if i < names.len() {
            Ok(i)
        } else {
            Err(format!(
                "`{at}` has {} elements; index {i} is past its end",
                names.len()
            ))
        };
    }
    names
        .iter()
        .position(|n| n.as_deref() == Some(component))
        .ok_or_else(|| {
            let known: Vec<&str> = names.iter().flatten().map(String::as_str).collect();
            if known.is_empty() {
                format!("`{at}` is an array: index it by number (e.g. {at}.0)")
            } else {
                format!(
                    "`{at}` has no element named '{component}' (names: {}; or index by number)",
                    known.join(", ")
                )
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FLIT: &str = r#"name = "s"
# a comment that must survive
[network]
topology = { kind = "mesh", k = 4 }
seed = 1

[network.router]
buffer = 10 # flits

[[network.classes]]
name = "data"
vls = [0, 1]
rate = 0.008

[[network.classes]]
name = "ctl"
vls = [2]
rate = 0.001
"#;

    fn one(key: &str, v: serde_json::Value) -> Assignment {
        Assignment(vec![(key.into(), v)])
    }

    #[test]
    fn values_split_at_top_level_commas_and_read_as_toml_or_strings() {
        let p = Param::parse("network.router.buffer=4, 8,16").unwrap();
        assert_eq!(p.values, vec![json!(4), json!(8), json!(16)]);
        let p = Param::parse("k=[1,2],{a=1,b=\"x,y\"},64KiB,2T,0.5,true").unwrap();
        assert_eq!(
            p.values,
            vec![
                json!([1, 2]),
                json!({"a": 1, "b": "x,y"}),
                json!("64KiB"),
                json!("2T"),
                json!(0.5),
                json!(true)
            ]
        );
        assert!(matches!(
            Param::parse("novalue="),
            Err(ParamError::Syntax(_))
        ));
        assert!(matches!(Param::parse("=1"), Err(ParamError::Syntax(_))));
        assert!(matches!(Param::parse("x"), Err(ParamError::Syntax(_))));
    }

    #[test]
    fn seeds_read_as_inclusive_ranges_and_lists() {
        assert_eq!(parse_seeds("1..10").unwrap(), (1..=10).collect::<Vec<_>>());
        assert_eq!(parse_seeds("3..=5").unwrap(), vec![3, 4, 5]);
        assert_eq!(parse_seeds("7").unwrap(), vec![7]);
        assert_eq!(parse_seeds("1, 2,5").unwrap(), vec![1, 2, 5]);
        assert!(parse_seeds("5..1").is_err());
        assert!(parse_seeds("a..b").is_err());
        assert!(parse_seeds("").is_err());
        assert!(matches!(
            parse_seeds("0..18446744073709551615"),
            Err(ParamError::TooMany(_))
        ));
    }

    #[test]
    fn combinations_vary_the_first_key_slowest() {
        let over = vec![
            Param::parse("a=1,2").unwrap(),
            Param::parse("b=x,y,z").unwrap(),
        ];
        let c = combinations(&over).unwrap();
        assert_eq!(c.len(), 6);
        assert_eq!(c[0].to_string(), "a=1 b=x");
        assert_eq!(c[2].to_string(), "a=1 b=z");
        assert_eq!(c[3].to_string(), "a=2 b=x");
        assert_eq!(combinations(&[]).unwrap(), vec![Assignment::default()]);
        let big = Param {
            key: "k".into(),
            values: vec![json!(1); 1001],
        };
        assert!(matches!(
            combinations(&[big.clone(), big]),
            Err(ParamError::TooMany(1_002_001))
        ));
    }

    #[test]
    fn edits_keep_the_rest_of_the_file_and_its_lines() {
        let out = apply(FLIT, &one("network.router.buffer", json!(4))).unwrap();
        assert!(out.contains("buffer = 4 # flits"), "{out}");
        assert!(out.contains("# a comment that must survive"));
        assert_eq!(out.lines().count(), FLIT.lines().count());
        let out = apply(FLIT, &one("network.topology.k", json!(8))).unwrap();
        assert!(out.contains("k = 8"), "{out}");
    }

    #[test]
    fn array_elements_are_named_by_index_or_by_name() {
        let by_name = apply(FLIT, &one("network.classes.ctl.rate", json!(0.002))).unwrap();
        let by_index = apply(FLIT, &one("network.classes.1.rate", json!(0.002))).unwrap();
        assert_eq!(by_name, by_index);
        assert!(by_name.contains("rate = 0.002"));
        assert!(by_name.contains("rate = 0.008"));
        let vls = apply(FLIT, &one("network.classes.data.vls.1", json!(3))).unwrap();
        assert!(vls.contains("vls = [0, 3]"), "{vls}");
    }

    #[test]
    fn missing_keys_are_added_for_the_schema_to_judge() {
        let out = apply(FLIT, &one("network.hca.vl_buffer", json!(4))).unwrap();
        let t: toml::Table = out.parse().unwrap();
        assert_eq!(t["network"]["hca"]["vl_buffer"].as_integer(), Some(4));
        let out = apply(FLIT, &one("quick_note", json!("x"))).unwrap();
        assert!(out.contains("quick_note = \"x\""));
    }

    #[test]
    fn keys_that_lead_nowhere_say_why() {
        let err = |k: &str| apply(FLIT, &one(k, json!(1))).unwrap_err().to_string();
        assert_eq!(
            err("network.classes.5.rate"),
            "sweep key `network.classes.5.rate`: `network.classes` has 2 elements; index 5 is past its end"
        );
        assert!(err("network.classes.video.rate").contains("names: data, ctl"));
        assert!(err("network.router").contains("is a table"));
        assert!(err("network.seed.x").contains("is a single value"));
        assert!(err("network..seed").contains("empty component"));
        assert!(apply(FLIT, &one("network.seed", json!(null)))
            .unwrap_err()
            .to_string()
            .contains("null"));
    }
}
