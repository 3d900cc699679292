"""The reference matcher: an exact software model of what the engine reports.

What it reports is defined in docs/language.md, 'What a match is' and 'Partitions, capacity
and timers'. Every output of the gateware is checked against this model. It computes, for a
batch of tuples:

1. the predicate vector of every tuple, column-wise (:func:`nfacep.lang.evaluate.evaluate`), or,
   for a query whose predicates read one field of few values, of each value that occurs
   (:func:`symbols`);
2. which tuples the partitioner drops and where a partition restarts from the null state
   vector (:mod:`nfacep.reference.capacity`), from the keys alone;
3. per query, the NFA run over each partition's run of tuples. The run uses the query's DFA
   (subset construction over the predicate vectors that occur) when it is small, else a
   bit-parallel simulation of the NFA. Either runs in a compiled loop over the stream in
   stream order, one state per partition (:mod:`nfacep.reference.compiled`, with numba), or in array
   operations that step all partitions at once, one tuple of each per operation, over the
   tuples grouped by partition (very long runs split into chunks whose start states are
   resolved by composing each chunk's state map). Both give the same result.

   A query with WITHIN or start_seq always runs the NFA: a DFA over predicate symbols cannot
   hold starts. Each active state also holds the latest start (the position of the tuple the
   latest of its runs began at); a start loads the tuple's position, a step takes the latest
   over the active predecessors. A match reports the latest start among its accepting
   states (start_seq). Under WITHIN a state whose start is the window or more before the
   tuple (in ORDER BY values, which never decrease) is inactive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..io.tuples import Tuples, format_value
from ..lang.evaluate import evaluate
from ..lang.predicates import FieldRef, Prev, nodes
from ..lang.types import BoolType, EnumType, UIntType
from ..nfa import Nfa, QueryNfa
from ..params import EngineParams
from ..result import Result
from ..schema import PartitionText
from ..settings import ParamValues
from ..wire import key_raw, key_text
from . import dfa as dfa_mod
from .capacity import Slots, admit, carry, table_slots
from .history import History
from .loops import loops

__all__ = [
    "KeyCodes",
    "Matcher",
    "Reference",
    "ReferenceResult",
    "factorise",
    "predicate_matrix",
    "run",
    "run_switched",
    "symbols",
    "timestamps",
]

_MAX_DFA_STATES = 1 << 14

#: From how many tuples each automaton runs in the compiled loop by default (below, in array
#: operations). Loading the compiled loops (importing numba, reading its cache) takes about
#: 0.4 s: the DFA's loop, about twice as fast as its array operations, wins that back only on
#: several million tuples; the NFA's, a hundred times as fast, on some tens of thousands. Under
#: WITHIN or start_seq the array operations also carry starts (about 20 µs a tuple on one
#: partition, three times the plain NFA's): the loop wins from some ten thousand.
_COMPILED_FROM = {"dfa": 4_000_000, "nfa": 40_000, "tracked": 10_000}


def _loops():
    """:mod:`nfacep.reference.compiled`, or None without numba (imported on first use: it loads
    numba)."""
    return loops()


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

    def run(
        self, nfa: Nfa, tuples: Tuples, params: EngineParams, values: ParamValues | None = None
    ) -> ReferenceResult:
        return run(nfa, tuples, params, engine=self.engine, values=values)

    def pieces(self, nfa: Nfa, params: EngineParams, values: ParamValues | None = None) -> Matcher:
        """A :class:`Matcher`: the stream in pieces (:class:`nfacep.backend.Pieces`)."""
        return Matcher(nfa, params, engine=self.engine, values=values)


class _Decoder:
    """The predicate decoder over a batch of tuples: ``decoder[p]`` says whether each tuple
    satisfies predicate ``p`` (by index), evaluated column-wise once, when first asked for."""

    def __init__(
        self, nfa: Nfa, tuples: Tuples, values: ParamValues | None = None, offset: int = 0
    ):
        self.nfa, self.tuples = nfa, tuples
        #: the runtime parameters' values (one, or one per tuple), beside the fields; the
        #: tuples are the stream's from position ``offset`` on
        self.params = values.columns(tuples.n, offset) if values else {}
        self.columns = {**tuples.columns, **self.params} if values else tuples.columns
        self._done: dict[int, np.ndarray] = {}

    def add(self, columns: dict[str, np.ndarray]) -> None:
        """Columns the predicates read beside the fields and parameters (PREV's)."""
        self.columns = {**self.columns, **columns}

    def __getitem__(self, p: int) -> np.ndarray:
        if p not in self._done:
            self._done[p] = evaluate(self.nfa.predicates[p].expr, self.columns, self.tuples.n)
        return self._done[p]


def predicate_matrix(nfa: Nfa, tuples: Tuples, values: ParamValues | None = None) -> np.ndarray:
    """Bool matrix (tuples × predicates): the predicate decoder's output for every tuple
    (without PREV, which needs the partitions: :class:`Matcher` evaluates those)."""
    if nfa.history:
        raise ValueError("PREV reads earlier tuples of the partition: match with Matcher")
    out = np.zeros((tuples.n, len(nfa.predicates)), dtype=bool)
    decoder = _Decoder(nfa, tuples, values)
    for p in range(len(nfa.predicates)):
        out[:, p] = decoder[p]
    return out


def factorise(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(column, return_inverse=True)``: the distinct values, ascending, and each
    value's index among them (its code). Codes are uint16 when there are at most 65,536 values
    (so that sorting them is a radix sort), else int64. Integers whose range is not much wider
    than the column index a table directly instead of being sorted."""
    n, dtype = len(column), column.dtype
    if dtype.kind == "b":
        column = column.view(np.uint8)
    if n and column.dtype.kind in "iu":
        lo, hi = column.min(), column.max()
        span = int(hi) - int(lo) + 1
        if span <= max(1 << 16, 2 * n):
            offset = column if lo == 0 else column - lo
            if offset.dtype == np.uint64:  # below span: the same as int64, an index as it is
                offset = offset.view(np.int64)
            present = np.zeros(span, dtype=bool)
            present[offset] = True
            values = np.flatnonzero(present)
            number = np.cumsum(present, dtype=np.int64) - 1
            return (
                (values.astype(column.dtype) + lo).astype(dtype),
                number.astype(_code_dtype(len(values)))[offset],
            )
    values, codes = np.unique(column, return_inverse=True)
    return values, codes.ravel().astype(_code_dtype(len(values)), copy=False)


def _code_dtype(n_keys: int) -> type:
    return np.uint16 if n_keys <= 1 << 16 else np.int64


#: Queries with at most this many predicates number their predicate vectors by packing them
#: into an integer; more are numbered by sorting the vectors (np.unique).
_PACKED_PREDICATES = 16


def _narrow_field(nfa: Nfa, used: list[int]) -> str | None:
    """The one field that all the predicates ``used`` read, when its values are few: an ENUM,
    a BOOL or a UINT of at most 16 bits (else None)."""
    read = [node for p in used for node in nodes(nfa.predicates[p].expr)]
    if any(isinstance(node, Prev) for node in read):
        return None  # (the predicates read earlier tuples too)
    fields = {node.name: node.type for node in read if isinstance(node, FieldRef)}
    if len(fields) != 1:
        return None
    [(name, ty)] = fields.items()
    if isinstance(ty, EnumType | BoolType) or (isinstance(ty, UIntType) and ty.width <= 16):
        return name
    return None


def symbols(
    nfa: Nfa, q: QueryNfa, tuples: Tuples, admitted: np.ndarray, decoder: _Decoder | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The query's input symbols: ``(vectors, packed, lut)``. ``vectors`` are the distinct
    predicate vectors of the admitted tuples, restricted to the query's predicates, as rows
    over all of ``nfa.predicates``; tuple ``i``'s symbol is ``lut[packed[i]]``, the index of
    its row (meaningless for a tuple not admitted).

    When the predicates read one field of few values, ``packed`` is that field's column and
    the predicates are evaluated on the values that occur only. Otherwise each tuple's
    predicate vector is packed into an integer (up to ``_PACKED_PREDICATES`` predicates), or
    numbered by sorting the vectors."""
    decoder = decoder or _Decoder(nfa, tuples)
    used = nfa.predicates_of(q)
    n = len(admitted)
    everyone = bool(admitted.all())
    field = _narrow_field(nfa, used)
    if field is not None and any(v.ndim for v in decoder.params.values()):
        field = None  # a parameter that changes: a value's predicates depend on the tuple
    if field is not None:
        column = tuples.columns[field]
        packed = column.view(np.uint8) if column.dtype.kind == "b" else column
        seen = np.bincount((packed if everyone else packed[admitted]).astype(np.intp, copy=False))
        values = np.flatnonzero(seen)
        sample = {field: values.astype(column.dtype), **decoder.params}
        rows = np.stack(
            [evaluate(nfa.predicates[p].expr, sample, len(values)) for p in used], axis=1
        )
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        lut = np.zeros(len(seen), dtype=np.int32)
        lut[values] = inverse.ravel()
        vectors = np.zeros((len(distinct), len(nfa.predicates)), dtype=bool)
        vectors[:, used] = distinct
        return vectors, packed, lut
    if len(used) <= _PACKED_PREDICATES:
        dtype = np.uint8 if len(used) <= 8 else np.uint16
        packed = np.zeros(n, dtype=dtype)
        for b, p in enumerate(used):
            packed |= np.left_shift(decoder[p].view(np.uint8), b, dtype=dtype)
        seen = np.bincount(packed if everyone else packed[admitted], minlength=1 << len(used))
        values = np.flatnonzero(seen)
        lut = np.zeros(1 << len(used), dtype=np.int32)
        lut[values] = np.arange(len(values), dtype=np.int32)
        vectors = np.zeros((len(values), len(nfa.predicates)), dtype=bool)
        vectors[:, used] = (values[:, None] >> np.arange(len(used))) & 1
        return vectors, packed, lut
    rows = np.stack([decoder[p] for p in used], axis=1)
    if not everyone:
        rows = rows[admitted]
    bits = np.ascontiguousarray(np.packbits(rows, axis=1))
    key = bits.view(np.dtype((np.void, bits.shape[1]))).ravel()
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    vectors = np.zeros((len(first), len(nfa.predicates)), dtype=bool)
    vectors[:, used] = rows[first]
    packed = np.zeros(n, dtype=np.int64)
    packed[admitted] = inverse.ravel()
    return vectors, packed, np.arange(len(first), dtype=np.int32)


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
        _dfa_rounds(
            flat_t,
            flat_a,
            n_sym,
            sym,
            seg_starts,
            seg_lens,
            np.zeros(len(seg_starts), dtype=np.int64),
            match,
        )
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


def _run_nfa(
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


def run_switched(
    old: Nfa,
    new: Nfa,
    tuples: Tuples,
    at: int,
    params: EngineParams = EngineParams(),
    *,
    values: tuple[ParamValues | None, ParamValues | None] = (None, None),
) -> tuple[ReferenceResult, ReferenceResult]:
    """The reference run of a switch at tuple ``at`` (docs/language.md, "Switching
    queries"): ``old``'s queries on the tuples before ``at``, then ``new``'s, from cleared
    states, on the rest, one partition store throughout (:meth:`Matcher.switch`). Returns
    the two results, each with stream positions; ``values``: each file's runtime
    parameters."""
    if not 0 <= at <= tuples.n:
        raise ValueError(f"a switch at tuple {at} of {tuples.n}")
    matcher = Matcher(old, params, values=values[0], compiled=_loops() is not None)
    before = matcher.feed(_rows(tuples, 0, at))
    matcher.switch(new, values[1])
    return before, matcher.feed(_rows(tuples, at, tuples.n), last=True)


def _rows(tuples: Tuples, start: int, end: int) -> Tuples:
    columns = {name: column[start:end] for name, column in tuples.columns.items()}
    return Tuples(columns, end - start, tuples.source, offset=tuples.offset + start)


def run(
    nfa: Nfa,
    tuples: Tuples,
    params: EngineParams = EngineParams(),
    *,
    engine: str = "auto",
    compiled: bool | None = None,
    values: ParamValues | None = None,
) -> ReferenceResult:
    """Match every query of ``nfa`` over ``tuples`` as the engine with ``params`` would.

    ``values``: the runtime parameters' values over the stream (required when the queries
    have parameters); tuple ``seq`` is judged with the values in force at it.

    ``engine`` ("auto", "dfa", "nfa") picks the automaton; ``compiled`` whether it runs in the
    compiled stream-order loops of :mod:`nfacep.reference.compiled` or in lock-step array operations
    over the tuples grouped by partition (None: compiled when numba is installed and the
    stream has at least ``_COMPILED_FROM`` tuples for the automaton). All give equal
    results. A stream too long to hold at once goes through a :class:`Matcher` in pieces.
    """
    return Matcher(nfa, params, engine=engine, compiled=compiled, values=values).feed(
        tuples, last=True
    )


class KeyCodes:
    """The partition keys met so far, each numbered by its first appearance: ``values[c]`` is
    the key with code ``c``. A first piece is numbered in ascending order of its keys (as
    :func:`factorise` numbers them); the keys new in a later piece follow, in ascending order
    among themselves.

    Integer keys whose range stays narrow (as :func:`factorise` judges it) are looked up in a
    table indexed by the key, one pass a piece; others by a sorted index of the keys."""

    def __init__(self):
        self.values: np.ndarray | None = None
        self._sorted: np.ndarray | None = None  # the keys in ascending order
        self._codes: np.ndarray | None = None  # the code of each of them
        self._table: np.ndarray | None = None  # the code of key lo + i (-1: none), or None
        self._lo = 0
        self._direct = True  # (False once a piece's keys were too wide for a table)

    def __len__(self) -> int:
        return 0 if self.values is None else len(self.values)

    def codes(self, column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The code of each key of ``column``, and the keys it brings that were not met
        before (their codes follow the earlier ones')."""
        if column.dtype.kind == "b":
            column = column.view(np.uint8)
        if self._direct and len(column) and column.dtype.kind in "iu":
            got = self._by_table(column)
            if got is not None:
                return got
        self._direct = False
        self._table = None
        local, inverse = factorise(column)
        code, new = self._number(local)
        return code.astype(_code_dtype(len(self)))[inverse], new

    def _number(self, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The codes of the distinct keys ``local`` (ascending), numbering the new ones; and
        those new keys."""
        if self.values is None:
            self.values, self._sorted = local, local
            self._codes = np.arange(len(local), dtype=np.int64)
            return self._codes, local
        assert self._sorted is not None and self._codes is not None, "set with values"
        at = np.searchsorted(self._sorted, local)
        found = at < len(self._sorted)
        found[found] = self._sorted[at[found]] == local[found]
        new = local[~found]
        code = np.empty(len(local), dtype=np.int64)
        code[found] = self._codes[at[found]]
        code[~found] = len(self.values) + np.arange(len(new))
        if len(new):
            self.values = np.concatenate([self.values, new])
            merged = np.concatenate([self._sorted, new])
            order = np.argsort(merged, kind="stable")
            self._sorted = merged[order]
            self._codes = np.concatenate([self._codes, code[~found]])[order]
        return code, new

    def _by_table(self, column: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`codes` by the table; None when the keys' range is too wide for one."""
        lo, hi = int(column.min()), int(column.max())
        if self._table is not None:
            lo, hi = min(lo, self._lo), max(hi, self._lo + len(self._table) - 1)
        span = hi - lo + 1
        if span > max(1 << 16, 2 * (len(column) + len(self))):
            return None
        if self._table is None or lo != self._lo or span != len(self._table):
            if self.values is not None and self._table is None:
                return None  # (numbered by the index before: it stays so)
            table = np.full(span, -1, dtype=np.int64)
            base = column.dtype.type(lo)
            if self.values is not None:  # (the difference first: a uint64 key may be huge)
                table[(self.values - base).astype(np.int64)] = np.arange(len(self.values))
            self._table, self._lo = table, lo
        base = column.dtype.type(lo)
        compiled = loops(len(column))
        if compiled is not None:
            code = np.empty(len(column), dtype=np.int64)
            unseen = np.sort(compiled.table_codes(column, base, self._table, code))
        else:
            code = self._table[column - base]
            present = np.zeros(len(self._table), dtype=bool)
            present[(column[code < 0] - base).astype(np.int64)] = True
            unseen = np.flatnonzero(present)
        new = column[:0]
        if len(unseen):
            _, new = self._number(unseen.astype(column.dtype) + base)
            self._table[unseen] = len(self) - len(new) + np.arange(len(new))
            if compiled is not None:
                compiled.fill_codes(column, base, self._table, code)
            else:
                missing = code < 0
                code[missing] = self._table[column[missing] - base]
        return code.astype(_code_dtype(len(self)), copy=False), new


def _words_state(q: QueryNfa, state: np.ndarray | None) -> np.ndarray:
    """The NFA's state array (active states as 64-bit words per key code), empty at first."""
    return np.zeros((0, (q.count + 63) // 64), dtype=np.uint64) if state is None else state


def _grown(array: np.ndarray, rows: int) -> np.ndarray:
    """``array`` with at least ``rows`` rows, the new ones zero (room for twice as many, so
    that keys arriving piece by piece copy it a few times only)."""
    if len(array) >= rows:
        return array
    out = np.zeros((max(rows, 2 * len(array)), *array.shape[1:]), dtype=array.dtype)
    out[: len(array)] = array
    return out


@dataclass
class _QueryState:
    """Where each partition of one query stands between pieces of the stream (compiled
    loops): the DFA state (``dfa`` is the DFA it numbers) or the NFA's active states as
    64-bit words, and with WITHIN or start_seq each state's latest start and its ORDER BY
    value."""

    engine: str = ""
    dfa: dfa_mod.Dfa | None = None
    state: np.ndarray | None = None
    began: np.ndarray | None = None
    began_ts: np.ndarray | None = None


@dataclass
class _Piece:
    """What :meth:`Matcher.feed` knows of a piece while it matches each query in it."""

    tuples: Tuples
    decoder: _Decoder
    codes: np.ndarray  #: each tuple's partition code
    admitted: np.ndarray  #: whether the partitioner admits the tuple
    fresh: np.ndarray  #: whether the tuple starts its partition afresh
    offset: int  #: the stream position of the piece's first tuple
    last: bool  #: no piece follows
    n_keys: int  #: partitions seen so far (at least 1)
    grouped: tuple | None = None  #: the partitions' order, made once for the array operations


def _in_order(
    names: tuple[str, ...], all_seq: list, all_q: list, all_first: list
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The queries' matches together: by stream position, then query name."""
    seqs = np.concatenate(all_seq) if all_seq else np.zeros(0, dtype=np.int64)
    qs = np.concatenate(all_q) if all_q else np.zeros(0, dtype=np.int64)
    firsts = np.concatenate(all_first) if all_first else np.zeros(0, dtype=np.int64)
    if len(names) > 1:
        rank = np.argsort(np.argsort(np.array(names, dtype=object)))  # query name order
        sort = np.lexsort((rank[qs], seqs))
        seqs, qs, firsts = seqs[sort], qs[sort], firsts[sort]
    return seqs, qs, firsts


class Matcher:
    """The reference matcher over a stream that comes in pieces: :meth:`feed` each piece in
    stream order and get its matches and drops, as :func:`run` over the whole stream reports
    them. Between pieces it keeps only what the engine keeps: the partition store (the last
    admitted tuple of each key) and each partition's automaton state, so a stream of any
    length runs in memory bounded by its pieces and its keys.

    A piece after the first runs in the compiled loops (:mod:`nfacep.reference.compiled`), which
    carry the states over; the array operations, which match a stream grouped by partition, take
    the whole stream as one piece only.
    """

    def __init__(
        self,
        nfa: Nfa,
        params: EngineParams = EngineParams(),
        *,
        engine: str = "auto",
        compiled: bool | None = None,
        values: ParamValues | None = None,
    ):
        if engine not in ("auto", "dfa", "nfa"):
            raise ValueError(f"engine {engine!r}: choose auto, dfa or nfa")
        if compiled and _loops() is None:
            raise RuntimeError("the compiled reference matcher needs numba")
        program = nfa.program
        if program.parameters and not values:
            values = ParamValues.parse(program.parameters, [])  # raises, naming the missing
        self.nfa, self.params, self.engine, self.compiled = nfa, params, engine, compiled
        self.values = values
        self.n = 0  #: tuples fed so far
        self.keys = KeyCodes()
        self._slots: Slots | None = None  # the table's bucket of each code
        self._last = np.zeros(0, dtype=np.int64)  # per code: its last admitted position
        self._texts = np.empty(0, dtype=object)  # per code: its key as text, once matched
        self._queries = [_QueryState() for _ in nfa.queries]
        self._history = History(nfa.history) if nfa.history else None
        self._whole = False  # a piece ran in the array operations: no other may follow
        self._ended = False  # the last piece came

    def feed(self, tuples: Tuples, *, last: bool = False) -> ReferenceResult:
        """Match the next piece of the stream; ``last``: no piece follows (a lone piece may
        then run in the array operations). The result's ``n`` is the piece's tuples; its
        ``seqs``, ``drops`` and starts are stream positions."""
        nfa = self.nfa
        if self._whole:
            raise ValueError("the array operations matched the whole stream in one piece")
        if self._ended:
            raise ValueError("a piece came after the last one")
        self._ended = last
        offset, n = self.n, tuples.n
        decoder = _Decoder(nfa, tuples, self.values, offset)
        codes, admitted, fresh = self._admit(tuples, offset, last)
        n_keys = max(len(self.keys), 1)
        if self._history is not None:
            decoder.add(self._history.columns(tuples.columns, codes, admitted, fresh, n_keys))
        piece = _Piece(tuples, decoder, codes, admitted, fresh, offset, last, n_keys)
        all_seq, all_q, all_first = [], [], []
        for q, run in zip(nfa.queries, self._queries, strict=True):
            seqs, first = self._match(q, run, piece)
            if q.start_seq:
                all_first.append(first)
            else:
                all_first.append(np.full(len(seqs), -1, dtype=np.int64))
            all_seq.append(seqs)
            all_q.append(np.full(len(seqs), q.index, dtype=np.int64))
        self.n += n
        names = tuple(q.name for q in nfa.queries)
        seqs, qs, firsts = _in_order(names, all_seq, all_q, all_first)
        engines = {q.name: r.engine for q, r in zip(nfa.queries, self._queries, strict=True)}
        starts = firsts if any(q.start_seq for q in nfa.queries) else None
        return ReferenceResult(
            n=n,
            names=names,
            seqs=seqs,
            queries=qs,
            partitions=self._partitions(codes, seqs, offset, n_keys),
            drops=offset + np.flatnonzero(~admitted),
            params=self.params,
            engines=engines,
            values=self.values or None,
            starts=starts,
            live=None if last or starts is None else self._live(),
        )

    def switch(self, nfa: Nfa, values: ParamValues | None = None) -> None:
        """From the next piece on, match the queries of ``nfa`` (with its runtime parameters'
        ``values``) instead: a programmable engine's switch to another image
        (docs/language.md, "Switching queries"). Every partition's automaton starts again
        from the null state; the partition store (which keys hold an entry, their timers,
        the drops) goes on as if nothing happened. ``nfa`` must have the same stream
        declaration and partition key; neither file may read PREV (which the switch would
        have to carry or clear: the programmable engine has none)."""
        old = self.nfa.program
        new = nfa.program
        if old.schema != new.schema or old.partition_fields != new.partition_fields:
            raise ValueError("a switch keeps the stream declaration and the partition key")
        if self.nfa.history or nfa.history:
            raise ValueError("a switch between files that read PREV is not defined")
        if new.parameters and not values:
            values = ParamValues.parse(new.parameters, [])  # raises, naming the missing
        self.nfa, self.values = nfa, values
        self._queries = [_QueryState() for _ in nfa.queries]

    def _live(self) -> np.ndarray:
        """Where the runs still in progress begin: each active state's latest start, of the
        queries that report starts (stream positions, sorted, distinct)."""
        out = [np.zeros(0, dtype=np.int64)]
        for q, run in zip(self.nfa.queries, self._queries, strict=True):
            if q.start_seq and run.began is not None and run.state is not None:
                bits = np.unpackbits(
                    np.ascontiguousarray(run.state).view(np.uint8), axis=1, bitorder="little"
                )
                active = bits[:, : q.count].astype(bool)
                out.append(run.began[: len(active)][active])
        return np.unique(np.concatenate(out))

    def _admit(
        self, tuples: Tuples, offset: int, last: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each tuple's partition code, whether the partitioner admits it and whether it
        starts its partition afresh, with the key store carried over to the next piece."""
        params, program = self.params, self.nfa.program
        n = tuples.n
        key = program.key
        if not key.names:
            codes = np.zeros(n, dtype=np.uint16)
            admitted = np.ones(n, dtype=bool)
            fresh = np.zeros(n, dtype=bool)
            fresh[:1] = offset == 0
            return codes, admitted, fresh
        # one field: numbered by its values; several: by the raw key, their concatenation
        one = len(key.names) == 1
        codes, new = self.keys.codes(tuples.columns[key.names[0]] if one else key_raw(key, tuples))
        if params.tabled and len(new):
            raw = key_raw(key, Tuples({key.names[0]: new}, len(new))) if one else new
            more = table_slots(raw, key.width, params)
            if self._slots is not None:
                more = Slots(np.concatenate([self._slots.bucket, more.bucket]), more.capacity)
            self._slots = more
        self._last = np.concatenate(
            [self._last, np.full(len(self.keys) - len(self._last), -1, dtype=np.int64)]
        )
        a = admit(codes, params, self._slots, offset=offset, last=self._last)
        admitted, fresh = a.admitted, a.fresh
        if not last:  # the store as this piece leaves it, for the next
            carry(self._last, a, offset)
        return codes, admitted, fresh

    def _match(
        self, q: QueryNfa, run: _QueryState, piece: _Piece
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """One query's matches in the piece (stream positions, in order) and the start of
        each (None unless tracked), in the compiled loops or, for a whole stream, in array
        operations."""
        nfa, n = self.nfa, piece.tuples.n
        vectors, packed, lut = symbols(nfa, q, piece.tuples, piece.admitted, piece.decoder)
        masks = dfa_mod.true_masks(nfa, q, vectors)
        tracked = q.window is not None or q.start_seq  # each state keeps its runs' start
        ts = None
        if q.window is not None:
            assert q.order_field is not None, "WITHIN needs ORDER BY (nfacep.lang.check)"
            ts = timestamps(piece.tuples.columns[q.order_field])
        d = self._automaton(q, run, masks, tracked)
        loops = None
        whole = piece.offset == 0 and piece.last
        if self.compiled is False and not whole:
            raise ValueError(
                "compiled=False runs the array operations, which take the whole stream as one piece"
            )
        if (
            not whole
            or self.compiled
            or (self.compiled is None and n >= _COMPILED_FROM["tracked" if tracked else run.engine])
        ):
            loops = _loops()  # None without numba: a whole stream runs in array operations
            if loops is None and not whole:
                raise RuntimeError("matching a stream in pieces needs numba")
        if loops is None:
            self._whole = True
            if piece.grouped is None:
                piece.grouped = _grouped(piece.codes, piece.admitted, piece.fresh)
            order, heads, seg_lens = piece.grouped
            sym = lut[packed[order]]
            first = None
            if d is not None:
                match = _run_dfa(d, sym, heads, seg_lens)
            else:
                match, first = _run_nfa(
                    nfa, q, masks, sym, heads, seg_lens, order if tracked else None, ts
                )
            seqs = order[match]
            sort = np.argsort(seqs, kind="stable")
            return seqs[sort], None if first is None else first[match][sort]
        stream = (lut, packed, piece.codes, piece.admitted, piece.fresh)
        first = None
        if d is not None:
            assert run.state is not None, "numbered for d by _automaton"
            run.state = _grown(run.state, piece.n_keys)
            match = loops.dfa_stream(d.table, d.accept, *stream, run.state)
        elif tracked:
            if run.began is None or run.began_ts is None:
                run.began = np.zeros((0, q.count), dtype=np.int64)
                run.began_ts = np.zeros((0, q.count), dtype=np.uint64)
            run.state = _grown(_words_state(q, run.state), piece.n_keys)
            run.began = _grown(run.began, piece.n_keys)
            run.began_ts = _grown(run.began_ts, piece.n_keys)
            match, first = loops.nfa_start_stream(
                *_nfa_words(nfa, q, masks),
                np.uint64(q.window or 0),
                np.zeros(n, dtype=np.uint64) if ts is None else ts,
                *stream,
                piece.offset,
                run.state,
                run.began,
                run.began_ts,
            )
        else:
            run.state = _grown(_words_state(q, run.state), piece.n_keys)
            match = loops.nfa_stream(*_nfa_words(nfa, q, masks), *stream, run.state)
        seqs = np.flatnonzero(match)
        if first is not None:
            first = first[seqs]
        return seqs + piece.offset, first

    def _partitions(
        self, codes: np.ndarray, seqs: np.ndarray, offset: int, n_keys: int
    ) -> list[PartitionText]:
        """The partition key's text of each match (None without a key), each key's text
        made once and kept for the pieces after."""
        key = self.nfa.program.key
        if not key.names:
            return [None] * len(seqs)
        matched = codes[seqs - offset]
        if len(self._texts) < n_keys:  # (None: not yet made)
            grown = np.empty(max(n_keys, 2 * len(self._texts)), dtype=object)
            grown[: len(self._texts)] = self._texts
            self._texts = grown
        texts = self._texts
        assert self.keys.values is not None, "numbered by _admit"
        shown = np.flatnonzero(np.bincount(matched, minlength=n_keys))
        shown = shown[texts[shown] == None]  # noqa: E711 (element-wise)
        values = self.keys.values[shown].tolist()
        if len(key.names) == 1:
            texts[shown] = [format_value(v, key.types[0]) for v in values]
        else:  # (texts[shown] = a list of tuples would make a 2-d array)
            for at, v in zip(shown.tolist(), values, strict=True):
                texts[at] = key_text(key, v)
        return texts[matched].tolist()

    def _automaton(
        self, q: QueryNfa, run: _QueryState, masks: list[int], tracked: bool
    ) -> dfa_mod.Dfa | None:
        """The query's DFA over this piece's symbols (None: it runs the NFA), and its state
        array renumbered for it. The DFA of a later piece is built from the states the
        partitions stand in, as well as from the empty one, so each has a number in it; a DFA
        grown past the limit hands its partitions over to the NFA, as bit masks."""
        if run.engine == "nfa" or tracked or self.engine == "nfa":
            run.engine = "nfa"
            return None
        old = run.dfa
        if old is None:
            used = np.zeros(0, dtype=np.int64)
        else:
            assert run.state is not None, "the state array numbered for run.dfa"
            used = np.unique(run.state)
        roots = [] if old is None else [old.sets[u] for u in used.tolist()]
        try:
            d = dfa_mod.build(self.nfa, q, masks, max_states=_MAX_DFA_STATES, roots=roots)
        except dfa_mod.TooLarge:
            if self.engine == "dfa":
                raise
            run.engine, run.dfa = "nfa", None
            if old is not None:  # each partition's DFA state as the NFA's active states
                words = (q.count + 63) // 64
                table = np.zeros((len(old.sets), words), dtype=np.uint64)
                for u in used.tolist():
                    for w in range(words):
                        table[u, w] = old.sets[u] >> (64 * w) & (2**64 - 1)
                run.state = table[run.state]
            return None
        if old is not None:
            number = {s: i for i, s in enumerate(d.sets)}
            renumber = np.zeros(len(old.sets), dtype=d.table.dtype)
            renumber[used] = [number[old.sets[u]] for u in used.tolist()]
            run.state = renumber[run.state]
        else:
            run.state = np.zeros(0, dtype=d.table.dtype)
        run.engine, run.dfa = "dfa", d
        return d


def timestamps(column: np.ndarray) -> np.ndarray:
    """An integer ORDER BY column as uint64, order and differences kept: signed values are
    offset by 2^63, so that ``later - earlier`` is the difference in uint64 arithmetic."""
    if column.dtype.kind == "i":
        return column.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
    return column.astype(np.uint64)


def _grouped(codes, admitted, fresh):
    """The admitted tuples grouped by partition, in stream order within each, and the runs
    between restarts: (tuple order, start and length of each run in that order)."""
    idx = np.flatnonzero(admitted)
    order = idx[np.argsort(codes[idx], kind="stable")]
    heads = np.flatnonzero(fresh[order])
    return order, heads, np.diff(np.append(heads, len(order)))


def _nfa_words(nfa: Nfa, q: QueryNfa, masks: list[int]):
    """The arguments of :func:`nfacep.reference.compiled.nfa_stream` before the stream's: the
    query's masks as arrays of 64-bit words, and whether a match empties the set."""
    words = (q.count + 63) // 64
    start, follow, accept = dfa_mod.local_masks(nfa, q)

    def split(masks: list[int]) -> np.ndarray:
        out = np.zeros((len(masks), words), dtype=np.uint64)
        for i, m in enumerate(masks):
            for w in range(words):
                out[i, w] = m >> (64 * w) & (2**64 - 1)
        return out

    return (
        split(follow),
        split([start])[0],
        split([accept])[0],
        split(masks).reshape(-1, words),
        q.skip_past_last_row,
    )
