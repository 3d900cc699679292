#!/usr/bin/env python3
"""Regenerate the tuple files of the example queries, with planted matches and near-misses.

    python tools/generate_queries.py           # rewrites queries/*.csv and *.planted.csv, checks
    python tools/generate_queries.py --check   # only checks the files in queries/

Deterministic: every data set draws from its own ``random.Random(seed)`` (the generators use
the standard library only), so the CSV files come out byte for byte the same on every run.

For each query file ``queries/<name>.sql`` the script writes

* ``<name>.csv``: the tuples, with a header of the stream's field names in declaration order,
  sorted by the time field (non-decreasing, so every ``ORDER BY`` holds);
* ``<name>.planted.csv``: ``seq,query,partition,kind``, one row per planted instance: the
  0-based row index of the tuple where it ends, the query, the partition value and
  ``match`` (the engine must report a match of that query at that tuple) or ``near_miss``
  (the engine must NOT report a match of that query at that tuple).

The background traffic is built so that it can neither create nor destroy a match: every
reported match of every query is a planted one. After writing, the script runs the check of
``tests/query_check.py`` on every file, which decides the matches with the independent oracle
``tests/oracle.py`` (it lives beside the oracle, in the tests).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "queries"
#: the check of the data against the independent oracle
CHECK = ROOT / "tests" / "query_check.py"


# ----------------------------------------------------------------------------------------------
# Common helpers


class Event(dict):
    """One tuple: its fields, plus the partition value and the planted tags it carries."""

    def __init__(self, part, key, **fields):
        super().__init__(**fields)
        self.part = part  # partition value
        self.key = key  # sort key (time first)
        self.tags: list[tuple[str, str]] = []  # (query, kind)

    def tag(self, query, kind="match"):
        self.tags.append((query, kind))
        return self


def write_dataset(name, fields, events, fmt=None):
    """Sort the events by their key, write ``name.csv`` and ``name.planted.csv``."""
    fmt = fmt or {}
    events = sorted(events, key=lambda e: e.key)
    with open(QUERIES / f"{name}.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(fields)
        for e in events:
            w.writerow([fmt[k](e[k]) if k in fmt else _fmt(e[k]) for k in fields])
    planted = []
    for seq, e in enumerate(events):
        for query, kind in e.tags:
            planted.append((seq, query, e.part, kind))
    planted.sort(key=lambda r: (r[0], r[1]))
    with open(QUERIES / f"{name}.planted.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["seq", "query", "partition", "kind"])
        w.writerows(planted)
    return events, planted


def _fmt(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def ip(a):
    """Dotted quad to the 32-bit integer the stream carries."""
    b = [int(x) for x in a.split(".")]
    return (b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]


# ----------------------------------------------------------------------------------------------
# marathon: the paper's running example


def gen_marathon():
    rng = random.Random(2010_0913)
    cps = ["Staten Island", "Brooklyn", "Queens", "Bronx", "Manhattan"]
    dist = [1600, 13000, 22000, 32500, 42195]  # metres from the start of each reader
    bibs = sorted(rng.sample(range(101, 4000), 60))
    # roles: which checkpoints get a reading, and where the planted instance ends
    roles = (
        ["skip_brooklyn"] * 3  # SI, Q, Bx, M: match at Queens (A NOTB* C)
        + ["skip_queens"] * 2  # SI, B, Bx, M: match at Bronx (A NOTC* D)
        + ["skip_bronx"] * 2  # SI, B, Q, M: match at Manhattan (A NOTD* E)
        + ["skip_brooklyn_queens"]  # SI, Bx, M: match at Bronx (A NOTC* D, zero NOTC)
        + ["nostart_skip_queens"] * 2  # B, Bx, M: no start reading: no A, near-miss at Bronx
        + ["honest_tagged"] * 2  # all five in order: near-miss at Manhattan
        + ["dnf"] * 4  # drop out; never a match
    )
    roles += ["honest"] * (len(bibs) - len(roles))
    rng.shuffle(roles)
    reads = {
        "skip_brooklyn": [0, 2, 3, 4],
        "skip_queens": [0, 1, 3, 4],
        "skip_bronx": [0, 1, 2, 4],
        "skip_brooklyn_queens": [0, 3, 4],
        "nostart_skip_queens": [1, 3, 4],
    }
    tag_at = {  # checkpoint index where the planted instance ends
        "skip_brooklyn": (2, "match"),
        "skip_queens": (3, "match"),
        "skip_bronx": (4, "match"),
        "skip_brooklyn_queens": (3, "match"),
        "nostart_skip_queens": (3, "near_miss"),
        "honest_tagged": (4, "near_miss"),
    }
    events = []
    for k, (bib, role) in enumerate(zip(bibs, roles, strict=True)):
        start = (k * 3 // len(bibs)) * 1200  # three waves, 20 minutes apart
        pace = rng.uniform(2.5, 5.4)  # metres per second
        if role == "dnf":
            read = list(range(rng.choice([2, 3, 4])))
        else:
            read = reads.get(role, [0, 1, 2, 3, 4])
        # boroughs skipped on purpose (a missing start reading is a chip failure, not a ride)
        skipped = {i for i in range(1, 5) if i not in read} if role in reads else set()
        t, prev_d, prev_t = float(start), 0, start
        for i in range(5):
            seg = dist[i] - (dist[i - 1] if i else 0)
            if i in skipped or i - 1 in skipped:
                v = rng.uniform(7.0, 11.0)  # into or out of a skipped borough: by subway
            else:
                v = pace * rng.uniform(0.95, 1.05) * (1.0 - 0.025 * i)
            t += seg / v
            if i in read:
                ti = max(round(t), prev_t + 1)
                speed = (dist[i] - prev_d) / (ti - prev_t)
                e = Event(
                    bib, (ti, i, bib), time=ti, checkpoint=cps[i], runner=bib, speed=f"{speed:.2f}"
                )
                if role in tag_at and tag_at[role][0] == i:
                    e.tag("cheat", tag_at[role][1])
                events.append(e)
                prev_d, prev_t = dist[i], ti
    return write_dataset("marathon", ["time", "checkpoint", "runner", "speed"], events)


# ----------------------------------------------------------------------------------------------
# fire: warehouse sensors (fire, freezer thaw)


FIRE_ZONES = {  # sensor: zone, in the order the sensors are generated
    **dict.fromkeys((101, 102, 103, 104), "DOCK"),
    **dict.fromkeys((111, 112, 113, 114, 115, 116, 117), "AISLE"),
    **dict.fromkeys((121, 122), "OFFICE"),
    **dict.fromkeys((131, 132, 133), "FREEZER"),
}
FIRE_BASE = {"DOCK": 160, "AISLE": 205, "OFFICE": 218, "FREEZER": -182}  # tenths of a degC


def _fire_script():
    """Scripted readings of the fire sensors: sensor -> (first round, [(temp, smoke, co,
    tags[, shift])], silent afterwards). A reading ``None`` is one the sensor missed (its radio
    dropped it); ``shift`` moves a reading that many seconds off the minute grid."""
    return {**_fires(), **_fire_near_misses(), **_fire_window()}


def _fires():
    """The fires of :func:`_fire_script`."""
    F, T = False, True
    M = "match"
    return {
        # fire 1: three hot readings, then smoke on a hot reading; the sensor burns out
        103: (
            8,
            [
                (310, F, 9.5, []),
                (650, F, 14.0, []),
                (820, F, 31.0, []),
                (990, F, 58.0, []),
                (1100, T, 160.0, [("fire", M)]),
            ],
            True,
        ),
        # fire 2: four hot readings, then sprinklers cool it below 60.0 degC while CO rises
        112: (
            14,
            [
                (420, F, 12.0, []),
                (610, F, 35.0, []),
                (700, F, 52.0, []),
                (780, F, 80.0, []),
                (850, F, 120.0, []),
                (580, F, 350.0, [("fire", M)]),
            ],
            True,
        ),
        # fire 3: smoke on two consecutive hot readings: two ends, both reported (every end)
        114: (
            5,
            [
                (380, F, 10.0, []),
                (640, F, 22.0, []),
                (760, F, 40.0, []),
                (900, F, 75.0, []),
                (1050, T, 260.0, [("fire", M)]),
                (1180, T, 410.0, [("fire", M)]),
            ],
            True,
        ),
    }


def _fire_near_misses():
    """What :func:`_fire_script` plants that is not a fire: too few hot readings, heat alone,
    smoke alone."""
    F, T = False, True
    N = "near_miss"
    return {
        # near-miss: only two hot readings before the smoky (and hot) one
        121: (
            10,
            [
                (640, F, 6.0, []),
                (720, F, 9.0, []),
                (800, T, 30.0, [("fire", N)]),
                (260, F, 8.0, []),
            ],
            False,
        ),
        # near-miss: the hot run is broken by a 56.0 degC reading, only one hot reading before
        # smoke
        104: (
            12,
            [
                (700, F, 40.0, []),
                (750, F, 44.0, []),
                (560, F, 38.0, []),
                (690, F, 41.0, []),
                (300, T, 45.0, [("fire", N)]),
            ],
            False,
        ),
        # near-miss: heat without smoke (a truck idling under the sensor), CO stays below 200
        101: (
            16,
            [
                (620, F, 60.0, []),
                (680, F, 75.0, []),
                (700, F, 90.0, []),
                (640, F, 70.0, [("fire", N)]),
            ],
            False,
        ),
        # near-miss: smoke without heat (someone smoking at the dock)
        102: (6, [(240, T, 12.0, [("fire", N)])], False),
    }


def _fire_window():
    """The window (WITHIN 5 minutes = 300 s) to the second, on sensors that miss readings."""
    F, T = False, True
    M, N = "match", "near_miss"
    return {
        # fire 4: three hot readings, the fire knocks out the radio for two readings, and the
        # next one, 299 s after the first hot one, shows smoke: it fits; the sensor burns out
        116: (
            9,
            [
                (240, F, 5.0, []),
                (620, F, 18.0, []),
                (710, F, 30.0, []),
                (790, F, 55.0, []),
                None,
                None,
                (930, T, 240.0, [("fire", M)], -1),
            ],
            True,
        ),
        # near-miss: a welder heats the sensor for three readings, its radio drops the next
        # two, and the next one, exactly 300 s after the first hot one, shows the welding
        # fumes: one second too late for the window (without WITHIN it would be a match)
        117: (
            17,
            [
                (230, F, 4.0, []),
                (650, F, 20.0, []),
                (730, F, 35.0, []),
                (700, F, 40.0, []),
                None,
                None,
                (260, T, 90.0, [("fire", N)]),
            ],
            False,
        ),
    }


def _freezer(first, co, temps, tags):
    """A freezer's script: ``temps`` from round ``first`` on, no smoke, constant CO;
    ``tags``: {index in temps: kind of the planted thaw instance}."""
    return (
        first,
        [(t, False, co, [("thaw", tags[i])] if i in tags else []) for i, t in enumerate(temps)],
        False,
    )


def _thaw_script():
    """Scripted readings of the freezers, as :func:`_fire_script`."""
    M, N = "match", "near_miss"
    return {
        # thaw: compressor failure; the fourth warm reading is the alert; the fifth is not
        # reported (SKIP PAST LAST ROW; every-end would report it); then repaired
        131: _freezer(
            6,
            1.0,
            [-172, -158, -140, -110, -75, -48, -30, -12, 5, 18, 30, -20, -90, -160, -178],
            {8: M, 9: N},
        ),
        # thaw twice: the second episode starts from a fresh frozen reading after the first
        # alert
        132: _freezer(
            2,
            0.5,
            [
                -120,
                -70,
                -40,
                -20,
                -5,
                10,
                -60,
                -130,
                -170,
                -182,
                -185,
                -140,
                -90,
                -45,
                -25,
                -10,
                0,
                -80,
                -160,
            ],
            {5: M, 16: M},
        ),
        # near-miss: a defrost cycle, only three warm readings (-60 is below -5.0 degC)
        133: _freezer(9, 0.8, [-120, -60, -40, -30, -20, -90, -150, -175], {5: N}),
    }


def _fire_background(rng, zone, base):
    """An unscripted reading of a sensor in ``zone`` whose usual temperature is ``base``."""
    temp = base + rng.randint(-8, 8)
    co = round(rng.uniform(2.0, 45.0) if zone == "DOCK" else rng.uniform(0.0, 8.0), 1)
    if zone == "FREEZER":  # drawn after the value above, which it replaces
        co = round(rng.uniform(0.0, 2.0), 1)
    return temp, False, co, []


def gen_fire():
    rng = random.Random(451)
    t0 = 1_718_000_000  # epoch seconds
    rounds, period = 24, 60
    base = {s: FIRE_BASE[z] + rng.randint(-15, 15) for s, z in FIRE_ZONES.items()}
    script = {**_fire_script(), **_thaw_script()}
    events = []
    for s, zone in FIRE_ZONES.items():
        offset = rng.randrange(period)
        first, readings, silent = script.get(s, (rounds, [], False))
        for r in range(rounds):
            ts = t0 + r * period + offset
            if first <= r < first + len(readings):
                if readings[r - first] is None:  # a missed reading
                    continue
                temp, smoke, co, tags, *shift = readings[r - first]
                ts += shift[0] if shift else 0
            elif silent and r >= first + len(readings):
                continue
            else:
                temp, smoke, co, tags = _fire_background(rng, zone, base[s])
            e = Event(
                s, (ts, s), ts=ts, sensor=s, zone=zone, temp=temp, smoke=smoke, co_ppm=f"{co:.1f}"
            )
            for q, kind in tags:
                e.tag(q, kind)
            events.append(e)
    return write_dataset("fire", ["ts", "sensor", "zone", "temp", "smoke", "co_ppm"], events)


# ----------------------------------------------------------------------------------------------
# bruteforce: network and authentication log (bruteforce, portscan)


PROBE_PORTS = [
    21,
    22,
    23,
    25,
    53,
    110,
    111,
    135,
    139,
    143,
    445,
    993,
    995,
    1433,
    1521,
    3306,
    3389,
    5432,
    5900,
    6379,
    8443,
    9200,
    11211,
    27017,
]
SLOW, FAST = (400, 1500), (5, 60)  # milliseconds between the events of a human, of a tool


class NetLog:
    """The events of the network log; every random draw comes from ``rng``, in call order."""

    def __init__(self, rng):
        self.rng = rng
        self.events = []
        self.counter = itertools.count()

    def emit(self, src, t, event, port, tags=()):
        rng = self.rng
        nbytes = {  # every size is drawn, whichever the event
            "SYN": 60,
            "HTTP_GET": rng.randint(320, 1400),
            "LOGIN_FAIL": rng.randint(380, 460),
            "LOGIN_OK": rng.randint(380, 460),
            "LOGOUT": rng.randint(180, 240),
        }[event]
        e = Event(
            src, (t, next(self.counter)), ts=t, src_ip=src, event=event, dst_port=port, bytes=nbytes
        )
        for q, kind in tags:
            e.tag(q, kind)
        self.events.append(e)

    def run(self, src, t, steps, gap):
        """steps: (event, port, tags); gap: (lo, hi) milliseconds between events."""
        for event, port, tags in steps:
            self.emit(src, t, event, port, tags)
            t += self.rng.randint(*gap)
        return t


def _fails(n, port, last_tags=()):
    return [("LOGIN_FAIL", port, ())] * (n - 1) + [("LOGIN_FAIL", port, tuple(last_tags))]


def _probes(ports, tagged):
    return [("SYN", p, tuple(tagged.get(i, ()))) for i, p in enumerate(ports, 1)]


def _benign_users(log, t0):
    """Ordinary users: at most two failed logins in a row, at most one non-web SYN before a
    login, so neither query can match."""
    rng = log.rng
    benign = [f"10.20.{rng.randint(1, 9)}.{rng.randint(2, 250)}" for _ in range(12)]
    benign += [f"198.51.100.{rng.randint(2, 250)}" for _ in range(10)]
    benign = list(dict.fromkeys(benign))
    for addr in benign:
        src = ip(addr)
        t = t0 + rng.randint(0, 1_300_000)
        for _ in range(rng.choice([1, 1, 2])):
            kind = rng.choices(["web", "ssh", "mail", "browse"], [5, 2, 2, 2])[0]
            if kind == "web":
                steps = [("SYN", 443, ())] + [("HTTP_GET", 443, ())] * rng.randint(1, 3)
                steps += [("LOGIN_FAIL", 443, ())] * rng.choices([0, 1, 2], [6, 3, 1])[0]
                steps += [("LOGIN_OK", 443, ())] + [("HTTP_GET", 443, ())] * rng.randint(1, 5)
                steps += [("LOGOUT", 443, ())]
            elif kind == "ssh":
                steps = [("SYN", 22, ())] + [("LOGIN_FAIL", 22, ())] * rng.choice([0, 0, 1])
                steps += [("LOGIN_OK", 22, ()), ("LOGOUT", 22, ())]
            elif kind == "mail":
                steps = [("SYN", 993, ()), ("LOGIN_OK", 993, ()), ("LOGOUT", 993, ())]
            else:
                steps = [("SYN", 80, ())] + [("HTTP_GET", 80, ())] * rng.randint(1, 4)
            t = log.run(src, t, steps, (150, 4000)) + rng.randint(10_000, 120_000)


def _bruteforce_matches(log, t0):
    """Planted bruteforce matches, and a scanner that then guesses a password."""
    M, N = "match", "near_miss"
    B, P = "bruteforce", "portscan"
    log.run(
        ip("203.0.113.7"),
        t0 + 200_000,
        [("SYN", 22, ()), *_fails(5, 22), ("LOGIN_OK", 22, [(B, M)])],
        SLOW,
    )
    log.run(
        ip("203.0.113.45"),
        t0 + 400_000,
        [("SYN", 22, ()), *_fails(9, 22), ("LOGIN_OK", 22, [(B, M)]), ("LOGOUT", 22, ())],
        SLOW,
    )
    log.run(
        ip("198.51.100.23"),
        t0 + 600_000,
        [("SYN", 443, ())]
        + _fails(7, 443)
        + [("LOGIN_OK", 443, [(B, M)])]
        + [("HTTP_GET", 443, ())] * 2
        + [("LOGOUT", 443, ()), ("SYN", 443, ())]
        + _fails(5, 443)
        + [("LOGIN_OK", 443, [(B, M)]), ("HTTP_GET", 443, ()), ("LOGOUT", 443, ())],
        SLOW,
    )
    # scan then brute force from one address: portscan match at probe 8; probes 9-12 and the
    # SYN to 22 make five more, not eight (SKIP PAST LAST ROW); then the password is guessed
    src = ip("192.0.2.66")
    t = log.run(src, t0 + 900_000, _probes(PROBE_PORTS[:12], {8: [(P, M)]}), FAST)
    log.run(
        src,
        t + 30_000,
        [("SYN", 22, [(P, N)]), *_fails(6, 22), ("LOGIN_OK", 22, [(B, M)]), ("LOGOUT", 22, ())],
        SLOW,
    )


def _bruteforce_near_misses(log, t0):
    N, B = "near_miss", "bruteforce"
    log.run(
        ip("10.20.4.17"),
        t0 + 300_000,  # a user mistyping four times
        [
            ("SYN", 443, ()),
            ("HTTP_GET", 443, ()),
            *_fails(4, 443),
            ("LOGIN_OK", 443, [(B, N)]),
            ("HTTP_GET", 443, ()),
            ("HTTP_GET", 443, ()),
            ("LOGOUT", 443, ()),
        ],
        SLOW,
    )
    log.run(
        ip("198.51.100.88"),
        t0 + 700_000,  # six failures, but not in a row
        [
            ("SYN", 443, ()),
            *_fails(3, 443),
            ("LOGIN_OK", 443, ()),
            ("HTTP_GET", 443, ()),
            ("LOGOUT", 443, ()),
            ("SYN", 443, ()),
            *_fails(3, 443),
            ("LOGIN_OK", 443, [(B, N)]),
            ("LOGOUT", 443, ()),
        ],
        SLOW,
    )
    log.run(
        ip("203.0.113.99"),
        t0 + 1_000_000,  # five failures, a page load, then success
        [("SYN", 443, ()), *_fails(5, 443), ("HTTP_GET", 443, ()), ("LOGIN_OK", 443, [(B, N)])],
        SLOW,
    )
    log.run(
        ip("203.0.113.150"),
        t0 + 1_100_000,  # eight failures, never a success
        [("SYN", 22, ()), *_fails(8, 22, [(B, N)])],
        SLOW,
    )


def _portscans(log, t0):
    """Planted portscan matches and near-misses (besides the scanner of the brute force)."""
    M, N, P = "match", "near_miss", "portscan"
    log.run(ip("192.0.2.10"), t0 + 150_000, _probes(PROBE_PORTS[3:11], {8: [(P, M)]}), FAST)
    log.run(
        ip("192.0.2.200"),
        t0 + 500_000,  # 20 probes: alerts at 8 and 16, not at 20
        _probes(PROBE_PORTS[:20], {8: [(P, M)], 16: [(P, M)], 20: [(P, N)]}),
        FAST,
    )
    log.run(
        ip("192.0.2.77"),
        t0 + 800_000,  # a web SYN breaks the run at seven probes
        [*_probes(PROBE_PORTS[:7], {}), ("SYN", 443, [(P, N)]), *_probes(PROBE_PORTS[7:12], {})],
        FAST,
    )
    log.run(
        ip("10.20.0.5"),
        t0 + 1_200_000,  # a NAT gateway opening ten HTTPS connections
        _probes([443] * 10, {10: [(P, N)]}) + [("HTTP_GET", 443, ())] * 3,
        FAST,
    )


def _bruteforce_window(log, t0):
    """The window of bruteforce (WITHIN 1 minute = 60,000 ms) to the millisecond: a guessing
    tool throttled to one attempt per 12 s (to stay under a rate limit) fails five times and
    then succeeds. From the first failure to the success: 59,999 ms (the last attempt one
    millisecond quicker), a match; exactly 60,000 ms, a near-miss that would be a match
    without the window."""
    B = "bruteforce"
    for addr, last_gap, kind in (
        ("203.0.113.61", 11_999, "match"),
        ("203.0.113.62", 12_000, "near_miss"),
    ):
        src = ip(addr)
        t = t0 + (1_150_000 if kind == "match" else 1_250_000)
        log.emit(src, t, "SYN", 22)
        t += 700
        for _ in range(5):
            log.emit(src, t, "LOGIN_FAIL", 22)
            t += 12_000
        t += last_gap - 12_000
        log.emit(src, t, "LOGIN_OK", 22, [(B, kind)])
        log.emit(src, t + 900, "LOGOUT", 22)


def gen_bruteforce():
    rng = random.Random(22)
    t0 = 36_000_000  # 10:00:00.000, milliseconds since midnight
    log = NetLog(rng)
    _benign_users(log, t0)
    _bruteforce_matches(log, t0)
    _bruteforce_near_misses(log, t0)
    _portscans(log, t0)
    _bruteforce_window(log, t0)
    return write_dataset("bruteforce", ["ts", "src_ip", "event", "dst_port", "bytes"], log.events)


# ----------------------------------------------------------------------------------------------
# vshape: stock ticks


VSHAPE_STOCKS = {  # id: (ticker, open, previous close), prices in cents
    1: ("AAPL", 18950, 18890),
    2: ("MSFT", 41520, 41380),
    3: ("NVDA", 87340, 88010),
    4: ("XOM", 11870, 11920),
    5: ("JPM", 19840, 19790),
    6: ("KO", 6215, 6230),
}
VSHAPE_CONDITIONS = ("REGULAR", "ODD_LOT", "OFF_EXCHANGE")  # of the scripted ticks


def _vshape_script():
    """Scripted ticks: stock -> list of (first index, [(price - open, volume, cond, tag)]);
    volume None means a random regular-way volume below the script's concern."""
    return {**_vshape_recoveries(), **_vshape_false_recoveries()}


def _vshape_recoveries():
    """The stocks of :func:`_vshape_script` that dip and recover (a W: once only)."""
    R = VSHAPE_CONDITIONS[0]
    M, N = "match", "near_miss"
    return {
        # recovery exactly at open - 20
        1: [
            (
                14,
                [
                    (30, None, R, None),
                    (-80, None, R, None),
                    (-190, None, R, None),
                    (-320, 2400, R, None),
                    (-410, 3100, R, None),
                    (-260, None, R, None),
                    (-120, None, R, None),
                    (-20, None, R, M),
                ],
            )
        ],
        2: [
            (
                8,
                [
                    (10, None, R, None),
                    (-150, None, R, None),
                    (-350, 1800, R, None),
                    (-280, None, R, None),
                    (-60, None, R, None),
                    (5, None, R, M),
                ],
            ),
            (
                30,
                [
                    (40, None, R, None),
                    (-120, None, R, None),
                    (-301, 900, R, None),  # boundary
                    (-200, None, R, None),
                    (-30, None, R, None),
                    (-10, None, R, M),
                ],
            ),
        ],
        # a W whose middle peak is one tick: the first V is reported at it, the second V would
        # need that tick again as its start, which SKIP PAST LAST ROW forbids
        3: [
            (
                20,
                [
                    (60, None, R, None),
                    (-200, None, R, None),
                    (-520, 4000, R, None),
                    (-380, 2600, R, None),
                    (-90, None, R, None),
                    (15, None, R, M),
                    (-150, None, R, None),
                    (-450, 3500, R, None),
                    (-600, 5200, R, None),
                    (-240, None, R, None),
                    (25, None, R, N),
                ],
            )
        ],
    }


def _vshape_false_recoveries():
    """The stocks of :func:`_vshape_script` that look like a V and are not one."""
    R, OL, OX = VSHAPE_CONDITIONS
    N = "near_miss"
    return {
        # deep prints, but none counts: odd lots, a 300-share print, an off-exchange print
        4: [
            (
                25,
                [
                    (20, None, R, None),
                    (-110, None, R, None),
                    (-330, 40, OL, None),
                    (-360, 300, R, None),
                    (-410, 6000, OX, None),
                    (-340, 75, OL, None),
                    (-150, None, R, None),
                    (-5, None, R, N),
                ],
            )
        ],
        # deep dip, recovery stalls at open - 21 and never gets back for the rest of the day
        5: [
            (
                28,
                [
                    (10, None, R, None),
                    (-140, None, R, None),
                    (-380, 2100, R, None),
                    (-250, None, R, None),
                    (-90, None, R, None),
                    (-21, None, R, N),
                ],
            )
        ],
        # the low is exactly open - 300: not below it, so no BOTTOM
        6: [
            (
                18,
                [
                    (15, None, R, None),
                    (-90, None, R, None),
                    (-210, None, R, None),
                    (-300, 3000, R, None),
                    (-180, None, R, None),
                    (-40, None, R, None),
                    (10, None, R, N),
                ],
            )
        ],
    }


def _vshape_background(rng, i, n, opn, price, hi):
    """An unscripted tick ``i`` of ``n``: (price, volume, condition); ``price`` is the last
    one, ``hi`` the highest the price may reach."""
    R, OL, OX = VSHAPE_CONDITIONS
    if i == 0:
        return opn, rng.randrange(20_000, 60_000, 100), "OPENING"
    step = round(rng.gauss(0, max(opn * 0.0012, 6)))
    price = min(max(price + step, opn - 250), hi)
    if i == n - 1:
        return price, rng.randrange(30_000, 90_000, 100), "CLOSING"
    cond = rng.choices([R, OL, OX], [85, 10, 5])[0]
    vol = {  # every volume is drawn, whichever the condition
        R: rng.randrange(100, 2500, 100),
        OL: rng.randint(1, 99),
        OX: rng.randrange(100, 8000, 100),
    }[cond]
    return price, vol, cond


def gen_vshape():
    rng = random.Random(1987_1019)
    t_open, t_close = 34_200_000, 57_600_000  # 09:30 and 16:00, milliseconds since midnight
    n = 50
    script = _vshape_script()
    events = []
    for sid, (_ticker, opn, prev_close) in VSHAPE_STOCKS.items():
        fixed = {
            first + k: tick for first, ticks in script.get(sid, []) for k, tick in enumerate(ticks)
        }
        after_stall = min(
            (i for i, tk in fixed.items() if sid == 5 and tk[3] == "near_miss"), default=None
        )
        price = opn
        for i in range(n):
            ts = (
                t_close
                if i == n - 1
                else t_open + i * 468_000 + (rng.randint(1, 60_000) if i else 0)
            )
            if i in fixed:
                off, vol, cond, tag = fixed[i]
                price = opn + off
                if vol is None:
                    vol = rng.randrange(100, 2500, 100)
            else:
                tag = None
                # JPM stays below the recovery line after its stall until the close
                stalled = after_stall is not None and i > after_stall
                hi = opn - 21 if stalled else opn + 400
                price, vol, cond = _vshape_background(rng, i, n, opn, price, hi)
            e = Event(
                sid,
                (ts, sid),
                ts=ts,
                stock=sid,
                price=price,
                open=opn,
                volume=vol,
                cond=cond,
                chg=price - prev_close,
            )
            if tag:
                e.tag("vshape", tag)
            events.append(e)
    return write_dataset(
        "vshape", ["ts", "stock", "price", "open", "volume", "cond", "chg"], events
    )


# ----------------------------------------------------------------------------------------------
# supplychain: order lifecycle


ORDER_STATUSES = (
    "CREATED",
    "PAID",
    "ADDRESS_CHANGED",
    "PICKED",
    "PACKED",
    "SHIPPED",
    "DELIVERED",
    "CANCELLED",
    "REFUNDED",
)
ORDER_GAPS = dict(
    zip(
        ORDER_STATUSES,
        [  # seconds from a status to the next event, (lo, hi)
            (30, 900),
            (1800, 7200),
            (300, 1800),
            (600, 3600),
            (1200, 5400),
            (7200, 21600),
            (600, 3600),
            (300, 3600),
            (600, 7200),
        ],
        strict=True,
    )
)


class OrderLog:
    """The events of the fulfilment log; every random draw comes from ``rng``, in call order."""

    def __init__(self, rng, t0):
        self.rng = rng
        self.t0 = t0
        self.events = []
        self.ids = iter(rng.sample(range(4_100_000, 4_199_999), 80))

    def order(self, flow, start=None, end=None, express=None, amount=None, tags=None):
        """flow: statuses; tags: {index: [(query, kind)]}; start or end: first or last ts."""
        rng = self.rng
        oid = next(self.ids)
        express = rng.random() < 0.3 if express is None else express
        amount = rng.randrange(1500, 80_000, 5) if amount is None else amount
        wh = rng.randint(1, 4)
        gaps = [rng.randint(*ORDER_GAPS[s]) for s in flow[:-1]]
        if start is None:
            start = self.t0 + rng.randint(0, 6 * 3600) if end is None else end - sum(gaps)
        t = start
        for i, s in enumerate(flow):
            e = Event(
                oid,
                (t, oid, i),
                ts=t,
                order_id=oid,
                status=s,
                amount=amount,
                express=express,
                warehouse=wh,
            )
            for q, kind in (tags or {}).get(i, []):
                e.tag(q, kind)
            self.events.append(e)
            if i < len(flow) - 1:
                t += gaps[i]
        return oid


def _ordinary_orders(log):
    """ADDRESS_CHANGED only between PICKED and PACKED (never next to PAID), every shipment
    paid first, no shipment after a cancellation, at most one refund per order."""
    rng = log.rng
    C, P, A, PK, PA, S, D, X, R = ORDER_STATUSES
    for _ in range(38):
        kind = rng.choices(
            ["normal", "return", "cancel", "unpaid_cancel", "pending"], [60, 10, 10, 8, 12]
        )[0]
        if kind == "normal":
            flow = [C, P, PK] + ([A] if rng.random() < 0.2 else []) + [PA, S]
            flow += [D] if rng.random() < 0.85 else []
        elif kind == "return":
            flow = [C, P, PK, PA, S, D, R]
        elif kind == "cancel":
            flow = [C, P, X, R]
        elif kind == "unpaid_cancel":
            flow = [C, X]
        else:
            flow = [C, P] + ([PK] if rng.random() < 0.5 else [])
        log.order(flow)


def _planted_orders(log):
    """The planted matches and near-misses of the four queries; returns the second in which
    two different orders are each refunded once."""
    C, P, A, PK, PA, S, D, X, R = ORDER_STATUSES
    order, t0 = log.order, log.t0
    M, N = "match", "near_miss"
    SU, CS, DR, AT = "ship_unpaid", "cancel_shipped", "double_refund", "ato"
    # ship_unpaid
    order([C, PK, PA, S, D], express=False, tags={3: [(SU, M)]})
    order([C, A, PK, PA, S, D, P], express=False, tags={4: [(SU, M)]})  # invoiced, paid later
    order([C, S, D], express=False, tags={1: [(SU, M)]})  # drop-shipped by a vendor
    order([C, PK, PA, P, S, D], tags={4: [(SU, N)]})  # paid just before shipping
    order([PK, PA, S, D], start=t0 + 600, tags={2: [(SU, N)]})  # created before the log began
    # cancel_shipped
    order([C, P, PK, X, R, PA, S], tags={6: [(CS, M)]})
    order([C, P, PK, PA, X, S, D], tags={5: [(CS, M)]})  # no refund: REFUND? is optional
    order([C, P, PK, PA, S, X, R], tags={6: [(CS, N)]})  # cancelled only after shipping
    # refunded twice, then shipped: a double refund, and one REFUND too many for REFUND?
    order([C, P, PK, X, R, R, PA, S], tags={5: [(DR, M)], 7: [(CS, N)]})
    # double_refund
    order([C, P, X, R, R], tags={4: [(DR, M)]})
    order([C, P, PK, PA, S, D, R, R, R], tags={7: [(DR, M)], 8: [(DR, M)]})  # every end
    # two different orders refunded in the same second: one refund each, no match
    t_pair = t0 + 9 * 3600
    order([C, P, PK, PA, S, D, R], end=t_pair, tags={6: [(DR, N)]})
    order([C, P, PK, PA, S, D, R], end=t_pair, tags={6: [(DR, N)]})
    # ato
    order([C, P, A, PK, PA, S, D], express=True, amount=45_900, tags={5: [(AT, M)]})
    order([C, A, P, PK, PA, S], express=True, amount=31_250, tags={5: [(AT, M)]})
    order([C, P, A, PK, PA, S, D], express=False, amount=52_000, tags={5: [(AT, N)]})
    order([C, P, PK, A, PA, S, D], express=True, amount=61_000, tags={5: [(AT, N)]})
    order([C, P, A, PK, PA, S, D], express=True, amount=14_900, tags={5: [(AT, N)]})
    return t_pair


def gen_supplychain():
    rng = random.Random(4_100_017)
    log = OrderLog(rng, t0=1_718_870_400)  # epoch seconds
    _ordinary_orders(log)
    t_pair = _planted_orders(log)
    events_sorted, planted = write_dataset(
        "supplychain", ["ts", "order_id", "status", "amount", "express", "warehouse"], log.events
    )
    pair = [i for i, e in enumerate(events_sorted) if e["ts"] == t_pair]
    assert len(pair) == 2 and pair[1] == pair[0] + 1, "the two single refunds must be adjacent"
    return events_sorted, planted


GENERATORS = {
    "marathon": gen_marathon,
    "fire": gen_fire,
    "bruteforce": gen_bruteforce,
    "vshape": gen_vshape,
    "supplychain": gen_supplychain,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check the data files in queries/, do not rewrite them",
    )
    args = parser.parse_args(argv)
    if not args.check:
        for generate in GENERATORS.values():
            generate()
    # the check is the tests' (it needs the oracle, which lives there)
    return subprocess.run([sys.executable, str(CHECK), *GENERATORS]).returncode


if __name__ == "__main__":
    sys.exit(main())
