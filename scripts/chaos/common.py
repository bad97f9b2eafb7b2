"""Shared by the chaos scripts of scripts/chaos: start a manager and agents
of the `clusterqos` binary on loopback, talk to them, read a process's memory.

Everything runs on 127.0.0.1 and Unix sockets in a fresh temporary directory, and
every process a script starts is stopped by its pid when the script ends.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SECRET = "chaos-secret-0123456789abcdef"

TOPOLOGY = """[defaults]
t = "48us"
bmax = "81.8MB/s"
link = "160MB/s"

[build]
shape = "crossbar"
hosts = 4
"""


def binary():
    """The clusterqos binary: $CLUSTERQOS, else the release build of this checkout."""
    if os.environ.get("CLUSTERQOS"):
        return os.environ["CLUSTERQOS"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    for profile in ("release", "debug"):
        p = os.path.join(target, profile, "clusterqos")
        if os.path.exists(p):
            return p
    sys.exit("no clusterqos binary: build it (cargo build --release -p clusterqos) or set CLUSTERQOS")


def free_port():
    """A loopback port free for TCP and UDP now, for a process started later that must
    be told its port in advance (etcd's peers, a replica restarted on its URL).

    Chosen at random below the kernel's ephemeral range, so no outgoing connection
    (the scripts make thousands) can take it between this check and the bind; what
    remains is another listener picking the same port in the same instant, which the
    callers that can retry (ha.py) do."""
    import random
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    top = max(low, 12000)
    for _ in range(200):
        port = random.randrange(10000, top)
        ok = True
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(socket.AF_INET, kind)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                ok = False
            finally:
                s.close()
            if not ok:
                break
        if ok:
            return port
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Cluster:
    """A manager and agents in a temporary directory; `close()` stops them."""

    def __init__(self, lease="600s", extra=()):
        self.bin = binary()
        self.dir = tempfile.mkdtemp(prefix="cq-chaos-")
        self.port = free_port()
        self.lease = lease
        self.extra = list(extra)
        self.procs = []
        self.master = None
        with open(self.path("topology.toml"), "w") as f:
            f.write(TOPOLOGY)
        with open(self.path("secret"), "w") as f:
            f.write(SECRET)
        os.chmod(self.path("secret"), 0o600)

    def path(self, name):
        return os.path.join(self.dir, name)

    def start_master(self):
        log = open(self.path("manager.log"), "a")
        p = subprocess.Popen(
            [self.bin, "manager", "--topology", self.path("topology.toml"),
             "--db", self.path("manager.db"), "--secret", self.path("secret"),
             "--listen", "127.0.0.1:%d" % self.port, "--lease", self.lease] + self.extra,
            stdout=subprocess.PIPE, stderr=log, text=True)
        line = p.stdout.readline()
        if not line.startswith("listening on"):
            p.wait()
            raise RuntimeError("manager did not start: %r (see %s)" % (line, self.path("manager.log")))
        self.master = p
        self.procs.append(p)
        return p

    def kill_master(self):
        os.kill(self.master.pid, signal.SIGKILL)
        self.master.wait()
        self.procs.remove(self.master)
        self.master = None

    def start_agent(self, node):
        sock = self.path(node + ".sock")
        log = open(self.path("agent-%s.log" % node), "a")
        p = subprocess.Popen(
            [self.bin, "agent", "--node", node, "--manager", "http://127.0.0.1:%d" % self.port,
             "--secret", self.path("secret"), "--socket", sock],
            stdout=subprocess.DEVNULL, stderr=log)
        self.procs.append(p)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                r = local(sock, {"op": "flows"})
                if r.get("ok") and r["result"]["synced"]:
                    return sock
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("agent %s never synced" % node)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def http(self, method, path, body=None, node_auth=True, timeout=30):
        """One request on a fresh connection: (status, parsed JSON or text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        headers = {"clusterqos-protocol": "1"}
        if node_auth:
            headers["authorization"] = "Bearer " + SECRET
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["content-type"] = "application/json"
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text


def local(sock_path, req, conn=None, timeout=30):
    """One JSON-lines request to an agent; reuses `conn` (a connected socket) if given."""
    own = conn is None
    if own:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(timeout)
        conn.connect(sock_path)
    req = dict(req, v=1)
    conn.sendall((json.dumps(req) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("agent closed the connection")
        buf += chunk
    if own:
        conn.close()
    return json.loads(buf)


def cpu_secs(pid):
    """CPU seconds (user + system) process `pid` has used."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def waited_secs(pid):
    """Seconds the threads of process `pid` have spent runnable but waiting for a
    processor (the second field of each thread's /proc schedstat): what the machine's
    load took from it."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended meanwhile
    return total / 1e9


def listen_drops():
    """Connections this namespace's kernel dropped because a listening socket's accept
    queue was full (TcpExt ListenDrops of /proc/net/netstat): handshakes a busy
    server had not accepted yet, completed only when the client retransmits."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines, lines[1:]):
        if names.startswith("TcpExt:") and values.startswith("TcpExt:"):
            return int(dict(zip(names.split(), values.split())).get("ListenDrops", 0))
    return 0


def rss_mb(pid):
    """Resident memory of a process, MB (10^6 bytes)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))
