"""The simulation inside the Spark tasks of ``nfacep regress``: the engine's model built once on
the driver (:func:`prebuild`, :class:`Built`), then in each task a shard's tuples streamed
through the simulation and its records (with the matches' starts and measures) turned into rows
of the expected matches' schema.
"""

from __future__ import annotations

import functools
import itertools
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

import nfacep
from nfacep.io.tuples import Tuples
from nfacep.measures import Measurer
from nfacep.params import EngineParams
from nfacep.result import partition_cells, partition_texts

from .layout import TUPLES, global_starts, measure_columns, with_measures
from .regress_plan import Job
from .rows import TASK_ROWS as _RESULT
from .shard import Shard

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
        from nfacep.sim.launch import write_words

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
    (:func:`nfacep.sim.contract.configuration`); one place, so that a test can load a damaged
    image into every task."""
    from nfacep.sim.contract import configuration

    return configuration(nfa, sidecar, values)


def _batch_depth(job: Job) -> int:
    """One batch memory for every task (one model, prebuilt): the depth for the whole
    stream, at most the largest (a longer shard runs in several batches)."""
    from nfacep.sim.harness import depth_for

    return depth_for(int(job.manifest.get("tuples", 0)))


def shard_rows(nfa, result, seq: np.ndarray, keys: Tuples, cells=None) -> pa.RecordBatch:
    """The rows (:func:`~.layout.result_schema`) of a shard's simulated matches and drops in
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
