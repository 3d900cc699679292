"""The engine's parameters: one frozen value, its defaults, its limits, its command-line options.

Every command that models or builds the engine (``match``, ``verilog``, ``sim``, ``vectors``,
``regress``, ``build``, ``run``) describes one engine with the same :class:`EngineParams`: the
reference matcher models it, the gateware is built from it, the simulation, the board link and
the Spark testbench record it and check it against what they are handed. A parameter is
defined once, in :class:`EngineParams` (its default, its range, its option and help text);
:func:`add_arguments` and :func:`from_args` derive the options from those definitions.

**The default engine** of a query file is :func:`default_engine`, the one definition every
command uses (``build`` then fits it to the board, :func:`nfacep.boards.defaults.board_engine`):
the table store (``--store table``), sized so that a partition key of up to
:data:`DIRECT_KEY_BITS` bits is never dropped (direct-indexed: ``2**bits`` entries, at least
:data:`MIN_ENTRIES`), a wider key hashed into :data:`HASHED_ENTRIES` entries of ``--ways``
buckets; a query without PARTITION gets the smallest engine (a one-entry table). Options given
on the command line win; ``--store sdram`` alone gets the same sizing with the SDRAM's limits
(:data:`SDRAM_KEY_BITS`, :data:`SDRAM_ENTRIES`), halved until the table fits the chip (an
entry of a wide key or with timers takes more than one word); ``--store pipeline`` alone gets
the swap pipeline with :class:`EngineParams`' own ``--partitions`` (256). :class:`EngineParams`'
field defaults are those of the values the query does not decide (timers, ways) and of an
engine built through the Python API without a query.

Whether the queries fit one engine (the limits of :mod:`nfacep.limits`) is :func:`check_fits`.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import HardwareLimitError, UsageError
from .limits import MAX_KEY_BITS, MAX_PREDICATES, MAX_STATES

if TYPE_CHECKING:
    from .nfa import Nfa

__all__ = [
    "DIRECT_KEY_BITS",
    "ENGINES",
    "ENGINE_FIT",
    "HASHED_ENTRIES",
    "MIN_ENTRIES",
    "PROGRAMMABLE",
    "SDRAM_ENTRIES",
    "SDRAM_KEY_BITS",
    "SDRAM_PARTITIONS",
    "STORES",
    "STORE_OPTIONS",
    "EngineParams",
    "add_arguments",
    "check_fits",
    "default_engine",
    "from_args",
]


def _param(
    default: int,
    *,
    lo: int,
    hi: int,
    metavar: str,
    help: str,
    hint: str,
    low: str | None = None,
    shown: str | None = None,
):
    """A parameter's definition: its default, its range and what the command line says of it.

    ``low`` is the message when a value is below ``lo``; ``hint`` what to do when it is above
    ``hi`` (the engine's limit); ``shown`` the default the help states when the commands'
    (:func:`default_engine`) is not ``default``.
    """
    return field(
        default=default,
        metadata={
            "shown": shown or str(default),
            "lo": lo,
            "hi": hi,
            "metavar": metavar,
            "help": help,
            "hint": hint,
            "low": low or f"must be at least {lo}",
        },
    )


def _choice(default: str, *, choices: tuple[str, ...], help: str, shown: str | None = None):
    """A parameter that takes one of ``choices`` (a word)."""
    return field(
        default=default,
        metadata={
            "choices": choices,
            "metavar": "{" + ",".join(choices) + "}",
            "help": help,
            "shown": shown or default,
        },
    )


STORES = ("pipeline", "table", "sdram")
#: the stores that keep partitions as the table does (entries, buckets of ways)
TABLE_STORES = ("table", "sdram")
#: --partitions at most, on chip (pipeline, table); --store sdram takes up to the field's limit
ON_CHIP_PARTITIONS = 65536
#: --partitions at most with --store sdram: the words of the largest SDRAM of a known board
#: (the ULX3S's 32M x 16); whether a table fits its chip is the gateware's check
#: (:data:`ENGINE_FIT`), which also counts the words an entry takes.
SDRAM_PARTITIONS = 1 << 25
ENGINES = ("fixed", "programmable")
#: the parameters that only the programmable engine has
PROGRAMMABLE = ("states", "atoms", "queries")
#: The default engine (:func:`default_engine`): a partition key of up to this many bits indexes
#: the table directly (``2**bits`` entries, so no tuple is ever dropped) ...
DIRECT_KEY_BITS = 16
#: ... with at least this many entries (only the ``2**bits`` a key can address are built) ...
MIN_ENTRIES = 256
#: ... and a wider key is hashed into a table of this many entries (``build``: the most the
#: board's block RAM holds, up to this).
HASHED_ENTRIES = 1 << 16
#: ``--store sdram`` alone is sized the same way, with the SDRAM's limits: a key of up to this
#: many bits indexes it directly, a wider one is hashed into this many entries (each at most:
#: fewer when the table would not fit the chip).
SDRAM_KEY_BITS = 20
SDRAM_ENTRIES = 1 << 20
#: The entry-point group of the checks that an engine's store fits its memory
#: (``check(nfa, engine)``, raising HardwareLimitError): the gateware's, for --store sdram.
ENGINE_FIT = "nfacep.engine_fit"
#: The options that choose the partition store and its size: :func:`default_engine` decides
#: those not given.
STORE_OPTIONS = ("store", "partitions", "ways")


@dataclass(frozen=True)
class EngineParams:
    """The parameters of one engine (the partition store, its capacity and timers).

    The field defaults are those of an engine made through the Python API; the commands' is
    :func:`default_engine` (the table sized for the query's key), which takes the timers',
    the ways' and the pipeline's size from here.

    Checked when created: a value outside its range raises :class:`~nfacep.errors.UsageError`
    (below its minimum) or :class:`~nfacep.errors.HardwareLimitError` (above the engine's
    limit), naming the command-line option. Without a PARTITION clause the engine has one
    state vector and none of them matters, but they still describe the engine.
    """

    partitions: int = _param(
        256,
        lo=1,
        hi=SDRAM_PARTITIONS,
        metavar="N",
        hint="use fewer partitions",
        shown=f"sized for the partition key: 2^bits entries for a key of up to "
        f"{DIRECT_KEY_BITS} bits, at least {MIN_ENTRIES}, else {HASHED_ENTRIES}; 256 with "
        "--store pipeline; `nfacep check` prints it",
        help="partitions the partitioner stores; a tuple of a new partition finds no free "
        "element when all are taken, and is dropped and counted",
    )
    tick_tuples: int = _param(
        0,
        lo=0,
        hi=(1 << 32) - 1,
        metavar="K",
        hint="tick more often",
        low="must be 0 (no ticks) or more",
        help="a timer tick after every K-th input tuple; 0: no ticks",
    )
    timer_bits: int = _param(
        4,
        lo=1,
        hi=32,
        metavar="B",
        hint="use a narrower timer",
        help="bits of each partition element's timer: 2^B-1 ticks without a tuple free it",
    )
    store: str = _choice(
        "pipeline",
        shown="table",
        choices=STORES,
        help="where partitions are kept: 'pipeline', the paper's swap pipeline in logic (one "
        "tuple every other cycle); 'table', a table in block RAM (one tuple per cycle, "
        "--partitions entries, --ways entries per bucket); 'sdram', the same table in the "
        "board's SDRAM behind a block-RAM cache (up to 2^20 entries of a word on the "
        "Colorlight 5A-75B, 2^25 on the ULX3S)",
    )
    ways: int = _param(
        4,
        lo=1,
        hi=16,
        metavar="W",
        hint="use fewer ways",
        help="with --store table or sdram and a key wider than the table's index: the entries "
        "of one bucket (a power of two; one block-RAM bank each in the table); a new key whose "
        "bucket is full is dropped and counted",
    )
    engine: str = _choice(
        "fixed",
        choices=ENGINES,
        help="'fixed': the queries wired into logic; 'programmable': state slots, atoms, "
        "truth tables and an activation matrix in registers, the queries a configuration "
        "image (so far `check`, `verilog`, `sim`, `build`, `regress`, `serve`, `run --udp` and "
        "`load` take it)",
    )
    states: int = _param(
        24,
        lo=1,
        hi=1024,
        metavar="S",
        hint="use fewer state slots",
        help="with --engine programmable: its state slots (NFA states of all queries)",
    )
    atoms: int = _param(
        16,
        lo=1,
        hi=1024,
        metavar="A",
        hint="use fewer atoms",
        help="with --engine programmable: its atomic conditions (a field compared with a "
        "constant or with another field plus a constant)",
    )
    queries: int = _param(
        4,
        lo=1,
        hi=64,
        metavar="Q",
        hint="use fewer query slots",
        help="with --engine programmable: its query slots",
    )

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise :class:`UsageError` or :class:`HardwareLimitError` for a value out of range
        or a combination the engine cannot be built with."""
        for f in dataclasses.fields(self):
            value, meta = getattr(self, f.name), f.metadata
            if "choices" in meta:
                if value not in meta["choices"]:
                    raise UsageError(
                        f"{option(f.name)} must be one of "
                        f"{', '.join(meta['choices'])}, not {value!r}"
                    )
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise UsageError(f"{option(f.name)} must be an integer, not {value!r}")
            if value < meta["lo"]:
                raise UsageError(f"{option(f.name)} {meta['low']}")
            if value > meta["hi"]:
                raise HardwareLimitError(
                    f"{option(f.name)} is {value}, more than the engine's "
                    f"limit of {meta['hi']}: {meta['hint']}"
                )
        if self.store != "sdram" and self.partitions > ON_CHIP_PARTITIONS:
            raise HardwareLimitError(
                f"--partitions is {self.partitions}, more than the engine's limit of "
                f"{ON_CHIP_PARTITIONS} with --store {self.store}: use fewer partitions, or "
                f"--store sdram (up to {SDRAM_PARTITIONS}, as the board's SDRAM holds)"
            )
        if self.store in TABLE_STORES:
            self._check_table()

    def _check_table(self) -> None:
        def power_of_two(name: str, what: str) -> None:
            value = getattr(self, name)
            if value & (value - 1):
                lower = 1 << (value.bit_length() - 1)
                raise UsageError(
                    f"{option(name)} {value}: with --store {self.store}, {what} must be "
                    f"a power of two (such as {lower} or {lower * 2})"
                )

        power_of_two("partitions", "the table's entries")
        power_of_two("ways", "the ways of a bucket")
        if self.ways > self.partitions:
            raise UsageError(
                f"--ways {self.ways} is more than --partitions {self.partitions}: "
                "a bucket cannot have more ways than the table has entries"
            )

    @property
    def tabled(self) -> bool:
        """Whether the store keeps partitions as the table does (``table``, ``sdram``: the
        same semantics, so the reference models both alike)."""
        return self.store in TABLE_STORES

    @property
    def index_bits(self) -> int:
        """With a table (:attr:`tabled`): the bits that index the table's entries."""
        return (self.partitions - 1).bit_length()

    @property
    def bucket_bits(self) -> int:
        """With a table (:attr:`tabled`): the bits that choose a bucket of ``ways`` entries."""
        return ((self.partitions // self.ways) - 1).bit_length()

    def as_dict(self) -> dict[str, int | str]:
        """``{name: value}``, as sidecars, summaries and manifests record the parameters; a
        fixed engine's without ``engine`` and the programmable engine's capacities (so its
        records and engine id are those of before the programmable engine)."""
        return {  # (every value is an int or a str: no deep copy, as asdict makes)
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if self.engine != "fixed" or f.name not in ("engine", *PROGRAMMABLE)
        }

    @classmethod
    def from_dict(cls, values: dict, *, source: str) -> EngineParams:
        """The parameters recorded in ``values`` (by :meth:`as_dict`) in the file ``source``;
        :class:`UsageError` naming ``source`` when they are missing, unknown or invalid
        (``engine`` and the programmable engine's capacities may be missing: a fixed
        engine's, :meth:`as_dict`)."""
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(values, dict):
            raise UsageError(f"{source}: the engine parameters are not an object: {values!r}")
        unknown = sorted(set(values) - names)
        # a fixed engine's record has no engine and capacities (nor one from before them)
        missing = sorted(names - set(values) - {"engine", *PROGRAMMABLE})
        if unknown or missing:
            parts = []
            if unknown:
                parts.append(f"unknown {', '.join(unknown)}")
            if missing:
                parts.append(f"missing {', '.join(missing)}")
            what = "; ".join(parts)
            raise UsageError(f"{source}: engine parameters from another nfacep version ({what})")
        try:
            return cls(**values)
        except UsageError as err:
            raise UsageError(f"{source}: {err}") from None

    def indexing(self, nfa: Nfa) -> str:
        """How this engine keeps the partitions of ``nfa``'s key: ``"none"`` (no PARTITION: one
        state vector), ``"pipeline"``, ``"direct"`` (a table the key indexes: never drops) or
        ``"hashed"`` (a table of buckets: a full bucket drops)."""
        key = nfa.program.key
        if not key.names:
            return "none"
        if self.store not in TABLE_STORES:
            return "pipeline"
        return "direct" if key.width <= self.index_bits else "hashed"

    def describe(self, nfa: Nfa) -> str:
        """The engine for ``nfa`` in words, as ``nfacep check`` prints it (store, entries,
        ways, timers)."""
        key = nfa.program.key
        how = self.indexing(nfa)
        if how == "none":
            return "one state vector (no PARTITION: the store and its size do not matter)"
        store = "the table store" if self.store == "table" else "the SDRAM store"
        if how == "pipeline":
            text = (
                f"the swap pipeline, {self.partitions:,} partitions (a tuple of a new key "
                "that finds none free is dropped)"
            )
        elif how == "direct":
            text = (
                f"{store}, {self.partitions:,} entries, indexed directly by the "
                f"{key.width}-bit key (no tuple is ever dropped)"
            )
            if 1 << key.width < self.partitions:  # (the rest are never used, nor kept)
                text += f", which addresses {1 << key.width:,} of them"
        else:
            text = (
                f"{store}, {self.partitions:,} entries in "
                f"{self.partitions // self.ways:,} buckets of {self.ways} ways, hashed from "
                f"the {key.width}-bit key (a new key whose bucket is full is dropped)"
            )
        if self.tick_tuples:
            return text + (
                f"; a timer tick every {self.tick_tuples:,} tuples, {self.timer_bits}-bit "
                f"timers (a partition idle {(1 << self.timer_bits) - 1} ticks is freed)"
            )
        return text + "; no timers (--tick-tuples 0)"

    def options(self) -> str:
        """The command-line options that give these parameters (those :meth:`as_dict`
        records)."""
        return " ".join(f"{option(name)} {value}" for name, value in self.as_dict().items())

    def differences(self, other: EngineParams) -> list[str]:
        """``"--name A (given: B)"`` for every parameter where ``self`` (A) differs from
        ``other`` (B)."""
        return [
            f"{option(f.name)} {getattr(self, f.name)} (given: {getattr(other, f.name)})"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]


def option(name: str) -> str:
    """The command-line option of the parameter ``name`` (``timer_bits`` → ``--timer-bits``)."""
    return "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser, *, defaults: str | None = None) -> None:
    """Add the engine parameters' options to ``parser``, with the defaults in their help
    (``defaults`` says where they come from instead, when not :class:`EngineParams`'s own).

    The options default to None (not given), so that :func:`from_args` can tell a value given
    on the command line from one to take elsewhere.
    """
    group = parser.add_argument_group(
        "engine parameters (the same for every command that models or builds the engine)"
    )
    for f in dataclasses.fields(EngineParams):
        kind = {"choices": f.metadata["choices"]} if "choices" in f.metadata else {"type": int}
        group.add_argument(
            option(f.name),
            dest=f.name,
            default=None,
            metavar=f.metadata["metavar"],
            **kind,
            help=f"{f.metadata['help']} (default {defaults or f.metadata['shown']})",
        )


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The engine parameters given on the command line parsed into ``args``, by name (each
    value of its field's type: an int, or a word of its choices)."""
    return {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(EngineParams)
        if getattr(args, f.name, None) is not None
    }


def default_engine(nfa: Nfa, given: dict[str, Any] | None = None) -> EngineParams:
    """The engine every command models or builds for the queries of ``nfa`` (the module's
    description): the parameters ``given`` (by name, :func:`given`), the others chosen for the
    partition key. ``build`` fits it to a board (:func:`nfacep.boards.defaults.board_engine`).
    Raises as :class:`EngineParams` does for a combination it cannot build, and with
    ``--store sdram`` for a table the chip cannot hold (:func:`_sdram_fitted`)."""
    given = dict(given or {})
    store = given.get("store", "table")
    if store not in TABLE_STORES:
        return EngineParams(**given)
    direct, hashed = (
        (SDRAM_KEY_BITS, SDRAM_ENTRIES) if store == "sdram" else (DIRECT_KEY_BITS, HASHED_ENTRIES)
    )
    key = nfa.program.key
    ways = given.get("ways", EngineParams.ways)
    if not key.names:  # one state vector: the smallest table
        entries = given.get("partitions", max(1, given.get("ways", 1)))
        ways = given.get("ways", 1)
    elif key.width <= direct:
        entries = given.get("partitions", max(1 << key.width, MIN_ENTRIES))
    else:
        entries = given.get("partitions", hashed)
    if "ways" not in given and entries < ways:
        ways = entries  # a small table given with --partitions: one bucket
    result = EngineParams(**{**given, "store": store, "partitions": entries, "ways": ways})
    if store == "sdram":
        return _sdram_fitted(nfa, result, sized="partitions" not in given)
    return result


def _sdram_fitted(nfa: Nfa, engine: EngineParams, *, sized: bool) -> EngineParams:
    """``engine`` (``--store sdram``) if its table fits the SDRAM, else, when its entries were
    chosen here (``sized``), the largest power of two of them that does. Whether it fits
    depends on the query's key and state, which the gateware knows: its check (the one the
    engine makes, :func:`nfacep.hdl.sdram.fit.check_engine`) is found through the entry
    points of :data:`ENGINE_FIT`, and raises :class:`~nfacep.errors.HardwareLimitError`, so
    that every command refuses what the engine would. Without the gateware installed nothing
    is checked (and no engine can be built)."""
    from importlib import metadata

    checks = [ep.load() for ep in metadata.entry_points(group=ENGINE_FIT)]
    while True:
        try:
            for check in checks:
                check(nfa, engine, sized=sized)
            return engine
        except HardwareLimitError:
            if not sized or engine.partitions <= engine.ways:
                raise
            engine = dataclasses.replace(engine, partitions=engine.partitions // 2)


def from_args(
    args: argparse.Namespace,
    defaults: EngineParams | None = None,
    *,
    programmable: bool = False,
    nfa: Nfa | None = None,
) -> EngineParams:
    """The engine parameters of a parsed command line: each one given there, else taken from
    ``defaults``, else from :func:`default_engine` for the queries of ``nfa``, else
    (neither: an early check of the options' ranges, before the query is read)
    :class:`EngineParams`'s own defaults. Raises UsageError or
    HardwareLimitError for a value out of range, for ``--states``, ``--atoms`` or
    ``--queries`` without ``--engine programmable``, and for ``--engine programmable`` where
    the command does not take it (``programmable`` False)."""
    values = given(args)
    if defaults is None and nfa is not None:
        result = default_engine(nfa, values)
    else:
        result = dataclasses.replace(defaults or EngineParams(), **values)
    if result.engine != "programmable":
        extra = [option(n) for n in PROGRAMMABLE if n in values]
        if extra:
            raise UsageError(f"{', '.join(extra)}: only with --engine programmable")
    elif not programmable:
        raise UsageError(
            "--engine programmable: this command does not build or model the programmable "
            "engine yet (`nfacep check`, `verilog`, `sim` without --link, `build`, "
            "`regress`, `serve`, `run --udp` and `load` take --engine "
            "programmable)"
        )
    return result


def check_fits(nfa: Nfa) -> None:
    """Raise :class:`HardwareLimitError` when the queries of ``nfa`` do not fit one engine."""

    def over(what: str, value: int, limit: int, hint: str) -> None:
        if value > limit:
            raise HardwareLimitError(
                f"{what} is {value}, more than the engine's limit of {limit}: {hint}"
            )

    over(
        "the number of NFA states",
        len(nfa.states),
        MAX_STATES,
        "split the queries over several files/engines or shorten counted repetitions",
    )
    over(
        "the number of distinct predicates",
        len(nfa.predicates),
        MAX_PREDICATES,
        "split the queries over several engines",
    )
    key = nfa.program.key
    if key.names:
        over(
            f"the partition key ({', '.join(key.names)}) width",
            key.width,
            MAX_KEY_BITS,
            "partition by fewer or narrower fields",
        )
