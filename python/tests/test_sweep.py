"""Sweeps give the same results on the local process pool, a Dask LocalCluster of two
workers and a local Ray instance, in task order, and the same as `clusterqos sweep`."""

from __future__ import annotations

import subprocess
import sys

import pytest

import clusterqos as cq

OVER = {"network.router.buffer": [2, 4], "network.classes.ctl.rate": [0.005, 0.02]}
SEEDS = [1, 2]


def expected_order():
    return [
        ({"network.router.buffer": b, "network.classes.ctl.rate": r}, s)
        for b in OVER["network.router.buffer"]
        for r in OVER["network.classes.ctl.rate"]
        for s in SEEDS
    ]


@pytest.fixture(scope="module")
def local(request):
    path = request.getfixturevalue("tiny_flit_module")
    return cq.sweep(path, over=OVER, seeds=SEEDS, workers=2, progress=False)


@pytest.fixture(scope="module")
def tiny_flit_module(tmp_path_factory):
    from conftest import TINY_FLIT

    p = tmp_path_factory.mktemp("sweep") / "tiny.toml"
    p.write_text(TINY_FLIT)
    return p


def test_the_local_pool_runs_every_combination_in_order(local, tiny_flit_module):
    assert [(r.params, r.seed) for r in local.runs] == expected_order()
    # Each run is the scenario with the values written in, run alone.
    s = cq.load(tiny_flit_module).with_values(local.runs[5].params)
    assert s.run(seed=local.runs[5].seed).json == local.runs[5].json
    # Seeds and values change the numbers (else identical results would prove nothing).
    assert local.runs[0].json != local.runs[1].json
    assert local.runs[0].json != local.runs[2].json
    pts = local.points
    assert list(pts.columns[:3]) == ["network.router.buffer", "network.classes.ctl.rate", "seed"]
    assert len(pts) == 16
    assert len(local.classes) == 32


def test_the_local_pool_matches_one_process_and_the_command(local, tiny_flit_module, cli_json):
    one = cq.sweep(tiny_flit_module, over=OVER, seeds=SEEDS, workers=1, progress=False)
    assert one.json() == local.json()
    want = cli_json(
        "sweep", str(tiny_flit_module),
        "--over", "network.router.buffer=2,4", "--over", "network.classes.ctl.rate=0.005,0.02",
        "--seeds", "1..2", "--workers", "2", "--json",
    )
    assert want["runs"] == local.json()


def test_dask_local_cluster_gives_the_same_results(local, tiny_flit_module):
    distributed = pytest.importorskip("distributed")
    import dask

    # Generous connection timeouts: on a loaded machine worker processes start slowly.
    slow = {"distributed.comm.timeouts.connect": "180s", "distributed.comm.timeouts.tcp": "180s"}
    with dask.config.set(slow), distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        d = cq.sweep(tiny_flit_module, over=OVER, seeds=SEEDS, client=client, progress=False)
    assert d.json() == local.json()


def test_a_dask_sweep_keeps_a_run_listed_twice_in_both_places(tiny_flit_module):
    # Pure tasks make a repeated seed one Dask task: its result fills both places (the
    # sweep used to return two runs for three, out of order).
    distributed = pytest.importorskip("distributed")
    import dask

    slow = {"distributed.comm.timeouts.connect": "180s", "distributed.comm.timeouts.tcp": "180s"}
    one = cq.sweep(tiny_flit_module, seeds=[2, 1, 2], workers=1, progress=False)
    assert [r.seed for r in one.runs] == [2, 1, 2]
    with dask.config.set(slow), cq.local_cluster(2) as cluster, distributed.Client(
        cluster
    ) as client:
        d = cq.sweep(tiny_flit_module, seeds=[2, 1, 2], client=client, progress=False)
    assert d.json() == one.json()


def test_local_cluster_applies_the_low_overhead_settings():
    distributed = pytest.importorskip("distributed")
    import dask
    from dask.utils import parse_timedelta

    cfg = cq.DASK_LOW_OVERHEAD
    tick = 1000 * parse_timedelta(cfg["distributed.admin.tick.interval"])
    monitor = 1000 * parse_timedelta(cfg["distributed.admin.system-monitor.interval"])
    memory = parse_timedelta(cfg["distributed.worker.memory.monitor-interval"])
    assert tick > 20 and monitor > 500 and memory > 0.1  # above Dask's defaults

    def worker_side(dask_worker):
        pc = dask_worker.periodic_callbacks
        return (
            "profile" in pc,
            pc["tick"].callback_time,
            pc["monitor"].callback_time,
            dask_worker.memory_manager.memory_monitor_interval,
        )

    slow = {"distributed.comm.timeouts.connect": "180s", "distributed.comm.timeouts.tcp": "180s"}
    with dask.config.set(slow), cq.local_cluster(2) as cluster, distributed.Client(
        cluster
    ) as client:
        workers = client.run(worker_side)
        scheduler = client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.periodic_callbacks["tick"].callback_time
        )
        nannies = [n.memory_manager.memory_monitor_interval for n in cluster.workers.values()]
        threads = sorted(client.nthreads().values())
    assert threads == [1, 1]
    assert list(workers.values()) == [(False, tick, monitor, memory)] * 2
    assert scheduler == tick
    assert nannies == [memory, memory]
    # The settings apply to the cluster made, not to this process's configuration.
    assert dask.config.get("distributed.admin.tick.interval") != cfg["distributed.admin.tick.interval"]


def test_ray_gives_the_same_results(local, tiny_flit_module):
    ray = pytest.importorskip("ray")
    # Ray's `local_mode` is gone (Ray 2.x raises on it); a local Ray instance of two
    # CPUs started by the sweep (address="local") is its replacement.
    try:
        r = cq.sweep(tiny_flit_module, over=OVER, seeds=SEEDS, address="local", progress=False)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    assert r.json() == local.json()


def test_a_cluster_sweep_gives_checks_per_run(small_cluster, cli_json):
    over = {"case.0.idts": [["2T", "2T"], ["2T", "8T"]]}
    sw = cq.sweep(small_cluster, over=over, seeds="3..4", workers=2, progress=False)
    assert [(r.params["case.0.idts"][1], r.seed) for r in sw.runs] == [
        ("2T", 3), ("2T", 4), ("8T", 3), ("8T", 4),
    ]
    checks = sw.checks
    assert list(checks.columns[:2]) == ["case.0.idts", "seed"]
    want = cli_json(
        "sweep", str(small_cluster), "--over", 'case.0.idts=["2T","2T"],["2T","8T"]',
        "--seeds", "3..4", "--json",
    )
    assert want["runs"] == sw.json()


def test_the_plan_is_the_sweeps_order_and_checks_values(tiny_flit_module):
    plan = cq.plan(tiny_flit_module, over=OVER, seeds=SEEDS)
    assert [({k: v for k, v in p}, s) for p, s in plan] == expected_order()
    with pytest.raises(TypeError):
        cq.plan(tiny_flit_module, over={"network.router.buffer": 4})


def test_a_sweep_without_progress_does_not_import_tqdm_auto(tiny_flit_module):
    # tqdm.auto warns in notebooks without ipywidgets; a hidden bar has no use for it.
    code = (
        "import sys, clusterqos as cq; "
        f"cq.sweep({str(tiny_flit_module)!r}, seeds=[1], workers=1, progress=False); "
        "print('tqdm.auto' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_the_progress_bar_counts_runs(tiny_flit_module, capsys):
    cq.sweep(tiny_flit_module, seeds=[1, 2], workers=2, progress=True)
    assert "2/2" in capsys.readouterr().err
