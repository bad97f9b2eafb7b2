"""Yum et al.'s mechanisms re-implemented from the paper's text alone (Yum, Jin, Kim and
Das, *Integration of Admission, Congestion, and Peak Power Control in QoS-Aware
Clusters*, ../shared/papers/001_…), and the command compared with them on random
inputs:

- VL arbitration (§3.3): IBA's two-level scheme — a high- and a low-priority table of
  (VL, weight) entries served by WRR ("a pointer circulates the table in a round robin
  fashion"; fast pointer: one flit per turn, slow pointer: "flits equal to its assigned
  weight" per turn), and the Limit of High Priority L, for which the paper gives
  "B = B_p + B_b and B_b = B/L where B_b is the minimum allocated bandwidth for
  best-effort traffic". With every lane of an output link backlogged, the link's flits
  therefore split as: low-priority table B/L (all of the link if no high lane waits,
  none if no low lane waits), high-priority table the rest, and within a table each lane
  its weights' share of the table's backlogged weights. Both pointers give these shares
  (they differ in how the turns are spread, not in how many flits a round gives a lane),
  so the share comparison checks the tables and the limit; the pointer is checked by how
  long a light lane waits behind a backlogged one (at most one flit with the fast
  pointer, at most the rest of the other entry's weight with the slow one).
- The energy model (§3.4, Table 1): a flit crossing a router costs one buffer write, one
  buffer read, one arbitration and one crossbar traversal, and every link it crosses
  10.21 pJ per bit; in a single-router cluster a flit crosses one router and two links.
- Peak power control for real time (§5): every router holds a share of P_RT and a probe
  of r bit/s is accepted only if the router's P_RT(i) covers E_router × r/f, which is
  subtracted ("P_RT(i) = P_RT(i) − E_router × r/f"); in a single-router cluster with
  equal rates the number admitted is the number of charges P_RT covers.
- Probe admission (§4.1): the HCA and each router accept a probe if the link "has
  sufficient bandwidth" and add the solicited bandwidth to it; on two nodes each link
  carries one node's connections, so each node keeps ⌊B/r⌋ of its equal-rate requests.

Where the paper is silent the project's declared choices are followed, each said where
it is used: the limit's integer 255 means "no limit" (IBA's encoding; docs/yum.md
`arbitration.limit`), weights count flits (the paper's slow pointer sends "flits equal to
its assigned weight"), the meter counts the HCA's links (docs/yum.md "The energy model"),
and arbitration is charged per flit (Table 1 gives it no unit).

Each comparison is checked to be able to fail: the same oracle against another arbiter
of the command (one WRR table over the same entries) and other readings of the paper
(B_b = B/(L+1); one link per flit; arbitration once per packet; probes charging the mean
rate; §3.3's strict "less than" for admission) and the command without the mechanism (no
peak power control, no admission control) must find differences.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

# --- VL arbitration under saturation (§3.3) ----------------------------------------

MEASURE = 20_000


def table_weights(table, backlogged):
    """Weight per backlogged lane of one table (entries of one lane add up)."""
    w: dict[int, int] = {}
    for vl, weight in table:
        if vl in backlogged:
            w[vl] = w.get(vl, 0) + weight
    return {v: x for v, x in w.items() if x > 0}


def shares(high, low, limit, backlogged, low_share_of=None):
    """Each backlogged lane's share of the output link (exact fractions).

    `limit` is the fraction B_b/B = 1/L the paper gives the low-priority table, or None
    for no limit (IBA's 255: high priority always first). `low_share_of` replaces the
    paper's B_b = B/L by another reading (the negative control)."""
    wh, wl = table_weights(high, backlogged), table_weights(low, backlogged)
    if low_share_of is not None and limit is not None:
        limit = low_share_of(limit)
    if wh and wl:
        f_low = Fraction(0) if limit is None else limit
    else:
        f_low = Fraction(1) if wl else Fraction(0)
    out = {}
    for w, f in ((wh, 1 - f_low), (wl, f_low)):
        total = sum(w.values())
        for v, x in w.items():
            out[v] = f * Fraction(x, total)
    return out


def random_tables(rng):
    lanes = rng.sample(range(15), rng.randint(2, 7))  # VL15 is control: always first
    cut = rng.randint(1, len(lanes) - 1)
    hi, lo = lanes[:cut], lanes[cut:]

    def table(vls):
        t = [(v, rng.randint(1, 12)) for v in vls]
        for _ in range(rng.randint(0, 2)):  # a lane may hold several entries (IBA)
            t.append((rng.choice(vls), rng.randint(0, 12)))
        rng.shuffle(t)
        return t

    return table(hi), table(lo)


def random_limit(rng):
    """(TOML of the limit, B_b/B as the paper gives it, or None for no limit)."""
    x = rng.random()
    if x < 0.15:
        # Project's declared reading of IBA's 255: no limit (docs/yum.md).
        return "limit = 255", None
    if x < 0.6:
        n = rng.randint(1, 8)
        return f"limit = {n}", Fraction(1, n)
    # L = B/(B − B_p) from admitted peaks: the paper's fractional L.
    b = rng.randint(10, 200)
    bp = rng.randint(0, b - 1)
    return f"limit = 255\nexact_limit = {{ of = {b}, low = {b - bp} }}", Fraction(b - bp, b)


# Yum's five stages with the header's routing and lane allocation in no time: a lane's
# next header takes the output lane in the cycle its tail leaves it, so a backlogged lane
# requests the link in every cycle, as the paper's shares presume. With the header
# stages of `delays = "yum"` a lane is idle at the crossbar for a cycle or two between
# packets; the router's output VL buffers (§3.1's stage 5, on by default under
# `delays = "yum"`) keep its flits before the link's arbiter then. Without them
# (`output_buffer = 0`) the arbiter gives those turns away, and when a lane's weight
# exceeds its packets' length the shares stray far from the tables (the tests below).
BACK_TO_BACK = (
    "{ sync = 1, route = 0, vl_alloc = 0, switch_alloc = 1, crossbar = 1, link = 1, credit = 1 }"
)


def saturation_scenario(rng, high, low, limit_toml, pointer, kind="iba", delays=BACK_TO_BACK):
    """A crossbar where each of a few output ports is fed, on each lane of a random
    subset of the tables' lanes, by its own source sending one flit per cycle. Returns
    the scenario's text, each output's lanes, the streams and the packet length."""
    lanes = sorted({v for v, _ in high} | {v for v, _ in low})
    outputs = []
    for _ in range(rng.randint(1, 3)):
        # A lane waits only if some entry of its table weighs it: IBA skips weight 0.
        live = [v for v in lanes if table_weights(high + low, {v})]
        outputs.append(sorted(rng.sample(live, rng.randint(1, len(live)))))
    ports = len(outputs) + sum(len(o) for o in outputs)
    length = rng.choice([8, 20, 40])

    def entries(t):
        return ", ".join(f"{{ vl = {v}, weight = {w} }}" for v, w in t)

    if kind == "iba":
        arb = (
            f'kind = "iba"\npointer = "{pointer}"\n{limit_toml}\n'
            f"high = [{entries(high)}]\nlow = [{entries(low)}]\n"
        )
    else:  # the negative control: one WRR table over the same entries, no priority
        arb = f'kind = "wrr"\npointer = "{pointer}"\ntable = [{entries(high + low)}]\n'
    text = f"""model = "flit"
name = "sat"
description = "saturated output ports"

[network]
topology = {{ kind = "crossbar", ports = {ports} }}
seed = {rng.randint(0, 1000)}
phases = {{ warmup = 2000, measure = {MEASURE}, drain_max = 0, abort_latency = false }}

[network.router]
buffer = 10
delays = {delays}
allocator = "full_crossbar"

[network.router.output_arbitration]
{arb}"""
    for v in lanes:
        text += f'\n[[network.classes]]\nname = "v{v}"\nvls = [{v}]\npacket_flits = {length}\n'
    streams, src = [], len(outputs)
    for o, vls in enumerate(outputs):
        for v in vls:
            name = f"o{o}v{v}"
            streams.append((name, o, v))
            text += (
                f'\n[[network.streams]]\nname = "{name}"\nsrc = {src}\ndst = {o}\n'
                f'class = "v{v}"\nperiod = {length}\n'
            )
            src += 1
    return text, outputs, streams, length


def arbitration_differences(
    cli_json, tmp_path, seed, cases, kind="iba", low_share_of=None, delays=BACK_TO_BACK, seen=None
):
    """Random table sets run by the command and by the oracle: the cases in which some
    lane's accepted flits per cycle differ from the oracle's share by more than the
    round's granularity. Returns (cases that differ, largest excess seen).

    With `delays = "yum"` a lane alone carries at most L/(L+1) of a link (its next
    header is routed and allocated in the cycle after its tail crossed: one idle cycle
    per packet at the crossbar, which no output buffer can fill). An output where the
    paper's share of some lane is above that is then checked for that lane's L/(L+1)
    alone (the rest goes to the others), and counted in `seen["capped"]`; the other
    outputs in `seen["exact"]`."""
    rng = random.Random(seed)
    differ, worst = 0, float("-inf")
    for i in range(cases):
        high, low = random_tables(rng)
        limit_toml, limit = random_limit(rng)
        pointer = rng.choice(["fast", "slow"])
        text, outputs, streams, length = saturation_scenario(
            rng, high, low, limit_toml, pointer, kind, delays
        )
        cap = Fraction(length, length + 1) if delays != BACK_TO_BACK else Fraction(1)
        path = tmp_path / f"sat{i}.toml"
        path.write_text(text)
        res = cli_json("run", str(path), "--json")["runs"][0]["points"][0]["result"]
        got = {f["name"]: f["accepted"] for f in res["flows"]}
        bad = False
        for o, vls in enumerate(outputs):
            want = shares(high, low, limit, set(vls), low_share_of)
            capped = [v for v, x in want.items() if x > cap]
            if seen is not None:
                seen["capped" if capped else "exact"] += 1
            if capped:
                want = {v: cap for v in capped}
            weights = table_weights(high + low, set(vls))
            for name, oo, v in streams:
                if oo != o or v not in want and capped:
                    continue
                # Over a window of T flits a lane's count is off its share by less than
                # one round's turns of it (its weight) and the limit's counter by one
                # flit at each end of the window: (w + 3)/T.
                tol = (weights[v] + 3) / MEASURE
                excess = abs(got[name] - float(want.get(v, 0))) - tol
                worst = max(worst, excess)
                bad |= excess > 0
        differ += bad
    return differ, worst


def test_the_paper_examples_of_the_limit():
    # §3.3: L = B/(B − B_p); B_b = B/L. Table 2's cluster, B_p = 80 % of B: L = 5, and
    # best effort keeps a fifth of a saturated link.
    s = shares([(0, 4), (1, 4)], [(11, 1), (12, 1)], Fraction(1, 5), {0, 1, 11, 12})
    assert s == {0: Fraction(2, 5), 1: Fraction(2, 5), 11: Fraction(1, 10), 12: Fraction(1, 10)}
    # A table with nothing waiting gives its turns away; no limit starves low priority.
    assert shares([(0, 3)], [(5, 1)], Fraction(1, 5), {5}) == {5: 1}
    assert shares([(0, 3)], [(5, 1)], None, {0, 5}) == {0: 1, 5: 0}


def test_iba_arbitration_shares_match_the_paper_on_random_tables(cli_json, tmp_path):
    differ, worst = arbitration_differences(cli_json, tmp_path, 11, 14)
    assert differ == 0, worst


def test_random_tables_get_the_papers_shares_in_the_shipped_yum_router(cli_json, tmp_path):
    # The same random tables in Yum's five stages (`delays = "yum"`, its output VL
    # buffers on): every lane gets the paper's share, except that a lane alone carries
    # L/(L+1) of a link. Both kinds of output must occur, so neither check is vacuous.
    seen = {"exact": 0, "capped": 0}
    for seed in (11, 12):
        differ, worst = arbitration_differences(
            cli_json, tmp_path, seed, 14, delays='"yum"', seen=seen
        )
        assert differ == 0, (seed, worst)
    assert seen["exact"] >= 10 and seen["capped"] >= 10, seen


def test_without_output_buffers_random_tables_miss_in_the_yum_router(cli_json, tmp_path):
    # The control: the same, the output buffers off.
    differ, _ = arbitration_differences(
        cli_json, tmp_path, 11, 14, delays='"yum"\noutput_buffer = 0'
    )
    assert differ >= 3, differ


def test_the_arbitration_oracle_tells_one_wrr_table_apart(cli_json, tmp_path):
    # The same entries in one WRR table (no priority, no limit): the oracle must see it.
    differ, _ = arbitration_differences(cli_json, tmp_path, 11, 14, kind="wrr")
    assert differ >= 7


def test_the_arbitration_oracle_tells_another_reading_of_the_limit_apart(cli_json, tmp_path):
    # IBA's "L high-priority units, then one low": B_b = B/(L + 1) instead of the
    # paper's B/L. The command must disagree with it.
    differ, _ = arbitration_differences(
        cli_json, tmp_path, 11, 14, low_share_of=lambda f: 1 / (1 / f + 1)
    )
    assert differ >= 5


def two_lane_scenario(pointer, weights, length, delays, kind):
    """Two sources, each on its own lane, both sending to node 0 one flit per cycle."""
    entries = ", ".join(f"{{ vl = {v}, weight = {w} }}" for v, w in enumerate(weights))
    arb = (
        f'kind = "wrr"\npointer = "{pointer}"\ntable = [{entries}]'
        if kind == "wrr"
        else f'kind = "iba"\npointer = "{pointer}"\nlimit = 255\nhigh = [{entries}]\nlow = []'
    )
    text = f"""model = "flit"
name = "two"
description = "two backlogged lanes"

[network]
topology = {{ kind = "crossbar", ports = 3 }}
seed = 1
phases = {{ warmup = 1000, measure = {MEASURE}, drain_max = 0, abort_latency = false }}

[network.router]
buffer = 10
delays = {delays}

[network.router.output_arbitration]
{arb}
"""
    for v in range(2):
        text += (
            f'\n[[network.classes]]\nname = "v{v}"\nvls = [{v}]\npacket_flits = {length}\n'
            f'\n[[network.streams]]\nname = "s{v}"\nsrc = {v + 1}\ndst = 0\n'
            f'class = "v{v}"\nperiod = {length}\n'
        )
    return text


TWO_LANE_CASES = [("fast", (8, 4), 4, "wrr"), ("slow", (200, 50), 40, "iba")]


# The smallest input found (one table, weights 8 : 4, 4-flit packets) and the large
# frame's case (§3.3: W_v = ρ_v·F with F = 255×64 gives weights far above a 40-flit
# packet; here 200 : 50 in the high-priority table), both in the shipped five-stage
# router (`delays = "yum"`, default allocator, as scenarios/flit/crossbar8-wrr.toml).
# §3.3 promises "exact bandwidth without truncation error", and §3.1's stage 5 buffers
# the flits "flowing out of the crossbar" before the link's VL arbiter. Without the
# output buffers (the control below) the shares were 0.5 / 0.5 instead of 2/3, 1/3, and
# 0.615 / 0.385 instead of 0.8 / 0.2: the one-cycle gap between a lane's packets (its
# next header in routing and lane allocation) is where the turns went. Each such gap
# with the other lane's weight spent starts a new frame (wrr.rs), which gives the light
# lane its weight again.
@pytest.mark.parametrize("pointer,weights,length,kind", TWO_LANE_CASES)
def test_weights_above_the_packet_length_keep_their_shares_in_the_yum_pipeline(
    cli_json, tmp_path, pointer, weights, length, kind
):
    path = tmp_path / "two.toml"
    path.write_text(two_lane_scenario(pointer, weights, length, '"yum"', kind))
    flows = cli_json("run", str(path), "--json")["runs"][0]["points"][0]["result"]["flows"]
    got = [f["accepted"] for f in sorted(flows, key=lambda f: f["name"])]
    want = [w / sum(weights) for w in weights]
    assert all(abs(g - w) <= (x + 3) / MEASURE for g, w, x in zip(got, want, weights)), got


def test_without_output_buffers_the_yum_pipeline_gives_the_turns_away(cli_json, tmp_path):
    # The control of the test above: the same inputs without the output buffers miss.
    for pointer, weights, length, kind in TWO_LANE_CASES:
        path = tmp_path / "two.toml"
        text = two_lane_scenario(pointer, weights, length, '"yum"', kind)
        path.write_text(text.replace('delays = "yum"\n', 'delays = "yum"\noutput_buffer = 0\n'))
        flows = cli_json("run", str(path), "--json")["runs"][0]["points"][0]["result"]["flows"]
        got = [f["accepted"] for f in sorted(flows, key=lambda f: f["name"])]
        want = [w / sum(weights) for w in weights]
        assert abs(got[0] - want[0]) > 0.05, got


def test_the_same_two_lanes_get_their_shares_with_back_to_back_headers(cli_json, tmp_path):
    # The same inputs with headers in no time and no output buffers: the tables' shares.
    for pointer, weights, length, kind in TWO_LANE_CASES:
        path = tmp_path / "two.toml"
        path.write_text(two_lane_scenario(pointer, weights, length, BACK_TO_BACK, kind))
        flows = cli_json("run", str(path), "--json")["runs"][0]["points"][0]["result"]["flows"]
        got = [f["accepted"] for f in sorted(flows, key=lambda f: f["name"])]
        want = [w / sum(weights) for w in weights]
        assert all(abs(g - w) <= (x + 3) / MEASURE for g, w, x in zip(got, want, weights)), got


def limit_scenario(of, low, length, delays):
    """One high lane and one low lane (weight 1 each), both backlogged, under the
    paper's fractional Limit of High Priority L = of/low."""
    arb = (
        f'kind = "iba"\npointer = "fast"\nlimit = 255\nexact_limit = {{ of = {of}, low = {low} }}\n'
        "high = [{ vl = 0, weight = 1 }]\nlow = [{ vl = 1, weight = 1 }]"
    )
    return two_lane_scenario("fast", (1, 1), length, delays, "wrr").replace(
        'kind = "wrr"\npointer = "fast"\ntable = [{ vl = 0, weight = 1 }, { vl = 1, weight = 1 }]',
        arb,
    )


# L = 5/2 (B_p = 0.6 B): best effort is owed B_b = 0.4 of the link (§3.3: "B_b = B/L
# where B_b is the minimum allocated bandwidth for best-effort traffic"). With 8-flit
# packets in the Yum pipeline without output buffers it got 0.3847 (the control below),
# although its lane alone carries 8/9 of the link; with back-to-back headers exactly 0.4.
def test_the_limit_assures_best_effort_its_minimum_in_the_yum_pipeline(cli_json, tmp_path):
    path = tmp_path / "limit.toml"
    path.write_text(limit_scenario(5, 2, 8, '"yum"'))
    flows = cli_json("run", str(path), "--json")["runs"][0]["points"][0]["result"]["flows"]
    low = next(f["accepted"] for f in flows if f["name"] == "s1")
    assert low >= 0.4 - 4 / MEASURE, low


def test_without_output_buffers_best_effort_gets_less_than_b_over_l(cli_json, tmp_path):
    # The control of the test above.
    path = tmp_path / "limit.toml"
    text = limit_scenario(5, 2, 8, '"yum"')
    path.write_text(text.replace('delays = "yum"\n', 'delays = "yum"\noutput_buffer = 0\n'))
    flows = cli_json("run", str(path), "--json")["runs"][0]["points"][0]["result"]["flows"]
    low = next(f["accepted"] for f in flows if f["name"] == "s1")
    assert low < 0.4 - 10 / MEASURE, low


def test_the_limit_gives_best_effort_b_over_l_with_back_to_back_headers(cli_json, tmp_path):
    # The same with headers in no time and no output buffers.
    path = tmp_path / "limit.toml"
    path.write_text(limit_scenario(5, 2, 8, BACK_TO_BACK))
    flows = cli_json("run", str(path), "--json")["runs"][0]["points"][0]["result"]["flows"]
    low = next(f["accepted"] for f in flows if f["name"] == "s1")
    assert abs(low - 0.4) <= 4 / MEASURE, low


# --- the pointer (§3.3): how long a light lane waits ---------------------------------
#
# "Second, only one flit is transferred at any time and then the pointer moves to the
# next available entry" (fast) against "once one entry has a turn to send, it can
# contiguously transfer flits equal to its assigned weight" (slow). Lane A is backlogged
# with weight W_A; lane B sends a one-flit packet every `period` cycles, well within its
# share. With the fast pointer a B flit waits at most the one A flit being sent; with
# the slow pointer at most the rest of A's turn, W_A − 1 flits. ZERO_LOAD is the
# project's zero-load latency of a one-flit packet through one router with
# BACK_TO_BACK's stages (docs/flit-network.md): 3 router stages + 2 links + 1.
ZERO_LOAD = 6


def pointer_scenario(pointer, wa, wb, period):
    return f"""model = "flit"
name = "ptr"
description = "a backlogged lane and a light one"

[network]
topology = {{ kind = "crossbar", ports = 3 }}
seed = 1
phases = {{ warmup = 1000, measure = 10000, drain_max = 2000, abort_latency = false }}

[network.router]
buffer = 10
delays = {BACK_TO_BACK}

[network.router.output_arbitration]
kind = "wrr"
pointer = "{pointer}"
table = [{{ vl = 0, weight = {wa} }}, {{ vl = 1, weight = {wb} }}]

[[network.classes]]
name = "a"
vls = [0]
packet_flits = 40

[[network.classes]]
name = "b"
vls = [1]
packet_flits = 1

[[network.streams]]
name = "a"
src = 1
dst = 0
class = "a"
period = 40

[[network.streams]]
name = "b"
src = 2
dst = 0
class = "b"
period = {period}
"""


def pointer_waits(cli_json, tmp_path, seed, cases):
    """(pointer, W_A, B's largest wait beyond zero load) for random tables and periods."""
    rng = random.Random(seed)
    out = []
    for i in range(cases):
        pointer = ("fast", "slow")[i % 2]
        wa, wb = rng.randint(3, 40), rng.randint(1, 4)
        period = rng.randint(20, 80)
        while period * wb <= 2 * (wa + wb):  # B well within its share
            period += 10
        path = tmp_path / f"ptr{i}.toml"
        path.write_text(pointer_scenario(pointer, wa, wb, period))
        flows = cli_json("run", str(path), "--json")["runs"][0]["points"][0]["result"]["flows"]
        b = next(f for f in flows if f["name"] == "b")
        out.append((pointer, wa, b["latency"]["max"] - ZERO_LOAD))
    return out


def test_the_pointers_bound_the_light_lanes_wait_as_the_paper_says(cli_json, tmp_path):
    waits = pointer_waits(cli_json, tmp_path, 1, 16)
    assert all(0 <= w <= (1 if p == "fast" else wa - 1) for p, wa, w in waits), waits
    # The fast pointer's bound must fail for the slow pointer: the comparison can tell
    # the two apart.
    assert sum(w > 1 for p, _, w in waits if p == "slow") >= 6, waits


# --- the energy model (§3.4, Table 1) -----------------------------------------------

TABLE_1 = {
    "buffer_read_pj": 31.125,
    "buffer_write_pj": 27.075,
    "arbitration_pj": 6.10086,
    "crossbar_pj": 68.475,
    "link_pj_per_bit": 10.21,
}


def flit_energy_pj(e, flit_bits, packet_flits, links=2, arbitration_per_packet=False):
    """Energy of one flit through a single-router cluster: one router (write, read,
    arbitration, crossbar) and two links (the source HCA's into the router, the
    router's into the destination HCA — the project counts both, docs/yum.md)."""
    arb = e["arbitration_pj"] / packet_flits if arbitration_per_packet else e["arbitration_pj"]
    router = e["buffer_write_pj"] + e["buffer_read_pj"] + arb + e["crossbar_pj"]
    return router + links * e["link_pj_per_bit"] * flit_bits


def power_scenario(e, hca_pj, flit_bits, packet_flits, ports, load, seed):
    body = "\n".join(f"{k} = {v!r}" for k, v in e.items())
    return f"""model = "yum"
name = "energy"
title = "energy"
figure = "none"
seed = {seed}

[network]
topology = {{ kind = "crossbar", ports = {ports} }}
link = "2.5Gbit/s"
flit_bits = {flit_bits}
lanes = {{ real_time = [0], best_effort = [1, 2, 3] }}

[power]
{body}
hca_pj_per_flit = {hca_pj!r}
sample_cycles = 500

[workload]
loads = [{load}]
mix = 0.0
packet_flits = {packet_flits}
real_time = {{ kind = "mpeg" }}
control = {{ count = 0 }}

[run]
warmup = "0.1ms"
measure = "0.6ms"
drain = "0.2ms"
batches = 2
"""


def measured_flit_energy(cli_json, tmp_path, name, text):
    """The fabric's energy per flit an HCA sends, from the command's mean power: the
    HCAs' part (mean − fabric) counts the flits sent, at hca_pj_per_flit each."""
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    out = cli_json("run", str(path), "--json")["results"][0]["points"][0]["out"]
    p = out["power"]
    return p["fabric_mean_w"] / (p["mean_w"] - p["fabric_mean_w"]), out


# Flits whose send and whose router/link steps fall in different power samples can
# only sit at the two ends of the window; below saturation they are a few packets'
# worth of the ~10^4 flits measured. 0.3 % covers them (the runs show under 0.05 %).
ENERGY_TOL = 0.003


def test_table_1_energies_are_the_meter_defaults(cli_json, tmp_path):
    # With the power table left to its defaults the meter must charge Table 1's numbers:
    # 132.776 pJ per router and 1,306.88 pJ per 128-bit flit per link.
    text = power_scenario({}, 1000.0, 128, 40, 4, 0.3, 1)
    per_hca_pj, out = measured_flit_energy(cli_json, tmp_path, "defaults", text)
    want = flit_energy_pj(TABLE_1, 128, 40) / 1000.0
    assert abs(per_hca_pj / want - 1) < ENERGY_TOL, (per_hca_pj * 1000, want * 1000)
    assert out["cycle_ps"] == 51_200  # 128 bits at 2.5 Gbit/s (§6.1)


def energy_differences(cli_json, tmp_path, seed, cases, *readings):
    """Random energies, flit sizes and loads run by the command; for each reading of
    the model (keyword arguments of flit_energy_pj), the number of runs whose energy per
    flit differs from it by more than ENERGY_TOL."""
    rng = random.Random(seed)
    differ = [0] * len(readings)
    for i in range(cases):
        e = {k: round(rng.uniform(1, 200), 3) for k in TABLE_1 if k != "link_pj_per_bit"}
        e["link_pj_per_bit"] = round(rng.uniform(0.2, 2), 3)
        hca = round(rng.uniform(100, 5000), 1)
        flit_bits, packet_flits = rng.choice([64, 128, 256]), rng.choice([4, 10, 40])
        ports, load = rng.randint(2, 6), round(rng.uniform(0.1, 0.5), 2)
        text = power_scenario(e, hca, flit_bits, packet_flits, ports, load, rng.randint(0, 99))
        got, _ = measured_flit_energy(cli_json, tmp_path, f"e{i}", text)
        for k, reading in enumerate(readings):
            want = flit_energy_pj(e, flit_bits, packet_flits, **reading) / hca
            differ[k] += abs(got / want - 1) > ENERGY_TOL
    return differ


def test_energy_per_flit_matches_table_1_model_on_random_energies(cli_json, tmp_path):
    # The paper's model, and beside it two other readings that the same runs must tell
    # apart (the comparison can fail): one link per flit (the router's output only),
    # one arbitration per packet (the header's).
    paper, one_link, per_packet = energy_differences(
        cli_json, tmp_path, 4, 10, {}, {"links": 1}, {"arbitration_per_packet": True}
    )
    assert paper == 0
    assert one_link == 10
    assert per_packet >= 8


# --- peak power control for real time (§5) -----------------------------------------

E_ROUTER_PJ = sum(
    TABLE_1[k] for k in ("buffer_read_pj", "buffer_write_pj", "arbitration_pj", "crossbar_pj")
)


def admitted_by_power(p_rt_w, rate_bps, requested, flit_bits=128, charge=1.0):
    """§5: each router on the path starts with its share of P_RT (one router: all of it)
    and a connection of r bit/s is admitted only if P_RT(i) covers E_router × r/f, which
    is then subtracted. With equal rates the admitted count is the number of charges the
    budget covers. `charge` scales r (the negative control: a probe charging the mean)."""
    c = E_ROUTER_PJ * 1e-12 * rate_bps * charge / flit_bits
    n, left = 0, p_rt_w
    while n < requested and left >= c:
        left -= c
        n += 1
    return n


def on_off_workload(load, rate_mbps):
    """The real-time ON/OFF workload and the short run of the §4.1 and §5 scenarios."""
    return f"""[workload]
loads = [{load}]
mix = 1.0
real_time = {{ kind = "on_off", mean_on = "0.5ms", mean_off = "0.5ms", rate = "{rate_mbps}Mbit/s" }}
control = {{ count = 0 }}

[run]
warmup = "1.2ms"
measure = "0.2ms"
drain = "0.1ms"
batches = 2
"""


def yum_crossbar(name, ports, seed):
    """The head of the §4.1 and §5 scenarios: a Yum-model crossbar of `ports` nodes."""
    return f"""model = "yum"
name = "{name}"
title = "{name}"
figure = "none"
seed = {seed}

[network]
topology = {{ kind = "crossbar", ports = {ports} }}
link = "2.5Gbit/s"
"""


def peak_power_scenario(peak_w, share, rate_mbps, load, seed, control=True, flit_bits=128):
    # The links and HCAs cost nothing here, so the project's per-router charge (E_router
    # plus its output link, and the HCA's link and energy at the source's router,
    # docs/yum.md) is the paper's E_router × r/f exactly. Four nodes whose real-time
    # peaks add up to 0.8 of a link: bandwidth never refuses, only power does.
    pc = f"[power_control]\nkind = \"credits\"\npeak_w = {peak_w!r}\nreal_time_share = {share!r}\n"
    return f"""{yum_crossbar("peak", 4, seed)}flit_bits = {flit_bits}

[admission]
solicit = "peak"

[power]
link_pj_per_bit = 0.0
hca_pj_per_flit = 0.0
sample_cycles = 500

{pc if control else ""}
{on_off_workload(load, rate_mbps)}"""


def peak_power_differences(cli_json, tmp_path, seed, cases, control=True, charge=1.0):
    rng = random.Random(seed)
    differ = 0
    for i in range(cases):
        rate = rng.choice([20, 40, 50, 80, 100])
        fb = rng.choice([64, 128, 256])
        load = 0.1
        # About load·B/(r/2) connections per node (ON half the time: mean r/2); the
        # budget is set to cover fewer than that.
        n = rng.randint(1, 3 * round(load * 2500 / (rate / 2)))
        c = E_ROUTER_PJ * 1e-12 * rate * 1e6 / fb
        p_rt = (n + rng.uniform(0.2, 0.8)) * c
        # The best-effort rest (P_BE) kept at 2 mW so that an HCA's E_BE holds a packet.
        peak_w = p_rt + 0.002
        share = p_rt / peak_w
        path = tmp_path / f"peak{i}.toml"
        seed_i = rng.randint(0, 99)
        path.write_text(peak_power_scenario(peak_w, share, rate, load, seed_i, control, fb))
        out = cli_json("run", str(path), "--json")["results"][0]["points"][0]["out"]
        m = out["measures"]
        want = admitted_by_power(peak_w * share, rate * 1e6, m["requested"], fb, charge)
        assert m["requested"] > n  # the budget, not the demand, decides
        bad = len(out["admitted"]) != want or m["rejected"] != m["requested"] - want
        differ += bad
    return differ


def test_real_time_admission_under_the_power_budget_matches_section_5(cli_json, tmp_path):
    assert peak_power_differences(cli_json, tmp_path, 8, 8) == 0


def test_the_power_budget_oracle_tells_other_rules_apart(cli_json, tmp_path):
    # Without peak power control every connection is admitted; a probe charging the
    # mean rate (half the peak here) admits about twice as many. Both must differ.
    assert peak_power_differences(cli_json, tmp_path, 8, 8, control=False) == 8
    assert peak_power_differences(cli_json, tmp_path, 8, 8, charge=0.5) >= 6


# --- probe admission (§4.1) ---------------------------------------------------------


def admission_scenario(rate_mbps, load, seed, enabled=True):
    # Two nodes: every connection of node 0 goes to node 1 and the other way round, so
    # each connection's probe meets exactly two links — its HCA's and the router's port
    # to the other node — and both carry only that node's connections. Probes carry the
    # peak (the project's declared `solicited-rate`; ON half the time, the mean is r/2).
    return f"""{yum_crossbar("admit", 2, seed)}
[admission]
enabled = {str(enabled).lower()}
solicit = "peak"

{on_off_workload(load, rate_mbps)}"""


def admitted_by_bandwidth(rate_mbps, requested_per_node, strict=False, link_mbps=2500):
    """§4.1: the HCA and then each router accept a probe if the link "has sufficient
    bandwidth" for it, and add it to the link's used bandwidth. `strict` is §3.3's other
    wording ("only if the sum … is less than the total bandwidth")."""
    n, used = 0, 0
    for _ in range(requested_per_node):
        if used + rate_mbps < link_mbps or (not strict and used + rate_mbps == link_mbps):
            used += rate_mbps
            n += 1
    return n


def admission_differences(cli_json, tmp_path, seed, cases, enabled=True, readings=(False,)):
    """Runs where the command's admitted and rejected counts differ from the oracle's,
    for each reading (strict or not) of the rule."""
    rng = random.Random(seed)
    differ = [0] * len(readings)
    for i in range(cases):
        # Half the cases a rate dividing the link exactly: the boundary of the rule.
        rate = rng.choice([50, 100, 125, 250, 500, 625, 1250] + [rng.randint(40, 900)])
        load = round(rng.uniform(0.6, 0.9), 2)
        path = tmp_path / f"admit{i}.toml"
        path.write_text(admission_scenario(rate, load, rng.randint(0, 99), enabled))
        out = cli_json("run", str(path), "--json")["results"][0]["points"][0]["out"]
        m = out["measures"]
        # Both nodes open the same number of connections (load·B over the mean r/2).
        assert m["requested"] % 2 == 0
        for k, strict in enumerate(readings):
            want = 2 * admitted_by_bandwidth(rate, m["requested"] // 2, strict)
            differ[k] += len(out["admitted"]) != want or m["rejected"] != m["requested"] - want
    return differ


def test_probe_admission_matches_section_4_1_on_two_nodes(cli_json, tmp_path):
    # Beside §4.1's "sufficient bandwidth", §3.3's strict "less than" on the same runs:
    # a rate that divides the link admits one connection fewer per node, so the
    # comparison can fail (the project follows §4.1 at the boundary).
    sufficient, strict = admission_differences(cli_json, tmp_path, 6, 12, readings=(False, True))
    assert sufficient == 0
    assert strict >= 5


def test_the_admission_oracle_tells_no_admission_apart(cli_json, tmp_path):
    # Without admission control every connection is admitted.
    assert admission_differences(cli_json, tmp_path, 6, 12, enabled=False) == [12]
