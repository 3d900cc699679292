"""The reference matcher's array operations: each automaton run over the admitted tuples
grouped by partition, all partitions stepped at once, one tuple of each per operation (very long
runs split into chunks whose start states are resolved by composing each chunk's state map). The
NFA's take a whole stream as one piece; the DFA's also a stream in pieces, each run starting
from its partition's state where the piece before left it. The compiled loops
(:mod:`nfacep.reference.compiled`) give the same result in stream order."""

from __future__ import annotations

import math

import numpy as np

from ..nfa import Nfa, QueryNfa
from . import dfa as dfa_mod

__all__ = ["grouped", "run_dfa", "run_nfa"]


def _by_length(starts, lens):
    order = np.argsort(-lens, kind="stable")
    lens_sorted = lens[order]
    maxlen = int(lens_sorted[0]) if len(lens_sorted) else 0
    active = np.searchsorted(-lens_sorted, -np.arange(maxlen), side="left")
    return order, starts[order], active


def _dfa_rounds(flat_t, flat_a, n_sym, sym, starts, lens, init, match=None):
    """Run DFA items (start, length, initial state) in lock step; returns final states."""
    order, st, active = _by_length(starts, lens)
    state = init[order].astype(np.int64)
    for r, k in enumerate(active.tolist()):
        pos = st[:k] + r
        code = state[:k] * n_sym + sym[pos]
        if match is not None:
            match[pos] = flat_a[code]
        state[:k] = flat_t[code]
    final = np.empty_like(state)
    final[order] = state
    return final


def run_dfa(
    d: dfa_mod.Dfa, sym, seg_starts, seg_lens, init: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The DFA ``d`` run over the runs of ``sym`` (each of ``seg_lens[i]`` symbols from
    ``seg_starts[i]``), each from its state ``init[i]`` (None: the empty set, 0): whether
    each symbol's step reports a match, and the state each run ends in."""
    n = len(sym)
    n_states, n_sym = d.table.shape
    flat_t = d.table.ravel().astype(np.int64)
    flat_a = d.accept.ravel()
    match = np.zeros(n, dtype=bool)
    init = np.zeros(len(seg_starts), dtype=np.int64) if init is None else init.astype(np.int64)
    if n == 0:
        return match, init
    longest = int(seg_lens.max())
    chunk = max(4096, int(math.sqrt(n * n_states)))
    if longest <= 2 * chunk or n * n_states > 1 << 28:
        final = _dfa_rounds(flat_t, flat_a, n_sym, sym, seg_starts, seg_lens, init, match)
        return match, final
    # Split segments into chunks; compute each chunk's state map from every DFA state,
    # compose the maps along each segment to find the chunks' start states, then rerun.
    n_chunks = (seg_lens + chunk - 1) // chunk
    seg_of = np.repeat(np.arange(len(seg_starts)), n_chunks)
    k_in_seg = np.arange(len(seg_of)) - np.repeat(np.cumsum(n_chunks) - n_chunks, n_chunks)
    c_starts = seg_starts[seg_of] + k_in_seg * chunk
    c_lens = np.minimum(chunk, seg_starts[seg_of] + seg_lens[seg_of] - c_starts)
    rep_starts = np.repeat(c_starts, n_states)
    rep_lens = np.repeat(c_lens, n_states)
    rep_init = np.tile(np.arange(n_states), len(c_starts))
    maps = _dfa_rounds(flat_t, flat_a, n_sym, sym, rep_starts, rep_lens, rep_init)
    maps = maps.reshape(len(c_starts), n_states)
    c_init = np.zeros(len(c_starts), dtype=np.int64)
    first_chunk = np.cumsum(n_chunks) - n_chunks
    cur = init.copy()
    for k in range(int(n_chunks.max())):
        segs = np.flatnonzero(n_chunks > k)
        idx = first_chunk[segs] + k
        c_init[idx] = cur[segs]
        cur[segs] = maps[idx, cur[segs]]
    _dfa_rounds(flat_t, flat_a, n_sym, sym, c_starts, c_lens, c_init, match)
    return match, cur


def run_nfa(
    nfa: Nfa, q: QueryNfa, masks: list[int], sym, seg_starts, seg_lens, order=None, ts=None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Bit-matrix simulation of the NFA: for DFAs too large to tabulate, for WITHIN and for
    start_seq. Returns whether each tuple (in the order of ``sym``) ends a match and, when
    ``order`` is given, the latest start of the runs that end there (-1 elsewhere).

    With ``order`` (the position in the stream of each tuple of ``sym``) each state also holds
    the latest start (a position) of its runs, as :func:`nfacep.reference.compiled.nfa_start_stream`
    keeps it; under WITHIN (``ts``: each tuple's ORDER BY value as uint64, in stream order) a
    state whose start is the window or more before the tuple is inactive."""
    m = q.count
    follow = np.zeros((m, m), dtype=np.uint8)
    start = np.zeros(m, dtype=bool)
    accept = np.zeros(m, dtype=bool)
    for i in q.states:
        s = nfa.states[i]
        start[i - q.first] = s.start
        accept[i - q.first] = s.accepting
        for j in s.activation:
            follow[j - q.first, i - q.first] = 1
    true = np.array([[(mask >> b) & 1 for b in range(m)] for mask in masks], dtype=bool)
    match = np.zeros(len(sym), dtype=bool)
    _order, st, active = _by_length(seg_starts, seg_lens)
    state = np.zeros((len(st), m), dtype=bool)
    # the starts, when ``order`` is given (else empty)
    tracked = order is not None
    first = np.full(len(sym) if tracked else 0, -1, dtype=np.int64)
    began = np.zeros((len(st), m) if tracked else (0, m), dtype=np.int64)
    window = np.uint64(q.window or 0)  # (with ``ts`` only: WITHIN)
    for r, k in enumerate(active.tolist()):
        pos = st[:k] + r
        live = state[:k]
        if ts is not None:  # a state whose runs began too long ago is inactive
            t = ts[order[pos]]
            live = live & (t[:, None] - ts[began[:k]] < window)
        reach = (live.astype(np.uint8) @ follow) > 0
        nxt = true[sym[pos]] & (reach | start)
        if tracked:  # the latest start over the predecessors; a start state's is now
            latest = np.full((k, m), -1, dtype=np.int64)
            for j in np.flatnonzero(live.any(axis=0)).tolist():
                to = follow[j] > 0
                carry = np.where(live[:, j], began[:k, j], -1)
                latest[:, to] = np.maximum(latest[:, to], carry[:, None])
            latest[:, start] = order[pos][:, None]
            began[:k] = np.maximum(latest, 0)
            first[pos] = np.where(nxt & accept, latest, -1).max(axis=1)
        hit = (nxt & accept).any(axis=1)
        match[pos] = hit
        if q.skip_past_last_row:
            nxt[hit] = False
        state[:k] = nxt
    return match, first if tracked else None


def grouped(codes, admitted, fresh):
    """The admitted tuples grouped by partition, in stream order within each, and the runs
    between restarts: (tuple order, start and length of each run in that order). A run
    begins at a tuple that starts its partition afresh and at each partition's first tuple
    (in a piece after the first, it goes on from the partition's state)."""
    idx = np.flatnonzero(admitted)
    order = idx[np.argsort(codes[idx], kind="stable")]
    by_code = codes[order]
    begins = fresh[order]
    begins[1:] |= by_code[1:] != by_code[:-1]
    begins[:1] = True
    heads = np.flatnonzero(begins)
    return order, heads, np.diff(np.append(heads, len(order)))
