"""What every bundled query's data set is made of: a tuple (:class:`Event`) with its partition,
sort key and planted tags, the writer of ``<name>.csv`` and ``<name>.planted.csv``, and small
formatting helpers.
"""

from __future__ import annotations

import csv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


QUERIES = ROOT / "queries"


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
