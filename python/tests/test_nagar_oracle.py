"""Nagar et al.'s mechanisms re-implemented from the paper's text alone (*Incorporating
Quality-of-Service in the Virtual Interface Architecture*, ../shared/papers/004_...), and
`clusterqos run` compared with them on random small `kind = "channels"` scenarios.

The command prints, per load point, each class's jitter fraction θ, the fraction of its
messages with jitter and the best-effort latency; it prints no per-message trace and no
VirtualClock stamp. The oracles therefore use regimes in which the paper's rules fix
those aggregates:

- **The jitter metric (§4).** "The application expects the messages to be separated by
  at most the negotiated inter-arrival time at the receiver end. Else, it incurs a jitter
  for that message, with a jitter duration equal to the difference between the
  inter-receipt time of the messages and the negotiated inter-arrival time. Jitter
  fraction is a normalized version of this metric, where the mean jitter duration (over
  all the messages) is divided by the negotiated inter-arrival time." Implemented below
  as `theta` on gap lists. When every gap exceeds P, θ = mean gap / P - 1 exactly and
  every message has jitter.
- **SVIA (§3.1): one whole sequence per message.** "A simple way of structuring the LCP
  is to sequentialize the entire sequence of operations": under an overload its messages
  leave one send sequence apart, and Table 1 prints that sequence (send side, Status
  Done: 14, 28, 72, 247 us for 4 B, 1 K, 4 K, 16 K).
- **FCFS (§2.1, §3.3).** Doorbells "can be merged (by hardware) into a single queue in
  FCFS order"; SVIA and PVIA serve in that order ("FCFS ... that is used in PVIA"). A
  message then waits for every message posted before it: behind a backlog, consecutive
  receipts of a channel are S * (1 + N) apart, N the other channels' messages posted
  between them — exactly known for two CBR channels whose periods are in a ratio k (some
  gaps below P, some above: the metric's "none when below" is exercised), Poisson for
  §4.2's best-effort channel (the project's declared assumption, fig-5.toml).
- **VirtualClock (§3.3).** auxVC <- max(now, auxVC) + Vtick, Vtick infinite for
  best-effort channels, the HDMA and NSDMA queues in stamp order: a conforming QoS
  channel is served ahead of all queued best-effort work and waits only for work
  already in a device (or next to the HDMA head, the tolerated inaccuracy).

Each comparison is checked to be able to fail: the sequential oracle against PVIA and
QoSVIA, the interleaving oracle with two other jitter definitions and against PVIA and
QoSVIA, the VirtualClock bound against PVIA and SVIA, the FCFS oracle against QoSVIA.
A channel overloaded so far that none of the messages emitted after the warmup is
received before the end used to report θ = 0; it now reports no θ (the point is left
out of the figures), and the last test pins that.
"""

from __future__ import annotations

import math
import random

import pytest

# Table 1, send side, "Status Done" (us since the send doorbell): the whole sequence.
TABLE1_SEND = {
    "svia": {4: 14, 1024: 28, 4096: 72, 16384: 247},
    "pvia": {4: 38, 1024: 49, 4096: 92, 16384: 264},
    "qosvia": {4: 41, 1024: 53, 4096: 95, 16384: 270},
}


def jitter(gap: float, negotiated: float) -> float:
    """A message's jitter duration (§4): how much its inter-receipt time exceeds the
    negotiated inter-arrival time (none when it does not)."""
    return max(0.0, gap - negotiated)


def theta(gaps: list[float], negotiated: float) -> tuple[float, float]:
    """The paper's θ and the fraction of messages with jitter, from inter-receipt gaps."""
    jit = [jitter(g, negotiated) for g in gaps]
    return sum(jit) / len(gaps) / negotiated, sum(j > 0 for j in jit) / len(gaps)


def scenario(firmware, message, classes, best_effort=None, duration="20ms", warmup="2ms", seed=1):
    """A `kind = "channels"` scenario: one load point, `classes` = [(name, MB/s, channels)]."""
    text = (
        'model = "nagar"\nname = "o"\ntitle = "oracle"\nkind = "channels"\n'
        f"firmware = {list(firmware)!r}\n".replace("'", '"')
        + f'message = "{message}B"\nduration = "{duration}"\nwarmup = "{warmup}"\nseed = {seed}\n'
        + f"channels = [{[n for _, _, n in classes]!r}]\n"
    )
    for name, rate, _ in classes:
        text += f'\n[[class]]\nname = "{name}"\nrate = "{rate!r}MB/s"\n'
    if best_effort is not None:
        text += f'\n[best_effort]\nrate = "{best_effort!r}MB/s"\n'
    return text


def run(cli_json, tmp_path, text):
    """{firmware: {"theta": [per class], "jittered": [...], "be": latency or None}}."""
    path = tmp_path / "oracle.toml"
    path.write_text(text)
    res = cli_json("run", str(path), "--json")["results"][0]
    out: dict[str, dict] = {}
    for fig in res["figures"]:
        kind = fig["id"].split("-")[1]
        for s in fig["series"]:
            # No point: nothing received in the window (QoSVIA can starve the best-effort
            # channel, §3.3).
            y = s["points"][0][1] if s["points"] else None
            d = out.setdefault(s["name"], {"theta": {}, "jittered": {}, "be": None})
            if kind == "be":
                d["be"] = y
            else:
                d[kind][int(fig["id"].rsplit("-", 1)[1])] = y
    return out


def per_message(message: int, rate_mb_s: float) -> float:
    """The negotiated inter-arrival time (us) of `message`-byte messages at `rate`."""
    return message / rate_mb_s


# --- the jitter metric and SVIA's sequence (§3.1, §4, Table 1) ---------------------------


def overload_sequence(cli_json, tmp_path, firmware, message, periods):
    """One CBR channel posted every P us (P below the firmware's capacity), at each P:
    (θ, fraction with jitter, (1 + θ) P)."""
    rows = []
    for p in periods:
        text = scenario([firmware], message, [("a", message / p, 1)])
        got = run(cli_json, tmp_path, text)[firmware]
        th, jf = got["theta"][0], got["jittered"][0]
        rows.append((th, jf, None if th is None else (1 + th) * p))
    return rows


def sequential_differences(cli_json, tmp_path, firmware, cases, seed):
    """Random message sizes and overloads; the number of cases where `firmware` does not
    behave as the sequential oracle says: every message with jitter, (1 + θ) P the same
    at every overload (it is the sequence time S), and S Table 1's send sequence where
    Table 1 prints one (bracketed by its neighbours elsewhere)."""
    rng = random.Random(seed)
    table = TABLE1_SEND[firmware]
    sizes = sorted(table)
    differ = []
    for _ in range(cases):
        message = rng.choice(sizes + [rng.randint(5, 16383) for _ in range(2)])
        lo = max(s for s in sizes if s <= message)
        hi = min(s for s in sizes if s >= message)
        # Periods from a third to two thirds of the sequence: an overload, and above 8 us
        # (the command's open-loop sources stop delivering near 7 us: see the report).
        periods = sorted(
            max(8.0, table[lo] * rng.uniform(0.33, 0.67)) for _ in range(2)
        )
        rows = overload_sequence(cli_json, tmp_path, firmware, message, periods)
        s = [r[2] for r in rows]
        # Table 1 rounds to 1 us (+-0.5); under an overload the next doorbell is already
        # queued, so one sequence differs from Table 1's by at most one turn of SVIA's
        # polling loop between sequences (two device checks, 0.5 us each in the project's
        # calibration, via/calibration.toml [svia] poll): 1.5 us in all.
        # The metric on the sequence the first overload shows (gaps all S) predicts the
        # second overload's θ and fraction with jitter.
        th2, jf2 = theta([s[0]] * 16, periods[1])
        bad = rows[0][1] != 1.0 or rows[1][1] != jf2
        bad |= abs(rows[1][0] - th2) > 1e-3 * th2
        bad |= not (table[lo] - 1.5 <= s[0] <= table[hi] + 1.5)
        if bad:
            differ.append((message, periods, rows))
    return differ


def test_svia_sends_one_whole_sequence_per_message_at_table_1s_times(cli_json, tmp_path):
    assert sequential_differences(cli_json, tmp_path, "svia", 8, 11) == []


def test_table_1s_printed_sizes_exactly(cli_json, tmp_path):
    # The four sizes Table 1 prints, each at two overloads: S is the same at both (the
    # metric's identity) and within 1.5 us of the printed sequence.
    for message, t1 in TABLE1_SEND["svia"].items():
        rows = overload_sequence(cli_json, tmp_path, "svia", message, [t1 * 0.6, t1 * 0.4])
        assert all(jf == 1.0 for _, jf, _ in rows), (message, rows)
        s = [r[2] for r in rows]
        assert max(s) - min(s) <= 1e-3 * max(s), (message, rows)
        assert abs(s[0] - t1) <= 1.5, (message, s, t1)


def test_svias_sequence_is_the_saturation_fig_5_prints(cli_json, tmp_path):
    # §4.2, Fig 5(b): SVIA's best-effort latency saturates "when the load exceeds 60
    # MBytes/sec" (4 KB messages). A sequential LCP carries one message per sequence: the
    # command's S gives 4096 / S MB/s, which must be within the project's 10 % bar of 60
    # (Table 1's own 72 us gives 56.9). The same rule with PVIA's Table 1 sequence (92
    # us: 44.5 MB/s) is far below the 100 MB/s PVIA sustains in Fig 5: the paper's own
    # numbers say PVIA is not sequential, as §3.2 does.
    s = sequence_time(cli_json, tmp_path, 4096)
    assert abs(4096 / s / 60 - 1) <= 0.10, 4096 / s
    assert 4096 / TABLE1_SEND["pvia"][4096] < 0.5 * 100


def test_the_sequential_oracle_tells_the_pipelined_firmware_apart(cli_json, tmp_path):
    # PVIA and QoSVIA overlap the stages (§3.2): under the same overloads their (1 + θ) P
    # (an upper bound of the mean gap) falls well below their own Table 1 sequence, and
    # some gaps are below P. The sequential oracle must find differences in most cases.
    for fw in ("pvia", "qosvia"):
        rows = overload_sequence(cli_json, tmp_path, fw, 4096, [30.0, 20.0])
        assert all(r[2] < 0.8 * TABLE1_SEND[fw][4096] for r in rows), (fw, rows)
        assert len(sequential_differences(cli_json, tmp_path, fw, 4, 11)) >= 3, fw


# --- two CBR channels interleaved first come first served (§2.1, §3.1, §4) -------------


def interleaved_cases(rng, s_of):
    """Channel a every P, channel b every k P (k = 2..4), with S < P < S (1 + 1/k): SVIA
    is overloaded, and a's gaps in emission order are S, except one in k that has b's
    message in it (2 S); b's gaps are all (k + 1) S. Returns b's rate in B/s."""
    message = rng.choice(sorted(s_of))
    s, k = s_of[message], rng.choice([2, 3, 4])
    # Whole bytes per second, a's exactly k times b's: the command keeps rates in B/s and
    # rounds periods up to the picosecond, so b's messages keep their place among a's
    # (with rounded rates they drift by up to ~0.5 us over a run, enough to swap b with
    # an a emitted next to it).
    b = round(message * 1e6 / (k * s * rng.uniform(1.05, 1 + 0.9 / k)))
    return message, s, k, b


def interleaving_runs(cli_json, tmp_path, firmwares, cases, seed):
    """Random interleaving cases run by the command: (k, S, P, {firmware: results})."""
    s_of = {m: sequence_time(cli_json, tmp_path, m) for m in (4, 1024, 4096)}
    rng = random.Random(seed)
    runs = []
    for i in range(cases):
        message, s, k, b = interleaved_cases(rng, s_of)
        text = scenario(
            firmwares, message, [("a", k * b / 1e6, 1), ("b", b / 1e6, 1)],
            duration="60ms", warmup="3ms", seed=300 + i,
        )
        runs.append((k, s, message * 1e6 / (k * b), run(cli_json, tmp_path, text)))
    return runs


def interleaving_differences(runs, firmware, metric=None):
    """Cases where `firmware`'s θ or fraction with jitter of either channel is more than
    0.005 from the oracle: the paper's metric (or `metric`, another definition) on the
    gap pattern FCFS and SVIA's sequence give. 0.005: a window holds some 500 of a's
    gaps, so the pattern's ends move the fraction by ~0.002."""
    metric = metric or theta
    differ = []
    for k, s, p, got in runs:
        got = got[firmware]
        want = [metric(([s] * (k - 1) + [2 * s]) * 100, p), metric([(k + 1) * s] * 100, k * p)]
        for c, (th, jf) in enumerate(want):
            if abs(got["theta"][c] - th) > 0.005 or abs(got["jittered"][c] - jf) > 0.005:
                differ.append((k, p / s, c, got["theta"][c], th, got["jittered"][c], jf))
                break
    return differ


def test_two_channels_interleave_first_come_first_served_at_svias_sequence(cli_json, tmp_path):
    # Exact: some gaps below P (no jitter), some above; θ counts the excess over all.
    runs = interleaving_runs(cli_json, tmp_path, ["svia"], 8, 41)
    assert interleaving_differences(runs, "svia") == []


def by_magnitude(gaps, p):
    return sum(abs(g - p) for g in gaps) / len(gaps) / p, theta(gaps, p)[1]


def over_jittered_only(gaps, p):
    jit = [g - p for g in gaps if g > p]
    return sum(jit) / len(jit) / p, len(jit) / len(gaps)


def test_the_interleaving_oracle_tells_other_metrics_and_pipelines_apart(cli_json, tmp_path):
    # Jitter as |gap - P|, or θ as the mean over the jittered messages only, is not the
    # paper's definition: the oracle with either must disagree with the command. PVIA
    # and QoSVIA overlap the sequence (§3.2): the SVIA oracle must disagree with them.
    runs = interleaving_runs(cli_json, tmp_path, ["svia", "pvia", "qosvia"], 8, 41)
    for other in (by_magnitude, over_jittered_only):
        assert len(interleaving_differences(runs, "svia", other)) >= 7, other.__name__
    for fw in ("pvia", "qosvia"):
        assert len(interleaving_differences(runs, fw)) >= 7, fw


# --- FCFS against VirtualClock beside a best-effort overload (§2.1, §3.3, §4.2) ----------


def poisson(k: int, mean: float) -> float:
    return math.exp(k * math.log(mean) - mean - math.lgamma(k + 1)) if mean > 0 else float(k == 0)


def fcfs_theta(s: float, p: float, lam_p: float) -> tuple[float, float]:
    """θ of a CBR channel (period p) served first come first served behind a backlog, one
    message every s, beside Poisson best-effort messages (lam_p per period): consecutive
    receipts are s * (1 + N) apart, N ~ Poisson(lam_p). Its mean and the standard
    deviation of one message's jitter / p."""
    top = int(lam_p + 12 * math.sqrt(lam_p) + 20)
    jit = [(poisson(n, lam_p), jitter(s * (1 + n), p) / p) for n in range(top)]
    mean = sum(w * j for w, j in jit)
    return mean, math.sqrt(sum(w * (j - mean) ** 2 for w, j in jit))


def sequence_time(cli_json, tmp_path, message: int) -> float:
    """SVIA's sequence S for `message`, read through the metric's identity (tests above)."""
    t1 = TABLE1_SEND["svia"][message]
    (th, jf, s), = overload_sequence(cli_json, tmp_path, "svia", message, [t1 / 2])
    assert jf == 1.0
    return s


def fcfs_cases(rng, s_of):
    """Random CBR channel + Poisson best-effort channel overloading SVIA by 1.3-2x."""
    message = rng.choice(sorted(s_of))
    s = s_of[message]
    lam_p = rng.uniform(1.5, 5.0)
    over = rng.uniform(1.3, 2.0)
    p = (1 + lam_p) * s / over
    return message, s, p, lam_p


WINDOW_MS = 120


def fcfs_differences(cli_json, tmp_path, firmware, cases, seed):
    """Cases where `firmware`'s θ of the CBR channel is outside the FCFS oracle's
    4-sigma interval (sampling of the Poisson best-effort channel over the window)."""
    s_of = {m: sequence_time(cli_json, tmp_path, m) for m in (1024, 4096)}
    rng = random.Random(seed)
    differ = []
    for i in range(cases):
        message, s, p, lam_p = fcfs_cases(rng, s_of)
        text = scenario(
            [firmware], message, [("q", message / p, 1)], best_effort=message * lam_p / p,
            duration=f"{WINDOW_MS + 20}ms", warmup="20ms", seed=100 + i,
        )
        got = run(cli_json, tmp_path, text)[firmware]["theta"][0]
        want, sd = fcfs_theta(s, p, lam_p)
        gaps = WINDOW_MS * 1000 / (s * (1 + lam_p))
        # 4 sigma of the mean over the window's gaps, plus the receiver's polling (the
        # host notices a message within 2 us: docs/nagar.md, calibration [host] poll).
        tol = 4 * sd / math.sqrt(gaps) + 2 / p
        if abs(got - want) > tol:
            differ.append((firmware, message, round(p, 2), round(lam_p, 2), got, want, tol))
    return differ


def test_fcfs_serves_the_qos_channel_behind_every_earlier_best_effort_message(cli_json, tmp_path):
    assert fcfs_differences(cli_json, tmp_path, "svia", 6, 21) == []


def test_the_fcfs_oracle_tells_virtual_clock_apart(cli_json, tmp_path):
    # QoSVIA stamps best-effort doorbells with an infinite Vtick (§3.3): its CBR channel
    # no longer waits for the best-effort backlog, and the FCFS oracle must miss it.
    assert len(fcfs_differences(cli_json, tmp_path, "qosvia", 6, 21)) >= 5


# VirtualClock: with one conforming CBR channel (stamps e + Vtick) and best-effort
# stamps at infinity, every queue the LCP orders serves the CBR message before any queued
# best-effort one. It waits only for work already started: at the HDMA engine the
# request in service and the one next to the head (the paper's tolerated inaccuracy;
# the project's guard = 1), at NSDMA the message in service, at the LANai the handler
# in progress. Each from Table 1 (us): a host DMA of a message's data, SVIA's Data Down -
# HDMA Prog. (Data) (1 K: 18 - 9, 4 K: 43 - 9); NSDMA, SVIA's NSDMA Done - Data Down
# (25 - 18, 69 - 43); the LANai's longest chain, QoSVIA's doorbell to HDMA Prog. (Data)
# (24, 30). A message's jitter (its delay minus its predecessor's) is at most their sum.
BLOCKING_US = {1024: 2 * 9 + 7 + 24, 4096: 2 * 34 + 26 + 30}
# Best-effort loads (MB/s) beyond PVIA's capacity. The bound presumes the LCP stamps a
# doorbell soon after it is rung: doorbells wait in the hardware FCFS queue (§2.1) until
# the LCP notices them, and only then does VirtualClock order them. The loads keep the
# best-effort doorbells at least 21 us apart (1 KiB: 21-29 us, 4 KiB: 22-33 us). Measured
# with the command (QoSVIA, 2 MB/s channel, seed 7): the bound holds with best-effort
# doorbells 20.5 us apart and more and fails from 17 us apart, for 1 KiB and 4 KiB alike
# (the helper's report, notes/nagaroracle.md).
BE_OVERLOAD = {1024: (35.0, 48.0), 4096: (125.0, 185.0)}


def vc_excess(cli_json, tmp_path, firmwares, cases, seed):
    """Random message size, CBR rate and best-effort overload; per firmware, the cases
    where θ of the CBR channel exceeds the VirtualClock bound BLOCKING_US / P."""
    rng = random.Random(seed)
    over = {fw: [] for fw in firmwares}
    for i in range(cases):
        message = rng.choice(sorted(BLOCKING_US))
        rate = round(rng.uniform(0.5, 4.0), 2)
        be = rng.uniform(*BE_OVERLOAD[message])
        p = per_message(message, rate)
        text = scenario(
            firmwares, message, [("q", rate, 1)], best_effort=be,
            duration="60ms", warmup="10ms", seed=200 + i,
        )
        got = run(cli_json, tmp_path, text)
        for fw in firmwares:
            th = got[fw]["theta"][0]
            if th > BLOCKING_US[message] / p:
                over[fw].append((message, rate, round(be, 1), th, BLOCKING_US[message] / p))
    return over


def test_virtual_clock_keeps_a_conforming_channel_ahead_of_best_effort(cli_json, tmp_path):
    assert vc_excess(cli_json, tmp_path, ["qosvia"], 8, 31)["qosvia"] == []


def test_the_virtual_clock_bound_tells_fcfs_firmware_apart(cli_json, tmp_path):
    over = vc_excess(cli_json, tmp_path, ["pvia", "svia"], 8, 31)
    assert len(over["pvia"]) >= 6 and len(over["svia"]) == 8, over


# --- a backlog that outlasts the run ------------------------------------------------


def test_a_channel_whose_backlog_outlasts_the_run_reports_no_theta_rather_than_0(
    cli_json, tmp_path
):
    # §4: a message received more than the negotiated inter-arrival time after the
    # previous one has a jitter of the difference; θ is the mean over all messages / P.
    # SVIA under an overload delivers one message per sequence S (tests above), so every
    # message has jitter and θ = S / P - 1, whatever P below S. θ is taken on messages
    # emitted after the warmup and received before the end; behind the backlog the first
    # of them arrives about warmup * S / P after the start, so for P < S * warmup /
    # duration (72.92 * 2 / 20 = 7.29 us here) there is none. The command used to report
    # θ = 0 and no message with jitter there (found by this oracle); it now reports no
    # value, and where the window holds enough messages (P = 10 us) the paper's S / P - 1.
    s = sequence_time(cli_json, tmp_path, 4096)
    (th, jf, _), = overload_sequence(cli_json, tmp_path, "svia", 4096, [7.3])
    assert th is None and jf is None, (th, jf)
    (th, jf, cycle), = overload_sequence(cli_json, tmp_path, "svia", 4096, [10.0])
    assert jf == 1.0 and abs(cycle - s) <= 1e-3 * s, (th, jf, s)
