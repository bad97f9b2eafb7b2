"""Sweep engine benchmark: N small flit scenarios (one seed each)
run sequentially in this process, then as one sweep on a Dask ``LocalCluster`` of W
single-threaded worker processes. Prints the speed-up and the scheduling overhead per
task, and checks that both give the same results.

    python -m clusterqos.bench [--tasks 200] [--workers 2] [--cycles 80000] [--repeat 3]
                               [--dask-defaults]

The cluster is :func:`clusterqos.local_cluster` (single-threaded worker processes with
:data:`clusterqos.DASK_LOW_OVERHEAD`: the Dask settings for CPU-bound sweeps), or with
``--dask-defaults`` the same ``LocalCluster`` with Dask's default settings.

A task is a 4x4 mesh at two load points of 80 000 measured cycles: about 0.13 s of CPU
in the optimised build, small next to a real sweep point yet long enough that a Dask
task's own cost (about 5 ms of scheduler, client and worker CPU with the low-overhead
settings, 10 ms or more with Dask's defaults, docs/python.md) stays a small fraction of
it, which a 1.8x speed-up on two cores needs.

Build the extension optimised first (``maturin develop --release``): a debug build
measures the debug simulator. Definitions:

- speed-up = sequential wall time / Dask wall time (the cluster already started and
  its workers warm: started once, as a user's cluster is), each the shortest of
  ``--repeat`` runs (bursts of other processes only ever lengthen a run); the two
  alternate, and the ratio of each repetition's pair is printed too;
- overhead per task = (W x Dask wall time - sequential wall time) / N: worker time not
  spent simulating — submission, scheduling, (de)serialisation, result transfer — per
  task; also the round trip of N no-op tasks on the same cluster, per task;
- CPU figures (less sensitive to other load than wall times, though the cluster's idle
  housekeeping grows with the wall time): CPU seconds used by this process and the cluster's
  processes (client, scheduler, nannies, workers) during the sequential run and the
  Dask sweep; cpu overhead per task = their difference / N; speed-up bound from CPU =
  W x sequential CPU / Dask CPU, the speed-up W cores would give if the engine kept
  them all busy (the wall-clock speed-up cannot exceed it). The sequential CPU
  includes the cluster idling beside the sequential run (cluster idle CPU: the CPU of
  every process but this process's main thread, which runs the sequential sweep), and
  the Dask CPU includes the same housekeeping over its shorter run, so this bound
  counts the housekeeping as if it were work; the bound from the tasks' CPU = W x the
  main thread's CPU in the sequential run / Dask CPU, counts it as the cost it is.

The machine's load average is printed before and after: other processes share the
cores, and the wall-clock figures are only meaningful on an otherwise idle machine
(with Linux's autogroup scheduling, all the processes started from one terminal share
one CPU share under contention, so a busy machine caps the speed-up near 1).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import clusterqos as cq

SCENARIO = """name = "bench-small"
description = "4x4 mesh, DOR, 2 VLs x 8 flits, 8-flit packets, uniform traffic, two load points"

[network]
topology = {{ kind = "mesh", k = 4 }}
seed = 1
phases = {{ warmup = {warmup}, measure = {measure}, drain_max = {measure} }}

[network.router]
buffer = 8
delays = "booksim"

[[network.classes]]
name = "data"
vls = [0, 1]
packet_flits = 8
rate = 0.02
process = "bernoulli"
pattern = {{ kind = "uniform" }}

[sweep]
class = "data"
rates = [0.01, 0.03]
"""


def noop(x: int) -> int:
    """A task that does nothing (for the engine's own round trip)."""
    return x


def _forgotten(client: Any) -> None:
    """Waits until the scheduler holds no task (released futures are forgotten
    asynchronously)."""
    while client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
        time.sleep(0.05)


def _cpu() -> float:
    """CPU seconds used so far by this process and its children (the cluster's
    nannies and workers)."""
    import psutil  # a dependency of distributed

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _load() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cycles", type=int, default=80_000, help="measured cycles per load point")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the shortest counts")
    ap.add_argument(
        "--dask-defaults",
        action="store_true",
        help="start the cluster with Dask's default settings, not DASK_LOW_OVERHEAD",
    )
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    s = cq.Scenario(SCENARIO.format(warmup=a.cycles // 5, measure=a.cycles), "bench-small.toml")
    seeds = list(range(1, a.tasks + 1))
    load_before = _load()

    t = time.perf_counter()
    one = cq.run(s, seed=1)
    first = time.perf_counter() - t

    t = time.perf_counter()
    if a.dask_defaults:
        cluster = LocalCluster(
            n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
    else:
        cluster = cq.local_cluster(a.workers)
    with cluster, Client(cluster) as client:
        t_start = time.perf_counter() - t
        # Warm the workers (import the package) before timing, as a running cluster is.
        client.run(lambda: __import__("clusterqos._tasks"))
        # Sequential and Dask runs alternate, so both see the same background load.
        seqs, dasks, noops, seq_cpu, seq_main, dask_cpu = [], [], [], [], [], []
        for _ in range(max(1, a.repeat)):
            c, m, t = _cpu(), time.thread_time(), time.perf_counter()
            seq = cq.sweep(s, seeds=seeds, workers=1, progress=False)
            seqs.append(time.perf_counter() - t)
            seq_main.append(time.thread_time() - m)
            seq_cpu.append(_cpu() - c)
            t = time.perf_counter()
            futs = client.map(noop, range(a.tasks), pure=False)
            client.gather(futs)
            noops.append(time.perf_counter() - t)
            del futs
            _forgotten(client)
            c, t = _cpu(), time.perf_counter()
            dask = cq.sweep(s, seeds=seeds, client=client, progress=False)
            dasks.append(time.perf_counter() - t)
            dask_cpu.append(_cpu() - c)
            # Sweep tasks are pure (keyed by their inputs): the next repetition must not
            # find these results still held by the scheduler.
            _forgotten(client)
    load_after = _load()
    t_seq, t_dask, t_noop = min(seqs), min(dasks), min(noops)
    c_seq, c_dask = min(seq_cpu), min(dask_cpu)
    c_main = min(seq_main)
    # (The process CPU counts in clock ticks, the thread CPU finer: never below 0.)
    idle = max(0.0, min(x - y for x, y in zip(seq_cpu, seq_main)))

    same = dask.json() == seq.json()
    figures = {
        "tasks": a.tasks,
        "workers": a.workers,
        "cores": os.cpu_count(),
        "task_s_first": round(first, 4),
        "points_per_task": len(one.json["points"]),
        "repeat": max(1, a.repeat),
        "task_ms_mean_sequential": round(1000 * t_seq / a.tasks, 2),
        "sequential_s": round(t_seq, 3),
        "dask_s": round(t_dask, 3),
        "speedup": round(t_seq / t_dask, 3),
        "speedup_each_repetition": [round(x / y, 3) for x, y in zip(seqs, dasks)],
        "overhead_ms_per_task": round(1000 * (a.workers * t_dask - t_seq) / a.tasks, 2),
        "noop_round_trip_ms_per_task": round(1000 * t_noop / a.tasks, 2),
        "sequential_cpu_s": round(c_seq, 3),
        "dask_cpu_s": round(c_dask, 3),
        "cpu_overhead_ms_per_task": round(1000 * (c_dask - c_seq) / a.tasks, 2),
        "speedup_bound_from_cpu": round(a.workers * c_seq / c_dask, 3),
        "sequential_main_thread_cpu_s": round(c_main, 3),
        "cluster_idle_cpu_s": round(idle, 3),
        "speedup_bound_from_task_cpu": round(a.workers * c_main / c_dask, 3),
        "dask_settings": "defaults" if a.dask_defaults else "DASK_LOW_OVERHEAD",
        "cluster_start_s": round(t_start, 2),
        "identical_results": same,
        "load_before": load_before,
        "load_after": load_after,
    }
    if a.json:
        print(json.dumps(figures, indent=2))
    else:
        for k, v in figures.items():
            print(f"{k:30} {v}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
