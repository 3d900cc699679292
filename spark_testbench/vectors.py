"""Regression vectors: generated (or recorded) tuples and their expected matches, computed with
Spark.

:func:`~nfacep.spark_testbench.vectors_plan.prepare` checks everything a user can get wrong
(query file, parameters, output folder, master URL) and builds the
:class:`~nfacep.spark_testbench.generate.Generator`, all before Spark starts; :func:`run` then
does the work on a session and publishes the folder atomically (the folder's layout is
:mod:`.layout`'s, the work inside the Spark tasks :mod:`.vectors_tasks`')::

    DIR/tuples.parquet/    seq (int64), then the stream's fields in declaration order:
                           UINT/INT as int64, BOOL as boolean, ENUM as its label, FLOAT32 as float
    DIR/expected.parquet/  seq, query, partition (the key as text, null without PARTITION),
                           one row per reported match, sorted by seq then query (like `match`);
                           and start_seq (int64, null for the queries without it) when a query
                           reports it (MEASURES FIRST(seq) AS start_seq): the global seq where
                           the match begins; then, when a query has MEASURES, measure_NAME
                           (string) per measure column of the match file, its text there
    DIR/drops.parquet/     seq, partition of every tuple the partitioner drops
    DIR/manifest.json      query file hash, seed, generator settings, engine parameters, counts,
                           how the expected matches were computed (below)

With ``input`` (``nfacep vectors --input FILE|FOLDER``) the tuples are a recorded trace instead:
a CSV or Parquet file or a folder of Parquet part files, read as ``nfacep match`` reads its
input (the same order, checks and errors, ORDER BY included) in Spark tasks
(:mod:`.numbering`), and written to ``DIR/tuples.parquet/`` in the layout above, ``seq`` the
position in the trace. A bad value anywhere stops the run with its
file, row and column, and nothing is published. The manifest then names the ``input`` and
has no generator settings (``seed`` and the like are null).

Expected matches come from :func:`nfacep.reference.matcher.run` inside Spark tasks, in one of two
ways, named in the manifest (``expected.mode``):

``partitioned``
    When neither capacity nor timers can matter: no ticks (``--tick-tuples 0``: elements never
    expire) and at most ``--partitions`` distinct keys present (so none is ever dropped). Each
    sub-stream then evolves alone, so tuples are hash-partitioned by key, sorted by ``seq``
    within each Spark partition (by Spark, spilling to disk), and every task streams its keys
    through one :class:`nfacep.reference.matcher.Matcher` in pieces of ``PIECE_TUPLES``, the ``seq``
    column on disk (:class:`~nfacep.spark_testbench.shard.Shard`): its memory is bounded by a
    piece and its keys, not by its share of the stream.
``global``
    Otherwise (or without a PARTITION clause): one task runs the reference matcher over the
    whole stream in ``seq`` order, modelling capacity, timers and drops exactly. Spark sorts
    the stream by ``seq`` into that task (its external sorter spills to disk), which streams
    it through one :class:`nfacep.reference.matcher.Matcher` in pieces of ``PIECE_TUPLES`` tuples
    and emits each piece's matches and drops as it goes: its memory is bounded by a piece and
    the keys, whatever the stream's length.

A recorded trace skips Spark's shuffle and sorts: its numbered part files are in ``seq`` order
(:mod:`.numbering` names them so), so each matching task reads them itself, keeping the tuples
whose key hashes to it (:func:`.numbering.share`; all of them in the global pass), already in
``seq`` order.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import tempfile
import time
from collections import Counter

import numpy as np
import pyarrow as pa

from nfacep.errors import UsageError

from .generate import BLOCK_TUPLES, Options, arrow_schema
from .layout import (
    DROPS,
    EXPECTED,
    FORMAT,
    MANIFEST,
    START_SEQ,
    TUPLES,
    _spark_schema,
    measure_columns,
    reports_start,
    result_schema,
)
from .progress import Progress
from .vectors_plan import Job, _mode
from .vectors_tasks import (
    _generate_task,
    _global_task,
    _match_task,
    _read_task,
    _used_fields,
    _used_schema,
)

__all__ = ["BLOCK_TUPLES", "PIECE_TUPLES", "Options", "run"]


#: How many tuples the global pass matches at a time (:func:`run` takes another number)
PIECE_TUPLES = 1 << 20


# --- the run ----------------------------------------------------------------------------------


def run(
    spark,
    job: Job,
    *,
    tasks: int | None = None,
    progress=None,
    progress_every: float | None = None,
    piece_tuples: int = PIECE_TUPLES,
) -> dict:
    """Generate, match and publish ``job.out``; returns the manifest.

    ``progress``, if given, is called with a line of text every ``progress_every`` seconds
    while Spark works and at the end of each phase (:class:`~.progress.Progress`: tuples
    generated and matched, the rate, the time left). ``piece_tuples``: how many tuples the
    global pass matches at a time (the expected matches do not depend on it).
    """
    tasks = tasks or spark.sparkContext.defaultParallelism
    if tasks < 1:
        raise UsageError("--tasks must be at least 1")
    if piece_tuples < 1:
        raise ValueError(f"piece_tuples {piece_tuples}: must be at least 1")
    out = os.path.abspath(job.out)
    tmp = tempfile.mkdtemp(
        prefix=f".{os.path.basename(out)}.", suffix=".tmp", dir=os.path.dirname(out)
    )
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; publish it like any folder
    seconds: dict[str, float] = {}
    try:
        with Progress(spark, "vectors", progress, progress_every) as watch:
            manifest = _run(spark, job, tasks, tmp, watch, seconds, piece_tuples)
        _publish(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _run(
    spark,
    job: Job,
    tasks: int,
    tmp: str,
    watch: Progress,
    seconds: dict,
    piece_tuples: int = PIECE_TUPLES,
) -> dict:
    t0 = time.perf_counter()
    keys = None
    if job.generator is not None:
        _generate(spark, job, tasks, tmp, watch)
        tuples = job.generator.options.tuples
        seconds["generate"] = time.perf_counter() - t0
    else:
        tuples, keys = _record(spark, job, tmp, watch, piece_tuples, tasks)
        seconds["read"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    result, mode, reason = _match(spark, job, tasks, tmp, watch, piece_tuples, tuples, keys)
    seconds["match"] = time.perf_counter() - t1
    watch.phase("writing the expected matches and drops", count=False)
    _write_expected(job, result, tmp)
    counts, keys_present = _count(result)
    result.unpersist()
    watch.end()
    seconds["expected"] = time.perf_counter() - t1
    seconds["total"] = time.perf_counter() - t0
    manifest = _manifest(
        job, mode, reason, keys_present, counts, tasks, seconds, spark.sparkContext.master, tuples
    )
    with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def _generate(spark, job: Job, tasks: int, tmp: str, watch: Progress) -> None:
    """The generation stage: blocks of tuples written to ``tmp``'s tuples folder."""
    gen = job.generator
    n_gen = min(tasks, gen.n_blocks)
    counter = watch.phase("generated", total=gen.options.tuples, tasks=n_gen)
    blocks = spark.range(0, gen.n_blocks, 1, numPartitions=n_gen)
    generated = blocks.mapInArrow(
        functools.partial(_generate_task, gen, counter), _spark_schema(gen.arrow_schema())
    )
    generated.write.parquet(os.path.join(tmp, TUPLES))
    watch.end()


def _record(
    spark,
    job: Job,
    tmp: str,
    watch: Progress,
    piece_tuples: int,
    tasks: int,
    *,
    empty_ok: bool = False,
    wide: bool = False,
) -> tuple[int, int | None]:
    """The recorded trace ``job.input`` read and numbered in Spark tasks (as ``nfacep match``
    reads it: every value and ORDER BY checked, an error naming its file, row and column:
    :func:`.numbering.record`) into ``tmp``'s tuples folder in the vectors' layout, ``seq``
    the position in the trace; returns the number of tuples (none is an error unless
    ``empty_ok``) and of distinct keys (None: not counted); ``wide``: as
    :func:`.numbering.record` (``match --master``'s scratch tuples)."""
    from nfacep.errors import DataError

    from . import numbering

    assert job.input is not None
    folder = os.path.join(tmp, TUPLES)
    counter = watch.phase(f"read from {job.input}", tasks=tasks, task_word="readers")
    n, keys = numbering.record(
        spark, job.nfa, job.input, folder, counter, piece_tuples, tasks, wide=wide
    )
    watch.end()
    if not n and not empty_ok:
        raise DataError(f"{job.input}: holds no tuples; vectors need at least one")
    return n, keys


def _match(
    spark,
    job: Job,
    tasks: int,
    tmp: str,
    watch: Progress,
    piece_tuples: int,
    n_tuples: int,
    keys: int | None = None,
):
    """The matching stage: the written tuples through the reference matcher, partitioned or
    in one global pass; returns the checkpointed result rows (with the measure columns of
    :func:`result_schema`), the mode and its reason. ``keys``: how many distinct keys the
    tuples hold, when the reading stage counted them (otherwise Spark counts them when the
    pass depends on it)."""
    from pyspark.sql import functions as F

    gen = job.generator
    key = job.nfa.program.partition_fields
    counted = keys if key else None
    if (
        key
        and counted is None
        and (
            gen is None  # a recorded trace: how many keys it holds is known only by counting
            or (
                job.params.tick_tuples == 0
                and job.params.store == "pipeline"
                and gen.keys > job.params.partitions
            )
        )
    ):
        watch.phase("counting the keys present", count=False)
        tuples = spark.read.parquet(os.path.join(tmp, TUPLES))
        counted = tuples.select(*key).distinct().count()  # are they all there?
    mode, reason = _mode(job, counted)
    counter = watch.phase("matched", total=n_tuples, tasks=tasks if mode == "partitioned" else 1)
    args = (job.query_text, job.query_path, job.params, job.values, counter)
    if gen is None:
        # a recorded trace's numbered part files are in seq order (numbering): each task reads
        # its keys' tuples (whole keys; all of them in the global pass) straight from them
        n = tasks if mode == "partitioned" else 1
        inner = _match_task if mode == "partitioned" else _global_task
        program = job.nfa.program
        task = functools.partial(
            _read_task,
            os.path.join(tmp, TUPLES),
            ["seq", *_used_fields(job.nfa)],
            _used_schema(program, key),
            n,
            piece_tuples,
            functools.partial(inner, *args, piece_tuples),
        )
        source = spark.range(0, n, 1, numPartitions=n)
    elif mode == "partitioned":
        source = spark.read.parquet(os.path.join(tmp, TUPLES)).select("seq", *_used_fields(job.nfa))
        # whole keys to a task, each task's rows sorted by Spark (it spills to disk): a task
        # streams them through its matcher, so none holds its partition
        source = source.repartition(tasks, *map(F.col, key)).sortWithinPartitions("seq")
        task = functools.partial(_match_task, *args, piece_tuples)
    else:
        source = spark.read.parquet(os.path.join(tmp, TUPLES)).select("seq", *_used_fields(job.nfa))
        # one partition, sorted by Spark's external sorter (it spills to disk, so the stream
        # need not fit in memory); mapInArrow reads that partition's rows in the sorted order
        source = source.coalesce(1).sortWithinPartitions("seq")
        task = functools.partial(_global_task, *args, piece_tuples)
    result = source.mapInArrow(task, _spark_schema(result_schema(job.nfa))).localCheckpoint()
    watch.end()
    return result, mode, reason


def _write_expected(job: Job, result, tmp: str) -> None:
    """The expected matches and drops of the result rows, as Parquet in ``tmp``."""
    from pyspark.sql import functions as F

    columns = ["seq", "query", "partition"]
    if reports_start(job.nfa):  # otherwise the schema stays as it was before start_seq
        columns.append(F.col("start").alias(START_SEQ))
    columns += measure_columns(job.nfa)
    (
        result.filter(F.col("kind") == "match")
        .select(*columns)
        .orderBy("seq", "query")
        .write.parquet(os.path.join(tmp, EXPECTED))
    )
    (
        result.filter(F.col("kind") == "drop")
        .select("seq", "partition")
        .orderBy("seq")
        .write.parquet(os.path.join(tmp, DROPS))
    )


def _count(result) -> tuple[Counter, int]:
    """(rows per (kind, query), the number of keys present) of the result rows."""
    from pyspark.sql import functions as F

    counts = Counter()
    keys_present = 0
    for r in (
        result.groupBy("kind", "query")
        .agg(F.count("*").alias("n"), F.sum("seq").alias("total"))
        .collect()
    ):
        if r["kind"] == "keys":
            keys_present = r["total"]
        else:
            counts[r["kind"], r["query"]] = r["n"]
    return counts, keys_present


def _publish(tmp: str, out: str) -> None:
    old = None
    if os.path.isdir(out):
        if os.listdir(out):
            old = tempfile.mkdtemp(
                prefix=f".{os.path.basename(out)}.", suffix=".old", dir=os.path.dirname(out)
            )
            os.rename(out, os.path.join(old, "vectors"))
        else:
            os.rmdir(out)
    os.rename(tmp, out)
    if old:
        shutil.rmtree(old, ignore_errors=True)


def _source(job: Job, tuples: int, keys_present: int) -> dict:
    """The manifest's account of where the tuples came from: the generator's settings, or
    the recorded trace (``input``; the generator's settings null)."""
    gen = job.generator
    names = [q.name for q in job.nfa.queries]
    if gen is None:
        return {
            "input": job.input,
            "seed": None,
            "tuples": tuples,
            "keys": keys_present if job.nfa.program.partition_fields else 1,
            "zipf": None,
            "plant_rate": None,
            "block_tuples": None,
            "enum_weights": {},
            "planted": {n: {} for n in names},
            "unplanted": {},
            "generators": None,
            "predicate_rates": None,
            "columns": {f.name: str(f.type) for f in arrow_schema(job.nfa.program.schema)},
        }
    o = gen.options
    planted: dict[str, dict[str, int]] = {n: {} for n in names}
    for b in range(gen.n_blocks):
        for p in gen.planted(b):
            planted[p.query][p.kind] = planted[p.query].get(p.kind, 0) + 1
    return {
        "input": None,
        "seed": o.seed,
        "tuples": o.tuples,
        "keys": gen.keys,
        "zipf": o.zipf,
        "plant_rate": o.plant_rate,
        "block_tuples": o.block_tuples,
        "enum_weights": {f: dict(pairs) for f, pairs in o.enum_weights},
        "planted": planted,
        "unplanted": dict(gen.unplanted),
        "generators": gen.describe(),
        "predicate_rates": gen.sample_rates(job.nfa),
        "columns": {f.name: str(f.type) for f in gen.arrow_schema()},
    }


def _manifest(
    job: Job, mode, reason, keys_present, counts, tasks, seconds, master, tuples: int
) -> dict:
    import pyspark

    program = job.nfa.program
    names = [q.name for q in program.queries]
    matches = {n: counts.get(("match", n), 0) for n in names}
    source = _source(job, tuples, keys_present)
    return {
        "format": FORMAT,
        "query_file": job.query_path,
        "query_sha256": job.query_sha256,
        "stream": program.schema.name,
        "partition_fields": list(program.partition_fields),
        "order_fields": list(program.order_fields),
        "queries": [
            {"name": q.name, "skip_past_last_row": q.skip_past_last_row, "start_seq": q.start_seq}
            for q in job.nfa.queries
        ],
        "input": source["input"],
        "seed": source["seed"],
        "tuples": tuples,
        "keys": source["keys"],
        "keys_present": keys_present,
        "zipf": source["zipf"],
        "plant_rate": source["plant_rate"],
        "block_tuples": source["block_tuples"],
        "enum_weights": source["enum_weights"],
        "engine": job.params.as_dict(),
        "runtime_parameters": job.values.as_dict()["initial"] if job.values else None,
        "expected": {"mode": mode, "reason": reason},
        "counts": {
            "tuples": tuples,
            "matches": matches,
            "matches_total": sum(matches.values()),
            "drops": counts.get(("drop", None), 0),
        },
        "planted": source["planted"],
        "unplanted": source["unplanted"],
        "generators": source["generators"],
        "predicate_rates": source["predicate_rates"],
        "files": {"tuples": TUPLES, "expected": EXPECTED, "drops": DROPS},
        "columns": source["columns"],
        "versions": {
            "nfacep": _version("nfacep"),
            "numpy": np.__version__,
            "pyarrow": pa.__version__,
            "pyspark": pyspark.__version__,
        },
        # how this run went; the only part that depends on the Spark set-up
        "run": {
            "master": master,
            "tasks": tasks,
            "seconds": {k: round(v, 3) for k, v in seconds.items()},
        },
    }


def _version(dist: str) -> str | None:
    from importlib import metadata

    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(dist)
    return None
