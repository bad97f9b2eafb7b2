#!/usr/bin/env python3
"""Chaos (c): an authenticated event stream that is never read.

Starts a manager, opens node n0's event stream with the cluster's secret (a small
receive buffer, and nothing ever read), registers --best-effort best-effort flows from
n0, then makes --pairs premium request/release pairs from n0 — each of which moves
every best-effort share, so every update carries hundreds of rows for the stalled
stream. Samples the master's RSS throughout, then closes the stream.

Prints one line: flows, pairs, time, master RSS before / at the peak / after the
stream closed, re-syncs counted by the master. Exits 1 if the peak exceeds --max-mb
(default 100).
"""

import argparse
import http.client
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def flow(port, dst, cls):
    return {"flow": {"src": {"node": "n0", "port": port}, "dst": {"node": dst, "port": 0}},
            "class": cls, "owner": {"uid": 0, "pid": os.getpid()}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--best-effort", type=int, default=300)
    ap.add_argument("--pairs", type=int, default=3000)
    ap.add_argument("--max-mb", type=float, default=100.0)
    a = ap.parse_args()

    c = common.Cluster(lease="600s")
    try:
        master = c.start_master()
        rss0 = common.rss_mb(master.pid)
        # The stalled stream: authenticated, never read.
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", c.port))
        stalled.sendall(("GET /v1/agents/n0/events HTTP/1.1\r\nhost: x\r\n"
                         "clusterqos-protocol: 1\r\nauthorization: Bearer %s\r\n\r\n"
                         % common.SECRET).encode())
        peak = [rss0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], common.rss_mb(master.pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=30)
        headers = {"clusterqos-protocol": "1", "authorization": "Bearer " + common.SECRET,
                   "content-type": "application/json"}

        def post(path, body):
            conn.request("POST", path, body=json.dumps(body), headers=headers)
            r = conn.getresponse()
            text = r.read()
            if r.status != 200:
                raise SystemExit("%s: %d %s" % (path, r.status, text[:300]))
            return json.loads(text)

        t0 = time.time()
        for p in range(a.best_effort):
            post("/v1/agents/n0/flows", flow(p, "n1", {"type": "best_effort", "weight": 1}))
        for i in range(a.pairs):
            f = flow(10000 + i % 50000, "n2", {"type": "premium", "bandwidth": 1000})
            d = post("/v1/agents/n0/flows", f)
            if d["decision"] != "granted":
                raise SystemExit("unexpected rejection: %s" % d)
            post("/v1/agents/n0/flows/release", {"flow": f["flow"], "owner": f["owner"]})
        elapsed = time.time() - t0
        peak_during = peak[0]
        stalled.close()
        time.sleep(1.0)
        after = common.rss_mb(master.pid)
        done.set()
        sampler.join()
        status, text = c.http("GET", "/metrics", node_auth=False)
        resyncs = next((line.split()[-1] for line in str(text).splitlines()
                        if line.startswith("clusterqos_stream_resyncs_total")), "n/a")
        ok = peak_during <= a.max_mb
        print("stalled-stream: %d best-effort flows, %d request/release pairs in %.1f s; master "
              "RSS %.0f MB before, %.0f MB at the peak (limit %.0f), %.0f MB after the stream "
              "closed; re-syncs %s: %s"
              % (a.best_effort, a.pairs, elapsed, rss0, peak_during, a.max_mb, after, resyncs,
                 "ok" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        c.close()


if __name__ == "__main__":
    sys.exit(main())
