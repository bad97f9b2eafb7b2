"""The example notebook is committed executed, without errors, with small outputs, and
shows the thesis figure's checks and the flit latency curve. It is executed
by hand after a change: `jupyter nbconvert --to notebook --execute --inplace
examples/python-quickstart.ipynb` from `examples/` (see docs/python.md)."""

from __future__ import annotations

import json

from conftest import ROOT

NOTEBOOK = ROOT / "examples" / "python-quickstart.ipynb"


def test_the_notebook_is_executed_with_small_outputs_and_no_errors():
    assert NOTEBOOK.stat().st_size < 300_000
    nb = json.loads(NOTEBOOK.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] for c in code), "run every cell"
    outputs = [o for c in code for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    # Nothing on stderr (warnings): progress=False must not import tqdm.auto, which
    # warns in a notebook without ipywidgets.
    assert not [o for o in outputs if o.get("name") == "stderr"], "a warning was printed"
    text = json.dumps(outputs)
    # The thesis figure's checks (Bmax and the knee T of Fig 5.3) and two plots.
    assert "bmax" in text and "knee" in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2
