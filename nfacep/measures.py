"""The values of ``MEASURES``, computed on the host from the input: one place for every back-end.

An engine reports where each match ends (its ``seq``) and, for the queries whose measures need
it (FIRST, COUNT(*)), where it begins (:attr:`nfacep.result.Result.starts`). The match file's
writer (:class:`nfacep.result.MatchRows`) gives each piece of the stream and its result to a
:class:`Measurer`, which reads the values there:

- ``FIRST(field)`` / ``LAST(field)``: the field at the first / last tuple, written as a tuple
  file writes it (``FIRST(seq)`` / ``LAST(seq)``: the position itself);
- ``COUNT(*)``: the tuples of the match's partition from its first tuple to its last, both
  included (the difference of the two tuples' ordinals within the partition, plus one);
- ``MATCH_NUMBER()``: the match's number among its query's reported matches in its partition,
  from 1 (a partition that capacity or timers evict keeps counting when it comes back).

Streaming: the measurer keeps a counter per partition and per query and partition, and of the
tuples already passed only those where a match still in progress may begin (the matcher's
:attr:`~nfacep.result.Result.live` starts after each piece, at most one per NFA state and
partition): never the whole input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .io.tuples import Tuples, format_values
from .schema import Measure, Program

__all__ = ["Measurer", "columns"]


def columns(program: Program) -> list[Measure]:
    """The match file's measure columns: every query's measures in file order, one column per
    name (as SQL compares names), spelled as first written; a query without a column leaves
    it empty."""
    out: dict[str, Measure] = {}
    for q in program.queries:
        for m in q.measures:
            out.setdefault(m.key, m)
    return list(out.values())


@dataclass
class _Carry:
    """Tuples already passed where a match may yet begin: positions, ordinals in their
    partition, and the fields FIRST reads."""

    pos: np.ndarray
    ords: np.ndarray
    values: dict[str, np.ndarray]


class Measurer:
    """The measure columns of a stream's matches, fed its pieces and their results in order
    (:meth:`cells`)."""

    def __init__(self, program: Program):
        self.program = program
        self.columns = columns(program)
        where = {m.key: c for c, m in enumerate(self.columns)}
        #: per query (file order): (its column, the measure)
        self.items = [[(where[m.key], m) for m in q.measures] for q in program.queries]
        self.firsts = sorted(
            {m.field for q in program.queries for m in q.measures if m.kind == "first" and m.field}
        )
        self.counts = any(m.kind == "count" for q in program.queries for m in q.measures)
        self._key_bits = program.key.width
        self.n = 0  #: tuples fed so far
        self._sizes: dict = {}  # partition value -> its tuples so far
        self._numbers: dict = {}  # (query, partition value) -> its matches so far
        self._carry: _Carry | None = None

    def cells(self, result, tuples: Tuples, seq: np.ndarray | None = None) -> list[list[str]]:
        """The text of each measure column for each match of ``result``, the matches of the
        next ``tuples`` of the stream (``result.seqs`` are stream positions). ``seq``, when the
        stream is a part of a larger one (a shard of whole partitions): the larger stream's seq
        of each position so far, which ``FIRST(seq)`` and ``LAST(seq)`` then show."""
        offset, n = self.n, tuples.n
        self.n += n
        keys = self._keys(tuples)
        ords = self._ordinals(keys, offset, n) if self.counts else None
        pos, all_ords, values = self._known(tuples, offset, ords)
        out = [[""] * len(result.seqs) for _ in self.columns]
        seqs = result.seqs - offset
        for q, items in enumerate(self.items):
            rows = np.flatnonzero(result.queries == q)
            if not items or not len(rows):
                continue
            end = seqs[rows]
            began = None if result.starts is None else result.starts[rows]
            start = None  # rows of the known tuples, where FIRST(field) and COUNT(*) read
            if any(m.kind == "count" or (m.kind == "first" and m.field) for _, m in items):
                assert began is not None, "a query that needs starts reports them"
                start = self._find(pos, began)
            # each match is numbered once, however many MATCH_NUMBER() columns show it
            number = self._number(q, keys, end) if any(m.kind == "number" for _, m in items) else []
            for c, m in items:
                if m.kind == "number":
                    text = number
                else:
                    text = self._column(m, tuples, end, start, began, all_ords, ords, values, seq)
                cells = out[c]
                for r, t in zip(rows.tolist(), text, strict=True):
                    cells[r] = t
        self._keep(pos, all_ords, values, result.live)
        return out

    def _column(self, m: Measure, tuples, end, start, began, all_ords, ords, values, seq):
        """The text of measure ``m`` for the matches ending at ``end`` (rows
        of ``tuples``) and beginning at ``began`` (stream positions; ``start``: rows of the
        known tuples); ``positions`` as :meth:`cells` takes them."""
        if m.kind == "count":
            return (ords[end] - all_ords[start] + 1).astype(str).tolist()
        if m.field is None:  # FIRST(seq), LAST(seq): the position (its seq in the whole)
            at = began if m.kind == "first" else end + self.n - tuples.n
            return (at if seq is None else np.asarray(seq[at])).astype(str).tolist()
        column = values[m.field][start] if m.kind == "first" else tuples.columns[m.field][end]
        ty = self.program.schema.field(m.field).type
        return format_values(column, ty)

    def _keys(self, tuples: Tuples) -> np.ndarray | None:
        """Each tuple's partition value (None without PARTITION); a key of several fields as
        its raw concatenation (:func:`nfacep.wire.key_raw`)."""
        fields = self.program.partition_fields
        if len(fields) <= 1:
            return tuples.columns[fields[0]] if fields else None
        from .wire import key_raw

        return key_raw(self.program.key, tuples)

    def _ordinals(self, keys: np.ndarray | None, offset: int, n: int) -> np.ndarray:
        """Each tuple's ordinal in its partition (0 for its first), counting on from the
        pieces before."""
        if keys is None:
            return offset + np.arange(n, dtype=np.int64)
        # one stable sort: each key's tuples together, in stream order (numpy sorts 16-bit
        # integers by radix, in linear time)
        if keys.dtype.kind in "iub" and self._key_bits <= 16:
            keys = keys.astype(np.int16 if keys.dtype.kind == "i" else np.uint16)
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        head = np.ones(n, dtype=bool)
        head[1:] = ordered[1:] != ordered[:-1]
        group = np.cumsum(head) - 1
        heads = np.flatnonzero(head)
        values = ordered[heads].tolist()
        sizes = np.diff(np.append(heads, n)).tolist()
        before = np.array([self._sizes.get(v, 0) for v in values], dtype=np.int64)
        ords = np.empty(n, dtype=np.int64)
        ords[order] = np.arange(n) - heads[group] + before[group]
        for v, size, b in zip(values, sizes, before.tolist(), strict=True):
            self._sizes[v] = b + size
        return ords

    def _number(self, q: int, keys: np.ndarray | None, end: np.ndarray) -> list[str]:
        """MATCH_NUMBER() of query ``q``'s matches at ``end``, in stream order."""
        out = []
        parts = [None] * len(end) if keys is None else keys[end].tolist()
        for p in parts:
            k = (q, p)
            self._numbers[k] = number = self._numbers.get(k, 0) + 1
            out.append(str(number))
        return out

    def _known(self, tuples: Tuples, offset: int, ords: np.ndarray | None):
        """The positions, ordinals and FIRST fields of the carried tuples and this piece's."""
        pos = offset + np.arange(tuples.n, dtype=np.int64)
        all_ords = ords if ords is not None else np.zeros(0, dtype=np.int64)
        values = {f: tuples.columns[f] for f in self.firsts}
        c = self._carry
        if c is not None:
            pos = np.concatenate([c.pos, pos])
            if ords is not None:
                all_ords = np.concatenate([c.ords, ords])
            values = {f: np.concatenate([c.values[f], v]) for f, v in values.items()}
        return pos, all_ords, values

    @staticmethod
    def _find(pos: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Where each start is among the known tuples' positions."""
        at = np.minimum(np.searchsorted(pos, starts), max(len(pos) - 1, 0))
        bad = pos[at] != starts if len(pos) else np.ones(len(starts), dtype=bool)
        if bool(bad.any()):
            raise RuntimeError(
                f"a match begins at tuple {int(starts[np.flatnonzero(bad)[0]])}, which the "
                "measures no longer hold (the engine did not say that a match could still "
                "begin there)"
            )
        return at

    def _keep(self, pos, all_ords, values, live: np.ndarray | None) -> None:
        """Carry to the next piece only the tuples where a match may still begin."""
        if live is None or not len(live) or not (self.firsts or self.counts):
            self._carry = None
            return
        at = np.searchsorted(pos, live)  # both sorted: where each live start is, if known
        known = at < len(pos)
        at = at[known]
        keep = at[pos[at] == live[known]]
        self._carry = _Carry(
            pos[keep],
            all_ords[keep] if len(all_ords) else all_ords,
            {f: v[keep] for f, v in values.items()},
        )
