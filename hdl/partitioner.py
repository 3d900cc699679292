"""The stream partitioner: a swap pipeline that keeps one state vector per partition key.

This is the pipeline of Woods, Teubner and Alonso (VLDB 2010), section 6 and Figure 8, with the
per-element timers of section 6.3 and drop counting. It is generic: it stores a ``state_width``
bit vector per key and applies a caller-supplied combinational ``update`` function to it; the
engine supplies the NFA next-state function and the match bits.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Const, Module, Mux, Shape, ShapeLike, Signal, Value, ValueLike
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .bram import register_copy
from .partitioner_hints import PipelineHints

__all__ = [
    "BREAK_SWAP",
    "BREAK_SWAP_GROUP",
    "SWAP_GROUP_BITS",
    "SWAP_SPLIT_BITS",
    "StreamPartitioner",
    "check_store_arguments",
    "store_signature",
]


#: Test-only: one group's copies of a stage's hit bits (:data:`SWAP_SPLIT_BITS`) broken on
#: purpose, so that the tests show they catch it. ``"unloaded"``: group
#: :data:`BREAK_SWAP_GROUP`'s copies are never loaded, so that group's bits swap as if the token
#: found no element. ``None`` (always, outside those tests): nothing broken.
BREAK_SWAP: str | None = None
#: Test-only: the group :data:`BREAK_SWAP` breaks (0: the state's lowest bits).
BREAK_SWAP_GROUP = 0

#: An element whose state is wider than :data:`SWAP_SPLIT_BITS` has its state split into
#: groups of at most ``SWAP_GROUP_BITS``, each swapped by a decision of its own, worked out from
#: copies of the stage's two hit registers (same input, same enable), so that no one register
#: drives the multiplexers of every bit of two elements (PARTITIONER.md, "Key lookups one
#: cycle early"). Its ``occupied``, ``key`` and ``timer`` stay with the stage's own decision.
#: Measured on the LFE5U-85F at 256 elements (benchmarks/PAPER_FIGURES.md): the window's
#: 119-bit state gains, PREV's 42 bits lose, so a state of up to 64 bits keeps one decision.
SWAP_GROUP_BITS = 32
SWAP_SPLIT_BITS = 64


UpdateFunction = Callable[[Module, Value, "data.View | Value"], tuple[ValueLike, ValueLike]]


def check_store_arguments(counter_width: int, timer_bits: int, tick_tuples: int) -> None:
    """ValueError unless the arguments both partition stores take are in range."""
    if not isinstance(counter_width, int) or counter_width < 1:
        raise ValueError(f"Counter width must be a positive integer, not {counter_width!r}")
    if not isinstance(timer_bits, int) or timer_bits < 1:
        raise ValueError(f"Timer width must be a positive integer, not {timer_bits!r}")
    if not isinstance(tick_tuples, int) or tick_tuples < 0:
        raise ValueError(f"Tick period must be a non-negative integer, not {tick_tuples!r}")


def store_signature(
    key_shape: ShapeLike, payload_shape: ShapeLike, result_shape: ShapeLike, counter_width: int
) -> dict:
    """The members every partition store has (:class:`StreamPartitioner`,
    :class:`nfacep.hdl.table.TablePartitioner`), so that the engine takes either."""
    return {
        "i_stream": In(
            stream.Signature(data.StructLayout({"key": key_shape, "payload": payload_shape}))
        ),
        "o_stream": Out(
            stream.Signature(
                data.StructLayout(
                    {
                        "key": key_shape,
                        "payload": payload_shape,
                        "result": result_shape,
                        "dropped": 1,
                        "fresh": 1,
                    }
                )
            )
        ),
        "tuples": Out(counter_width),
        "drops": Out(counter_width),
    }


class StreamPartitioner(wiring.Component):
    """Stream partitioner (swap pipeline with timers).

    Keeps up to ``depth`` partitions, each an element holding (key, state vector, timer), and
    for every input tuple produces one output record, in input order, exactly as this
    sequential model does for tuple number ``i`` (counted from 0 from reset):

    1. If an element holds the tuple's key, its state becomes ``update(state, payload)``.
       Otherwise, if an element is free, it is allocated to the key and its state becomes
       ``update(0, payload)`` (``fresh``). Otherwise the tuple is dropped (``dropped``, counted
       in ``drops``) and nothing changes. A processed tuple sets its element's timer to
       ``M = 2**timer_bits - 1``.
    2. If ``tick_tuples`` is ``K > 0`` and ``(i + 1) % K == 0``: every stored element's timer
       is decremented, and an element whose timer reaches zero is freed (its partition is
       forgotten). With ``K = 0`` there are no ticks.

    Tuple ``i + 1`` sees the effect of everything before it, although the hardware has many
    tuples in flight: ``hdl/PARTITIONER.md`` gives the argument.

    Latency: ``depth + 2`` cycles (``depth >= 2``; the head register, one cycle per element,
    the output register) or 2 (``depth == 1``). A tuple transferred on ``i_stream`` at clock
    edge ``n`` has its record valid on ``o_stream`` from edge ``n + latency - 1``, so with
    ``o_stream.ready`` high it is transferred at edge ``n + latency``.

    Throughput: one tuple every other cycle (``1/2`` tuple per cycle) when ``depth >= 2``:
    ``i_stream.ready`` is low on the cycle after each transfer. One tuple per cycle when
    ``depth == 1``.

    Backpressure: the whole pipeline advances only when the output register is empty or
    ``o_stream.ready`` is high; otherwise everything (elements, timers, tuples in flight,
    counters) holds, so nothing is lost however long the stall. ``i_stream.ready`` depends
    combinationally on ``o_stream.ready``; ``o_stream.valid`` is a register and never depends
    on ``o_stream.ready``.

    Parameters
    ----------
    key_shape : :class:`~amaranth.hdl.ShapeLike`
        Shape of the partition key.
    payload_shape : :class:`~amaranth.hdl.ShapeLike`
        Shape of the per-tuple payload handed to ``update`` and passed through to the output.
    state_width : :class:`int`
        Width of the per-partition state vector; a new partition starts from all zeroes.
    result_shape : :class:`~amaranth.hdl.ShapeLike`
        Shape of the per-tuple result computed by ``update``.
    depth : :class:`int`
        Number of elements, i.e. partitions stored at once (at least 1).
    timer_bits : :class:`int`
        Width ``B >= 1`` of each element's timer.
    tick_tuples : :class:`int`
        ``K``: a timer tick happens right after every ``K``-th input tuple (dropped ones
        included, after that tuple's own processing); 0 disables ticks.
    update : callable
        ``update(m, state, payload) -> (new_state, result)``, combinational; ``state`` is a
        ``state_width`` bit value, ``payload`` a view (or value) of ``payload_shape``. Called
        once, at elaboration, for the last pipeline element; it may add logic to ``m``. When
        ``depth >= 2`` and ``update`` has the attributes ``prepare`` (``prepare(m, state,
        payload) -> hint``, combinational, of ``hint_width`` bits; the engine's under WITHIN:
        which stored runs are live), the hint of the element that moves into the last stage is
        worked out a stage before and registered, and the update is called as ``update(m,
        state, payload, hint=...)``; for a new partition (``state`` all zeroes) that hint is
        another element's, which ``update`` must then ignore. Likewise with ``prev``
        (``prev(m, state, payload)``, of ``prev_width`` bits; the engine's with PREV: the bits
        of the predicates that read it), registered a stage before for the state the update
        will start from (the all-zero state's for a new partition) and handed to the update as
        ``prev=...``.
    counter_width : :class:`int`
        Width of the ``tuples`` and ``drops`` counters, which wrap around.

    Members
    -------
    i_stream : :py:`In(stream.Signature(StructLayout({"key": key_shape, "payload": ...})))`
        Input tuples.
    o_stream : :py:`Out(stream.Signature(StructLayout({"key", "payload", "result", "dropped",
    "fresh"})))`
        One record per input tuple, in input order. ``dropped`` is 1 for a dropped tuple (its
        ``result`` is then meaningless). ``fresh`` is 1 when the tuple's partition was newly
        allocated, i.e. ``update`` started from the all-zero state.
    tuples : :py:`Out(counter_width)`
        Number of tuples taken from ``i_stream``.
    drops : :py:`Out(counter_width)`
        Number of dropped tuples (counted when their record enters the output register).
    """

    def __init__(
        self,
        *,
        key_shape: ShapeLike,
        payload_shape: ShapeLike,
        state_width: int,
        result_shape: ShapeLike,
        depth: int,
        timer_bits: int,
        tick_tuples: int,
        update: UpdateFunction,
        counter_width: int = 32,
    ):
        Shape.cast(key_shape)
        Shape.cast(payload_shape)
        Shape.cast(result_shape)
        if not isinstance(state_width, int) or state_width < 0:
            raise ValueError(f"State width must be a non-negative integer, not {state_width!r}")
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"Depth must be a positive integer, not {depth!r}")
        check_store_arguments(counter_width, timer_bits, tick_tuples)
        if not callable(update):
            raise TypeError(f"Update function must be callable, not {update!r}")

        self._key_shape = key_shape
        self._payload_shape = payload_shape
        self._state_width = state_width
        self._result_shape = result_shape
        self._depth = depth
        self._timer_bits = timer_bits
        self._tick_tuples = tick_tuples
        self._update = update
        self._counter_width = counter_width

        super().__init__(store_signature(key_shape, payload_shape, result_shape, counter_width))

    @property
    def key_shape(self):
        return self._key_shape

    @property
    def payload_shape(self):
        return self._payload_shape

    @property
    def state_width(self):
        return self._state_width

    @property
    def result_shape(self):
        return self._result_shape

    @property
    def depth(self):
        return self._depth

    @property
    def timer_bits(self):
        return self._timer_bits

    @property
    def tick_tuples(self):
        return self._tick_tuples

    @property
    def counter_width(self):
        return self._counter_width

    @property
    def latency(self):
        """Clock edges from a tuple's input transfer to its record's output transfer, unstalled."""
        return self._depth + 2 if self._depth > 1 else 2

    @property
    def element_layout(self):
        """Layout of one pipeline element. Without ticks (``tick_tuples == 0``) a timer could
        never change, so the element has none (a zero-width ``timer``)."""
        return data.StructLayout(
            {
                "occupied": 1,
                "key": self._key_shape,
                "state": self._state_width,
                "timer": self._timer_bits if self._tick_tuples > 0 else 0,
            }
        )

    def elaborate(self, platform):
        m = Module()
        pipeline = _SwapPipeline(self, m, platform)
        pipeline.take_input(self.i_stream, self.tuples)
        pipeline.look_up()
        pipeline.swap()
        pipeline.hint_ahead()
        pipeline.finish(self.o_stream, self.drops)
        pipeline.early_ahead()
        return m


class _SwapPipeline(PipelineHints):
    """The registers of a :class:`StreamPartitioner` and the logic of its steps, added to ``m``
    in order: input (head register, tick counter), key lookups, swap stages, last stage and
    output register. ``hdl/PARTITIONER.md`` argues why together they equal the sequential
    model."""

    def __init__(self, part: StreamPartitioner, m: Module, platform=None):
        self.m = m
        self.platform = platform
        self.part = part
        self.depth = depth = part.depth
        self.last = depth - 1
        # Without ticks nothing ages: no timers, no tick flags (see PARTITIONER.md)
        self.ticks = part.tick_tuples > 0
        self.layout = part.element_layout
        self.token_layout = data.StructLayout(
            {
                "key": part.key_shape,
                "payload": part.payload_shape,
                "tick": 1 if self.ticks else 0,
            }
        )
        self.elements = [Signal(self.layout, name=f"pe{i}") for i in range(depth)]
        self.tokens = [Signal(self.token_layout, name=f"tok{i}") for i in range(depth)]
        self.token_valid = [Signal(name=f"tok{i}_valid") for i in range(depth)]
        if depth > 1:
            self.head = Signal(self.token_layout, name="head")
            self.head_valid = Signal(name="head_valid")
        # The whole pipeline moves when the output register can take a record.
        self.advance = Signal()
        m.d.comb += self.advance.eq(~part.o_stream.valid | part.o_stream.ready)
        # Per stage: the token's candidate pe[s] holds its key; pe[s+1] does; the swap decision
        self.candidate_hit = [Signal(name=f"st{i}_candidate_hit") for i in range(depth)]
        self.following_hit = [Signal(name=f"st{i}_following_hit") for i in range(depth - 1)]
        self.swaps = [Signal(name=f"st{i}_swap") for i in range(depth - 1)]
        # The state's bits (lo, hi) of each group with a swap decision of its own (none: the
        # state goes with the stage's own decision), and per stage those decisions
        width = part.state_width
        size = SWAP_GROUP_BITS
        count = -(-width // size) if width > SWAP_SPLIT_BITS else 0
        self.state_groups = [(g * width // count, (g + 1) * width // count) for g in range(count)]
        self.group_swaps: list[list[Value]] = [[] for _ in range(depth - 1)]
        self.last_dropped = Signal(name="last_dropped")
        # ``update.prepare``'s hint and ``update.prev``'s bits for the last stage, registered a
        # stage before (hint_ahead)
        self.last_hint: Signal | None = None
        self.last_prev: Signal | None = None
        # ``update.early``'s high bits for the two elements stage ``last - 1`` chooses from,
        # registered a stage before that (early_ahead); the last stage's new state (finish)
        self.prev_early: tuple[Signal, Signal] | None = None
        self.last_new_state: Signal | None = None

    def tick(self, token) -> Value:
        return token.tick if self.ticks else Const(0, 1)

    def aged(self, element, tick, name):
        """The element after a tick if ``tick``: timer decremented, freed at zero."""
        if not self.ticks:
            return element
        m = self.m
        result = Signal(self.layout, name=name)
        m.d.comb += result.eq(element)
        with m.If(tick & element.occupied):
            m.d.comb += result.timer.eq(element.timer - 1)
            with m.If(element.timer == 1):
                m.d.comb += result.occupied.eq(0)
        return result

    def take_input(self, i_stream, tuples) -> None:
        """At most one tuple every other cycle (depth 1: every cycle, as the only stage reads
        and writes its element in the same cycle), through the head register when
        ``depth >= 2``; the tick counter; the tokens move one stage per advance."""
        m, depth, tokens, token_valid = self.m, self.depth, self.tokens, self.token_valid
        if depth == 1:
            m.d.comb += i_stream.ready.eq(self.advance)
        else:
            m.d.comb += i_stream.ready.eq(self.advance & ~self.head_valid)
        accept = Signal()
        m.d.comb += accept.eq(i_stream.valid & i_stream.ready)
        tick_now = self._tick_counter(accept)
        with m.If(accept):
            m.d.sync += tuples.eq(tuples + 1)

        with m.If(self.advance):
            entry, entry_valid = (
                (tokens[0], token_valid[0]) if depth == 1 else (self.head, self.head_valid)
            )
            m.d.sync += [
                entry_valid.eq(accept),
                entry.key.eq(i_stream.payload.key),
                entry.payload.eq(i_stream.payload.payload),
            ]
            if self.ticks:
                m.d.sync += entry.tick.eq(tick_now)
            if depth > 1:
                m.d.sync += [token_valid[0].eq(self.head_valid), tokens[0].eq(self.head)]
            for stage in range(1, depth):
                m.d.sync += [
                    token_valid[stage].eq(token_valid[stage - 1]),
                    tokens[stage].eq(tokens[stage - 1]),
                ]

    def _tick_counter(self, accept) -> Signal:
        """High while the tuple being accepted is a ``tick_tuples``-th one."""
        m, period = self.m, self.part.tick_tuples
        tick_now = Signal()
        if period > 0:
            tick_count = Signal(range(period), name="tick_count")
            m.d.comb += tick_now.eq(tick_count == period - 1)
            with m.If(accept):
                with m.If(tick_now):
                    m.d.sync += tick_count.eq(0)
                with m.Else():
                    m.d.sync += tick_count.eq(tick_count + 1)
        return tick_now

    def look_up(self) -> None:
        """The swap decisions, from hit bits registered one stage early when ``depth >= 2``
        (PARTITIONER.md, "Key lookups one cycle early")."""
        m, elements, last = self.m, self.elements, self.last
        candidate_hit, following_hit = self.candidate_hit, self.following_hit
        for stage in range(self.depth - 1):
            m.d.comb += self.swaps[stage].eq(
                candidate_hit[stage] | (~elements[stage].occupied & ~following_hit[stage])
            )
        m.d.comb += self.last_dropped.eq(elements[last].occupied & ~candidate_hit[last])

        if self.depth == 1:
            m.d.comb += candidate_hit[0].eq(
                elements[0].occupied & _key_equal(elements[0].key, self.tokens[0].key)
            )
            return
        # the next values are computed outside the advance condition, as plain expressions;
        # only the registers' updates wait for it
        following_next = [self._will_hold(1, self.head.key, "st0_following_next")]
        for stage in range(1, last):
            following_next.append(
                self._will_hold(stage + 1, self.tokens[stage - 1].key, f"st{stage}_following_next")
            )
        candidate_next = [elements[0].occupied & _key_equal(elements[0].key, self.head.key)]
        for stage in range(1, self.depth):
            candidate_next.append(candidate_hit[stage - 1] | following_hit[stage - 1])
        with m.If(self.advance):
            for stage in range(self.depth):
                m.d.sync += candidate_hit[stage].eq(candidate_next[stage])
            for stage in range(last):
                m.d.sync += following_hit[stage].eq(following_next[stage])
        for stage in range(last):
            for group in range(len(self.state_groups)):
                en = self.advance
                if BREAK_SWAP == "unloaded" and group == BREAK_SWAP_GROUP:
                    en = Const(0, 1)
                name = f"st{stage}_g{group}"
                candidate = register_copy(
                    m, self.platform, candidate_next[stage], en, f"{name}_candidate_hit"
                )
                following = register_copy(
                    m, self.platform, following_next[stage], en, f"{name}_following_hit"
                )
                swap = Signal(name=f"{name}_swap")
                m.d.comb += swap.eq(candidate | (~elements[stage].occupied & ~following))
                self.group_swaps[stage].append(swap)

    def _will_hold(self, position, key, name):
        """Whether pe[position] holds ``key`` after this cycle's swaps (position >= 1)."""
        m, last = self.m, self.last
        hit = Signal(name=name)
        element = self.elements[position]
        here = element.occupied & _key_equal(element.key, key)
        owner = position  # the only token that writes pe[position] as "behind"
        tick = self.tick(self.tokens[owner])
        if position < last:
            after = self.elements[position + 1]
            swap = self.swaps[position]
            left = Signal(self.layout, name=f"{name}_left")
            with m.If(swap):
                m.d.comb += left.eq(after)
            with m.Else():
                m.d.comb += left.eq(element)
            left_matches = Mux(swap, _key_equal(after.key, key), _key_equal(element.key, key))
            freed = tick & (left.timer == 1)
            moved = left.occupied & ~freed & left_matches
        else:
            # Written back by the last stage: unchanged if dropped, else the token's own key
            # with a full timer (freed at once only if the timer is one bit wide).
            kept = element.occupied & ~(tick & (element.timer == 1)) & _key_equal(element.key, key)
            refreshed = _key_equal(self.tokens[owner].key, key)
            if self.part.timer_bits == 1:
                refreshed = refreshed & ~tick
            moved = Mux(self.last_dropped, kept, refreshed)
        m.d.comb += hit.eq(Mux(self.token_valid[owner], moved, here))
        return hit

    def swap(self) -> None:
        """The swap stages (Figure 8, lines 3-8): a hit, else a free candidate, moves ahead
        with the token; the element left behind is aged by the token's tick."""
        m, elements = self.m, self.elements
        for stage in range(self.depth - 1):
            candidate, following = elements[stage], elements[stage + 1]
            behind = Signal(self.layout, name=f"st{stage}_behind")
            ahead = Signal(self.layout, name=f"st{stage}_ahead")
            if not self.state_groups:
                with m.If(self.swaps[stage]):
                    m.d.comb += [behind.eq(following), ahead.eq(candidate)]
                with m.Else():
                    m.d.comb += [behind.eq(candidate), ahead.eq(following)]
            else:
                fields = [lambda e: e.occupied, lambda e: e.key, lambda e: e.timer]
                groups = [(self.swaps[stage], fields)] + [
                    (swap, [lambda e, lo=lo, hi=hi: e.state[lo:hi]])
                    for swap, (lo, hi) in zip(
                        self.group_swaps[stage], self.state_groups, strict=True
                    )
                ]
                for swap, parts in groups:
                    for part in parts:
                        with m.If(swap):
                            m.d.comb += [
                                part(behind).eq(part(following)),
                                part(ahead).eq(part(candidate)),
                            ]
                        with m.Else():
                            m.d.comb += [
                                part(behind).eq(part(candidate)),
                                part(ahead).eq(part(following)),
                            ]
            behind_aged = self.aged(
                behind, self.tick(self.tokens[stage]), name=f"st{stage}_behind_aged"
            )
            with m.If(self.advance & self.token_valid[stage]):
                m.d.sync += [
                    elements[stage].eq(behind_aged),
                    elements[stage + 1].eq(ahead),
                ]

    def finish(self, o_stream, drops) -> None:
        """The last stage (Figure 8, lines 9-16): the update function, the element written
        back (refreshed, then aged by the token's tick), and the output register."""
        m, part, last = self.m, self.part, self.last
        token, element = self.tokens[last], self.elements[last]
        dropped = self.last_dropped
        fresh = Signal(name="last_fresh")
        m.d.comb += fresh.eq(~element.occupied)
        current_state = Signal(part.state_width, name="last_state")
        m.d.comb += current_state.eq(Const(0, part.state_width))
        with m.If(self.candidate_hit[last]):
            m.d.comb += current_state.eq(element.state)
        ahead = {}
        if self.last_hint is not None:
            # a new partition's zero state has no run for the hint to judge: any hint will do
            ahead["hint"] = self.last_hint
        if self.last_prev is not None:
            ahead["prev"] = self.last_prev
        new_state_value, result_value = part._update(m, current_state, token.payload, **ahead)
        new_state = Signal(part.state_width, name="last_new_state")
        self.last_new_state = new_state
        result = Signal(part.result_shape, name="last_result")
        m.d.comb += [
            new_state.eq(new_state_value),
            result.eq(result_value),
        ]

        processed = Signal(self.layout, name="last_processed")
        with m.If(dropped):
            m.d.comb += processed.eq(element)
        with m.Else():
            m.d.comb += [
                processed.occupied.eq(1),
                processed.key.eq(token.key),
                processed.state.eq(new_state),
                processed.timer.eq((1 << part.timer_bits) - 1),
            ]
        processed_aged = self.aged(processed, self.tick(token), name="last_processed_aged")

        valid = self.token_valid[last]
        with m.If(self.advance):
            m.d.sync += o_stream.valid.eq(valid)
            with m.If(valid):
                m.d.sync += [
                    element.eq(processed_aged),
                    o_stream.payload.key.eq(token.key),
                    o_stream.payload.payload.eq(token.payload),
                    o_stream.payload.result.eq(result),
                    o_stream.payload.dropped.eq(dropped),
                    o_stream.payload.fresh.eq(fresh),
                ]
                with m.If(dropped):
                    m.d.sync += drops.eq(drops + 1)


def _key_equal(a, b) -> Value:
    return Value.cast(a) == Value.cast(b)
