"""The windows' hint of the NFA gateware (:func:`window_hint`, :func:`window_gap`): which of a
partition's stored runs are still live at a tuple's time, worked out apart from the next-state
function so that a store can work it out a stage ahead (the table's forwarding); and the hint
of a state being made, as the update works it out for the tuples behind it, in parts a store
registers before it settles them (:func:`ahead_layout`, :func:`settled_hint`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data

from nfacep.nfa import Nfa

from .nfa_layout import aged_states, low_bits, state_layout, times_layout, window_layout

__all__ = [
    "SPLIT",
    "TERM",
    "ahead_layout",
    "settled_hint",
    "window_gap",
    "window_hint",
    "young_term",
]


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


#: a comparison ``a >= b`` of two starts' widths in halves side by side (:func:`_at_least`):
#: the low halves' (``low``), and the high halves' with and without equality (``high``,
#: ``high_strict``); ``a >= b`` is ``high`` when ``low`` is set, else ``high_strict``
SPLIT = data.StructLayout({"low": 1, "high": 1, "high_strict": 1})

#: a predecessor's term of the hint ahead, in pieces: its choice (``win``) and its start's
#: two comparisons (:func:`_young`'s), each split (:data:`SPLIT`)
TERM = data.StructLayout({"win": 1, "after": SPLIT, "before": SPLIT})


def _at_least(m: Module, a: Value, b: Value, name: str) -> Signal:
    """``a >= b`` (of a start's width) as :data:`SPLIT` pieces: three comparisons of half the
    width side by side, which a store registers before they are put together
    (:func:`_settled_term`), so that no carry chain spans the whole width before it."""
    low = len(a) // 2
    split = Signal(SPLIT, name=name)
    m.d.comb += [
        split.low.eq(a[:low] >= b[:low]),
        split.high.eq(a[low:] >= b[low:]),
        split.high_strict.eq(a[low:] > b[low:]),
    ]
    return split


def young_term(m: Module, times, q, start: Value, win: Value, name: str) -> Signal:
    """A predecessor's :data:`TERM` of the hint ahead: its choice ``win`` and :func:`_young`'s
    two comparisons of its ``start`` against the later tuple's ``times``, split."""
    k = len(start)
    now = low_bits(times.at[q.order_field], k)
    oldest = Value.cast(times.oldest[str(q.index)])
    term = Signal(TERM, name=name)
    m.d.comb += [
        term.win.eq(win),
        term.after.eq(_at_least(m, start, oldest, f"{name}_after")),
        term.before.eq(_at_least(m, now, start, f"{name}_before")),
    ]
    return term


def _settled_term(term, wraps: Value, low: bool) -> Value:
    """Whether a :data:`TERM` holds: chosen, and its start young (:func:`_young`'s two
    comparisons put together from their halves; ``low=False``: the low halves left out, a
    broken path the tests catch)."""

    def whole(split):
        return Mux(split.low, split.high, split.high_strict) if low else split.high

    after, before = whole(term.after), whole(term.before)
    return term.win & Mux(wraps, after | before, after & before)


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
    :func:`window_layout`'s, ``wraps``, the later tuple's (by query index, as in
    :func:`times_layout`), and ``terms``, for each state of :func:`aged_states` that has
    predecessors, a :data:`TERM` per predecessor (in index order): whether the state takes
    its start from that predecessor, and that start's comparisons with the later time in
    halves (:func:`young_term`). A store registers these right after the comparisons and
    settles them (:func:`settled_hint`) after the register. ``None`` without windows."""
    window = window_layout(nfa)
    if window is None:
        return None
    terms = {
        str(i): data.ArrayLayout(TERM, len(nfa.states[i].activation))
        for i in aged_states(nfa)
        if nfa.states[i].activation
    }
    far = window.members["far"]
    return data.StructLayout({"far": far, "wraps": far, "terms": data.StructLayout(terms)})


def settled_hint(m: Module, nfa: Nfa, parts: Value, prefix: str = "", low: bool = True) -> Signal:
    """The :func:`window_layout` hint of :func:`ahead_layout` ``parts``: a state's run is
    live iff any of its terms holds (its chosen predecessor's start is young, the halves of
    its comparisons put together here). ``low=False`` leaves the low halves out: a broken
    path, for the tests only."""
    layout = ahead_layout(nfa)
    parts = layout(parts)
    hint = Signal(window_layout(nfa), name=f"{prefix}settled")
    m.d.comb += hint.far.eq(parts.far)
    for i in aged_states(nfa):
        if str(i) in layout.members["terms"].members:
            q = nfa.queries[nfa.states[i].query]
            wraps = parts.wraps[str(q.index)]
            terms = parts.terms[str(i)]
            held = [_settled_term(terms[j], wraps, low) for j in range(len(terms))]
            m.d.comb += hint.live[str(i)].eq(Cat(held).any())
    return hint
