#!/usr/bin/env python3
"""Chaos (a): repeated kill -9 of the master under request load.

A manager and one agent on loopback; 8 application threads ask the agent for small
premium flows as fast as they can (and release one in four). Every round the master is
killed with SIGKILL mid-load and restarted on the same database; the agent re-syncs on
its own. After each restart the master's flows must include every grant acknowledged
before the kill and no release acknowledged before it. With --truncate-wal the WAL's
last frame is also cut after each kill (a disk losing the tail of a file): the master
must then refuse to start, naming the missing transactions, or have lost nothing.
Bounded: --rounds kills, --seconds of load each.

Prints one line with the figures; exits 1 if any acknowledged grant was lost or any
acknowledged release came back.
"""

import argparse
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def truncate_wal(wal, page=1024):
    """Cuts the last valid frame off `wal` (frames left from an earlier pass over the
    file carry other salts and are not part of it); returns the file's old content, or
    None if it holds no valid frame."""
    try:
        with open(wal, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    frame = 24 + page
    salts = data[16:24]
    end = 32
    while end + frame <= len(data) and data[end + 8:end + 16] == salts:
        end += frame
    if end == 32:
        return None
    with open(wal, "r+b") as f:
        f.truncate(end - frame)
    try:
        os.remove(wal[:-len("-wal")] + "-shm")
    except FileNotFoundError:
        pass
    return data


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--truncate-wal", action="store_true",
                    help="after each kill, cut the WAL's last frame: the master must refuse "
                         "to start (missing transactions) or have lost nothing")
    a = ap.parse_args()
    truncations = {"refused": 0, "harmless": 0, "none": 0}

    c = common.Cluster(lease="600s")
    try:
        c.start_master()
        sock = c.start_agent("n0")
        lock = threading.Lock()
        acked, released, in_flight = set(), set(), set()
        next_flow = [0]
        counts = {"grants": 0, "releases": 0}
        stop = threading.Event()

        def flow_of(i):
            # Source port and destination port together give 2^32 distinct flows.
            return i % 65536, i // 65536

        def client():
            conn = None
            while not stop.is_set():
                with lock:
                    i = next_flow[0]
                    next_flow[0] += 1
                    in_flight.add(i)
                sp, dp = flow_of(i)
                try:
                    if conn is None:
                        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        conn.settimeout(30)
                        conn.connect(sock)
                    r = common.local(sock, {"op": "request", "src_port": sp,
                                            "dst": {"node": "n1", "port": dp},
                                            "class": {"type": "premium", "bandwidth": 1000}}, conn)
                except (OSError, ValueError):
                    conn = None
                    time.sleep(0.05)
                    continue  # the flow stays in flight: granted or not, nobody knows
                if not r.get("ok"):
                    time.sleep(0.02)  # master down: the agent says so; in flight
                    continue
                if r["result"]["decision"]["decision"] != "granted":
                    raise SystemExit("unexpected rejection: %s" % r)
                with lock:
                    in_flight.discard(i)
                    acked.add(i)
                    counts["grants"] += 1
                if i % 4 == 0:
                    try:
                        r = common.local(sock, {"op": "release", "src_port": sp,
                                                "dst": {"node": "n1", "port": dp}}, conn)
                    except (OSError, ValueError):
                        conn = None
                        with lock:
                            in_flight.add(i)  # its release may or may not have happened
                        continue
                    with lock:
                        if r.get("ok"):
                            acked.discard(i)
                            released.add(i)
                            counts["releases"] += 1
                        else:
                            in_flight.add(i)

        lost = resurrected = unexplained = 0
        restarts = []
        for _ in range(a.rounds):
            stop.clear()
            threads = [threading.Thread(target=client, daemon=True) for _ in range(a.clients)]
            for t in threads:
                t.start()
            time.sleep(a.seconds)
            c.kill_master()
            stop.set()
            for t in threads:
                t.join(60)
            with lock:
                want, gone, unknown = set(acked), set(released), set(in_flight)
            saved = truncate_wal(c.path("manager.db-wal")) if a.truncate_wal else None
            if a.truncate_wal and saved is None:
                truncations["none"] += 1
            t0 = time.time()
            try:
                c.start_master()
            except RuntimeError:
                with open(c.path("manager.log")) as f:
                    last = f.read().strip().splitlines()[-1]
                if saved is None or "transactions are missing" not in last:
                    raise
                truncations["refused"] += 1
                with open(c.path("manager.db-wal"), "wb") as f:
                    f.write(saved)  # put the WAL back as it was, and go on
                c.start_master()
            else:
                if saved is not None:
                    truncations["harmless"] += 1
            restarts.append(time.time() - t0)
            if os.environ.get("CHAOS_DEBUG"):
                print("restart %.2f s" % restarts[-1], file=sys.stderr)
            status, body = c.http("GET", "/v1/flows")
            if status != 200:
                raise SystemExit("flows after restart: %s %s" % (status, body))
            found = {e["flow"]["src"]["port"] + 65536 * e["flow"]["dst"]["port"] for e in body["flows"]}
            lost += len(want - found - unknown)
            resurrected += len(gone & found - unknown)
            unexplained += len(found - want - unknown)
            with lock:
                # What the restarted master holds is the truth from now on.
                acked = found - gone
                released -= found
                in_flight.clear()
                held = len(acked)
        restarts.sort()
        ok = lost == 0 and resurrected == 0 and unexplained == 0
        print("kill9-master: %d kills under load, %d grants acknowledged (%d releases), "
              "%d held after the last restart, lost %d, released-then-back %d, unexplained %d, "
              "restart p50 %.2f s max %.2f s: %s"
              % (a.rounds, counts["grants"], counts["releases"], held, lost, resurrected,
                 unexplained, restarts[len(restarts) // 2], restarts[-1], "ok" if ok else "FAILED"))
        if a.truncate_wal:
            print("kill9-master: WAL cut after %d kills: start refused (missing transactions) "
                  "%d, started %d (their losses are counted above), no WAL to cut %d"
                  % (a.rounds, truncations["refused"], truncations["harmless"],
                     truncations["none"]))
        return 0 if ok else 1
    finally:
        c.close()


if __name__ == "__main__":
    sys.exit(main())
