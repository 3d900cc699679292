"""NFA gateware generated from the NFA model by the paper's wiring (§4.5, §6).

:func:`next_state` builds the combinational next-state function shared by both forms: a state
is set iff its predicate bit holds and it is activated — by default (a start state) or by a
state of its activation set that is set now. :class:`NfaMatcher` is the stand-alone form,
one flip-flop per state (Figure 5); the partitioned form is :func:`next_state` applied to the
state vector the stream partitioner retrieves (Figure 2).

Under WITHIN the state is wider (:func:`state_layout`): each state of a windowed query also
keeps when its latest run began (the low bits of its first tuple's ORDER BY value), and the
partition keeps the time of its last tuple. For a
query that reports start_seq, each state keeps where its latest run began (a tuple's position)
and the partition the position of its last tuple; the match result then carries, per such
query, the latest start among the runs that end at the tuple (:func:`result_layout`).

The layouts are :mod:`~nfacep.hdl.nfa_layout`'s, the windows' hint (which stored runs are still
live) :mod:`~nfacep.hdl.nfa_windows`'s.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.nfa import Nfa, start_bits
from nfacep.wire import SEQ_BITS, start_queries

from .nfa_layout import (
    _tracks,
    low_bits,
    order_pairs,
    pending_layout,
    result_layout,
    start_candidates,
    state_layout,
    times_layout,
    window_layout,
)
from .nfa_windows import _young, ahead_layout, window_gap, window_hint
from .stream import StreamBuffer

__all__ = ["NfaMatcher", "finish_result", "matcher_signature", "next_state"]


def next_state(
    m: Module,
    nfa: Nfa,
    state: Value,
    predicates: Value,
    prefix: str = "",
    *,
    times: Value | None = None,
    hint: Value | None = None,
    ahead: list | None = None,
    gaps: list | None = None,
    pending: bool = False,
    ahead_state: Value | None = None,
):
    """Add the next-state logic to ``m``; return ``(stored, result)``, and with ``ahead``
    ``(stored, result, hints)``. With ``pending`` the result is a :func:`pending_layout`
    one, the starts not yet chosen among their candidates, which :func:`finish_result` turns
    into the :func:`result_layout` result (a store registers it in between).

    ``state`` is a value of :func:`state_layout`, ``predicates`` holds one bit per decoder
    output, ``times`` (under WITHIN or start_seq only) the tuple's :func:`times_layout`.
    ``result`` is a :func:`result_layout` signal: ``matches`` has one bit per query (an
    accepting state of that query is set in the next state), and ``starts`` the latest start
    among the accepting states set, per query that reports start_seq. ``stored`` is the state
    to keep: the next state, except that a query with AFTER MATCH SKIP PAST LAST ROW that
    matched has all its states cleared.

    For start_seq a state's latest start is the tuple's position for a start state (a run
    beginning now is the latest), else the greatest stored start among its active
    predecessors (a start state's: the partition's last tuple's position). No start is
    compared with another: the stored order bits (:func:`order_pairs`) say which predecessor
    began latest, so the choice is a few gates deep and the start a multiplexer; the order
    after the tuple is the order of the chosen predecessors, and a match reports the first of
    its accepting states in that order. Exact for streams of fewer than ``2**SEQ_BITS``
    tuples, as a record's ``seq``.

    Under WITHIN a state also carries when its latest run began (DESIGN: the latest start of
    the runs in it), as the low :func:`start_bits` of the ORDER BY value: a start state's run
    began at this tuple (the next tuple finds it at the partition's last time), a state
    reached from others takes the start of the first of its active predecessors in the order
    bits' order, the one whose latest run began latest (ORDER BY values never decrease while
    a run lives). A predecessor is live iff its run began less than the window before this
    tuple; the state is reached iff an active predecessor is live (the youngest is live iff
    any is). Whether each is live is the :func:`window_hint` of the stored state: the last
    tuple the window or more back (or after this one) ends every run (compared at the field's
    full width), and otherwise the low bits' difference is a run's age exactly
    (:func:`start_bits`). So the next state itself compares nothing: no addition or
    comparison is on the path from a state to the next.

    ``hint``: the :func:`window_hint` of ``state`` and ``times``, when the caller has worked
    it out already (the table store does, a stage earlier); otherwise it is worked out here.
    ``ahead``: the times of operations after this one (:func:`times_layout` values): the
    third value returned holds the :func:`window_hint` of ``stored`` against each, in the
    parts of :func:`~.nfa_windows.ahead_layout` (:func:`~.nfa_windows.settled_hint` settles
    them), worked out
    from this update's inputs (each state's start is a predecessor's stored start, compared
    with ``ahead``'s time beside the choice), not from ``stored``, so that a store forwarding
    the state to the next tuple of the partition hands it the hint without a comparison after
    the update. ``gaps`` (beside ``ahead``, an entry per time or ``None``): the
    :func:`window_gap` of this tuple's times and that one's, when the caller has worked it out
    already (a cycle before, from the two tuples' times alone); otherwise it is worked out
    here. ``ahead_state``: a copy of ``state`` of the caller's (a register of its own, loaded
    as ``state``'s is), which the hints ahead are worked out from instead, so that the
    register of ``state`` does not drive their comparisons.
    """
    build = _NextState(m, nfa, state, prefix, times, hint, pending)
    return build.build(predicates, ahead, gaps, ahead_state)


def finish_result(m: Module, nfa: Nfa, pending: Value) -> Value:
    """The :func:`result_layout` result of a :func:`pending_layout` one: each query's start
    the value of its candidate picked (none picked: no match, the start meaningless)."""
    pending = pending_layout(nfa)(pending)
    result = Signal(result_layout(nfa), name="finished_result")
    m.d.comb += result.matches.eq(pending.matches)
    c = 0
    for k, cands in enumerate(start_candidates(nfa)):
        latest = Value.cast(0)
        for _ in cands:
            value = pending.values[c * SEQ_BITS : (c + 1) * SEQ_BITS]
            latest = latest | Mux(pending.picks[c], value, 0)
            c += 1
        m.d.comb += result.starts[k * SEQ_BITS : (k + 1) * SEQ_BITS].eq(latest)
    return result


def _first_of(candidates: list[int], live, beats) -> dict[int, Value]:
    """One-hot: the first of the ``candidates`` that are ``live`` in the order ``beats``."""
    out = {}
    for a in candidates:
        win = live(a)
        for b in candidates:
            if b != a:
                win = win & (~live(b) | beats(a, b))
        out[a] = win
    return out


class _NextState:
    """:func:`next_state`'s stages, in the order they add logic to the module: the windows'
    hint (WITHIN), the predecessor each state takes its starts from, each state's next bit
    (with its starts), the order bits after the tuple, the result, and the hint ahead."""

    def __init__(
        self,
        m: Module,
        nfa: Nfa,
        state: Value,
        prefix: str,
        times: Value | None,
        hint: Value | None = None,
        pending: bool = False,
    ):
        self.m, self.nfa, self.prefix, self.pending = m, nfa, prefix, pending
        self.state, self.given_hint = state, hint
        self.layout = layout = state_layout(nfa)
        self.now = layout(state)
        members = layout.members
        self.aged = set(members["starts"].members) if "starts" in members else set()
        self.started = set(members["began"].members) if "began" in members else set()
        if ("last" in members or "last_seq" in members) and times is None:
            raise ValueError(
                "a query has a window or start_seq: next_state needs the tuple's times"
            )
        if times is not None and not isinstance(times, data.View):
            times = times_layout(nfa)(times)
        self.times = times
        self.pairs = {pair: k for k, pair in enumerate(order_pairs(nfa))}
        self.next_order = None

    def build(
        self,
        predicates: Value,
        ahead: list | None = None,
        gaps: list | None = None,
        ahead_state: Value | None = None,
    ):
        m, nfa, prefix = self.m, self.nfa, self.prefix
        hint = self.window()
        chosen = self.choose()
        nxt = Signal(len(nfa.states), name=f"{prefix}next")
        stored = Signal(self.layout, name=f"{prefix}stored")
        shape = pending_layout(nfa) if self.pending else result_layout(nfa)
        result = Signal(shape, name=f"{prefix}result")
        began = self.states(predicates, hint, chosen, nxt, stored)
        if "last" in self.layout.members:
            m.d.comb += stored.last.eq(self.times.at)
        if "last_seq" in self.layout.members:
            m.d.comb += stored.last_seq.eq(self.times.seq)
        self.order(chosen, stored)
        m.d.comb += stored.active.eq(nxt)
        self.results(nxt, began, stored, result, chosen)
        if ahead is None:
            return stored, result
        pairs = zip(ahead, [None] * len(ahead) if gaps is None else gaps, strict=True)
        source = self
        if ahead_state is not None:  # the same choice, made again from the caller's copy
            source = _NextState(self.m, self.nfa, ahead_state, f"{self.prefix}copy_", self.times)
            chosen = source.choose()
        return stored, result, [source.ahead(chosen, a, k, g) for k, (a, g) in enumerate(pairs)]

    def window(self) -> data.View | None:
        """The :func:`window_hint` of the stored state and the tuple, unless given."""
        if "last" not in self.layout.members:
            return None
        hint = self.given_hint
        if hint is None:
            hint = window_hint(self.m, self.nfa, self.state, self.times, self.prefix)
        return window_layout(self.nfa)(hint)

    def live(self, hint, j: int, q) -> Value:
        """Whether the latest run in state ``j`` (set at the last tuple) of windowed query
        ``q`` is still live: a start state's run began at the last tuple."""
        far = hint.far[str(q.index)]
        return hint.live[str(j)] & ~far if str(j) in self.aged else ~far

    def stored_time(self, j: int, q):
        """The low bits of the ORDER BY value the latest run in state ``j`` began at: a start
        state's run began at the last tuple."""
        if str(j) in self.aged:
            return self.now.starts[str(j)]
        return low_bits(self.now.last[q.order_field], start_bits(q.window))

    def ahead(self, chosen, ahead, k: int, gap=None) -> Signal:
        """The :func:`ahead_layout` parts of the :func:`window_hint` of the stored state
        against the times ``ahead``, from the stored state: a state's start is that of the
        predecessor it takes it from, so each predecessor's start is compared with
        ``ahead``'s time beside the choice, and the choice and the comparison of each are one
        term (the last time after this tuple is this tuple's: ``far`` is the
        :func:`window_gap` of the two tuples, ``gap`` when given)."""
        nfa, m = self.nfa, self.m
        if not isinstance(ahead, data.View):
            ahead = times_layout(nfa)(ahead)
        parts = Signal(ahead_layout(nfa), name=f"{self.prefix}ahead{k}")
        if gap is None:
            gap = window_gap(m, nfa, self.times, ahead, f"{self.prefix}ahead{k}_")
        m.d.comb += parts.far.eq(gap)
        for i in sorted(self.aged, key=int):
            q = nfa.queries[nfa.states[int(i)].query]
            terms = [
                win & _young(ahead, q, self.stored_time(j, q))
                for j, win in chosen.get(int(i), {}).items()
            ]
            if terms:
                m.d.comb += parts.terms[i].eq(Cat(terms))
        return parts

    def stored_start(self, i: int):  # a start state's run began at the last tuple
        return self.now.began[str(i)] if str(i) in self.started else self.now.last_seq

    def stored_beats(self, a: int, b: int) -> Value:
        """Whether the latest run in ``a`` began at or after the one in ``b`` (ties: the lower
        index), both set at the last tuple: a start state's began at that tuple."""
        a_start, b_start = self.nfa.states[a].start, self.nfa.states[b].start
        if a_start or b_start:
            return Const(int(a < b if a_start and b_start else a_start))
        bit = self.now.order[self.pairs[(min(a, b), max(a, b))]]
        return bit if a < b else ~bit

    def next_beats(self, a: int, b: int) -> Value:
        """:meth:`stored_beats` after this tuple, for states set now: the order of the
        predecessors they took their starts from (equal when the same: the lower index)."""
        a_start, b_start = self.nfa.states[a].start, self.nfa.states[b].start
        if a_start or b_start:
            return Const(int(a < b if a_start and b_start else a_start))
        k = self.pairs[(min(a, b), max(a, b))]
        return self.next_order[k] if a < b else ~self.next_order[k]

    def choose(self) -> dict[int, dict[int, Value]]:
        """Under WITHIN and for start_seq: which active predecessor, the one whose latest run
        began latest, each state takes its starts from (one-hot)."""
        nfa, active = self.nfa, self.now.active
        chosen: dict[int, dict[int, Value]] = {}
        for s in nfa.states:
            if s.start or not s.activation or not _tracks(nfa.queries[s.query]):
                continue
            preds = sorted(s.activation)
            wins = _first_of(preds, lambda j: active[j], self.stored_beats)
            chosen[s.index] = {}
            for j in preds:
                win = Signal(
                    name=f"{self.prefix}{s.name}_from_{nfa.states[j].name}", attrs={"keep": 1}
                )
                self.m.d.comb += win.eq(wins[j])
                chosen[s.index][j] = win
        return chosen

    def states(self, predicates, hint, chosen, nxt, stored) -> dict[int, Value]:
        """Each state's next bit into ``nxt``, its starts into ``stored``; returns where the
        latest run in each state began, for the queries that report start_seq."""
        m, prefix, active, times = self.m, self.prefix, self.now.active, self.times
        began: dict[int, Value] = {}
        for s in self.nfa.states:
            bit = Signal(name=f"{prefix}{s.name}_next")
            guard = Const(1) if s.predicate is None else predicates[s.predicate]
            q = self.nfa.queries[s.query]
            if s.start:
                reached = Const(1)
            elif s.activation and q.window is not None:
                # reached iff an active predecessor is live (the youngest is iff any is); the
                # start is the youngest's, the one whose latest run began latest
                reached = Value.cast(0)
                start = Value.cast(0)
                for j, win in chosen[s.index].items():
                    reached = reached | (active[j] & self.live(hint, j, q))
                    start = start | Mux(win, self.stored_time(j, q), 0)
                if str(s.index) in self.aged:
                    m.d.comb += stored.starts[str(s.index)].eq(start)
            elif s.activation:
                reached = Value.cast(0)
                for j in sorted(s.activation):
                    reached = reached | active[j]
            else:
                reached = Const(0)
            m.d.comb += [bit.eq(guard & reached), nxt[s.index].eq(bit)]
            if q.start_seq:
                # the latest start among the active predecessors: under WITHIN it is also the
                # youngest (ORDER BY values never decrease), so live whenever any is
                if s.start:
                    began[s.index] = times.seq  # a run beginning now is the latest
                elif s.activation:
                    latest = Value.cast(0)
                    for j, win in chosen[s.index].items():
                        latest = latest | Mux(win, self.stored_start(j), 0)
                    began[s.index] = Signal(SEQ_BITS, name=f"{prefix}{s.name}_began")
                    m.d.comb += began[s.index].eq(latest)
                    if str(s.index) in self.started:
                        m.d.comb += stored.began[str(s.index)].eq(latest)
        return began

    def order(self, chosen, stored) -> None:
        """The order bits after the tuple: those of the predecessors the states took their
        starts from."""
        if not self.pairs:
            return
        self.next_order = next_order = Signal(len(self.pairs), name=f"{self.prefix}next_order")
        for (a, b), k in self.pairs.items():
            bit = Value.cast(0)
            for p, win_p in chosen.get(a, {}).items():
                for r, win_r in chosen.get(b, {}).items():
                    same = Const(1) if p == r else self.stored_beats(p, r)
                    bit = bit | (win_p & win_r & same)
            self.m.d.comb += next_order[k].eq(bit)
        self.m.d.comb += stored.order.eq(next_order)

    def results(self, nxt, began, stored, result, chosen) -> None:
        """Per query: whether it matched, the latest start among its accepting states set now
        (start_seq; pending, each candidate's pick and value, :meth:`picks`), and the clearing
        of its states after a match (SKIP PAST LAST ROW)."""
        m, nfa = self.m, self.nfa
        matches = result.matches
        slot = {q: k for k, q in enumerate(start_queries(nfa))}
        first = 0  # the first candidate of the query, pending
        for q in nfa.queries:
            hit = Value.cast(0)
            for i in nfa.accepting(q):
                hit = hit | nxt[i]
            m.d.comb += matches[q.index].eq(hit)
            if q.index in slot:  # the latest start among the accepting states set now
                ends = [i for i in nfa.accepting(q) if i in began]
                wins = _first_of(ends, lambda i: nxt[i], self.next_beats)
                k = slot[q.index]
                if self.pending:
                    first = self.picks(result, wins, chosen, start_candidates(nfa)[k], first)
                else:
                    latest = Value.cast(0)
                    for i in ends:
                        latest = latest | Mux(wins[i], began[i], 0)
                    m.d.comb += result.starts[k * SEQ_BITS : (k + 1) * SEQ_BITS].eq(latest)
            if q.skip_past_last_row and q.count:
                with m.If(matches[q.index]):
                    m.d.comb += stored.active[q.first : q.first + q.count].eq(0)

    def picks(self, result, wins, chosen, cands, first: int) -> int:
        """Pending: for candidates ``first`` on (a query's, ``cands``), whether each is the
        start (the first accepting state set now took its start from it) and its value;
        returns the next query's first."""
        m = self.m
        for c, j in enumerate(cands, start=first):
            pick = Value.cast(0)
            for i, win in wins.items():
                if self.nfa.states[i].start:
                    pick = pick | (win if j == -1 else 0)
                elif j in chosen.get(i, {}):
                    pick = pick | (win & chosen[i][j])
            value = self.times.seq if j == -1 else self.stored_start(j)
            m.d.comb += [
                result.picks[c].eq(pick),
                result.values[c * SEQ_BITS : (c + 1) * SEQ_BITS].eq(value),
            ]
        return first + len(cands)


def matcher_signature(nfa: Nfa, payload_shape, *, inputs=None) -> dict:
    """The stream interface every matcher shares: per tuple, ``inputs`` (by default the
    ``predicates`` vector, and under WITHIN the tuple's ``times``, :func:`times_layout`) and a
    pass-through ``payload`` in; the ``payload`` and one match bit per query out (and the
    ``starts`` of :func:`result_layout` when queries report start_seq)."""
    if inputs is None:
        inputs = {"predicates": len(nfa.predicates)}
        times = times_layout(nfa)
        if times is not None:
            inputs["times"] = times
    outputs = {"payload": payload_shape, "matches": len(nfa.queries)}
    starting = start_queries(nfa)
    if starting:
        outputs["starts"] = SEQ_BITS * len(starting)
    return {
        "i_stream": In(stream.Signature(data.StructLayout({**inputs, "payload": payload_shape}))),
        "o_stream": Out(stream.Signature(data.StructLayout(outputs))),
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
        Under WITHIN also ``"times"`` (:func:`times_layout`).
    o_stream : ``Out(stream.Signature(StructLayout({"payload": payload_shape, "matches": Q})))``
        With start_seq also ``"starts"`` (:func:`result_layout`).
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
        state = Signal(state_layout(nfa), name="state")
        # one named flip-flop per state, so waveforms read like the query
        for s in nfa.states:
            flop = Signal(name=s.name)
            m.d.comb += flop.eq(state.active[s.index])
        payload = self.i_stream.payload
        times = payload.times if "times" in payload.shape().members else None
        stored, result = next_state(m, nfa, state.as_value(), payload.predicates, times=times)
        # the output register: the match bits are combinational from the state and the input
        m.submodules.output = output = StreamBuffer(self.o_stream.payload.shape())
        m.d.comb += [
            output.i_stream.valid.eq(self.i_stream.valid),
            self.i_stream.ready.eq(output.i_stream.ready),
            output.i_stream.payload.payload.eq(self.i_stream.payload.payload),
            output.i_stream.payload.matches.eq(result.matches),
        ]
        if start_queries(nfa):
            m.d.comb += output.i_stream.payload.starts.eq(result.starts)
        with m.If(self.i_stream.valid & self.i_stream.ready):
            m.d.sync += state.eq(stored)
        wiring.connect(m, output.o_stream, wiring.flipped(self.o_stream))
        return m
