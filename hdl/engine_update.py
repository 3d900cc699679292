"""What the fixed engine's partition store keeps and does per tuple (:func:`store_update`): the
NFA's step, under WITHIN with the windows' hint the table store works out ahead, and with PREV
the partition's history read and written back shifted (:func:`late_layout`, :func:`shifted`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data

from nfacep.lang import predicates as P
from nfacep.nfa import Nfa
from nfacep.wire import start_queries

from .decoder import prev_early, prev_predicates, reads_prev
from .layout import field_shape, history_layout, params_layout
from .nfa import finish_result, next_state
from .nfa_layout import pending_layout, state_layout, times_layout, window_layout
from .nfa_windows import ahead_layout, settled_hint, window_gap, window_hint
from .sdram.fit import stored_state_width

__all__ = ["late_layout", "shifted", "store_update"]


def store_update(nfa: Nfa):
    """What the partition store keeps and does per tuple: ``(payload_shape, state_width,
    update)``. The payload is the predicate vector, with the tuple's times under WITHIN or
    start_seq, and with PREV what the predicates that read it need (:func:`late_layout`); the
    state, the NFA's (:func:`~.nfa_layout.state_layout`) followed, with PREV, by the partition's
    history (:func:`~.layout.history_layout`). Under WITHIN, ``update`` also has ``prepare``
    and ``hint_width``: the windows' hint (:func:`~.nfa_windows.window_hint`: which stored runs are
    still live), which the table store works out before the update
    (:class:`~.table.TablePartitioner`); it takes ``ahead``, the payloads of operations
    behind it, for which it also returns that hint of the state it stores (in the parts of
    :func:`~.nfa_windows.ahead_layout`, ``ahead_width`` bits, which ``settle(m, parts)``
    makes a hint of once the store has registered them), and ``gaps``, for
    each of them the part of that hint two payloads alone decide, which ``gap`` (of
    ``gap_width`` bits, :func:`~.nfa_windows.window_gap`) works out, and ``ahead_state``, a
    copy of the state the store keeps in a register of its own, which those hints are then
    worked out from (``next_state(ahead_state=...)``). With start_seq,
    ``update`` also has ``finish`` and ``pending_width``: called with ``pending=True`` it
    returns the result before the starts are chosen (:func:`~.nfa_layout.pending_layout`, of
    ``pending_width`` bits), which ``finish(m, pending)`` turns into the result, so that a
    store can register it in between (:func:`_start_hooks`). With PREV, what a store can work
    out a stage before and hand to ``update``: ``early`` (:func:`_early_hook`, the high bits
    of comparisons wider than :data:`~.decoder.SPLIT_LOW` bits) and ``prev``
    (:func:`_prev_hook`, the bits of the predicates that read PREV)."""
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

        def update(
            mod,
            state,
            payload,
            hint=None,
            ahead=None,
            gaps=None,
            pending=False,
            early=None,
            ahead_state=None,
            prev=None,
        ):
            at = None if times is None else payload.times
            later = None if ahead is None else [a.times for a in ahead]
            given = {"times": at, "hint": hint, "ahead": later, "gaps": gaps, "pending": pending}
            if ahead_state is not None:
                given["ahead_state"] = Value.cast(ahead_state)[:nfa_bits]
            if kept is None:
                return next_state(mod, nfa, state, payload.predicates, **given)
            # the partition's history follows its NFA state in the entry
            history = data.View(kept, state[nfa_bits:])
            params = payload.late.params if "params" in late.members else None
            bits = (
                prev_predicates(mod, nfa, payload.late.fields, params, history, early)
                if prev is None
                else Value.cast(prev)
            )
            out = next_state(mod, nfa, state[:nfa_bits], payload.predicates | bits, **given)
            after = shifted(mod, kept, history, payload.late.fields)
            return (Cat(Value.cast(out[0]), Value.cast(after)), *out[1:])

        _start_hooks(nfa, update)
        _window_hooks(nfa, nfa_bits, update)
        _early_hook(nfa, nfa_bits, payload_shape, update)
        _prev_hook(nfa, nfa_bits, update)

    return payload_shape, stored_state_width(nfa), update


def _start_hooks(nfa: Nfa, update) -> None:
    """With start_seq, :func:`store_update`'s ``update`` gets ``finish`` and
    ``pending_width``: a store that can may register the result before the starts are chosen
    among their candidates (``pending``), and choose them after the register (``finish``)."""
    if not start_queries(nfa):
        return

    def finish(mod, pending):
        return finish_result(mod, nfa, pending)

    update.finish = finish
    update.pending_width = pending_layout(nfa).size


def _window_hooks(nfa: Nfa, nfa_bits: int, update) -> None:
    """Under WITHIN, :func:`store_update`'s ``update`` gets ``prepare``, ``gap`` and
    ``settle`` (with their widths): a store that can may work out the windows' hint (which
    stored runs are live) a stage before the update, and hand it to it as its ``hint``; for
    the state it forwards to the operations behind it, the update works it out (``ahead``),
    with what the two tuples' times alone decide given when the store has it (``gap``), in
    parts the store registers and then settles into hints (``settle``)."""
    window = window_layout(nfa)
    if window is None:
        return

    def prepare(mod, state, payload):
        return window_hint(mod, nfa, Value.cast(state)[:nfa_bits], payload.times)

    def gap(mod, earlier, later):
        return window_gap(mod, nfa, earlier.times, later.times)

    def settle(mod, parts):
        return settled_hint(mod, nfa, parts)

    update.prepare = prepare
    update.hint_width = window.size
    update.gap = gap
    update.gap_width = window.members["far"].size
    update.settle = settle
    update.ahead_width = ahead_layout(nfa).size


def _early_hook(nfa: Nfa, nfa_bits: int, payload_shape, update) -> None:
    """With PREV compared in wide integers, :func:`store_update`'s ``update`` gets ``early``
    (with ``early_width``): ``early(m, state, payload)``, the high bits of those comparisons
    (:func:`~.decoder.prev_early`), which a store can work out for the state a tuple finds a
    stage before the update and hand to it as ``early`` (the update then compares only the
    low bits)."""
    kept = history_layout(nfa.program.schema, nfa.history)
    if kept is None:
        return

    def early(mod, state, payload):
        return prev_early(mod, nfa, *_history_reads(kept, nfa_bits, state, payload))

    probe = early(None, Signal(nfa_bits + kept.size), Signal(payload_shape))
    if len(probe):
        update.early = early
        update.early_width = len(probe)


def _prev_hook(nfa: Nfa, nfa_bits: int, update) -> None:
    """With PREV, :func:`store_update`'s ``update`` gets ``prev`` (with ``prev_width``):
    ``prev(m, state, payload, early=None)``, the bits of the predicates that read PREV
    (:func:`~.decoder.prev_predicates`, one bit per predicate, the others 0) for the
    partition's history in ``state``, which a store can work out for the state a tuple will
    find a stage before the update and hand to it as ``prev``. Given ``early``, what
    ``update.early`` made of the same state and payload, the comparisons it split combine its
    high bits' order with their low bits' (two shorter carry chains side by side)."""
    kept = history_layout(nfa.program.schema, nfa.history)
    if kept is None:
        return

    def prev(mod, state, payload, early=None):
        return prev_predicates(mod, nfa, *_history_reads(kept, nfa_bits, state, payload), early)

    update.prev = prev
    update.prev_width = len(nfa.predicates)


def _history_reads(kept: data.StructLayout, nfa_bits: int, state, payload) -> tuple:
    """What PREV's predicates read, for :func:`_early_hook`'s and :func:`_prev_hook`'s
    functions: the tuple's fields, its parameters' values (None without parameters) and the
    partition's history, which follows the NFA's ``nfa_bits`` in ``state``."""
    history = data.View(kept, Value.cast(state)[nfa_bits:])
    params = payload.late.params if "params" in payload.late.shape().members else None
    return payload.late.fields, params, history


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
