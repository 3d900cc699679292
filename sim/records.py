"""How the runner and the testbench exchange records: files of one record per line.

Free of cocotb, so that the runner imports it without loading the simulator's side; the record
itself is :class:`nfacep.wire.Record`.
"""

from __future__ import annotations

import os

from nfacep.wire import Record

__all__ = ["CONFIG_ENV", "read_records", "write_records"]

#: Environment variable naming the run folder's ``config.json`` (see
#: :mod:`nfacep.sim.testbench`).
CONFIG_ENV = "NFACEP_SIM_CONFIG"


def read_records(path: str | os.PathLike) -> list[Record]:
    """Records from a file of lines ``seq partition matches dropped`` (decimal)."""
    with open(path, encoding="utf-8") as f:
        return [Record(*map(int, line.split())) for line in f if line.strip()]


def write_records(path: str | os.PathLike, records: list[Record]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{r.seq} {r.partition} {r.matches} {r.dropped}\n" for r in records)
