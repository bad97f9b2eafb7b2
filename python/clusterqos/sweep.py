"""Parameter sweeps on a local process pool, Dask or Ray.

``sweep(scenario, over={key: [values]}, seeds=[...])`` runs the scenario at every
combination of the values (the first key varying slowest), each at every seed. The
expansion is the same as ``clusterqos sweep`` (the Rust library does it, and writes
and loads every combination once first, so a bad key or value raises before anything
runs). Each run is a pure task (:func:`clusterqos._tasks.run_task`: scenario text,
values and seed in, results out): the engine does the scheduling, retries and data
movement, and the results are the same whatever the engine, the number of workers or
the order runs finish in; they come back in task order.

Engines:

- default: a local process pool of ``workers`` processes (default: one per core;
  ``workers=1`` runs in this process);
- ``client=``: a ``dask.distributed.Client`` (a ``LocalCluster`` or a real cluster;
  :func:`local_cluster` makes a ``LocalCluster`` with :data:`DASK_LOW_OVERHEAD`);
- ``address=``: a Ray cluster (``"auto"``, ``"ray://HOST:10001"``, or ``"local"`` to
  start one on this machine); when this process is already connected to Ray
  (``ray.init`` was called), that connection is used.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Union

from clusterqos import _native
from clusterqos._tasks import run_task
from clusterqos.results import ClusterResult, FlitResult, RunResult
from clusterqos.scenario import ScenarioLike, as_scenario

if TYPE_CHECKING:
    import pandas as pd

Seeds = Union[Iterable[int], str, None]

#: Dask settings for CPU-bound sweeps on a few cores. Every Dask server (scheduler,
#: nanny, worker) runs periodic housekeeping on its event loop, and on a machine whose
#: cores all run tasks, that CPU is taken from the tasks. An idle 2-worker
#: ``LocalCluster`` uses about 0.09 to 0.11 of a core with Dask's defaults (5 % of two
#: cores: the speed-up loses as much), about 0.015 with these (CPU of each thread over
#: 10 s; docs/python.md "Benchmark"). Each setting, its default, and the idle CPU it
#: saves in such a cluster:
DASK_LOW_OVERHEAD: dict[str, Any] = {
    # Each worker samples its threads' stacks for the dashboard's profile every 10 ms:
    # 33 ms of CPU per second for two workers. The tasks are native code.
    "distributed.worker.profile.enabled": False,
    # Every server measures its event loop's responsiveness every 20 ms: about 40 ms/s
    # in all. 500 ms is what Dask's own test suite uses; a loop blocked for longer
    # than the warning limit (3 s) is still reported.
    "distributed.admin.tick.interval": "500ms",
    # Every server reads its process's CPU, memory and network use for the dashboard
    # every 500 ms: about 7 ms/s.
    "distributed.admin.system-monitor.interval": "2s",
    # Nannies and workers check the worker's memory every 100 ms: about 13 ms/s
    # (spilling, pausing and the nanny's kill at the memory limit act up to a second
    # later).
    "distributed.worker.memory.monitor-interval": "1s",
}


class SweepResult:
    """Every run of a sweep, in task order."""

    #: The scenario's model: ``"flit"`` or ``"cluster"``.
    model: str
    #: The swept keys, in order.
    keys: list[str]
    #: Each run's result (its ``params`` and ``seed`` say which run it is).
    runs: list[RunResult]

    def __init__(self, model: str, keys: list[str], runs: list[RunResult]):
        self.model, self.keys, self.runs = model, keys, runs

    def _cat(self, build: Any) -> "pd.DataFrame":
        import pandas as pd

        parts = [build(r.json, {**r.params, "seed": r.seed}) for r in self.runs]
        if not parts:
            return pd.DataFrame()
        return pd.concat(parts, ignore_index=True)

    @property
    def points(self) -> "pd.DataFrame":
        """Flit sweeps: one row per run and load point, the swept keys and ``seed``
        first (columns of :attr:`FlitResult.points`)."""
        from clusterqos import frames

        self._need("flit", "points")
        return self._cat(frames.flit_points)

    @property
    def classes(self) -> "pd.DataFrame":
        """Flit sweeps: one row per run, load point and traffic class."""
        from clusterqos import frames

        self._need("flit", "classes")
        return self._cat(frames.flit_classes)

    @property
    def flows(self) -> "pd.DataFrame":
        """Flit sweeps: one row per run, load point and CBR stream."""
        from clusterqos import frames

        self._need("flit", "flows")
        return self._cat(frames.flit_flows)

    @property
    def checks(self) -> "pd.DataFrame":
        """Cluster sweeps: one row per run and check, the swept keys and ``seed`` first."""
        from clusterqos import frames

        self._need("cluster", "checks")
        return self._cat(lambda j, lead: frames.checks(j["results"], lead))

    @property
    def frame(self) -> "pd.DataFrame":
        """The main table: :attr:`points` (flit) or :attr:`checks` (cluster)."""
        return self.points if self.model == "flit" else self.checks

    def _need(self, model: str, what: str) -> None:
        if self.model != model:
            raise AttributeError(f"a {self.model} sweep has no {what}")

    def json(self) -> list[dict[str, Any]]:
        """Every run as ``clusterqos sweep --json`` lists it: ``params``, ``seed``,
        ``result``."""
        return [{"params": r.params, "seed": r.seed, "result": r.json} for r in self.runs]

    def __len__(self) -> int:
        return len(self.runs)

    def __repr__(self) -> str:
        return f"<SweepResult {self.model} over {self.keys}: {len(self.runs)} runs>"


def _seeds(seeds: Seeds) -> Optional[list[int]]:
    if seeds is None:
        return None
    if isinstance(seeds, str):
        return list(_native.parse_seeds(seeds))
    out = [int(s) for s in seeds]
    if any(s < 0 for s in out):
        raise ValueError("seeds must be non-negative integers")
    return out


def plan(
    scenario: ScenarioLike,
    over: Optional[Mapping[str, Sequence[Any]]] = None,
    seeds: Seeds = None,
) -> list[tuple[list[list[Any]], Optional[int]]]:
    """The sweep's tasks in order, as ``[params, seed]`` with params as ``[key,
    value]`` pairs; raises ``ScenarioError`` if a combination is wrong."""
    s = as_scenario(scenario)
    over = dict(over or {})
    for k, v in over.items():
        if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
            raise TypeError(f"over[{k!r}] must be a list of values, not {type(v).__name__}")
    pairs = [[str(k), list(v)] for k, v in over.items()]
    return [tuple(t) for t in json.loads(_native.tasks(s.file, s.text, json.dumps(pairs), _seeds(seeds)))]  # type: ignore[misc]


def sweep(
    scenario: ScenarioLike,
    over: Optional[Mapping[str, Sequence[Any]]] = None,
    seeds: Seeds = None,
    *,
    quick: bool = False,
    workers: Optional[int] = None,
    client: Any = None,
    address: Optional[str] = None,
    retries: int = 1,
    progress: bool = True,
) -> SweepResult:
    """Runs ``scenario`` at every combination of ``over``'s values and every seed.

    ``scenario``: a :class:`Scenario`, a path or shipped name, or a dict.
    ``over``: dotted keys of the scenario and the values each takes, e.g.
    ``{"network.router.buffer": [4, 8], "network.classes.data.rate": [0.002, 0.004]}``.
    ``seeds``: a list, a range, or ``"1..10"`` (1 to 10); default: the scenario's own.
    ``quick``: reduced run lengths. ``workers``: local processes (default: cores).
    ``client``: a Dask distributed client. ``address``: a Ray cluster.
    ``retries``: how often the engine may rerun a task whose worker failed (Dask, Ray).
    ``progress``: show a progress bar (tqdm).
    """
    if client is not None and address is not None:
        raise ValueError("give either client= (Dask) or address= (Ray), not both")
    s = as_scenario(scenario)
    tasks = plan(s, over, seeds)
    args = [(s.file, s.text, json.dumps(p), seed, quick) for p, seed in tasks]
    from clusterqos._progress import bar as progress_bar

    def bar() -> Any:
        # Made once the tasks are submitted: the local pool forks its workers first,
        # before tqdm's monitor thread exists.
        return progress_bar(len(args), progress, "run")

    if client is not None:
        outs = _dask(client, args, retries, bar)
    elif address is not None:
        outs = _ray(address, args, retries, bar)
    else:
        outs = _local(args, workers, bar)
    runs = [RunResult.from_json(o) for o in outs]
    return SweepResult(s.model, [str(k) for k in (over or {})], runs)


def _local(args: list[tuple[Any, ...]], workers: Optional[int], make_bar: Any) -> list[str]:
    n = workers if workers is not None else (os.cpu_count() or 1)
    if n < 1:
        raise ValueError("workers must be at least 1")
    if n == 1 or len(args) <= 1:
        outs = []
        with make_bar() as bar:
            for a in args:
                outs.append(run_task(*a))
                bar.update(1)
        return outs
    results: list[Optional[str]] = [None] * len(args)
    with ProcessPoolExecutor(max_workers=min(n, len(args))) as pool:
        futures = {pool.submit(run_task, *a): i for i, a in enumerate(args)}
        try:
            with make_bar() as bar:
                for f in as_completed(futures):
                    results[futures[f]] = f.result()
                    bar.update(1)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    return [r for r in results if r is not None]


def local_cluster(workers: Optional[int] = None, **kwargs: Any) -> Any:
    """A Dask ``LocalCluster`` for sweeps on this machine: ``workers`` single-threaded
    worker processes (default: one per core), no dashboard, and
    :data:`DASK_LOW_OVERHEAD` applied to its scheduler, nannies and workers (workers
    that ``scale`` adds later get the settings in force then). ``kwargs`` go to
    ``LocalCluster``. Use it as ``with local_cluster(2) as c, Client(c) as client:``.

    On a cluster started otherwise (``dask scheduler``, ``dask worker``), the same
    settings come from Dask's configuration (a YAML file or ``DASK_...`` variables).
    """
    import dask
    from distributed import LocalCluster

    n = workers if workers is not None else (os.cpu_count() or 1)
    if n < 1:
        raise ValueError("workers must be at least 1")
    opts: dict[str, Any] = {
        "n_workers": n,
        "threads_per_worker": 1,
        "processes": True,
        "dashboard_address": None,
        **kwargs,
    }
    with dask.config.set(DASK_LOW_OVERHEAD):
        return LocalCluster(**opts)


def _dask(client: Any, args: list[tuple[Any, ...]], retries: int, make_bar: Any) -> list[str]:
    from distributed import as_completed as dask_completed

    if not args:
        return []
    # One graph for all the tasks: one message to the scheduler, not one per task. The
    # tasks are pure (keyed by their inputs), so a run listed twice (a repeated seed or
    # value) is one Dask task whose result fills every place it has in the order.
    futures = client.map(run_task, *zip(*args), pure=True, retries=retries)
    where: dict[str, list[int]] = {}
    unique = []
    for i, f in enumerate(futures):
        if f.key not in where:
            where[f.key] = []
            unique.append(f)
        where[f.key].append(i)
    results: list[Optional[str]] = [None] * len(args)
    try:
        with make_bar() as bar:
            for f in dask_completed(unique):
                out = f.result()
                for i in where[f.key]:
                    results[i] = out
                bar.update(len(where[f.key]))
    except BaseException:
        client.cancel(futures)
        raise
    return [r for r in results if r is not None]


def _ray(address: str, args: list[tuple[Any, ...]], retries: int, make_bar: Any) -> list[str]:
    import ray

    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, include_dashboard=False)
    remote = ray.remote(num_cpus=1, max_retries=retries)(run_task)
    refs = [remote.remote(*a) for a in args]
    index = {r: i for i, r in enumerate(refs)}
    results: list[Optional[str]] = [None] * len(args)
    pending = list(refs)
    try:
        with make_bar() as bar:
            while pending:
                # Whatever finished within a fifth of a second (one call per batch,
                # not per task: waiting on one ref at a time is quadratic in the refs).
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
                for r in done:
                    try:
                        results[index[r]] = ray.get(r)
                    except ray.exceptions.RayTaskError as e:
                        cause = getattr(e, "cause", None)
                        raise (cause if isinstance(cause, BaseException) else e) from None
                    bar.update(1)
    except BaseException:
        for r in pending:
            ray.cancel(r)
        raise
    return [r for r in results if r is not None]


__all__ = [
    "sweep",
    "plan",
    "local_cluster",
    "DASK_LOW_OVERHEAD",
    "SweepResult",
    "FlitResult",
    "ClusterResult",
]
