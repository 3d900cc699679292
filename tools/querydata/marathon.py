"""The data set of ``queries/marathon.sql``, the paper's running example: ``marathon.csv`` and
``marathon.planted.csv``.
"""

from __future__ import annotations

import random

from .common import Event, write_dataset


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
