"""``nfacep vectors`` and ``nfacep regress``: the command line of the Spark testbench
(registered as entry points of ``nfacep.commands``).

``--partitions`` keeps its meaning everywhere: the partitioner's capacity. How many distinct
partition keys to *generate* is ``--keys``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

from nfacep import params, settings
from nfacep.cli import Command
from nfacep.errors import UsageError
from nfacep.sim.build import SIMULATORS, default_mode, default_simulator

from . import BLOCK_TUPLES
from .session import DEFAULT_MASTER

__all__ = ["Regress", "Vectors"]


class Vectors(Command):
    name = "vectors"
    help = "Spark: generate (or take recorded) tuples and their expected matches"
    description = (
        "Generate regression vectors with Spark: Parquet tuples (with seq), the "
        "expected matches of the reference matcher, and a manifest.json. Same seed, "
        "same content, whatever the number of Spark tasks. With --input, the tuples are "
        "a recorded trace (a CSV or Parquet file, or a folder of Parquet part files, read "
        "as `nfacep match` reads its input) instead of generated ones."
    )
    order = 60

    def add_arguments(self, p) -> None:
        super().add_arguments(p)
        _vectors_arguments(p)
        params.add_arguments(p)
        settings.add_argument(p, switches=False)

    def run(self, args) -> int:
        return _vectors(args)


class Regress(Command):
    name = "regress"
    help = "Spark: simulate the gateware over vectors and check its matches"
    description = (
        "Simulate the engine's gateware (emitted and built once) over a vectors "
        "folder written by `nfacep vectors`, in Spark tasks (shards of whole "
        "partition keys when capacity and timers cannot matter, else one global "
        "simulation), and compare its matches and drops with the expected ones. "
        "Prints a mismatch report and writes DIR/regress_report.json; exits 1 on any "
        "difference. The engine parameters are the manifest's unless given."
    )
    order = 70

    def add_arguments(self, p) -> None:
        p.add_argument("query", help="query file (.sql) the vectors were generated from")
        _regress_arguments(p)
        params.add_arguments(p, defaults="the vectors' manifest's")
        settings.add_argument(p, switches=False)

    def run(self, args) -> int:
        return _regress(args)


def _vectors_arguments(p) -> None:
    p.add_argument("--tuples", type=int, metavar="N", help="tuples to generate")
    p.add_argument(
        "--input",
        metavar="FILE|FOLDER",
        help="take the tuples from this recorded trace instead of generating them (a CSV "
        "or Parquet file, or a folder of Parquet part files, as `nfacep match --input` "
        "reads it); excludes --tuples and the other generator options",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="output folder (must not exist, or be empty; written atomically)",
    )
    p.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="random seed: same seed, same content (default 0)",
    )
    p.add_argument(
        "--keys",
        type=int,
        metavar="P",
        help="distinct partition keys to generate (default: --partitions, the "
        "most the partitioner stores without dropping)",
    )
    p.add_argument(
        "--zipf",
        type=float,
        metavar="S",
        help="Zipf exponent of the key frequencies; 0 = uniform (default 1.0)",
    )
    p.add_argument(
        "--plant-rate",
        type=float,
        metavar="F",
        help="share of tuples in planted pattern instances (default 0.02)",
    )
    p.add_argument(
        "--enum-weights",
        action="append",
        default=[],
        metavar="FIELD=LABEL:W,…",
        help="relative label frequencies of an ENUM field (unlisted labels: 0); "
        "repeat for several fields",
    )
    p.add_argument(
        "--block-tuples",
        type=int,
        metavar="B",
        help="tuples per generation block, the unit of determinism; part of the "
        f"content (default {BLOCK_TUPLES})",
    )
    _spark_arguments(
        p,
        tasks="Spark partitions to generate and match in (default: the master's "
        "default parallelism); the content does not depend on it",
    )
    p.add_argument(
        "--expected",
        choices=("auto", "partitioned", "global"),
        default="auto",
        help="how to compute the expected matches: per key in parallel (only when "
        "capacity and timers cannot matter), one exact global pass, or pick "
        "(default %(default)s)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing vectors folder")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _parse_weights(items: list[str]):
    out = []
    for item in items:
        name, eq, rest = item.partition("=")
        if not eq or not name.strip() or not rest.strip():
            raise UsageError(f"--enum-weights {item!r}: write FIELD=LABEL:W,LABEL:W,…")
        pairs = []
        for part in rest.split(","):
            label, colon, w = part.rpartition(":")
            try:
                weight = float(w)
            except ValueError:
                weight = None
            if not colon or weight is None:
                raise UsageError(f"--enum-weights {item!r}: {part!r} is not LABEL:WEIGHT")
            pairs.append((label.strip(), weight))
        out.append((name.strip(), tuple(pairs)))
    return tuple(out)


def _require_spark(command: str = "vectors") -> None:
    if importlib.util.find_spec("pyspark") is None:
        raise UsageError(f"nfacep {command} needs PySpark: pip install 'nfacep[spark]'")
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise UsageError(
            f"nfacep {command} needs Java (17 or 21) for Spark: none on PATH and "
            "JAVA_HOME is not set"
        )


#: the options that describe generated tuples (argparse's names, as the command line spells them)
_GENERATOR_OPTIONS = {
    "tuples": "--tuples",
    "keys": "--keys",
    "seed": "--seed",
    "zipf": "--zipf",
    "plant_rate": "--plant-rate",
    "enum_weights": "--enum-weights",
    "block_tuples": "--block-tuples",
}


def _options(args, partitions: int):
    """The generator's options from the command line; None with --input (a recorded trace),
    which none of them may go with."""
    from .generate import Options

    given = [f for name, f in _GENERATOR_OPTIONS.items() if getattr(args, name) not in (None, [])]
    if args.input is not None:
        if given:
            raise UsageError(
                f"--input takes the tuples from a recorded trace, so {', '.join(given)} "
                "(which describe generated tuples) cannot go with it"
            )
        return None
    if args.tuples is None:
        raise UsageError(
            "give --tuples N to generate tuples, or --input FILE|FOLDER to take a trace"
        )
    keys = args.keys
    if keys is None:
        keys = _default_keys(args.query, partitions)
    return Options(
        tuples=args.tuples,
        seed=0 if args.seed is None else args.seed,
        keys=keys,
        zipf=1.0 if args.zipf is None else args.zipf,
        plant_rate=0.02 if args.plant_rate is None else args.plant_rate,
        block_tuples=BLOCK_TUPLES if args.block_tuples is None else args.block_tuples,
        enum_weights=_parse_weights(args.enum_weights),
    )


def _vectors(args) -> int:
    from . import session, vectors, vectors_plan

    _require_spark()
    import nfacep

    params.from_args(args)  # the options' ranges, before anything is read
    engine = params.from_args(args, nfa=nfacep.compile_file(args.query))
    if args.tasks is not None and args.tasks < 1:
        raise UsageError("--tasks must be at least 1")
    options = _options(args, engine.partitions)
    job = vectors_plan.prepare(
        args.query,
        options,
        args.out,
        params=engine,
        expected=args.expected,
        overwrite=args.overwrite,
        master=args.master,
        param_texts=args.param,
        input=args.input,
    )
    spark, created = session.session(args.master)
    try:
        m = vectors.run(spark, job, tasks=args.tasks, progress=None if args.quiet else _progress)
    finally:
        if created:
            session.stop(spark)
    c = m["counts"]
    per_query = ", ".join(f"{n}: {k}" for n, k in c["matches"].items())
    source = f" from {args.input}" if args.input is not None else ""
    print(
        f"{c['tuples']} tuples{source}, {m['keys_present']} keys, {c['matches_total']} expected "
        f"matches ({per_query}), {c['drops']} dropped; {m['expected']['mode']} pass; "
        f"{m['run']['seconds']['total']:.1f} s -> {args.out}"
    )
    for name, why in m["unplanted"].items():
        print(f"warning: query {name}: {why}", file=sys.stderr)
    return 0


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _default_keys(query: str, partitions: int) -> int:
    """As many keys as the partitioner stores (fewer if the key's types have fewer distinct
    combinations of values)."""
    import nfacep

    from .generate.keys import key_domain

    program = nfacep.compile_file(query).program
    if not program.partition_fields:
        return 1
    return min(partitions, key_domain(program))


def _spark_arguments(p, *, tasks: str) -> None:
    """``--master`` and ``--tasks`` (its help ``tasks``), as both commands take them."""
    p.add_argument(
        "--master", default=DEFAULT_MASTER, metavar="URL", help="Spark master (default %(default)s)"
    )
    p.add_argument("--tasks", type=int, metavar="T", help=tasks)


def _regress_arguments(p) -> None:
    p.add_argument(
        "--vectors",
        required=True,
        metavar="DIR",
        help="vectors folder (tuples.parquet, expected.parquet, drops.parquet, manifest.json)",
    )
    _spark_arguments(
        p,
        tasks="shards to simulate in parallel when the vectors allow a split by key "
        "(default: the master's default parallelism)",
    )
    p.add_argument(
        "--simulator",
        choices=SIMULATORS,
        help="HDL simulator (default verilator when it is installed, else icarus)",
    )
    p.add_argument(
        "--mode",
        choices=("batch", "native"),
        help="how each simulation is fed: batch, the Verilog harness under cocotb; "
        "native, the same harness under a C++ main, no Python while it runs "
        "(--simulator verilator; faster) (default native with verilator, batch with icarus)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="seed of the testbench's random input gaps and output stalls (default %(default)s)",
    )
    p.add_argument(
        "--build-dir",
        metavar="D",
        help="folder caching simulator builds, shared by all Spark tasks (default "
        "$NFACEP_SIM_CACHE or ~/.cache/nfacep/sim); on a multi-machine cluster "
        "it must be on a filesystem every worker sees",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _regress(args) -> int:
    from . import regress, regress_compare, regress_plan, regress_tasks, session
    from .beside import Beside

    _require_spark("regress")
    if args.tasks is not None and args.tasks < 1:
        raise UsageError("--tasks must be at least 1")
    # the fastest exact simulation by default: Verilator's native model when it is installed
    simulator = args.simulator or ("verilator" if args.mode == "native" else default_simulator())
    job = regress_plan.prepare(
        args.query,
        args.vectors,
        given=params.given(args),
        simulator=simulator,
        sim_mode=args.mode or default_mode(simulator),
        build_dir=args.build_dir,
        master=args.master,
        seed=args.seed,
        param_texts=args.param,
    )
    note = "note" if job.mode == "partitioned" else "warning"
    print(f"{note}: {job.reason}", file=sys.stderr)

    progress = None if args.quiet else _progress
    # the engine is emitted and its model built while the JVM starts: both take a while
    building = Beside(lambda: regress_tasks.prebuild(job, progress), "nfacep-prebuild")
    try:
        spark, created = session.session(args.master)
    except Exception:
        building.discard(regress_tasks.Built.remove)
        raise
    try:
        report = regress.run(
            spark, job, tasks=args.tasks, progress=progress, built=building.result()
        )
    finally:
        if created:
            session.stop(spark)
    print(regress_compare.render(report))
    print(f"report -> {args.vectors.rstrip('/')}/{regress.REPORT}")
    return 0 if report["equal"] else 1
