"""The predicate decoder of the reference matcher: each tuple's predicate vector, evaluated
column-wise (:class:`Decoder`, :func:`predicate_matrix`), and a query's input symbols, the
distinct vectors that occur (:func:`symbols`), over which its DFA is built."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, MutableMapping
from typing import cast

import numpy as np

from ..io.tuples import Tuples
from ..lang.evaluate import evaluate
from ..lang.predicates import FieldRef, Prev, nodes
from ..lang.types import BoolType, EnumType, UIntType
from ..nfa import Nfa, QueryNfa
from ..settings import ParamValues

__all__ = ["Decoder", "predicate_matrix", "symbols"]


class Decoder:
    """The predicate decoder over a batch of tuples: ``decoder[p]`` says whether each tuple
    satisfies predicate ``p`` (by index), evaluated column-wise once, when first asked for."""

    def __init__(
        self, nfa: Nfa, tuples: Tuples, values: ParamValues | None = None, offset: int = 0
    ):
        self.nfa, self.tuples = nfa, tuples
        #: the runtime parameters' values (one, or one per tuple), beside the fields; the
        #: tuples are the stream's from position ``offset`` on
        self.params = values.columns(tuples.n, offset) if values else {}
        # (a view over the tuples' columns, not a copy: a piece read from CSV makes a column
        # only when it is first read; ChainMap writes only to its first map, so the others
        # are never changed)
        self.columns: Mapping[str, np.ndarray] = ChainMap(
            self.params, cast(MutableMapping[str, np.ndarray], tuples.columns)
        )
        self._done: dict[int, np.ndarray] = {}

    def add(self, columns: dict[str, np.ndarray]) -> None:
        """Columns the predicates read beside the fields and parameters (PREV's)."""
        self.columns = ChainMap(columns, cast(MutableMapping[str, np.ndarray], self.columns))

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
    decoder = Decoder(nfa, tuples, values)
    for p in range(len(nfa.predicates)):
        out[:, p] = decoder[p]
    return out


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
    nfa: Nfa, q: QueryNfa, tuples: Tuples, admitted: np.ndarray, decoder: Decoder | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The query's input symbols: ``(vectors, packed, lut)``. ``vectors`` are the distinct
    predicate vectors of the admitted tuples, restricted to the query's predicates, as rows
    over all of ``nfa.predicates``; tuple ``i``'s symbol is ``lut[packed[i]]``, the index of
    its row (meaningless for a tuple not admitted).

    When the predicates read one field of few values, ``packed`` is that field's column and
    the predicates are evaluated on the values that occur only. Otherwise each tuple's
    predicate vector is packed into an integer (up to ``_PACKED_PREDICATES`` predicates), or
    numbered by sorting the vectors."""
    decoder = decoder or Decoder(nfa, tuples)
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
