# amaranth: UnusedElaboratable=no
"""The read-ahead asynchronous FIFO of hdl/stream.py (:class:`ReadAheadAsyncFIFO`), in
Amaranth's simulator with two unrelated clocks: every word comes out once, in order, whatever
the writer's gaps and the reader's stalls; ``w_rdy`` never lets more in than it holds and
``r_rdy`` never offers what was not written, and a stalled reader lets it fill to its whole
depth; the write domain's reset empties it, the read domain's leaves it (AsyncFIFO's rules).
"""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import ClockDomain, Elaboratable, Fragment, Module
from amaranth.lib import stream
from amaranth.sim import Simulator

from nfacep.hdl import stream as stream_blocks
from nfacep.hdl.stream import ReadAheadAsyncFIFO, cross


def _sim(dut, w_period, r_period, domains=None):
    m = Module()
    m.domains.write = write = ClockDomain()
    m.domains.read = read = ClockDomain()
    if domains is not None:
        domains.update(write=write, read=read)
    m.submodules.dut = dut
    sim = Simulator(m)
    sim.add_clock(w_period, domain="write")
    sim.add_clock(r_period, domain="read", phase=r_period / 3)
    return sim


def _run(dut, words, *, w_period, r_period, gap, stall, seed, pause=None):
    """Write ``words`` with random gaps, read them with random stalls (and a long stall at
    ``pause`` words read); returns what was read and the most entries ever held."""
    rng_w, rng_r = random.Random(seed), random.Random(seed + 1)
    state = {"written": 0, "taken": 0, "most": 0, "out": []}

    async def writer(ctx):
        for word in words:
            ctx.set(dut.w_data, word)
            while True:
                ctx.set(dut.w_en, rng_w.random() >= gap)
                if ctx.get(dut.w_en) and ctx.get(dut.w_rdy):
                    break
                await ctx.tick("write")
            await ctx.tick("write")
            state["written"] += 1
            held = state["written"] - state["taken"]
            assert held <= dut.depth  # w_rdy honest: never more than it holds
            state["most"] = max(state["most"], held)
        ctx.set(dut.w_en, 0)

    async def reader(ctx):
        while len(state["out"]) < len(words):
            if pause is not None and len(state["out"]) == pause:
                ctx.set(dut.r_en, 0)
                await ctx.tick("read").repeat(60)
            ready = rng_r.random() >= stall
            ctx.set(dut.r_en, ready)
            valid, data = ctx.get(dut.r_rdy), ctx.get(dut.r_data)
            if valid:  # r_rdy honest: only what was written and not yet taken
                assert state["written"] > state["taken"] or ctx.get(dut.w_en)
            await ctx.tick("read")
            if valid and ready:
                state["out"].append(data)
                state["taken"] += 1
        ctx.set(dut.r_en, 0)
        await ctx.tick("read").repeat(8)
        assert not ctx.get(dut.r_rdy)  # nothing left over, nothing duplicated

    sim = _sim(dut, w_period, r_period)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run()
    return state["out"], state["most"]


@pytest.mark.parametrize(
    ("w_period", "r_period", "gap", "stall"),
    [
        (7e-9, 10e-9, 0.3, 0.3),  # the writer faster
        (10e-9, 7e-9, 0.0, 0.5),  # the reader faster, stalling
        (8e-9, 8.3e-9, 0.5, 0.0),  # near-equal clocks
    ],
)
def test_every_word_once_in_order(w_period, r_period, gap, stall):
    rng = random.Random(5)
    words = [rng.randrange(1 << 12) for _ in range(150)]
    assert len(set(words)) > 100  # (words that differ: their order is seen)
    dut = ReadAheadAsyncFIFO(width=12, depth=5, r_domain="read", w_domain="write")
    out, most = _run(
        dut, words, w_period=w_period, r_period=r_period, gap=gap, stall=stall, seed=7, pause=40
    )
    assert out == words
    assert most == dut.depth  # the long stall filled it: the memory and the output register


def test_full_throughput_and_latency():
    """Equal clocks, neither side waiting: a word a cycle after the first, which comes out
    from the third read edge after its write."""
    dut = ReadAheadAsyncFIFO(width=8, depth=17, r_domain="read", w_domain="write")
    seen = []

    async def writer(ctx):
        ctx.set(dut.w_en, 1)
        for word in range(10):
            ctx.set(dut.w_data, word)
            assert ctx.get(dut.w_rdy)
            await ctx.tick("write")
        ctx.set(dut.w_en, 0)

    async def reader(ctx):
        ctx.set(dut.r_en, 1)
        for cycle in range(20):
            if ctx.get(dut.r_rdy):
                seen.append((cycle, ctx.get(dut.r_data)))
            await ctx.tick("read")

    sim = _sim(dut, 10e-9, 10e-9)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run()
    assert [word for _, word in seen] == list(range(10))
    first = seen[0][0]
    assert first == 4  # (the read clock's first edge comes before the write's)
    assert [cycle for cycle, _ in seen] == list(range(first, first + 10))


def test_resets():
    """The write domain's reset empties it (``r_rst`` tells the read side); the read domain's
    keeps every entry, the one offered too."""
    dut = ReadAheadAsyncFIFO(width=8, depth=5, r_domain="read", w_domain="write")
    out, domains = [], {}

    async def write(ctx, words):
        ctx.set(dut.w_en, 1)
        for word in words:
            ctx.set(dut.w_data, word)
            await ctx.tick("write")
        ctx.set(dut.w_en, 0)

    async def bench(ctx):
        await write(ctx, [1, 2, 3])
        await ctx.tick("read").repeat(6)
        assert ctx.get(dut.r_rdy) and ctx.get(dut.r_data) == 1
        ctx.set(domains["read"].rst, 1)  # (over two read edges)
        await ctx.delay(25e-9)
        ctx.set(domains["read"].rst, 0)
        await ctx.tick("read")
        assert ctx.get(dut.r_rdy) and ctx.get(dut.r_data) == 1  # kept
        ctx.set(dut.r_en, 1)
        await ctx.tick("read")
        ctx.set(dut.r_en, 0)
        out.append(ctx.get(dut.r_data))
        await write(ctx, [4])
        ctx.set(domains["write"].rst, 1)  # (over three write edges)
        await ctx.delay(25e-9)
        ctx.set(domains["write"].rst, 0)
        await ctx.tick("read").repeat(6)
        assert not ctx.get(dut.r_rdy)  # emptied
        await write(ctx, [5, 6])
        ctx.set(dut.r_en, 1)
        for _ in range(8):
            if ctx.get(dut.r_rdy):
                out.append(ctx.get(dut.r_data))
            await ctx.tick("read")

    sim = _sim(dut, 7e-9, 10e-9, domains)
    sim.add_testbench(bench)
    sim.run()
    assert out == [2, 5, 6]


@pytest.mark.parametrize(("asked", "depth"), [(16, 17), (17, 17), (3, 3)])
def test_depth_is_a_power_of_two_plus_one(asked, depth):
    dut = ReadAheadAsyncFIFO(width=1, depth=asked)
    assert dut.depth == depth
    Fragment.get(dut, None)  # (elaborated: a memory of depth - 1 entries)
    assert len(dut.w_level) == (depth - 1).bit_length()


def test_depth_below_three_is_refused():
    with pytest.raises(ValueError, match="at least 3"):
        ReadAheadAsyncFIFO(width=1, depth=2)


class _Crossing(Elaboratable):
    """``cross`` from the domain ``write`` to ``read``, as the UDP link's tuples cross."""

    def __init__(self, depth):
        self.source = stream.Signature(12).flip().create()
        self.sink = stream.Signature(12).create()
        self._depth = depth
        self.crossing = None

    def elaborate(self, platform):
        m = Module()
        self.crossing = cross(
            m, "crossing", self.source, self.sink, depth=self._depth, w_domain="write",
            r_domain="read",
        )  # fmt: skip
        return m


def _cross_words(dut, words, *, w_period, r_period, seed):
    """Offer ``words`` on the source with gaps, take them from the sink with stalls and two
    long ones (which fill the crossing); what the sink gave."""
    rng_w, rng_r = random.Random(seed), random.Random(seed + 1)
    out = []

    async def writer(ctx):
        for word in words:
            ctx.set(dut.source.payload, word)
            while True:
                ctx.set(dut.source.valid, rng_w.random() >= 0.2)
                if ctx.get(dut.source.valid) and ctx.get(dut.source.ready):
                    break
                await ctx.tick("write")
            await ctx.tick("write")
        ctx.set(dut.source.valid, 0)

    async def reader(ctx):
        cycle = 0
        while len(out) < len(words) and cycle < 40 * len(words):
            ready = rng_r.random() >= 0.4 and not (30 <= cycle < 90 or 200 <= cycle < 260)
            ctx.set(dut.sink.ready, ready)
            valid, data = ctx.get(dut.sink.valid), ctx.get(dut.sink.payload)
            await ctx.tick("read")
            cycle += 1
            if valid and ready:
                out.append(data)

    sim = _sim(dut, w_period, r_period)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run()
    return out


@pytest.mark.parametrize(("w_period", "r_period"), [(7e-9, 10e-9), (8e-9, 8.3e-9)])
def test_a_crossing_loses_nothing_although_its_writes_are_unchecked(w_period, r_period):
    """:func:`cross` writes on ``valid & room`` alone (its room register, not the FIFO's
    fullness, keeps the memory from overflowing): every word once, in order, with the
    reader stalled long enough to fill it; and with the room register broken on purpose
    (``BREAK_ROOM``) words are lost, so the test would see it."""
    rng = random.Random(3)
    words = [rng.randrange(1 << 12) for _ in range(300)]
    assert len(set(words)) > 250
    dut = _Crossing(depth=16)
    assert _cross_words(dut, words, w_period=w_period, r_period=r_period, seed=11) == words
    assert not dut.crossing._checked


def test_a_crossing_with_its_room_broken_loses_words(monkeypatch):
    monkeypatch.setattr(stream_blocks, "BREAK_ROOM", "late")
    rng = random.Random(3)
    words = [rng.randrange(1 << 12) for _ in range(300)]
    out = _cross_words(_Crossing(depth=16), words, w_period=7e-9, r_period=10e-9, seed=11)
    assert out != words
