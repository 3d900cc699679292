"""What the fixed and the programmable engines share: the partition store they use
(:func:`partition_store`, its throughput :func:`cycles_per_tuple`, the key
:func:`partition_key`), with ``--store sdram`` the chip's pins and setup (:class:`SdramPins`)
and the record filter after the store (:func:`record_filter`)."""

from __future__ import annotations

import dataclasses

from amaranth.hdl import Cat, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import Out

from nfacep.errors import HardwareLimitError
from nfacep.params import EngineParams

from .partitioner import StreamPartitioner
from .sdram.controller import pins_signature
from .sdram.fit import sdram_table, store_sdram
from .sdram.store import SdramPartitioner
from .sdram.timing import ENGINE_SDRAM, SDRAMSetup
from .stream import StreamBuffer
from .table import TablePartitioner

__all__ = [
    "SdramPins",
    "cycles_per_tuple",
    "partition_key",
    "partition_store",
    "record_filter",
    "table_sidecar",
]


class SdramPins:
    """With ``--store sdram`` and PARTITION: an engine's SDRAM chip, its pins (the member
    ``sdram``, :func:`~nfacep.hdl.sdram.controller.pins_signature`), the clock its controller
    is built for (:meth:`use_sdram`, :attr:`sdram_setup`) and its sidecar's description
    (:meth:`sdram_sidecar`): what the fixed and the programmable engines' components mix in.
    The engine calls :meth:`_sdram_members` before ``Component.__init__`` (with what its store
    keeps: key and entry bits) and :meth:`_connect_sdram` when it elaborates its store."""

    _sdram: tuple[SDRAMSetup, int] = (ENGINE_SDRAM, 0)

    def _sdram_members(
        self,
        params: EngineParams,
        keyed: bool,
        key_width: int,
        state_width: int,
        sdram: SDRAMSetup | None,
    ) -> dict:
        """The member ``sdram`` (none without ``--store sdram`` or PARTITION) for the chip
        ``sdram`` names (a board's), by default the first of
        :data:`~nfacep.hdl.sdram.timing.ENGINE_SDRAMS` that holds the table
        (:func:`~nfacep.hdl.sdram.fit.store_sdram`: HardwareLimitError when none does)."""
        if params.store != "sdram" or not keyed:
            return {}
        try:
            self._sdram = (store_sdram(key_width, state_width, params, sdram), 0)
        except HardwareLimitError:
            self._MustUse__silence = True  # (never elaborated: the error says why)
            raise
        return {"sdram": Out(pins_signature(self._sdram[0].geometry))}

    def use_sdram(self, setup: SDRAMSetup, read_delay: int) -> None:
        """With ``--store sdram``: build the store's controller for ``setup`` (the chip and
        the engine's clock) and ``read_delay`` clocks the board's I/O registers add to a read
        (:mod:`nfacep.boards.sdram`), instead of the chip at the simulations' clock and 0;
        before elaboration (a board top whose engine clock is not the simulations' sets it).
        ``setup``'s geometry is the one the engine's pins were made for (a ValueError
        otherwise)."""
        if setup.geometry != self._sdram[0].geometry:
            raise ValueError(
                f"the engine's SDRAM pins are for {self._sdram[0].geometry}, not "
                f"{setup.geometry}: give the board's chip when making the engine"
            )
        self._sdram = (setup, read_delay)

    def sdram_clock(self, mhz: float | None) -> None:
        """With ``--store sdram``: build the store's controller for the chip at ``mhz`` (a
        board top's engine clock) on the engine's own pins, no I/O registers between (the
        engine simulated alone at that clock, ``benchmarks/sdram_throughput.py --mhz``);
        ``None`` or without the store, nothing changes."""
        if mhz is not None and "sdram" in self.signature.members:
            self.use_sdram(dataclasses.replace(self._sdram[0], clk_freq=mhz * 1e6), 0)

    @property
    def sdram_setup(self) -> tuple[SDRAMSetup, int]:
        """The SDRAM store's chip, clock and read delay (:meth:`use_sdram`)."""
        return self._sdram

    def _connect_sdram(self, m: Module, store) -> None:
        """The elaborated ``store``'s pins on the engine's ``sdram`` member, where it has one."""
        if "sdram" in self.signature.members:
            wiring.connect(m, store.sdram, wiring.flipped(self.sdram))

    def sdram_sidecar(self, store) -> dict | None:
        """The sidecar's ``sdram`` (the SDRAM store's power-up, the words it clears, the chip
        and the clock; what :mod:`nfacep.sim.sdram` simulates beside the engine) when the
        elaborated ``store`` is in SDRAM, else None."""
        if not isinstance(store, SdramPartitioner):
            return None
        setup = self._sdram[0]
        return {
            "power_up_cycles": store.cycles.power_up,
            "clearing_words": store.clearing_words,
            "chip": setup.timing.name,
            "geometry": dataclasses.asdict(setup.geometry),
            "clk_freq": setup.clk_freq,
        }


def table_sidecar(store) -> dict | None:
    """The sidecar's ``table`` (the block-RAM table's rows, the cycles of its clearing sweep
    after a reset, and its latency: what a simulation waits for before it calls the engine
    quiet, :func:`nfacep.sim.harness.drain_cycles`) when the elaborated ``store`` is a
    table, else None."""
    if not isinstance(store, TablePartitioner):
        return None
    return {"rows": store.rows, "latency": store.latency}


def record_filter(
    m: Module,
    results,
    o_stream,
    matched,
    layout: data.StructLayout,
    *,
    seq_width: int,
    starts: dict[int, int] | None = None,
) -> None:
    """Keep the ``results`` (a stream of ``key``, ``result``, ``dropped`` per tuple) of
    tuples that matched or were dropped, numbered by position, as records of ``layout`` on
    ``o_stream`` (through an output register); count the matched ones in ``matched``.
    ``starts``: the start-position slot of each query that reports one (query bit: slot), read
    from ``result.starts`` (0 for a query that did not match). The fixed and the
    programmable engines' one record filter."""
    seq = Signal(seq_width, name="result_seq")
    wanted = Signal()
    m.submodules.records = records = StreamBuffer(layout)
    matches = results.payload.result.matches
    m.d.comb += [
        wanted.eq(matches.any() | results.payload.dropped),
        records.i_stream.valid.eq(results.valid & wanted),
        results.ready.eq(records.i_stream.ready),
        records.i_stream.payload.seq.eq(seq),
        records.i_stream.payload.partition.eq(results.payload.key),
        records.i_stream.payload.matches.eq(matches),
        records.i_stream.payload.dropped.eq(results.payload.dropped),
    ]
    w = seq_width
    for q, k in (starts or {}).items():
        m.d.comb += records.i_stream.payload.starts[k * w : (k + 1) * w].eq(
            Mux(matches[q], results.payload.result.starts[k * w : (k + 1) * w], 0)
        )
    with m.If(results.valid & results.ready):
        m.d.sync += seq.eq(seq + 1)
        with m.If(matches.any()):
            m.d.sync += matched.eq(matched + 1)
    wiring.connect(m, records.o_stream, wiring.flipped(o_stream))


def cycles_per_tuple(keyed: bool, params: EngineParams) -> int:
    """Cycles a tuple takes at full throughput through :func:`partition_store`'s store (a
    query with PARTITION, ``keyed``), nothing stalling: 2 with the pipeline store of more than
    one partition, 3 with SDRAM (at best), else 1."""
    if not keyed:
        return 1
    if params.store == "pipeline":
        return 2 if params.partitions > 1 else 1
    return 3 if params.store == "sdram" else 1


def partition_store(
    params: EngineParams, sdram: tuple[SDRAMSetup, int] = (ENGINE_SDRAM, 0), **shapes
) -> StreamPartitioner | TablePartitioner | SdramPartitioner:
    """The partition store ``params`` name (its capacity and timers), for the ``shapes``
    (``key_shape``, ``payload_shape``, ``state_width``, ``result_shape``, ``update``) of the
    engine that uses it; ``sdram``: the SDRAM store's chip and clock, and the clocks the
    board's I/O registers add to a read (:meth:`~.engine.Engine.use_sdram`)."""
    if params.store == "sdram":
        setup, read_delay = sdram
        sdram_table(  # the one check of the table's fit (HardwareLimitError), as commands make
            key_width=Shape.cast(shapes["key_shape"]).width,
            state_width=shapes["state_width"],
            partitions=params.partitions,
            ways=params.ways,
            timer_bits=params.timer_bits,
            tick_tuples=params.tick_tuples,
            setup=setup,
        )
        try:
            return SdramPartitioner(
                geometry=setup.geometry,
                timing=setup.timing,
                clk_freq=setup.clk_freq,
                controller={"read_delay": read_delay},
                entries=params.partitions,
                ways=params.ways,
                timer_bits=params.timer_bits,
                tick_tuples=params.tick_tuples,
                **shapes,
            )
        except ValueError as err:  # the entries do not fit the chip
            raise HardwareLimitError(f"--store sdram: {err}: use fewer --partitions") from None
    if params.store == "table":
        return TablePartitioner(
            entries=params.partitions,
            ways=params.ways,
            timer_bits=params.timer_bits,
            tick_tuples=params.tick_tuples,
            **shapes,
        )
    return StreamPartitioner(
        depth=params.partitions,
        timer_bits=params.timer_bits,
        tick_tuples=params.tick_tuples,
        **shapes,
    )


def partition_key(payload, fields) -> Value:
    """A tuple's partition key (:class:`nfacep.schema.PartitionKey`): the bits of its
    ``fields`` concatenated, the first field PARTITION BY lists in the most significant bits."""
    # Cat takes its first part as the least significant: the last field listed
    return Cat(*reversed([Value.cast(payload[name]).as_unsigned() for name in fields]))
