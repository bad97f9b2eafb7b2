"""A scenario run from Python gives the numbers `clusterqos run --json` prints for the
same scenario and seed, and its DataFrames hold those very values."""

from __future__ import annotations

import math
import tomllib

import pytest

import clusterqos as cq

from conftest import TINY_FLIT


def same_double(a, b) -> bool:
    """Equal as IEEE doubles (bit for bit), or equal integers/booleans."""
    if isinstance(a, float) or isinstance(b, float):
        return float(a).hex() == float(b).hex()
    return a == b


def test_flit_run_equals_the_command_and_frames_hold_its_values(tiny_flit, cli_json, tmp_path):
    r = cq.load(tiny_flit).run(seed=3)
    want = cli_json("run", str(tiny_flit), "--seed", "3", "--json", "--out", str(tmp_path / "r"))["runs"]
    assert len(want) == 1
    assert r.json == want[0]
    assert r.seed == 3 and r.model == "flit" and r.name == "tiny"

    pts, cls = r.points, r.classes
    assert len(pts) == 2 and len(cls) == 4
    for i, p in enumerate(want[0]["points"]):
        t = p["result"]["total"]
        row = pts.iloc[i]
        for col, v in [
            ("rate", p["rate"]),
            ("offered", t["offered"]),
            ("accepted", t["accepted"]),
            ("latency_avg", t["latency"]["avg"]),
            ("latency_p99", t["latency"]["p99"]),
            ("packets", t["latency"]["packets"]),
            ("network_latency", t["network_latency"]),
            ("link_utilisation_max", p["result"]["link_utilisation_max"]),
            ("flit_hops", p["result"]["flit_hops"]),
            ("saturated", p["result"]["saturated"]),
        ]:
            assert same_double(row[col].item(), v), (i, col, row[col], v)
        for j, c in enumerate(p["result"]["classes"]):
            crow = cls.iloc[2 * i + j]
            assert crow["class"] == c["name"]
            assert same_double(crow["latency_avg"].item(), c["latency"]["avg"])
            assert same_double(crow["accepted"].item(), c["accepted"])
    # The figures are the report's: latency and throughput against offered load.
    assert [f["id"] for f in r.figures] == ["latency-vs-load", "throughput-vs-load"]
    s = r.series
    assert set(s["series"]) == {"data", "ctl"}


def test_a_different_seed_gives_different_numbers(tiny_flit):
    a = cq.load(tiny_flit).run(seed=3)
    b = cq.load(tiny_flit).run(seed=4)
    assert a.json != b.json


def test_cluster_run_equals_the_command(small_cluster, cli_json, tmp_path):
    r = cq.run(small_cluster, seed=7)
    want = cli_json("run", str(small_cluster), "--seed", "7", "--json", "--out", str(tmp_path / "r"))
    want.pop("report")
    assert r.json == want
    checks = r.checks
    assert len(checks) == len(want["results"][0]["checks"]) > 0
    for row, c in zip(checks.itertuples(), want["results"][0]["checks"]):
        assert same_double(row.measured, c["measured"])
        assert row.label == c["label"]
    assert r.summary == want["summary"]


def test_a_shipped_scenario_by_name_equals_the_command(cli_json, tmp_path):
    r = cq.run("two-senders-one-node", seed=2, quick=True)
    want = cli_json(
        "run", "two-senders-one-node", "--seed", "2", "--quick", "--json", "--out", str(tmp_path / "r")
    )
    want.pop("report")
    assert r.json == want
    s = r.summary
    kinds = r.checks["kind"].value_counts().to_dict()
    assert kinds.get("value", 0) == s["values"]
    assert kinds.get("bound", 0) == s["bounds"]
    assert kinds.get("ordering", 0) == s["orderings"]
    roles = r.checks[r.checks["kind"] != "shown"]["role"].value_counts().to_dict()
    assert roles.get("prediction", 0) == s["predictions"]
    assert roles.get("fit", 0) == s["fits"]
    assert roles.get("identity", 0) == s["identities"]
    assert (r.checks["verdict"] == "miss").sum() == s["misses"]
    assert (r.checks["verdict"] == "not differentiated").sum() == s["not_differentiated"]


def test_the_report_is_the_commands(tiny_flit, run_cli, tmp_path):
    cq.load(tiny_flit).run(seed=3, report=tmp_path / "py")
    code, _, err = run_cli("run", str(tiny_flit), "--seed", "3", "--out", str(tmp_path / "cli"))
    assert code == 0, err
    for f in ["report.json", "latency-vs-load.svg", "points.csv", "index.html"]:
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f


def test_a_dict_with_the_files_schema_runs_the_same(tiny_flit):
    d = tomllib.loads(TINY_FLIT)
    from_dict = cq.Scenario.from_dict(d).run(seed=3)
    assert from_dict.json == cq.load(tiny_flit).run(seed=3).json
    assert cq.load(tiny_flit).to_dict() == d


def test_values_change_by_dotted_keys(tiny_flit):
    s = cq.load(tiny_flit)
    edited = s.with_values({"network.classes.ctl.packet_flits": 6, "network.router.buffer": 8})
    by_hand = cq.Scenario(
        TINY_FLIT.replace("buffer = 4", "buffer = 8").replace("packet_flits = 2", "packet_flits = 6"),
        s.file,
    )
    assert edited.text == by_hand.text
    assert edited.run(seed=1).json == by_hand.run(seed=1).json


def test_reproduce_gives_the_commands_checks(cli_json, tmp_path):
    rep = cq.reproduce(only="two-senders-one-node", quick=True, progress=False)
    want = cli_json(
        "reproduce", "gulati", "--only", "two-senders-one-node", "--quick", "--json",
        "--out", str(tmp_path / "r"),
    )
    want.pop("report")
    assert rep.json == want
    assert list(rep.checks["measured"]) == [c["measured"] for c in want["results"][0]["checks"]]
    assert rep.figures and all(not math.isnan(y) for y in rep.series["y"])
    with pytest.raises(cq.ScenarioError, match="no scenario 'nope'"):
        cq.reproduce(only="nope", progress=False)
