#!/usr/bin/env python3
"""Chaos (b): a 20,000-connection flood of the master, no secret needed,
while registered agents keep working.

Raises this process's descriptor limit (ulimit -n; the manager it starts inherits
it), starts a manager and two agents, then opens --connections TCP connections to the
master from 127.0.0.1 (one in ten trickles a header byte every second, slowloris
style; the rest stay idle), while applications ask the agents for flows and release
them, and a new unauthenticated client asks GET /v1/version. Bounded by --seconds.

Prints one line: flood connections opened, connections the master holds (its open
descriptors above those at start, at the peak and at the end), slowloris connections
still open, agent requests served and failed, version probes answered, master RSS.
Exits 1 if an agent request failed, a probe got no answer, a slowloris connection
outlived the 10 s deadline, or the master held more than twice its limit of
unauthenticated connections (1,024).

A connection the master has not accepted yet is not the master's to close: when the
kernel's accept queue is full, the client's handshake completes on the client side
while the server still holds it half-open. So after --seconds the trickling goes on
while the master catches up (until the listener's accept queue is empty and no
handshake to it is half-open, at most --drain seconds), then for the 10 s deadline and
a 2 s grace; only then are the slowloris connections still open counted. The time the
master took to catch up is printed.
"""

import argparse
import multiprocessing
import errno
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

UNAUTHENTICATED_LIMIT = 1024


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(n, soft)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def closed(s):
    """Whether the master closed `s` (readable, and a peek finds the end)."""
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLRDHUP | select.POLLHUP)
    if not p.poll(0):
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def backlog(port):
    """Connections to the listener on `port` the master has not accepted: its accept
    queue (the listener's Recv-Q) plus half-open handshakes (SYN-RECV)."""
    def ss(*args):
        r = subprocess.run(["ss", "-Htn", *args, "sport", "=", ":%d" % port],
                           capture_output=True, text=True)
        return r.stdout.splitlines()
    queued = sum(int(line.split()[1]) for line in ss("-l") if len(line.split()) > 1)
    return queued + len(ss("state", "syn-recv"))


def flooder(port, n, done, queue):
    """A child: opens `n` connections (one in ten trickling a header byte a second),
    holds them until `done` is set, then reports how many the master still keeps
    open."""
    flood = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        if s.connect_ex(("127.0.0.1", port)) in (0, errno.EINPROGRESS):
            flood.append(s)
        else:
            s.close()
    slow = flood[::10]
    while not done.is_set():
        for s in slow:
            try:
                s.send(b"X")
            except OSError:
                pass
        time.sleep(1.0)
    def established(s):
        p = select.poll()
        p.register(s, select.POLLOUT)
        return bool(p.poll(0))

    open_ = [s for s in flood if not closed(s)]
    queue.put({"opened": len(flood), "held": sum(1 for s in open_ if established(s)),
               "connecting": sum(1 for s in open_ if not established(s)),
               "slow": len(slow),
               "slow_held": sum(1 for s in slow if not closed(s) and established(s))})
    for s in flood:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--drain", type=float, default=120.0,
                    help="longest wait for the master to accept what the flood queued")
    a = ap.parse_args()
    limit = raise_nofile(a.connections + 4096)

    c = common.Cluster(lease="600s")
    try:
        master = c.start_master()
        socks = [c.start_agent("n0"), c.start_agent("n1")]
        rss0, fds0 = common.rss_mb(master.pid), common.open_fds(master.pid)
        stop = threading.Event()
        stats = {"served": 0, "failed": 0, "probes": 0, "probe_failed": 0, "errors": []}
        lock = threading.Lock()

        def app(k):
            sock = socks[k % 2]
            dst = "n2" if k % 2 == 0 else "n3"
            i = 0
            while not stop.is_set():
                port = k * 10000 + i % 10000
                i += 1
                try:
                    r = common.local(sock, {"op": "request", "src_port": port,
                                            "dst": {"node": dst, "port": 0},
                                            "class": {"type": "premium", "bandwidth": 1000}})
                    ok = r.get("ok") and r["result"]["decision"]["decision"] == "granted"
                    if ok:
                        r = common.local(sock, {"op": "release", "src_port": port,
                                                "dst": {"node": dst, "port": 0}})
                        ok = r.get("ok")
                except (OSError, ValueError) as e:
                    ok, r = False, str(e)
                with lock:
                    if ok:
                        stats["served"] += 1
                    else:
                        stats["failed"] += 1
                        stats["errors"].append(str(r)[:200])
                time.sleep(0.02)

        def probe():
            while not stop.is_set():
                try:
                    status, _ = c.http("GET", "/v1/version", node_auth=False, timeout=10)
                    good = status == 200
                except OSError:
                    good = False
                with lock:
                    stats["probes"] += 1
                    if not good:
                        stats["probe_failed"] += 1
                time.sleep(0.5)

        workers = [threading.Thread(target=app, args=(k,), daemon=True) for k in range(4)]
        workers.append(threading.Thread(target=probe, daemon=True))
        for w in workers:
            w.start()

        # The flood, from child processes when one process may not hold that many
        # descriptors (raising the hard limit needs CAP_SYS_RESOURCE).
        per_child = max(1000, limit - 512)
        shares = [min(per_child, a.connections - i) for i in range(0, a.connections, per_child)]
        queue = multiprocessing.Queue()
        done = multiprocessing.Event()
        children = [multiprocessing.Process(target=flooder, args=(c.port, n, done, queue))
                    for n in shares]
        t0 = time.time()
        for ch in children:
            ch.start()
        peak_rss, peak_fds = common.rss_mb(master.pid), common.open_fds(master.pid)
        while time.time() < t0 + a.seconds:
            peak_rss = max(peak_rss, common.rss_mb(master.pid))
            peak_fds = max(peak_fds, common.open_fds(master.pid))
            time.sleep(0.5)
        # The master's own count: its open descriptors, less those it had before.
        master_held = common.open_fds(master.pid) - fds0
        # Let it accept what the kernel still queues, then wait out the deadline.
        t1 = time.time()
        while backlog(c.port) > 0 and time.time() < t1 + a.drain:
            peak_fds = max(peak_fds, common.open_fds(master.pid))
            time.sleep(0.5)
        caught_up = time.time() - t1
        left = backlog(c.port)
        t2 = time.time()
        while time.time() < t2 + 12.0:
            peak_fds = max(peak_fds, common.open_fds(master.pid))
            time.sleep(0.5)
        done.set()
        reports = [queue.get(timeout=120) for _ in children]
        for ch in children:
            ch.join(60)
        opened = sum(r["opened"] for r in reports)
        held = sum(r["held"] for r in reports)
        connecting = sum(r["connecting"] for r in reports)
        slow_held = sum(r["slow_held"] for r in reports)
        slow_total = sum(r["slow"] for r in reports)
        stop.set()
        for w in workers:
            w.join(30)
        ok = (stats["failed"] == 0 and stats["probe_failed"] == 0 and stats["served"] > 0
              and peak_fds - fds0 <= 2 * UNAUTHENTICATED_LIMIT and slow_held == 0
              and left == 0)
        print("flood: %d connections opened; connections held by the master: peak %d, %d after "
              "%.0f s (descriptors above its start); accept queue emptied %.1f s later "
              "(%d still queued); slowloris still open 12 s after that %d of %d; agent "
              "requests served %d, failed %d; unauthenticated version probes %d, unanswered %d; "
              "master RSS %.0f -> peak %.0f MB; client side: %d open, %d still connecting "
              "(beyond the listen queue): %s"
              % (opened, peak_fds - fds0, master_held, a.seconds, caught_up, left,
                 slow_held, slow_total,
                 stats["served"], stats["failed"], stats["probes"], stats["probe_failed"],
                 rss0, peak_rss, held, connecting, "ok" if ok else "FAILED"))
        if stats["errors"]:
            print("first agent errors: %s" % stats["errors"][:3], file=sys.stderr)
        return 0 if ok else 1
    finally:
        c.close()


if __name__ == "__main__":
    sys.exit(main())
