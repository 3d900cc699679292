"""The UART link's gateware around the engine (its board top: :mod:`nfacep.links.uart.top`).

:class:`UartLink` is the whole link (UART, framing, buffer, counters, LEDs) as one component
with the engine's streams; :class:`UartTop` joins it to an :class:`~nfacep.hdl.engine.Engine` with
only ``rx``, ``tx`` and ``leds`` as ports (what the cocotb test drives);
:class:`nfacep.links.uart.top.UartBoardTop` puts that on a board's USB UART and LEDs.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.hdl.engine import Engine
from nfacep.hdl.layout import params_layout
from nfacep.hdl.stream import PacketQueue, TupleGatherer
from nfacep.hdl.uart.deframer import Deframer
from nfacep.hdl.uart.framer import Framer
from nfacep.hdl.uart.rx import UartRx, divisor
from nfacep.hdl.uart.status import COUNTED
from nfacep.links.protocol import SWITCH_BYTES, engine_fields, engine_id, params_bytes
from nfacep.links.uart.protocol import VERSION

__all__ = ["CAPACITY", "LED_MEANINGS", "UartLink", "UartTop"]

#: What each LED shows, in order (a board shows as many as it has).
LED_MEANINGS = (
    "a good frame arrived (blinks)",
    "a frame was sent (blinks)",
    "tuples were dropped since the last RESET (steady)",
    "a link error since the last RESET: bad frame, UART error (steady)",
    "a match (blinks)",
    "heartbeat: the bitstream runs",
)

#: Default capacity of the tuple buffer in bytes (one ECP5 DP16KD, one iCE40 SB_RAM40_4K).
CAPACITY = 512


class _Blocks(NamedTuple):
    """The :class:`UartLink`'s blocks."""

    rx: UartRx
    deframer: Deframer
    buffer: PacketQueue
    assembler: TupleGatherer
    framer: Framer


class UartLink(wiring.Component):
    """The UART link: frames from ``rx`` become tuples on ``o_stream``; records from
    ``i_stream``, ACKs and STATUS go back as frames on ``tx`` (:mod:`nfacep.links.uart.protocol`).

    Parameters
    ----------
    tuple_layout, record_layout : :class:`~amaranth.lib.data.StructLayout`
        The engine's.
    divisor : :class:`int`
        Clock cycles per UART bit.
    engine_id : :class:`int`
        The 32-bit fingerprint STATUS reports (:func:`nfacep.links.protocol.engine_id`).
    capacity : :class:`int`
        Bytes of the tuple buffer (a power of 2).
    timeout : :class:`int`
        Cycles without a byte after which a frame counts as truncated.
    quiet : :class:`int`
        Cycles without any activity after which STATUS reports ``idle`` (more than the engine's
        latency; rounded up to the prescaler's ticks).
    leds : :class:`int`
        Width of ``leds`` (:data:`LED_MEANINGS`, in order).
    led_period : :class:`int`
        Cycles a blinking LED stays lit (rounded to a power of two of the prescaler's ticks).
        One prescaler counts the ticks of the timeout, of ``quiet`` and of the LEDs: a power of
        two cycles, about a sixteenth of the shorter of ``timeout`` and ``led_period``.
    params_bits : :class:`int`
        Bits of the engine's runtime parameters (``Engine.param_values``; 0: none): PARAMS
        frames' switches leave on ``o_params``, and STATUS reports ``param_values``.

    Throughput is the UART's: ``baud / 10`` bytes per second each way. A tuple leaves
    ``o_stream`` a few cycles after its frame's CRC checked, and the stream waits for the engine.
    The link counts what STATUS reports itself (:class:`~nfacep.hdl.uart.framer.Framer`):
    ``tuples`` are the tuples taken from ``o_stream``, ``matched`` and ``drops`` the records sent
    with a match or dropped; the engine's own counters are left unconnected (and so synthesised
    away).

    Members
    -------
    rx : ``In(1)``
    tx : ``Out(1)``
    o_stream : ``Out(stream.Signature(tuple_layout))``
    i_stream : ``In(stream.Signature(record_layout))``
    engine_reset : ``Out(1)``
        Pulses when a RESET frame arrives: reset the engine with it.
    leds : ``Out(leds)``
    o_params : ``Out(stream.Signature(48 + 8 * ceil(params_bits / 8)))``
        With ``params_bits``: a switch, the tuple number in the low 48 bits and the values
        above (:class:`~nfacep.hdl.uart.deframer.Deframer`); to the engine's ``i_params``.
    param_values : ``In(params_bits)``
        With ``params_bits``: the engine's ``param_values``.
    """

    def __init__(
        self,
        tuple_layout: data.StructLayout,
        record_layout: data.StructLayout,
        *,
        divisor: int,
        engine_id: int,
        capacity: int = CAPACITY,
        timeout: int,
        quiet: int,
        leds: int = 0,
        led_period: int = 1 << 20,
        params_bits: int = 0,
        engine_fields: dict[str, int] | None = None,
    ):
        self._tuple_layout = tuple_layout
        self._record_layout = record_layout
        self._divisor = divisor
        self._engine_id = engine_id
        self._capacity = capacity
        self._timeout = timeout
        self._quiet = max(int(quiet), 2)
        self._led_period = max(int(led_period), 2)
        self._params_bits = int(params_bits)
        self._engine_fields = dict(engine_fields or {})
        members = {
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "o_stream": Out(stream.Signature(tuple_layout)),
            "i_stream": In(stream.Signature(record_layout)),
            "engine_reset": Out(1),
        }
        if leds:
            members["leds"] = Out(leds)
        if self._params_bits:
            members["o_params"] = Out(
                stream.Signature(8 * (SWITCH_BYTES + params_bytes(self._params_bits)))
            )
            members["param_values"] = In(self._params_bits)
        super().__init__(members)

    @property
    def capacity(self) -> int:
        return self._capacity

    def elaborate(self, platform):
        m = Module()
        tick, tick_period = self._prescaler(m)
        blocks = self._blocks(m, tick, tick_period)
        self._counters(m, blocks)
        self._idle(m, blocks, tick, tick_period)
        if "leds" in self.signature.members:
            self._leds(m, blocks, tick, tick_period)
        return m

    def _prescaler(self, m):
        """One prescaler times the truncated-frame timeout, ``quiet`` and the LEDs' blinks:
        returns its ``tick`` pulse and the cycles between two."""
        tick_period = 1 << max((min(self._timeout, self._led_period) // 16).bit_length() - 1, 0)
        tick = Signal()
        if tick_period > 1:
            prescaler = Signal(range(tick_period), reset_less=True)
            m.d.sync += prescaler.eq(prescaler + 1)
            m.d.comb += tick.eq(prescaler.all())
        else:
            m.d.comb += tick.eq(1)
        return tick, tick_period

    def _blocks(self, m, tick, tick_period) -> _Blocks:
        """The link's blocks, joined: ``rx ▸ UartRx ▸ Deframer ▸ PacketQueue ▸ TupleGatherer ▸
        o_stream`` and ``i_stream ▸ Framer ▸ tx``; RESET resets the buffer, the assembler and
        (``engine_reset``) the engine, and clears the framer's counters."""
        tuple_bytes = (self._tuple_layout.size + 7) // 8
        record_bytes = (self._record_layout.size + 7) // 8
        m.submodules.uart_rx = rx = UartRx(self._divisor)
        m.submodules.deframer = deframer = Deframer(
            tuple_bytes, self._capacity, self._timeout, tick_period, params_bytes(self._params_bits)
        )
        if tick_period > 1:
            m.d.comb += deframer.tick.eq(tick)
        reset = deframer.events.reset
        buffer = PacketQueue(self._capacity)
        assembler = TupleGatherer(self._tuple_layout, overlap=False)
        m.submodules.buffer = ResetInserter(reset)(buffer)
        m.submodules.assembler = ResetInserter(reset)(assembler)
        m.submodules.framer = framer = Framer(
            self._record_layout,
            {
                "version": VERSION,
                "engine_id": self._engine_id,
                "tuple_bytes": tuple_bytes,
                "record_bytes": record_bytes,
                "capacity": self._capacity,
                **self._engine_fields,
            },
            divisor=self._divisor,
            params_bits=self._params_bits,
        )
        m.d.comb += [rx.rx.eq(self.rx), self.tx.eq(framer.tx), self.engine_reset.eq(reset)]
        wiring.connect(m, rx.o_stream, deframer.i_stream)
        wiring.connect(m, deframer.o_stream, buffer.i_stream)
        m.d.comb += [
            buffer.commit.eq(deframer.commit),
            buffer.rollback.eq(deframer.rollback),
            deframer.overflow.eq(buffer.overflow),
        ]
        wiring.connect(m, buffer.o_stream, assembler.i_stream)
        wiring.connect(m, assembler.o_stream, wiring.flipped(self.o_stream))
        wiring.connect(m, wiring.flipped(self.i_stream), framer.i_stream)
        m.d.comb += [
            framer.send_ack.eq(deframer.events.ack),
            framer.send_status.eq(deframer.events.status),
            framer.clear.eq(reset),
            framer.next_seq.eq(deframer.next_seq),
        ]
        if self._params_bits:
            wiring.connect(m, deframer.o_params, wiring.flipped(self.o_params))
            m.d.comb += framer.params.eq(self.param_values)
        return _Blocks(rx, deframer, buffer, assembler, framer)

    def _counters(self, m, blocks):
        """The pulses the framer counts: the tuples the engine takes, the frames accepted, the
        UART's errors and the deframer's."""
        pulses = {
            "tuples": self.o_stream.valid & self.o_stream.ready,
            "frames": blocks.deframer.events.accepted,
            "uart_errors": blocks.rx.error | blocks.rx.overrun,
        }
        for name in COUNTED:
            m.d.comb += getattr(blocks.framer.count, name).eq(
                pulses[name] if name in pulses else getattr(blocks.deframer.events, name)
            )

    def _idle(self, m, blocks, tick, tick_period):
        """STATUS's ``idle``: nothing buffered, offered or being sent for ``quiet`` cycles
        (counted in whole ticks: one more than it takes)."""
        quiet_ticks = -(-self._quiet // tick_period) + (tick_period > 1)
        quiet = Signal(range(quiet_ticks + 1), reset_less=True)
        busy = (
            ~blocks.buffer.empty
            | self.o_stream.valid
            | self.i_stream.valid
            | blocks.framer.busy_record
            | blocks.assembler.i_stream.valid
        )
        with m.If(busy | blocks.deframer.events.reset):
            m.d.sync += quiet.eq(0)
        with m.Elif(tick & (quiet != quiet_ticks)):
            m.d.sync += quiet.eq(quiet + 1)
        m.d.comb += blocks.framer.idle.eq(quiet == quiet_ticks)

    def _led_flags(self, m, blocks):
        """The steady LEDs' flags, cleared by RESET: a link error (not ``out_of_seq`` or
        ``overflow``: those are the host's flow control) and a tuple dropped (seen in the
        records)."""
        events = blocks.deframer.events
        errors = Signal(reset_less=True)
        with m.If(events.reset):
            m.d.sync += errors.eq(0)
        with m.Elif(
            blocks.rx.error
            | blocks.rx.overrun
            | events.bad_type
            | events.bad_length
            | events.bad_crc
            | events.truncated
        ):
            m.d.sync += errors.eq(1)
        dropped = Signal(reset_less=True)
        with m.If(events.reset):
            m.d.sync += dropped.eq(0)
        with m.Elif(self.i_stream.valid & self.i_stream.ready & self.i_stream.payload.dropped):
            m.d.sync += dropped.eq(1)
        return errors, dropped

    def _leds(self, m, blocks, tick, tick_period):
        """:data:`LED_MEANINGS`, as many as there are LEDs: a blink stays lit for a power of two
        ticks, the nearest to ``led_period`` cycles; the heartbeat toggles every four of those."""
        errors, dropped = self._led_flags(m, blocks)
        n = len(self.leds)
        ticks = round(math.log2(max(self._led_period / tick_period, 2)))
        # (no resets: the domain's reset would cost logic in front of these)
        period = Signal(ticks, reset_less=True)
        strobe = Signal()
        beats = Signal(3, reset_less=True)
        m.d.comb += strobe.eq(tick & period.all())
        with m.If(tick):
            m.d.sync += period.eq(period + 1)
        with m.If(strobe):
            m.d.sync += beats.eq(beats + 1)
        blinks = {
            0: blocks.deframer.events.accepted | blocks.deframer.events.status,
            1: blocks.framer.sent,
            4: (self.i_stream.valid & self.i_stream.ready & self.i_stream.payload.matches.any()),
        }
        steady = {2: dropped, 3: errors, 5: beats[2]}
        for i in range(n):
            if i in blinks:
                seen = Signal(name=f"led{i}_seen", reset_less=True)
                lit = Signal(name=f"led{i}_lit", reset_less=True)
                with m.If(strobe):
                    m.d.sync += [lit.eq(seen | blinks[i]), seen.eq(0)]
                with m.Elif(blinks[i]):
                    m.d.sync += [seen.eq(1), lit.eq(1)]
                m.d.comb += self.leds[i].eq(lit)
            elif i in steady:
                m.d.sync += self.leds[i].eq(steady[i])


class UartTop(wiring.Component):
    """``engine`` behind a :class:`UartLink`: the ports are the UART's two wires and the LEDs.

    ``clk_hz`` and ``baud`` give the bit time; ``timeout_s`` (default 10 ms, at least 20 byte
    times) the truncated-frame timeout; ``led_period_s`` how long a blink lasts. ``divisor``,
    ``timeout`` and ``led_period`` (cycles) override them, for simulation. A RESET frame resets
    the engine too (and so its runtime parameters to the values it was built with). An engine
    with runtime parameters takes the PARAMS frames' switches on ``i_params``, and STATUS
    reports its ``param_values``.

    Members
    -------
    rx : ``In(1)``
    tx : ``Out(1)``
    leds : ``Out(leds)``
    sdram : ``Out(pins_signature(...))``
        With an engine of ``--store sdram``: its SDRAM chip's pins, passed out (the board top
        puts them on the board's pads, :mod:`nfacep.boards.sdram`).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        clk_hz: float,
        baud: int = 115200,
        leds: int = 1,
        capacity: int = CAPACITY,
        timeout_s: float = 0.01,
        led_period_s: float = 0.04,
        divisor: int | None = None,
        timeout: int | None = None,
        led_period: int | None = None,
    ):
        self._engine = engine
        self._divisor = divisor if divisor is not None else _divisor(clk_hz, baud)
        self._engine_id = engine_id(engine.nfa, engine.params)
        byte_time = 10 * self._divisor
        self._link_args = {
            "divisor": self._divisor,
            "engine_id": self._engine_id,
            "capacity": capacity,
            "timeout": timeout
            if timeout is not None
            else max(20 * byte_time, round(timeout_s * clk_hz)),
            "quiet": 2 * (engine.params.partitions + 32),
            "leds": leds,
            "led_period": led_period if led_period is not None else round(led_period_s * clk_hz),
            "params_bits": _params_bits(engine),
            "engine_fields": engine_fields(engine.params),
        }
        members = {"rx": In(1, init=1), "tx": Out(1, init=1), "leds": Out(leds)}
        if "sdram" in engine.signature.members:  # --store sdram: the chip's pins, passed out
            members["sdram"] = engine.signature.members["sdram"]
        super().__init__(members)

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def divisor(self) -> int:
        return self._divisor

    @property
    def engine_id(self) -> int:
        return self._engine_id

    @property
    def link_parameters(self) -> dict:
        return dict(self._link_args)

    def elaborate(self, platform):
        m = Module()
        engine = self._engine
        link = UartLink(engine.tuple_layout, engine.record_layout, **self._link_args)
        m.submodules.link = link
        m.submodules.engine = ResetInserter(link.engine_reset)(engine)
        wiring.connect(m, link.o_stream, engine.i_stream)
        wiring.connect(m, engine.o_stream, link.i_stream)
        m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx), self.leds.eq(link.leds)]
        if "sdram" in self.signature.members:
            wiring.connect(m, engine.sdram, wiring.flipped(self.sdram))
        if self._link_args["params_bits"]:
            switch = link.o_params.payload
            seq = engine.i_params.payload.seq
            m.d.comb += [
                engine.i_params.valid.eq(link.o_params.valid),
                link.o_params.ready.eq(engine.i_params.ready),
                seq.eq(switch[: min(len(seq), 8 * SWITCH_BYTES)]),
                engine.i_params.payload.values.eq(
                    switch[8 * SWITCH_BYTES : 8 * SWITCH_BYTES + self._link_args["params_bits"]]
                ),
                link.param_values.eq(engine.param_values),
            ]
        return m


def _params_bits(engine: Engine) -> int:
    """Bits of ``engine``'s runtime parameters' values (0 without any)."""
    layout = params_layout(engine.nfa.program.parameters)
    return layout.size if layout is not None else 0


def _divisor(clk_hz: float, baud: int) -> int:
    return divisor(clk_hz, baud)
