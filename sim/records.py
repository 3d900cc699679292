"""How the runner and the testbench exchange records: files of one record per line.

Free of cocotb, so that the runner imports it without loading the simulator's side; the record
itself is :class:`nfacep.wire.Record`.
"""

from __future__ import annotations

import os

from nfacep.wire import Record

__all__ = ["CONFIG_ENV", "InOrderChecker", "read_records", "write_records"]

#: Environment variable naming the run folder's ``config.json`` (see
#: :mod:`nfacep.sim.testbench`).
CONFIG_ENV = "NFACEP_SIM_CONFIG"


def read_records(path: str | os.PathLike) -> list[Record]:
    """Records from a file of lines ``seq partition matches dropped [starts]`` (decimal)."""
    with open(path, encoding="utf-8") as f:
        return [Record(*map(int, line.split())) for line in f if line.strip()]


def write_records(path: str | os.PathLike, records: list[Record]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{r.seq} {r.partition} {r.matches} {r.dropped}"
                     + (f" {r.starts}\n" if r.starts else "\n") for r in records)


class InOrderChecker:
    """Checks records as they arrive: in strictly increasing ``seq``, and equal to the model's.

    The model's records are in ``seq`` order too, so a missing or an extra record is named as
    such instead of shifting every later comparison. Without a model (``expected is None``)
    only the order and the record invariants (a dropped tuple matches nothing; a record
    reports a match or a drop) are checked.
    """

    MAX_REPORTED = 10

    def __init__(self, expected: list[Record] | None, n_tuples: int):
        self.expected = expected
        self.n_tuples = n_tuples
        self.records: list[Record] = []
        self.errors: list[str] = []
        self.error_count = 0
        self._next = 0  #: index of the next model record not yet matched

    def _error(self, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < self.MAX_REPORTED:
            self.errors.append(text)

    def __call__(self, record: Record) -> None:
        k = len(self.records)
        self.records.append(record)
        if k and record.seq <= self.records[k - 1].seq:
            self._error(f"record {k} ({record}) is not after the previous one "
                        f"(seq {self.records[k - 1].seq}): records must come in seq order")
        if record.seq >= self.n_tuples:
            self._error(f"record {k} ({record}) names a tuple past the input "
                        f"({self.n_tuples} tuples)")
        if record.dropped and record.matches:
            self._error(f"record {k} ({record}) is a dropped tuple with match bits set")
        if not record.dropped and not record.matches:
            self._error(f"record {k} ({record}) reports neither a match nor a drop")
        exp = self.expected
        if exp is None:
            return
        while self._next < len(exp) and exp[self._next].seq < record.seq:
            self._error(f"missing record: the model has {exp[self._next]}, the engine "
                        "gave none for that tuple")
            self._next += 1
        if self._next < len(exp) and exp[self._next].seq == record.seq:
            if record != exp[self._next]:
                self._error(f"record {k}: the engine gave {record}, the model "
                            f"{exp[self._next]}")
            self._next += 1
        else:
            self._error(f"extra record {k}: the engine gave {record}, the model has no "
                        "record for that tuple")

    def finish(self) -> None:
        """Call when the engine is drained: model records still unmatched are missing."""
        exp = self.expected
        if exp is None:
            return
        for r in exp[self._next:]:
            self._error(f"missing record: the model has {r}, the engine gave none")
        self._next = len(exp)

    def report(self) -> str:
        more = self.error_count - len(self.errors)
        lines = self.errors + ([f"... and {more} more"] if more > 0 else [])
        return "\n".join(lines)
