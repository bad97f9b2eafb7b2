"""The replicated manager on loopback, for scripts/ha-cluster and the HA chaos
run: a 3-member etcd cluster (the `etcd` binary, Debian etcd-server), manager replicas
of the `clusterqos` binary sharing it (`--store etcd://...`), and agents given every
replica's URL.

Everything listens on 127.0.0.1; every process is started by this module and stopped by
its pid (`close()`), never by name.
"""

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request

import common

ETCD_PREFIX = "clusterqos"


def etcd_binary():
    return os.environ.get("ETCD") or shutil.which("etcd")


def _healthy(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
            return json.loads(r.read().decode()).get("health") == "true"
    except (OSError, ValueError):
        return False


class HaCluster:
    """etcd members, manager replicas and agents in `dir`."""

    def __init__(self, dir=None, members=3, replicas=3, ttl="2s", lease="600s",
                 detach=False, extra=()):
        self.bin = common.binary()
        self.etcd = etcd_binary()
        if not self.etcd:
            raise RuntimeError("no etcd binary: install etcd-server (Debian) or set ETCD")
        self.dir = dir or __import__("tempfile").mkdtemp(prefix="cq-ha-")
        os.makedirs(self.dir, exist_ok=True)
        self.ttl, self.lease, self.detach = ttl, lease, detach
        self.extra = list(extra)
        self.members = [{"name": "m%d" % i, "client": common.free_port(),
                         "peer": common.free_port(), "proc": None} for i in range(members)]
        # Each replica binds a port of its own choosing on its first start.
        self.replicas = [{"port": None, "proc": None} for _ in range(replicas)]
        self.agents = {}
        self.procs = []
        with open(self.path("topology.toml"), "w") as f:
            f.write(common.TOPOLOGY)
        with open(self.path("secret"), "w") as f:
            f.write(common.SECRET)
        os.chmod(self.path("secret"), 0o600)

    def path(self, name):
        return os.path.join(self.dir, name)

    def _spawn(self, args, log, stdout=subprocess.DEVNULL):
        p = subprocess.Popen(args, stdout=stdout, stderr=open(self.path(log), "a"),
                             stdin=subprocess.DEVNULL, start_new_session=self.detach,
                             text=True)
        self.procs.append(p)
        return p

    # etcd -------------------------------------------------------------------------

    def endpoints(self):
        return ",".join("127.0.0.1:%d" % m["client"] for m in self.members)

    def start_member(self, i, wait=True):
        m = self.members[i]
        data = self.path("etcd-" + m["name"])
        state = "existing" if os.path.exists(data) else "new"
        cluster = ",".join("%s=http://127.0.0.1:%d" % (x["name"], x["peer"]) for x in self.members)
        client = "http://127.0.0.1:%d" % m["client"]
        peer = "http://127.0.0.1:%d" % m["peer"]
        m["proc"] = self._spawn(
            [self.etcd, "--name", m["name"], "--data-dir", data,
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", cluster, "--initial-cluster-token", "clusterqos-ha",
             "--initial-cluster-state", state, "--logger", "zap", "--log-level", "warn"],
            "etcd-%s.log" % m["name"])
        if wait:
            self.wait_member(i)

    def wait_member(self, i, limit=30):
        m = self.members[i]
        deadline = time.time() + limit
        while time.time() < deadline:
            if _healthy(m["client"]):
                return
            if m["proc"].poll() is not None:
                raise RuntimeError("etcd %s exited (see %s)" % (m["name"], self.path("etcd-%s.log" % m["name"])))
            time.sleep(0.05)
        raise RuntimeError("etcd %s not healthy after %d s" % (m["name"], limit))

    def start_etcd(self, attempts=3):
        """Starts every member; if one fails (a port taken between its choice and
        etcd's bind), stops them all and starts again on fresh ports."""
        for attempt in range(attempts):
            for i in range(len(self.members)):
                self.start_member(i, wait=False)
            try:
                for i in range(len(self.members)):
                    self.wait_member(i)
                return
            except RuntimeError:
                if attempt + 1 == attempts:
                    raise
            for m in self.members:
                self._kill(m, signal.SIGKILL)
                shutil.rmtree(self.path("etcd-" + m["name"]), ignore_errors=True)
                m["client"], m["peer"] = common.free_port(), common.free_port()

    def raft_leader(self):
        """The index of the member etcd's Raft elected, or None if none answers."""
        try:
            out = subprocess.run(
                ["etcdctl", "--endpoints", self.endpoints(), "endpoint", "status", "-w", "json"],
                capture_output=True, text=True, timeout=10,
                env=dict(os.environ, ETCDCTL_API="3")).stdout
            for st in json.loads(out or "[]"):
                s = st["Status"]
                if s["header"]["member_id"] == s["leader"]:
                    port = int(st["Endpoint"].rsplit(":", 1)[1])
                    return next(i for i, m in enumerate(self.members) if m["client"] == port)
        except (OSError, ValueError, KeyError, StopIteration, subprocess.SubprocessError):
            pass
        return None

    def kill_member(self, i):
        self._kill(self.members[i], signal.SIGKILL)

    # replicas ---------------------------------------------------------------------

    def url(self, j):
        return "http://127.0.0.1:%d" % self.replicas[j]["port"]

    def urls(self):
        return ",".join(self.url(j) for j in range(len(self.replicas)))

    def start_replica(self, j):
        """Starts replica j: the first time on a port it binds itself (port 0, read
        back from its "listening on" line: no other process can take it first), later
        on the same port again (its URL is in the agents' --manager list), retried
        for a few seconds if that port is briefly taken."""
        r = self.replicas[j]
        deadline = time.time() + 10
        while True:
            port = r["port"] or 0
            args = [self.bin, "manager", "--topology", self.path("topology.toml"),
                    "--secret", self.path("secret"),
                    "--store", "etcd://%s/%s" % (self.endpoints(), ETCD_PREFIX),
                    "--listen", "127.0.0.1:%d" % port,
                    "--election-ttl", self.ttl, "--lease", self.lease,
                    "--witness", self.path("replica-%d.witness" % j)] + self.extra
            p = self._spawn(args, "replica-%d.log" % j, stdout=subprocess.PIPE)
            line = p.stdout.readline()
            if line.startswith("listening on"):
                r["port"] = int(line.split()[-1].rsplit(":", 1)[1])
                r["proc"] = p
                return p
            p.wait()
            if not r["port"] or time.time() > deadline:
                raise RuntimeError("replica %d did not start: %r (see %s)"
                                   % (j, line, self.path("replica-%d.log" % j)))
            time.sleep(0.2)

    def start_replicas(self):
        for j in range(len(self.replicas)):
            self.start_replica(j)

    def role(self, j, timeout=1.0):
        """(role, leader URL) of replica j, or None if it does not answer."""
        try:
            with urllib.request.urlopen(self.url(j) + "/v1/leader", timeout=timeout) as r:
                b = json.loads(r.read().decode())
                return b["role"], b["leader"]
        except (OSError, ValueError, KeyError):
            return None

    def leader(self, limit=30.0, exclude=()):
        """The index of the replica that leads, once one does (None after `limit` s)."""
        deadline = time.time() + limit
        while time.time() < deadline:
            for j, r in enumerate(self.replicas):
                if j in exclude or r["proc"] is None or r["proc"].poll() is not None:
                    continue
                got = self.role(j, timeout=0.3)
                if got and got[0] == "leader":
                    return j
            time.sleep(0.02)
        return None

    def signal_replica(self, j, sig):
        os.kill(self.replicas[j]["proc"].pid, sig)

    def kill_replica(self, j):
        self._kill(self.replicas[j], signal.SIGKILL)

    # agents -----------------------------------------------------------------------

    def start_agent(self, node):
        sock = self.path(node + ".sock")
        self._spawn([self.bin, "agent", "--node", node, "--manager", self.urls(),
                     "--secret", self.path("secret"), "--socket", sock], "agent-%s.log" % node)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                r = common.local(sock, {"op": "flows"})
                if r.get("ok") and r["result"]["synced"]:
                    self.agents[node] = sock
                    return sock
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("agent %s never synced" % node)

    # the store --------------------------------------------------------------------

    def stored_flows(self):
        """Every flow in etcd, read with etcdctl: {(src node, src port, dst port)}."""
        out = subprocess.run(
            ["etcdctl", "--endpoints", self.endpoints(), "get", "--prefix",
             "/%s/flows/" % ETCD_PREFIX, "--print-value-only"],
            capture_output=True, text=True, timeout=60, check=True,
            env=dict(os.environ, ETCDCTL_API="3")).stdout
        found = set()
        for line in out.splitlines():
            line = line.strip()
            # A flow key holds the flows one transaction granted (a JSON array; a
            # single value is a group of one).
            if line.startswith("{") or line.startswith("["):
                v = json.loads(line)
                for r in (v if isinstance(v, list) else [v]):
                    found.add((r["flow"]["src"]["node"], r["flow"]["src"]["port"],
                               r["flow"]["dst"]["port"]))
        return found

    # ------------------------------------------------------------------------------

    def _kill(self, slot, sig):
        p = slot["proc"]
        if p is not None and p.poll() is None:
            os.kill(p.pid, sig)
            if sig == signal.SIGKILL:
                p.wait()
        if sig == signal.SIGKILL:
            slot["proc"] = None

    def pids(self):
        return [p.pid for p in self.procs if p.poll() is None]

    def close(self, remove=True):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)
