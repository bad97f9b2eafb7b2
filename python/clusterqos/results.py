"""Results of one run: the JSON the command prints with ``--json`` for the
same scenario and seed (``json``), the report's figures (``figures``), and the same
numbers as pandas DataFrames.

- :class:`FlitResult` — a flit-network run: ``points``, ``classes``, ``flows``.
- :class:`ClusterResult` — a thesis-scenario run: ``checks`` (published against
  simulated), ``series`` (the figures' data), ``summary``.
- :class:`Reproduction` — ``reproduce gulati``: every thesis experiment's checks.
"""

from __future__ import annotations

import json as _json
from typing import TYPE_CHECKING, Any, Mapping, Optional, Union

if TYPE_CHECKING:
    import pandas as pd


class RunResult:
    """What one run produced."""

    #: ``"flit"`` or ``"cluster"``.
    model: str
    #: The seed the run used.
    seed: int
    #: The values written into the scenario (sweeps), key to value.
    params: dict[str, Any]
    #: What ``clusterqos run FILE --seed SEED --json`` prints for this scenario (for a
    #: flit scenario, the one element of its array; for a cluster scenario, without
    #: the ``report`` directory).
    json: dict[str, Any]
    #: The report's figures (``id``, ``title``, axis labels and scales, ``series``).
    figures: list[dict[str, Any]]

    def __init__(self, data: Mapping[str, Any]):
        self.model = data["model"]
        self.seed = data["seed"]
        self.params = {k: v for k, v in data.get("params", [])}
        self.json = data["output"]
        self.figures = data["figures"]

    @staticmethod
    def from_json(text: str) -> "RunResult":
        """The result of :func:`clusterqos._native.run`'s JSON."""
        data = _json.loads(text)
        cls = FlitResult if data["model"] == "flit" else ClusterResult
        return cls(data)

    def _lead(self) -> dict[str, Any]:
        return {**self.params, "seed": self.seed} if self.params else {}

    @property
    def series(self) -> "pd.DataFrame":
        """Every point of every figure: ``figure, series, x, y``."""
        from clusterqos import frames

        return frames.series(self.figures)

    def plot(self, **kwargs: Any) -> list[Any]:
        """Draws the report's figures (:func:`clusterqos.plot.figures`)."""
        from clusterqos import plot

        return plot.figures(self, **kwargs)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} seed={self.seed}>"

    @property
    def name(self) -> str:
        """The scenario's name."""
        raise NotImplementedError


class FlitResult(RunResult):
    """A flit-network run (``scenarios/flit/``): latency and throughput per load point."""

    @property
    def name(self) -> str:
        return self.json["name"]

    @property
    def saturation(self) -> Optional[float]:
        """First swept rate (packets/node/cycle) past saturation, if any."""
        return self.json["saturation"]

    @property
    def points(self) -> "pd.DataFrame":
        """One row per point: rate, offered, accepted, latency (avg, p50, p99, max),
        packets, network latency, link utilisation, cycles, flit hops, saturated."""
        from clusterqos import frames

        return frames.flit_points(self.json)

    @property
    def classes(self) -> "pd.DataFrame":
        """One row per point and traffic class."""
        from clusterqos import frames

        return frames.flit_classes(self.json)

    @property
    def flows(self) -> "pd.DataFrame":
        """One row per point and CBR stream."""
        from clusterqos import frames

        return frames.flit_flows(self.json)


class ClusterResult(RunResult):
    """A thesis-scenario run (``scenarios/gulati/``): checks against published values."""

    @property
    def name(self) -> str:
        res = self.json["results"]
        return res[0]["name"] if res else ""

    @property
    def summary(self) -> dict[str, int]:
        """Counts: checks (values, bounds, orderings), shown; predictions, fits,
        identities; misses, not differentiated."""
        return self.json["summary"]

    @property
    def model_params(self) -> Optional[dict[str, Any]]:
        """T and Bmax measured on the model (scenarios under the manager), or None."""
        return self.json["model"]

    @property
    def checks(self) -> "pd.DataFrame":
        """One row per check: experiment, metric and qualifiers, unit, kind (value,
        bound, ordering, shown), role (prediction, fit, identity), published value and
        its source, measured value, deviation, ok, verdict (pass, miss, not
        differentiated, shown), note."""
        from clusterqos import frames

        return frames.checks(self.json["results"])

    @property
    def misses(self) -> int:
        """Checks that failed."""
        return int(self.summary["misses"])


class Reproduction(ClusterResult):
    """``reproduce gulati``: every thesis experiment's checks (the command's table)."""

    def __init__(self, data: Mapping[str, Any], seed: Optional[int] = None):
        figures = data.get("figures", [])
        out = {k: v for k, v in data.items() if k != "figures"}
        super().__init__(
            {"model": "cluster", "seed": seed, "params": [], "output": out, "figures": figures}
        )

    @property
    def name(self) -> str:
        return "gulati"

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<Reproduction {s['checks']} checks ({s['values']} values, {s['bounds']} bounds, "
            f"{s['orderings']} orderings): {s['predictions']} predictions, {s['fits']} fits, "
            f"{s['identities']} identities; {s['misses']} misses, "
            f"{s['not_differentiated']} not differentiated>"
        )


AnyResult = Union[FlitResult, ClusterResult]
