# amaranth: UnusedElaboratable=no
"""The engine a board gets by default: every command's default engine, fitted to the board.

``nfacep build`` and ``nfacep check --board`` use :func:`board_engine` for the engine
parameters: :func:`nfacep.params.default_engine` (the table store, ``2**bits`` entries for a
key of up to 16 bits, 65,536 hashed entries for a wider one), fitted to the board when the
query has a PARTITION clause and ``--partitions`` is not given: on a board in
:data:`TABLE_BOARDS` a table the key indexes directly first takes fewer ways (banks; it never
drops whatever its ways, and a wide entry takes as many blocks per bank at any size), then
the table is halved until its banks fit the board's block RAM with :data:`RESERVED` blocks
left for the link and the FIFOs, and a hashed table that fits at no size takes fewer ways
(banks: a wide entry takes as many blocks per bank at any size; more of its keys then share a
bucket, and a new key whose bucket is full is dropped, counted); when none fits, the swap
pipeline with its 256 partitions,
unless ``--store`` or ``--ways`` is given (then the table asked for, which ``build`` and
``check`` refuse naming its block RAMs); another board (the iCEstick) gets the swap pipeline
unless ``--store`` or ``--ways`` is given. With
``--partitions`` (or ``--store pipeline``) the engine is
:func:`~nfacep.params.default_engine`'s for the options, as on every other command.
Measured (``benchmarks/PAPER_FIGURES.md``, "Figure 9 to 64k partitions"): on the
LFE5U-85F the table runs 126–161M tuples/s from 1k to 64k partitions where the pipeline runs
80M at 256; on the iCEBreaker (iCE40UP5K, 12 MHz oscillator) a 4,096-entry table builds at
32.8 MHz (one tuple per cycle) and a 32-element pipeline at 43.0 MHz (one every other cycle);
on the iCEstick (HX1K) no table fits beside its logic (place-and-route fails at 256 entries),
so it keeps the pipeline.
"""

from __future__ import annotations

import dataclasses

from nfacep.nfa import Nfa
from nfacep.params import STORE_OPTIONS, EngineParams, default_engine

from .registry import Board

__all__ = ["RESERVED", "STORE_OPTIONS", "TABLE_BOARDS", "board_engine", "table_blocks"]

#: Boards whose default is the table (see the module's description).
TABLE_BOARDS = frozenset({"ulx3s-85f", "ulx3s-45f", "ulx3s-25f", "colorlight-5a75b", "icebreaker"})
#: Block RAMs the default table leaves free, by family: the links' buffers (UART 3, UDP 4) and
#: the engine's input FIFO.
RESERVED = {"ecp5": 8, "ice40": 4}
LARGEST = 1 << 16


def table_blocks(nfa: Nfa, params: EngineParams, family: str) -> int:
    """Block RAMs of the table of ``nfa``'s engine with ``params`` (``store="table"``) on
    ``family``: the DP16KD the banks instantiate on ECP5, the block shapes elsewhere."""
    from nfacep.hdl.bram import dp16kd_blocks
    from nfacep.hdl.sdram.fit import stored_state_width
    from nfacep.hdl.table import TablePartitioner
    from nfacep.wire import record_format

    from .resources import bram_blocks

    if params.engine == "programmable":
        from nfacep.hdl.programmable import entry_widths
        from nfacep.image import Capacity, EngineShape

        program = nfa.program
        shape = EngineShape(program.schema, program.partition_fields, Capacity.of(params))
        shapes = (*entry_widths(shape), params.queries)
    else:
        # (the stored state: the NFA's, and with PREV the partition's history after it)
        shapes = (len(nfa.predicates), stored_state_width(nfa), len(nfa.queries))
    table = TablePartitioner(
        key_shape=record_format(nfa).widths["partition"],
        payload_shape=shapes[0],
        state_width=shapes[1],
        result_shape=shapes[2],
        update=lambda m, state, payload: (state, 0),
        entries=params.partitions,
        ways=params.ways,
        timer_bits=params.timer_bits,
        tick_tuples=params.tick_tuples,
    )
    width = table.entry_layout.size
    per_bank = (
        dp16kd_blocks(table.rows, width)
        if family == "ecp5"
        else bram_blocks(family, table.rows, width)
    )
    return table.banks * per_bank


def board_engine(nfa: Nfa, board: Board, given: dict) -> EngineParams:
    """The engine parameters ``build`` uses on ``board``: those ``given`` on the command line
    (:func:`nfacep.params.given`), the rest :func:`nfacep.params.default_engine`'s, its table
    shrunk to what the board's block RAM holds (see the module's description)."""
    chosen = default_engine(nfa, given)
    if "partitions" in given or chosen.indexing(nfa) in ("none", "pipeline"):
        return chosen
    if board.name not in TABLE_BOARDS:
        if any(name in given for name in STORE_OPTIONS):
            return chosen
        return EngineParams(**{**given, "store": "pipeline"})
    budget = board.brams - RESERVED.get(board.family, 0)
    if chosen.indexing(nfa) == "direct" and "ways" not in given:
        # a direct table never drops whatever its ways (its banks): a wide entry's table
        # takes as many blocks per bank at any size, so fewer banks before fewer entries
        ways = chosen.ways
        while ways >= 1:
            table = dataclasses.replace(chosen, ways=ways)
            if table_blocks(nfa, table, board.family) <= budget:
                return table
            ways //= 2
    # every table halved until it fits (below its key's range it is hashed); one that fits at
    # no size with its ways (a wide entry: PREV's history, a window's and the measures'
    # starts) takes fewer ways
    ways = chosen.ways
    while ways >= 1:
        partitions = chosen.partitions
        while partitions >= ways:
            table = dataclasses.replace(chosen, partitions=partitions, ways=ways)
            if table_blocks(nfa, table, board.family) <= budget:
                return table
            partitions //= 2
        if "ways" in given:
            break
        ways //= 2
    if any(name in given for name in STORE_OPTIONS):
        return chosen  # (the store asked for: `build` and `check` say what it lacks)
    return EngineParams(**{**given, "store": "pipeline"})
