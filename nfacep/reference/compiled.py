"""The reference matcher's compiled loops: one pass over the stream in stream order.

Each loop keeps one automaton state per partition (indexed by the partition's key code) and
walks the tuples as they arrive: a tuple the partitioner dropped is skipped, a tuple that
starts its partition afresh (:attr:`nfacep.reference.capacity.Admission.fresh`) first resets the
partition's state to the empty state, and every other tuple steps its partition's state. No
sort by partition is needed. :func:`dfa_stream` steps a DFA by table lookup;
:func:`nfa_stream` steps the NFA bit-parallel, its state set a bit mask in ``words`` 64-bit
words.

A tuple's symbol is ``lut[packed[i]]``: ``packed`` is its predicate vector packed into an
integer, or the value of the one field its predicates read, and ``lut`` numbers the vectors
that occur (:func:`nfacep.reference.symbols.symbols`).

Compiled with numba on first use and cached on disk (``cache=True``: beside this file, else
numba's per-user cache folder, or ``NUMBA_CACHE_DIR``; with none of them writable, compiled
again in every process). Importing this module imports numba.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "carry_last",
    "dfa_stream",
    "fill_codes",
    "first_index",
    "nfa_start_stream",
    "nfa_stream",
    "table_codes",
]

# Position of the lowest set bit of a 64-bit word w: de Bruijn multiplication of w & -w
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, dtype=np.int64)
for _b in range(64):
    _DEBRUIJN_INDEX[((1 << _b) * 0x03F79D71B4CB0A89 & (2**64 - 1)) >> 58] = _b


def _jit(func):
    try:
        return numba.njit(cache=True, nogil=True)(func)
    except RuntimeError:  # nowhere writable for the cache: compile in every process
        return numba.njit(nogil=True)(func)


@_jit
def dfa_stream(table, accept, lut, packed, codes, admitted, fresh, state):
    """Whether each tuple ends a match: the DFA ``table`` (next state per state and symbol;
    state 0 is the empty set) and ``accept`` (the step reports a match) run per partition,
    from ``state`` (each partition's DFA state, by key code), which is left as the tuples
    leave it."""
    n = len(packed)
    match = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        if not admitted[i]:
            continue
        c = codes[i]
        s = 0 if fresh[i] else state[c]
        x = lut[packed[i]]
        match[i] = accept[s, x]
        state[c] = table[s, x]
    return match


@_jit
def nfa_stream(follow, start, accept, true, skip, lut, packed, codes, admitted, fresh, state):
    """Whether each tuple ends a match, the NFA stepped as bit masks of ``W`` words.

    ``follow[j]``: the states that state ``j`` activates; ``start``: the states active on every
    tuple; ``accept``: the accepting states; ``true[x]``: the states whose predicate symbol
    ``x`` satisfies; ``skip``: AFTER MATCH SKIP PAST LAST ROW (a match empties the set).
    ``state[c]``: the active states of the partition with key code ``c`` (``W`` words), from
    which the tuples start and which they leave updated.
    """
    n = len(packed)
    words = len(start)
    reach = np.empty(words, dtype=np.uint64)
    match = np.zeros(n, dtype=np.bool_)
    zero, one = np.uint64(0), np.uint64(1)
    for i in range(n):
        if not admitted[i]:
            continue
        c = codes[i]
        x = lut[packed[i]]
        for w in range(words):
            reach[w] = start[w]
        if not fresh[i]:  # a fresh partition starts from the empty set
            for w in range(words):
                bits = state[c, w]
                while bits:
                    low = bits & (~bits + one)
                    j = w * 64 + _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
                    for v in range(words):
                        reach[v] |= follow[j, v]
                    bits ^= low
        hit = False
        for w in range(words):
            reach[w] &= true[x, w]
            hit |= (reach[w] & accept[w]) != 0
        match[i] = hit
        empty = hit and skip
        for w in range(words):
            state[c, w] = zero if empty else reach[w]
    return match


@_jit
def nfa_start_stream(
    follow,
    start,
    accept,
    true,
    skip,
    window,
    ts,
    lut,
    packed,
    codes,
    admitted,
    fresh,
    offset,
    state,
    began,
    began_ts,
):
    """:func:`nfa_stream` keeping, for each active state, the latest start of the runs in it:
    the position (``seq``) of the tuple the latest of them began at. A start state's run
    begins at the tuple; a state reached from several takes the latest of their starts.

    Under WITHIN (``window`` > 0, ``ts`` each tuple's ORDER BY value as uint64, ascending in
    stream order) a state whose start's ``ts`` is ``window`` or more before the tuple's is
    inactive: as ``ts`` never decreases, the latest start is also the latest in time, so no
    run through that state fits the window. Returns whether each tuple ends a match and, where
    it does, the latest start of the runs that end there (-1 elsewhere).

    The tuples are the stream's from position ``offset`` on. ``state`` (as
    :func:`nfa_stream`'s), ``began[c, j]`` (the latest start of state ``j`` of partition ``c``,
    a stream position) and ``began_ts[c, j]`` (that start's ``ts``) are where the partitions
    stand before the tuples, and are left where they stand after them.
    """
    n = len(packed)
    words = len(start)
    states = follow.shape[0]
    reach = np.empty(words, dtype=np.uint64)
    latest = np.zeros(states, dtype=np.int64)
    latest_ts = np.zeros(states, dtype=np.uint64)
    match = np.zeros(n, dtype=np.bool_)
    first = np.full(n, -1, dtype=np.int64)
    zero = np.uint64(0)
    for i in range(n):
        if not admitted[i]:
            continue
        c = codes[i]
        x = lut[packed[i]]
        t = ts[i]
        for w in range(words):
            reach[w] = zero
        if not fresh[i]:  # a fresh partition starts from the empty set
            _follow_started(
                follow,
                true,
                window,
                x,
                t,
                state[c],
                began[c],
                began_ts[c],
                reach,
                latest,
                latest_ts,
            )
        hit = _start_and_end(
            start, accept, true, x, t, offset + i, reach, latest, latest_ts, first, i
        )
        match[i] = hit
        empty = hit and skip
        for w in range(words):
            state[c, w] = zero if empty else reach[w]
        _keep_starts(state[c], began[c], began_ts[c], latest, latest_ts)
    return match, first


@_jit
def _bit(low):
    """The index of the one set bit of ``low`` (a uint64)."""
    return _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]


@_jit
def _follow_started(
    follow, true, window, x, t, words_state, began, began_ts, reach, latest, latest_ts
):
    """:func:`nfa_start_stream`'s step from a partition's active states (``words_state``, its
    ``began`` and ``began_ts``) on symbol ``x`` at time ``t``: ``reach`` gains the states they
    lead to, each with the latest start (``latest``, ``latest_ts``) of the runs into it; a state
    whose start is ``window`` or more before ``t`` leads nowhere."""
    one = np.uint64(1)
    words = len(words_state)
    for w in range(words):
        bits = words_state[w]
        while bits:
            low = bits & (~bits + one)
            j = w * 64 + _bit(low)
            bits ^= low
            b = began[j]
            if window and t - began_ts[j] >= window:  # too old: no run through j fits
                continue
            for v in range(words):
                nxt = follow[j, v] & true[x, v]
                new = nxt & ~reach[v]
                old = nxt & reach[v]
                reach[v] |= nxt
                while new:
                    lo = new & (~new + one)
                    k = v * 64 + _bit(lo)
                    latest[k] = b
                    latest_ts[k] = began_ts[j]
                    new ^= lo
                while old:
                    lo = old & (~old + one)
                    k = v * 64 + _bit(lo)
                    if b > latest[k]:
                        latest[k] = b
                        latest_ts[k] = began_ts[j]
                    old ^= lo


@_jit
def _start_and_end(start, accept, true, x, t, position, reach, latest, latest_ts, first, i):
    """:func:`nfa_start_stream`'s runs that begin at the tuple (``position``, time ``t``) and
    whether any run ends there, with the latest start of those that do in ``first[i]``."""
    one = np.uint64(1)
    hit = False
    for w in range(len(start)):
        starts = start[w] & true[x, w]
        reach[w] |= starts
        while starts:  # a run beginning here is the latest
            lo = starts & (~starts + one)
            k = w * 64 + _bit(lo)
            latest[k] = position
            latest_ts[k] = t
            starts ^= lo
        ends = reach[w] & accept[w]
        hit |= ends != 0
        while ends:  # the latest start among the runs that end here
            lo = ends & (~ends + one)
            b = latest[w * 64 + _bit(lo)]
            if b > first[i]:
                first[i] = b
            ends ^= lo
    return hit


@_jit
def _keep_starts(words_state, began, began_ts, latest, latest_ts):
    """The start of each of a partition's active states (``words_state``), kept with it."""
    one = np.uint64(1)
    for w in range(len(words_state)):
        bits = words_state[w]
        while bits:
            lo = bits & (~bits + one)
            k = w * 64 + _bit(lo)
            began[k] = latest[k]
            began_ts[k] = latest_ts[k]
            bits ^= lo


@_jit
def first_index(codes, keys):
    """Per code ``0 … keys-1``, the index of its first tuple (``len(codes)`` if none)."""
    n = len(codes)
    first = np.full(keys, n, dtype=np.int64)
    for i in range(n):
        c = codes[i]
        if first[c] == n:
            first[c] = i
    return first


@_jit
def carry_last(last, codes, admitted, offset):
    """``last[c]``: the stream position of code ``c``'s last admitted tuple, brought up to
    date with a piece from position ``offset`` (positions only grow, so the last one wins)."""
    for i in range(len(codes)):
        if admitted[i]:
            last[codes[i]] = offset + i


@_jit
def table_codes(column, lo, table, out):
    """``out[i] = table[column[i] - lo]``: the code of each key by a table indexed directly.
    A key not in the table (-1) is marked in it (-2) and its index returned, each once, in the
    order of first appearance; its tuples get a negative code, for :func:`fill_codes`."""
    n = len(column)
    new = np.empty(min(n, len(table)), dtype=np.int64)
    k = 0
    for i in range(n):
        j = column[i] - lo
        c = table[j]
        if c == -1:
            table[j] = -2
            new[k] = j
            k += 1
        out[i] = c
    return new[:k]


@_jit
def fill_codes(column, lo, table, out):
    """``out[i] = table[column[i] - lo]`` where ``out[i]`` is negative (keys numbered since
    :func:`table_codes`)."""
    for i in range(len(column)):
        if out[i] < 0:
            out[i] = table[column[i] - lo]
