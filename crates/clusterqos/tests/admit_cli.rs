//! `clusterqos admit`: the shipped examples give the thesis's numbers (§3.3.1, §5.6),
//! and every kind of bad input gives one `error: file:line: ...` line and exit
//! status 2, with nothing on stdout and no panic.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn admit(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .arg("admit")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn example(name: &str, extra: &[&str]) -> String {
    let path = examples().join(name);
    let mut args = vec![path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, out, err) = admit(&args);
    assert_eq!(code, 0, "{name}: {err}");
    out
}

#[test]
fn crossbar_example_reproduces_the_thesis_best_effort_numbers() {
    let out = example("admit-thesis-best-effort.toml", &[]);
    let expect = [
        // A lone best-effort flow at peak rate: IDT = T = 96 ticks.
        "best-effort be1: 81.8 MB/s, IDT 48 us = 96 ticks, limited by Bmax (peak rate)",
        // IDT = T·Bmax/Breq = 48 us · 81.8 / 40.
        "request premium1 (premium 40 MB/s, n0 -> n2): granted, IDT 98.16 us = 196.32 ticks",
        // The thesis cluster's best-effort capacity, 78 MB/s, minus the premium flows.
        "best-effort be1: 38 MB/s",
        "best-effort be1: 18 MB/s",
        "REJECTED: node n0 send: 60 MB/s reserved + 30 MB/s requested > 81.8 MB/s (criterion 1: source node)",
        "best-effort be2: 39 MB/s",
        "best-effort be2: 29 MB/s",
    ];
    for e in expect {
        assert!(out.contains(e), "missing {e:?} in\n{out}");
    }
}

#[test]
fn cascade_example_is_rejected_at_the_trunk_port_with_the_numbers() {
    let out = example("admit-cascade-fig2-4.toml", &[]);
    assert!(
        out.contains(
            "REJECTED: switch s0 port 15: 130 MB/s reserved + 40 MB/s requested > 160 MB/s \
             (criterion 2: switch output port)"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "best-effort bulk: 30 MB/s, IDT 130.88 us = 261.76 ticks, limited by switch s0 port 15"
        ),
        "{out}"
    );
    // After C is released, E fits.
    assert!(
        out.contains("#8 (line 113) request E (premium 40 MB/s, h1 -> h5): granted"),
        "{out}"
    );
}

#[test]
fn mesh_example_rejects_on_the_xy_route_and_max_min_uses_idle_capacity() {
    let out = example("admit-mesh.toml", &[]);
    assert!(
        out.contains(
            "REJECTED: switch s1_0 port 1: 100 MB/s reserved + 20 MB/s requested > 100 MB/s"
        ),
        "{out}"
    );
    assert!(out.ends_with(
        "best-effort be3: 21.8 MB/s, IDT 180.11 us = 360.22 ticks, limited by node n0_0 send + receive\n"
    ));
    assert!(
        out.contains("best-effort be1: 40.9 MB/s, IDT 96 us"),
        "{out}"
    );
    let mm = example("admit-mesh.toml", &["--policy", "max-min"]);
    assert!(mm.contains("best-effort be1: 60 MB/s"), "{mm}");
}

#[test]
fn json_output_carries_every_decision() {
    let out = example("admit-cascade-fig2-4.toml", &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 8);
    assert_eq!(steps[0]["decision"], "granted");
    // B: 48 us · 81.8 / 70 = 56.09 us = 112.18 ticks of 0.5 us.
    let ticks = steps[0]["idt"]["ticks"].as_f64().unwrap();
    assert!((ticks - 112.18).abs() < 0.01, "{ticks}");
    assert_eq!(steps[4]["decision"], "rejected");
    assert_eq!(steps[4]["rejection"]["criterion"], "switch-port");
    assert_eq!(steps[4]["rejection"]["resource"], "switch s0 port 15");
    assert_eq!(steps[5]["best_effort"][0]["rate_mb_per_s"], 30.0);
}

// ----------------------------------------------------------------------------------
// Bad input: one line, file:line, exit status 2.
// ----------------------------------------------------------------------------------

const TOPOLOGY: &str = r#"[topology]
tick = "0.5us"

[topology.defaults]
t = "96ticks"
bmax = "81.8MB/s"

[[topology.switch]]
name = "s0"
ports = 4

[[topology.host]]
name = "a"
port = "s0:0"

[[topology.host]]
name = "b"
port = "s0:1"
"#;

const REQUEST: &str = r#"
[[step]]
request = "premium"
name = "p"
from = "a"
to = "b"
bandwidth = "40MB/s"
"#;

/// Runs `admit` on `text` written to a temporary file; asserts exit status 2 and one
/// line `error: FILE:LINE:...` and returns that line.
fn bad(text: &str, line: usize) -> String {
    bad_bytes(text.as_bytes(), line)
}

/// [`bad`] for a script given as bytes (which need not be UTF-8).
fn bad_bytes(bytes: &[u8], line: usize) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.toml");
    std::fs::write(&path, bytes).unwrap();
    let (code, out, err) = admit(&[path.to_str().unwrap()]);
    assert_eq!(code, 2, "stderr: {err}");
    assert!(out.is_empty(), "stdout not empty: {out}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    let prefix = format!("error: {}:{line}:", path.display());
    assert!(err.starts_with(&prefix), "expected {prefix:?}, got {err}");
    err
}

/// The 1-based line of the first occurrence of `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text[..text.find(needle).expect(needle)]
        .matches('\n')
        .count()
        + 1
}

#[test]
fn malformed_toml_names_the_line() {
    let text = format!("{TOPOLOGY}{REQUEST}\n[[step]\nrelease = \"p\"\n");
    bad(&text, line_of(&text, "[[step]\n"));
}

#[test]
fn an_unknown_unit_names_the_line() {
    let text = format!("{TOPOLOGY}{REQUEST}").replace("\"40MB/s\"", "\"40 furlongs\"");
    let e = bad(&text, line_of(&text, "furlongs"));
    assert!(e.contains("unknown unit 'furlongs'"), "{e}");
}

#[test]
fn a_negative_bandwidth_names_the_line() {
    let text = format!("{TOPOLOGY}{REQUEST}").replace("\"40MB/s\"", "\"-40MB/s\"");
    let e = bad(&text, line_of(&text, "-40MB/s"));
    assert!(e.contains("negative"), "{e}");
}

#[test]
fn a_zero_bandwidth_names_the_line() {
    let text = format!("{TOPOLOGY}{REQUEST}").replace("\"40MB/s\"", "\"0MB/s\"");
    let e = bad(&text, line_of(&text, "0MB/s"));
    assert!(e.contains("greater than zero"), "{e}");
}

#[test]
fn a_zero_link_capacity_names_the_line() {
    let text = format!("{TOPOLOGY}link = \"0MB/s\"\n{REQUEST}");
    let e = bad(&text, line_of(&text, "link = \"0MB/s\""));
    assert!(e.contains("greater than zero"), "{e}");
}

#[test]
fn a_route_through_a_missing_port_names_the_line() {
    let text = format!(
        "{TOPOLOGY}\n[[topology.route]]\nfrom = \"a\"\nto = \"b\"\nports = [\"s0:7\"]\n{REQUEST}"
    );
    let e = bad(&text, line_of(&text, "\"s0:7\""));
    assert!(e.contains("switch s0 has no port 7"), "{e}");
}

#[test]
fn a_port_used_twice_names_the_line() {
    let text = format!("{TOPOLOGY}{REQUEST}").replace("port = \"s0:1\"", "port = \"s0:0\"");
    let second = text.rfind("port = \"s0:0\"").unwrap();
    let e = bad(&text, text[..second].matches('\n').count() + 1);
    assert!(e.contains("used twice"), "{e}");
}

#[test]
fn releasing_an_unknown_flow_names_the_line() {
    let text = format!("{TOPOLOGY}{REQUEST}\n[[step]]\nrelease = \"ghost\"\n");
    let e = bad(&text, line_of(&text, "release = \"ghost\""));
    assert!(e.contains("unknown flow 'ghost'"), "{e}");
}

#[test]
fn releasing_twice_names_the_second_release() {
    let text =
        format!("{TOPOLOGY}{REQUEST}\n[[step]]\nrelease = \"p\"\n\n[[step]]\nrelease = \"p\"\n");
    let at = text.rfind("release = \"p\"").unwrap();
    bad(&text, text[..at].matches('\n').count() + 1);
}

#[test]
fn an_unknown_node_names_the_line() {
    let text = format!("{TOPOLOGY}{REQUEST}").replace("to = \"b\"", "to = \"zz\"");
    let e = bad(&text, line_of(&text, "to = \"zz\""));
    assert!(e.contains("unknown node 'zz'"), "{e}");
}

#[test]
fn an_unknown_key_names_the_line() {
    let text = format!("{TOPOLOGY}{REQUEST}").replace("bandwidth =", "bandwith =");
    bad(&text, line_of(&text, "bandwith"));
}

#[test]
fn a_missing_topology_file_names_the_line() {
    let text = format!("topology = \"nowhere.toml\"\n{REQUEST}");
    let e = bad(&text, 1);
    assert!(e.contains("cannot read topology file"), "{e}");
}

#[test]
fn a_missing_script_is_one_line_with_status_2() {
    let (code, out, err) = admit(&["/nonexistent/script.toml"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cannot read /nonexistent/script.toml"),
        "{err}"
    );
    // The cause once, not repeated by the error chain.
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
}

#[test]
fn a_script_that_is_not_utf8_names_the_line_of_its_first_bad_byte() {
    // "café" in Latin-1 on the line after a good script.
    let good = format!("{TOPOLOGY}{REQUEST}");
    let mut bytes = good.as_bytes().to_vec();
    bytes.extend_from_slice(b"# caf\xE9\n");
    let line = good.matches('\n').count() + 1;
    let e = bad_bytes(&bytes, line);
    assert!(e.contains("not UTF-8 text (byte 0xE9)"), "{e}");
}

#[test]
fn a_topology_file_that_is_not_utf8_names_its_own_line_too() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("topo.toml"), b"[defaults]\n\xFF\n").unwrap();
    let topo = dir.path().join("topo.toml");
    let text = format!("topology = {:?}\n{REQUEST}", topo.to_str().unwrap());
    let e = bad(&text, 1);
    assert!(
        e.contains(&format!(
            "{}:2:1: not UTF-8 text (byte 0xFF)",
            topo.display()
        )),
        "{e}"
    );
}
