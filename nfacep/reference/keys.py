"""The partition keys' codes in the reference matcher: each key numbered by its first
appearance, across the pieces of a stream (:class:`KeyCodes`), the numbering of one column
(:func:`factorise`)."""

from __future__ import annotations

import numpy as np

from .loops import loops

__all__ = ["KeyCodes", "factorise"]


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
        compiled = loops(len(column), "table_codes")
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
            if compiled is not None and loops(len(column), "fill_codes") is not None:
                compiled.fill_codes(column, base, self._table, code)
            else:
                missing = code < 0
                code[missing] = self._table[column[missing] - base]
        return code.astype(_code_dtype(len(self)), copy=False), new
