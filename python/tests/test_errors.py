"""A bad scenario raises the package's exception with the command's one-line message,
naming file:line."""

from __future__ import annotations

import pickle

import pytest

import clusterqos as cq

from conftest import TINY_FLIT


def cli_error(run_cli, *args: str) -> str:
    code, _, err = run_cli(*args)
    assert code == 2, err
    lines = [l for l in err.splitlines() if l.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0][len("error: "):]


@pytest.mark.parametrize(
    "bad, line",
    [
        (TINY_FLIT.replace("buffer = 4", "bufer = 4"), 11),
        (TINY_FLIT.replace('kind = "crossbar"', 'kind = "hypercube"'), 6),
        (TINY_FLIT.replace('rates = [0.01, 0.05]', 'rates = [0.01, 5]'), 32),
        (TINY_FLIT.replace('model = "flit"\n', ''), 1),
    ],
)
def test_a_bad_flit_scenario_raises_with_file_and_line(bad, line, tmp_path, run_cli):
    f = tmp_path / "bad.toml"
    f.write_text(bad)
    with pytest.raises(cq.ScenarioError) as e:
        cq.load(f)
    assert str(e.value).startswith(f"{f}:{line}:"), str(e.value)
    assert str(e.value) == cli_error(run_cli, "run", str(f), "--out", str(tmp_path / "r"))


def test_a_bad_cluster_scenario_raises_with_file_and_line(small_cluster, tmp_path, run_cli):
    f = tmp_path / "bad.toml"
    f.write_text(small_cluster.read_text().replace('to = "n2"', 'to = "n9"'))
    with pytest.raises(cq.ScenarioError) as e:
        cq.run(f)
    assert str(e.value).startswith(f"{f}:17:"), str(e.value)
    assert "no node 'n9'" in str(e.value)
    assert str(e.value) == cli_error(run_cli, "run", str(f), "--out", str(tmp_path / "r"))


def test_an_unknown_name_or_missing_file_says_so(run_cli, tmp_path):
    with pytest.raises(cq.ScenarioError) as e:
        cq.load("no-such-scenario")
    assert str(e.value) == cli_error(run_cli, "sweep", "no-such-scenario")
    with pytest.raises(cq.ScenarioError, match=r"missing\.toml: No such file"):
        cq.load(tmp_path / "missing.toml")


def test_a_bad_sweep_key_raises_before_anything_runs(tiny_flit, run_cli):
    with pytest.raises(cq.ScenarioError) as e:
        cq.sweep(tiny_flit, over={"network.classes.video.rate": [0.1]}, progress=False)
    msg = str(e.value)
    assert "has no element named 'video' (names: data, ctl" in msg
    assert msg == cli_error(run_cli, "sweep", str(tiny_flit), "--over", "network.classes.video.rate=0.1")
    with pytest.raises(cq.ScenarioError) as e:
        cq.sweep(tiny_flit, over={"network.router.buffer": ["x"]}, progress=False)
    assert f"{tiny_flit}:11:10: invalid type" in str(e.value)


def test_a_dict_error_names_the_line_of_its_toml():
    with pytest.raises(cq.ScenarioError) as e:
        cq.Scenario.from_dict({"model": "flit", "name": "x", "network": {"topology": {"kind": "ring"}}})
    assert str(e.value).startswith("<dict>:"), str(e.value)
    with pytest.raises(cq.ScenarioError):
        cq.Scenario.from_dict({"model": "flit", "name": "x", "network": {"seed": None}})
    # A scenario says which model it is for.
    with pytest.raises(cq.ScenarioError, match="missing key `model`"):
        cq.Scenario.from_dict({"name": "x", "network": {"topology": {"kind": "mesh", "k": 2}}})


def test_exceptions_cross_process_boundaries():
    e = cq.ScenarioError("f.toml:3:1: bad")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cq.ScenarioError and str(back) == "f.toml:3:1: bad"
    assert issubclass(cq.ScenarioError, cq.ClusterqosError)
    assert issubclass(cq.ManagerError, cq.ClusterqosError)
