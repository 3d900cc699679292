"""The NFA gateware's layouts (:mod:`nfacep.hdl.nfa`): the state vector (:func:`state_layout`:
the active states and, under WITHIN or for start_seq, when their runs began), the tuple's
times (:func:`times_layout`, :func:`window_times`), the match result (:func:`result_layout`),
the windows' hint (:func:`window_layout`), and the orders among states that the next-state
function keeps."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Value, signed
from amaranth.lib import data

from nfacep.nfa import Nfa, age_bits, start_bits
from nfacep.wire import SEQ_BITS, start_queries

from .layout import field_shape

__all__ = [
    "age_bits",
    "aged_states",
    "low_bits",
    "order_layout",
    "order_pairs",
    "pending_layout",
    "result_layout",
    "start_bits",
    "start_candidates",
    "started_states",
    "state_layout",
    "times_layout",
    "window_layout",
    "window_times",
]


def order_layout(nfa: Nfa) -> data.StructLayout | None:
    """The value of every ORDER BY field a WITHIN query measures its window in (``None`` when
    no query has a window): what a partition keeps of its last tuple."""
    fields = sorted({q.order_field for q in nfa.queries if q.window is not None})
    if not fields:
        return None
    schema = nfa.program.schema
    return data.StructLayout({f: field_shape(schema.field(f).type) for f in fields})


def times_layout(nfa: Nfa) -> data.StructLayout | None:
    """What the NFA needs of a tuple besides its predicates (``None``: nothing, no window and
    no start_seq). Under WITHIN: ``at``, its ORDER BY values (:func:`order_layout`), and
    ``limit``, for each windowed query (by index), its ORDER BY value minus the window,
    computed before the partition store so that the update only compares it (a partition's
    last tuple at or before the limit is too old); ``oldest``, for each, the low
    :func:`start_bits` of the earliest start of a run still live at the tuple (its value
    minus the window plus one), and ``wraps``, a bit each, set when they are above the
    value's own low bits (the live starts wrap past zero), so that whether a run is live is
    two comparisons side by side (:func:`_young`), all worked out by :func:`window_times`.
    For start_seq: ``seq``, the tuple's position in the stream (modulo ``2**SEQ_BITS``)."""
    fields = {}
    at = order_layout(nfa)
    if at is not None:
        schema = nfa.program.schema
        limits, oldest, wraps = {}, {}, {}
        for q in nfa.queries:
            if q.window is not None:
                shape = field_shape(schema.field(q.order_field).type)
                limits[str(q.index)] = signed(shape.width + 1)
                oldest[str(q.index)] = start_bits(q.window)
                wraps[str(q.index)] = 1
        fields.update(
            {
                "at": at,
                "limit": data.StructLayout(limits),
                "oldest": data.StructLayout(oldest),
                "wraps": data.StructLayout(wraps),
            }
        )
    if start_queries(nfa):
        fields["seq"] = SEQ_BITS
    return data.StructLayout(fields) if fields else None


def window_times(m: Module, nfa: Nfa, times: Value, field) -> None:
    """Drive the WITHIN members of ``times`` (a :func:`times_layout` value) from the tuple's
    fields (``field(name)``: its value): ``at``, and per windowed query ``limit``, ``oldest``
    and ``wraps``."""
    for name, _ in times.at.shape():
        m.d.comb += times.at[name].eq(field(name))
    for q in nfa.queries:
        if q.window is not None:
            t = Value.cast(field(q.order_field))
            now = low_bits(t, start_bits(q.window))
            m.d.comb += [
                times.limit[str(q.index)].eq(t - q.window),
                times.oldest[str(q.index)].eq(now - (q.window - 1)),
                times.wraps[str(q.index)].eq(now < q.window - 1),
            ]


def result_layout(nfa: Nfa) -> data.StructLayout:
    """What the NFA reports per tuple: ``matches``, one bit per query, and, when queries
    report start_seq, ``starts``: for the k-th of them (:func:`nfacep.wire.start_queries`),
    bits ``[k * SEQ_BITS, (k + 1) * SEQ_BITS)`` hold the latest start of its runs that end at
    the tuple (meaningless when it did not match), as a match record carries them."""
    fields = {"matches": len(nfa.queries)}
    starting = start_queries(nfa)
    if starting:
        fields["starts"] = SEQ_BITS * len(starting)
    return data.StructLayout(fields)


def start_candidates(nfa: Nfa) -> list[list[int]]:
    """Per query that reports start_seq (in :func:`nfacep.wire.start_queries`' order): where
    its result's start can come from, each a state whose stored start it may be (as
    :func:`next_state` takes it, a start state's is the partition's last position), or
    ``-1``, the tuple's own position (an accepting start state's run begins now)."""
    out = []
    for k in start_queries(nfa):
        q = nfa.queries[k]
        found: set[int] = set()
        for i in nfa.accepting(q):
            s = nfa.states[i]
            if s.start:
                found.add(-1)
            else:
                found.update(s.activation)
        out.append(sorted(found))
    return out


def pending_layout(nfa: Nfa) -> data.StructLayout:
    """A :func:`result_layout` result not yet chosen (``next_state(..., pending=True)``), so
    that a store can register it before the choice: ``matches`` as the result's, and for each
    of the :func:`start_candidates`, in order, whether it is the start (``picks``, at most one
    per query) and its value (``values``, ``SEQ_BITS`` each)."""
    count = sum(len(c) for c in start_candidates(nfa))
    return data.StructLayout(
        {"matches": len(nfa.queries), "picks": count, "values": SEQ_BITS * count}
    )


def started_states(nfa: Nfa) -> list[int]:
    """The states whose latest start a partition stores: those of a query that reports
    start_seq that are not start states (a run in a start state began at the last tuple, whose
    position the partition keeps once)."""
    return [s.index for s in nfa.states if nfa.queries[s.query].start_seq and not s.start]


def _tracks(q) -> bool:
    """Whether the states of query ``q`` follow their latest run's start (WITHIN, start_seq)."""
    return q.window is not None or q.start_seq


def order_pairs(nfa: Nfa) -> list[tuple[int, int]]:
    """The pairs ``(a, b)``, ``a < b``, of states whose order a partition stores, for the
    queries with a window or start_seq: one bit, set iff the latest run in ``a`` began at or
    after the latest run in ``b`` (a tie counts for the lower index, so the bits describe a
    total order).

    A state takes the start (and under WITHIN the age) of the first of its active
    predecessors in that order, so the pairs of predecessors of a state are needed, and, for
    start_seq, those of the accepting states of a query (a match reports the first of them);
    a pair's next order is its states' chosen predecessors' order, so their pairs are needed
    too. Pairs with a start state need no bit: a run in a start state began at the last tuple,
    after all others."""
    tracked = {s.index for s in nfa.states if not s.start and _tracks(nfa.queries[s.query])}
    need: set[tuple[int, int]] = set()
    work: list[tuple[int, int]] = []

    def add(a: int, b: int) -> None:
        pair = (min(a, b), max(a, b))
        if (
            a != b
            and a in tracked
            and b in tracked
            and pair not in need
            and nfa.states[a].activation
            and nfa.states[b].activation
        ):
            need.add(pair)
            work.append(pair)

    for q in nfa.queries:
        if not _tracks(q):
            continue
        for i in q.states:
            preds = sorted(nfa.states[i].activation)
            for x, a in enumerate(preds):
                for b in preds[x + 1 :]:
                    add(a, b)
        if q.start_seq:
            ends = nfa.accepting(q)
            for x, a in enumerate(ends):
                for b in ends[x + 1 :]:
                    add(a, b)
    while work:
        a, b = work.pop()
        for p in nfa.states[a].activation:
            for r in nfa.states[b].activation:
                add(p, r)
    return sorted(need)


def state_layout(nfa: Nfa) -> data.StructLayout:
    """What the NFA keeps between two tuples of a partition.

    ``active``: one bit per state (bit *i* = ``nfa.states[i]``). Under WITHIN, also ``last``:
    the partition's last tuple's value of each ORDER BY field, and ``starts``: for every
    state of a query with a window that is not a start state (:func:`aged_states`), the low
    :func:`start_bits` of the ORDER BY value of the tuple the latest run in it began at
    (meaningless while the state is inactive). A start state needs none: a run in it began
    at the last tuple. Without a window the layout is ``active`` alone, so the state vector
    is the paper's bit vector.

    For queries that report start_seq, also ``began``: for each of their states that is not a
    start state (:func:`started_states`), the position of the tuple the latest run in it
    began at, and ``last_seq``, the position of the partition's last tuple (where the runs in
    its start states began). With a window or start_seq, ``order``: one bit per pair of
    :func:`order_pairs`, which of the two states' latest runs began later.
    """
    fields = {"active": len(nfa.states)}
    times = order_layout(nfa)
    if times is not None:
        aged = aged_states(nfa)
        if aged:
            fields["starts"] = data.StructLayout(
                {str(i): start_bits(nfa.queries[nfa.states[i].query].window) for i in aged}
            )
        fields["last"] = times
    if start_queries(nfa):
        started = started_states(nfa)
        if started:
            fields["began"] = data.StructLayout({str(i): SEQ_BITS for i in started})
        fields["last_seq"] = SEQ_BITS
    pairs = order_pairs(nfa)
    if pairs:
        fields["order"] = len(pairs)
    return data.StructLayout(fields)


def aged_states(nfa: Nfa) -> list[int]:
    """The states whose runs' starts a partition stores: those of a query with a window that
    are not start states (a function of the queries and their windows only, not of the
    wiring)."""
    return [s.index for s in nfa.states if nfa.queries[s.query].window is not None and not s.start]


def window_layout(nfa: Nfa) -> data.StructLayout | None:
    """What :func:`next_state` needs to know of a tuple's time against a partition's stored
    state, ``None`` without windows: ``far`` (a bit per windowed query, by index): the
    partition's last tuple is the window or more before this one, or after it, so every run of
    the query has ended; ``live`` (a bit per state of :func:`aged_states`, by index): the
    latest run in the state began less than the window before this tuple, as the low bits of
    its start tell when the query is not ``far`` (meaningless while the state is inactive or
    the query far: a run is live iff ``live`` and not ``far``, which :func:`next_state`
    combines, so that each is worked out apart)."""
    far = {str(q.index): 1 for q in nfa.queries if q.window is not None}
    if not far:
        return None
    fields = {"far": data.StructLayout(far)}
    aged = aged_states(nfa)
    if aged:
        fields["live"] = data.StructLayout({str(i): 1 for i in aged})
    return data.StructLayout(fields)


def low_bits(value: Value, k: int) -> Value:
    """The low ``k`` bits of an ORDER BY value, sign-extended first when it is signed and
    narrower: what a start keeps (:func:`start_bits`), so that differences modulo ``2**k``
    are the values' differences."""
    value = Value.cast(value)
    if len(value) < k and value.shape().signed:
        value = Cat(value, value[-1].replicate(k - len(value)))
    return value.as_unsigned()[:k]
