"""The reference matcher: an exact software model of what the engine reports.

What it reports is defined in docs/language.md, 'What a match is' and 'Partitions, capacity
and timers'. Every output of the gateware is checked against this model. It computes, for a
batch of tuples:

1. the predicate vector of every tuple, column-wise (:func:`nfacep.lang.evaluate.evaluate`), or,
   for a query whose predicates read one field of few values, of each value that occurs
   (:mod:`nfacep.reference.symbols`); each partition key's code (:mod:`nfacep.reference.keys`);
2. which tuples the partitioner drops and where a partition restarts from the null state
   vector (:mod:`nfacep.reference.capacity`), from the keys alone;
3. per query, the NFA run over each partition's run of tuples. The run uses the query's DFA
   (subset construction over the predicate vectors that occur) when it is small, else a
   bit-parallel simulation of the NFA. Either runs in a compiled loop over the stream in
   stream order, one state per partition (:mod:`nfacep.reference.compiled`, with numba), or in array
   operations that step all partitions at once, one tuple of each per operation, over the
   tuples grouped by partition (:mod:`nfacep.reference.lockstep`; in pieces for the DFA, each
   partition's state carried from piece to piece). Both give the same result.

   A query with WITHIN or start_seq always runs the NFA: a DFA over predicate symbols cannot
   hold starts. Each active state also holds the latest start (the position of the tuple the
   latest of its runs began at); a start loads the tuple's position, a step takes the latest
   over the active predecessors. A match reports the latest start among its accepting
   states (start_seq). Under WITHIN a state whose start is the window or more before the
   tuple (in ORDER BY values, which never decrease) is inactive.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..io.tuples import Tuples, format_value
from ..nfa import Nfa, QueryNfa
from ..params import EngineParams
from ..result import Result
from ..schema import PartitionText
from ..settings import ParamValues
from ..wire import key_raw, key_text
from . import dfa as dfa_mod
from .capacity import Slots, admit, carry, table_slots
from .history import History
from .keys import KeyCodes, factorise
from .lockstep import grouped, run_dfa, run_nfa
from .loops import loops, ready
from .symbols import Decoder, predicate_matrix, symbols

# (KeyCodes, factorise, predicate_matrix and symbols are defined in keys.py and symbols.py)
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
#: operations), unless its loop has run in this process already (:func:`loops.ready`: then
#: always). Loading the compiled loops (importing numba, setting its compiler up, reading the
#: cache) takes about 0.4 s of CPU: the DFA's loop, about five times as fast as its array
#: operations (9 against 49 ms on a million tuples), wins that back only on several million
#: tuples; the NFA's, a hundred times as fast, on some tens of thousands. Under WITHIN or
#: start_seq the array operations also carry starts (about 20 µs a tuple on one partition,
#: three times the plain NFA's): the loop wins from some ten thousand.
_COMPILED_FROM = {"dfa": 4_000_000, "nfa": 40_000, "tracked": 10_000}

#: The compiled loop each automaton runs in (:data:`_COMPILED_FROM`'s keys).
_LOOP = {"dfa": "dfa_stream", "nfa": "nfa_stream", "tracked": "nfa_start_stream"}


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
    stream has at least ``_COMPILED_FROM`` tuples for the automaton, or its loop has run in
    this process already). All give equal results. A stream too long to hold at once goes
    through a :class:`Matcher` in pieces.
    """
    return Matcher(nfa, params, engine=engine, compiled=compiled, values=values).feed(
        tuples, last=True
    )


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
    decoder: Decoder
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

    The pieces run in the compiled loops (:mod:`nfacep.reference.compiled`), which carry the
    states over, or, by default while the stream is short (``_COMPILED_FROM``) and the loops
    not loaded, in array operations over each piece grouped by partition: the DFA's carry
    each partition's state over; the NFA's take the whole stream as one piece only.
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
        decoder = Decoder(nfa, tuples, self.values, offset)
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
        each (None unless tracked), in the compiled loops or in array operations
        (:meth:`_loops_for` chooses)."""
        nfa, n = self.nfa, piece.tuples.n
        vectors, packed, lut = symbols(nfa, q, piece.tuples, piece.admitted, piece.decoder)
        masks = dfa_mod.true_masks(nfa, q, vectors)
        tracked = q.window is not None or q.start_seq  # each state keeps its runs' start
        ts = None
        if q.window is not None:
            assert q.order_field is not None, "WITHIN needs ORDER BY (nfacep.lang.check)"
            ts = timestamps(piece.tuples.columns[q.order_field])
        d = self._automaton(q, run, masks, tracked)
        loops = self._loops_for(run, piece, d is not None, tracked)
        if loops is None:
            return self._in_arrays(q, run, piece, d, (packed, lut, masks, ts), tracked)
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

    def _loops_for(self, run: _QueryState, piece: _Piece, dfa: bool, tracked: bool):
        """The compiled loops to match the piece in, or None for array operations: by default
        the loops once the stream reaches ``_COMPILED_FROM`` tuples for the automaton or its
        loop has run in this process, array operations before (a DFA's carry each
        partition's state from piece to piece; the NFA's take a whole stream only, so a
        piece of a longer stream needs the loops) and without numba."""
        whole = piece.offset == 0 and piece.last
        if self.compiled is False:
            if not whole:
                raise ValueError(
                    "compiled=False runs the array operations, "
                    "which take the whole stream as one piece"
                )
            return None
        kind = "tracked" if tracked else run.engine
        worth = piece.offset + piece.tuples.n >= _COMPILED_FROM[kind] or ready(_LOOP[kind])
        if not (self.compiled or worth or not (whole or dfa)):
            return None
        loops = _loops()  # None without numba
        if loops is None and not (whole or dfa):
            raise RuntimeError("matching a stream in pieces needs numba")
        return loops

    def _in_arrays(
        self, q: QueryNfa, run: _QueryState, piece: _Piece, d, symbols_, tracked: bool
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`_match` in array operations over the piece's tuples grouped by partition:
        the DFA ``d``'s runs each from its partition's state (``run.state``, left as the
        piece leaves it, as the compiled loop leaves it), or the NFA's over a whole stream.
        ``symbols_``: the piece's ``(packed, lut, masks, ts)``."""
        packed, lut, masks, ts = symbols_
        self._whole |= piece.offset == 0 and piece.last
        if piece.grouped is None:
            piece.grouped = grouped(piece.codes, piece.admitted, piece.fresh)
        order, heads, seg_lens = piece.grouped
        sym = lut[packed[order]]
        first = None
        if d is not None:
            assert run.state is not None, "numbered for d by _automaton"
            run.state = state = _grown(run.state, piece.n_keys)
            at = order[heads]
            codes = piece.codes[at]
            match, final = run_dfa(
                d, sym, heads, seg_lens, np.where(piece.fresh[at], 0, state[codes])
            )
            if len(codes):  # each partition's last run leaves its state
                ends = np.append(codes[1:] != codes[:-1], True)
                state[codes[ends]] = final[ends]
        else:
            match, first = run_nfa(
                self.nfa, q, masks, sym, heads, seg_lens, order if tracked else None, ts
            )
        seqs = order[match]
        sort = np.argsort(seqs, kind="stable")
        return seqs[sort] + piece.offset, None if first is None else first[match][sort]

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
