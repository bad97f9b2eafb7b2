"""Every CSV file the command writes (a reproduction's report, a flit run's report, a
sweep's table) reads with Python's csv module, each column holding numbers (float()
reads every cell) or words (no cell a number dressed for reading, such as
"+5.9% (±10%)" or "bound ≤ 1.000"), and the measured values are called "measured"."""

from __future__ import annotations

import csv
import re
from pathlib import Path

# A number dressed as text: a cell that starts as a number and goes on with a percent,
# a ± or a bound sign, a fraction of counts, or a bound. Prose (a note) may use the
# signs: it starts with a word.
DRESSED = re.compile(r"^\s*[+-]?[\d.].*[%±≤≥]|^\s*\d+/\d+\b|^\s*bound [≤≥]")


def is_number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def check_csv(path: Path) -> list[str]:
    problems = []
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    for i, row in enumerate(body):
        if len(row) != len(header):
            problems.append(f"{path.name}: row {i + 2} has {len(row)} fields for {len(header)} columns")
    for c, name in enumerate(header):
        cells = [r[c] for r in body if c < len(r) and r[c] != ""]
        numbers = [x for x in cells if is_number(x)]
        if numbers and len(numbers) != len(cells):
            word = next(x for x in cells if not is_number(x))
            problems.append(f"{path.name}: column {name!r} mixes numbers and words ({word!r})")
        for x in cells:
            if not is_number(x) and DRESSED.search(x):
                problems.append(f"{path.name}: column {name!r} holds {x!r}, a number dressed as text")
                break
    if "simulated" in header and "measured" not in header:
        problems.append(f"{path.name}: measured values are called 'measured'")
    return problems


def check_dir(d: Path) -> list[str]:
    files = sorted(d.glob("*.csv"))
    assert files, f"no CSV in {d}"
    return [p for f in files for p in check_csv(f)]


def test_a_reproductions_csv_files_are_numbers_and_words(run_cli, tmp_path):
    out = tmp_path / "r"
    code, _, err = run_cli("reproduce", "gulati", "--quick", "--only", "two-senders-one-node", "--out", str(out))
    assert code == 0, err
    assert check_dir(out) == []
    with (out / "checks.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(float(r["measured"]) > 0 for r in rows)
    assert {r["kind"] for r in rows} == {"value"} and {r["verdict"] for r in rows} == {"pass"}


def test_a_flit_runs_and_a_sweeps_csv_files_are_numbers_and_words(tiny_flit, run_cli, tmp_path):
    out = tmp_path / "f"
    code, _, err = run_cli("run", str(tiny_flit), "--out", str(out))
    assert code == 0, err
    assert check_dir(out) == []
    sweep = tmp_path / "sweep.csv"
    code, _, err = run_cli(
        "sweep", str(tiny_flit), "--over", "network.router.buffer=4,8", "--csv", str(sweep)
    )
    assert code == 0, err
    assert check_csv(sweep) == []


def test_dressed_numbers_are_found():
    for bad in ["+5.9% (±10%)", "bound ≤ 1.000", "12/40 (30.0 %)", "30.0 %"]:
        assert DRESSED.search(bad), bad
    for good in ["2 MB/s", "(10T/3, 10T/7) ratio flow 2/flow 1", "load 0.6", "not differentiated",
                 "Not reproduced: within the intervals (0.0072 ± 0.0003 ms), by 4 %."]:
        assert not DRESSED.search(good), good
