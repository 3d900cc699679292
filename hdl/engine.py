"""The complex event detection engine (paper Figure 2) and its Verilog emitter.

decoder ▸ FIFO ▸ stream partitioner ▸ NFA ▸ record filter. Tuples enter on ``i_stream`` (the
stream's :func:`nfacep.hdl.layout.tuple_layout`); for every tuple that matched at least one query or
was dropped, one record ``(seq, partition, matches, dropped)`` leaves on ``o_stream``, in input
order. Everything is valid/ready: a stalled ``o_stream`` stalls ``i_stream``; nothing is lost
except tuples the partitioner drops by the capacity rule, and those are reported.
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
from nfacep.wire import SEQ_BITS, record_format

from .decoder import PredicateDecoder
from .layout import tuple_layout
from .nfa import NfaMatcher, next_state
from .partitioner import StreamPartitioner
from .queue import StreamQueue

__all__ = ["Engine", "HardwareLimitError", "write_verilog"]


class Engine(wiring.Component):
    """Complex event detection engine for every query of ``nfa``.

    Parameters
    ----------
    nfa : :class:`nfacep.nfa.Nfa`
    params : :class:`nfacep.params.EngineParams`
        The partitioner's capacity and timers; unused without PARTITION. A query or parameter
        beyond the engine's limits raises :class:`~nfacep.errors.HardwareLimitError`.
    seq_width : :class:`int`
        Width of the tuple sequence number in match records (wraps around).
    counter_width : :class:`int`
        Width of the ``tuples``, ``matches`` and ``drops`` counters (wrap around).
    fifo_depth : :class:`int`
        Predicate vectors buffered between decoder and partitioner.

    Throughput: one tuple every other cycle with PARTITION (the swap pipeline's rate; one per
    cycle with ``partitions=1``), one per cycle without. Latency, from the clock edge that
    transfers a tuple in to the first edge its record is valid at, nothing stalling:
    ``partitions + 5`` cycles with PARTITION (5 with ``partitions=1``), 4 without.

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
    """

    def __init__(self, nfa: Nfa, params: EngineParams = EngineParams(), *,
                 seq_width: int = SEQ_BITS, counter_width: int = 32, fifo_depth: int = 8):
        check_fits(nfa)
        self._nfa = nfa
        self._params = params
        self._seq_width = seq_width
        self._fifo_depth = fifo_depth
        self._tuple_layout = tuple_layout(nfa.program.schema)
        self._record_format = record_format(nfa, seq_width)
        self._record_layout = data.StructLayout(self._record_format.widths)
        self._key_bits = self._record_format.widths["partition"]
        super().__init__({
            "i_stream": In(stream.Signature(self._tuple_layout)),
            "o_stream": Out(stream.Signature(self._record_layout)),
            "tuples": Out(counter_width),
            "matched": Out(counter_width),
            "drops": Out(counter_width),
        })

    @property
    def nfa(self) -> Nfa:
        return self._nfa

    @property
    def tuple_layout(self) -> data.StructLayout:
        return self._tuple_layout

    @property
    def record_layout(self) -> data.StructLayout:
        return self._record_layout

    @property
    def params(self) -> EngineParams:
        return self._params

    def elaborate(self, platform):
        m = Module()
        nfa = self._nfa
        key_field = nfa.program.partition_field
        n_pred = len(nfa.predicates)

        # decoder and FIFO. Sequence numbers are not carried along: every stage emits exactly
        # one result per tuple, in order, so the result side counts them (saving seq_width
        # flip-flops in every partitioner stage).
        m.submodules.decoder = decoder = PredicateDecoder(nfa)
        item = data.StructLayout({"key": self._key_bits, "predicates": n_pred})
        m.submodules.fifo = queue = StreamQueue(item, self._fifo_depth)
        m.d.comb += [
            decoder.tuple.eq(self.i_stream.payload),
            queue.i_stream.valid.eq(self.i_stream.valid),
            self.i_stream.ready.eq(queue.i_stream.ready),
            queue.i_stream.payload.predicates.eq(decoder.predicates),
        ]
        if key_field is not None:
            key = Value.cast(self.i_stream.payload[key_field]).as_unsigned()
            m.d.comb += queue.i_stream.payload.key.eq(key)
        with m.If(self.i_stream.valid & self.i_stream.ready):
            m.d.sync += self.tuples.eq(self.tuples + 1)

        # partitioner + partitioned NFA, or the stand-alone NFA
        result = Signal(data.StructLayout({"key": self._key_bits,
                                           "matches": len(nfa.queries), "dropped": 1}))
        result_valid = Signal()
        result_ready = Signal()
        if key_field is not None:
            def update(mod, state, predicates):
                return next_state(mod, nfa, state, predicates)

            m.submodules.partitioner = part = StreamPartitioner(
                key_shape=self._key_bits, payload_shape=n_pred,
                state_width=len(nfa.states), result_shape=len(nfa.queries),
                depth=self._params.partitions, timer_bits=self._params.timer_bits,
                tick_tuples=self._params.tick_tuples, update=update)
            m.d.comb += [
                part.i_stream.valid.eq(queue.o_stream.valid),
                queue.o_stream.ready.eq(part.i_stream.ready),
                part.i_stream.payload.key.eq(queue.o_stream.payload.key),
                part.i_stream.payload.payload.eq(queue.o_stream.payload.predicates),
                result_valid.eq(part.o_stream.valid),
                part.o_stream.ready.eq(result_ready),
                result.key.eq(part.o_stream.payload.key),
                # a dropped tuple's result is meaningless: it matched nothing
                result.matches.eq(Mux(part.o_stream.payload.dropped, 0,
                                      part.o_stream.payload.result)),
                result.dropped.eq(part.o_stream.payload.dropped),
                self.drops.eq(part.drops),
            ]
        else:
            m.submodules.nfa = matcher = NfaMatcher(nfa, 0)
            m.d.comb += [
                matcher.i_stream.valid.eq(queue.o_stream.valid),
                queue.o_stream.ready.eq(matcher.i_stream.ready),
                matcher.i_stream.payload.predicates.eq(queue.o_stream.payload.predicates),
                result_valid.eq(matcher.o_stream.valid),
                matcher.o_stream.ready.eq(result_ready),
                result.matches.eq(matcher.o_stream.payload.matches),
            ]

        # record filter: keep tuples that matched or were dropped
        result_seq = Signal(self._seq_width, name="result_seq")
        with m.If(result_valid & result_ready):
            m.d.sync += result_seq.eq(result_seq + 1)
        wanted = Signal()
        m.d.comb += [
            wanted.eq(result.matches.any() | result.dropped),
            result_ready.eq(~self.o_stream.valid | self.o_stream.ready),
        ]
        with m.If(self.o_stream.ready):
            m.d.sync += self.o_stream.valid.eq(0)
        with m.If(result_valid & result_ready & wanted):
            m.d.sync += [
                self.o_stream.valid.eq(1),
                self.o_stream.payload.seq.eq(result_seq),
                self.o_stream.payload.partition.eq(result.key),
                self.o_stream.payload.matches.eq(result.matches),
                self.o_stream.payload.dropped.eq(result.dropped),
            ]
            with m.If(result.matches.any()):
                m.d.sync += self.matched.eq(self.matched + 1)
        return m


def _fields(layout: data.StructLayout) -> list[dict]:
    return [{"name": name, "offset": f.offset, "width": Shape.cast(f.shape).width}
            for name, f in layout]


def write_verilog(nfa: Nfa, path: str, params: EngineParams, *,
                  name: str = "nfacep_engine") -> dict:
    """Write the engine as Verilog to ``path`` and a JSON sidecar (ports, tuple bit layout,
    record layout, query bits, parameters) beside it; both whole or not at all."""
    from amaranth.back import verilog

    from nfacep.output import atomic_write

    engine = Engine(nfa, params)
    text = verilog.convert(engine, name=name, emit_src=False)
    schema = nfa.program.schema
    tuple_fields = _fields(engine.tuple_layout)
    for f in tuple_fields:
        f["type"] = str(schema.field(f["name"]).type)
    ports = {"clk": {"dir": "in", "width": 1}, "rst": {"dir": "in", "width": 1}}
    for member_path, member, _ in engine.signature.flatten(engine):
        port = "__".join(str(p) for p in member_path)
        shape = Shape.cast(member.shape)
        ports[port] = {"dir": "in" if member.flow == In else "out", "width": shape.width}
    sidecar = {
        "top": name, "clock": "clk", "reset": "rst", "ports": ports,
        "tuple": {"width": engine.tuple_layout.size, "fields": tuple_fields},
        "record": {"width": engine.record_layout.size,
                   "fields": _fields(engine.record_layout)},
        "queries": [{"name": q.name, "bit": q.index,
                     "skip_past_last_row": q.skip_past_last_row,
                     "states": q.count} for q in nfa.queries],
        "partition_field": nfa.program.partition_field,
        "predicates": [p.text for p in nfa.predicates],
        "parameters": params.as_dict(),
    }
    json_path = os.path.splitext(path)[0] + ".json"
    with atomic_write(path) as f:
        f.write(text)
    with atomic_write(json_path) as f:
        json.dump(sidecar, f, indent=2)
        f.write("\n")
    return sidecar
