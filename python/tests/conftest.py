"""Shared fixtures of the Python tests: the `clusterqos` command they
compare with, and small scenarios that run in well under a second in debug builds."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A flit scenario small enough for debug builds: 4-port crossbar, short phases, two
# load points.
TINY_FLIT = """model = "flit"
name = "tiny"
description = "4-port crossbar, short phases"

[network]
topology = { kind = "crossbar", ports = 4 }
seed = 5
phases = { warmup = 200, measure = 1000, drain_max = 2000 }

[network.router]
buffer = 4
delays = "booksim"

[[network.classes]]
name = "data"
vls = [0, 1]
packet_flits = 4
rate = 0.02
process = "bernoulli"
pattern = { kind = "uniform" }

[[network.classes]]
name = "ctl"
vls = [2]
packet_flits = 2
rate = 0.005
process = "poisson"
pattern = { kind = "uniform" }

[sweep]
class = "data"
rates = [0.01, 0.05]
"""

# A thesis scenario (two flows from one node, fixed IDTs) with short runs.
SMALL_CLUSTER = """model = "gulati"
name = "mine"
title = "two flows"
kind = "sharing"
hosts = 3
duration = "4ms"
warmup = "1ms"

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
"""


def _binary() -> Path:
    env = os.environ.get("CLUSTERQOS_BIN")
    if env:
        # Made absolute here: the tests run the command from temporary directories.
        return Path(env).resolve()
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return (target / "debug" / "clusterqos").resolve()


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `clusterqos` command (CLUSTERQOS_BIN, else target/debug/clusterqos)."""
    b = _binary()
    if not b.exists():
        pytest.fail(f"{b} is missing: build it with `cargo build -p clusterqos` or set CLUSTERQOS_BIN")
    return b


@pytest.fixture
def run_cli(cli, tmp_path):
    """Runs the command; returns (exit status, stdout, stderr)."""

    def go(*args: str) -> tuple[int, str, str]:
        p = subprocess.run(
            [str(cli), *args], capture_output=True, text=True, cwd=tmp_path, timeout=300
        )
        return p.returncode, p.stdout, p.stderr

    return go


@pytest.fixture
def cli_json(run_cli):
    """Runs the command and parses its JSON (it exits 0 when it ran, misses or not)."""

    def go(*args: str):
        code, out, err = run_cli(*args)
        assert code == 0, err
        return json.loads(out)

    return go


@pytest.fixture
def tiny_flit(tmp_path) -> Path:
    p = tmp_path / "tiny.toml"
    p.write_text(TINY_FLIT)
    return p


@pytest.fixture
def small_cluster(tmp_path) -> Path:
    p = tmp_path / "mine.toml"
    p.write_text(SMALL_CLUSTER)
    return p
