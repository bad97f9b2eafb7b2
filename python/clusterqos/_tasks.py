"""The pure task every sweep engine runs.

A task is a scenario's text, one point's values, a seed and the run length in; the
run's results (JSON text) out. It depends on nothing else, so the local process pool,
Dask and Ray all give the same results for the same inputs, whatever the number of
workers or the order they finish in. This module imports only the native module, so a
worker process starts quickly.
"""

from __future__ import annotations

from typing import Optional

from clusterqos import _native


def run_task(file: str, text: str, params: str, seed: Optional[int], quick: bool) -> str:
    """Run one point: ``text`` (named ``file``) with ``params`` (JSON list of
    ``[key, value]`` pairs) written in, at ``seed``. Returns the run's JSON (see
    :func:`clusterqos._native.run`)."""
    return _native.run(file, text, params, seed, quick)
