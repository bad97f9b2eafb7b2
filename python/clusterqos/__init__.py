"""clusterqos from Python: the simulator, parameter sweeps and the bandwidth
manager's clients over the same Rust core as the ``clusterqos`` command.

>>> import clusterqos as cq
>>> s = cq.load("scenarios/flit/mesh8-reference.toml")        # or cq.Scenario.from_dict({...})
>>> r = s.run(seed=1, quick=True)                             # = clusterqos run FILE --seed 1 --quick --json
>>> r.points                                                  # pandas: one row per load point
>>> rep = cq.reproduce(only="idt-sweep")                      # = clusterqos reproduce gulati --only idt-sweep
>>> rep.checks                                                # published against measured
>>> sw = cq.sweep(s, over={"network.router.buffer": [4, 8]}, seeds=range(1, 4))
>>> sw.points                                                 # the swept keys and seed first
>>> cq.plot.latency_vs_load(sw)

Sweeps run on a local process pool, on Dask (``client=``) or on Ray (``address=``);
results depend only on the scenario, the values and the seeds. Errors raise
:class:`ScenarioError`, :class:`SimulationError` or :class:`ManagerError` with the
command's one-line message (``file:line: ...``).
"""

from clusterqos import plot
from clusterqos._native import (
    VERSION as __version__,
    ClusterqosError,
    ManagerError,
    ScenarioError,
    SimulationError,
)
from clusterqos.manager import Agent, Grant, Manager, Rejection, Status
from clusterqos.results import ClusterResult, FlitResult, Reproduction, RunResult
from clusterqos.scenario import Scenario, load, reproduce, run
from clusterqos.sweep import DASK_LOW_OVERHEAD, SweepResult, local_cluster, plan, sweep

__all__ = [
    "Agent",
    "ClusterResult",
    "ClusterqosError",
    "DASK_LOW_OVERHEAD",
    "FlitResult",
    "Grant",
    "Manager",
    "ManagerError",
    "Rejection",
    "Reproduction",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "SimulationError",
    "Status",
    "SweepResult",
    "__version__",
    "load",
    "local_cluster",
    "plan",
    "plot",
    "reproduce",
    "run",
    "sweep",
]
