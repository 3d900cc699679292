"""A shard's tuples as they pass into a Spark task's matcher or simulation, in pieces.

Both passes over a vectors folder that run per shard of whole keys (``vectors``' expected
matches, ``regress``'s simulation) take a shard in ``seq`` order (Spark sorts it) and must
not hold it: :class:`Shard` converts its Arrow batches piece by piece and keeps on disk, not in
memory, what mapping the results back to the global ``seq`` needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from nfacep.errors import DataError
from nfacep.io.convert import from_table
from nfacep.io.tuples import Tuples

__all__ = ["Shard"]


class Shard:
    """The tuples of one shard as they pass into a matcher or a simulation, in pieces: each
    Arrow batch (cut to at most ``rows`` tuples) converted to :class:`~nfacep.io.tuples.Tuples`
    of ``schema`` (default the program's) and handed on (:meth:`pieces`), while what mapping
    the results back needs is kept on disk in ``folder``, not in memory: the ``seq`` column (a
    result's position, and a match's start, index it), the partition key column (the
    partition text of a drop) and the fields of ``keep`` (those the measures read). ``seq``
    must rise from tuple to tuple, across the pieces too: a
    :class:`~nfacep.errors.DataError` naming ``source`` if not."""

    def __init__(
        self,
        program,
        folder: Path,
        rows: int,
        *,
        schema=None,
        source: str = "tuples.parquet",
        keep: tuple[str, ...] = (),
    ):
        self.program = program
        self.schema = schema or program.schema
        self.source = source
        self.key = program.partition_fields  #: the partition key's fields
        #: the fields kept on disk: the key's, then the others of ``keep``
        self.kept = (*self.key, *(f for f in keep if f not in self.key))
        self.folder = folder
        self.rows = rows
        self.n = 0  #: tuples handed on so far
        self.first: int | None = None  #: the first seq
        self._last: int | None = None
        self._key_dtypes: dict[str, np.dtype] = {}

    def pieces(self, batches) -> Iterator[Tuples]:
        """The tuples of ``batches`` (Arrow record batches with a ``seq`` column), in
        pieces, their seq and key columns appended to the files as they go."""
        with contextlib.ExitStack() as stack:
            seqs = stack.enter_context(open(self.folder / "seq.i64", "wb"))
            keys = {
                name: stack.enter_context(open(self._key_path(name), "wb")) for name in self.kept
            }
            for batch in batches:
                for start in range(0, batch.num_rows, self.rows):
                    part = batch.slice(start, self.rows)
                    seq = part.column("seq").to_numpy(zero_copy_only=False).astype(np.int64)
                    if not len(seq):
                        continue
                    wrong = np.flatnonzero(np.diff(seq) <= 0)
                    if self._last is not None and seq[0] <= self._last:
                        before, after = self._last, int(seq[0])
                    elif len(wrong):
                        before, after = int(seq[wrong[0]]), int(seq[wrong[0] + 1])
                    else:
                        before = None
                    if before is not None:
                        raise DataError(
                            f"{self.source}: a shard's tuples must come in rising seq order, each "
                            f"seq once, but seq {after} came after seq {before}"
                        )
                    data = from_table(
                        pa.Table.from_batches([part]),
                        self.schema,
                        source=f"{self.source} (seq {seq[0]}…)",
                    )
                    seqs.write(seq.tobytes())
                    for name, f in keys.items():
                        column = np.ascontiguousarray(data.columns[name])
                        self._key_dtypes[name] = column.dtype
                        f.write(column.tobytes())
                    if self.first is None:
                        self.first = int(seq[0])
                    self._last = int(seq[-1])
                    self.n += len(seq)
                    # (flushed: the tuples handed on can be mapped while the next are read)
                    seqs.flush()
                    for f in keys.values():
                        f.flush()
                    yield data

    def seq(self) -> np.ndarray:
        """The ``seq`` of every tuple handed on (mapped from the file)."""
        return np.memmap(self.folder / "seq.i64", dtype=np.int64, mode="r", shape=(self.n,))

    def keys(self) -> Tuples:
        """The partition key's columns of every tuple handed on (mapped from the files), for
        :func:`nfacep.result.partition_texts`."""
        return self.tuples(self.key)

    def tuples(self, names, start: int = 0, stop: int | None = None) -> Tuples:
        """The kept fields ``names`` of the tuples ``start`` to ``stop`` (default: every one
        handed on), mapped from the files."""
        stop = self.n if stop is None else stop
        columns = {
            name: np.memmap(
                self._key_path(name), dtype=self._key_dtypes.get(name), mode="r", shape=(self.n,)
            )[start:stop]
            for name in names
        }
        return Tuples(columns, stop - start, self.source)

    def _key_path(self, name: str) -> Path:
        """The file of kept field ``name``'s column (numbered: a field's name may be any)."""
        return self.folder / f"key{self.kept.index(name)}.raw"
