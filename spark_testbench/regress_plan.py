"""Planning ``nfacep regress``: the vectors' manifest read and checked against the query file, the
engine parameters and runtime values taken from it, the simulator checked and the mode (split
by key or not) chosen, all before Spark starts (:func:`prepare`, :class:`Job`), which
:func:`nfacep.spark_testbench.regress.run` then carries out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import nfacep
from nfacep.errors import UsageError
from nfacep.params import PROGRAMMABLE, EngineParams, option
from nfacep.settings import ParamValues

from .layout import DROPS, EXPECTED, FORMAT, MANIFEST, TUPLES, manifest_params, manifest_values
from .vectors_plan import FORCED_GLOBAL, auto_mode, read_query


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
    cache = sim.checked_cache(build_dir)
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
