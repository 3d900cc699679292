"""Match records as the engine emits them and as the runner and the testbench exchange them.

Kept free of cocotb and of the compiler, so both sides of a simulation can import it.
"""

from __future__ import annotations

import os
from typing import NamedTuple

__all__ = ["CONFIG_ENV", "Record", "RecordLayout", "read_records", "write_records"]

#: Environment variable naming the run folder's ``config.json`` (see :mod:`nfacep.sim.testbench`).
CONFIG_ENV = "NFACEP_SIM_CONFIG"


class Record(NamedTuple):
    """One match record of ``o_stream``, decoded with the sidecar's ``record`` layout."""

    seq: int  #: 0-based input index of the tuple
    partition: int  #: the raw partition key (ENUM index, integer bits; 0 without PARTITION)
    matches: int  #: bit q set iff query q (the sidecar's ``queries[].bit``) matched here
    dropped: int  #: 1 if the partitioner dropped the tuple

    def __str__(self) -> str:
        return (f"seq {self.seq} partition {self.partition} matches {self.matches:#b} "
                f"dropped {self.dropped}")


class RecordLayout:
    """Decodes ``o_stream__payload`` words by the sidecar's ``record.fields`` offsets."""

    def __init__(self, record: dict):
        fields = {f["name"]: (f["offset"], f["width"]) for f in record["fields"]}
        missing = {"seq", "partition", "matches", "dropped"} - fields.keys()
        if missing:
            raise ValueError(f"the sidecar's record layout lacks {', '.join(sorted(missing))}")
        self._fields = [fields[n] for n in ("seq", "partition", "matches", "dropped")]

    def decode(self, word: int) -> Record:
        return Record(*((word >> off) & ((1 << width) - 1) for off, width in self._fields))


def read_records(path: str | os.PathLike) -> list[Record]:
    """Records from a file of lines ``seq partition matches dropped`` (decimal)."""
    with open(path, encoding="utf-8") as f:
        return [Record(*map(int, line.split())) for line in f if line.strip()]


def write_records(path: str | os.PathLike, records: list[Record]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{r.seq} {r.partition} {r.matches} {r.dropped}\n" for r in records)
