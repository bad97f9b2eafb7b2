"""The manager's clients against a real master (`clusterqos manager` started as a
process) and a real agent (`clusterqos agent`, control plane only)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

import clusterqos as cq

SECRET = "python-client-test-secret-0123456789"
TOPOLOGY = """[defaults]
t = "80us"
bmax = "100MB/s"
link = "1000MB/s"

[build]
shape = "crossbar"
hosts = 3
"""


@pytest.fixture(scope="module")
def master(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("master")
    (d / "topology.toml").write_text(TOPOLOGY)
    (d / "secret").write_text(SECRET)
    p = subprocess.Popen(
        [str(cli), "manager", "--listen", "127.0.0.1:0", "--topology", str(d / "topology.toml"),
         "--db", str(d / "m.db"), "--secret", str(d / "secret"), "--sync", "normal"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        line = p.stdout.readline()
        assert line.startswith("listening on "), f"manager said {line!r}"
        yield {"url": "http://" + line.split()[-1], "dir": d}
    finally:
        p.kill()
        p.wait()


def test_request_status_release_against_a_real_master(master):
    m = cq.Manager(master["url"], node="n0", secret_file=master["dir"] / "secret")
    assert m.register()["lease_ms"] > 0
    g = m.request("n1", "40MB/s", port=3, name="video")
    assert isinstance(g, cq.Grant) and g.granted
    assert g.rate == 40_000_000 and g.flow_class == "premium" and g.name == "video"
    # Thesis §3.3.1: IDT = T * Bmax / B = 80 us * 100 / 40.
    assert g.idt_ps == 200_000_000
    assert g.owner == {"uid": os.getuid(), "pid": os.getpid()}

    st = m.status()
    send = st.frame.query("kind == 'node' and name == 'n0' and direction == 'send'")
    assert send["reserved"].tolist() == [40_000_000]
    assert st.premium_flows == 1 and st.policy == "thesis"

    r = m.request("n2", 70_000_000, port=4)
    assert isinstance(r, cq.Rejection) and not r.granted
    assert r.criterion == 1 and "n0" in r.resource and r.requested == 70_000_000

    be = m.request("n2", best_effort=True, port=5)
    assert be.granted and be.flow_class == "best_effort"
    flows = m.flows()
    assert sorted(flows["src_port"]) == [3, 5]

    with pytest.raises(cq.ManagerError) as e:
        m.release("n1", port=3, uid=os.getuid() + 1)
    assert e.value.code == "not_owner"
    m.release("n1", port=3)
    m.release("n2", port=5)
    assert m.flows().empty
    with pytest.raises(cq.ManagerError) as e:
        m.release("n1", port=3)
    assert e.value.code == "not_found"


def test_a_wrong_secret_or_no_master_raises_with_the_code(master, tmp_path):
    bad = cq.Manager(master["url"], node="n0", secret="another-secret-of-enough-length")
    with pytest.raises(cq.ManagerError) as e:
        bad.status()
    assert e.value.code == "unauthorized"
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = cq.Manager(f"http://127.0.0.1:{port}", node="n0", secret=SECRET)
    with pytest.raises(cq.ManagerError) as e:
        gone.status()
    assert e.value.code == "unavailable" and "manager unreachable" in str(e.value)
    with pytest.raises(cq.ManagerError) as e:
        cq.Manager("ftp://x", node="n0", secret=SECRET)
    assert e.value.code == "bad_request"


def test_the_agent_client_through_a_real_agent(master, cli, tmp_path):
    sock = tmp_path / "agent.sock"
    a = subprocess.Popen(
        [str(cli), "agent", "--node", "n1", "--manager", master["url"],
         "--secret", str(master["dir"] / "secret"), "--socket", str(sock)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert time.monotonic() < deadline, "the agent did not start"
            assert a.poll() is None, "the agent exited"
            time.sleep(0.05)
        ag = cq.Agent(sock)
        g = ag.request("n2:9", "20MB/s", port=7)
        assert g.granted and g.rate == 20_000_000 and g.idt_ps == 400_000_000
        assert g.owner["pid"] == os.getpid()
        flows = ag.flows()
        assert flows[["src_node", "src_port", "dst_node", "dst_port"]].values.tolist() == [["n1", 7, "n2", 9]]
        st = ag.status()
        assert st.premium_flows == 1
        released = ag.release("n2:9", port=7)
        assert released["src"] == {"node": "n1", "port": 7}
        assert ag.flows().empty
        with pytest.raises(cq.ManagerError) as e:
            ag.release("n2:9", port=7)
        assert e.value.code == "not_found"
    finally:
        a.kill()
        a.wait()
    with pytest.raises(cq.ManagerError) as e:
        cq.Agent(tmp_path / "nobody.sock")
    assert e.value.code == "unavailable"


def test_a_job_is_reserved_all_or_nothing_and_released_as_one(master):
    m = cq.Manager(master["url"], node="n0", secret_file=master["dir"] / "secret")
    d = m.reserve_job("py-job", ["n0", "n1", "n2"], "30MB/s", pattern="ring", owner="alice")
    assert d["decision"] == "granted" and d["flow_count"] == 3
    # A second job that does not fit beside it (n0 would send 110 MB/s of its 100):
    # refused whole, naming the resource.
    r = m.reserve_job("py-big", ["n0", "n1"], "80MB/s", pattern="one-to-many", owner="alice")
    assert r["decision"] == "rejected" and r["short"]["resource"] == "node n0 send"
    assert r["short"]["short_by"] == 10_000_000
    assert [j["id"] for j in m.jobs()] == ["py-job"]
    with pytest.raises(cq.ManagerError) as e:
        m.reserve_job("py-job", ["n0", "n1"], "30MB/s", pattern="ring", owner="alice")
    assert e.value.code == "conflict"
    with pytest.raises(cq.ManagerError) as e:
        m.release_job("py-job", owner="mallory")
    assert e.value.code == "not_owner"
    m.renew_job("py-job", owner="alice")
    m.release_job("py-job", owner="alice")
    assert m.jobs() == []
    big = m.reserve_job("py-big", ["n0", "n1"], "80MB/s", pattern="one-to-many", owner="alice")
    assert big["decision"] == "granted"
    m.release_job("py-big", owner="alice")
