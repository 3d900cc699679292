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

__all__ = ["StreamPartitioner"]


UpdateFunction = Callable[[Module, Value, "data.View | Value"], tuple[ValueLike, ValueLike]]


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
    tuples in flight (see the comments in :meth:`elaborate` for the argument).

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
        once, at elaboration, for the last pipeline element; it may add logic to ``m``.
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

    def __init__(self, *, key_shape: ShapeLike, payload_shape: ShapeLike, state_width: int,
                 result_shape: ShapeLike, depth: int, timer_bits: int, tick_tuples: int,
                 update: UpdateFunction, counter_width: int = 32):
        Shape.cast(key_shape)
        Shape.cast(payload_shape)
        Shape.cast(result_shape)
        if not isinstance(state_width, int) or state_width < 0:
            raise ValueError(f"State width must be a non-negative integer, not {state_width!r}")
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"Depth must be a positive integer, not {depth!r}")
        if not isinstance(timer_bits, int) or timer_bits < 1:
            raise ValueError(f"Timer width must be a positive integer, not {timer_bits!r}")
        if not isinstance(tick_tuples, int) or tick_tuples < 0:
            raise ValueError(f"Tick period must be a non-negative integer, not {tick_tuples!r}")
        if not isinstance(counter_width, int) or counter_width < 1:
            raise ValueError(f"Counter width must be a positive integer, not {counter_width!r}")
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

        self._input_layout = data.StructLayout({
            "key": key_shape,
            "payload": payload_shape,
        })
        self._output_layout = data.StructLayout({
            "key": key_shape,
            "payload": payload_shape,
            "result": result_shape,
            "dropped": 1,
            "fresh": 1,
        })
        super().__init__({
            "i_stream": In(stream.Signature(self._input_layout)),
            "o_stream": Out(stream.Signature(self._output_layout)),
            "tuples": Out(counter_width),
            "drops": Out(counter_width),
        })

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
        return data.StructLayout({
            "occupied": 1,
            "key": self._key_shape,
            "state": self._state_width,
            "timer": self._timer_bits if self._tick_tuples > 0 else 0,
        })

    def elaborate(self, platform):
        # How the pipeline is kept equal to the sequential model
        # ---------------------------------------------------------
        # Elements pe[0..depth-1] are registers. A tuple (its "token": key, payload, tick flag)
        # enters stage 0 and moves one stage per cycle. At stage s < depth-1 the token compares
        # its key with pe[s] (its candidate) and pe[s+1] and swaps them as in Figure 8: a
        # matching element, or failing that a free one, moves on to pe[s+1] with the token, the
        # other element stays behind in pe[s]. At stage depth-1 the token finds its own element
        # if the key is stored, else a free element if there is one, else an element of another
        # partition (drop); it updates/allocates that element or leaves it alone, and emits the
        # output record. Tokens are injected at most every other cycle, so two tokens in flight
        # are at least two stages apart and never touch the same element in one cycle.
        #
        # Claim: every element a token t examines already reflects everything that tuples before
        # t did, including their ticks, and t examines each stored element exactly once. Tokens
        # ahead of t (at stages >= s+2) only swap elements among positions >= s+2, and the token
        # at the last stage only rewrites pe[depth-1] in place; tokens behind t only swap
        # elements among positions <= s-1. So the elements t has not yet examined stay ahead of
        # t, merely permuted, and the element t examines (pe[s+1] while at stage s) is behind
        # the token that entered before t, hence already examined, processed and ticked by it
        # (and, inductively, by every earlier token). Hence t's lookup sees the sequential state.
        #
        # Ticks: token t carries its tick flag and ages (decrements, frees at zero) the element
        # it leaves behind at each stage; its candidate moves on un-aged and is aged at the last
        # stage right after its own refresh to M (so a just-refreshed element ends at M-1, as in
        # the model). Each element is left behind or is the final candidate exactly once, so t
        # ages every element exactly once, and only after it has finished looking at it; and as
        # tokens behind t only ever see elements t left behind, they see t's tick applied. There
        # is no global "update-timer" wire that could race with tuples in flight.
        m = Module()

        depth = self._depth
        timer_max = (1 << self._timer_bits) - 1
        # Without ticks nothing ages: no timers, no tick flags. (Left in as constants, they cost
        # nothing in the end, but Yosys finds a constant flip-flop chain one stage per pass,
        # which made synthesis quadratic in the depth.)
        ticks = self._tick_tuples > 0
        layout = self.element_layout
        token_layout = data.StructLayout({
            "key": self._key_shape,
            "payload": self._payload_shape,
            "tick": 1 if ticks else 0,
        })

        elements = [Signal(layout, name=f"pe{i}") for i in range(depth)]
        tokens = [Signal(token_layout, name=f"tok{i}") for i in range(depth)]
        token_valid = [Signal(name=f"tok{i}_valid") for i in range(depth)]

        def key_equal(a, b):
            return Value.cast(a) == Value.cast(b)

        def aged(element, tick, name):
            """The element after a tick if ``tick``: timer decremented, freed at zero."""
            if not ticks:
                return element
            result = Signal(layout, name=name)
            m.d.comb += result.eq(element)
            with m.If(tick & element.occupied):
                m.d.comb += result.timer.eq(element.timer - 1)
                with m.If(element.timer == 1):
                    m.d.comb += result.occupied.eq(0)
            return result

        # The whole pipeline moves when the output register can take a record.
        advance = Signal()
        m.d.comb += advance.eq(~self.o_stream.valid | self.o_stream.ready)

        # Input: at most one tuple every other cycle (depth 1: every cycle, as the only stage
        # reads and writes its element in the same cycle). With depth >= 2 a tuple first waits
        # one cycle in the head register, where its lookups for stage 0 are made (below): the
        # comparators then start from a register next to the pipeline, not from the producer.
        if depth == 1:
            m.d.comb += self.i_stream.ready.eq(advance)
        else:
            head = Signal(token_layout, name="head")
            head_valid = Signal(name="head_valid")
            m.d.comb += self.i_stream.ready.eq(advance & ~head_valid)
        accept = Signal()
        m.d.comb += accept.eq(self.i_stream.valid & self.i_stream.ready)

        tick_now = Signal()
        if self._tick_tuples > 0:
            tick_count = Signal(range(self._tick_tuples), name="tick_count")
            m.d.comb += tick_now.eq(tick_count == self._tick_tuples - 1)
            with m.If(accept):
                with m.If(tick_now):
                    m.d.sync += tick_count.eq(0)
                with m.Else():
                    m.d.sync += tick_count.eq(tick_count + 1)

        with m.If(accept):
            m.d.sync += self.tuples.eq(self.tuples + 1)

        with m.If(advance):
            entry, entry_valid = (tokens[0], token_valid[0]) if depth == 1 else (head, head_valid)
            m.d.sync += [
                entry_valid.eq(accept),
                entry.key.eq(self.i_stream.payload.key),
                entry.payload.eq(self.i_stream.payload.payload),
            ]
            if ticks:
                m.d.sync += entry.tick.eq(tick_now)
            if depth > 1:
                m.d.sync += [token_valid[0].eq(head_valid), tokens[0].eq(head)]
            for stage in range(1, depth):
                m.d.sync += [
                    token_valid[stage].eq(token_valid[stage - 1]),
                    tokens[stage].eq(tokens[stage - 1]),
                ]

        # Key lookups, one cycle early (depth >= 2)
        # ------------------------------------------
        # A swap decision that compares 16 or more key bits and then steers every bit of two
        # elements is the longest path of the pipeline. Tokens are at least two stages apart
        # and move one stage per cycle, so each token's two "hit" bits for stage s (its
        # candidate pe[s] and the element after it, pe[s+1], hold its key) are computed while
        # it is still at stage s-1 and registered with it. That needs the values pe[s] and
        # pe[s+1] will have once the current cycle's swaps are done:
        #
        # - pe[s] will be what the token itself carries ahead from stage s-1. Its hit is
        #   "candidate or following hit at s-1" (a hit moves ahead; a free candidate moves
        #   ahead only when the following element is not a hit, and is not a hit itself).
        # - pe[s+1] will be what the token at stage s+1 (exactly two stages ahead, if any)
        #   leaves behind there, aged by that token's tick; at the last stage, what that token
        #   writes back. No other token touches pe[s] or pe[s+1] in this cycle.
        #
        # For stage 0 the token is in the head register: no token is at stage 0 then (the
        # head takes a tuple only when it is empty), so pe[0] stays as it is.
        #
        # The registered bits change only when the pipeline advances, together with the
        # elements and tokens, so a stall keeps them consistent.
        early = depth >= 2
        candidate_hit_r = [Signal(name=f"st{i}_candidate_hit") for i in range(depth)]
        following_hit_r = [Signal(name=f"st{i}_following_hit") for i in range(depth - 1)]
        swaps = [Signal(name=f"st{i}_swap") for i in range(depth - 1)]
        for stage in range(depth - 1):
            m.d.comb += swaps[stage].eq(
                candidate_hit_r[stage]
                | (~elements[stage].occupied & ~following_hit_r[stage]))

        last = depth - 1
        last_dropped = Signal(name="last_dropped")
        m.d.comb += last_dropped.eq(elements[last].occupied & ~candidate_hit_r[last])

        def will_hold(position, key, name):
            """Whether pe[position] holds ``key`` after this cycle's swaps (position >= 1)."""
            hit = Signal(name=name)
            element = elements[position]
            here = element.occupied & key_equal(element.key, key)
            owner = position  # the only token that writes pe[position] as "behind"
            tick = tokens[owner].tick if ticks else Const(0, 1)
            if position < last:
                after = elements[position + 1]
                left = Signal(layout, name=f"{name}_left")
                with m.If(swaps[position]):
                    m.d.comb += left.eq(after)
                with m.Else():
                    m.d.comb += left.eq(element)
                left_matches = Mux(swaps[position], key_equal(after.key, key),
                                   key_equal(element.key, key))
                freed = tick & (left.timer == 1)
                moved = left.occupied & ~freed & left_matches
            else:
                # Written back by the last stage: unchanged if dropped, else the token's own
                # key with a full timer (freed at once only if the timer is one bit wide).
                kept = element.occupied & ~(tick & (element.timer == 1)) & \
                    key_equal(element.key, key)
                refreshed = key_equal(tokens[owner].key, key)
                if timer_max == 1:
                    refreshed = refreshed & ~tick
                moved = Mux(last_dropped, kept, refreshed)
            m.d.comb += hit.eq(Mux(token_valid[owner], moved, here))
            return hit

        if early:
            # the next values are computed outside the advance condition, as plain
            # expressions; only the registers' updates wait for it
            following_next = [will_hold(1, head.key, "st0_following_next")]
            for stage in range(1, last):
                following_next.append(will_hold(stage + 1, tokens[stage - 1].key,
                                                f"st{stage}_following_next"))
            with m.If(advance):
                m.d.sync += candidate_hit_r[0].eq(
                    elements[0].occupied & key_equal(elements[0].key, head.key))
                for stage in range(1, depth):
                    m.d.sync += candidate_hit_r[stage].eq(
                        candidate_hit_r[stage - 1] | following_hit_r[stage - 1])
                for stage in range(last):
                    m.d.sync += following_hit_r[stage].eq(following_next[stage])
        else:
            m.d.comb += candidate_hit_r[0].eq(
                elements[0].occupied & key_equal(elements[0].key, tokens[0].key))

        # Swap stages (Figure 8, lines 3-8).
        for stage in range(depth - 1):
            candidate, following = elements[stage], elements[stage + 1]
            behind = Signal(layout, name=f"st{stage}_behind")
            ahead = Signal(layout, name=f"st{stage}_ahead")
            with m.If(swaps[stage]):
                m.d.comb += [behind.eq(following), ahead.eq(candidate)]
            with m.Else():
                m.d.comb += [behind.eq(candidate), ahead.eq(following)]
            behind_aged = aged(behind, tokens[stage].tick, name=f"st{stage}_behind_aged")
            with m.If(advance & token_valid[stage]):
                m.d.sync += [
                    elements[stage].eq(behind_aged),
                    elements[stage + 1].eq(ahead),
                ]

        # Last stage (Figure 8, lines 9-16), the update function and the output register.
        token = tokens[last]
        element = elements[last]
        hit = candidate_hit_r[last]
        fresh = Signal(name="last_fresh")
        dropped = last_dropped
        m.d.comb += fresh.eq(~element.occupied)
        current_state = Signal(self._state_width, name="last_state")
        m.d.comb += current_state.eq(Const(0, self._state_width))
        with m.If(hit):
            m.d.comb += current_state.eq(element.state)
        new_state_value, result_value = self._update(m, current_state, token.payload)
        new_state = Signal(self._state_width, name="last_new_state")
        result = Signal(self._result_shape, name="last_result")
        m.d.comb += [
            new_state.eq(new_state_value),
            result.eq(result_value),
        ]

        processed = Signal(layout, name="last_processed")
        with m.If(dropped):
            m.d.comb += processed.eq(element)
        with m.Else():
            m.d.comb += [
                processed.occupied.eq(1),
                processed.key.eq(token.key),
                processed.state.eq(new_state),
                processed.timer.eq(timer_max),
            ]
        processed_aged = aged(processed, token.tick, name="last_processed_aged")

        with m.If(advance):
            m.d.sync += self.o_stream.valid.eq(token_valid[last])
            with m.If(token_valid[last]):
                m.d.sync += [
                    element.eq(processed_aged),
                    self.o_stream.payload.key.eq(token.key),
                    self.o_stream.payload.payload.eq(token.payload),
                    self.o_stream.payload.result.eq(result),
                    self.o_stream.payload.dropped.eq(dropped),
                    self.o_stream.payload.fresh.eq(fresh),
                ]
                with m.If(dropped):
                    m.d.sync += self.drops.eq(self.drops + 1)

        return m
