"""The regression vectors' folder (``nfacep vectors``, ``nfacep regress``): its file names and
format, the expected matches' schema (with ``start_seq`` and the measures' columns), and the
manifest's runtime parameter values and engine parameters read back.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from nfacep.errors import UsageError
from nfacep.params import EngineParams
from nfacep.settings import ParamValues

from .rows import TASK_ROWS as _RESULT

FORMAT = "nfacep-vectors/1"


TUPLES, EXPECTED, DROPS, MANIFEST = (
    "tuples.parquet",
    "expected.parquet",
    "drops.parquet",
    "manifest.json",
)


#: The column of expected.parquet that says where a match begins (only when a query reports it)
START_SEQ = "start_seq"


#: expected.parquet's column of a measure is named this followed by the measure's name
MEASURE = "measure_"


def measure_columns(nfa) -> list[str]:
    """expected.parquet's measure columns (:data:`MEASURE` and each column of the match file's
    measures, :func:`nfacep.measures.columns`, in order): the text the match file writes."""
    from nfacep.measures import columns

    return [MEASURE + m.name for m in columns(nfa.program)]


def result_schema(nfa) -> pa.Schema:
    """The rows the matching and simulation tasks emit: a kind, seq, query, partition, start,
    then a text column per measure (null but for matches)."""
    return pa.schema([*_RESULT, *((name, pa.string()) for name in measure_columns(nfa))])


def with_measures(batch: pa.RecordBatch, nfa, cells: list[list[str]] | None) -> pa.RecordBatch:
    """``batch`` (rows of :data:`_RESULT`) with the measure columns of :func:`result_schema`:
    ``cells`` (a list per column, as :meth:`nfacep.measures.Measurer.cells` gives them), or
    nulls."""
    names = measure_columns(nfa)
    if not names:
        return batch
    n = batch.num_rows
    if cells is None:
        extra = [pa.nulls(n, pa.string()) for _ in names]
    else:
        extra = [pa.array(c, pa.string()) for c in cells]
    return pa.RecordBatch.from_arrays([*batch.columns, *extra], schema=result_schema(nfa))


def reports_start(nfa) -> bool:
    """Whether a query of ``nfa`` reports start_seq, so that expected.parquet has the column."""
    return any(q.start_seq for q in nfa.queries)


def global_starts(seq: np.ndarray, starts: np.ndarray | None, m: int) -> pa.Array:
    """The starts of ``m`` matches of a run over the tuples ``seq`` (global seqs, in the order
    they were taken: a start is a position in them) as global seqs; null where a query does not
    report start_seq (start -1, or no starts at all)."""
    if starts is None:
        return pa.nulls(m, pa.int64())
    starts = np.asarray(starts, dtype=np.int64)
    have = starts >= 0
    return pa.array(np.where(have, seq[np.where(have, starts, 0)], 0), pa.int64(), mask=~have)


def _spark_schema(schema: pa.Schema):
    from pyspark.sql import types as T

    conv = {
        pa.int64(): T.LongType(),
        pa.string(): T.StringType(),
        pa.bool_(): T.BooleanType(),
        pa.float32(): T.FloatType(),
    }
    return T.StructType([T.StructField(f.name, conv[f.type], True) for f in schema])


def manifest_values(manifest: dict, nfa, path: str) -> ParamValues | None:
    """The runtime parameters' values a vectors manifest (at ``path``) was made with."""
    types = nfa.program.parameters
    if not types:
        return None
    given = manifest.get("runtime_parameters")
    if not isinstance(given, dict):
        raise UsageError(
            f"{path}: no runtime_parameters for the queries' parameters "
            f"({', '.join(':' + n for n in types)}); make the vectors again"
        )
    return ParamValues.from_initial(types, given, source=path)


def manifest_params(manifest: dict, path: str) -> EngineParams:
    """The engine parameters a vectors manifest (at ``path``) was made with."""
    return EngineParams.from_dict(manifest.get("engine"), source=path)
