//! `clusterqos run`: a user's scenario runs like a shipped one, and every scenario error
//! is one line naming file:line with exit status 2.

use assert_cmd::Command;
use predicates::prelude::*;

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const GOOD: &str = r#"model = "gulati"
name = "mine"
title = "two flows"
kind = "sharing"
hosts = 3
duration = "8ms"
warmup = "2ms"

[[flow]]
name = "a"
from = "n0"
to = "n1"

[[flow]]
name = "b"
from = "n0"
to = "n2"

[[case]]
label = "(2T, 4T)"
idts = ["2T", "4T"]
"#;

fn run_err(text: &str) -> (String, i32) {
    let dir = tempfile::tempdir().unwrap();
    let f = write(&dir, "bad.toml", text);
    let out = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["run", &f, "--out"])
        .arg(dir.path().join("r"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (err, out.status.code().unwrap_or(-1))
}

#[test]
fn a_user_scenario_runs_and_writes_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(&dir, "mine.toml", GOOD);
    let out = dir.path().join("report");
    let o = Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["run", &f, "--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["misses"], 0);
    assert_eq!(v["summary"]["predictions"], 1, "one ratio against 1/IDT");
    assert_eq!(v["summary"]["values"], 1);
    assert!(out.join("index.html").exists());
    assert!(out.join("mine-sharing.svg").exists());
}

#[test]
fn unknown_key_is_one_line_with_file_and_line() {
    let (err, code) = run_err(&GOOD.replace("hosts = 3", "hosts = 3\nspeed = 9"));
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml:6"), "{err}");
    assert!(err.contains("speed"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn flow_between_nonexistent_nodes_names_the_line() {
    let (err, code) = run_err(&GOOD.replace("to = \"n2\"", "to = \"n9\""));
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml:17"), "{err}");
    assert!(err.contains("no node 'n9'"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn idt_of_a_wrong_unit_names_the_line() {
    let (err, code) = run_err(&GOOD.replace("\"4T\"]", "\"40MB/s\"]"));
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml:21"), "{err}");
    assert!(err.contains("invalid IDT '40MB/s': unknown unit"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_scenario_that_is_not_utf8_names_the_line_of_its_first_bad_byte() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("latin1.toml");
    // A Latin-1 é in the title.
    let text = GOOD.replace("two flows", "deux flux \u{e9}gaux");
    let line = text[..text.find('\u{e9}').unwrap()].matches('\n').count() + 1;
    let bytes: Vec<u8> = text.chars().map(|c| c as u32 as u8).collect();
    std::fs::write(&f, bytes).unwrap();
    for cmd in [&["run"][..], &["sweep", "--over", "hosts=3,4"][..]] {
        let out = Command::cargo_bin("clusterqos")
            .unwrap()
            .args(&cmd[..1])
            .arg(&f)
            .args(&cmd[1..])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {err}");
        assert_eq!(
            err.trim(),
            format!(
                "error: {}:{line}:20: not UTF-8 text (byte 0xE9); save the file as UTF-8",
                f.display()
            ),
            "{cmd:?}"
        );
    }
}

#[test]
fn unknown_scenario_name_lists_the_shipped_ones() {
    Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["run", "no-such-scenario"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("idt-sweep"));
}

#[test]
fn a_scenario_without_its_model_key_is_one_line_naming_the_key() {
    let (err, code) = run_err(&GOOD.replace("model = \"gulati\"\n", ""));
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml:1:"), "{err}");
    assert!(err.contains("missing key `model`"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn impossible_published_values_are_one_line_with_file_and_line() {
    let expect = "\n[[expect]]\nmetric = \"bmax\"\npublished = P\nsource = { stated = \"§5.3\" }\n";
    let text = GOOD
        .replace("kind = \"sharing\"", "kind = \"idt-sweep\"")
        .replace(
            "[[case]]\nlabel = \"(2T, 4T)\"\nidts = [\"2T\", \"4T\"]\n",
            "",
        );
    for p in ["-81.8", "0", "nan"] {
        let (err, code) = run_err(&format!("{text}{}", expect.replace('P', p)));
        assert_eq!(code, 2, "{p}: {err}");
        assert!(err.contains("bad.toml:22:"), "{p}: {err}");
        assert!(err.contains("published"), "{p}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // An unknown metric names its line too.
    let (err, code) = run_err(&format!(
        "{text}{}",
        expect.replace("bmax", "speed").replace('P', "1")
    ));
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.toml:21:") && err.contains("speed"),
        "{err}"
    );
}

#[test]
fn an_assumption_outside_its_range_is_one_line_with_file_and_line() {
    let declared = "duration = { assumption = \"run-length\" }\n";
    let block = "\n[[assumption]]\nname = \"run-length\"\nvalue = \"V\"\nrange = [\"4ms\", \"16ms\"]\nwhy = \"long enough\"\nquote = \"the runs\"\ncite = \"§5\"\n";
    let text = GOOD.replace("duration = \"8ms\"\n", declared);
    // Inside its range: it runs (a quick check that the file is otherwise good).
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        &dir,
        "ok.toml",
        &format!("{text}{}", block.replace('V', "8ms")),
    );
    Command::cargo_bin("clusterqos")
        .unwrap()
        .args(["run", &f, "--quick", "--out"])
        .arg(dir.path().join("r"))
        .assert()
        .success();
    for (v, line, says) in [
        ("40ms", 25, "value 40ms is outside its range 4ms to 16ms"),
        ("soon", 25, "needs a number or a quantity"),
    ] {
        let (err, code) = run_err(&format!("{text}{}", block.replace('V', v)));
        assert_eq!(code, 2, "{v}: {err}");
        assert!(err.contains(&format!("bad.toml:{line}:")), "{v}: {err}");
        assert!(err.contains(says), "{v}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // A reference to nothing names its line.
    let (err, code) = run_err(&text);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.toml:6:") && err.contains("no assumption `run-length`"),
        "{err}"
    );
}
