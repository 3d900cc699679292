"""The reference matcher: an exact software model of what the engine reports.

What it reports is defined in docs/language.md, 'What a match is' and 'Partitions, capacity
and timers'. Every output of the gateware is checked against this model. It computes, for a
batch of tuples:

1. the predicate vector of every tuple, column-wise (:func:`nfacep.predicates.evaluate`);
2. which tuples the partitioner drops and where a partition restarts from the null state
   vector (:mod:`nfacep.capacity`), from the keys alone;
3. per query, the NFA run over each partition's run of tuples. The run uses the query's DFA
   (subset construction over the predicate vectors that occur) when it is small, else a
   bit-matrix simulation of the NFA; both step all partitions at once, one tuple of each per
   array operation, and split very long runs into chunks whose start states are resolved by
   composing each chunk's state map.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import dfa as dfa_mod
from .capacity import admit, table_slots
from .nfa import Nfa, QueryNfa
from .params import EngineParams
from .predicates import evaluate
from .result import Result
from .tuples import Tuples, format_value
from .wire import raw_column

__all__ = ["Reference", "ReferenceResult", "predicate_matrix", "run"]

_MAX_DFA_STATES = 1 << 14


@dataclass
class ReferenceResult(Result):
    """What the reference matcher reports: a :class:`~nfacep.result.Result`, plus how it ran."""

    engines: dict[str, str] = field(default_factory=dict)  #: "dfa" or "nfa" per query

    backend = "reference"


class Reference:
    """The reference matcher as a :class:`~nfacep.backend.Backend`; ``engine`` as :func:`run`
    takes it."""

    def __init__(self, engine: str = "auto"):
        if engine not in ("auto", "dfa", "nfa"):
            raise ValueError(f"engine {engine!r}: choose auto, dfa or nfa")
        self.engine = engine

    def run(self, nfa: Nfa, tuples: Tuples, params: EngineParams) -> ReferenceResult:
        return run(nfa, tuples, params, engine=self.engine)


def predicate_matrix(nfa: Nfa, tuples: Tuples) -> np.ndarray:
    """Bool matrix (tuples × predicates): the predicate decoder's output for every tuple."""
    out = np.zeros((tuples.n, len(nfa.predicates)), dtype=bool)
    for p in nfa.predicates:
        out[:, p.index] = evaluate(p.expr, tuples.columns, tuples.n)
    return out


def _symbols(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a bool matrix and, per row, the index of its distinct row."""
    if rows.shape[1] == 0:
        return np.zeros((1, 0), dtype=bool), np.zeros(len(rows), dtype=np.int64)
    packed = np.packbits(rows, axis=1)
    if packed.shape[1] <= 8:
        key = np.zeros(len(rows), dtype=np.uint64)
        for b in range(packed.shape[1]):
            key |= packed[:, b].astype(np.uint64) << np.uint64(8 * b)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    else:
        view = np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1])))
        __, first, inverse = np.unique(view.ravel(), return_index=True, return_inverse=True)
    return rows[first], inverse.ravel()


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


def _run_dfa(d: dfa_mod.Dfa, sym, seg_starts, seg_lens) -> np.ndarray:
    n = len(sym)
    n_states, n_sym = d.table.shape
    flat_t = d.table.ravel().astype(np.int64)
    flat_a = d.accept.ravel()
    match = np.zeros(n, dtype=bool)
    if n == 0:
        return match
    longest = int(seg_lens.max())
    chunk = max(4096, int(math.sqrt(n * n_states)))
    if longest <= 2 * chunk or n * n_states > 1 << 28:
        _dfa_rounds(flat_t, flat_a, n_sym, sym, seg_starts, seg_lens,
                    np.zeros(len(seg_starts), dtype=np.int64), match)
        return match
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
    init = np.zeros(len(c_starts), dtype=np.int64)
    first_chunk = np.cumsum(n_chunks) - n_chunks
    cur = np.zeros(len(seg_starts), dtype=np.int64)
    for k in range(int(n_chunks.max())):
        segs = np.flatnonzero(n_chunks > k)
        idx = first_chunk[segs] + k
        init[idx] = cur[segs]
        cur[segs] = maps[idx, cur[segs]]
    _dfa_rounds(flat_t, flat_a, n_sym, sym, c_starts, c_lens, init, match)
    return match


def _run_nfa(nfa: Nfa, q: QueryNfa, masks: list[int], sym, seg_starts, seg_lens) -> np.ndarray:
    """Bit-matrix simulation of the NFA: for DFAs too large to tabulate."""
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
    for r, k in enumerate(active.tolist()):
        pos = st[:k] + r
        reach = (state[:k].astype(np.uint8) @ follow) > 0
        nxt = true[sym[pos]] & (reach | start)
        hit = (nxt & accept).any(axis=1)
        match[pos] = hit
        if q.skip_past_last_row:
            nxt[hit] = False
        state[:k] = nxt
    return match


def run(nfa: Nfa, tuples: Tuples, params: EngineParams = EngineParams(), *,
        engine: str = "auto") -> ReferenceResult:
    """Match every query of ``nfa`` over ``tuples`` as the engine with ``params`` would.

    ``engine`` ("auto", "dfa", "nfa") picks the simulation strategy; all give equal results.
    """
    program = nfa.program
    n = tuples.n
    key_field = program.partition_field
    preds = predicate_matrix(nfa, tuples)
    if key_field is None:
        codes = np.zeros(n, dtype=np.int64)
        admitted = np.ones(n, dtype=bool)
        fresh = np.zeros(n, dtype=bool)
        fresh[:1] = True
        key_values = None
    else:
        key_values, codes = np.unique(tuples.columns[key_field], return_inverse=True)
        codes = codes.ravel()
        slots = None
        if params.store == "table":
            first = np.empty(len(key_values), dtype=np.int64)  # a tuple of each key
            first[codes] = np.arange(n, dtype=np.int64)
            raw = raw_column(program.schema, tuples, key_field)[first]
            slots = table_slots(raw, program.schema.field(key_field).type.bits, params)
        a = admit(codes, params, slots)
        admitted, fresh = a.admitted, a.fresh
    # admitted tuples grouped by partition, in stream order within each; runs between restarts
    idx = np.flatnonzero(admitted)
    order = idx[np.argsort(codes[idx], kind="stable")]
    heads = np.flatnonzero(fresh[order])
    seg_lens = np.diff(np.append(heads, len(order)))
    all_seq, all_q = [], []
    engines = {}
    for q in nfa.queries:
        used = sorted({nfa.states[i].predicate for i in q.states} - {None})
        rows = np.zeros((len(order), len(nfa.predicates)), dtype=bool)
        if used:
            rows[:, used] = preds[order][:, used]
        distinct, sym = _symbols(rows)
        masks = dfa_mod.true_masks(nfa, q, distinct)
        chosen = engine
        d = None
        if engine in ("auto", "dfa"):
            try:
                d = dfa_mod.build(nfa, q, masks, max_states=_MAX_DFA_STATES)
                chosen = "dfa"
            except dfa_mod.TooLarge:
                if engine == "dfa":
                    raise
                chosen = "nfa"
        if chosen == "dfa":
            match = _run_dfa(d, sym, heads, seg_lens)
        else:
            match = _run_nfa(nfa, q, masks, sym, heads, seg_lens)
        engines[q.name] = chosen
        seqs = order[match]
        all_seq.append(seqs)
        all_q.append(np.full(len(seqs), q.index, dtype=np.int64))
    seqs = np.concatenate(all_seq) if all_seq else np.zeros(0, dtype=np.int64)
    qs = np.concatenate(all_q) if all_q else np.zeros(0, dtype=np.int64)
    names = tuple(q.name for q in nfa.queries)
    rank = np.argsort(np.argsort(np.array(names, dtype=object)))  # query name order
    sort = np.lexsort((rank[qs] if len(qs) else qs, seqs))
    seqs, qs = seqs[sort], qs[sort]
    if key_field is None:
        parts: list[str | None] = [None] * len(seqs)
    else:
        ty = program.schema.field(key_field).type
        texts = [format_value(v, ty) for v in key_values]
        parts = [texts[c] for c in codes[seqs].tolist()]
    return ReferenceResult(n=n, names=names, seqs=seqs, queries=qs, partitions=parts,
                           drops=np.flatnonzero(~admitted), params=params, engines=engines)
