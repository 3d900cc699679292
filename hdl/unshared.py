"""An NFA without a shared predicate decoder, for the paper's Figure 15 (appendix C).

The engine decodes every distinct predicate once (:class:`nfacep.hdl.decoder.PredicateDecoder`) and
each NFA state looks at one wire. Here, for comparison, each state evaluates its own copy of its
predicate from the raw tuple fields (the paper's Figure 13): one single-predicate decoder per
state, each its own submodule named after the state, feeding :class:`nfacep.hdl.nfa.NfaMatcher`
through an NFA whose every state has a predicate of its own (:func:`unshared`). Whether
synthesis finds the copies and merges them is what the benchmark measures.
"""

from __future__ import annotations

from dataclasses import replace

from amaranth.hdl import Module
from amaranth.lib import wiring

from nfacep.nfa import Nfa, Predicate

from .decoder import PredicateDecoder
from .layout import tuple_layout
from .nfa import NfaMatcher, matcher_signature

__all__ = ["UnsharedNfaMatcher", "unshared"]


def unshared(nfa: Nfa) -> Nfa:
    """``nfa`` with a predicate of its own for every state that has one (a copy of the
    original): predicate ``k`` belongs to the ``k``-th such state. Matches the same tuples."""
    predicates = []
    states = []
    for s in nfa.states:
        if s.predicate is None:
            states.append(s)
            continue
        states.append(replace(s, predicate=len(predicates)))
        predicates.append(Predicate(len(predicates), nfa.predicates[s.predicate].expr))
    return replace(nfa, predicates=tuple(predicates), states=tuple(states))


class UnsharedNfaMatcher(wiring.Component):
    """Stand-alone NFA whose states evaluate their own predicates on the tuple.

    The contract of :class:`nfacep.hdl.nfa.NfaMatcher` (latency 1 cycle, 1 tuple per cycle, a
    stalled ``o_stream`` stalls ``i_stream``), taking the tuple instead of a predicate vector. The
    predicate logic of state ``stN_X`` is the submodule ``stN_X_pred``.

    Members
    -------
    i_stream : ``In(stream.Signature(StructLayout({"tuple": tuple_layout(schema),
    "payload": payload_shape})))``
    o_stream : ``Out(stream.Signature(StructLayout({"payload": payload_shape, "matches": Q})))``
    """

    def __init__(self, nfa: Nfa, payload_shape):
        self._nfa = nfa
        self._own = unshared(nfa)
        self._payload_shape = payload_shape
        super().__init__(
            matcher_signature(
                nfa, payload_shape, inputs={"tuple": tuple_layout(nfa.program.schema)}
            )
        )

    @property
    def nfa(self) -> Nfa:
        return self._nfa

    def elaborate(self, platform):
        m = Module()
        own = self._own
        m.submodules.nfa = matcher = NfaMatcher(own, self._payload_shape)
        for s in own.states:
            if s.predicate is None:
                continue
            # a decoder of this state's predicate alone
            single = replace(own, predicates=(replace(own.predicates[s.predicate], index=0),))
            m.submodules[f"{s.name}_pred"] = dec = PredicateDecoder(single)
            m.d.comb += [
                dec.tuple.eq(self.i_stream.payload.tuple),
                matcher.i_stream.payload.predicates[s.predicate].eq(dec.predicates[0]),
            ]
        m.d.comb += [
            matcher.i_stream.valid.eq(self.i_stream.valid),
            self.i_stream.ready.eq(matcher.i_stream.ready),
            matcher.i_stream.payload.payload.eq(self.i_stream.payload.payload),
        ]
        wiring.connect(m, matcher.o_stream, wiring.flipped(self.o_stream))
        return m
