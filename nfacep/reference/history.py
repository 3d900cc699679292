"""The values ``PREV(field, k)`` reads: each partition's last values of a field, column-wise.

A partition's rows are the tuples the partitioner admitted for it while its element held it
(:mod:`nfacep.reference.capacity`): a dropped tuple is no row, and a tuple that starts its
partition afresh (its first, or the first after a tick freed the element) starts with no
history, as the gateware's entry is cleared when the element is freed. ``PREV(field, k)`` of
a row is the field of the row ``k`` before it among them; NULL (not known) where fewer than
``k`` precede it.

The stream may come in pieces: :class:`History` keeps, per partition, its last values of
each field (as many as PREV reads back) for the next piece.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..lang.predicates import known_of, prev_of

__all__ = ["History"]


class History:
    """Each partition's last values of the fields ``depth`` names (``depth[f]`` of field
    ``f``, the most tuples back PREV reads it), kept between pieces of a stream."""

    def __init__(self, depth: dict[str, int]):
        self.depth = depth
        self.most = max(depth.values(), default=0)
        #: per field, per key code: its last values, the latest first
        self._values: dict[str, np.ndarray] = {}
        #: per key code: how many of them are rows of the partition (at most ``most``)
        self._count = np.zeros(0, dtype=np.int64)

    def columns(
        self,
        columns: Mapping[str, np.ndarray],
        codes: np.ndarray,
        admitted: np.ndarray,
        fresh: np.ndarray,
        n_keys: int,
    ) -> dict[str, np.ndarray]:
        """The columns ``prev_of(f, k)`` and ``known_of(k)`` of a piece of ``len(codes)``
        tuples (fields ``columns``, key codes ``codes`` below ``n_keys``, as the partitioner
        admitted them), and the history brought up to date for the next piece."""
        n = len(codes)
        self._grow(columns, n_keys)
        idx = np.flatnonzero(admitted)
        order = idx[np.argsort(codes[idx], kind="stable")]
        m = len(order)
        code = codes[order].astype(np.int64)
        head = np.ones(m, dtype=bool)  # the first row of its partition in the piece
        head[1:] = code[1:] != code[:-1]
        restart = fresh[order]
        at = np.arange(m)
        seg_start = np.maximum.accumulate(np.where(head | restart, at, 0)) if m else at
        rank = at - seg_start  # rows before it in its run within the piece
        # a run that begins the piece without restarting continues the history carried over
        carried = np.where(head[seg_start] & ~restart[seg_start], self._count[code], 0)
        out: dict[str, np.ndarray] = {}
        for k in range(1, self.most + 1):
            own = rank >= k
            back = ~own & (k - rank <= carried)
            known = np.zeros(n, dtype=bool)
            known[order[own | back]] = True
            out[known_of(k)] = known
            for f, d in self.depth.items():
                if d < k:
                    continue
                col = columns[f]
                v = np.zeros(m, dtype=col.dtype)
                v[own] = col[order[at[own] - k]]
                v[back] = self._values[f][code[back], k - rank[back] - 1]
                full = np.zeros(n, dtype=col.dtype)
                full[order] = v
                out[prev_of(f, k)] = full
        self._carry(columns, order, code, seg_start, carried)
        return out

    def _grow(self, columns: Mapping[str, np.ndarray], n_keys: int) -> None:
        """Room for ``n_keys`` partitions, the new ones with no history."""
        have = len(self._count)
        if have >= n_keys:
            return
        rows = max(n_keys, 2 * have)
        self._count = np.concatenate([self._count, np.zeros(rows - have, dtype=np.int64)])
        for f in self.depth:
            old = self._values.get(f)
            grown = np.zeros((rows, self.most), dtype=columns[f].dtype)
            if old is not None:
                grown[:have] = old
            self._values[f] = grown

    def _carry(self, columns, order, code, seg_start, carried) -> None:
        """Keep each partition's last values, from its last run in the piece and, when that
        run continues the history carried over, from there."""
        m = len(order)
        if not m:
            return
        tail = np.flatnonzero(np.r_[code[1:] != code[:-1], True])
        c = code[tail]
        rows = tail - seg_start[tail] + 1  # rows of the last run in the piece
        before = carried[tail]
        for f in self.depth:
            col, old = columns[f], self._values[f]
            new = np.zeros((len(tail), self.most), dtype=old.dtype)
            for j in range(self.most):
                mine = j < rows
                new[mine, j] = col[order[tail[mine] - j]]
                kept = ~mine & (j - rows < before)
                new[kept, j] = old[c[kept], (j - rows)[kept]]
            old[c] = new
        self._count[c] = np.minimum(rows + before, self.most)
