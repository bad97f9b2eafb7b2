"""Shared helpers of the chaos scripts: a testbed of network namespaces driven
through the `clusterqos` command, applications on clusterqos ports through the C ABI
(libqos_client.so via ctypes), counters read outside the agents (the switch namespace's
interface statistics and tc), and agents killed with SIGKILL and started again.

Only the testbed's own namespaces and loopback are ever addressed. Every wait is bounded.
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _built(name):
    """The most recently built `name` in the target directory (release or debug)."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    found = [os.path.join(target, p, name) for p in ("release", "debug")]
    found = [p for p in found if os.path.exists(p)]
    return max(found, key=os.path.getmtime) if found else None


def clusterqos_bin():
    return os.environ.get("CLUSTERQOS") or _built("clusterqos")


def client_lib():
    return os.environ.get("CLUSTERQOS_LIB") or _built("libqos_client.so")


def cannot_run(why):
    """Exits 2 (`run-all`'s "could not run") after printing `why` as the one line."""
    print(why, flush=True)
    sys.exit(2)


def need_root_and_builds():
    """Exits 2 with one line saying what is missing."""
    if os.geteuid() != 0:
        cannot_run("needs root (network namespaces, tc)")
    if not clusterqos_bin():
        cannot_run("no clusterqos binary: cargo build -p clusterqos (or set CLUSTERQOS)")
    if not client_lib():
        cannot_run("no libqos_client.so: cargo build -p qos-client --lib (or set CLUSTERQOS_LIB)")


def sh(*args, check=True, capture=True):
    r = subprocess.run(args, capture_output=capture, text=True, timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout if capture else ""


class Testbed:
    """`clusterqos testbed up` / `down`, plus what the chaos scripts read and do in it."""

    def __init__(self, nodes, rate, directory, prefix, subnet, backend="dataplane"):
        self.dir = directory
        self.prefix = prefix
        # A fresh directory: a manager database left by an earlier run would bring back
        # its grants (and their owners' leases).
        if os.path.exists(os.path.join(directory, "testbed.json")):
            raise RuntimeError(f"a testbed is up in {directory}: clusterqos testbed down --dir {directory}")
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        out = sh(clusterqos_bin(), "testbed", "up", "--nodes", str(nodes), "--link-rate", rate,
                 "--dir", directory, "--prefix", prefix, "--subnet", subnet,
                 "--backend", backend, "--json")
        self.state = json.loads(out)
        self.started = []  # processes this script started (restarted agents)
        self.running = {}  # host -> pid of the agent this script started for it

    def sw(self):
        return f"{self.prefix}-sw"

    def netns(self, host):
        return f"{self.prefix}-{host}"

    def dp_socket(self, host):
        return os.path.join(self.dir, f"{host}.dp.sock")

    def agent_socket(self, host):
        return os.path.join(self.dir, f"{host}.agent.sock")

    def port_counters(self, ports):
        """The rx_bytes of switch ports p<i> for every i in `ports` (what each host put on
        the wire), all read by one `cat` in the switch namespace, and the time of the
        read (taken in the same command, so a slow start of the command on a loaded
        machine shifts neither the shares nor the rates)."""
        files = [f"/sys/class/net/p{i}/statistics/rx_bytes" for i in ports]
        script = f"cat {' '.join(files)}; date +%s.%N"
        out = sh("ip", "netns", "exec", self.sw(), "sh", "-c", script).split()
        return [int(x) for x in out[:-1]], float(out[-1])

    def addr(self, host):
        for h in self.state["hosts"]:
            if h["name"] == host:
                return h["addr"]
        raise KeyError(host)

    def port_drops(self, i):
        """Packets dropped by the shaper of switch port p<i> (towards host i)."""
        out = sh("ip", "netns", "exec", self.sw(), "tc", "-s", "qdisc", "show", "dev", f"p{i}")
        words = out.replace(",", " ").replace("(", " ").split()
        return int(words[words.index("dropped") + 1])

    def agent_pid(self, host):
        """The pid of `host`'s agent now: the one this script started last, or `up`'s."""
        if host in self.running:
            return self.running[host]
        for p in self.state["processes"]:
            if p["role"] == f"agent-{host}":
                return p["pid"]
        raise KeyError(host)

    def kill_agent(self, host, pid):
        """SIGKILL the agent process `pid` of `host` (the `clusterqos` under `ip netns
        exec`); returns its command line for a restart."""
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[:-1]
        cmd = [c.decode() for c in cmd]
        os.kill(pid, signal.SIGKILL)
        deadline = time.time() + 5
        while os.path.exists(f"/proc/{pid}") and time.time() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.02)
        return cmd

    def start_agent(self, host, cmd, log):
        """Starts `cmd` (an agent's command line) again in `host`'s namespace and waits
        until it is ready. Returns the process (its pid is the agent's)."""
        f = open(log, "w")
        full = ["ip", "netns", "exec", self.netns(host)] + cmd
        p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=f, stderr=f)
        self.started.append(p)
        self.running[host] = p.pid
        deadline = time.time() + 20
        while time.time() < deadline:
            if "agent ready" in open(log).read():
                return p
            if p.poll() is not None:
                raise RuntimeError(f"restarted agent of {host} exited: see {log}")
            time.sleep(0.05)
        raise RuntimeError(f"restarted agent of {host} not ready in 20 s: see {log}")

    def down(self):
        for p in self.started:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
        sh(clusterqos_bin(), "testbed", "down", "--dir", self.dir, check=False)


class Hogs:
    """`n` processes spinning on the CPU (the load an operator's machine carries)."""

    def __init__(self, n):
        code = "while True:\n    pass\n"
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait(timeout=5)


class CqError(Exception):
    pass


class Lib:
    """The C ABI (include/clusterqos.h)."""

    def __init__(self):
        L = ctypes.CDLL(client_lib())
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        L.cq_last_error.restype = cp
        L.cq_open.restype = vp
        L.cq_open.argtypes = [cp, ctypes.c_int]
        L.cq_send.restype = ctypes.c_int
        L.cq_send.argtypes = [vp, cp, ctypes.c_uint16, ctypes.c_uint8, vp, ctypes.c_size_t]
        L.cq_recv.restype = ctypes.c_long
        L.cq_recv.argtypes = [vp, vp, ctypes.c_size_t, ctypes.c_int, vp]
        L.cq_flush.restype = ctypes.c_int
        L.cq_flush.argtypes = [vp, ctypes.c_int]
        L.cq_request_bandwidth.restype = ctypes.c_int
        L.cq_request_bandwidth.argtypes = [vp, cp, cp, ctypes.c_uint16, ctypes.c_uint64]
        L.cq_best_effort.restype = ctypes.c_int
        L.cq_best_effort.argtypes = [vp, cp, cp, ctypes.c_uint16, ctypes.c_uint32]
        L.cq_release.restype = ctypes.c_int
        L.cq_release.argtypes = [vp, cp, cp, ctypes.c_uint16]
        L.cq_close.argtypes = [vp]
        self.L = L

    def err(self):
        return self.L.cq_last_error().decode(errors="replace")


class Port:
    """A clusterqos port of an application."""

    def __init__(self, lib, socket, number):
        self.lib = lib
        self.p = lib.L.cq_open(socket.encode(), number)
        if not self.p:
            raise CqError(lib.err())

    def send(self, node, port, data):
        if self.lib.L.cq_send(self.p, node.encode(), port, 0, data, len(data)) != 0:
            raise CqError(self.lib.err())

    def recv(self, buf, timeout_ms):
        """The length received, or None on timeout."""
        n = self.lib.L.cq_recv(self.p, buf, len(buf), timeout_ms, None)
        if n == -2:
            return None
        if n < 0:
            raise CqError(self.lib.err())
        return n

    def request(self, manager_socket, node, port, bytes_per_sec):
        r = self.lib.L.cq_request_bandwidth(self.p, manager_socket.encode(), node.encode(),
                                            port, bytes_per_sec)
        if r != 0:
            raise CqError(f"request {bytes_per_sec} B/s: {self.lib.err()}")

    def best_effort(self, manager_socket, node, port, weight=1):
        r = self.lib.L.cq_best_effort(self.p, manager_socket.encode(), node.encode(), port, weight)
        if r != 0:
            raise CqError(f"best-effort: {self.lib.err()}")

    def release(self, manager_socket, node, port):
        self.lib.L.cq_release(self.p, manager_socket.encode(), node.encode(), port)

    def close(self):
        if self.p:
            self.lib.L.cq_close(self.p)
            self.p = None


def agent_flows(sock_path):
    """The IDT table an agent holds (its `flows` op on the local socket)."""
    import socket as _socket
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    s.sendall(b'{"v":1,"op":"flows"}\n')
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    reply = json.loads(buf)
    if not reply.get("ok"):
        raise CqError(f"flows: {reply}")
    return reply["result"]["flows"]


def cpu_ticks(pid):
    """utime + stime of process `pid` in clock ticks (0 if it is gone)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return 0
    rest = stat[stat.rfind(")") + 2:].split()
    return int(rest[11]) + int(rest[12])


def child_cpu_ticks(pid):
    """cutime + cstime of process `pid` (its children that have exited and been reaped)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return 0
    rest = stat[stat.rfind(")") + 2:].split()
    return int(rest[13]) + int(rest[14])
