"""Streams that put windows (WITHIN) at their boundary, shared by the gateware tests and the
simulator tests."""

from __future__ import annotations

DISTANCE_QUERY = (
    "CREATE STREAM s (k UINT(2), p ENUM('a', 'b', 'c'), t UINT(16));\n"
    "QUERY q PARTITION k ORDER BY t PATTERN (A B* C) WITHIN 8 "
    "DEFINE A AS p = 'a', B AS p = 'b', C AS p = 'c';"
)

#: The distances between two tuples of a key that the cases put a window's boundary at: up to
#: the first at which the later tuple finds its state by the row read in the deepest table, one
#: spread over the device with five read registers (whose read misses 8 writes: stage 4's and
#: ``TablePartitioner._missed + 1`` written back), and one more.
DISTANCES = range(1, 11)


def distance_tuples():
    """For each distance ``d`` from 1 to 10 between a run's first tuple and the tuple that
    ends it (``d - 1`` tuples of other keys between), so that the state is found by each of
    the table's paths in turn (forwarded from stage 4, from a write in flight, from the row
    read: :data:`DISTANCES`): a run ended exactly a window minus one after it began, with the
    next tuple a window after (a match), and one ended exactly a window after, with the tuple
    before it a window minus one after (none); the first two distances again at the end, when
    the entry read holds an older run. Returns ``(tuples, seqs that match)``."""
    rows, matching, t = [], set(), 0
    for d in [*DISTANCES, 1, 2]:
        for ends in (7, 8):  # WITHIN 8: 7 after the start is live, 8 is not
            key = d % 4
            rows.append((key, "a", t))
            for f in range(d - 1):  # the last filler is at t + 7: right before the end
                rows.append(((key + 1 + f % 3) % 4, "b", t + 7 * (f + 1) // (d - 1)))
            if ends == 7:
                matching.add(len(rows))
            rows.append((key, "c", t + ends))
            t += 8 + ends  # the next tuple a window after this run's start, or later
    return rows, matching


def distance_csv() -> str:
    """:func:`distance_tuples` as the CSV of ``DISTANCE_QUERY``'s stream."""
    rows, _ = distance_tuples()
    return "k,p,t\n" + "".join(f"{k},{p},{t}\n" for k, p, t in rows)


def follow_tuples():
    """For each distance ``d`` from 1 to 10 between a run's first tuple and the next of its key
    (``d - 1`` tuples of other keys between), so that that tuple finds its state by each of
    the table's paths in turn (:data:`DISTANCES`): that tuple (a ``b``, a window minus one
    after the start) and right behind it, in the same key, the one that ends the run a window
    after the start (no match), and then the same with the end a window minus one after (a
    match). The tuple that ends the run takes the update's hint for it, worked out while the
    ``b`` is updated, from the state the ``b`` found: a start live at the ``b``'s time and not
    at the end's. Returns ``(tuples, seqs that match)``."""
    rows, matching, t = [], set(), 0
    for d in DISTANCES:
        for ends in (8, 7):
            key = d % 4
            rows.append((key, "a", t))
            for f in range(d - 1):
                rows.append(((key + 1 + f % 3) % 4, "b", t + 6 * (f + 1) // d))
            rows.append((key, "b", t + ends - 1))
            if ends == 7:
                matching.add(len(rows))
            rows.append((key, "c", t + ends))
            t += 8 + ends
    return rows, matching
