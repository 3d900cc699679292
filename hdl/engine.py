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

What the partition store keeps and does per tuple is :mod:`~nfacep.hdl.engine_update`'s; the
store's choice and the record filter, which the programmable engine uses too,
:mod:`~nfacep.hdl.engine_shared`'s.
"""

from __future__ import annotations

import json
import os

from amaranth.hdl import Module, Mux, Shape, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.errors import HardwareLimitError
from nfacep.nfa import Nfa
from nfacep.params import EngineParams, check_fits
from nfacep.settings import ParamValues
from nfacep.wire import SEQ_BITS, record_format, start_queries

from .decoder import PredicateDecoder
from .engine_shared import (
    SdramPins,
    cycles_per_tuple,
    partition_key,
    partition_store,
    record_filter,
    table_sidecar,
)
from .engine_update import late_layout, shifted, store_update
from .layout import history_layout, params_layout, tuple_layout
from .nfa import NfaMatcher
from .nfa_layout import result_layout, times_layout, window_times
from .partitioner import StreamPartitioner
from .sdram.fit import stored_widths
from .sdram.store import SdramPartitioner
from .sdram.timing import SDRAMSetup
from .stream import StreamQueue
from .table import TablePartitioner

__all__ = ["BREAK_PARAMS", "Engine", "HardwareLimitError", "write_verilog"]

#: For the tests that show a path is needed (as
#: :data:`nfacep.hdl.table_forwarding.BREAK_FORWARDING`): ``"no hold"``: ``i_stream.ready`` is
#: not held low in the two cycles after a parameter switch is written, so a tuple taken then is
#: decoded before the switch's number is compared with it (:meth:`Engine._parameters`).
#: ``None`` (always, outside those tests): nothing broken.
BREAK_PARAMS: str | None = None


class Engine(SdramPins, wiring.Component):
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
        applies to, and the next switch once ``ready`` is high again. ``i_stream.ready`` is
        low for the two cycles after a switch is taken, while its number is compared.
    param_values : ``Out(params_layout)``
        The values in force, as :func:`nfacep.hdl.layout.params_layout` lays them out; after
        a reset, ``values.initial`` (the ``values`` argument).

    Only with ``store="sdram"`` and PARTITION:

    sdram : ``Out(pins_signature(geometry))``
        The SDRAM chip's pins: the chip ``sdram`` names (a board's), by default the first of
        :data:`nfacep.hdl.sdram.timing.ENGINE_SDRAMS` that holds the table
        (:func:`nfacep.hdl.sdram.fit.engine_sdram`; :attr:`sdram_setup`, :meth:`use_sdram`:
        :class:`~nfacep.hdl.engine_shared.SdramPins`).
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
        sdram: SDRAMSetup | None = None,
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
        # the SDRAM chip's pins (hdl/sdram/README.md), active-high, for the chip that holds
        # the table (HardwareLimitError when none does)
        members |= self._sdram_members(
            params, bool(nfa.program.partition_fields), *stored_widths(nfa, params), sdram
        )
        super().__init__(members)

    @property
    def nfa(self) -> Nfa:
        return self._nfa

    @property
    def store(self) -> StreamPartitioner | TablePartitioner | SdramPartitioner | None:
        """The partition store made by the last elaboration (``None`` before the first one,
        and without PARTITION): its geometry, such as the table's banks, for estimates."""
        return self._store

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
        self._connect_sdram(m, matcher)
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
        hold = Signal(name="param_hold")  # no tuple taken (a switch is being compared)
        if self._params_layout is not None:
            fresh = self._parameters(m, decoder)
            if BREAK_PARAMS != "no hold":
                m.d.comb += hold.eq(fresh)
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
            queue.i_stream.valid.eq(self.i_stream.valid & ~hold),
            self.i_stream.ready.eq(queue.i_stream.ready & ~hold),
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

    def _parameters(self, m: Module, decoder: PredicateDecoder) -> Signal:
        """The parameter registers: the values in force, a shadow copy and the tuple number
        it applies from. A tuple taken at or after that number (modulo ``2**seq_width``,
        within half of it) is decoded with the shadow copy, which becomes the values in
        force. Returns the signal that holds ``i_stream.ready`` low.

        Nothing of a switch is compared in its cycle: the values go into the shadow copy and
        the number into ``param_switch_seq``; the cycle after, the number is compared with the
        next tuple's (a 48-bit subtraction's sign) into ``param_passed``; the cycle after that,
        that sets the due flag (``param_due``) and loads ``param_current``, the values the next
        tuple is decoded with. ``i_stream.ready`` is low those two cycles, from registers, not
        ``i_params.valid`` (no loop through a feeder): a tuple taken then would miss its switch
        (``BREAK_PARAMS = "no hold"``). Until the switch is due, the flag is set as the tuple
        before the switch's is taken, a register too (``param_before_switch``).
        """
        layout = self._params_layout
        w = self._seq_width
        initial = self._values.packed(self._values.initial)
        # plain vectors, so that their reset values are the packed values
        active = Signal(layout.size, init=initial, name="param_active")
        current = Signal(layout.size, init=initial, name="param_current")
        shadow = Signal(layout.size, name="param_shadow")
        switch_seq = Signal(w, name="param_switch_seq")  # the switch's tuple number
        pending = Signal(name="param_pending")
        fresh = Signal(name="param_written_last")  # a switch was written the cycle before
        compared = Signal(name="param_compared")  # ... two cycles before: ``passed`` is known
        due = Signal(name="param_due")  # the next tuple taken is at or after the switch's
        in_seq = Signal(w, name="param_tuple_seq")  # the next tuple's number
        in_seq_plus1 = Signal(w, init=1, name="param_tuple_seq_plus1")
        in_seq_plus2 = Signal(w, init=2, name="param_tuple_seq_plus2")
        before = Signal(name="param_before_switch")  # the next tuple is the one before it
        taken = Signal(name="param_taken")
        written = Signal(name="param_written")
        due_next = Signal(name="param_due_next")
        active_next = Signal.like(active, name="param_active_next")
        passed = Signal(name="param_passed")  # the written switch is due for the next tuple
        m.d.comb += [
            taken.eq(self.i_stream.valid & self.i_stream.ready),
            written.eq(self.i_params.valid & self.i_params.ready),
            due_next.eq(
                Mux(
                    compared,
                    passed,
                    pending & ~(taken & due) & (due | (taken & before)),
                )
            ),
            active_next.eq(Mux(taken, current, active)),
            decoder.params.eq(current),
            self.param_values.eq(active),
            self.i_params.ready.eq(~pending),
        ]
        m.d.sync += [
            active.eq(active_next),
            due.eq(due_next),
            current.eq(Mux(due_next, shadow, active_next)),
            pending.eq(Mux(written, 1, pending & ~(taken & due))),
            fresh.eq(written),
            compared.eq(fresh),
            passed.eq(~(in_seq - switch_seq)[w - 1]),
            before.eq(
                Mux(
                    fresh,
                    in_seq_plus1 == switch_seq,
                    Mux(taken, in_seq_plus2 == switch_seq, before),
                )
            ),
        ]
        with m.If(taken):
            m.d.sync += [
                in_seq.eq(in_seq_plus1),
                in_seq_plus1.eq(in_seq_plus2),
                in_seq_plus2.eq(in_seq_plus2 + 1),
            ]
        with m.If(written):
            m.d.sync += [
                shadow.eq(self.i_params.payload.values),
                switch_seq.eq(self.i_params.payload.seq),
            ]
        return fresh | compared


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
    sdram_mhz: float | None = None,
) -> dict:
    """Write the engine as Verilog to ``path`` and a JSON sidecar (ports, tuple bit layout,
    record layout, query bits, parameters, and the runtime parameters' layout and values
    after a reset) beside it; both whole or not at all. ``sdram_mhz``: with ``--store
    sdram``, the clock the SDRAM controller is built for (:meth:`~.engine_shared.SdramPins.
    sdram_clock`; the chip's setup's by default)."""
    from nfacep.output import atomic_files

    from .emit import verilog

    engine = Engine(nfa, params, values=values)
    engine.sdram_clock(sdram_mhz)
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
    if (sdram := engine.sdram_sidecar(engine.store)) is not None:
        sidecar["sdram"] = sdram
    if (table := table_sidecar(engine.store)) is not None:
        sidecar["table"] = table
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
