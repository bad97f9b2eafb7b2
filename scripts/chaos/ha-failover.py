#!/usr/bin/env python3
"""Chaos: the replicated manager under faults, on loopback.

A 3-member etcd cluster, 3 manager replicas sharing it, and agents on n0 and n1 given
every replica's URL; application threads on both agents keep up a steady load of
premium requests and releases (each thread holds up to --hold flows of --bandwidth,
enough to press on the nodes' capacity, so admission rejects some). Then, under that
load:

- kill:  SIGKILL of the leader (--kills times; the killed replica is started again);
- stop:  SIGSTOP of the leader for 2 x the election TTL, then SIGCONT (--stops times).
         Requests queued to it while it is stopped, and more after it resumes, probe
         it (GET /v1/status, and a flow request admission must refuse): it must answer
         none of them (only 503 or a redirect) while another replica leads;
- etcd:  SIGKILL of one etcd member (in turn etcd's Raft leader and a follower), then
         of the leader with it (--etcd-rounds times; both are started again).

After each fault the load pauses while the acknowledged grants are compared with the
store (etcdctl): lost = acknowledged and not released, yet absent. At the end the whole
committed history is read back from etcd (every revision) and checked twice:

- fencing: every transaction carries the term of the leader that wrote it (the meta
  key), which is the create revision of that leader's election key. Replaying the
  election keys' puts and deletes beside it gives who led at each revision (etcd's
  election: the live key created first); a transaction whose term is not the leader's
  at its revision is a commit by a deposed leader (or by a replica never elected);
- over-commit: every grant and release, in commit order, is replayed through
  qos-core's admission (`clusterqos admit`); a replayed grant that admission rejects
  is a moment some link was over-committed.

Failover time: from the fault (kill or stop) to the first grant acknowledged after it.
Refused: requests answered with an error in that window. Prints one table and one
line; exits 1 if anything was lost, over-committed or committed by a deposed leader.
Needs the etcd and etcdctl binaries (Debian etcd-server, etcd-client) and a built
clusterqos (release preferred; $CLUSTERQOS).
"""

import argparse
import base64
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import ha  # noqa: E402

DSTS = ("n2", "n3")


class Load:
    """Application threads on the agents' sockets: request/release, with outcomes."""

    def __init__(self, socks, per_agent, hold, bandwidth):
        self.lock = threading.Lock()
        self.run = threading.Event()
        self.quit = False
        self.events = []  # (time answered, kind, time asked): grant, reject, refused
        self.threads = []
        self.state = []  # per thread: {"held": set, "unknown": set, "released": set}
        self.hold, self.bandwidth = hold, bandwidth
        self.idle = []
        for n, sock in enumerate(socks):
            for k in range(per_agent):
                t = len(self.threads)
                st = {"node": "n%d" % n, "sock": sock, "held": set(), "unknown": set(),
                      "released": set(), "base": 1 + t * 2048, "next": 0}
                self.state.append(st)
                ev = threading.Event()
                self.idle.append(ev)
                th = threading.Thread(target=self.worker, args=(st, ev), daemon=True)
                self.threads.append(th)

    def start(self):
        self.run.set()
        for t in self.threads:
            t.start()

    def note(self, kind, asked):
        with self.lock:
            self.events.append((time.time(), kind, asked))

    def worker(self, st, idle):
        conn = None
        rnd = random.Random(st["base"])
        while not self.quit:
            if not self.run.is_set():
                idle.set()
                self.run.wait(0.2)
                continue
            idle.clear()
            asked = time.time()
            try:
                if conn is None:
                    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    conn.settimeout(60)
                    conn.connect(st["sock"])
                # Full: release; empty: request; else either, so that a node at
                # capacity keeps freeing room (and grants go on beside rejections).
                if len(st["held"]) >= self.hold or (st["held"] and rnd.random() < 0.5):
                    port = rnd.choice(sorted(st["held"]))
                    st["held"].discard(port)
                    st["unknown"].add(port)
                    r = common.local(st["sock"], {"op": "release", "src_port": port,
                                                  "dst": {"node": DSTS[port % 2], "port": 0}}, conn)
                    if r.get("ok"):
                        st["unknown"].discard(port)
                        st["released"].add(port)
                    else:
                        self.note("refused", asked)
                        time.sleep(0.02)
                    continue
                port = st["base"] + st["next"] % 2048
                st["next"] += 1
                if port in st["held"] or port in st["unknown"]:
                    continue
                st["released"].discard(port)
                st["unknown"].add(port)
                r = common.local(st["sock"], {"op": "request", "src_port": port,
                                              "dst": {"node": DSTS[port % 2], "port": 0},
                                              "class": {"type": "premium",
                                                        "bandwidth": self.bandwidth}}, conn)
            except (OSError, ValueError):
                conn = None
                self.note("refused", asked)
                time.sleep(0.05)
                continue
            if not r.get("ok"):
                self.note("refused", asked)
                time.sleep(0.02)  # the agent says no leader answers: retried later
                continue
            d = r["result"]["decision"]["decision"]
            st["unknown"].discard(port)
            if d == "granted":
                st["held"].add(port)
                self.note("grant", asked)
            else:
                self.note("reject", asked)

    def pause(self):
        self.run.clear()
        for ev in self.idle:
            if not ev.wait(90):
                raise SystemExit("a load thread did not stop within 90 s")

    def resume(self):
        self.run.set()

    def stop(self):
        self.quit = True
        self.run.set()

    def first_grant_after(self, t0):
        """When the first grant asked for after t0 was answered: a grant asked before
        the fault may be answered just after it, by the leader that was killed."""
        with self.lock:
            got = [t for t, kind, asked in self.events if asked >= t0 and kind == "grant"]
        return min(got) if got else None

    def refused_between(self, t0, t1):
        with self.lock:
            return sum(1 for t, k, _ in self.events if t0 <= t <= t1 and k == "refused")


def check(c, load):
    """Pauses nothing itself: call with the load paused. Returns (held, lost, back):
    flows acknowledged and not released, those of them missing from the store, and
    flows released yet back in it."""
    stored = c.stored_flows()
    held = lost = back = 0
    for st in load.state:
        have = {p for (n, p, _) in stored if n == st["node"]}
        held += len(st["held"])
        lost += len(st["held"] - have)
        back += len((st["released"] - st["unknown"]) & have)
        # What the store holds is the truth for the flows nobody knows about.
        for p in list(st["unknown"]):
            if p in have:
                st["held"].add(p)
            st["unknown"].discard(p)
        st["released"] -= have
    return held, lost, back


def history(c):
    """Every event under the prefix since revision 1, in commit order."""
    p = subprocess.Popen(
        ["etcdctl", "--endpoints", c.endpoints(), "watch", "--rev", "1", "--prefix",
         "/%s/" % ha.ETCD_PREFIX, "-w", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=dict(os.environ, ETCDCTL_API="3"))
    out = []
    done = threading.Event()

    def read():
        for line in p.stdout:
            line = line.strip()
            if line.startswith("{"):
                out.extend(json.loads(line).get("Events") or [])
                last[0] = time.time()
        done.set()

    last = [time.time()]
    threading.Thread(target=read, daemon=True).start()
    while time.time() - last[0] < 3 and not done.is_set():
        time.sleep(0.2)
    p.kill()
    p.wait()
    return out


def verify_history(c, events, work):
    """(transactions, stale commits, grants replayed, over-committed grants)."""
    dec = lambda b: base64.b64decode(b).decode() if b else ""
    prefix = "/%s/" % ha.ETCD_PREFIX
    steps, flows = [], {}
    groups = {}  # flow key -> {flow id: value} it holds
    terms, stale, txns = set(), 0, 0
    election = {}  # election key -> its create revision, while it exists
    for e in events:
        kv = e["kv"]
        key = dec(kv["key"])
        deleted = e.get("type") == 1
        if key.startswith(prefix + "leader/"):
            if deleted:
                election.pop(key, None)
            else:
                election.setdefault(key, int(kv["create_revision"]))
        elif key == prefix + "meta" and not deleted:
            m = json.loads(dec(kv["value"]))
            txns += 1
            # Written in the same transaction as the guard that compared the election
            # key: the term must be the leader's at this revision.
            if not election or m["term"] != min(election.values()):
                stale += 1
            terms.add(m["term"])
        elif key.startswith(prefix + "flows/"):
            # A flow key holds the flows one transaction granted and that are not
            # released yet (a JSON array; a single value is a group of one): a write
            # grants the flows new to the key and releases those gone from it. The
            # manager writes a transaction's releases before its grants, so each
            # transaction is replayed releases first: its end state is what is checked.
            old = groups.pop(key, {})
            new = {}
            if not deleted:
                v = json.loads(dec(kv["value"]))
                for r in (v if isinstance(v, list) else [v]):
                    new[str(r["id"])] = r
                groups[key] = new
            for fid in old:
                if fid not in new and fid in flows:
                    steps.append('[[step]]\nrelease = "f%s"\n' % fid)
                    del flows[fid]
            for fid, v in new.items():
                if fid in old:
                    continue
                f = v["flow"]
                bw = v["class"].get("bandwidth", 0)
                flows[fid] = True
                steps.append('[[step]]\nrequest = "premium"\nname = "f%s"\nfrom = "%s:%d"\n'
                             'to = "%s:%d"\nbandwidth = "%dB/s"\n'
                             % (fid, f["src"]["node"], f["src"]["port"], f["dst"]["node"],
                                f["dst"]["port"], bw))
    topo = "\n".join(("[topology.%s]" % l[1:-1]) if l.startswith("[") else l
                     for l in common.TOPOLOGY.splitlines())
    path = os.path.join(work, "history.toml")
    with open(path, "w") as f:
        f.write("[topology]\n" + topo + "\n\n" + "\n".join(steps))
    r = subprocess.run([c.bin, "admit", path, "--json"], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise SystemExit("replaying the history failed: %s" % r.stderr.strip())
    rep = json.loads(r.stdout)
    grants = [s for s in rep["steps"] if s["action"] == "request"]
    over = sum(1 for s in grants if s["decision"] != "granted")
    return txns, len(terms), stale, len(grants), over


def resumed(log, offset):
    """What a leader resumed after SIGSTOP logged from `offset` on, in words."""
    with open(log) as f:
        f.seek(offset)
        text = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
    how = re.findall(r"no longer leading term=\d+ reason=([^\n]*)", text)
    fenced = re.findall(r"the store writer stopped.*reason=deposed.*dropped=(\d+)", text)
    said = "why: %s" % (how[0].strip() if how else "(not logged)")
    if fenced:
        return ("its writer sent a commit that etcd refused (fenced), %d decisions dropped "
                "unacknowledged; %s" % (sum(int(d) for d in fenced), said))
    return "it sent no commit; %s" % said


class Probe:
    """Keep-alive connections to one replica, opened while it is stopped: each sends
    GET /v1/status and a flow request too large to grant, again and again, until
    stopped. Counts replies by status; a 200 is an answer from the stopped replica's
    books."""

    def __init__(self, port, secret, conns=4):
        self.port, self.secret = port, secret
        self.counts = {}
        self.answers = []  # (path, status, body) of every 200
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(conns)]
        for t in self.threads:
            t.start()

    def run(self):
        import http.client
        body = json.dumps({"flow": {"src": {"node": "n0", "port": 60000 + random.randrange(999)},
                                    "dst": {"node": "n2"}},
                           "class": {"type": "premium", "bandwidth": 10 ** 15},
                           "owner": {"uid": 1000, "pid": 4242}})
        h = {"clusterqos-protocol": "1", "authorization": "Bearer " + self.secret}
        while not self.stop.is_set():
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                while not self.stop.is_set():
                    for method, path, data in (("GET", "/v1/status", None),
                                               ("POST", "/v1/agents/n0/flows", body)):
                        hh = dict(h, **({"content-type": "application/json"} if data else {}))
                        c.request(method, path, body=data, headers=hh)
                        r = c.getresponse()
                        text = r.read().decode(errors="replace")
                        with self.lock:
                            self.counts[r.status] = self.counts.get(r.status, 0) + 1
                            if r.status == 200:
                                self.answers.append((path, r.status, text[:200]))
            except (OSError, ValueError):
                time.sleep(0.01)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=35)
        return self.counts, self.answers


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--stops", type=int, default=2)
    ap.add_argument("--etcd-rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=1.5, help="load before each fault")
    ap.add_argument("--clients", type=int, default=4, help="application threads per agent")
    ap.add_argument("--hold", type=int, default=12, help="flows each thread keeps")
    ap.add_argument("--bandwidth", type=int, default=3_000_000, help="bytes/s per flow")
    ap.add_argument("--ttl", type=int, default=2, help="election TTL, seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--manager-arg", action="append", default=[],
                    help="an extra argument for every replica, e.g. --manager-arg=--leader-probe=0s "
                    "(repeat for more)")
    a = ap.parse_args()
    random.seed(a.seed)
    # The whole history is read back at the end: the leaders must not compact it.
    c = ha.HaCluster(ttl="%ds" % a.ttl, extra=["--etcd-compact", "0s"] + a.manager_arg)
    rows = []  # (fault, failover s, refused, lost, back, held)
    members = []  # etcd member killed alone: (which, s to the first grant, refused)
    notes = []
    stale_answers = []  # per stop: replies with 200 from the resumed, deposed replica
    try:
        c.start_etcd()
        c.start_replicas()
        if c.leader() is None:
            raise SystemExit("no leader elected")
        socks = [c.start_agent("n0"), c.start_agent("n1")]
        load = Load(socks, a.clients, a.hold, a.bandwidth)
        load.start()

        def failover(kind, t0, exclude):
            new = c.leader(limit=60, exclude=exclude)
            if new is None:
                raise SystemExit("%s: no new leader within 60 s" % kind)
            deadline = time.time() + 60
            while load.first_grant_after(t0) is None and time.time() < deadline:
                time.sleep(0.02)
            t1 = load.first_grant_after(t0)
            if t1 is None:
                raise SystemExit("%s: no grant within 60 s of the fault" % kind)
            return t1 - t0, load.refused_between(t0, t1)

        def settle(kind, fo, refused):
            load.pause()
            held, lost, back = check(c, load)
            rows.append((kind, fo, refused, lost, back, held))
            if os.environ.get("CHAOS_DEBUG"):
                print("%s: failover %.2f s, refused %d, lost %d, back %d"
                      % (kind, fo, refused, lost, back), file=sys.stderr)
            load.resume()

        plan = ["kill"] * a.kills + ["stop"] * a.stops + ["etcd"] * a.etcd_rounds
        for n, kind in enumerate(plan):
            time.sleep(a.seconds)
            j = c.leader()
            if kind == "kill":
                t0 = time.time()
                c.kill_replica(j)
                fo, refused = failover(kind, t0, {j})
                c.start_replica(j)
            elif kind == "stop":
                t0 = time.time()
                c.signal_replica(j, signal.SIGSTOP)
                time.sleep(2 * a.ttl)
                fo, refused = failover(kind, t0, {j})
                log_from = os.path.getsize(c.path("replica-%d.log" % j))
                with open(c.path("secret")) as f:
                    probe = Probe(c.replicas[j]["port"], f.read().strip())
                time.sleep(0.2)  # the probes' requests wait in the stopped replica's queue
                c.signal_replica(j, signal.SIGCONT)
                deadline = time.time() + 30
                while (c.role(j) or ("?",))[0] != "follower" and time.time() < deadline:
                    time.sleep(0.05)
                time.sleep(1.0)
                counts, answers = probe.finish()
                stale_answers.append(len(answers))
                notes.append("stop %d: probes of the resumed replica answered %s; %s"
                             % (n, " ".join("%d x%d" % kv for kv in sorted(counts.items())),
                                "; ".join("%s -> %s" % (p_, b[:80]) for p_, _, b in answers[:2])
                                or "none from its books"))
                role = c.role(j)
                if role is None or role[0] != "follower":
                    raise SystemExit("the resumed replica did not step down: %s" % (role,))
                time.sleep(0.5)  # its writer may log just after the role changed
                notes.append("stop %d: the resumed replica stepped down; %s"
                             % (n, resumed(c.path("replica-%d.log" % j), log_from)))
            else:
                # Alternately etcd's Raft leader (a Raft election on top) and a follower.
                raft = c.raft_leader()
                k = plan[:n].count("etcd")
                others = [i for i in range(len(c.members)) if i != raft]
                m = raft if k % 2 == 0 and raft is not None else others[k % len(others)]
                c.kill_member(m)
                t_m = time.time()
                deadline = t_m + 60
                while load.first_grant_after(t_m) is None and time.time() < deadline:
                    time.sleep(0.02)
                first = load.first_grant_after(t_m)
                if first is None:
                    raise SystemExit("etcd %d: no grant within 60 s of killing member m%d" % (n, m))
                time.sleep(a.seconds)
                with load.lock:
                    during = sum(1 for t, k, _ in load.events
                                 if first <= t < first + a.seconds and k == "grant")
                was = "etcd's Raft leader" if raft == m else "a Raft follower"
                members.append((was, first - t_m, load.refused_between(t_m, first)))
                notes.append("etcd %d: member m%d killed (%s): the first grant %.2f s after, "
                             "then %d grants in %.1f s on 2 of 3 members"
                             % (n, m, was, first - t_m, during, a.seconds))
                j = c.leader()
                t0 = time.time()
                c.kill_replica(j)
                fo, refused = failover(kind, t0, {j})
                c.start_replica(j)
                c.start_member(m)
            settle(kind, fo, refused)

        load.pause()
        load.stop()
        events = history(c)
        txns, terms, stale, grants, over = verify_history(c, events, c.dir)
        with load.lock:
            acked = sum(1 for _, k, _ in load.events if k == "grant")
            rejected = sum(1 for _, k, _ in load.events if k == "reject")
            refused_all = sum(1 for _, k, _ in load.events if k == "refused")
    finally:
        c.close(remove=not os.environ.get("CHAOS_KEEP"))

    # held: acknowledged flows not released, summed over the checks after each fault;
    # found: those of them in the store.
    print("%-6s %6s %12s %12s %10s %10s %7s %7s %6s %6s" % ("fault", "trials", "failover p50",
          "failover p99", "max (s)", "refused", "held", "found", "lost", "back"))
    for kind in ("kill", "stop", "etcd"):
        rs = [r for r in rows if r[0] == kind]
        if not rs:
            continue
        fo = [r[1] for r in rs]
        held, lost = sum(r[5] for r in rs), sum(r[3] for r in rs)
        print("%-6s %6d %11.2fs %11.2fs %10.2f %10d %7d %7d %6d %6d"
              % (kind, len(rs), pct(fo, 0.5), pct(fo, 0.99), max(fo), sum(r[2] for r in rs),
                 held, held - lost, lost, sum(r[4] for r in rs)))
    for was in ("etcd's Raft leader", "a Raft follower"):
        ms = [r for r in members if r[0] == was]
        if ms:
            print("member %-18s %2d trials: first grant after the kill p50 %.2f s, max %.2f s; "
                  "refused %d" % (was, len(ms), pct([r[1] for r in ms], 0.5),
                                  max(r[1] for r in ms), sum(r[2] for r in ms)))
    for note in notes:
        print(note)
    lost = sum(r[3] for r in rows)
    back = sum(r[4] for r in rows)
    allfo = [r[1] for r in rows]
    ok = lost == 0 and back == 0 and over == 0 and stale == 0 and sum(stale_answers) == 0
    print("ha-failover: %d faults, %d grants acknowledged (%d rejected by admission, %d "
          "refused as retryable), lost %d, released-then-back %d; history: %d transactions "
          "in %d terms, %d by a deposed leader, %d grants replayed through admission, %d "
          "over-committed; answers from a deposed replica %d in %d stops; "
          "failover p50 %.2f s p99 %.2f s: %s"
          % (len(rows), acked, rejected, refused_all, lost, back, txns, terms, stale, grants,
             over, sum(stale_answers), len(stale_answers), pct(allfo, 0.5), pct(allfo, 0.99),
             "ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
