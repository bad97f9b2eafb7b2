#!/usr/bin/env python3
"""Chaos: authenticated slow bodies against the master.

Starts a manager, records its RSS, then opens --connections connections that each send
a complete, authenticated request head (the cluster's secret, content-type JSON, a
content-length of 100,000) and then trickle the body a few bytes a second. The master
must close every one of them at the whole-request deadline (10 s after its head),
answering 408, and its RSS must come back to within --rss-slack MB of the start once
they are gone, 10 s later (memory measured from /proc, outside the program).

Prints one line: connections opened, answered 408, closed by the master by 12 s and
by the end, the median, 99th percentile and longest time a connection stayed open, RSS
at start, peak and end; and, from the connections' opening to the last one closed, the
master's CPU (user + system, /proc) and how long its threads waited for a processor
(/proc schedstat), each as a share of one core: a master starved by the machine's load
fires its deadlines late however they are kept. Exits 1 if a connection outlived the
deadline by more than 2 s, or RSS did not come back.
"""

import argparse
import os
import resource
import select
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DEADLINE = 10.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=3000)
    ap.add_argument("--rss-slack", type=float, default=16.0)
    ap.add_argument("--master-cgroup", metavar="DIR",
                    help="move the master into this cgroup (its cgroup.procs), e.g. one with a "
                    "CPU quota: the master on a slower processor, while this script's "
                    "connections keep theirs")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.connections + 1024
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    c = common.Cluster(lease="600s")
    try:
        master = c.start_master()
        if a.master_cgroup:
            with open(os.path.join(a.master_cgroup, "cgroup.procs"), "w") as f:
                f.write(str(master.pid))
        time.sleep(0.5)
        rss0 = common.rss_mb(master.pid)
        cpu0, wait0, span0 = (common.cpu_secs(master.pid), common.waited_secs(master.pid),
                              time.time())
        head = ("POST /v1/agents/n0/flows HTTP/1.1\r\nhost: x\r\nclusterqos-protocol: 1\r\n"
                "authorization: Bearer %s\r\ncontent-type: application/json\r\n"
                "content-length: 100000\r\n\r\n{" % common.SECRET).encode()
        conns = []
        opened_at = {}
        live = set()
        closed_at = {}
        st = {"got408": 0, "peak": rss0, "trickle": 0.0, "rss": 0.0}
        # One epoll set for the whole run, served while connections are still being
        # opened too: on a loaded machine opening 3,000 connections can take longer
        # than the deadline, and a close is timed when this script sees it.
        ep = select.epoll()
        by_fd = {}

        def serve(timeout):
            now = time.time()
            if now - st["trickle"] >= 1.0:
                st["trickle"] = now
                for s in list(live):
                    try:
                        s.send(b" ")
                    except OSError:
                        pass
            if now >= st["rss"]:
                st["rss"] = now + 0.1
                st["peak"] = max(st["peak"], common.rss_mb(master.pid))
            for fd, _ in ep.poll(timeout):
                s = by_fd[fd]
                if s not in live:
                    continue
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if data.startswith(b"HTTP/1.1 408"):
                    st["got408"] += 1
                if not data or b"\r\n\r\n" in data:
                    # The reply, then the end of the stream (read on the next pass).
                    try:
                        more = s.recv(65536)
                    except BlockingIOError:
                        more = None
                    except OSError:
                        more = b""
                    if not data or more == b"":
                        closed_at[s] = time.time()
                        live.discard(s)
                        ep.unregister(fd)

        drops0 = common.listen_drops()
        for _ in range(a.connections):
            s = socket.create_connection(("127.0.0.1", c.port))
            s.sendall(head)
            s.setblocking(False)
            conns.append(s)
            opened_at[s] = time.time()
            live.add(s)
            ep.register(s.fileno(), select.EPOLLIN)
            by_fd[s.fileno()] = s
            serve(0)
        t0 = time.time()
        dropped = common.listen_drops() - drops0
        while live and time.time() - t0 < DEADLINE + 20:
            serve(0.1)
        ep.close()
        got408, peak = st["got408"], st["peak"]
        span = time.time() - span0
        cpu = (common.cpu_secs(master.pid) - cpu0) / span
        waited = (common.waited_secs(master.pid) - wait0) / span
        open_for = sorted(closed_at[s] - opened_at[s] for s in closed_at) or [0.0]
        longest = open_for[-1]
        p50, p99 = open_for[len(open_for) // 2], open_for[int(len(open_for) * 0.99)]
        by12 = sum(1 for s in closed_at if closed_at[s] - opened_at[s] <= DEADLINE + 2)
        for s in conns:
            s.close()
        time.sleep(3.0)  # freed memory goes back within a second
        rss3 = common.rss_mb(master.pid)
        time.sleep(7.0)
        rss1 = common.rss_mb(master.pid)
    finally:
        c.close()
    ok = not live and by12 == len(conns) and rss1 - rss0 <= a.rss_slack
    print("slow-bodies: %d authenticated connections trickling their bodies; %d answered 408, "
          "%d closed within the %.0f s deadline + 2 s, %d still open at the end; open for p50 "
          "%.1f s, p99 %.1f s, longest %.1f s; master RSS %.1f MB at start, peak %.1f, %.1f 3 s "
          "after, %.1f 10 s after; master CPU %.0f %% of a core, waiting for a processor %.0f %%; "
          "handshakes dropped for a full accept queue while opening %d: %s"
          % (len(conns), got408, by12, DEADLINE, len(live), p50, p99, longest, rss0, peak, rss3,
             rss1, cpu * 100, waited * 100, dropped, "ok" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
