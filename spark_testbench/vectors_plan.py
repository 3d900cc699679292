"""Planning ``nfacep vectors``: everything a user can get wrong (query file, options, parameters,
output folder) checked before Spark starts, and the request that results (:class:`Job`), which
:func:`nfacep.spark_testbench.vectors.run` then carries out.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import nfacep
from nfacep.errors import NfacepError, UsageError
from nfacep.lang.types import EnumType
from nfacep.output import probe_folder
from nfacep.params import EngineParams
from nfacep.settings import ParamValues

from .generate import Generator, Options
from .layout import MANIFEST


@dataclass
class Job:
    """A checked request, ready to run on a Spark session."""

    query_path: str
    query_text: str
    query_sha256: str
    nfa: nfacep.Nfa
    generator: Generator | None  #: None: the tuples are the recorded trace ``input``
    params: EngineParams
    out: str
    expected: str  #: "auto", "partitioned" or "global"
    overwrite: bool
    values: ParamValues | None = None  #: the runtime parameters' (starting) values
    input: str | None = None  #: the recorded trace (a tuple file or folder), if not generated


def prepare(
    query: str,
    options: Options | None,
    out: str,
    *,
    params: EngineParams = EngineParams(),
    expected: str = "auto",
    overwrite: bool = False,
    master: str | None = None,
    param_texts: list[str] | None = None,
    input: str | None = None,
) -> Job:
    """Check the request and build the generator; raises :class:`NfacepError` subclasses.
    ``param_texts``: the ``--param name=value`` of the runtime parameters (starting values
    only: the expected matches are the engine's after a reset). ``input``: a recorded trace
    (tuple file or folder) to take the tuples from, instead of generating them; ``options``
    is then None (its values are read when the job runs).

    Nothing here starts Spark. ``master``, when given, is checked too (see
    :func:`nfacep.spark_testbench.session.check_master`).
    """
    from .session import check_master

    if master is not None:
        check_master(master, connect=False)  # syntax first; reachability last
    if (options is None) == (input is None):
        raise ValueError("vectors.prepare: give the generator's options or an input, not both")
    if options is not None:
        _check_options(options)
    if expected not in ("auto", "partitioned", "global"):
        raise UsageError(f"--expected {expected!r}: use auto, partitioned or global")
    if input is not None and not os.path.exists(input):
        raise UsageError(f"--input {input}: no such file or folder")
    if input is not None:
        from nfacep.io.reader import check_input

        check_input(input)
    raw = read_query(query)
    nfa = nfacep.compile_file(query)
    program = nfa.program
    values = (
        ParamValues.parse(program.parameters, param_texts, switches=False, command="vectors")
        if program.parameters or param_texts
        else None
    )
    _check_stream(query, program, options)
    if expected == "partitioned":
        _check_partitioned(options, params)
    _check_out(out, overwrite)
    if master is not None:
        check_master(master)
    generator = None if options is None else Generator(nfa, options, values or None)
    return Job(
        query,
        raw.decode("utf-8"),
        hashlib.sha256(raw).hexdigest(),
        nfa,
        generator,
        params,
        out,
        expected,
        overwrite,
        values or None,
        input,
    )


def _check_options(options: Options) -> None:
    """The generator's options, each on its own."""
    if options.tuples < 1:
        raise UsageError("--tuples must be at least 1")
    if options.seed < 0:
        raise UsageError("--seed must be 0 or more")
    if options.keys < 1:
        raise UsageError("--keys must be at least 1")
    if not options.zipf >= 0:
        raise UsageError("--zipf must be 0 (uniform keys) or more")
    if not 0 <= options.plant_rate <= 0.5:
        raise UsageError("--plant-rate must be between 0 and 0.5")
    if options.block_tuples < 1:
        raise UsageError("--block-tuples must be at least 1")


def read_query(query: str) -> bytes:
    """The bytes of the query file (hashed into the manifest); an error names it."""
    try:
        with open(query, "rb") as f:
            return f.read()
    except OSError as err:
        raise NfacepError(f"{query}: cannot read the query file: {err.strerror or err}") from None


def check_fields(query: str, program) -> None:
    """The query's stream against the tuples' layout on Spark (``vectors``, ``regress``,
    ``match --master``): no field named ``seq``, the name of their sequence-number column."""
    if "seq" in program.schema.names:
        raise UsageError(
            f"{query}: stream '{program.schema.name}' has a field named 'seq', "
            "which the sequence-number column of the tuples on Spark would shadow; "
            "rename the field"
        )


def _check_stream(query: str, program, options: Options | None) -> None:
    """The options against the query's stream: its fields, ENUM weights and partitioning."""
    check_fields(query, program)
    if options is None:  # a recorded trace: nothing generated
        return
    _check_weights(options, program.schema)
    if not program.partition_fields and options.keys != 1:
        raise UsageError(
            f"--keys {options.keys}: the queries of {query} have no PARTITION "
            "clause, so there is one stream and no keys to generate"
        )


def _check_partitioned(options: Options | None, params: EngineParams) -> None:
    """``--expected partitioned`` holds only where no partition is expired or dropped."""
    if params.tick_tuples:
        raise UsageError(
            "--expected partitioned: with --tick-tuples the timers expire "
            "partitions, which only a global pass models"
        )
    if options is not None and options.keys > params.partitions:
        raise UsageError(
            f"--expected partitioned: --keys {options.keys} is more than the "
            f"partitioner stores (--partitions {params.partitions}), so it may "
            "drop tuples, which only a global pass models"
        )


def _check_weights(options: Options, schema) -> None:
    for name, pairs in options.enum_weights:
        f = schema.field(name) if name in schema.names else None
        if f is None or not isinstance(f.type, EnumType):
            raise UsageError(
                f"--enum-weights: '{name}' is not an ENUM field of stream '{schema.name}'"
            )
        for label, w in pairs:
            if label not in f.type.labels:
                raise UsageError(f"--enum-weights: '{label}' is not a label of {name} {f.type}")
            if not w >= 0:
                raise UsageError(f"--enum-weights: weight {w} of '{label}' is negative")
        if not sum(w for _, w in pairs) > 0:
            raise UsageError(f"--enum-weights: the weights of {name} add up to 0")


def _check_out(out: str, overwrite: bool) -> None:
    path = os.path.abspath(out)
    parent = os.path.dirname(path)
    # tried, not asked (os.access): root passes any permission check, and a read-only or
    # pseudo file system is found only by writing; before Spark starts
    probe_folder(parent, f"--out {out}")
    if os.path.lexists(path):
        if not os.path.isdir(path):
            raise UsageError(f"--out {out}: exists and is not a folder")
        if os.listdir(path):
            if not overwrite:
                raise UsageError(
                    f"--out {out}: exists and is not empty (add --overwrite to "
                    "replace earlier vectors)"
                )
            if not os.path.isfile(os.path.join(path, MANIFEST)):
                raise UsageError(
                    f"--out {out}: --overwrite only replaces a vectors folder "
                    f"(one with a {MANIFEST}); this one has none"
                )


def _mode(job: Job, keys_present: int | None) -> tuple[str, str]:
    """Pick the pass; ``keys_present`` is only needed when more keys were generated than the
    partitioner stores (None: not counted)."""
    keys = job.generator.keys if job.generator is not None else keys_present
    switches = job.values is not None and bool(job.values.switches)
    auto = auto_mode(
        job.params, job.nfa, keys, keys_present, switches=switches, trace=job.generator is None
    )
    if job.expected == "auto" or job.expected == auto[0]:
        return auto
    if job.expected == "global":
        return "global", FORCED_GLOBAL
    raise UsageError(f"--expected partitioned: {auto[1]}")


#: The reason a manifest gives when ``--expected global`` forced the global pass.
FORCED_GLOBAL = "forced with --expected global"


def auto_mode(
    e: EngineParams,
    nfa: nfacep.Nfa,
    keys: int | None,
    keys_present: int | None,
    *,
    switches: bool = False,
    trace: bool = False,
) -> tuple[str, str]:
    """``("partitioned", why)`` when neither capacity nor timers can matter for the engine
    ``e`` on a stream of ``keys`` generated keys (``keys_present`` present, counted when more
    were generated than it stores), nor runtime parameters switching at stream positions
    (``switches``, ``match --master``'s ``--param NAME=VALUE@SEQ``), so that each key's
    sub-stream evolves alone; else ``("global", why)``. ``vectors`` and ``match --master`` pick
    their pass by it, ``regress`` its split. ``trace``: the keys are a recorded trace's (those
    present), not generated ones."""
    key = nfa.program.key
    if not key.names:
        auto = ("global", "the queries have no PARTITION clause: the stream is one sub-stream")
    elif switches:
        auto = (
            "global",
            "the runtime parameters switch at positions in the whole stream (--param "
            "NAME=VALUE@SEQ), which a key's sub-stream does not know",
        )
    elif e.tick_tuples:
        auto = (
            "global",
            f"timers matter: a tick every {e.tick_tuples} tuples expires idle "
            "partitions, which depends on the position in the whole stream",
        )
    elif e.tabled:
        auto = _table_mode(e, key.width, keys, "present" if trace else "generated")
    elif keys > e.partitions and keys_present > e.partitions:
        auto = (
            "global",
            f"capacity matters: {keys_present} keys present and the partitioner "
            f"stores {e.partitions}, so it fills and drops tuples",
        )
    else:
        n = keys if keys <= e.partitions else keys_present
        auto = (
            "partitioned",
            f"at most {n} keys, no more than --partitions {e.partitions}, "
            "and no ticks: no partition is ever dropped or expired, so each "
            "key's sub-stream is matched on its own",
        )
    return auto


def _table_mode(e: EngineParams, bits: int, keys: int, how: str) -> tuple[str, str]:
    if bits <= e.index_bits:
        return (
            "partitioned",
            f"--store table with {e.partitions} entries indexes every "
            f"{bits}-bit key directly: no tuple is ever dropped, so each key's "
            "sub-stream is matched on its own",
        )
    if keys <= e.ways:
        return (
            "partitioned",
            f"at most {keys} keys, no more than --ways {e.ways}: no bucket of "
            "the table fills, so each key's sub-stream is matched on its own",
        )
    return (
        "global",
        f"capacity matters: a bucket of the table holds {e.ways} "
        f"{'key' if e.ways == 1 else 'keys'} and {keys} are {how}, so a bucket may fill "
        "and drop tuples",
    )
