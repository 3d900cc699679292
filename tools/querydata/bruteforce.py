"""The data set of ``queries/bruteforce.sql``, network and authentication log (bruteforce,
portscan): ``bruteforce.csv`` and ``bruteforce.planted.csv``.
"""

from __future__ import annotations

import itertools
import random

from .common import Event, ip, write_dataset

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
