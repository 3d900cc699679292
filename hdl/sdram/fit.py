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
    "stored_state_width",
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


def engine_sdram(nfa: Nfa, engine: EngineParams, setup: SDRAMSetup | None = None) -> SDRAMSetup:
    """The chip the fixed engine of ``nfa`` with ``engine``'s parameters (``--store sdram``)
    is built for: ``setup`` (a board's) when given, else the first of
    :data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAMS` that holds its table;
    :class:`~nfacep.errors.HardwareLimitError` when it does not fit."""
    from nfacep.wire import record_format

    return sdram_table(
        key_width=record_format(nfa).widths["partition"],
        state_width=stored_state_width(nfa),
        partitions=engine.partitions,
        ways=engine.ways,
        timer_bits=engine.timer_bits,
        tick_tuples=engine.tick_tuples,
        setup=setup,
    )[1]


def check_sdram_fits(
    nfa: Nfa,
    *,
    partitions: int,
    ways: int,
    timer_bits: int,
    tick_tuples: int,
    setup: SDRAMSetup | None = None,
) -> None:
    """Raise :class:`~nfacep.errors.HardwareLimitError` when the fixed engine of ``nfa``, its
    partitions in SDRAM with these parameters, does not fit ``setup``'s chip (without one:
    any chip of :data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAMS`; nothing to check without
    PARTITION BY)."""
    from nfacep.params import EngineParams

    if not nfa.program.partition_fields:
        return
    params = EngineParams(
        store="sdram",
        partitions=partitions,
        ways=ways,
        timer_bits=timer_bits,
        tick_tuples=tick_tuples,
    )
    engine_sdram(nfa, params, setup)


def check_engine(nfa: Nfa, engine: EngineParams, *, sized: bool = False) -> None:
    """:func:`check_sdram_fits` for the engine :class:`~nfacep.params.EngineParams` describes
    (``engine``), when it is the fixed engine with ``--store sdram``: the entry point
    ``nfacep.engine_fit`` that :func:`nfacep.params.default_engine` calls. ``sized``: the
    entries were chosen by the default engine, which is sized for the first chip of
    :data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAMS` (the 5A-75B's); else any of them."""
    if engine.store != "sdram" or engine.engine != "fixed":
        return
    check_sdram_fits(
        nfa,
        partitions=engine.partitions,
        ways=engine.ways,
        timer_bits=engine.timer_bits,
        tick_tuples=engine.tick_tuples,
        setup=ENGINE_SDRAMS[0] if sized else None,
    )
