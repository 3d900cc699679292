"""``nfacep match --master URL``: the reference matcher over a trace on Spark, writing the files
the local ``nfacep match`` writes, byte for byte, whatever the number of tasks.

How (the stages are ``vectors``' own, not copies of them):

1. The input (a CSV or Parquet file, or a folder of Parquet part files, in the order and with
   the checks of the local command) is read once and each tuple numbered by its position
   (``seq``) in Spark tasks (:mod:`.numbering`, ``vectors``' recorded-trace stage), into a
   scratch folder of Parquet part files beside the output. A bad value stops the run there,
   naming its file, row and column (the local command's reader, on the driver, names it);
   nothing is written.
2. The numbered tuples are matched in Spark tasks by ``vectors``' matching stage: split by
   partition key over ``--tasks`` tasks, each matching its keys' sub-streams in ``seq`` order,
   when no tuple's fate depends on the others' keys; otherwise (capacity drops of a hashed or
   small store, timers, several keys sharing a bucket, parameters that switch at a position, a
   query without PARTITION) the one exact global pass over the whole stream. Which, and why,
   is printed on stderr and kept in the summary (``spark``). The tasks compute the measures
   too (one :class:`nfacep.measures.Measurer` a task, over the whole partitions it matches).
   Each task reads its share of the numbered part files itself, in ``seq`` order (no shuffle,
   no sort: :func:`.numbering.share`).
3. Spark sorts the match rows by ``seq`` and query into Parquet part files; the driver reads
   them in order, a batch at a time, and writes them through the one match-file writer
   (:func:`nfacep.result.match_file`, or :func:`nfacep.result.match_folder` for a Parquet
   folder), the summary beside them. The scratch folder is removed in any case.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nfacep.errors import UsageError
from nfacep.measures import columns
from nfacep.nfa import Nfa
from nfacep.params import EngineParams
from nfacep.reference.matcher import ReferenceResult
from nfacep.result import Totals, match_file, match_folder
from nfacep.settings import ParamValues

from . import session as spark_session
from . import vectors, vectors_plan
from .progress import Progress

__all__ = ["run"]

#: The scratch folder's sorted match rows.
MATCHES = "matches.parquet"


def run(
    nfa: Nfa,
    query: str,
    input: str,
    output: str,
    params: EngineParams,
    values: ParamValues | None,
    *,
    master: str,
    tasks: int | None = None,
    chunk: int,
    progress: Callable[[str], None] | None = None,
) -> Totals:
    """``nfacep match`` on the Spark master ``master``: match ``input`` and write ``output``
    (a match CSV, or a Parquet folder: :func:`nfacep.output.is_folder`) and its summary; returns
    what was reported. Everything a user can get wrong is checked before Spark starts."""
    from nfacep.backend import check_output
    from nfacep.io.reader import check_input
    from nfacep.output import check_folder, is_folder

    from .cli import _require_spark

    _require_spark("match --master")
    spark_session.check_master(master, connect=False)
    if tasks is not None and tasks < 1:
        raise UsageError("--tasks must be at least 1")
    if not os.path.exists(input):
        raise UsageError(f"--input {input}: no such file or folder")
    check_input(input)
    vectors_plan.check_fields(query, nfa.program)
    folder = is_folder(output)
    if folder:
        output = check_folder(output, (query, input))
    else:
        check_output(output, (query, input))
    spark_session.check_master(master)
    with open(query, "rb") as f:
        raw = f.read()
    job = vectors_plan.Job(
        query,
        raw.decode("utf-8"),
        hashlib.sha256(raw).hexdigest(),
        nfa,
        None,
        params,
        output,
        "auto",
        False,
        values,
        input,
    )
    parent = os.path.dirname(os.path.abspath(output))
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(output)}.", suffix=".tmp", dir=parent)
    spark = created = None
    try:
        spark, created = spark_session.session(master, app_name="nfacep match")
        return _run(spark, job, tmp, tasks, chunk, progress, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if created and spark is not None:
            spark_session.stop(spark)


def _run(spark, job, tmp: str, tasks, chunk: int, progress, folder: bool) -> Totals:
    from pyspark.sql import functions as F

    tasks = tasks or spark.sparkContext.defaultParallelism
    with Progress(spark, "match", progress) as watch:
        n, keys = vectors._record(spark, job, tmp, watch, chunk, tasks, empty_ok=True, wide=True)
        if n:
            result, mode, reason = vectors._match(spark, job, tasks, tmp, watch, chunk, n, keys)
        else:
            mode, reason = "global", "the input holds no tuples: nothing to match"
        word = "note" if mode == "partitioned" else "warning"
        print(f"{word}: {mode} pass: {reason}", file=sys.stderr)
        drops = np.zeros(0, np.int64)
        if n:
            watch.phase("sorting the matches", count=False)
            rows = result.filter(F.col("kind") == "match").drop("kind", "start")
            rows.orderBy("seq", "query").write.parquet(os.path.join(tmp, MATCHES))
            dropped = result.filter(F.col("kind") == "drop").select("seq").orderBy("seq")
            drops = dropped.toArrow().column("seq").to_numpy().astype(np.int64)
            result.unpersist()
            watch.end()
    totals = Totals(tuple(q.name for q in job.nfa.queries), job.params, job.values)
    spark_note = {
        "master": spark.sparkContext.master,
        "tasks": tasks if mode == "partitioned" else 1,
        "pass": mode,
        "reason": reason,
    }
    opener = match_folder if folder else match_file
    with opener(job.out, job.nfa.program) as out:
        for part, cells in _results(job, os.path.join(tmp, MATCHES), chunk):
            out.write(part, cells=cells)
            totals.add(part)
        # the tuples and drops; written too, so that a Parquet folder of no matches has its
        # one part file
        last = _result(job, n, np.zeros(0, np.int64), pa.array([], pa.string()), [])
        last.drops = drops
        out.write(last, cells=[[] for _ in columns(job.nfa.program)])
        totals.add(last)
        summary = totals.summary(query_file=job.query_path, input=job.input)
        out.finish({**summary, "spark": spark_note})
    return totals


def _results(job, path: str, rows: int) -> Iterator[tuple[ReferenceResult, list[list[str]]]]:
    """The sorted match rows in ``path`` (Spark's part files, named in the order of their
    ranges) as results of ``rows`` matches at most, with their measure cells."""
    program = job.nfa.program
    several = len(program.partition_fields) > 1
    last = -1
    for name in sorted(glob.glob(os.path.join(path, "*.parquet"))):
        for batch in pq.ParquetFile(name).iter_batches(batch_size=rows):
            seqs = batch.column("seq").to_numpy().astype(np.int64)
            if len(seqs) and (seqs[0] < last or bool((np.diff(seqs) < 0).any())):
                raise RuntimeError(f"{name}: the sorted matches are out of order")
            last = int(seqs[-1]) if len(seqs) else last
            texts = batch.column("partition").to_pylist()
            if several:
                texts = [None if t is None else tuple(next(csv.reader([t]))) for t in texts]
            cells = [
                batch.column(f.name).to_pylist()
                for f in batch.schema
                if f.name.startswith("measure_")
            ]
            yield _result(job, 0, seqs, batch.column("query"), texts), cells


def _result(job, n: int, seqs: np.ndarray, queries, partitions: list) -> ReferenceResult:
    """A result of the matches ``seqs`` (with their query names and partition texts), as the
    reference matcher reports them."""
    names = tuple(q.name for q in job.nfa.queries)
    index = pc.index_in(queries, value_set=pa.array(names, pa.string()))
    return ReferenceResult(
        n=n,
        names=names,
        seqs=seqs,
        queries=index.to_numpy(zero_copy_only=False).astype(np.int64),
        partitions=partitions,
        drops=np.zeros(0, np.int64),
        params=job.params,
        values=job.values,
    )
