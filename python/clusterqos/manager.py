"""The bandwidth manager's clients for operators' scripts (protocol in
``docs/protocol.md``).

- :class:`Agent` — a node's agent over its Unix socket, as ``clusterqos request`` /
  ``release`` / ``status`` use it: flows are attributed to a process of this user (by
  default this Python process) and live as long as it does.
- :class:`Manager` — the master over HTTP(S) with the cluster's secret, speaking for
  one node (``node=``) as that node's agent would: for tools that drive the master
  directly. The master releases a node's flows when nothing was heard for that node
  for a lease (10 s by default) and a flow when its owner was not listed in a
  heartbeat for a lease: call :meth:`Manager.heartbeat` more often than that to keep
  flows requested this way.

A request's answer is a :class:`Grant` or a :class:`Rejection` (a rejection is a
decision, not an error). Errors raise :class:`clusterqos.ManagerError` with the
protocol's ``code`` (``not_owner``, ``not_found``, ``unavailable``, ...) and its
one-line message.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

from clusterqos import _native

if TYPE_CHECKING:
    import pandas as pd

PathLike = Union[str, "os.PathLike[str]"]
Bandwidth = Union[int, str]


@dataclass(frozen=True)
class Grant:
    """A granted flow: its row of the IDT table."""

    flow: dict[str, Any]
    name: str
    flow_class: str
    #: Reserved (premium) or current (best-effort) rate, bytes/s.
    rate: int
    #: Inter-packet dispatch time in picoseconds; None: a zero best-effort share.
    idt_ps: Optional[int]
    weight: int
    owner: dict[str, int]
    granted: bool = True

    @staticmethod
    def _of(d: dict[str, Any]) -> "Grant":
        return Grant(
            d["flow"], d["name"], d["class"], d["rate"], d["idt_ps"], d.get("weight", 0), d["owner"]
        )


@dataclass(frozen=True)
class Rejection:
    """A refused premium request and the admission criterion that refused it."""

    criterion: int
    criterion_name: str
    resource: str
    reserved: int
    requested: int
    capacity: int
    message: str
    granted: bool = False


Decision = Union[Grant, Rejection]


def _decision(text: str) -> Decision:
    d = json.loads(text)
    kind = d.pop("decision")
    if kind == "granted":
        return Grant._of(d)
    return Rejection(**d)


@dataclass(frozen=True)
class Status:
    """The master's per-resource report."""

    policy: str
    premium_flows: int
    best_effort_flows: int
    #: Every limited resource: kind, name, direction, capacity, reserved,
    #: best-effort, free (bytes/s; capacity and free None when unlimited).
    resources: list[dict[str, Any]]

    @property
    def frame(self) -> "pd.DataFrame":
        """:attr:`resources` as a DataFrame, one row per resource."""
        import pandas as pd

        cols = ["kind", "name", "direction", "capacity", "reserved", "best_effort", "free"]
        return pd.DataFrame(self.resources, columns=cols)


def _status(text: str) -> Status:
    d = json.loads(text)
    return Status(d["policy"], d["premium_flows"], d["best_effort_flows"], d["resources"])


def flows_frame(entries: list[dict[str, Any]]) -> "pd.DataFrame":
    """IDT-table entries as a DataFrame, one row per flow."""
    import pandas as pd

    rows = [
        {
            "src_node": e["flow"]["src"]["node"],
            "src_port": e["flow"]["src"].get("port", 0),
            "dst_node": e["flow"]["dst"]["node"],
            "dst_port": e["flow"]["dst"].get("port", 0),
            "priority": e["flow"].get("priority", 0),
            "name": e["name"],
            "class": e["class"],
            "rate": e["rate"],
            "idt_ps": e["idt_ps"],
            "weight": e.get("weight", 0),
            "uid": e["owner"]["uid"],
            "pid": e["owner"]["pid"],
        }
        for e in entries
    ]
    cols = ["src_node", "src_port", "dst_node", "dst_port", "priority", "name", "class",
            "rate", "idt_ps", "weight", "uid", "pid"]
    return pd.DataFrame(rows, columns=cols)


def _endpoint(to: str) -> dict[str, Any]:
    """``NODE`` or ``NODE:PORT`` as ``clusterqos request --to`` reads it."""
    node, sep, port = to.rpartition(":")
    if not sep:
        return {"node": to, "port": 0}
    try:
        return {"node": node, "port": int(port)}
    except ValueError:
        raise ValueError(f"to={to!r}: bad port {port!r}") from None


def _bytes_per_sec(b: Bandwidth) -> int:
    """Bytes/s from a number or a text such as ``"10MB/s"``."""
    return _native.parse_bandwidth(b) if isinstance(b, str) else int(b)


def _class(bandwidth: Optional[Bandwidth], best_effort: bool, weight: int) -> dict[str, Any]:
    if (bandwidth is None) == (not best_effort):
        raise ValueError("give either bandwidth= (premium) or best_effort=True")
    if best_effort:
        return {"type": "best_effort", "weight": int(weight)}
    bw = _native.parse_bandwidth(bandwidth) if isinstance(bandwidth, str) else int(bandwidth)
    return {"type": "premium", "bandwidth": bw}


class Manager:
    """The master bandwidth manager over HTTP(S), speaking for node ``node``."""

    def __init__(
        self,
        url: str,
        node: str,
        secret: Optional[str] = None,
        secret_file: Optional[PathLike] = None,
        ca: Optional[PathLike] = None,
        cert: Optional[PathLike] = None,
        key: Optional[PathLike] = None,
    ):
        """``url``: ``http://HOST:PORT`` or ``https://HOST:PORT`` (with ``ca``, and
        ``cert`` + ``key`` for mutual TLS). The secret is the text (``secret``) or the
        file given to ``clusterqos manager --secret`` (``secret_file``)."""
        if (secret is None) == (secret_file is None):
            raise ValueError("give either secret= or secret_file=")
        if secret_file is not None:
            with open(secret_file, encoding="utf-8") as f:
                secret = f.read()
        assert secret is not None
        self._c = _native.MasterConnection(
            url,
            node,
            secret.strip(),
            os.fspath(ca) if ca is not None else None,
            os.fspath(cert) if cert is not None else None,
            os.fspath(key) if key is not None else None,
        )
        self.url = url

    @property
    def node(self) -> str:
        """The node this client speaks for (the source of its flows)."""
        return self._c.node

    def _owner(self, uid: Optional[int], pid: Optional[int]) -> dict[str, int]:
        return {
            "uid": os.getuid() if uid is None else int(uid),
            "pid": os.getpid() if pid is None else int(pid),
        }

    def _flow(self, to: str, port: int, priority: int) -> dict[str, Any]:
        return {"src": {"node": self.node, "port": int(port)}, "dst": _endpoint(to),
                "priority": int(priority)}

    def register(self) -> dict[str, Any]:
        """Registers as the node's agent: the lease terms (``lease_ms``, ``heartbeat_ms``)."""
        return json.loads(self._c.register())

    def heartbeat(self, live: Optional[list[dict[str, int]]] = None) -> None:
        """Tells the master the node and these owners (default: this process) are alive."""
        self._c.heartbeat(json.dumps(live if live is not None else [self._owner(None, None)]))

    def request(
        self,
        to: str,
        bandwidth: Optional[Bandwidth] = None,
        *,
        best_effort: bool = False,
        weight: int = 1,
        port: int = 0,
        priority: int = 0,
        name: Optional[str] = None,
        uid: Optional[int] = None,
        pid: Optional[int] = None,
    ) -> Decision:
        """Asks for a flow from port ``port`` of this node to ``to`` (``NODE`` or
        ``NODE:PORT``): premium ``bandwidth`` (bytes/s, or ``"40MB/s"``) or
        ``best_effort=True`` with ``weight``. Owner: ``uid``/``pid`` (default: this
        process). Returns the master's decision."""
        req = {
            "flow": self._flow(to, port, priority),
            "name": name,
            "class": _class(bandwidth, best_effort, weight),
            "owner": self._owner(uid, pid),
        }
        return _decision(self._c.request(json.dumps(req)))

    def release(
        self,
        to: str,
        *,
        port: int = 0,
        priority: int = 0,
        uid: Optional[int] = None,
        pid: Optional[int] = None,
    ) -> None:
        """Gives back the flow from ``port`` of this node to ``to``."""
        self._c.release(json.dumps(self._flow(to, port, priority)), json.dumps(self._owner(uid, pid)))

    def status(self) -> Status:
        """Capacity, reserved, best-effort and free bandwidth per node and switch port."""
        return _status(self._c.status())

    def flows(self) -> "pd.DataFrame":
        """Every flow the master holds, one row each."""
        return flows_frame(json.loads(self._c.flows()))

    def reserve_job(
        self,
        id: str,
        nodes: Optional[list[str]] = None,
        rate: Optional[Bandwidth] = None,
        *,
        pattern: str = "all-to-all",
        flows: Optional[list[tuple[str, str, Bandwidth]]] = None,
        owner: str = "python",
        wait: Optional[float] = None,
        lease: Optional[float] = None,
    ) -> dict[str, Any]:
        """Reserves every flow of a job at once, or none (docs/jobs.md): ``pattern``
        (``all-to-all``, ``ring``, ``nearest-neighbour``, ``one-to-many``) over
        ``nodes`` at ``rate`` each (bytes/s or ``"10MB/s"``), or explicit ``flows``
        ``[(src, dst, rate), ...]``. ``wait`` (seconds) waits in line for room;
        ``lease`` (seconds) is the job's lease. Returns the decision: a dict with
        ``decision`` ``"granted"`` (and ``flow_count``) or ``"rejected"`` (``short``:
        the first resource short and by how much, ``message``)."""
        req: dict[str, Any] = {"id": id, "owner": owner}
        if flows is not None:
            if nodes is not None or rate is not None:
                raise ValueError("give either flows= or nodes= and rate=")
            req.update(kind="flows", flows=[
                {"src": s, "dst": d, "rate": _bytes_per_sec(r)} for s, d, r in flows])
        else:
            if nodes is None or rate is None:
                raise ValueError("a pattern job needs nodes= and rate=")
            req.update(kind="pattern", pattern=pattern, nodes=list(nodes),
                       rate=_bytes_per_sec(rate))
        if wait is not None:
            req["wait_s"] = int(-(-float(wait) // 1))
        if lease is not None:
            req["lease_ms"] = int(float(lease) * 1000)
        return json.loads(self._c.reserve_job(json.dumps(req)))

    def release_job(self, id: str, owner: str = "python") -> None:
        """Releases job ``id`` as one."""
        self._c.release_job(id, owner)

    def renew_job(self, id: str, owner: str = "python") -> None:
        """Renews job ``id``'s lease."""
        self._c.renew_job(id, owner)

    def jobs(self) -> list[dict[str, Any]]:
        """Every job the master holds."""
        return json.loads(self._c.jobs())

    def __repr__(self) -> str:
        return f"<Manager {self.url} node={self.node!r}>"


class Agent:
    """A node's agent over its Unix socket (what ``clusterqos request`` uses)."""

    #: The agent's default socket (``clusterqos agent --socket``).
    DEFAULT_SOCKET = "/tmp/clusterqos-agent.sock"

    def __init__(self, socket: PathLike = DEFAULT_SOCKET):
        self.socket = os.fspath(socket)
        self._c = _native.AgentConnection(self.socket)

    def _call(self, op: dict[str, Any]) -> dict[str, Any]:
        return json.loads(self._c.call(json.dumps(op)))

    def request(
        self,
        to: str,
        bandwidth: Optional[Bandwidth] = None,
        *,
        best_effort: bool = False,
        weight: int = 1,
        port: int = 0,
        priority: int = 0,
        name: Optional[str] = None,
        pid: Optional[int] = None,
    ) -> Decision:
        """Asks for a flow from ``port`` on this node to ``to`` (``NODE[:PORT]``):
        premium ``bandwidth`` or ``best_effort=True``. It lives as long as process
        ``pid`` (default: this Python process) of this user."""
        r = self._call(
            {
                "op": "request",
                "src_port": int(port),
                "dst": _endpoint(to),
                "priority": int(priority),
                "name": name,
                "class": _class(bandwidth, best_effort, weight),
                "pid": os.getpid() if pid is None else int(pid),
            }
        )
        return _decision(json.dumps(r["decision"]))

    def release(self, to: str, *, port: int = 0, priority: int = 0) -> dict[str, Any]:
        """Gives back a flow this user owns; returns the flow released."""
        r = self._call(
            {"op": "release", "src_port": int(port), "dst": _endpoint(to), "priority": int(priority)}
        )
        return r["flow"]

    def status(self) -> Status:
        """The master's per-resource report, through the agent."""
        return _status(json.dumps(self._call({"op": "status"})["status"]))

    def flows(self) -> "pd.DataFrame":
        """This node's IDT table as the agent holds it."""
        return flows_frame(self._call({"op": "flows"})["flows"])

    def __repr__(self) -> str:
        return f"<Agent {self.socket}>"
