"""The plot helpers draw the report's figures: the same series, labels and scales."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import clusterqos as cq  # noqa: E402


def test_a_report_figure_is_drawn_with_its_data_labels_and_scales():
    fig = {
        "id": "f",
        "title": "Fig 5.1",
        "x_label": "message size (bytes)",
        "y_label": "latency (us)",
        "x_scale": "log2",
        "y_scale": "linear",
        "series": [
            {"name": "GM", "points": [[4, 10.0], [64, 12.5]], "style": "line-points"},
            {"name": "rate control", "points": [[4, 10.5], [64, 13.0]], "style": "step"},
        ],
        "x_range": None,
        "y_range": [0, 20],
        "caption": "a caption",
    }
    ax = cq.plot.figure(fig)
    lines = ax.get_lines()
    assert [l.get_label() for l in lines] == ["GM", "rate control"]
    assert list(lines[0].get_xdata()) == [4, 64] and list(lines[0].get_ydata()) == [10.0, 12.5]
    assert lines[1].get_drawstyle() == "steps-post"
    assert ax.get_xscale() == "log" and ax.get_xaxis().get_transform().base == 2
    assert ax.get_ylim() == (0, 20)
    assert ax.get_title() == "Fig 5.1" and ax.get_xlabel() == "message size (bytes)"
    plt.close("all")


def test_a_results_figures_and_a_sweeps_latency_curve(tiny_flit):
    r = cq.load(tiny_flit).run(seed=1)
    axes = cq.plot.figures(r)
    assert [a.get_title() for a in axes] == [f["title"] for f in r.figures]
    lat = r.figures[0]["series"][0]["points"]
    assert [list(p) for p in zip(axes[0].get_lines()[0].get_xdata(), axes[0].get_lines()[0].get_ydata())] == [list(p) for p in lat]
    sw = cq.sweep(tiny_flit, over={"network.router.buffer": [2, 4]}, seeds=[1, 2], workers=1, progress=False)
    ax = cq.plot.latency_vs_load(sw)
    labels = [l.get_label() for l in ax.get_lines()]
    assert labels == ["network.router.buffer=2", "network.router.buffer=4"]
    pts = sw.points
    want = pts[pts["network.router.buffer"] == 4].groupby("rate")["latency_avg"].mean().tolist()
    assert list(ax.get_lines()[1].get_ydata()) == want
    plt.close("all")
