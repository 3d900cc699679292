"""Subset construction of a query's NFA into a DFA over predicate vectors (paper §4.1–4.2).

Symbols are predicate vectors, so overlapping predicates are handled as §4.2 describes: a
tuple satisfying several predicates is one symbol that follows all their transitions at once.
Used by the reference matcher (a transition table per query) and by the NFA-vs-DFA
state-count comparison.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..nfa import Nfa, QueryNfa

__all__ = ["Dfa", "TooLarge", "all_symbols", "build", "local_masks", "minimize", "true_masks"]


class TooLarge(Exception):
    """The DFA would exceed the requested number of states."""


@dataclass
class Dfa:
    #: next state per (state, symbol); after a reported match with SKIP PAST LAST ROW, state 0
    table: np.ndarray
    #: whether the step (state, symbol) reports a match
    accept: np.ndarray
    #: the NFA state set (query-local bit mask) of each DFA state; state 0 is the empty set
    sets: list[int]
    #: per DFA state: its set holds an accepting NFA state (the Moore view of a match)
    accepting: np.ndarray


def local_masks(nfa: Nfa, q: QueryNfa) -> tuple[int, list[int], int]:
    """The query's NFA as query-local bit masks (bit ``i - q.first`` for state ``i``): the start
    states, per state the states it activates, and the accepting states."""
    start = 0
    follow = [0] * q.count
    accept = 0
    for i in q.states:
        s = nfa.states[i]
        bit = 1 << (i - q.first)
        if s.start:
            start |= bit
        if s.accepting:
            accept |= bit
        for j in s.activation:
            follow[j - q.first] |= bit
    return start, follow, accept


def true_masks(nfa: Nfa, q: QueryNfa, vectors: np.ndarray) -> list[int]:
    """For each predicate vector (rows of a bool matrix over ``nfa.predicates``), the mask of
    the query's states whose predicate holds."""
    masks = []
    for row in vectors:
        m = 0
        for i in q.states:
            p = nfa.states[i].predicate
            if p is None or row[p]:
                m |= 1 << (i - q.first)
        masks.append(m)
    return masks


def all_symbols(nfa: Nfa, q: QueryNfa) -> np.ndarray:
    """Every combination of the query's predicates, as rows over all of ``nfa.predicates``."""
    used = nfa.predicates_of(q)
    rows = np.zeros((1 << len(used), len(nfa.predicates)), dtype=bool)
    for v in range(1 << len(used)):
        for b, p in enumerate(used):
            rows[v, p] = bool(v >> b & 1)
    return rows


def build(
    nfa: Nfa, q: QueryNfa, masks: list[int], max_states: int = 1 << 16, roots: Iterable[int] = ()
) -> Dfa:
    """The reachable part of the subset construction over the given symbols (true masks),
    from the empty set and from the state sets ``roots`` (a matcher that resumes a stream
    needs a state for each set its partitions stand in)."""
    start, follow, acc_mask = local_masks(nfa, q)
    skip = q.skip_past_last_row
    index = {0: 0}
    sets = [0]
    for root in roots:
        if root not in index:
            index[root] = len(sets)
            sets.append(root)
    rows_t: list[list[int]] = []
    rows_a: list[list[bool]] = []
    k = 0
    while k < len(sets):
        cur = sets[k]
        reach = start
        bits = cur
        while bits:
            low = bits & -bits
            reach |= follow[low.bit_length() - 1]
            bits ^= low
        row_t, row_a = [], []
        for m in masks:
            nxt = reach & m
            hit = bool(nxt & acc_mask)
            if hit and skip:
                nxt = 0
            j = index.get(nxt)
            if j is None:
                if len(sets) >= max_states:
                    raise TooLarge(len(sets))
                j = index[nxt] = len(sets)
                sets.append(nxt)
            row_t.append(j)
            row_a.append(hit)
        rows_t.append(row_t)
        rows_a.append(row_a)
        k += 1
    dtype = np.int32
    table = np.array(rows_t, dtype=dtype).reshape(len(sets), len(masks))
    accept = np.array(rows_a, dtype=bool).reshape(len(sets), len(masks))
    accepting = np.array([bool(s & acc_mask) for s in sets], dtype=bool)
    return Dfa(table, accept, sets, accepting)


def minimize(dfa: Dfa) -> int:
    """Number of states of the minimal equivalent DFA, counted as the paper counts them: a
    Moore machine whose match output is a property of the state (a hardware DFA with the
    match flag decoded from its state register). Moore's partition refinement."""
    if dfa.table.shape[1] == 0:
        return len(np.unique(dfa.accepting))
    block = dfa.accepting.astype(np.int64)
    count = len(np.unique(block))
    while True:
        signature = np.concatenate([block[:, None], block[dfa.table]], axis=1)
        _, new = np.unique(signature, axis=0, return_inverse=True)
        new = new.ravel()
        new_count = int(new.max()) + 1
        if new_count == count:
            return count
        block, count = new, new_count
