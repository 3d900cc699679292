"""How the runner and the testbench exchange records: files of one record per line.

Free of cocotb, so that the runner imports it without loading the simulator's side; the record
itself is :class:`nfacep.wire.Record`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from nfacep.wire import Record, RecordColumns, RecordFormat

__all__ = [
    "CONFIG_ENV",
    "RECORDS_HEX",
    "InOrderChecker",
    "check_hex",
    "read_hex",
    "read_records",
    "write_hex",
    "write_records",
]

#: Environment variable naming the run folder's ``config.json`` (see
#: :mod:`nfacep.sim.testbench`).
CONFIG_ENV = "NFACEP_SIM_CONFIG"
#: The file every testbench leaves the engine's records in, one hexadecimal word a line, as
#: they arrived (the batch and native harnesses ``$fwrite`` it as the engine emits them).
RECORDS_HEX = "records.hex"


def read_hex(
    path: str | os.PathLike, layout: RecordFormat, rows: int | None = None
) -> Iterator[RecordColumns]:
    """The records of a :data:`RECORDS_HEX` file decoded column-wise
    (:meth:`~nfacep.wire.RecordFormat.decode_hex`), ``rows`` at a time (None: all at once);
    at least one chunk, empty for no records. ValueError for a line that is not a record."""
    size = -1 if rows is None else rows * (layout.hex_digits + 1)
    first = 0
    with open(path, "rb") as f:
        while True:
            data = f.read(size)
            if not data and first:
                return
            chunk = layout.decode_hex(data, first)
            first += len(chunk)
            yield chunk
            if not data or rows is None:
                return


def check_hex(path: str | os.PathLike, layout: RecordFormat, checker: InOrderChecker) -> None:
    """Give ``checker`` every record of a :data:`RECORDS_HEX` file, one by one, then finish
    it (a run checked against a model); ValueError for a line that is not a value."""
    with open(path, encoding="ascii") as f:
        for number, line in enumerate(f):
            try:
                word = int(line, 16)
            except ValueError:
                raise ValueError(
                    f"record {number} is not a value: {line.strip()!r} (x or z "
                    "bits on o_stream.payload)"
                ) from None
            checker(layout.decode(word))
    checker.finish()


def write_hex(path: str | os.PathLike, layout: RecordFormat, records: list[Record]) -> None:
    """``records`` as a :data:`RECORDS_HEX` file (what the per-cycle testbench took)."""
    with open(path, "w", encoding="ascii") as f:
        f.writelines(f"{layout.encode(r):0{layout.hex_digits}x}\n" for r in records)


def read_records(path: str | os.PathLike) -> list[Record]:
    """Records from a file of lines ``seq partition matches dropped [starts]`` (decimal)."""
    with open(path, encoding="utf-8") as f:
        return [Record(*map(int, line.split())) for line in f if line.strip()]


def write_records(path: str | os.PathLike, records: list[Record]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(
            f"{r.seq} {r.partition} {r.matches} {r.dropped}"
            + (f" {r.starts}\n" if r.starts else "\n")
            for r in records
        )


class InOrderChecker:
    """Checks records as they arrive: in strictly increasing ``seq``, and equal to the model's.

    The model's records are in ``seq`` order too, so a missing or an extra record is named as
    such instead of shifting every later comparison. Without a model (``expected is None``)
    only the order and the record invariants (a dropped tuple matches nothing; a record
    reports a match or a drop) are checked.
    """

    MAX_REPORTED = 10

    def __init__(self, expected: list[Record] | None, n_tuples: int, *, keep: bool = True):
        self.expected = expected
        self.n_tuples = n_tuples
        self.keep = keep
        self.records: list[Record] = []  #: those checked, when ``keep``
        self.count = 0  #: records checked
        self.last: Record | None = None  #: the last of them
        self.errors: list[str] = []
        self.error_count = 0
        self._next = 0  #: index of the next model record not yet matched

    def _error(self, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < self.MAX_REPORTED:
            self.errors.append(text)

    def __call__(self, record: Record) -> None:
        k, before = self.count, self.last
        self.count, self.last = k + 1, record
        if self.keep:
            self.records.append(record)
        if k and record.seq <= before.seq:
            self._error(
                f"record {k} ({record}) is not after the previous one "
                f"(seq {before.seq}): records must come in seq order"
            )
        if record.seq >= self.n_tuples:
            self._error(
                f"record {k} ({record}) names a tuple past the input ({self.n_tuples} tuples)"
            )
        if record.dropped and record.matches:
            self._error(f"record {k} ({record}) is a dropped tuple with match bits set")
        if not record.dropped and not record.matches:
            self._error(f"record {k} ({record}) reports neither a match nor a drop")
        exp = self.expected
        if exp is None:
            return
        while self._next < len(exp) and exp[self._next].seq < record.seq:
            self._error(
                f"missing record: the model has {exp[self._next]}, the engine "
                "gave none for that tuple"
            )
            self._next += 1
        if self._next < len(exp) and exp[self._next].seq == record.seq:
            if record != exp[self._next]:
                self._error(f"record {k}: the engine gave {record}, the model {exp[self._next]}")
            self._next += 1
        else:
            self._error(
                f"extra record {k}: the engine gave {record}, the model has no "
                "record for that tuple"
            )

    def check(self, chunk: RecordColumns) -> None:
        """Check the next records, decoded column-wise: without a model, judged column-wise,
        and one by one (for the messages) only when something is wrong in them."""
        if self.expected is None and len(chunk):
            seq, dropped, matched = chunk.seq, chunk.dropped != 0, chunk.matches != 0
            wrong = (
                bool((seq[1:] <= seq[:-1]).any())
                or (self.last is not None and int(seq[0]) <= self.last.seq)
                or bool((seq >= self.n_tuples).any())
                or bool((dropped == matched).any())
            )
            if not wrong:
                self.count += len(chunk)
                self.last = chunk.take(slice(-1, None)).records()[0]
                if self.keep:
                    self.records.extend(chunk.records())
                return
        for record in chunk.records():
            self(record)

    def finish(self) -> None:
        """Call when the engine is drained: model records still unmatched are missing."""
        exp = self.expected
        if exp is None:
            return
        for r in exp[self._next :]:
            self._error(f"missing record: the model has {r}, the engine gave none")
        self._next = len(exp)

    def report(self) -> str:
        more = self.error_count - len(self.errors)
        lines = self.errors + ([f"... and {more} more"] if more > 0 else [])
        return "\n".join(lines)
