"""Results as pandas DataFrames: one row per point, class, stream, check or
figure point, built from the JSON the command prints with ``--json``. Every number is
the JSON's value itself (the same IEEE double), never reformatted.

Column names follow the JSON's fields, flattened with ``_`` (``latency_avg`` is
``total.latency.avg`` of a flit point).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

import pandas as pd

#: Columns of :func:`flit_points`.
POINT_COLUMNS = [
    "rate",
    "offered",
    "accepted",
    "latency_avg",
    "latency_p50",
    "latency_p99",
    "latency_max",
    "packets",
    "network_latency",
    "link_utilisation_avg",
    "link_utilisation_max",
    "cycles",
    "flit_hops",
    "saturated",
]

CLASS_COLUMNS = [
    "rate",
    "class",
    "offered",
    "accepted",
    "latency_avg",
    "latency_p50",
    "latency_p99",
    "latency_max",
    "packets",
    "network_latency",
]

FLOW_COLUMNS = [
    "rate",
    "flow",
    "accepted",
    "latency_avg",
    "latency_p50",
    "latency_p99",
    "latency_max",
    "packets",
]

CHECK_COLUMNS = [
    "experiment",
    "metric",
    "case",
    "flow",
    "reference",
    "at",
    "window",
    "label",
    "unit",
    "kind",
    "role",
    "mode",
    "tolerance",
    "published",
    "source",
    "measured",
    "deviation",
    "ok",
    "verdict",
    "differentiated",
    "mechanism",
    "note",
]

SERIES_COLUMNS = ["figure", "series", "x", "y"]


def _latency(prefix: str, lat: Mapping[str, Any]) -> dict[str, Any]:
    return {
        f"{prefix}avg": lat["avg"],
        f"{prefix}p50": lat["p50"],
        f"{prefix}p99": lat["p99"],
        f"{prefix}max": lat["max"],
        "packets": lat["packets"],
    }


def _frame(rows: list[dict[str, Any]], columns: Sequence[str], lead: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(lead) + list(columns))


def flit_points(run: Mapping[str, Any], lead: Optional[Mapping[str, Any]] = None) -> pd.DataFrame:
    """One row per point of a flit run (all classes together)."""
    lead = dict(lead or {})
    rows = []
    for p in run["points"]:
        r = p["result"]
        t = r["total"]
        rows.append(
            {
                **lead,
                "rate": p["rate"],
                "offered": t["offered"],
                "accepted": t["accepted"],
                **_latency("latency_", t["latency"]),
                "network_latency": t["network_latency"],
                "link_utilisation_avg": r["link_utilisation_avg"],
                "link_utilisation_max": r["link_utilisation_max"],
                "cycles": r["cycles"],
                "flit_hops": r["flit_hops"],
                "saturated": r["saturated"],
            }
        )
    return _frame(rows, POINT_COLUMNS, list(lead))


def flit_classes(run: Mapping[str, Any], lead: Optional[Mapping[str, Any]] = None) -> pd.DataFrame:
    """One row per point and traffic class of a flit run."""
    lead = dict(lead or {})
    rows = []
    for p in run["points"]:
        for c in p["result"]["classes"]:
            rows.append(
                {
                    **lead,
                    "rate": p["rate"],
                    "class": c["name"],
                    "offered": c["offered"],
                    "accepted": c["accepted"],
                    **_latency("latency_", c["latency"]),
                    "network_latency": c["network_latency"],
                }
            )
    return _frame(rows, CLASS_COLUMNS, list(lead))


def flit_flows(run: Mapping[str, Any], lead: Optional[Mapping[str, Any]] = None) -> pd.DataFrame:
    """One row per point and CBR stream of a flit run."""
    lead = dict(lead or {})
    rows = []
    for p in run["points"]:
        for f in p["result"]["flows"]:
            rows.append(
                {
                    **lead,
                    "rate": p["rate"],
                    "flow": f["name"],
                    "accepted": f["accepted"],
                    **_latency("latency_", f["latency"]),
                }
            )
    return _frame(rows, FLOW_COLUMNS, list(lead))


def _mode(mode: Any) -> tuple[str, Optional[float]]:
    if isinstance(mode, dict):
        (name, tol), = mode.items()
        return name, tol
    return str(mode), None


def _source(pub: Optional[Mapping[str, Any]]) -> Optional[str]:
    if not pub:
        return None
    src = pub["source"]
    if isinstance(src, dict):
        (kind, text), = src.items()
        return f"{kind}: {text}"
    return str(src)


def check_row(c: Mapping[str, Any]) -> dict[str, Any]:
    """A check's JSON as a row: its kind (value / bound / ordering / shown), role
    (prediction / fit / identity), verdict (pass / miss / not differentiated / shown)
    and, for an ordering, whether the runs tell its two sides apart."""
    mode, tol = _mode(c["mode"])
    ident = c["id"]
    pub = c.get("published")
    return {
        "experiment": ident["experiment"],
        "metric": ident["metric"],
        "case": ident.get("case"),
        "flow": ident.get("flow"),
        "reference": ident.get("reference"),
        "at": ident.get("at"),
        "window": ident.get("window"),
        "label": c["label"],
        "unit": c["unit"],
        "kind": c["kind"],
        "role": c["role"],
        "mode": mode,
        "tolerance": tol,
        "published": pub["value"] if pub else None,
        "source": _source(pub),
        "measured": c["measured"],
        "deviation": c["deviation"],
        "ok": c["ok"],
        "verdict": c["verdict"],
        "differentiated": c.get("differentiated"),
        "mechanism": c.get("mechanism"),
        "note": c.get("note"),
    }


def checks(results: Iterable[Mapping[str, Any]], lead: Optional[Mapping[str, Any]] = None) -> pd.DataFrame:
    """One row per check of a cluster run's (or a reproduction's) ``results``."""
    lead = dict(lead or {})
    rows = [{**lead, **check_row(c)} for r in results for c in r["checks"]]
    return _frame(rows, CHECK_COLUMNS, list(lead))


def series(figures: Iterable[Mapping[str, Any]], lead: Optional[Mapping[str, Any]] = None) -> pd.DataFrame:
    """One row per point of every series of every figure."""
    lead = dict(lead or {})
    rows = [
        {**lead, "figure": f["id"], "series": s["name"], "x": x, "y": y}
        for f in figures
        for s in f["series"]
        for (x, y) in s["points"]
    ]
    return _frame(rows, SERIES_COLUMNS, list(lead))
