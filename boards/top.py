"""The harness board top (``nfacep build --link harness``): an :class:`~nfacep.hdl.engine.Engine`
between an on-chip tuple source and a sink.

This is a **synthesis and timing harness**, not an I/O link: the tuples come from a
pseudo-random generator on the chip and the records and counters are folded into the board's
LEDs. It exists so that a bitstream holds the whole engine (every input varies and every output
bit reaches a pin, so synthesis cannot optimise any of it away) and so that nextpnr reports the
engine's own area and Fmax. The board top with a usable I/O link is
:class:`nfacep.links.uart.top.UartBoardTop` (``--link uart``): tuples in and records out over
the board's USB UART.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Elaboratable, Module, Signal
from amaranth.lib import data, io, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.hdl.engine import Engine

__all__ = ["BoardTop", "LedSink", "RandomTupleSource", "board_leds"]


class RandomTupleSource(wiring.Component):
    """Pseudo-random tuples, one per cycle, from a 32-bit xorshift generator.

    Payload bits beyond the generator's 32 are XORs of two different state bits, so no two
    payload bits are the same signal and every one varies. The generator is an invertible
    linear map of a non-zero state, so it never sticks at zero. ``o_stream.valid`` is always
    high; the state advances on each transfer.

    Members
    -------
    o_stream : ``Out(stream.Signature(layout))``
    """

    WIDTH = 32

    def __init__(self, layout: data.StructLayout, *, seed: int = 0x2545F491):
        self._layout = layout
        self._seed = (seed % ((1 << self.WIDTH) - 1)) or 1
        super().__init__({"o_stream": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        w = self.WIDTH
        state = Signal(w, init=self._seed, name="xorshift")
        x1 = Signal(w)
        x2 = Signal(w)
        x3 = Signal(w)
        m.d.comb += [
            x1.eq(state ^ (state << 13)[:w]),
            x2.eq(x1 ^ (x1 >> 17)),
            x3.eq(x2 ^ (x2 << 5)[:w]),
            self.o_stream.valid.eq(1),
        ]
        bits = []
        for i in range(self._layout.size):
            k, j = divmod(i, w)
            bits.append(state[j] if k == 0 else state[j] ^ state[(j + 2 * k - 1) % w])
        m.d.comb += self.o_stream.payload.as_value().eq(Cat(*bits))
        with m.If(self.o_stream.ready):
            m.d.sync += state.eq(x3)
        return m


class LedSink(wiring.Component):
    """Folds every record and the engine's counters into ``leds`` registered output bits.

    Always ready. Each record is XOR-folded to the LEDs' width and accumulated into a register;
    that register and the ``tuples``, ``matched`` and ``drops`` counters are XOR-folded into the
    LED bits, so every bit the engine produces reaches a pin.

    Members
    -------
    i_stream : ``In(stream.Signature(record_layout))``
    tuples, matched, drops : ``In(counter_width)``
    leds : ``Out(leds)``
    """

    def __init__(self, record_layout: data.StructLayout, *, leds: int, counter_width: int = 32):
        if leds < 1:
            raise ValueError(f"LED count must be at least 1, not {leds!r}")
        super().__init__(
            {
                "i_stream": In(stream.Signature(record_layout)),
                "tuples": In(counter_width),
                "matched": In(counter_width),
                "drops": In(counter_width),
                "leds": Out(leds),
            }
        )

    def elaborate(self, platform):
        m = Module()
        n = len(self.leds)
        acc = Signal(n, name="record_xor")
        m.d.comb += self.i_stream.ready.eq(1)
        with m.If(self.i_stream.valid):
            m.d.sync += acc.eq(acc ^ _fold(self.i_stream.payload.as_value(), n))
        m.d.sync += self.leds.eq(_fold(Cat(acc, self.tuples, self.matched, self.drops), n))
        return m


def _fold(value, width: int):
    """XOR of ``value``'s ``width``-bit chunks."""
    folded = Const(0, width)
    for i in range(0, len(value), width):
        folded = folded ^ value[i : i + width]
    return folded


def board_leds(platform) -> list:
    """The board's LED ports (every ``led`` resource it defines, at least one)."""
    leds = []
    number = 0
    while ("led", number) in platform.resources:
        leds.append(platform.request("led", number, dir="-"))
        number += 1
    if not leds:
        raise ValueError(f"platform {type(platform).__name__} has no 'led' resource")
    return leds


class BoardTop(Elaboratable):
    """The harness bitstream's top level: ``RandomTupleSource ▸ engine ▸ LedSink``, clocked by
    the board's default clock (the platform's ``sync`` domain, its reset synchronised), the sink
    on the board's LEDs.
    """

    def __init__(self, engine: Engine):
        self.engine = engine

    def elaborate(self, platform):
        m = Module()
        engine = self.engine
        leds = board_leds(platform) if platform is not None else []
        m.submodules.source = source = RandomTupleSource(engine.tuple_layout)
        m.submodules.engine = engine
        m.submodules.sink = sink = LedSink(engine.record_layout, leds=max(len(leds), 1))
        wiring.connect(m, source.o_stream, engine.i_stream)
        wiring.connect(m, engine.o_stream, sink.i_stream)
        m.d.comb += [
            sink.tuples.eq(engine.tuples),
            sink.matched.eq(engine.matched),
            sink.drops.eq(engine.drops),
        ]
        for i, port in enumerate(leds):
            m.submodules[f"led{i}"] = buf = io.Buffer("o", port)
            m.d.comb += buf.o.eq(sink.leds[i])
        return m
