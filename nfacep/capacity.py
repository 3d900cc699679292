"""The partitioner's capacity and timers, as a model over the sequence of partition keys.

Which tuples are dropped, and which start their partition from the null state vector, depends
only on the keys and on the hardware parameters (docs/language.md, 'Partitions, capacity and
timers'), never on predicates: so it is computed first, for all queries at once. The common
case (the partitioner never full) is computed with array operations; when it does fill up, an
exact sequential pass takes over.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from .params import EngineParams

__all__ = ["Admission", "admit", "admit_sequential"]


@dataclass
class Admission:
    codes: np.ndarray  #: partition key code of each tuple (0 … n_keys-1)
    admitted: np.ndarray  #: bool: the tuple reached its partition's state vector
    fresh: np.ndarray  #: bool: its partition started from the null state vector at this tuple

    @property
    def drops(self) -> np.ndarray:
        return np.flatnonzero(~self.admitted)


def _prev_same(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable grouping by code; index of the previous tuple with the same code (or -1)."""
    order = np.argsort(codes, kind="stable")
    prev = np.full(len(codes), -1, dtype=np.int64)
    same = codes[order[1:]] == codes[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    return order, prev


def admit(codes: np.ndarray, params: EngineParams) -> Admission:
    """Model the partitioner of an engine with ``params``: ``partitions`` elements with
    ``timer_bits`` timers and a tick per ``tick_tuples``.

    An element is set to ``2**timer_bits - 1`` whenever a tuple of its partition is processed;
    with ticks numbered from 1, tick *t* happens right after tuple ``t*K - 1``. A tuple processed
    at index *i* was followed by ``i // K`` … ticks; its element is freed by tick
    ``i // K + M``, so the next tuple *j* of that partition finds it iff ``j // K < i // K + M``.

    Every array value stays below ``n + 2**33`` for the parameters' limits (``K`` and ``M``
    below ``2**32``), so int64 never overflows.
    """
    n = len(codes)
    if n == 0:
        return Admission(codes, np.zeros(0, dtype=bool), np.zeros(0, dtype=bool))
    partitions = params.partitions
    k, m = params.tick_tuples, (1 << params.timer_bits) - 1
    order, prev = _prev_same(codes)
    idx = np.arange(n, dtype=np.int64)
    fresh = (prev < 0) | (idx // k >= prev // k + m) if k else prev < 0
    # Each run of a partition between fresh starts holds one element from its first tuple
    # until the tick that frees it, which happens right after tuple `expire`.
    starts = np.flatnonzero(fresh)
    if k:
        # in grouped order a segment ends right before the next fresh tuple
        seg_heads = np.flatnonzero(fresh[order])
        last = order[np.append(seg_heads[1:] - 1, n - 1)]
        # (last // k + m) * k - 1, but no later than n (past the stream: never within it):
        # at the limits (k and m near 2**32) the product does not fit an int64
        tick = np.minimum(last // k + m, n // k + 1)
        expire = tick * k - 1
        # elements in use just before each fresh tuple: started earlier, not yet freed
        occupied = np.arange(len(starts)) - np.searchsorted(np.sort(expire), starts, "left")
    else:
        occupied = np.arange(len(starts))
    if len(starts) == 0 or occupied.max() < partitions:
        return Admission(codes, np.ones(n, dtype=bool), fresh)
    return admit_sequential(codes, params)


def admit_sequential(codes: np.ndarray, params: EngineParams) -> Admission:
    """:func:`admit`'s result by the definition, one tuple at a time: an exact pass that
    :func:`admit` takes when the partitioner fills (its array operations model only the case
    where it never does)."""
    partitions, tick_tuples = params.partitions, params.tick_tuples
    timer_max = (1 << params.timer_bits) - 1
    n = len(codes)
    admitted = np.ones(n, dtype=bool)
    fresh = np.zeros(n, dtype=bool)
    expires: dict[int, int] = {}  # code -> number of ticks after which it is freed
    heap: list[tuple[int, int]] = []
    never = 1 << 62
    for i, c in enumerate(codes.tolist()):
        ticks = i // tick_tuples if tick_tuples else 0
        while heap and heap[0][0] <= ticks:
            when, code = heapq.heappop(heap)
            if expires.get(code) == when:
                del expires[code]
        if c not in expires:
            if len(expires) >= partitions:
                admitted[i] = False
                continue
            fresh[i] = True
        when = ticks + timer_max if tick_tuples else never
        expires[c] = when
        if tick_tuples:
            heapq.heappush(heap, (when, c))
    return Admission(codes, admitted, fresh)
