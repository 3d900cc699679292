"""The complex event detection engine (paper Figure 2) and its Verilog emitter.

decoder ▸ FIFO ▸ stream partitioner ▸ NFA ▸ record filter. Tuples enter on ``i_stream`` (the
stream's :func:`nfacep.hdl.layout.tuple_layout`); for every tuple that matched at least one query or
was dropped, one record ``(seq, partition, matches, dropped)`` leaves on ``o_stream``, in input
order. Everything is valid/ready: a stalled ``o_stream`` stalls ``i_stream``; nothing is lost
except tuples the partitioner drops by the capacity rule, and those are reported.

With PREV (:attr:`nfacep.nfa.Nfa.history`) each partition's entry in the store holds, after its
NFA state, the last values of the fields PREV reads (:func:`~.layout.history_layout`): the
predicates that read them are evaluated in the store's ``update``, once the entry is read, and
the history written back shifted. A fresh entry is all zero, so a new or freed partition has
none; the store's forwarding of entries in flight covers it as it covers the state.
"""

from __future__ import annotations

import json
import os

from amaranth.hdl import Cat, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.errors import HardwareLimitError
from nfacep.lang import predicates as P
from nfacep.nfa import Nfa
from nfacep.params import EngineParams, check_fits
from nfacep.settings import ParamValues
from nfacep.wire import SEQ_BITS, record_format, start_queries

from .decoder import PredicateDecoder, prev_predicates, reads_prev
from .layout import field_shape, history_layout, params_layout, tuple_layout
from .nfa import (
    NfaMatcher,
    next_state,
    result_layout,
    state_layout,
    times_layout,
    window_gap,
    window_hint,
    window_layout,
    window_times,
)
from .partitioner import StreamPartitioner
from .sdram.controller import pins_signature
from .sdram.fit import sdram_table, stored_state_width
from .sdram.store import SdramPartitioner
from .sdram.timing import ENGINE_SDRAM, SDRAMSetup
from .stream import StreamBuffer, StreamQueue
from .table import TablePartitioner

__all__ = [
    "Engine",
    "HardwareLimitError",
    "cycles_per_tuple",
    "partition_key",
    "partition_store",
    "record_filter",
    "write_verilog",
]


class Engine(wiring.Component):
    """Complex event detection engine for every query of ``nfa``.

    Parameters
    ----------
    nfa : :class:`nfacep.nfa.Nfa`
    params : :class:`nfacep.params.EngineParams`
        The partition store (``store``: the swap pipeline of :mod:`nfacep.hdl.partitioner`,
        the block-RAM table of :mod:`nfacep.hdl.table` or the same table in SDRAM,
        :mod:`nfacep.hdl.sdram.store`), its capacity and timers; unused
        without PARTITION. A query or parameter
        beyond the engine's limits raises :class:`~nfacep.errors.HardwareLimitError`.
    seq_width : :class:`int`
        Width of the tuple sequence number in match records (wraps around).
    counter_width : :class:`int`
        Width of the ``tuples``, ``matches`` and ``drops`` counters (wrap around).
    fifo_depth : :class:`int`
        Predicate vectors buffered between decoder and partitioner.

    Throughput: with PARTITION and ``store="pipeline"``, one tuple every other cycle (the swap
    pipeline's rate; one per cycle with ``partitions=1``); with ``store="table"`` and without
    PARTITION, one per cycle. Latency, from the clock edge that transfers a tuple in to the
    first edge its record is valid at, nothing stalling: ``partitions + 5`` cycles with the
    pipeline (5 with ``partitions=1``), 9 with the table (10 when it takes more than 64
    block RAMs, 12 with timers), 4 without PARTITION. After a reset the table first clears itself
    (:class:`~nfacep.hdl.table.TablePartitioner`: one cycle per row of a bank); the input FIFO
    takes tuples meanwhile. With ``store="sdram"`` the engine
    has the chip's pins (``sdram``, :func:`~nfacep.hdl.sdram.controller.pins_signature`), waits
    for its power-up and clears the entries it uses after a reset, and then takes a tuple every
    third cycle at most, fewer when the store's cache misses.

    Members
    -------
    i_stream : ``In(stream.Signature(tuple_layout(schema)))``
        Tuples.
    o_stream : ``Out(stream.Signature(record_layout))``
        One record per tuple that matched a query or was dropped, laid out as
        :func:`nfacep.wire.record_format` says: ``seq`` (0-based input position), ``partition``
        (the key's bits; 0 without PARTITION), ``matches`` (bit *q* for ``nfa.queries[q]``) and
        ``dropped``.
    tuples, matched, drops : ``Out(counter_width)``
        Tuples taken, tuples that matched at least one query, tuples dropped. (The middle
        one is not called ``matches``: that is a SystemVerilog keyword.)

    Only when the queries have runtime parameters (``:name``), the parameter registers:

    i_params : ``In(stream.Signature(StructLayout({"values": params_layout, "seq": seq_width})))``
        A switch: new values for every parameter, in force from the tuple numbered ``seq``
        on (its position on ``i_stream``, modulo ``2**seq_width``), all at once. Taken into a
        shadow copy; ``ready`` is low while a switch waits for its tuple. The tuple numbered
        ``seq`` (or, when that one has passed, the next tuple taken) is the first decoded
        with the new values. Whoever feeds the engine gives a switch before the tuple it
        applies to, and the next switch once ``ready`` is high again.
    param_values : ``Out(params_layout)``
        The values in force, as :func:`nfacep.hdl.layout.params_layout` lays them out; after
        a reset, ``values.initial`` (the ``values`` argument).

    Only with ``store="sdram"`` and PARTITION:

    sdram : ``Out(pins_signature(ENGINE_SDRAM.geometry))``
        The SDRAM chip's pins (:data:`nfacep.hdl.sdram.timing.ENGINE_SDRAM`).
    """

    def __init__(
        self,
        nfa: Nfa,
        params: EngineParams = EngineParams(),
        *,
        seq_width: int = SEQ_BITS,
        counter_width: int = 32,
        fifo_depth: int = 8,
        values: ParamValues | None = None,
    ):
        if params.engine != "fixed":
            raise ValueError(
                "Engine is the fixed engine: the programmable one is ProgrammableEngine"
            )
        check_fits(nfa)
        self._nfa = nfa
        self._params = params
        self._params_layout = params_layout(nfa.program.parameters)
        self._values = None
        if self._params_layout is not None:
            # the values after a reset; the switches are whoever feeds the engine's to give
            self._values = values if values else ParamValues.parse(nfa.program.parameters, [])
        if start_queries(nfa) and seq_width != SEQ_BITS:
            raise ValueError(
                f"queries report start_seq: the engine numbers tuples in "
                f"{SEQ_BITS} bits, not {seq_width}"
            )
        self._seq_width = seq_width
        self._fifo_depth = fifo_depth
        self._tuple_layout = tuple_layout(nfa.program.schema)
        self._record_format = record_format(nfa, seq_width)
        self._record_layout = data.StructLayout(self._record_format.widths)
        self._key_bits = self._record_format.widths["partition"]
        self._store = None
        self._sdram: tuple[SDRAMSetup, int] = (ENGINE_SDRAM, 0)
        members = {
            "i_stream": In(stream.Signature(self._tuple_layout)),
            "o_stream": Out(stream.Signature(self._record_layout)),
            "tuples": Out(counter_width),
            "matched": Out(counter_width),
            "drops": Out(counter_width),
        }
        if self._params_layout is not None:
            members["i_params"] = In(
                stream.Signature(
                    data.StructLayout({"values": self._params_layout, "seq": seq_width})
                )
            )
            members["param_values"] = Out(self._params_layout)
        if params.store == "sdram" and nfa.program.partition_fields:
            # the SDRAM chip's pins (hdl/sdram/README.md), active-high
            members["sdram"] = Out(pins_signature(ENGINE_SDRAM.geometry))
        super().__init__(members)

    @property
    def nfa(self) -> Nfa:
        return self._nfa

    @property
    def store(self) -> StreamPartitioner | TablePartitioner | SdramPartitioner | None:
        """The partition store made by the last elaboration (``None`` before the first one,
        and without PARTITION): its geometry, such as the table's banks, for estimates."""
        return self._store

    def use_sdram(self, setup: SDRAMSetup, read_delay: int) -> None:
        """With ``--store sdram``: build the store's controller for ``setup`` (the chip and
        the engine's clock) and ``read_delay`` clocks the board's I/O registers add to a read
        (:mod:`nfacep.boards.sdram`), instead of :data:`ENGINE_SDRAM` and 0; before
        elaboration (a board top whose engine clock is not the simulations' sets it)."""
        self._sdram = (setup, read_delay)

    @property
    def sdram_setup(self) -> tuple[SDRAMSetup, int]:
        """The SDRAM store's chip, clock and read delay (:meth:`use_sdram`)."""
        return self._sdram

    @property
    def tuple_layout(self) -> data.StructLayout:
        return self._tuple_layout

    @property
    def record_layout(self) -> data.StructLayout:
        return self._record_layout

    @property
    def params(self) -> EngineParams:
        return self._params

    @property
    def cycles_per_tuple(self) -> int:
        """Cycles a tuple takes at full throughput, nothing stalling (the class's description):
        2 with the pipeline store of more than one partition, 3 with SDRAM (at best), else 1.
        The link's board top sizes the engine's clock with it."""
        return cycles_per_tuple(bool(self._nfa.program.partition_fields), self._params)

    @property
    def values(self) -> ParamValues | None:
        """The runtime parameters' values after a reset (None without parameters)."""
        return self._values

    def elaborate(self, platform):
        m = Module()
        matcher, results = self._matcher(m)
        self._front(m, matcher)
        record_filter(
            m,
            results,
            self.o_stream,
            self.matched,
            self._record_layout,
            seq_width=self._seq_width,
            starts={q: k for k, q in enumerate(start_queries(self._nfa))},
        )
        return m

    def _matcher(self, m: Module):
        """The partitioner with the partitioned NFA, or the stand-alone NFA. Returns the
        matcher and a stream of one ``(key, matches, dropped)`` result per tuple, in order."""
        nfa = self._nfa
        outcome = result_layout(nfa)
        results = stream.Signature(
            data.StructLayout({"key": self._key_bits, "result": outcome, "dropped": 1})
        ).create()
        if not nfa.program.partition_fields:
            m.submodules.nfa = matcher = NfaMatcher(nfa, 0)
            m.d.comb += [
                results.valid.eq(matcher.o_stream.valid),
                matcher.o_stream.ready.eq(results.ready),
                results.payload.result.matches.eq(matcher.o_stream.payload.matches),
            ]
            if "starts" in outcome.members:
                m.d.comb += results.payload.result.starts.eq(matcher.o_stream.payload.starts)
            return matcher, results

        payload_shape, state_width, update = store_update(nfa)
        params = self._params
        shapes = {
            "key_shape": self._key_bits,
            "payload_shape": payload_shape,
            "state_width": state_width,
            "result_shape": outcome.size,
            "update": update,
        }
        m.submodules.partitioner = matcher = partition_store(params, sdram=self._sdram, **shapes)
        self._store = matcher
        if "sdram" in self.signature.members:
            wiring.connect(m, matcher.sdram, wiring.flipped(self.sdram))
        out = matcher.o_stream
        m.d.comb += [
            results.valid.eq(out.valid),
            out.ready.eq(results.ready),
            results.payload.key.eq(out.payload.key),
            # a dropped tuple's result is meaningless: it matched nothing
            results.payload.result.eq(Mux(out.payload.dropped, 0, out.payload.result)),
            results.payload.dropped.eq(out.payload.dropped),
            self.drops.eq(matcher.drops),
        ]
        return matcher, results

    def _front(self, m: Module, matcher) -> None:
        """Decoder and FIFO: ``i_stream``'s tuples become the matcher's input items (the key and
        the predicate vector), buffered. Sequence numbers are not carried along: every stage
        emits exactly one result per tuple, in order, so the record filter counts them (saving
        ``seq_width`` flip-flops in every partitioner stage)."""
        keyed = bool(self._nfa.program.partition_fields)
        # without partitions every tuple is processed: the history is kept here, before the
        # decoder; with them the store keeps it in the partition's entry
        m.submodules.decoder = decoder = PredicateDecoder(self._nfa, history=not keyed)
        if self._params_layout is not None:
            self._parameters(m, decoder)
        if "history" in decoder.signature.members:
            kept = history_layout(self._nfa.program.schema, self._nfa.history)
            history = Signal(kept, name="history")
            m.d.comb += decoder.history.eq(history)
            with m.If(self.i_stream.valid & self.i_stream.ready):
                m.d.sync += history.eq(shifted(m, kept, history, self.i_stream.payload))
        item = matcher.i_stream.payload.shape()
        m.submodules.fifo = queue = StreamQueue(item, self._fifo_depth)
        m.d.comb += [
            decoder.tuple.eq(self.i_stream.payload),
            queue.i_stream.valid.eq(self.i_stream.valid),
            self.i_stream.ready.eq(queue.i_stream.ready),
        ]
        if not keyed:
            inputs = queue.i_stream.payload
        else:
            m.d.comb += queue.i_stream.payload.key.eq(self._key(self.i_stream.payload))
            inputs = queue.i_stream.payload.payload
        times = times_layout(self._nfa)
        late = late_layout(self._nfa) if keyed else None
        if times is None and late is None and keyed:
            m.d.comb += inputs.eq(decoder.predicates)
        else:
            m.d.comb += inputs.predicates.eq(decoder.predicates)
        if late is not None:
            for name in late.members["fields"].members:
                m.d.comb += inputs.late.fields[name].eq(self.i_stream.payload[name])
            if "params" in late.members:  # the values this tuple is decoded with
                m.d.comb += inputs.late.params.eq(decoder.params)
        if times is not None and "at" in times.members:
            # the ORDER BY fields WITHIN measures in, and each window's bounds
            window_times(m, self._nfa, inputs.times, lambda name: self.i_stream.payload[name])
        if times is not None and "seq" in times.members:  # start_seq: the tuple's position
            position = Signal(self._seq_width, name="tuple_seq")
            m.d.comb += inputs.times.seq.eq(position)
            with m.If(self.i_stream.valid & self.i_stream.ready):
                m.d.sync += position.eq(position + 1)
        with m.If(self.i_stream.valid & self.i_stream.ready):
            m.d.sync += self.tuples.eq(self.tuples + 1)
        wiring.connect(m, queue.o_stream, matcher.i_stream)

    def _key(self, payload) -> Value:
        return partition_key(payload, self._nfa.program.partition_fields)

    def _parameters(self, m: Module, decoder: PredicateDecoder) -> None:
        """The parameter registers: the values in force, a shadow copy and the tuple number
        it applies from. A tuple taken at or after that number (modulo ``2**seq_width``,
        within half of it) is decoded with the shadow copy, which becomes the values in
        force.

        For a short path in front of the decoder, the values the next tuple is decoded with
        are a register of their own (``param_current``), and whether the switch is due for
        the next tuple is a registered flag: when the switch is written, a comparison of its
        number with the tuples taken; afterwards, an equality with the tuple before it.
        """
        layout = self._params_layout
        w = self._seq_width
        initial = self._values.packed(self._values.initial)
        # plain vectors, so that their reset values are the packed values
        active = Signal(layout.size, init=initial, name="param_active")
        current = Signal(layout.size, init=initial, name="param_current")
        shadow = Signal(layout.size, name="param_shadow")
        before = Signal(w, name="param_switch_before")  # the switch's tuple number - 1
        pending = Signal(name="param_pending")
        due = Signal(name="param_due")  # the next tuple taken is at or after the switch's
        in_seq = Signal(w, name="param_tuple_seq")  # the next tuple's number
        in_seq_plus1 = Signal(w, init=1, name="param_tuple_seq_plus1")
        taken = Signal(name="param_taken")
        written = Signal(name="param_written")
        due_next = Signal(name="param_due_next")
        active_next = Signal.like(active, name="param_active_next")
        shadow_next = Signal.like(shadow, name="param_shadow_next")
        seq = self.i_params.payload.seq
        passed = Signal(name="param_passed")  # a switch written now is due for the next tuple
        m.d.comb += [
            taken.eq(self.i_stream.valid & self.i_stream.ready),
            written.eq(self.i_params.valid & self.i_params.ready),
            passed.eq(~(in_seq - seq)[w - 1] | (taken & (seq == in_seq_plus1))),
            due_next.eq(
                Mux(
                    written, passed, pending & ~(taken & due) & (due | (taken & (in_seq == before)))
                )
            ),
            active_next.eq(Mux(taken, current, active)),
            shadow_next.eq(Mux(written, self.i_params.payload.values, shadow)),
            decoder.params.eq(current),
            self.param_values.eq(active),
            self.i_params.ready.eq(~pending),
        ]
        m.d.sync += [
            active.eq(active_next),
            shadow.eq(shadow_next),
            due.eq(due_next),
            current.eq(Mux(due_next, shadow_next, active_next)),
            pending.eq(Mux(written, 1, pending & ~(taken & due))),
        ]
        with m.If(taken):
            m.d.sync += [in_seq.eq(in_seq_plus1), in_seq_plus1.eq(in_seq_plus1 + 1)]
        with m.If(written):
            m.d.sync += before.eq(seq - 1)


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


def store_update(nfa: Nfa):
    """What the partition store keeps and does per tuple: ``(payload_shape, state_width,
    update)``. The payload is the predicate vector, with the tuple's times under WITHIN or
    start_seq, and with PREV what the predicates that read it need (:func:`late_layout`); the
    state, the NFA's (:func:`~.nfa.state_layout`) followed, with PREV, by the partition's
    history (:func:`~.layout.history_layout`). Under WITHIN, ``update`` also has ``prepare``
    and ``hint_width``: the windows' hint (:func:`~.nfa.window_hint`: which stored runs are
    still live), which the table store works out before the update
    (:class:`~.table.TablePartitioner`); it takes ``ahead``, the payloads of operations
    behind it, for which it also returns that hint of the state it stores, and ``gaps``, for
    each of them the part of that hint two payloads alone decide, which ``gap`` (of
    ``gap_width`` bits, :func:`~.nfa.window_gap`) works out."""
    times = times_layout(nfa)
    late = late_layout(nfa)
    kept = history_layout(nfa.program.schema, nfa.history)
    nfa_bits = state_layout(nfa).size
    if times is None and late is None:
        payload_shape = len(nfa.predicates)

        def update(mod, state, payload):
            return next_state(mod, nfa, state, payload)
    else:  # under WITHIN or start_seq the partition store carries the tuple's times along
        members = {"predicates": len(nfa.predicates)}
        if times is not None:
            members["times"] = times
        if late is not None:  # and with PREV what the predicates that read it need
            members["late"] = late
        payload_shape = data.StructLayout(members)

        def update(mod, state, payload, hint=None, ahead=None, gaps=None):
            at = None if times is None else payload.times
            later = None if ahead is None else [a.times for a in ahead]
            given = {"times": at, "hint": hint, "ahead": later, "gaps": gaps}
            if kept is None:
                return next_state(mod, nfa, state, payload.predicates, **given)
            # the partition's history follows its NFA state in the entry
            history = data.View(kept, state[nfa_bits:])
            params = payload.late.params if "params" in late.members else None
            bits = prev_predicates(mod, nfa, payload.late.fields, params, history)
            out = next_state(mod, nfa, state[:nfa_bits], payload.predicates | bits, **given)
            after = shifted(mod, kept, history, payload.late.fields)
            return (Cat(Value.cast(out[0]), Value.cast(after)), *out[1:])

        window = window_layout(nfa)
        if window is not None:
            # a store that can may work out the windows' hint (which stored runs are live) a
            # stage before the update, and hand it to it as its ``hint``; for the state it
            # forwards to the operations behind it, the update works it out (``ahead``), with
            # what the two tuples' times alone decide given when the store has it (``gap``)
            def prepare(mod, state, payload):
                return window_hint(mod, nfa, Value.cast(state)[:nfa_bits], payload.times)

            def gap(mod, earlier, later):
                return window_gap(mod, nfa, earlier.times, later.times)

            update.prepare = prepare
            update.hint_width = window.size
            update.gap = gap
            update.gap_width = window.members["far"].size

    return payload_shape, stored_state_width(nfa), update


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
    board's I/O registers add to a read (:meth:`Engine.use_sdram`)."""
    if params.store == "sdram":
        sdram_table(  # the one check of the table's fit (HardwareLimitError), as commands make
            key_width=Shape.cast(shapes["key_shape"]).width,
            state_width=shapes["state_width"],
            partitions=params.partitions,
            ways=params.ways,
            timer_bits=params.timer_bits,
            tick_tuples=params.tick_tuples,
        )
        setup, read_delay = sdram
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


def late_layout(nfa: Nfa) -> data.StructLayout | None:
    """What the partition store needs, beside the predicate vector, to evaluate the predicates
    that read PREV once it has read the partition's entry: ``fields``, the tuple's fields they
    read and those PREV keeps, and ``params``, the runtime parameters' values (when they read
    one). None without PREV."""
    if not nfa.history:
        return None
    late = [p.expr for p in nfa.predicates if reads_prev(p.expr)]
    read = {n.name for e in late for n in P.nodes(e) if isinstance(n, P.FieldRef)}
    schema = nfa.program.schema
    fields = {
        f.name: field_shape(f.type)
        for f in schema.fields
        if f.name in read or f.name in nfa.history
    }
    members: dict = {"fields": data.StructLayout(fields)}
    if any(isinstance(n, P.Param) for e in late for n in P.nodes(e)):
        members["params"] = params_layout(nfa.program.parameters)
    return data.StructLayout(members)


def shifted(m: Module, kept: data.StructLayout, history, fields) -> Value:
    """The history ``history`` (:func:`~.layout.history_layout` ``kept``) after a tuple whose
    fields are ``fields``: each field's values shifted by one, the tuple's first, and one more
    tuple counted (up to the deepest PREV)."""
    after = Signal(kept, name="history_after")
    values = kept.members["values"].members
    deepest = max(layout.length for layout in values.values())
    count = history.count
    m.d.comb += after.count.eq(Mux(count >= deepest, deepest, count + 1))
    for name, layout in values.items():
        m.d.comb += after.values[name][0].eq(fields[name])
        for j in range(1, layout.length):
            m.d.comb += after.values[name][j].eq(history.values[name][j - 1])
    return after


def _fields(layout: data.StructLayout) -> list[dict]:
    return [
        {"name": name, "offset": f.offset, "width": Shape.cast(f.shape).width} for name, f in layout
    ]


def interface(engine, schema, name: str) -> dict:
    """A sidecar's description of an engine's Verilog module ``name``: ``top``, ``clock``,
    ``reset``, ``ports`` and the ``tuple`` and ``record`` layouts."""
    tuple_fields = _fields(engine.tuple_layout)
    for f in tuple_fields:
        f["type"] = str(schema.field(f["name"]).type)
    ports = {"clk": {"dir": "in", "width": 1}, "rst": {"dir": "in", "width": 1}}
    for member_path, member, _ in engine.signature.flatten(engine):
        port = "__".join(str(p) for p in member_path)
        shape = Shape.cast(member.shape)
        ports[port] = {"dir": "in" if member.flow == In else "out", "width": shape.width}
    return {
        "top": name,
        "clock": "clk",
        "reset": "rst",
        "ports": ports,
        "tuple": {"width": engine.tuple_layout.size, "fields": tuple_fields},
        "record": {"width": engine.record_layout.size, "fields": _fields(engine.record_layout)},
    }


def write_verilog(
    nfa: Nfa,
    path: str,
    params: EngineParams,
    *,
    name: str = "nfacep_engine",
    values: ParamValues | None = None,
) -> dict:
    """Write the engine as Verilog to ``path`` and a JSON sidecar (ports, tuple bit layout,
    record layout, query bits, parameters, and the runtime parameters' layout and values
    after a reset) beside it; both whole or not at all."""
    from nfacep.output import atomic_files

    from .emit import verilog

    engine = Engine(nfa, params, values=values)
    text = verilog(engine, name)
    sidecar = {
        **interface(engine, nfa.program.schema, name),
        "queries": [
            {
                "name": q.name,
                "bit": q.index,
                "skip_past_last_row": q.skip_past_last_row,
                "states": q.count,
            }
            for q in nfa.queries
        ],
        "partition_fields": list(nfa.program.partition_fields),
        "predicates": [p.text for p in nfa.predicates],
        "parameters": params.as_dict(),
    }
    if isinstance(engine.store, SdramPartitioner):
        sidecar["sdram"] = {
            "power_up_cycles": engine.store.cycles.power_up,
            "clearing_words": engine.store.clearing_words,
        }
    if engine.values is not None:
        layout = params_layout(nfa.program.parameters)
        fields = _fields(layout)
        for f in fields:
            f["type"] = str(nfa.program.parameters[f["name"]])
        sidecar["runtime_parameters"] = {
            "width": layout.size,
            "fields": fields,
            "initial": engine.values.as_dict()["initial"],
        }
    json_path = os.path.splitext(path)[0] + ".json"
    # one write for both: neither replaces its destination unless both can be written
    with atomic_files([path, json_path], what="-o") as (verilog_file, json_file):
        verilog_file.write(text)
        json.dump(sidecar, json_file, indent=2)
        json_file.write("\n")
    return sidecar
