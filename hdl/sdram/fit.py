"""Whether an engine's partitions fit the SDRAM (``--store sdram``), known before anything is
built or simulated: the one check, shared by the engine's store
(:func:`nfacep.hdl.engine_shared.partition_store`) and every command that takes the engine's
options (:func:`nfacep.params.default_engine`, through the entry point ``nfacep.engine_fit``:
:func:`check_engine`), so that ``vectors``, ``match`` or ``regress`` refuse
a table the engine would refuse, with its message, before they generate or match anything.

A table fits when its buckets, each a line of whole words rounded up to a power of two, fit
the chip (:class:`~nfacep.hdl.sdram.store.SdramTable`): an entry is valid, the key as tag
(hashed), the partition's state and, with timers, a 48-bit stamp, so whether it fits depends
on the query (its key's width and its state's) as well as on ``--partitions`` and ``--ways``.

Which chip: a board's own (``nfacep build`` and ``check --board``: the board registry's
:attr:`~nfacep.boards.registry.Board.sdram`); without a board (``match``, ``sim``,
``vectors``, ``regress``, ``verilog``) the first of
:data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAMS` whose words hold the table
(:func:`engine_sdram`): the 5A-75B's 4 MB, else the ULX3S's 64 MB. A default engine
(``--partitions`` not given) is sized for the first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nfacep.errors import HardwareLimitError

from .store import SdramTable
from .timing import ENGINE_SDRAMS, SDRAMSetup

if TYPE_CHECKING:
    from nfacep.nfa import Nfa
    from nfacep.params import EngineParams

__all__ = [
    "check_engine",
    "check_sdram_fits",
    "engine_sdram",
    "sdram_table",
    "store_sdram",
    "stored_state_width",
    "stored_widths",
]


def stored_state_width(nfa: Nfa) -> int:
    """Bits of the state the (fixed) engine keeps per partition: the NFA's
    (:func:`~nfacep.hdl.nfa_layout.state_layout`) and, with PREV, the partition's history
    (:func:`~nfacep.hdl.layout.history_layout`)."""
    from ..layout import history_layout
    from ..nfa_layout import state_layout

    kept = history_layout(nfa.program.schema, nfa.history)
    return state_layout(nfa).size + (0 if kept is None else kept.size)


def sdram_table(
    *,
    key_width: int,
    state_width: int,
    partitions: int,
    ways: int,
    timer_bits: int,
    tick_tuples: int,
    setup: SDRAMSetup | None = None,
) -> tuple[SdramTable, SDRAMSetup]:
    """The engine's table in the SDRAM of ``setup``, or without one in the first of
    :data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAMS` that holds it, and that chip;
    :class:`~nfacep.errors.HardwareLimitError` when it does not fit (the largest chip's
    reason)."""
    error: ValueError | None = None
    for chip in (setup,) if setup is not None else ENGINE_SDRAMS:
        try:
            table = SdramTable(
                key_shape=key_width,
                state_width=state_width,
                entries=partitions,
                ways=ways,
                timer_bits=timer_bits,
                tick_tuples=tick_tuples,
                geometry=chip.geometry,
            )
        except ValueError as err:
            error = err
            continue
        return table, chip
    raise HardwareLimitError(f"--store sdram: {error}: use fewer --partitions")


def store_sdram(
    key_width: int, state_width: int, engine: EngineParams, setup: SDRAMSetup | None = None
) -> SDRAMSetup:
    """The chip the SDRAM store of an engine is built for, from what the store keeps: keys of
    ``key_width`` bits and entries of ``state_width`` (the fixed engine's,
    :func:`stored_state_width`; the programmable engine's, its states, the epoch and its
    timed slots, :func:`~nfacep.hdl.programmable_entry.entry_widths`), with ``engine``'s
    parameters (``--store sdram``): ``setup`` (a board's) when given, else the first of
    :data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAMS` that holds its table;
    :class:`~nfacep.errors.HardwareLimitError` when it does not fit."""
    return sdram_table(
        key_width=key_width,
        state_width=state_width,
        partitions=engine.partitions,
        ways=engine.ways,
        timer_bits=engine.timer_bits,
        tick_tuples=engine.tick_tuples,
        setup=setup,
    )[1]


def stored_widths(nfa: Nfa, engine: EngineParams) -> tuple[int, int]:
    """``(key bits, entry bits)`` the partition store of the engine ``engine`` describes keeps
    for ``nfa``: the fixed engine's of its queries, or (``engine="programmable"``) the
    programmable engine's of its capacities for the file's stream declaration and key."""
    from nfacep.wire import record_format

    key_width = record_format(nfa).widths["partition"]
    if engine.engine != "programmable":
        return key_width, stored_state_width(nfa)
    from nfacep.image import Capacity, EngineShape

    from ..programmable_entry import entry_widths

    program = nfa.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(engine))
    return key_width, entry_widths(shape)[1]


def engine_sdram(nfa: Nfa, engine: EngineParams, setup: SDRAMSetup | None = None) -> SDRAMSetup:
    """:func:`store_sdram` of the engine of ``nfa`` that ``engine`` describes (the fixed one,
    or the programmable one of its capacities: :func:`stored_widths`)."""
    return store_sdram(*stored_widths(nfa, engine), engine, setup)


def check_sdram_fits(
    nfa: Nfa,
    *,
    partitions: int,
    ways: int,
    timer_bits: int,
    tick_tuples: int,
    setup: SDRAMSetup | None = None,
    engine: EngineParams | None = None,
) -> None:
    """Raise :class:`~nfacep.errors.HardwareLimitError` when the engine of ``nfa`` (the fixed
    one, or the one ``engine`` describes: its kind and capacities), its partitions in SDRAM
    with these parameters, does not fit ``setup``'s chip (without one: any chip of
    :data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAMS`; nothing to check without PARTITION BY)."""
    import dataclasses

    from nfacep.params import EngineParams

    if not nfa.program.partition_fields:
        return
    params = dataclasses.replace(
        engine or EngineParams(),
        store="sdram",
        partitions=partitions,
        ways=ways,
        timer_bits=timer_bits,
        tick_tuples=tick_tuples,
    )
    engine_sdram(nfa, params, setup)


def check_engine(nfa: Nfa, engine: EngineParams, *, sized: bool = False) -> None:
    """:func:`check_sdram_fits` for the engine :class:`~nfacep.params.EngineParams` describes
    (``engine``, the fixed or the programmable one), when it has ``--store sdram``: the entry point
    ``nfacep.engine_fit`` that :func:`nfacep.params.default_engine` calls. ``sized``: the
    entries were chosen by the default engine, which is sized for the first chip of
    :data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAMS` (the 5A-75B's); else any of them."""
    if engine.store != "sdram":
        return
    check_sdram_fits(
        nfa,
        partitions=engine.partitions,
        ways=engine.ways,
        timer_bits=engine.timer_bits,
        tick_tuples=engine.tick_tuples,
        setup=ENGINE_SDRAMS[0] if sized else None,
        engine=engine,
    )
