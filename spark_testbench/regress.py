"""Regression: simulate the engine's gateware over a vectors folder and check it in Spark.

:func:`~.regress_plan.prepare` checks everything a user can get wrong (the vectors folder and
its files, the query file against the manifest's hash, the engine parameters against the
manifest's (those not given are taken from it), the simulator, the master URL), all before
Spark starts. :func:`run` then

1. emits the engine's Verilog **once** (:func:`nfacep.hdl.engine.write_verilog`) and builds the
   simulator model once on the driver, in the simulator build cache, so every Spark task
   simulates that same prebuilt model (:class:`nfacep.sim.Simulation` with ``engine=``);
   ``nfacep regress`` does it while the Spark session starts (:mod:`.beside`);
2. simulates the tuples in Spark tasks (``mapInArrow``): in the manifest's ``partitioned`` mode
   the tuples are split into shards of whole partition keys (hash-partitioned by key), each
   shard simulated alone in ``seq`` order, its record positions (and the starts of the
   matches, for start_seq) mapped back to the global ``seq``. That is exact because capacity
   and timers cannot matter (``vectors_plan.py`` chose the mode for that reason). In ``global``
   mode one task simulates the whole stream. Spark sorts each shard by ``seq`` (spilling to
   disk as it needs), and a task streams: it writes each Arrow batch to the simulation's input
   as it comes and reads the records back a chunk at a time (:class:`~.shard.Shard`,
   :meth:`nfacep.sim.Simulation.stream`), so its memory is bounded by :data:`PIECE_TUPLES`
   and :data:`RECORD_CHUNK`, not by the shard, even in ``global`` mode;
3. compares the simulated matches with ``expected.parquet`` by a full outer join on
   ``seq, query, partition`` (null-safe: ``partition`` is null without PARTITION), and the
   simulated drops with ``drops.parquet`` on ``seq, partition``. When the expected matches
   have a ``start_seq`` column (a query reports start_seq), a match found on both sides whose
   starts differ (null-safe: null for the queries without start_seq) is a ``wrong_start``;
   when they have measure columns (``measure_NAME``), the values of the simulated matches,
   computed in the task by the one :class:`~nfacep.measures.Measurer`
   (:class:`~.regress_tasks._Measures`), are compared column by column: a match that differs
   in one is a ``wrong_measure``;
4. writes ``DIR/regress_report.json`` (atomically): counts by kind (``missing``: expected, not
   simulated; ``extra``: simulated, not expected; ``wrong_start``: both, beginning elsewhere;
   ``wrong_measure``, ``missing_drop``, ``extra_drop``), per query, and the first differing
   rows (with the expected and simulated ``start_seq`` when the vectors have it, and the
   first differing measure's name and values).

One module per job: the checks before Spark (:mod:`.regress_plan`), the simulation in the
Spark tasks (:mod:`.regress_tasks`), the comparison and report (:mod:`.regress_compare`); this
one runs them in order.
"""

from __future__ import annotations

import functools
import os
import time

from nfacep.errors import UsageError
from nfacep.output import write_json

from .layout import TUPLES, result_schema
from .progress import Progress
from .regress_compare import _compare
from .regress_plan import Job
from .regress_tasks import Built, _sim_task, prebuild

__all__ = ["PIECE_TUPLES", "RECORD_CHUNK", "REPORT", "run"]

REPORT = "regress_report.json"
#: In the partitioned mode, shards of about this many tuples at most (more shards than tasks
#: when the stream is long), so that a task holds one shard, not its share of the stream:
#: memory stays bounded by the shard (or by the busiest key, which is never split).
SHARD_TUPLES = 1 << 20
#: A task hands its shard to the simulation in pieces of at most this many tuples (Spark's
#: Arrow batches, cut to it), and reads the records back this many at a time: its memory is
#: bounded by these, not by the shard (read on the driver when the job runs).
PIECE_TUPLES = 1 << 16
RECORD_CHUNK = 1 << 18


# --- the run --------------------------------------------------------------------------------------


def run(
    spark,
    job: Job,
    *,
    tasks: int | None = None,
    progress=None,
    progress_every: float | None = None,
    built: Built | None = None,
) -> dict:
    """Simulate, compare and write ``DIR/regress_report.json``; returns the report.

    ``progress``, if given, is called with one line of text at each step, and every
    ``progress_every`` seconds while Spark works (:class:`~.progress.Progress`: tuples
    simulated, the rate, the time left). ``built``: the model :func:`prebuild` made (its
    folder is removed at the end); by default it is built here first.
    """
    from pyspark.sql import functions as F

    from nfacep.sim import SimulationError

    say = progress or (lambda _line: None)
    tasks = tasks or spark.sparkContext.defaultParallelism
    if tasks < 1:
        if built is not None:
            built.remove()
        raise UsageError("--tasks must be at least 1")
    seconds: dict[str, float] = {}
    if built is None:
        built = prebuild(job, progress)
    seconds["build"] = built.seconds
    t1 = time.perf_counter()
    try:
        n_tuples = job.manifest.get("counts", {}).get("tuples")
        source, shards = _shards(spark, job, tasks, n_tuples)
        count = f"{n_tuples:,}" if isinstance(n_tuples, int) else "?"
        say(
            f"regress: {count} tuples in the vectors; simulating them in {shards} "
            f"shard{'s' if shards != 1 else ''} ({job.mode})"
        )
        with Progress(spark, "regress", progress, progress_every) as watch:
            counter = watch.phase("simulated", total=n_tuples, tasks=shards, task_word="shards")
            result = _simulate(source, job, built.query, built.engine, built.depth, counter)
            watch.end()
            seconds["simulate"] = time.perf_counter() - t1

            t2 = time.perf_counter()
            watch.phase("checking the simulated matches against the expected ones", count=False)
            shard_rows = result.filter(F.col("kind") == "shard").collect()
            simulated_tuples = sum(r["seq"] for r in shard_rows)
            cycles = sum(int(r["partition"]) for r in shard_rows)
            say(
                f"regress: {simulated_tuples:,} tuples simulated in {len(shard_rows)} non-empty "
                f"shards ({cycles:,} cycles); checking"
            )
            report = _compare(spark, job, result)
        seconds["check"] = time.perf_counter() - t2
    finally:
        built.remove()
    # the build's time and this run's (a build beside the session's start counts in full)
    seconds["total"] = built.seconds + time.perf_counter() - t1
    shard_counts = {"planned": shards, "simulated": len(shard_rows)}
    run = {"master": spark.sparkContext.master, "tasks": tasks, "seconds": seconds}
    report.update(_totals(n_tuples, simulated_tuples, cycles, shard_counts, run))
    if simulated_tuples != n_tuples:
        raise SimulationError(
            f"simulated {simulated_tuples} tuples, but the vectors hold {n_tuples}"
        )
    result.unpersist()
    write_json(os.path.join(job.vectors, REPORT), report)
    say(
        f"regress: {report['counts']['expected']} expected matches checked, "
        f"{report['counts']['differences']} differences"
    )
    return report


def _totals(n_tuples, simulated: int, cycles: int, shards: dict, run: dict) -> dict:
    """The report's fields of the run: tuples, cycles, shards, master, tasks, seconds."""
    seconds = {k: round(v, 3) for k, v in run["seconds"].items()}
    return {
        "tuples": n_tuples,
        "tuples_simulated": simulated,
        "cycles": cycles,
        "shards": shards,
        "run": {**run, "seconds": seconds},
    }


def _shards(spark, job: Job, tasks: int, n_tuples: int | None):
    """The vectors' tuples as the shards the simulation tasks take, each in ``seq`` order:
    ``(source, shards)``. Partitioned, whole keys per shard, about :data:`SHARD_TUPLES` tuples
    each and at least ``tasks`` of them (no more than keys); global, one shard."""
    from pyspark.sql import functions as F

    tuples = spark.read.parquet(os.path.join(job.vectors, TUPLES))
    key = job.nfa.program.partition_fields
    if job.mode == "partitioned":
        keys = job.manifest.get("keys_present") or tasks
        shards = max(1, min(max(tasks, -(-(n_tuples or 0) // SHARD_TUPLES)), keys))
        source = tuples.repartition(shards, *map(F.col, key))
    else:
        shards = 1
        source = tuples.coalesce(1)
    # each shard in seq order, sorted by Spark (which spills), not in the task
    return source.sortWithinPartitions("seq"), shards


def _simulate(source, job: Job, query: str, engine: tuple, depth: int, counter):
    """Each shard of ``source`` simulated by a Spark task (:func:`_sim_task`) with the
    prebuilt ``engine`` (its Verilog and the programmable engine's image words), the rows of
    :data:`_RESULT` checkpointed; :class:`SimulationError` when a task fails."""
    from pyspark.errors import PythonException

    from nfacep.sim import SimulationError

    from .layout import _spark_schema

    task = functools.partial(
        _sim_task,
        query,
        engine,
        job.params,
        job.simulator,
        str(job.build_dir),
        job.seed,
        depth,
        job.sim_mode,
        job.values,
        PIECE_TUPLES,
        RECORD_CHUNK,
        counter,
    )
    result = source.mapInArrow(task, _spark_schema(result_schema(job.nfa)))
    try:
        return result.localCheckpoint()
    except PythonException as err:
        raise SimulationError(f"a simulation task failed: {_last_line(err)}") from None


def _last_line(err) -> str:
    lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error:" in ln]
    return (errors or lines or ["unknown error"])[-1].strip()
