#!/usr/bin/env python3
"""Chaos: authenticated slow bodies against the master.

Starts a manager, records its RSS, then opens --connections connections that each send
a complete, authenticated request head (the cluster's secret, content-type JSON, a
content-length of 100,000) and then trickle the body a few bytes a second. The master
must close every one of them at the whole-request deadline (10 s after its head),
answering 408, and its RSS must come back to within --rss-slack MB of the start once
they are gone, 10 s later (memory measured from /proc, outside the program).

Prints one line: connections opened, answered 408, closed by the master by 12 s and
by the end, the longest a connection stayed open, RSS at start, peak and end. Exits 1
if a connection outlived the deadline by more than 2 s, or RSS did not come back.
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
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.connections + 1024
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    c = common.Cluster(lease="600s")
    try:
        master = c.start_master()
        time.sleep(0.5)
        rss0 = common.rss_mb(master.pid)
        head = ("POST /v1/agents/n0/flows HTTP/1.1\r\nhost: x\r\nclusterqos-protocol: 1\r\n"
                "authorization: Bearer %s\r\ncontent-type: application/json\r\n"
                "content-length: 100000\r\n\r\n{" % common.SECRET).encode()
        conns = []
        opened_at = {}
        for _ in range(a.connections):
            s = socket.create_connection(("127.0.0.1", c.port))
            s.sendall(head)
            s.setblocking(False)
            conns.append(s)
            opened_at[s] = time.time()
        t0 = time.time()
        live = set(conns)
        closed_at = {}
        got408 = 0
        peak = rss0
        last_trickle = 0.0
        while live and time.time() - t0 < DEADLINE + 20:
            now = time.time()
            if now - last_trickle >= 1.0:
                last_trickle = now
                for s in list(live):
                    try:
                        s.send(b" ")
                    except OSError:
                        pass
            peak = max(peak, common.rss_mb(master.pid))
            p = select.poll()
            by_fd = {}
            for s in live:
                p.register(s, select.POLLIN)
                by_fd[s.fileno()] = s
            for fd, _ in p.poll(100):
                s = by_fd[fd]
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if data.startswith(b"HTTP/1.1 408"):
                    got408 += 1
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
        longest = max((closed_at[s] - opened_at[s] for s in closed_at), default=0.0)
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
          "%d closed within the %.0f s deadline + 2 s, %d still open at the end; longest %.1f s; "
          "master RSS %.1f MB at start, peak %.1f, %.1f 3 s after, %.1f 10 s after: %s"
          % (len(conns), got408, by12, DEADLINE, len(live), longest, rss0, peak, rss3, rss1,
             "ok" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
