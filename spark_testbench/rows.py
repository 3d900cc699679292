"""The rows the Spark tasks emit, the matching tasks of ``nfacep vectors`` and the simulation
tasks of ``nfacep regress`` alike: what each row is (``kind``: a match, a drop, or a row that
closes a task's work), its ``seq``, ``query``, ``partition`` and ``start``
(:func:`~.layout.result_schema` adds the measure columns)."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["TASK_ROWS"]

#: The columns every task row has, before the measures'.
TASK_ROWS = pa.schema(
    [
        ("seq", pa.int64()),
        ("query", pa.string()),
        ("partition", pa.string()),
        ("kind", pa.string()),
        ("start", pa.int64()),
    ]
)
