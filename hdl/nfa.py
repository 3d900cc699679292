"""NFA gateware generated from the NFA model by the paper's wiring (§4.5, §6).

:func:`next_state` builds the combinational next-state function shared by both forms: a state
is set iff its predicate bit holds and it is activated — by default (a start state) or by a
state of its activation set that is set now. :class:`NfaMatcher` is the stand-alone form,
one flip-flop per state (Figure 5); the partitioned form is :func:`next_state` applied to the
state vector the stream partitioner retrieves (Figure 2).
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.nfa import Nfa

from .queue import StreamBuffer

__all__ = ["NfaMatcher", "matcher_signature", "next_state"]


def next_state(m: Module, nfa: Nfa, state: Value, predicates: Value,
               prefix: str = "") -> tuple[Signal, Signal]:
    """Add the next-state logic to ``m``; return ``(stored, matches)``.

    ``state`` holds one bit per NFA state (bit *i* = ``nfa.states[i]``), ``predicates`` one bit
    per decoder output. ``matches`` has one bit per query: an accepting state of that query is
    set in the next state. ``stored`` is the state vector to keep: the next state, except that
    a query with AFTER MATCH SKIP PAST LAST ROW that matched has all its states cleared.
    """
    n = len(nfa.states)
    nxt = Signal(n, name=f"{prefix}next")
    for s in nfa.states:
        bit = Signal(name=f"{prefix}{s.name}_next")
        if s.start:
            active = Const(1)
        elif s.activation:
            active = Value.cast(0)
            for j in sorted(s.activation):
                active = active | state[j]
        else:
            active = Const(0)
        guard = Const(1) if s.predicate is None else predicates[s.predicate]
        m.d.comb += [bit.eq(guard & active), nxt[s.index].eq(bit)]
    matches = Signal(len(nfa.queries), name=f"{prefix}matches")
    stored = Signal(n, name=f"{prefix}stored")
    m.d.comb += stored.eq(nxt)
    for q in nfa.queries:
        hit = Value.cast(0)
        for i in nfa.accepting(q):
            hit = hit | nxt[i]
        m.d.comb += matches[q.index].eq(hit)
        if q.skip_past_last_row and q.count:
            with m.If(matches[q.index]):
                m.d.comb += stored[q.first:q.first + q.count].eq(0)
    return stored, matches


def matcher_signature(nfa: Nfa, payload_shape, *, inputs=None) -> dict:
    """The stream interface every matcher shares: per tuple, ``inputs`` (by default the
    ``predicates`` vector) and a pass-through ``payload`` in; the ``payload`` and one match bit
    per query out."""
    inputs = inputs if inputs is not None else {"predicates": len(nfa.predicates)}
    return {
        "i_stream": In(stream.Signature(data.StructLayout({**inputs, "payload": payload_shape}))),
        "o_stream": Out(stream.Signature(data.StructLayout({
            "payload": payload_shape, "matches": len(nfa.queries)}))),
    }


class NfaMatcher(wiring.Component):
    """Stand-alone NFA: one flip-flop per state, for a stream without partitions.

    Takes one predicate vector per transfer and emits, one cycle later, the match bits of every
    query for that tuple together with the tuple's pass-through ``payload``.

    Latency 1 cycle; throughput 1 tuple per cycle; a stalled ``o_stream`` stalls ``i_stream``
    (``i_stream.ready`` is ``~o_stream.valid | o_stream.ready``) and the state holds.

    Members
    -------
    i_stream : ``In(stream.Signature(StructLayout({"predicates": P, "payload": payload_shape})))``
    o_stream : ``Out(stream.Signature(StructLayout({"payload": payload_shape, "matches": Q})))``
    """

    def __init__(self, nfa: Nfa, payload_shape):
        self._nfa = nfa
        self._payload_shape = payload_shape
        super().__init__(matcher_signature(nfa, payload_shape))

    @property
    def nfa(self) -> Nfa:
        return self._nfa

    def elaborate(self, platform):
        m = Module()
        nfa = self._nfa
        state = Signal(len(nfa.states), name="state")
        # one named flip-flop per state, so waveforms read like the query
        for s in nfa.states:
            flop = Signal(name=s.name)
            m.d.comb += flop.eq(state[s.index])
        stored, matches = next_state(m, nfa, state, self.i_stream.payload.predicates)
        # the output register: the match bits are combinational from the state and the input
        m.submodules.output = output = StreamBuffer(self.o_stream.payload.shape())
        m.d.comb += [
            output.i_stream.valid.eq(self.i_stream.valid),
            self.i_stream.ready.eq(output.i_stream.ready),
            output.i_stream.payload.payload.eq(self.i_stream.payload.payload),
            output.i_stream.payload.matches.eq(matches),
        ]
        with m.If(self.i_stream.valid & self.i_stream.ready):
            m.d.sync += state.eq(stored)
        wiring.connect(m, output.o_stream, wiring.flipped(self.o_stream))
        return m
