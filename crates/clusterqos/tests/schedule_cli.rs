//! `clusterqos schedule` end to end: the default run prints thesis Table 3.1 exactly
//! (§3.2.2), `--json` carries the same table, and bad input gives one line and exit 2.

use assert_cmd::Command;
use predicates::prelude::*;

fn schedule() -> Command {
    let mut cmd = Command::cargo_bin("clusterqos").expect("the clusterqos binary is built");
    cmd.arg("schedule");
    cmd
}

/// Thesis Table 3.1, as the command lays it out: a row per quantity, a column per t.
const TABLE_3_1: &str = "\
Rate control (thesis §3.2.2): flows A (IDT 2), B (IDT 3), one decision per time unit, 12 steps.
NDT values are shown before each decision; '-' means nothing was due.
┌───────────────────────────────────────────────────────────────┐
│ t            0   1   2   3   4   5   6   7   8    9   10   11 │
╞═══════════════════════════════════════════════════════════════╡
│ ndt_A        0   2   2   4   4   6   6   8   8   10   10   12 │
│ ndt_B        0   0   3   3   6   6   6   6   9    9   12   12 │
│ dispatched   A   B   A   B   A   -   A   B   A    B    A    - │
└───────────────────────────────────────────────────────────────┘
Packets dispatched: A 6, B 4. Ratio A:B = 3:2 (1/IDT gives 3:2).
";

#[test]
fn default_run_prints_thesis_table_3_1() {
    schedule().assert().success().stdout(TABLE_3_1);
}

#[test]
fn explicit_thesis_flows_give_the_same_table() {
    schedule()
        .args(["--flow", "A=2", "--flow", "B=3", "--steps", "12"])
        .assert()
        .success()
        .stdout(TABLE_3_1);
}

#[test]
fn json_carries_the_table_and_the_ratio() {
    let out = schedule()
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["scheduler"], "rate-control");
    assert_eq!(v["flows"][0]["name"], "A");
    assert_eq!(v["flows"][0]["idt"], 2);
    assert_eq!(v["flows"][0]["dispatched"], 6);
    assert_eq!(v["flows"][1]["dispatched"], 4);
    assert_eq!(v["ratio"], "3:2");
    assert_eq!(v["expected_ratio"], "3:2");
    let steps = v["steps"].as_array().expect("steps array");
    assert_eq!(steps.len(), 12);
    let sent: String = steps
        .iter()
        .map(|s| s["dispatched"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(sent, "ABABA-ABABA-");
    let ndt = |i: usize| -> Vec<u64> {
        steps
            .iter()
            .map(|s| s["ndt"][i].as_u64().expect("ndt"))
            .collect()
    };
    assert_eq!(ndt(0), [0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12]);
    assert_eq!(ndt(1), [0, 0, 3, 3, 6, 6, 6, 6, 9, 9, 12, 12]);
    assert_eq!(steps[11]["t"], 11);
}

#[test]
fn long_runs_print_a_row_per_step_and_follow_one_over_idt() {
    schedule()
        .args(["--flow", "fast=2", "--flow", "mid=4", "--flow", "slow=8"])
        .args(["--steps", "800"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "│   t   ndt_fast   ndt_mid   ndt_slow   dispatched │",
        ))
        .stdout(predicate::str::contains(
            "│   0          0         0          0         fast │",
        ))
        .stdout(predicate::function(|out: &str| {
            out.lines().count() == 3 + 4 + 800
        }))
        .stdout(predicate::str::contains(
            "Packets dispatched: fast 400, mid 200, slow 100. Ratio fast:mid:slow = 4:2:1 \
             (1/IDT gives 4:2:1).",
        ));
}

#[test]
fn overloaded_flow_sets_are_flagged() {
    schedule()
        .args(["--flow", "A=1", "--flow", "B=2"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "ask for 1.500 packets per time unit",
        ));
}

#[test]
fn bad_input_gives_one_line_and_exit_status_2() {
    for args in [
        &["--flow", "A=x"][..],
        &["--flow", "A=0"],
        &["--flow", "A"],
        &["--flow", "=2"],
        &["--flow", "A=2", "--flow", "A=3"],
        &["--steps", "0"],
        &["--steps", "many"],
    ] {
        let out = schedule().args(args).assert().code(2).get_output().clone();
        let err = String::from_utf8(out.stderr).expect("utf-8");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
