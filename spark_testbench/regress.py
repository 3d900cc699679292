"""Regression: simulate the engine's gateware over a vectors folder and check it in Spark.

:func:`prepare` checks everything a user can get wrong (the vectors folder and its files, the
query file against the manifest's hash, the engine parameters against the manifest's (those not
given are taken from it), the simulator, the master URL), all before Spark starts. :func:`run`
then

1. emits the engine's Verilog **once** (:func:`nfacep.hdl.engine.write_verilog`) and builds the
   simulator model once on the driver, in the simulator build cache, so every Spark task
   simulates that same prebuilt model (:class:`nfacep.sim.Simulation` with ``engine=``);
   ``nfacep regress`` does it while the Spark session starts (:mod:`.beside`);
2. simulates the tuples in Spark tasks (``mapInArrow``): in the manifest's ``partitioned`` mode
   the tuples are split into shards of whole partition keys (hash-partitioned by key), each
   shard simulated alone in ``seq`` order, its record positions (and the starts of the
   matches, for start_seq) mapped back to the global ``seq``. That is exact because capacity
   and timers cannot matter (``vectors.py`` chose the mode for that reason). In ``global``
   mode one task simulates the whole stream. Spark sorts each shard by ``seq`` (spilling to
   disk as it needs), and a task streams: it writes each Arrow batch to the simulation's input
   as it comes and reads the records back a chunk at a time (:class:`Shard`,
   :meth:`nfacep.sim.Simulation.stream`), so its memory is bounded by :data:`PIECE_TUPLES`
   and :data:`RECORD_CHUNK`, not by the shard, even in ``global`` mode;
3. compares the simulated matches with ``expected.parquet`` by a full outer join on
   ``seq, query, partition`` (null-safe: ``partition`` is null without PARTITION), and the
   simulated drops with ``drops.parquet`` on ``seq, partition``. When the expected matches
   have a ``start_seq`` column (a query reports start_seq), a match found on both sides whose
   starts differ (null-safe: null for the queries without start_seq) is a ``wrong_start``;
   when they have measure columns (``measure_NAME``), the values of the simulated matches,
   computed in the task by the one :class:`~nfacep.measures.Measurer` (:class:`_Measures`),
   are compared column by column: a match that differs in one is a ``wrong_measure``;
4. writes ``DIR/regress_report.json`` (atomically): counts by kind (``missing``: expected, not
   simulated; ``extra``: simulated, not expected; ``wrong_start``: both, beginning elsewhere;
   ``wrong_measure``, ``missing_drop``, ``extra_drop``), per query, and the first differing
   rows (with the expected and simulated ``start_seq`` when the vectors have it, and the
   first differing measure's name and values).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

import nfacep
from nfacep.errors import UsageError
from nfacep.io.tuples import Tuples
from nfacep.measures import Measurer
from nfacep.output import write_json
from nfacep.params import PROGRAMMABLE, EngineParams, option
from nfacep.result import partition_cells, partition_texts
from nfacep.settings import ParamValues

from .progress import Progress
from .rows import TASK_ROWS as _RESULT
from .shard import Shard
from .vectors import (
    DROPS,
    EXPECTED,
    FORCED_GLOBAL,
    FORMAT,
    MANIFEST,
    MEASURE,
    START_SEQ,
    TUPLES,
    auto_mode,
    global_starts,
    manifest_params,
    manifest_values,
    measure_columns,
    read_query,
    result_schema,
    with_measures,
)

__all__ = [
    "FIRST",
    "KINDS",
    "PIECE_TUPLES",
    "QUERY_KINDS",
    "RECORD_CHUNK",
    "REPORT",
    "Job",
    "prepare",
    "run",
    "shard_rows",
]

REPORT = "regress_report.json"
REPORT_FORMAT = "nfacep-regress/1"
#: Kinds of difference, in report order.
KINDS = ("missing", "extra", "wrong_start", "wrong_measure", "missing_drop", "extra_drop")
#: Kinds counted per query.
QUERY_KINDS = ("missing", "extra", "wrong_start", "wrong_measure")
#: Differing rows kept in the report.
FIRST = 20
#: In the partitioned mode, shards of about this many tuples at most (more shards than tasks
#: when the stream is long), so that a task holds one shard, not its share of the stream:
#: memory stays bounded by the shard (or by the busiest key, which is never split).
SHARD_TUPLES = 1 << 20
#: A task hands its shard to the simulation in pieces of at most this many tuples (Spark's
#: Arrow batches, cut to it), and reads the records back this many at a time: its memory is
#: bounded by these, not by the shard (read on the driver when the job runs).
PIECE_TUPLES = 1 << 16
RECORD_CHUNK = 1 << 18


@dataclass
class Job:
    """A checked request, ready to run on a Spark session."""

    query_path: str
    query_text: str
    nfa: nfacep.Nfa
    vectors: str  #: absolute path of the vectors folder
    manifest: dict
    params: EngineParams
    simulator: str
    build_dir: Path  #: the simulator build cache
    mode: str  #: "partitioned" (sharded by key) or "global" (one simulation)
    reason: str
    seed: int = 0
    sim_mode: str = "batch"  #: how each simulation is fed: "batch" or "native" (Verilator)
    values: ParamValues | None = None  #: the runtime parameters' values, the manifest's


def _load_manifest(folder: str) -> dict:
    if not os.path.exists(folder):
        raise UsageError(f"--vectors {folder}: no such folder")
    if not os.path.isdir(folder):
        raise UsageError(f"--vectors {folder}: not a folder")
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise UsageError(
            f"--vectors {folder}: no {MANIFEST}; is it a folder written by `nfacep vectors`?"
        ) from None
    except (OSError, ValueError) as err:
        raise UsageError(f"{path}: cannot read it: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else None
        raise UsageError(f"{path}: format {got!r}, not {FORMAT!r}")
    for key in ("query_sha256", "engine", "expected"):
        if key not in manifest:
            raise UsageError(f"{path}: no '{key}'")
    missing = [
        name for name in (TUPLES, EXPECTED, DROPS) if not os.path.isdir(os.path.join(folder, name))
    ]
    if missing:
        raise UsageError(
            f"--vectors {folder}: {', '.join(missing)} missing (the folder is "
            "incomplete; generate it again with `nfacep vectors`)"
        )
    empty = [
        name
        for name in (TUPLES, EXPECTED, DROPS)
        if not any(p.endswith(".parquet") for p in os.listdir(os.path.join(folder, name)))
    ]
    if empty:
        raise UsageError(f"--vectors {folder}: {', '.join(empty)} holds no Parquet file")
    return manifest


def prepare(
    query: str,
    vectors_dir: str,
    *,
    given: dict | None = None,
    simulator: str = "icarus",
    build_dir: str | os.PathLike | None = None,
    master: str | None = None,
    seed: int = 0,
    sim_mode: str = "batch",
    param_texts: list[str] | None = None,
) -> Job:
    """Check the request; raises :class:`NfacepError` subclasses. Nothing here starts Spark.

    ``given`` are the engine parameters given on the command line
    (:func:`nfacep.params.given`); the others are the manifest's, and a given one that differs
    from the manifest's is an error. So for the runtime parameters' values (``param_texts``,
    ``--param name=value``): the manifest's, which given ones must equal.
    """
    from nfacep import sim

    from .session import check_master

    if master is not None:
        check_master(master, connect=False)  # syntax first; reachability last
    _check_simulator(simulator, sim_mode)
    nfa = nfacep.compile_file(query)
    folder = os.path.abspath(vectors_dir)
    manifest = _load_manifest(folder)
    raw = read_query(query)
    _check_digest(raw, manifest, query, vectors_dir)
    params = _params(manifest, given, folder, vectors_dir)
    values = _values(manifest, nfa, param_texts, folder, vectors_dir)
    if params.engine == "programmable":  # the file must fit it: an ImageError now
        from nfacep.image import Capacity, EngineShape, image

        prog = nfa.program
        image(nfa, EngineShape(prog.schema, prog.partition_fields, Capacity.of(params)), values)
    mode = _mode(manifest, folder)
    reason = _reason(mode, manifest)
    if mode == "global" and manifest["expected"].get("reason") == FORCED_GLOBAL:
        # the expected matches of one global pass, but the engine allows a split by key
        keys = manifest["keys_present"]
        auto, why = auto_mode(params, nfa, keys, keys)
        if auto == "partitioned":
            mode, reason = auto, f"shards of whole partition keys, each simulated alone: {why}"
    cache = sim.build_cache(build_dir)
    missing = sim.simulator_available(simulator, cache)
    if missing:
        raise sim.SimulatorMissing(missing)
    if master is not None:
        check_master(master)
    return Job(
        query,
        raw.decode("utf-8"),
        nfa,
        folder,
        manifest,
        params,
        simulator,
        cache,
        mode,
        reason,
        seed,
        sim_mode,
        values,
    )


def _check_simulator(simulator: str, sim_mode: str) -> None:
    from nfacep import sim

    if simulator not in sim.SIMULATORS:
        raise UsageError(
            f"unknown simulator {simulator!r}: choose one of {', '.join(sim.SIMULATORS)}"
        )
    if sim_mode not in ("batch", "native"):
        raise UsageError(f"unknown simulation mode {sim_mode!r}: choose batch or native")
    if sim_mode == "native" and simulator != "verilator":
        raise UsageError(
            "--mode native is a Verilator model with a C++ main: use --simulator verilator"
        )


def _check_digest(raw: bytes, manifest: dict, query: str, vectors_dir: str) -> None:
    """The vectors were generated from this very query file."""
    digest = hashlib.sha256(raw).hexdigest()
    if digest != manifest["query_sha256"]:
        raise UsageError(
            f"--vectors {vectors_dir} was generated from another query file "
            f"({manifest.get('query_file')}, SHA-256 "
            f"{manifest['query_sha256'][:12]}…), not from {query} (SHA-256 "
            f"{digest[:12]}…); generate the vectors of this query with "
            "`nfacep vectors`"
        )


def _params(manifest: dict, given: dict | None, folder: str, vectors_dir: str) -> EngineParams:
    """The manifest's engine parameters, which the given ones must equal; the engine's kind
    and the programmable engine's capacities are the given ones (the expected matches are the
    same for either kind: the programmable engine configured with the file equals it)."""
    have = manifest_params(manifest, os.path.join(folder, MANIFEST))
    given = dict(given or {})
    kind = {name: given.pop(name) for name in ("engine", *PROGRAMMABLE) if name in given}
    if kind.get("engine") != "programmable" and set(kind) & set(PROGRAMMABLE):
        extra = ", ".join(option(n) for n in PROGRAMMABLE if n in kind)
        raise UsageError(f"{extra}: only with --engine programmable")
    params = dataclasses.replace(have, **given)
    if params != have:
        raise UsageError(
            f"--vectors {vectors_dir} describes another engine: it was made with "
            f"{', '.join(have.differences(params))}; pass the same engine "
            "parameters, or none"
        )
    return dataclasses.replace(params, **kind)


def _values(
    manifest: dict, nfa, param_texts: list[str] | None, folder: str, vectors_dir: str
) -> ParamValues | None:
    """The manifest's runtime parameter values, which the given ones must equal."""
    values = manifest_values(manifest, nfa, os.path.join(folder, MANIFEST))
    if param_texts:
        asked = ParamValues.parse(
            nfa.program.parameters, param_texts, switches=False, command="regress"
        )
        if values is None or asked.initial != values.initial:
            raise UsageError(
                f"--vectors {vectors_dir} was made with other runtime parameter "
                f"values ({values.as_dict()['initial'] if values else 'none'}); "
                "pass the same --param values, or none"
            )
    return values


def _mode(manifest: dict, folder: str) -> str:
    """How the expected matches were computed: "partitioned" or "global"."""
    mode = manifest["expected"].get("mode")
    if mode not in ("partitioned", "global"):
        raise UsageError(
            f"{os.path.join(folder, MANIFEST)}: expected.mode {mode!r} is neither "
            "'partitioned' nor 'global'"
        )
    return mode


def _reason(mode: str, manifest: dict) -> str:
    """Why the regression's split of the stream is exact (or why it is not split)."""
    if mode == "partitioned":
        return (
            "shards of whole partition keys, each simulated alone: exact because "
            f"{manifest['expected'].get('reason', 'capacity and timers cannot matter')}"
        )
    return (
        "one global simulation of the whole stream, not split into shards: "
        f"{manifest['expected'].get('reason', '')} (a split by key is exact only "
        "when capacity and timers cannot matter)"
    )


# --- the prebuilt model -------------------------------------------------------------------------


@dataclass
class Built:
    """The engine emitted and its model built (:func:`prebuild`), for :func:`run`."""

    folder: Path  #: a temporary folder in the build cache: the query and Verilog copies
    query: str
    engine: tuple[str, str | None]  #: the Verilog and the programmable engine's image words
    depth: int  #: the batch memory's depth, the same in every task
    seconds: float

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def prebuild(job: Job, progress=None) -> Built:
    """Emit the engine and build its model once (step 1 of the module's docstring), before or
    beside the Spark session (:class:`.beside.Beside`)."""
    t0 = time.perf_counter()
    if progress is not None:
        progress(f"regress: emitting the engine and building the {job.simulator} model once")
    job.build_dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="regress-", dir=job.build_dir))
    try:
        depth = _batch_depth(job)
        query, engine_v, image = _prebuild(job, folder, depth)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Built(folder, query, (engine_v, image), depth, time.perf_counter() - t0)


def _prebuild(job: Job, folder: Path, depth: int) -> tuple[str, str, str | None]:
    """Emit the engine into ``folder`` and build its simulator model (with a batch memory of
    ``depth`` tuples) in the build cache, once.

    Returns the paths of the query copy, the Verilog every task simulates and, for the
    programmable engine, the configuration port's words of the query's image, made once
    here (:func:`configure`) and loaded by every task before its tuples.
    """
    from nfacep import sim

    query = folder / "query.sql"
    query.write_text(job.query_text, encoding="utf-8")
    engine_v = folder / "engine.v"
    image = None
    if job.params.engine == "programmable":
        from nfacep.hdl.programmable import write_verilog
        from nfacep.sim.runner import write_words

        sidecar = write_verilog(job.nfa, str(engine_v), job.params, values=job.values)
        image = folder / "image.hex"
        write_words(image, configure(job.nfa, sidecar, job.values))
    else:
        from nfacep.hdl.engine import write_verilog

        write_verilog(job.nfa, str(engine_v), job.params, values=job.values)
    sim.prebuild(
        engine_v,
        simulator=job.simulator,
        build_dir=job.build_dir,
        batch_depth=depth,
        native=job.sim_mode == "native",
    )
    return str(query), str(engine_v), None if image is None else str(image)


def configure(nfa, sidecar: dict, values) -> list[int]:
    """The words that configure the programmable engine of ``sidecar`` with ``nfa``'s image
    (:func:`nfacep.sim.runner.configuration`); one place, so that a test can load a damaged
    image into every task."""
    from nfacep.sim.runner import configuration

    return configuration(nfa, sidecar, values)


def _batch_depth(job: Job) -> int:
    """One batch memory for every task (one model, prebuilt): the depth for the whole
    stream, at most the largest (a longer shard runs in several batches)."""
    from nfacep.sim.harness import depth_for

    return depth_for(int(job.manifest.get("tuples", 0)))


def shard_rows(nfa, result, seq: np.ndarray, keys: Tuples, cells=None) -> pa.RecordBatch:
    """The rows (:func:`~.vectors.result_schema`) of a shard's simulated matches and drops in
    ``result`` (a chunk of them): positions in the shard mapped to the global ``seq``, and so
    the starts; ``cells``: the matches' measure columns (:class:`_Measures`)."""
    m, d = len(result.seqs), len(result.drops)
    names = np.array(result.names, dtype=object)
    kinds = np.array(["match", "drop"], dtype=object)
    if cells is not None:
        cells = [[*c, *([None] * d)] for c in cells]
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(np.concatenate([seq[result.seqs], seq[result.drops]]), pa.int64()),
            pa.array(
                np.concatenate([names[result.queries], np.full(d, None, dtype=object)]), pa.string()
            ),
            pa.array(
                partition_cells(list(result.partitions) + partition_texts(nfa, keys, result.drops)),
                pa.string(),
            ),
            pa.array(np.repeat(kinds, [m, d]), pa.string()),
            pa.concat_arrays([global_starts(seq, result.starts, m), pa.nulls(d, pa.int64())]),
        ],
        schema=_RESULT,
    )
    return with_measures(batch, nfa, cells)


@dataclass
class _Matches:
    """Some of a simulation's matches, as :meth:`nfacep.measures.Measurer.cells` reads them."""

    seqs: np.ndarray
    queries: np.ndarray
    starts: np.ndarray | None
    live: np.ndarray


class _Measures:
    """The measure values of a shard's simulated matches, computed by the one
    :class:`~nfacep.measures.Measurer` (as ``match`` and ``vectors`` compute them) from the
    shard's tuples, which :class:`Shard` keeps on disk.

    A measurer is fed the stream in order and carries from piece to piece only the tuples
    where a match may still begin, which the reference matcher tells it and the gateware does
    not. So the records are read twice: :meth:`scan` notes, for each tuple where a simulated
    match begins, the last tuple where one of those matches ends (a file beside the shard's);
    :meth:`cells` then feeds the shard's tuples in pieces of ``rows`` up to each chunk's last
    match, carrying the tuples a later match begins at. Memory: a piece, the carried tuples."""

    def __init__(self, nfa, shard: Shard, rows: int):
        self.measurer = Measurer(nfa.program)
        self.shard = shard
        self.rows = rows
        self.reach: np.ndarray | None = None
        self.live = np.zeros(0, dtype=np.int64)

    def scan(self, chunks) -> None:
        """Pass one over the records: where the matches beginning at each tuple end."""
        n = self.shard.n
        path = self.shard.folder / "reach.i64"
        reach = np.memmap(path, dtype=np.int64, mode="w+", shape=(max(n, 1),))
        reach[:] = -1
        for result in chunks:
            if result.starts is not None and len(result.seqs):
                have = result.starts >= 0
                np.maximum.at(reach, result.starts[have], result.seqs[have])
        reach.flush()
        self.reach = reach

    def cells(self, result, seq: np.ndarray) -> list[list[str]]:
        """Pass two: the measure columns of the matches of ``result`` (the next chunk)."""
        assert self.reach is not None, "scan() first"
        m = self.measurer
        out: list[list[str]] = [[] for _ in m.columns]
        seqs = result.seqs
        if not len(seqs):
            return out
        if int(seqs[0]) < m.n:  # a record is a tuple's: its matches never span two chunks
            raise RuntimeError(f"the records of tuple {int(seqs[0])} came in two chunks")
        stop, lo = int(seqs[-1]) + 1, 0
        while m.n < stop:
            a = m.n
            b = min(stop, a + self.rows)
            hi = int(np.searchsorted(seqs, b))
            known = np.concatenate([self.live, np.arange(a, b, dtype=np.int64)])
            self.live = known[self.reach[known] >= b]
            starts = None if result.starts is None else result.starts[lo:hi]
            part = _Matches(seqs[lo:hi], result.queries[lo:hi], starts, self.live)
            names = self.shard.kept
            for column, cells in zip(
                out, m.cells(part, self.shard.tuples(names, a, b), seq), strict=True
            ):
                column += cells
            lo = hi
        return out


# --- the Spark task (runs in Python workers; module-level so it pickles by reference) -------


def _sim_task(
    query: str,
    engine: tuple[str, str | None],
    params: EngineParams,
    simulator: str,
    build_dir: str,
    seed: int,
    batch_depth: int,
    sim_mode: str,
    values,
    piece_rows: int,
    record_rows: int,
    counter,
    batches,
):
    """Simulate the tuples of one Spark partition (one shard, which Spark sorted by ``seq``)
    as they come; adds them to ``counter`` (a :class:`~.progress.Counter`).

    Streams, so that a task holds neither its shard nor its matches: each incoming Arrow
    batch is converted and written to the simulation's input as it comes (:class:`Shard`,
    pieces of at most ``piece_rows`` tuples), and the records are read back ``record_rows`` at
    a time (:meth:`nfacep.sim.SimRun.chunks`), each chunk yielded as a batch of rows. The
    simulation numbers the shard's tuples 0..m-1: a record's position and a match's start
    (start_seq) are both mapped back to the global ``seq`` through the shard's ``seq`` column
    (on disk). ``engine``: the prebuilt Verilog and, for the programmable engine, the
    file of its configuration words (:func:`_prebuild`).
    """
    from nfacep import sim

    engine_v, image = engine
    batches = (b for b in batches if b.num_rows)
    head = next(batches, None)
    if head is None:
        counter.finished()
        return
    nfa = _compiled(query)
    reported = 0

    def simulated(done: int) -> None:  # (batches as they end: the progress lines move)
        nonlocal reported
        counter.add(done - reported)
        reported = done

    first = int(head.column("seq")[0].as_py())
    simulation = sim.Simulation(
        sim.SimOptions(
            simulator=simulator,
            build_dir=build_dir,
            engine=engine_v,
            seed=seed + first,
            batch_depth=batch_depth,
            mode=sim_mode,
            image=image,
        ),
        progress=simulated if sim_mode != "cycle" else None,
    )
    keep = tuple(m.field for q in nfa.program.queries for m in q.measures if m.field)
    with tempfile.TemporaryDirectory(prefix="shard-", dir=build_dir) as folder:
        shard = Shard(nfa.program, Path(folder), piece_rows, source=TUPLES, keep=keep)
        with simulation.stream(
            nfa, shard.pieces(itertools.chain([head], batches)), params, values
        ) as ran:
            measures = None
            if measure_columns(nfa):
                measures = _Measures(nfa, shard, piece_rows)
                measures.scan(ran.chunks(record_rows))
            for result in ran.chunks(record_rows):
                if len(result.seqs) or len(result.drops):
                    # (the columns mapped afresh for each chunk, and unmapped after it: the
                    # pages a chunk reads do not stay resident for the rest of the shard)
                    seq = shard.seq()
                    cells = None if measures is None else measures.cells(result, seq)
                    yield shard_rows(nfa, result, seq, shard.keys(), cells)
            cycles = ran.cycles
        n = shard.n
    counter.add(n - reported)
    counter.finished()
    yield _shard_row(nfa, n, cycles)


def _shard_row(nfa, n: int, cycles: int) -> pa.RecordBatch:
    """The row that closes a shard: seq = tuples simulated, partition = clock cycles taken."""
    row = pa.RecordBatch.from_arrays(
        [
            pa.array([n], pa.int64()),
            pa.nulls(1, pa.string()),
            pa.array([str(cycles)]),
            pa.array(["shard"]),
            pa.nulls(1, pa.int64()),
        ],
        schema=_RESULT,
    )
    return with_measures(row, nfa, None)


@functools.lru_cache(maxsize=4)
def _compiled(path: str):
    return nfacep.compile_file(path)


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

    from .vectors import _spark_schema

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


def _compare(spark, job: Job, result) -> dict:
    """The report of the simulated ``result`` rows against the vectors' expected ones."""
    from pyspark.sql import functions as F

    expected = spark.read.parquet(os.path.join(job.vectors, EXPECTED))
    #: the vectors say where matches begin (a query reports start_seq): compare that too
    starts = START_SEQ in expected.columns
    #: and the measures' values (vectors made before they were written have none)
    measures = [c for c in measure_columns(job.nfa) if c in expected.columns]
    keys = ("seq", "query", "partition")
    expected = expected.select(*keys, *([START_SEQ] if starts else []), *measures)
    drops = spark.read.parquet(os.path.join(job.vectors, DROPS)).select("seq", "partition")
    got = result.filter(F.col("kind") == "match").select(
        *keys, *([F.col("start").alias(START_SEQ)] if starts else []), *measures
    )
    got_drops = result.filter(F.col("kind") == "drop").select("seq", "partition")
    diffs = _outer(
        expected, got, keys, "missing", "extra", start=starts, measures=measures
    ).unionByName(_outer(drops, got_drops, ("seq", "partition"), "missing_drop", "extra_drop"))
    diffs = diffs.localCheckpoint()
    counts, by_query = _tally(diffs, [q.name for q in job.nfa.queries])
    first = _first(diffs, starts, bool(measures))
    totals = {
        "expected": expected.count(),
        "simulated": got.count(),
        "expected_drops": drops.count(),
        "simulated_drops": got_drops.count(),
    }
    diffs.unpersist()
    total = sum(counts.values())
    return {
        "format": REPORT_FORMAT,
        "query_file": job.query_path,
        "vectors": job.vectors,
        "query_sha256": job.manifest["query_sha256"],
        "engine": job.params.as_dict(),
        "simulator": job.simulator,
        "sim_mode": job.sim_mode,
        "mode": job.mode,
        "reason": job.reason,
        "start_seq": starts,  # whether where the matches begin was compared
        # the measure columns whose values were compared (the match file's names)
        "measures": [c[len(MEASURE) :] for c in measures],
        "equal": total == 0,
        "counts": {**totals, **counts, "differences": total},
        "by_query": by_query,
        "first": first,
    }


def _outer(left, right, cols, missing: str, extra: str, start: bool = False, measures=()):
    """The rows of ``left`` and ``right`` (equal on ``cols``) that are in only one of them,
    with kind ``missing`` or ``extra`` (and, with ``start``, ``wrong_start`` where their
    start_seq differ; then ``wrong_measure`` where a column of ``measures`` differs): seq,
    query, partition, kind, expected_start, simulated_start, and the first differing
    measure's name and values (measure, expected_value, simulated_value)."""
    from pyspark.sql import functions as F

    no_start = F.lit(None).cast("long")
    no_text = F.lit(None).cast("string")
    e = left.withColumn("_e", F.lit(True)).alias("e")
    g = right.withColumn("_g", F.lit(True)).alias("g")
    cond = None
    for c in cols:
        eq = F.col(f"e.{c}").eqNullSafe(F.col(f"g.{c}"))
        cond = eq if cond is None else cond & eq
    joined = e.join(g, cond, "full_outer")
    kind = F.when(F.col("g._g").isNull(), F.lit(missing)).when(F.col("e._e").isNull(), F.lit(extra))
    if start:  # on both sides: null-safe, null for the queries without start_seq
        kind = kind.when(
            ~F.col(f"e.{START_SEQ}").eqNullSafe(F.col(f"g.{START_SEQ}")), F.lit("wrong_start")
        )
    # the first measure column whose values differ (null-safe), if any
    differs = [(c, ~F.col(f"e.`{c}`").eqNullSafe(F.col(f"g.`{c}`"))) for c in measures]
    if differs:
        kind = kind.when(
            functools.reduce(lambda a, b: a | b, (d for _, d in differs)), "wrong_measure"
        )

    def first_differing(side: str | None):
        if not differs:
            return no_text
        return F.coalesce(
            *(
                F.when(d, F.lit(c[len(MEASURE) :]) if side is None else F.col(f"{side}.`{c}`"))
                for c, d in differs
            )
        )

    return joined.select(
        F.coalesce(F.col("e.seq"), F.col("g.seq")).alias("seq"),
        (
            F.coalesce(F.col("e.query"), F.col("g.query"))
            if "query" in cols
            else F.lit(None).cast("string")
        ).alias("query"),
        F.coalesce(F.col("e.partition"), F.col("g.partition")).alias("partition"),
        kind.alias("kind"),
        (F.col(f"e.{START_SEQ}") if start else no_start).alias("expected_start"),
        (F.col(f"g.{START_SEQ}") if start else no_start).alias("simulated_start"),
        first_differing(None).alias("measure"),
        first_differing("e").alias("expected_value"),
        first_differing("g").alias("simulated_value"),
    ).filter(F.col("kind").isNotNull())


def _tally(diffs, names: list[str]) -> tuple[dict, dict]:
    """(differences per kind, differences per query and kind) of the difference rows."""
    counts = dict.fromkeys(KINDS, 0)
    by_query = {n: dict.fromkeys(QUERY_KINDS, 0) for n in names}
    for r in diffs.groupBy("kind", "query").count().collect():
        counts[r["kind"]] += r["count"]
        if r["query"] is not None:
            by_query.setdefault(r["query"], dict.fromkeys(QUERY_KINDS, 0))[r["kind"]] = r["count"]
    return counts, by_query


def _first(diffs, starts: bool, measures: bool) -> list[dict]:
    """The first :data:`FIRST` differences, in stream order, for the report."""
    return [
        {
            "kind": r["kind"],
            "seq": r["seq"],
            "query": r["query"],
            "partition": r["partition"],
            **(
                {
                    "expected_start_seq": r["expected_start"],
                    "simulated_start_seq": r["simulated_start"],
                }
                if starts
                else {}
            ),
            **(
                {
                    "measure": r["measure"],
                    "expected_value": r["expected_value"],
                    "simulated_value": r["simulated_value"],
                }
                if measures
                else {}
            ),
        }
        for r in diffs.orderBy("seq", "query", "kind").limit(FIRST).collect()
    ]


def render(report: dict) -> str:
    """The report as text, for stdout."""
    c = report["counts"]
    lines = [
        f"{report['tuples']} tuples, {report['shards']['simulated']} shard(s) simulated "
        f"({report['mode']}), {report['simulator']} ({report.get('sim_mode', 'batch')}), "
        f"{report['cycles']} cycles",
        f"expected {c['expected']} matches and {c['expected_drops']} drops; simulated "
        f"{c['simulated']} matches and {c['simulated_drops']} drops",
    ]
    if report["equal"]:
        lines.append("OK: the gateware's matches and drops equal the expected ones")
        return "\n".join(lines)
    starts = report.get("start_seq", False)
    measures = bool(report.get("measures"))
    shown = [
        k for k in KINDS if (starts or k != "wrong_start") and (measures or k != "wrong_measure")
    ]
    kinds = ", ".join(f"{c.get(k, 0)} {k.replace('_', ' ')}" for k in shown)
    lines.append(
        f"DIFFERENT: {c['differences']} differences ({kinds}); missing = expected but "
        "not reported by the gateware, extra = reported but not expected"
        + (", wrong start = reported as expected but with another start_seq" if starts else "")
        + (
            ", wrong measure = reported as expected but a measure's value differs"
            if measures
            else ""
        )
    )
    for name, k in report["by_query"].items():
        if any(k.get(kind) for kind in QUERY_KINDS):
            lines.append(
                f"  query {name}: "
                + ", ".join(
                    f"{k.get(kind, 0)} {kind.replace('_', ' ')}"
                    for kind in QUERY_KINDS
                    if kind in shown
                )
            )
    rows = report["first"]
    lines.append(f"first {len(rows)} differences:")
    head = ("kind", "seq", "query", "partition")
    if starts:
        head += ("expected start_seq", "simulated start_seq")
    if measures:
        head += ("measure", "expected value", "simulated value")

    def text(v):
        return "-" if v is None else str(v) or '""'

    table = [head] + [
        (
            r["kind"],
            str(r["seq"]),
            r["query"] or "-",
            text(r["partition"]),
            *((text(r["expected_start_seq"]), text(r["simulated_start_seq"])) if starts else ()),
            *(
                (text(r["measure"]), text(r["expected_value"]), text(r["simulated_value"]))
                if measures
                else ()
            ),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        lines.append(
            "  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        )
    return "\n".join(lines)
