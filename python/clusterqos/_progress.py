"""Progress bars (tqdm) for sweeps and reproductions.

``tqdm.auto`` picks the notebook widget when there is one, but importing it in a
notebook without ipywidgets prints a warning; a disabled bar never needs the widget,
so it comes from plain ``tqdm`` and prints nothing.
"""

from __future__ import annotations

from typing import Any


def bar(total: int, progress: bool, unit: str) -> Any:
    """A tqdm bar over ``total`` items, shown only when ``progress``."""
    if progress:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm(total=total, disable=not progress, unit=unit)
