"""The windows' hint of the NFA gateware (:func:`window_hint`, :func:`window_gap`): which of a
partition's stored runs are still live at a tuple's time, worked out apart from the next-state
function so that a store can work it out a stage ahead (the table's forwarding); and the hint
of a state being made, as the update works it out for the tuples behind it, in parts a store
registers before it settles them (:func:`ahead_layout`, :func:`settled_hint`)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data

from nfacep.nfa import Nfa

from .nfa_layout import aged_states, low_bits, state_layout, times_layout, window_layout

__all__ = ["ahead_layout", "settled_hint", "window_gap", "window_hint"]


def _young(times, q, start: Value) -> Value:
    """Whether a run of windowed query ``q`` that began at ``start`` (low bits of its ORDER
    BY value) is less than the window before the tuple of ``times``, when it is less than
    twice the window before (:func:`start_bits`): ``start`` lies between the tuple's
    ``oldest`` and its own low bits, modulo their width (:func:`times_layout`), two
    comparisons side by side and no subtraction before them."""
    k = len(start)
    now = low_bits(times.at[q.order_field], k)
    oldest = Value.cast(times.oldest[str(q.index)])
    after, before = start >= oldest, start <= now
    return Mux(times.wraps[str(q.index)], after | before, after & before)


def _far(times, last, q) -> Value:
    """Whether the last tuple (its ORDER BY values ``last``) is the window of query ``q`` or
    more before the tuple of ``times`` (or after it): two comparisons at full width, side by
    side, and no subtraction before them (``times.limit`` is the time minus the window).
    (Split at :func:`start_bits` into a small subtraction and two equalities of the high
    parts instead, one placement measured 91.0 MHz against 104.8: not kept.)"""
    t = Value.cast(times.at[q.order_field])
    before = Value.cast(last[q.order_field])
    return (t < before) | (Value.cast(times.limit[str(q.index)]) >= before)


def window_gap(m: Module, nfa: Nfa, earlier: Value, later: Value, prefix: str = "") -> Signal:
    """The part of the :func:`window_hint` of any state a tuple (its :func:`times_layout`
    ``earlier``) leaves, against a later tuple's ``later``, that the two tuples' times alone
    decide: ``far`` (a bit per windowed query, by index, as in :func:`window_layout`), since
    the state's last time is the earlier tuple's. A store can work it out as soon as both
    tuples are known, before the state is."""
    if not isinstance(earlier, data.View):
        earlier = times_layout(nfa)(earlier)
    if not isinstance(later, data.View):
        later = times_layout(nfa)(later)
    far = window_layout(nfa).members["far"]
    gap = Signal(far, name=f"{prefix}gap")
    for q in nfa.queries:
        if q.window is not None:
            m.d.comb += gap[str(q.index)].eq(_far(later, earlier.at, q))
    return gap


def window_hint(m: Module, nfa: Nfa, state: Value, times: Value, prefix: str = "") -> Signal:
    """The :func:`window_layout` of a tuple (its :func:`times_layout` ``times``) against a
    partition's stored ``state``: what :func:`next_state` compares first, from the stored
    times alone (``far`` and ``live`` side by side: a run is live iff its ``live`` bit is set
    and its query's ``far`` is not)."""
    layout = window_layout(nfa)
    if not isinstance(times, data.View):
        times = times_layout(nfa)(times)
    now = state_layout(nfa)(state)
    hint = Signal(layout, name=f"{prefix}window")
    for q in nfa.queries:
        if q.window is not None:
            m.d.comb += hint.far[str(q.index)].eq(_far(times, now.last, q))
    for i in aged_states(nfa):
        # ``live`` is the start's comparison alone, ``far`` apart: each a few gates after its
        # comparison into a register of the store, combined by the update that uses them
        q = nfa.queries[nfa.states[i].query]
        m.d.comb += hint.live[str(i)].eq(_young(times, q, Value.cast(now.starts[str(i)])))
    return hint


def ahead_layout(nfa: Nfa) -> data.StructLayout | None:
    """The hint of a state being made against a later tuple's times, as the update works it
    out beside itself (``next_state(ahead=...)``), before the last gates: ``far``, as the
    :func:`window_layout`'s, and ``terms``, for each state of :func:`aged_states` that has
    predecessors, a bit per predecessor (in index order): the state takes its start from that
    predecessor and that start is young at the later time. A store registers these right
    after the comparisons and settles them (:func:`settled_hint`) after the register.
    ``None`` without windows."""
    window = window_layout(nfa)
    if window is None:
        return None
    terms = {
        str(i): len(nfa.states[i].activation) for i in aged_states(nfa) if nfa.states[i].activation
    }
    return data.StructLayout({"far": window.members["far"], "terms": data.StructLayout(terms)})


def settled_hint(m: Module, nfa: Nfa, parts: Value, prefix: str = "") -> Signal:
    """The :func:`window_layout` hint of :func:`ahead_layout` ``parts``: a state's run is
    live iff any of its terms is set (its chosen predecessor's start is young)."""
    layout = ahead_layout(nfa)
    parts = layout(parts)
    hint = Signal(window_layout(nfa), name=f"{prefix}settled")
    m.d.comb += hint.far.eq(parts.far)
    for i in aged_states(nfa):
        if str(i) in layout.members["terms"].members:
            m.d.comb += hint.live[str(i)].eq(Value.cast(parts.terms[str(i)]).any())
    return hint
