"""Scenarios from Python: load a TOML file or a shipped scenario by name,
or build one from a dict with the same schema — thesis scenarios
(``scenarios/gulati/README.md``) and flit-network scenarios (``docs/flit-network.md``)
alike — change values by the same dotted keys sweeps use, and run it.

A scenario is its TOML text and a file name (used in error messages and to resolve
relative paths inside it, as ``clusterqos run`` does). It is validated when made: a
mistake raises :class:`clusterqos.ScenarioError` with the command's one-line message,
``file:line: what is wrong``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Union

from clusterqos import _native
from clusterqos.results import ClusterResult, FlitResult, Reproduction, RunResult

PathLike = Union[str, "os.PathLike[str]"]


class Scenario:
    """A validated scenario (thesis or flit network)."""

    __slots__ = ("file", "text", "model")

    #: Name used in errors; relative paths inside the scenario are relative to its
    #: directory.
    file: str
    #: The TOML text.
    text: str
    #: ``"flit"`` (a ``[network]`` table) or ``"cluster"`` (a thesis scenario).
    model: str

    def __init__(self, text: str, file: str = "<scenario>"):
        """Validates ``text`` (TOML) named ``file``; raises ``ScenarioError``."""
        _native.validate(file, text)
        self.file = file
        self.text = text
        self.model = _native.model(text)

    @classmethod
    def load(cls, path: PathLike) -> "Scenario":
        """A scenario file, or a shipped thesis scenario by name (``"idt-sweep"``)."""
        file, text = _native.resolve(os.fspath(path))
        return cls(text, file)

    @classmethod
    def from_toml(cls, text: str, file: str = "<scenario>") -> "Scenario":
        """A scenario from TOML text."""
        return cls(text, file)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], file: str = "<dict>") -> "Scenario":
        """A scenario from a dict with the file's schema (tables are dicts, arrays of
        tables are lists of dicts). Errors name ``file`` and the line of the TOML it
        is written as (:attr:`text`)."""
        text = _native.json_to_toml(json.dumps(data, allow_nan=False))
        return cls(text, file)

    @staticmethod
    def builtin_names() -> list[str]:
        """Names of the shipped thesis scenarios (``reproduce gulati`` runs them all)."""
        return list(_native.builtin_names())

    def to_dict(self) -> dict[str, Any]:
        """The scenario as a dict (the same schema)."""
        return json.loads(_native.toml_to_json(self.file, self.text))

    @property
    def name(self) -> str:
        """The scenario's ``name``."""
        return str(self.to_dict().get("name", ""))

    def with_values(self, values: Mapping[str, Any]) -> "Scenario":
        """The same scenario with values changed, by the dotted keys of sweeps:
        ``{"network.router.buffer": 4, "network.classes.data.rate": 0.01}`` (array
        elements by index or by ``name``). The rest of the text is kept as written."""
        text = _native.with_params(self.file, self.text, _pairs(values))
        return Scenario(text, self.file)

    def run(
        self,
        seed: Optional[int] = None,
        quick: bool = False,
        report: Optional[PathLike] = None,
    ) -> Union[FlitResult, ClusterResult]:
        """Runs it as ``clusterqos run FILE [--seed SEED] [--quick]`` does: the same
        results (``result.json`` is the command's ``--json``) for the same seed.
        ``report``: also write the command's report directory there."""
        out = _native.run(
            self.file,
            self.text,
            "[]",
            seed,
            quick,
            os.fspath(report) if report is not None else None,
        )
        return RunResult.from_json(out)  # type: ignore[return-value]

    def __reduce__(self) -> Any:
        return (_restore, (self.text, self.file, self.model))

    def __repr__(self) -> str:
        return f"<Scenario {self.file!r} ({self.model})>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scenario) and (self.file, self.text) == (other.file, other.text)

    def __hash__(self) -> int:
        return hash((self.file, self.text))


def _restore(text: str, file: str, model: str) -> Scenario:
    s = Scenario.__new__(Scenario)
    s.text, s.file, s.model = text, file, model
    return s


def _pairs(values: Mapping[str, Any]) -> str:
    return json.dumps([[str(k), v] for k, v in values.items()], allow_nan=False)


ScenarioLike = Union[Scenario, PathLike, Mapping[str, Any]]


def as_scenario(s: ScenarioLike) -> Scenario:
    """A :class:`Scenario` from a scenario, a path or shipped name, or a dict."""
    if isinstance(s, Scenario):
        return s
    if isinstance(s, Mapping):
        return Scenario.from_dict(s)
    return Scenario.load(s)


def load(path: PathLike) -> Scenario:
    """:meth:`Scenario.load`."""
    return Scenario.load(path)


def run(
    scenario: ScenarioLike,
    seed: Optional[int] = None,
    quick: bool = False,
    report: Optional[PathLike] = None,
) -> Union[FlitResult, ClusterResult]:
    """Loads (if needed) and runs a scenario: :meth:`Scenario.run`."""
    return as_scenario(scenario).run(seed=seed, quick=quick, report=report)


def reproduce(
    only: Optional[str] = None,
    seed: Optional[int] = None,
    quick: bool = False,
    report: Optional[PathLike] = None,
    progress: bool = True,
) -> Reproduction:
    """``clusterqos reproduce gulati [--only NAME] [--seed SEED] [--quick]``: every
    experiment of the thesis (or one), checked against the published values. The
    result's ``checks`` is the command's table as a DataFrame; ``json`` its
    ``--json`` (without the report directory). ``progress`` shows a bar (tqdm)."""
    from clusterqos._progress import bar as progress_bar

    names = [only] if only else Scenario.builtin_names()
    with progress_bar(len(names), progress, "scenario") as bar:
        started: list[str] = []

        def step(name: str) -> None:
            if started:
                bar.update(1)
            started.append(name)
            bar.set_postfix_str(name)

        out = _native.reproduce(
            only, seed, quick, os.fspath(report) if report is not None else None, step
        )
        bar.update(len(names) - bar.n)
    return Reproduction(json.loads(out), seed)
