//! Tests of the assumption declarations: values put in place with every line kept,
//! and each error at its `file:line`.

use super::*;

const FILE: &str = r#"model = "nagar"
name = "x"
threshold = { assumption = "knee-threshold" }
latency = { assumption = "be-latency" }

[[assumption]]
name = "knee-threshold"
value = 0.1
range = [0.06, 0.105]
why = "A tenth of the period."
quote = "before resulting in any meaningful jitter"
cite = "§4.2"

[[assumption]]
name = "be-latency"
value = "1ms"
range = ["500us", "2ms"]
why = """Five times the light-load
latency."""
quote = "saturating"
cite = "§4.2, Fig 5(b)"

[[expect]]
margin = { assumption = "knee-threshold" }
ordered = { assumption = "ordered" }
sizes = [1, { assumption = "size" }]

[[assumption]]
name = "ordered"
value = true
alternatives = [false]
why = "The knee of QoSVIA."
quote = "the LCP"
cite = "§3"

[[assumption]]
name = "size"
value = 4
range = [2, 8]
why = "w"
quote = "q"
cite = "c"
"#;

#[test]
fn references_take_their_values_and_declarations_are_blanked_line_for_line() {
    let r = resolve("x.toml", FILE).unwrap();
    assert_eq!(r.text.lines().count(), FILE.lines().count());
    let t: toml::Table = toml::from_str(&r.text).unwrap();
    assert_eq!(t["threshold"].as_float(), Some(0.1));
    assert_eq!(t["latency"].as_str(), Some("1ms"));
    assert!(!t.contains_key("assumption"));
    let e = &t["expect"].as_array().unwrap()[0];
    assert_eq!(e["margin"].as_float(), Some(0.1));
    assert_eq!(e["ordered"].as_bool(), Some(true));
    assert_eq!(e["sizes"].as_array().unwrap()[1].as_integer(), Some(4));
    // The lines that were not references or declarations are as written.
    for (a, b) in FILE.lines().zip(r.text.lines()) {
        if !a.contains("assumption") && !b.trim().is_empty() {
            assert_eq!(a, b);
        }
    }
    let names: Vec<&str> = r.assumptions.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["knee-threshold", "be-latency", "ordered", "size"]);
    assert_eq!(r.assumptions[0].uses, 2);
    assert_eq!(r.assumptions[0].line, 7);
    assert_eq!(r.assumptions[1].why, "Five times the light-load\nlatency.");
    assert_eq!(r.assumptions[0].open_text(), "0.06 to 0.105");
    assert_eq!(r.assumptions[2].open_text(), "one of false");
    // A file without declarations is read as written.
    let plain = "model = \"x\"\n# an assumption in a comment\nv = 1\n";
    assert_eq!(resolve("p.toml", plain).unwrap().text, plain);
}

#[test]
fn the_ends_are_the_range_ends_other_than_the_value() {
    let r = resolve("x.toml", FILE).unwrap();
    let ends = |i: usize| -> Vec<String> { r.assumptions[i].ends().iter().map(show).collect() };
    assert_eq!(ends(0), ["0.06", "0.105"]);
    assert_eq!(ends(1), ["500us", "2ms"]);
    assert_eq!(ends(2), ["false"]);
    let at_end = FILE.replace("value = 4\nrange = [2, 8]", "value = 8\nrange = [2, 8]");
    let r = resolve("x.toml", &at_end).unwrap();
    assert_eq!(r.assumptions[3].ends(), vec![toml::Value::Integer(2)]);
}

#[test]
fn with_value_sets_one_assumption_and_keeps_the_rest() {
    let t = with_value("x.toml", FILE, "knee-threshold", &toml::Value::Float(0.06)).unwrap();
    assert_eq!(t.lines().count(), FILE.lines().count());
    let r = resolve("x.toml", &t).unwrap();
    let parsed: toml::Table = toml::from_str(&r.text).unwrap();
    assert_eq!(parsed["threshold"].as_float(), Some(0.06));
    assert_eq!(parsed["latency"].as_str(), Some("1ms"));
    let t = with_value(
        "x.toml",
        FILE,
        "be-latency",
        &toml::Value::String("2ms".into()),
    )
    .unwrap();
    let parsed: toml::Table = toml::from_str(&resolve("x.toml", &t).unwrap().text).unwrap();
    assert_eq!(parsed["latency"].as_str(), Some("2ms"));
    assert!(with_value("x.toml", FILE, "nope", &toml::Value::Integer(1)).is_err());
}

/// The error of `FILE` with `from` replaced by `to`: one line, at `line`.
fn error(from: &str, to: &str, line: usize) -> String {
    assert!(FILE.contains(from), "{from}");
    let text = FILE.replacen(from, to, 1);
    let e = resolve("x.toml", &text).unwrap_err();
    let s = e.to_string();
    assert_eq!(e.line, Some(line), "{from} → {s}");
    assert!(s.starts_with(&format!("x.toml:{line}:")), "{s}");
    assert!(!s.contains('\n'), "{s}");
    s
}

#[test]
fn a_value_outside_its_range_is_a_one_line_error_at_its_line() {
    let e = error("value = 0.1\n", "value = 0.2\n", 8);
    assert!(
        e.contains("value 0.2 is outside its range 0.06 to 0.105"),
        "{e}"
    );
    let e = error("value = \"1ms\"", "value = \"3ms\"", 16);
    assert!(e.contains("outside its range 500us to 2ms"), "{e}");
    let e = error("range = [0.06, 0.105]", "range = [0.105, 0.06]", 9);
    assert!(e.contains("low end must be below"), "{e}");
    let e = error("range = [0.06, 0.105]", "range = [0.06]", 9);
    assert!(e.contains("two values"), "{e}");
    let e = error(
        "range = [\"500us\", \"2ms\"]",
        "range = [\"500us\", \"2MB/s\"]",
        17,
    );
    assert!(e.contains("must be a time"), "{e}");
    let e = error("value = \"1ms\"", "value = \"soon\"", 16);
    assert!(e.contains("needs a number or a quantity"), "{e}");
}

#[test]
fn declarations_and_references_are_checked_at_their_lines() {
    let e = error("why = \"A tenth of the period.\"", "why = \" \"", 10);
    assert!(e.contains("`why` must say why this value"), "{e}");
    let e = error("quote = \"saturating\"", "quote = \"\"", 20);
    assert!(e.contains("paper's words"), "{e}");
    let e = error("cite = \"§3\"\n", "", 28);
    assert!(e.contains("cite"), "{e}");
    let e = error("range = [0.06, 0.105]\n", "", 7);
    assert!(e.contains("needs `range = [low, high]`"), "{e}");
    let e = error(
        "alternatives = [false]",
        "alternatives = [false]\nrange = [0, 1]",
        31,
    );
    assert!(e.contains("not both"), "{e}");
    let e = error("alternatives = [false]", "alternatives = [0]", 31);
    assert!(e.contains("of the value's type (boolean)"), "{e}");
    let e = error("alternatives = [false]", "alternatives = []", 31);
    assert!(e.contains("other values"), "{e}");
    let e = error("name = \"size\"", "name = \"Size\"", 37);
    assert!(e.contains("lower-case"), "{e}");
    let e = error("name = \"size\"", "name = \"ordered\"", 37);
    assert!(e.contains("declared twice"), "{e}");
    let e = error(
        "latency = { assumption = \"be-latency\" }",
        "latency = { assumption = \"be-lat\" }",
        4,
    );
    assert!(e.contains("no assumption `be-lat` is declared (declared: knee-threshold, be-latency, ordered, size)"), "{e}");
    let e = error(
        "latency = { assumption = \"be-latency\" }",
        "latency = 1",
        15,
    );
    assert!(e.contains("declared but used nowhere"), "{e}");
    let e = error(
        "{ assumption = \"size\" }",
        "{ assumption = \"size\", x = 1 }",
        26,
    );
    assert!(e.contains("alone"), "{e}");
    let e = error("value = true", "value = { assumption = \"size\" }", 30);
    assert!(e.contains("cannot refer"), "{e}");
    let e = error("value = 4\n", "value = 4\nunits = 2\n", 39);
    assert!(e.contains("units"), "{e}");
    let e = error("value = true", "value = 1979-05-27", 30);
    assert!(e.contains("on one line"), "{e}");
    let e = resolve("y.toml", "model = \"x\"\nassumption = 3\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("y.toml:2:") && e.contains("[[assumption]]"),
        "{e}"
    );
}
