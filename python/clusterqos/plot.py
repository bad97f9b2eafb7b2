"""Plot helpers: the report's figures drawn with matplotlib — the same
axes, labels, scales, ranges, series styles and captions as the SVG plots of
``clusterqos run`` / ``reproduce`` reports — plus latency against load across a sweep.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

from clusterqos.results import RunResult

_BASES = {"log2": 2, "log10": 10}


def figure(fig: Mapping[str, Any], ax: Any = None) -> Any:
    """Draws one report figure (a dict of ``result.figures``) on ``ax`` (a new one if
    None) and returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots()
    for s in fig["series"]:
        if not s["points"]:
            continue
        xs, ys = zip(*s["points"])
        style = s.get("style", "line-points")
        if style == "scatter":
            ax.plot(xs, ys, linestyle="none", marker="o", label=s["name"])
        elif style == "step":
            ax.step(xs, ys, where="post", label=s["name"])
        elif style == "line":
            ax.plot(xs, ys, label=s["name"])
        else:
            ax.plot(xs, ys, marker="o", markersize=3, label=s["name"])
    for axis, key in (("x", "x_scale"), ("y", "y_scale")):
        scale = fig.get(key, "linear")
        if scale in _BASES:
            getattr(ax, f"set_{axis}scale")("log", base=_BASES[scale])
    if fig.get("x_range"):
        ax.set_xlim(*fig["x_range"])
    if fig.get("y_range"):
        ax.set_ylim(*fig["y_range"])
    elif fig.get("y_scale", "linear") == "linear":
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
    ax.set_title(fig["title"], fontsize="medium")
    ax.set_xlabel(fig["x_label"])
    ax.set_ylabel(fig["y_label"])
    if len(fig["series"]) > 1:
        ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    if fig.get("caption"):
        ax.annotate(
            fig["caption"],
            (0, 0),
            xycoords="axes fraction",
            xytext=(0, -34),
            textcoords="offset points",
            fontsize="x-small",
            va="top",
            wrap=True,
        )
    return ax


def figures(
    result: Union[RunResult, Sequence[Mapping[str, Any]]],
    only: Optional[Sequence[str]] = None,
    ncols: int = 2,
    size: tuple[float, float] = (5.0, 3.6),
) -> list[Any]:
    """Draws every figure of a result (or a list of figure dicts), or those whose
    ``id`` is in ``only``, in a grid; returns the axes."""
    import matplotlib.pyplot as plt

    figs = result.figures if isinstance(result, RunResult) else list(result)
    if only is not None:
        figs = [f for f in figs if f["id"] in only]
    if not figs:
        return []
    ncols = max(1, min(ncols, len(figs)))
    nrows = (len(figs) + ncols - 1) // ncols
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False
    )
    out = []
    for i, f in enumerate(figs):
        out.append(figure(f, axes[i // ncols][i % ncols]))
    for j in range(len(figs), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    fig.tight_layout()
    return out


def latency_vs_load(
    data: Any,
    by: Optional[Sequence[str]] = None,
    ax: Any = None,
    y: str = "latency_avg",
) -> Any:
    """Latency (``y``) against offered load (flits/node/cycle) of a flit result or
    sweep (anything with a ``points`` DataFrame, or the DataFrame itself), one line
    per combination of the ``by`` columns (default: the sweep's keys), averaged over
    seeds at each swept rate."""
    import matplotlib.pyplot as plt

    df = data.points if hasattr(data, "points") else data
    if by is None:
        by = list(getattr(data, "keys", []))
    if ax is None:
        _, ax = plt.subplots()
    groups = df.groupby(list(by), sort=False) if by else [((), df)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{k}={v}" for k, v in zip(by, key)) or None
        # Several seeds: the mean over seeds at each swept rate.
        g = g.groupby("rate", sort=True)[["offered", y]].mean()
        ax.plot(g["offered"], g[y], marker="o", markersize=3, label=label)
    ax.set_xlabel("offered load (flits/node/cycle)")
    ax.set_ylabel("average packet latency (cycles)" if y == "latency_avg" else y)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if by:
        ax.legend(fontsize="small")
    return ax
