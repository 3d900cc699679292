"""The UART link (hdl/uart, hdl/uart/link.py): UART, deframer and framer in the Amaranth
simulator, and the whole UART board top's Verilog under cocotb (Icarus) against the reference
matcher.

The cocotb bench (tests/benches/bench_uart_link.py) drives the ``rx`` pin with frames — good
ones and bad ones between them (garbage, a flipped CRC, a truncated frame, a wrong length, a
duplicate) — decodes ``tx``, and the test checks that the records that come back are the
reference matcher's on the tuples of the good frames and that the board counted every bad frame
by its kind.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.crc import catalog
from amaranth.sim import Simulator
from bench_uart_link import CONFIG_ENV
from streams import stream_get, stream_put
from uart_tx import UartTx

from nfacep.hdl.stream import PacketQueue, TupleGatherer
from nfacep.hdl.uart.deframer import Deframer
from nfacep.hdl.uart.framer import Framer
from nfacep.hdl.uart.rx import BaudError, UartRx, divisor
from nfacep.links.protocol import decode_fields, engine_fields, engine_from_fields, params_bytes
from nfacep.links.uart import protocol
from nfacep.links.uart.protocol import FrameType, encode
from nfacep.params import EngineParams

ROOT = pathlib.Path(__file__).resolve().parents[3]
#: The cocotb benches, loaded by module name in the simulator.
BENCHES = ROOT / "tests" / "benches"
MARATHON = ROOT / "queries" / "marathon.sql"


# --------------------------------------------------------------------------- protocol


def test_crc_and_frame_reader_resynchronise():
    assert protocol.crc16(b"123456789") == 0x29B1
    good = [encode(FrameType.STATUS, bytes(range(n))) for n in (1, 5, 40)]
    bad_crc = bytearray(good[1])
    bad_crc[-1] ^= 0x10
    stream = (
        b"\x00\xa5\xa5"
        + good[0]
        + b"\x5a\xa5"
        + bytes(bad_crc)
        + b"\xa5\x5a\x77"
        + good[1]
        + bytes(good[2][:10])
        + good[2]
    )
    reader = protocol.FrameReader([FrameType.STATUS], max_payload=64)
    frames = []
    for i in range(0, len(stream), 7):  # in pieces, as a serial port delivers them
        frames += reader.feed(stream[i : i + 7])
    assert [f.payload for f in frames] == [bytes(range(n)) for n in (1, 5, 40)]
    assert reader.errors["bad_crc"] >= 1 and reader.errors["bad_type"] == 1


#: The frames' CRC as amaranth.lib.crc computes it in software, a byte at a time.
LIB_CRC = catalog.CRC16_CCITT_FALSE(8)


def test_crc16_equals_lib_crc():
    """The host's CRC (binascii.crc_hqx) is amaranth.lib.crc's CRC-16/CCITT-FALSE, also when it
    continues from an earlier value."""
    rng = random.Random(7)
    for n in [0, 1, 2, 3, 9, 64, 255, 1000, *(rng.randrange(4096) for _ in range(40))]:
        data = rng.randbytes(n)
        assert protocol.crc16(data) == LIB_CRC.compute(data)
        cut = rng.randrange(n + 1)
        assert protocol.crc16(data[cut:], protocol.crc16(data[:cut])) == LIB_CRC.compute(data)
    assert LIB_CRC.compute(b"123456789") == 0x29B1


def test_divisor_rejects_inexact_baud_rates():
    assert divisor(25e6, 115200) == 217
    assert divisor(12e6, 115200) == 104
    with pytest.raises(BaudError, match="cannot make 3000000 baud"):
        divisor(25e6, 3_000_000)
    with pytest.raises(BaudError, match="too fast"):
        divisor(12e6, 6_000_000)


# --------------------------------------------------------------------------- UART


def _run(dut, *benches, clock=1e-6, processes=()):
    sim = Simulator(dut)
    sim.add_clock(clock)
    for bench in benches:
        sim.add_testbench(bench)
    for proc in processes:
        sim.add_process(proc)
    sim.run()


def test_uart_tx_to_rx_loopback():
    rng = random.Random(1)
    sent = [rng.randrange(256) for _ in range(40)]
    got = []
    m = Module()
    m.submodules.tx = tx = UartTx(5)
    m.submodules.rx = rx = UartRx(5)
    m.d.comb += rx.rx.eq(tx.tx)

    async def put(ctx):
        for b in sent:
            await stream_put(ctx, tx.i_stream, b, rng=rng, gap=0.3)

    async def get(ctx):
        for _ in sent:
            got.append(await stream_get(ctx, rx.o_stream, rng=rng, stall=0.2))
        assert ctx.get(rx.error) == 0

    _run(m, put, get)
    assert got == sent


async def _drive_bits(ctx, pin, bits, div):
    for bit in bits:
        ctx.set(pin, bit)
        await ctx.tick().repeat(div)


def _uart_bits(byte, stop=1):
    return [0, *((byte >> i) & 1 for i in range(8)), stop]


def test_uart_rx_stop_bit_error_and_glitch():
    div = 6
    rx = UartRx(div)
    got, errors = [], []

    async def bench(ctx):
        ctx.set(rx.o_stream.ready, 1)
        await ctx.tick().repeat(4)
        await _drive_bits(ctx, rx.rx, [0, 1, 1, 1], 1)  # a 1-cycle glitch: no start bit
        await _drive_bits(ctx, rx.rx, [1], div * 2)
        await _drive_bits(ctx, rx.rx, _uart_bits(0x3C, stop=0), div)  # framing error
        await _drive_bits(ctx, rx.rx, [1], div * 3)  # line back to idle
        await _drive_bits(ctx, rx.rx, _uart_bits(0xA5) + [1] * 3, div)

    async def watch(ctx):
        async for _, _, valid, payload, error in ctx.tick().sample(
            rx.o_stream.valid, rx.o_stream.payload, rx.error
        ):
            if valid:
                got.append(payload)
            if error:
                errors.append(1)

    sim = Simulator(rx)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_testbench(watch, background=True)
    sim.run()
    assert got == [0xA5] and len(errors) == 1


def test_uart_rx_holds_a_byte_until_taken_and_counts_overruns():
    """A byte that arrives while the last one waits is lost (``overrun``); the waiting one is
    still offered, and bytes after it are received once it is taken."""
    div = 6
    rx = UartRx(div)
    got, overruns = [], []

    async def bench(ctx):
        await ctx.tick().repeat(4)
        for byte in (0x11, 0x22):  # nobody takes the first one
            await _drive_bits(ctx, rx.rx, [*_uart_bits(byte), 1], div)
        assert ctx.get(rx.o_stream.valid) == 1 and ctx.get(rx.o_stream.payload) == 0x11
        ctx.set(rx.o_stream.ready, 1)  # from now on every byte is taken
        await _drive_bits(ctx, rx.rx, _uart_bits(0x33) + [1] * 3, div)

    async def watch(ctx):
        async for _, _, valid, ready, payload, overrun in ctx.tick().sample(
            rx.o_stream.valid, rx.o_stream.ready, rx.o_stream.payload, rx.overrun
        ):
            if valid and ready:
                got.append(payload)
            if overrun:
                overruns.append(1)

    sim = Simulator(rx)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_testbench(watch, background=True)
    sim.run()
    assert got == [0x11, 0x33] and len(overruns) == 1


# --------------------------------------------------------------------------- framing


class _Receiver(wiring.Component):
    """Deframer ▸ PacketQueue ▸ TupleGatherer, fed bytes directly."""

    def __init__(self, layout, capacity, timeout):
        self.layout = layout
        self.deframer = Deframer((layout.size + 7) // 8, capacity, timeout)
        self.buffer = PacketQueue(capacity)
        self.assembler = TupleGatherer(layout, overlap=False)
        super().__init__(
            {
                "i_stream": wiring.In(stream.Signature(8)),
                "o_stream": wiring.Out(stream.Signature(layout)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.deframer = d = self.deframer
        m.submodules.buffer = b = self.buffer
        m.submodules.assembler = a = self.assembler
        wiring.connect(m, wiring.flipped(self.i_stream), d.i_stream)
        wiring.connect(m, d.o_stream, b.i_stream)
        m.d.comb += [b.commit.eq(d.commit), b.rollback.eq(d.rollback), d.overflow.eq(b.overflow)]
        wiring.connect(m, b.o_stream, a.i_stream)
        wiring.connect(m, a.o_stream, wiring.flipped(self.o_stream))
        return m


def _tuples_frame(seq, tuples, tb=3):
    return encode(
        FrameType.TUPLES, bytes([seq]) + b"".join(t.to_bytes(tb, "little") for t in tuples)
    )


def test_deframer_accepts_good_frames_and_counts_bad_ones():
    layout = data.StructLayout({"a": 20})  # 3 bytes on the wire
    dut = _Receiver(layout, capacity=32, timeout=40)
    ev = dut.deframer.events
    good = [[1, 2, 3], [4], [5, 6]]
    flipped = bytearray(_tuples_frame(1, [99]))
    flipped[-2] ^= 1
    chunks = [
        (b"\x00\x13\xa5", 0),
        (_tuples_frame(0, good[0]), 0),
        (bytes(flipped), 0),  # bad CRC
        (_tuples_frame(1, [77, 78])[:8], 60),  # truncated: the line goes quiet
        (b"\xa5\x5a\x44", 0),  # bad type
        (encode(FrameType.TUPLES, b"\x01\x00\x00\x00\x00"), 0),  # 4 bytes: no whole tuple
        (encode(FrameType.TUPLES, b"\x01" + bytes(3 * 11)), 0),  # longer than the buffer
        (_tuples_frame(1, good[1]), 0),
        (_tuples_frame(1, good[1]), 0),  # a duplicate: out of sequence
        (_tuples_frame(2, list(range(100, 111))), 0),  # 33 bytes: length rejected
        (_tuples_frame(2, good[2]), 0),
        (encode(FrameType.STATUS_REQ), 0),
        (encode(FrameType.RESET), 0),
        (_tuples_frame(0, [42]), 0),  # seq starts again at 0
    ]
    counts = dict.fromkeys(
        (
            "accepted",
            "ack",
            "status",
            "reset",
            "bad_type",
            "bad_length",
            "bad_crc",
            "truncated",
            "out_of_seq",
            "overflow",
        ),
        0,
    )
    got = []

    async def feed(ctx):
        for chunk, quiet in chunks:
            for b in chunk:
                await stream_put(ctx, dut.i_stream, b)
                await ctx.tick().repeat(2)
            await ctx.tick().repeat(quiet + 3)
        await ctx.tick().repeat(20)

    async def take(ctx):
        ctx.set(dut.o_stream.ready, 1)
        async for _, _, valid, payload in ctx.tick().sample(
            dut.o_stream.valid, dut.o_stream.payload
        ):
            if valid:
                got.append(payload.a)

    async def events(ctx):
        async for _, _, *values in ctx.tick().sample(*(getattr(ev, n) for n in counts)):
            for name, v in zip(counts, values, strict=True):
                counts[name] += v

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(feed)
    sim.add_testbench(take, background=True)
    sim.add_testbench(events, background=True)
    sim.run()
    assert got == [*good[0], *good[1], *good[2], 42]
    assert counts == {
        "accepted": 4,
        "ack": 5,
        "status": 2,
        "reset": 1,
        "bad_type": 1,
        "bad_length": 3,
        "bad_crc": 1,
        "truncated": 1,
        "out_of_seq": 1,
        "overflow": 0,
    }


def test_deframer_overflow_when_the_engine_does_not_take_tuples():
    layout = data.StructLayout({"a": 8})
    dut = _Receiver(layout, capacity=8, timeout=40)
    counts = {"accepted": 0, "overflow": 0}

    async def feed(ctx):
        for seq, chunk in enumerate([list(range(6)), [6, 7, 8, 9]]):  # 6 + 4 > 8 bytes
            for b in encode(FrameType.TUPLES, bytes([seq, *chunk])):
                await stream_put(ctx, dut.i_stream, b)
        await ctx.tick().repeat(10)

    async def events(ctx):
        ev = dut.deframer.events
        async for _, _, acc, ovf in ctx.tick().sample(ev.accepted, ev.overflow):
            counts["accepted"] += acc
            counts["overflow"] += ovf

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(feed)
    sim.add_testbench(events, background=True)
    sim.run()
    assert counts == {"accepted": 1, "overflow": 1}


RECORD = data.StructLayout({"seq": 48, "partition": 16, "matches": 1, "dropped": 1})
CONSTANTS = {
    "version": protocol.VERSION,
    "engine_id": 0xDEADBEEF,
    "tuple_bytes": 11,
    "record_bytes": 9,
    "capacity": 512,
    # the engine parameters, which `nfacep run` learns from STATUS
    **engine_fields(EngineParams(store="table", partitions=65536, tick_tuples=1000, ways=8)),
}


FRAMER_DIVISOR = 4


def _framer_bench(dut, script, out=None):
    """Run ``script(ctx)`` against a Framer; the frames it sent on ``tx`` (their bytes in
    ``out``, a bytearray, if given)."""
    out = bytearray() if out is None else out

    async def receive(ctx):  # a UART receiver sampling mid-bit
        div = FRAMER_DIVISOR
        line = []
        async for _, _, tx in ctx.tick().sample(dut.tx):
            line.append(tx)
            if (
                len(line) >= 10 * div
                and line[-10 * div] == 0
                and (len(line) == 10 * div or line[-10 * div - 1] == 1)
            ):
                bits = [line[-10 * div + div // 2 + k * div] for k in range(10)]
                if bits[0] == 0 and bits[9] == 1:
                    out.append(sum(b << i for i, b in enumerate(bits[1:9])))
                    line = line[-1:]  # the stop bit: wait for the next start bit

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(script)
    sim.add_testbench(receive, background=True)
    sim.run()
    reader = protocol.FrameReader(list(FrameType), max_payload=64)
    frames = reader.feed(bytes(out))
    assert not any(reader.errors.values()) and not reader.pending
    return frames


async def _pulse(ctx, *signals, times=1, gap=3):
    for _ in range(times):
        for s in signals:
            ctx.set(s, 1)
        await ctx.tick()
        for s in signals:
            ctx.set(s, 0)
        await ctx.tick().repeat(gap)


def _status(frame):
    assert frame.type == FrameType.STATUS
    return decode_fields(protocol.STATUS_FIELDS, frame.payload)


def test_framer_sends_status_ack_and_records():
    dut = Framer(RECORD, CONSTANTS, divisor=FRAMER_DIVISOR)

    async def bench(ctx):
        ctx.set(dut.next_seq, 7)
        ctx.set(dut.idle, 1)
        await _pulse(ctx, dut.count.tuples, times=300, gap=1)  # every other cycle
        await _pulse(ctx, dut.count.frames, times=3, gap=60)
        await _pulse(ctx, dut.count.bad_crc, dut.count.uart_errors, gap=60)
        await ctx.tick().repeat(100)  # the counts reach the counters within a sweep
        await stream_put(
            ctx, dut.i_stream, {"seq": 5, "partition": 0x1234, "matches": 1, "dropped": 0}
        )
        await _pulse(ctx, dut.send_ack, dut.send_status)
        await stream_put(ctx, dut.i_stream, {"seq": 6, "partition": 1, "matches": 0, "dropped": 1})
        await ctx.tick().repeat(3000)
        await _pulse(ctx, dut.send_status)
        await ctx.tick().repeat(4000)

    frames = _framer_bench(dut, bench)
    assert [f.type for f in frames] == [
        FrameType.RECORD,
        FrameType.STATUS,
        FrameType.ACK,
        FrameType.RECORD,
        FrameType.STATUS,
    ]
    assert int.from_bytes(frames[0].payload, "little") == 5 | 0x1234 << 48 | 1 << 64
    status = _status(frames[1])
    assert {k: status[k] for k in CONSTANTS} == CONSTANTS
    assert status["next_seq"] == 7
    assert {
        k: status[k]
        for k in (
            "tuples",
            "frames",
            "bad_crc",
            "uart_errors",
            "records",
            "matched",
            "drops",
            "bad_type",
        )
    } == {
        "tuples": 300,
        "frames": 3,
        "bad_crc": 1,
        "uart_errors": 1,
        "records": 1,
        "matched": 1,
        "drops": 0,
        "bad_type": 0,
    }
    assert decode_fields(protocol.ACK_FIELDS, frames[2].payload) == {
        "next_seq": 7,
        "tuples": 300,
    }
    assert int.from_bytes(frames[3].payload, "little") == 6 | 1 << 48 | 1 << 65
    later = _status(frames[4])
    assert (later["records"], later["matched"], later["drops"]) == (2, 1, 1)
    assert later["flags"] == 1  # idle, and every count is in


def test_framer_status_is_a_snapshot_and_clear_zeroes():
    """Counts during a STATUS frame wait for the next one; RESET's STATUS shows zeros, and
    counts from then on."""
    dut = Framer(RECORD, CONSTANTS, divisor=FRAMER_DIVISOR)

    async def bench(ctx):
        await _pulse(ctx, dut.count.tuples, times=0x1FF, gap=1)  # carries across bytes
        await _pulse(ctx, dut.count.bad_type, gap=60)  # the deframer's: one at a time
        await _pulse(ctx, dut.count.overflow, gap=60)
        await ctx.tick().repeat(100)
        await _pulse(ctx, dut.send_status)
        # while the frame goes out (slowly): more counts, which it must not show
        await _pulse(ctx, dut.count.tuples, times=0x101, gap=1)
        await _pulse(ctx, dut.count.bad_type, times=2, gap=60)
        await ctx.tick().repeat(3000)
        await _pulse(ctx, dut.send_status)
        await ctx.tick().repeat(3000)
        ctx.set(dut.clear, 1)
        ctx.set(dut.send_status, 1)
        ctx.set(dut.count.frames, 1)  # counts after RESET
        await ctx.tick()
        ctx.set(dut.clear, 0)
        ctx.set(dut.send_status, 0)
        ctx.set(dut.count.frames, 0)
        await ctx.tick().repeat(3000)
        await _pulse(ctx, dut.count.tuples, times=2, gap=1)
        await ctx.tick().repeat(100)
        await _pulse(ctx, dut.send_ack)
        await ctx.tick().repeat(4000)

    frames = _framer_bench(dut, bench)
    assert [f.type for f in frames] == [FrameType.STATUS] * 3 + [FrameType.ACK]
    first, second, cleared = (_status(f) for f in frames[:3])
    assert (first["tuples"], first["bad_type"], first["overflow"]) == (0x1FF, 1, 1)
    assert (second["tuples"], second["bad_type"], second["overflow"]) == (0x300, 3, 1)
    assert {k: cleared[k] for k in ("tuples", "bad_type", "overflow", "frames")} == {
        "tuples": 0,
        "bad_type": 0,
        "overflow": 0,
        "frames": 1,
    }
    assert cleared["engine_id"] == CONSTANTS["engine_id"]
    assert decode_fields(protocol.ACK_FIELDS, frames[3].payload)["tuples"] == 2


def _lib_crc_frame(ftype, payload):
    """A whole frame, its CRC computed by amaranth.lib.crc (not by the protocol module)."""
    body = bytes([ftype]) + len(payload).to_bytes(2, "little") + payload
    return protocol.SYNC + body + LIB_CRC.compute(body).to_bytes(2, "big")


def test_framer_crc_equals_lib_crc():
    """The CRC the framer computes in gateware, bit by bit, is amaranth.lib.crc's of the
    frame's bytes, on random records."""
    rng = random.Random(11)
    records = [
        {
            "seq": rng.getrandbits(48),
            "partition": rng.getrandbits(16),
            "matches": rng.getrandbits(1),
            "dropped": rng.getrandbits(1),
        }
        for _ in range(12)
    ]
    dut = Framer(RECORD, CONSTANTS, divisor=FRAMER_DIVISOR)

    async def bench(ctx):
        for record in records:
            await stream_put(ctx, dut.i_stream, record)
        await ctx.tick().repeat(600)

    raw = bytearray()
    frames = _framer_bench(dut, bench, raw)
    assert len(frames) == len(records)
    payloads = [
        (r["seq"] | r["partition"] << 48 | r["matches"] << 64 | r["dropped"] << 65).to_bytes(
            9, "little"
        )
        for r in records
    ]
    assert bytes(raw) == b"".join(_lib_crc_frame(FrameType.RECORD, p) for p in payloads)


def test_deframer_crc_equals_lib_crc():
    """The deframer's gateware CRC accepts the frames whose CRC amaranth.lib.crc computed, on
    random tuples, and rejects each with one bit flipped after the header."""
    rng = random.Random(12)
    layout = data.StructLayout({"a": 16})
    dut = _Receiver(layout, capacity=64, timeout=400)
    ev = dut.deframer.events
    batches = [[rng.getrandbits(16) for _ in range(rng.randrange(1, 10))] for _ in range(10)]
    frames = []
    for seq, batch in enumerate(batches):
        payload = bytes([seq]) + b"".join(t.to_bytes(2, "little") for t in batch)
        good = _lib_crc_frame(FrameType.TUPLES, payload)
        bad = bytearray(good)
        bad[rng.randrange(5, len(bad))] ^= 1 << rng.randrange(8)  # a payload or CRC bit
        frames += [bytes(bad), good]
    got, counts = [], {"accepted": 0, "bad_crc": 0}

    async def feed(ctx):
        for frame in frames:
            for b in frame:
                await stream_put(ctx, dut.i_stream, b)
        await ctx.tick().repeat(40)

    async def take(ctx):
        ctx.set(dut.o_stream.ready, 1)
        async for _, _, valid, payload, accepted, bad_crc in ctx.tick().sample(
            dut.o_stream.valid, dut.o_stream.payload, ev.accepted, ev.bad_crc
        ):
            if valid:
                got.append(payload.a)
            counts["accepted"] += accepted
            counts["bad_crc"] += bad_crc

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(feed)
    sim.add_testbench(take, background=True)
    sim.run()
    assert counts == {"accepted": len(batches), "bad_crc": len(batches)}
    assert got == [t for batch in batches for t in batch]


def test_record_format_is_the_engines():
    """The records the link sends are laid out as :func:`nfacep.wire.record_format` says."""
    from nfacep import compile_file, wire
    from nfacep.hdl.engine import Engine

    for name in ("marathon", "fire", "vshape"):
        nfa = compile_file(ROOT / "queries" / f"{name}.sql")
        engine = Engine(nfa, EngineParams(partitions=2))
        engine._MustUse__silence = True  # only its layout is wanted
        layout = engine.record_layout
        assert wire.record_format(nfa).fields == tuple((n, f.offset, f.width) for n, f in layout)


# --------------------------------------------------------------------------- cocotb

DIVISOR = 4  # clock cycles per UART bit in the simulation
TIMEOUT = 400  # cycles of silence that truncate a frame
PARTITIONS = 8


def _scenario(
    tmp_path,
    params: EngineParams = EngineParams(partitions=PARTITIONS),
    source: pathlib.Path = ROOT / "queries" / "marathon.csv",
    n: int = 120,
    query: pathlib.Path = MARATHON,
) -> dict:
    """What the bench sends: good frames with bad ones between them, and the expectation of
    the engine of ``params`` running ``query``; the first ``n`` tuples of ``source``."""
    from nfacep import compile_file, wire
    from nfacep.io import reader, tuples
    from nfacep.reference import matcher as reference

    nfa = compile_file(query)
    schema = nfa.program.schema
    data = reader.read(str(source), schema)
    tb = wire.tuple_bytes(schema)
    raw = wire.pack_bytes(schema, data)
    rng = random.Random(5)
    per = 6
    steps = [
        {"send": encode(FrameType.RESET).hex(), "expect": "status"},
        # PARAMS for an engine without runtime parameters: an unknown type
        {"send": encode(FrameType.PARAMS, protocol.params_payload(0, 0, 0, 8)).hex()},
    ]
    bad = {"bad_crc": 0, "truncated": 0, "bad_type": 1, "bad_length": 0, "out_of_seq": 0}
    for k, start in enumerate(range(0, n, per)):
        body = bytes([k % 256]) + raw[start * tb : (start + per) * tb]
        frame = encode(FrameType.TUPLES, body)
        kind = k % 6
        if kind == 1:  # garbage between frames (no sync byte in it)
            junk = bytes(rng.choice([b for b in range(256) if b != 0xA5]) for _ in range(7))
            steps.append({"send": junk.hex()})
        elif kind == 2:  # the same frame with a flipped CRC bit first
            broken = bytearray(frame)
            broken[-1] ^= 0x04
            steps.append({"send": bytes(broken).hex()})
            bad["bad_crc"] += 1
        elif kind == 3:  # a truncated copy, then the line goes quiet
            steps.append({"send": frame[: len(frame) // 2].hex(), "quiet": 2 * TIMEOUT})
            bad["truncated"] += 1
        elif kind == 4:  # a false sync word with an unknown type, and a frame whose payload
            # is no whole number of tuples
            steps.append(
                {"send": (b"\xa5\x5a\x7e" + encode(FrameType.TUPLES, body[: 1 + tb + 2])).hex()}
            )
            bad["bad_type"] += 1
            bad["bad_length"] += 1
        steps.append({"send": frame.hex(), "expect": "ack", "tuples": min(per, n - start)})
        if kind == 5:  # sent twice: the copy is out of sequence, acknowledged, discarded
            steps.append({"send": frame.hex(), "expect": "ack"})
            bad["out_of_seq"] += 1
    good = tuples.Tuples({c: v[:n] for c, v in data.columns.items()}, n, "good frames")
    res = reference.run(nfa, good, params)
    return {
        "steps": steps,
        "n": n,
        "divisor": DIVISOR,
        "bad": bad,
        "expected_matches": [list(m) for m in res.matches],
        "expected_drops": res.drops.tolist(),
        "results": str(tmp_path / "bench-results.json"),
    }


def _verilog(path: pathlib.Path, nfa=None, values=None) -> None:
    from amaranth.back import verilog

    from nfacep import compile_file
    from nfacep.hdl.engine import Engine
    from nfacep.hdl.uart.link import UartTop

    engine = Engine(
        nfa or compile_file(MARATHON), EngineParams(partitions=PARTITIONS), values=values
    )
    top = UartTop(
        engine, clk_hz=DIVISOR * 1e6, baud=1_000_000, leds=6, timeout=TIMEOUT, led_period=64
    )
    path.write_text(verilog.convert(top, name="nfacep_uart_top", emit_src=False))


#: The UART top with --store sdram on the ULX3S: 16,384 entries indexed directly by a 14-bit
#: runner (:func:`_narrow_marathon`), one 16-bit word of the AS4C32M16SB each, behind a
#: cache of 8,192 one-word lines, so two runners share each line. (Marathon's own 16-bit
#: runner would take 65,536 entries, and the store clears each after reset, at a word a
#: clock: four times the simulated time, for no path the narrower table leaves out.)
SDRAM_PARAMS = EngineParams(store="sdram", partitions=1 << 14)


def _narrow_marathon(path: pathlib.Path) -> pathlib.Path:
    """Marathon's query with a 14-bit runner: the key :data:`SDRAM_PARAMS` indexes directly."""
    text = MARATHON.read_text()
    assert text.count("UINT(16)") == 1
    path.write_text(text.replace("UINT(16)", "UINT(14)"))
    return path


def _evicting_csv(path: pathlib.Path, lines: int = 15) -> pathlib.Path:
    """Marathon tuples of ``2 * lines`` runners, two to a cache line (runners equal modulo
    8,192), in three rounds (Staten Island; Brooklyn for every third, else Manhattan;
    Queens): each runner's state is written back to the SDRAM by the other runner of its
    line and read again for its next tuple; two ``cheat`` matches for each runner not in
    Brooklyn."""
    rows = ["time,checkpoint,runner,speed"]
    runners = [7 + line + 8192 * k for line in range(lines) for k in range(2)]
    second = ["Brooklyn", "Manhattan", "Manhattan"]
    for r, place in enumerate(["Staten Island", None, "Queens"]):
        for i, runner in enumerate(runners):
            rows.append(f"{r * 1000 + i},{place or second[i % 3]},{runner},5.00")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.slow
def test_uart_board_top_with_the_sdram_icarus(tmp_path, sim_cache):
    """The ULX3S's UART top with the engine's partitions in its SDRAM: the controller built
    for the board's 25 MHz clock and its pads (the read data taken at the first edge after
    the CAS latency, ``read_delay`` 1), the pads' registers and the chip's model (clocked
    inverted, as the board clocks the chip; its rules at 25 MHz checked) beside the top's
    Verilog under cocotb, on tuples whose partitions' states go to the chip and come back.
    The records equal ``match --store sdram``'s, bad frames are counted, and no rule is
    broken; built with a read delay of 2 (the faster clocks' edge) the records are not the
    reference's, already on the 12 tuples of two cache lines' four runners. (Much of either
    simulation is the 16,384 words the store clears after reset, 0.66 ms at 25 MHz.)"""
    from nfacep import compile_file, wire
    from nfacep.boards.sdram import use_board_sdram
    from nfacep.hdl.engine import Engine
    from nfacep.hdl.sdram.timing import ULX3S_SDRAM
    from nfacep.hdl.uart.link import UartTop
    from nfacep.sim.sdram import board_with_chip

    query = _narrow_marathon(tmp_path / "marathon14.sql")
    nfa = compile_file(query)
    fmt = wire.record_format(nfa)
    evicting, lines = _evicting_csv(tmp_path / "evicting.csv"), _evicting_csv(tmp_path / "l.csv", 2)
    scenarios = {
        1: _scenario(tmp_path, SDRAM_PARAMS, evicting, n=90, query=query),
        2: _scenario(tmp_path, SDRAM_PARAMS, lines, n=12, query=query),
    }
    assert len(scenarios[1]["expected_matches"]) > 30
    assert len(scenarios[2]["expected_matches"]) == 4
    seen = {}
    for read_delay, scenario in scenarios.items():
        run_dir = tmp_path / f"delay{read_delay}"
        run_dir.mkdir()
        engine = Engine(nfa, SDRAM_PARAMS, sdram=ULX3S_SDRAM)
        window = use_board_sdram(engine, 25.0)
        assert window.read_delay == 1 and window.met
        if read_delay == 2:  # broken: the controller waits for the word a clock too long
            engine.use_sdram(engine.sdram_setup[0], 2)
        assert engine.sdram_setup[0].clk_freq == 25e6
        top = UartTop(
            engine, clk_hz=DIVISOR * 1e6, baud=1_000_000, leds=6, timeout=TIMEOUT, led_period=64
        )
        source = run_dir / "nfacep_uart_top.v"
        source.write_text(board_with_chip(top, "nfacep_uart_top", sim_cache / "sdram"))
        got = _bench(run_dir, source, {**scenario, "results": str(run_dir / "results.json")})
        seen[read_delay] = (*_matches_and_drops(fmt, got), got)
    scenario = scenarios[1]
    matches, drops, got = seen[1]
    assert matches == scenario["expected_matches"] and drops == scenario["expected_drops"]
    assert got["sdram_errors"] == 0
    status = got["status"]
    assert status["tuples"] == scenario["n"] and status["matched"] == len(matches)
    assert {k: status[k] for k in scenario["bad"]} == scenario["bad"]
    assert engine_from_fields(status) == SDRAM_PARAMS
    broken, _, got = seen[2]
    assert got["status"]["tuples"] == 12 and broken != scenarios[2]["expected_matches"]


def _matches_and_drops(fmt, got) -> tuple[list, list]:
    """The bench's records (``got["records"]``, hex) decoded: the matches as the reference
    matcher's rows for marathon's ``cheat`` query, and the tuples dropped."""
    matches, drops = [], []
    for payload in got["records"]:
        r = fmt.decode_bytes(bytes.fromhex(payload))
        if r.dropped:
            drops.append(r.seq)
        if r.matches:
            matches.append([r.seq, "cheat", str(r.partition)])
    return matches, drops


@pytest.mark.slow
def test_uart_board_top_icarus(tmp_path):
    """The UART board top's Verilog under cocotb: good frames' matches equal the reference
    matcher's, bad frames are counted by kind and never reach the engine."""
    source = tmp_path / "nfacep_uart_top.v"
    _verilog(source)
    scenario = _scenario(tmp_path)
    got = _bench(tmp_path, source, scenario)

    from nfacep import compile_file, wire

    nfa = compile_file(MARATHON)
    fmt = wire.record_format(nfa)
    matches, drops = _matches_and_drops(fmt, got)
    assert matches == scenario["expected_matches"] and matches
    assert drops == scenario["expected_drops"] and drops
    status = got["status"]
    assert status["tuples"] == scenario["n"] and status["flags"] & 1
    assert status["records"] == len(got["records"])
    assert status["matched"] == len(matches) and status["drops"] == len(drops)
    assert {k: status[k] for k in scenario["bad"]} == scenario["bad"]
    assert status["overflow"] == 0 and status["uart_errors"] == 0
    assert got["bad_frames_from_board"] == 0
    # the engine parameters it was built with, for `nfacep run` to learn
    assert engine_from_fields(status) == EngineParams(partitions=PARTITIONS)


def _bench(tmp_path, source, scenario) -> dict:
    """Run the cocotb bench on the top's Verilog ``source`` with ``scenario``; what it saw."""
    from cocotb_tools.runner import get_results, get_runner

    from nfacep import sim

    missing = sim.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    config = tmp_path / "scenario.json"
    config.write_text(json.dumps(scenario))
    build = tmp_path / "build"
    sim_runner = get_runner("icarus")
    # as Verilog-2005, like `nfacep sim`: see sim.ICARUS_BUILD_ARGS (registers the link loads
    # before use have no reset, and their always @* blocks must run at time 0)
    sim_runner.build(
        sources=[source],
        hdl_toplevel="nfacep_uart_top",
        build_dir=build,
        build_args=list(sim.ICARUS_BUILD_ARGS),
        timescale=sim.TIMESCALE,
        log_file=tmp_path / "build.log",
    )
    results_xml = tmp_path / "results.xml"
    with contextlib.suppress(SystemExit):  # the runner exits on a failed test
        sim_runner.test(
            test_module="bench_uart_link",
            hdl_toplevel="nfacep_uart_top",
            hdl_toplevel_lang="verilog",
            build_dir=build,
            test_dir=tmp_path,
            extra_env={
                CONFIG_ENV: str(config),
                "PYTHONPATH": os.pathsep.join(
                    [str(ROOT / "tests"), str(BENCHES), str(ROOT), os.environ.get("PYTHONPATH", "")]
                ),
            },
            timescale=sim.TIMESCALE,
            results_xml=str(results_xml),
            log_file=tmp_path / "sim.log",
            testcase="uart_link_bench",
        )
    total, failed = get_results(results_xml)
    log = (tmp_path / "sim.log").read_text(errors="replace")
    assert total == 1 and failed == 0, log[-3000:]
    return json.loads(pathlib.Path(scenario["results"]).read_text())


#: A query with runtime parameters of two types, no PARTITION: a 2-byte tuple, 2 bytes of
#: values.
LIMITS = """CREATE STREAM s (v UINT(8), hot BOOL, k UINT(4));
QUERY over FROM s
PATTERN ( A B )
DEFINE
  A AS (v > :lim)
  B AS (v <= :lim AND hot = :hot);
"""


def _params_scenario(tmp_path, nfa, built) -> dict:
    """TUPLES and PARAMS frames: a switch ahead of its tuples, one sent while it is pending
    (an ``overflow``: discarded), a corrupted one and one of a wrong length, one after its
    tuple has passed (it applies from the next tuple taken); STATUS between them."""
    import numpy as np

    from nfacep import wire
    from nfacep.io import tuples
    from nfacep.reference import matcher as reference
    from nfacep.settings import ParamValues

    types = nfa.program.parameters
    schema = nfa.program.schema
    rng = random.Random(21)
    n, per = 120, 6
    data = tuples.Tuples(
        {
            "v": np.array([rng.randrange(256) for _ in range(n)], dtype=np.uint64),
            "hot": np.array([rng.random() < 0.5 for _ in range(n)]),
            "k": np.zeros(n, dtype=np.uint64),
        },
        n,
        "bench",
    )
    tb = wire.tuple_bytes(schema)
    raw = wire.pack_bytes(schema, data)
    width = built.width()

    def switch(seq, frame, texts):
        vals = ParamValues.parse(types, texts)
        payload = protocol.params_payload(frame, seq, vals.packed(vals.initial), width)
        return encode(FrameType.PARAMS, payload), vals.initial

    steps = [{"send": encode(FrameType.RESET).hex(), "expect": "status"}]
    frame = 0

    def tuples_steps(first, end):
        nonlocal frame
        for start in range(first, end, per):
            body = bytes([frame % 256]) + raw[start * tb : min(start + per, end) * tb]
            steps.append(
                {
                    "send": encode(FrameType.TUPLES, body).hex(),
                    "expect": "ack",
                    "tuples": min(per, end - start),
                }
            )
            frame += 1

    def params_step(raw_frame, *, accepted=True):
        nonlocal frame
        steps.append({"send": raw_frame.hex(), "expect": "ack"})
        frame += accepted

    tuples_steps(0, 30)
    first, v40 = switch(40, frame, ["lim=200", "hot=false"])
    params_step(first)
    pending, _ = switch(50, frame, ["lim=1", "hot=true"])
    params_step(pending, accepted=False)  # a switch is pending: overflow, discarded
    broken = bytearray(pending)
    broken[-1] ^= 0x20
    steps.append({"send": bytes(broken).hex()})  # bad CRC
    steps.append({"send": encode(FrameType.PARAMS, pending[5:-3]).hex()})  # bad length
    tuples_steps(30, 60)
    steps.append({"wait_tuples": 41})  # STATUS: the switch at 40 is in force
    second, v60 = switch(60, frame, ["lim=30", "hot=true"])
    params_step(second)
    tuples_steps(60, 90)
    steps.append({"wait_tuples": 90})
    late, v90 = switch(10, frame, ["lim=0", "hot=false"])  # tuple 10 has passed: from 90 on
    params_step(late)
    tuples_steps(90, n)
    schedule = ParamValues(types, dict(built.initial), ((40, v40), (60, v60), (90, v90)))
    res = reference.run(nfa, data, EngineParams(partitions=PARTITIONS), values=schedule)
    return {
        "steps": steps,
        "n": n,
        "divisor": DIVISOR,
        "values_bytes": params_bytes(width),
        "expected_records": [[r.seq, r.matches, r.dropped] for r in res.records(nfa, data)],
        "packed": {
            k: built.packed(v) for k, v in (("built", built.initial), ("40", v40), ("90", v90))
        },
        "results": str(tmp_path / "bench-results.json"),
    }


@pytest.mark.slow
def test_uart_board_top_switches_parameters_icarus(tmp_path):
    """PARAMS frames on the UART top's Verilog under cocotb: the records equal the reference
    matcher's with the switches at the tuples they state; a switch while one is pending is
    counted (``overflow``) and discarded, a corrupted or short PARAMS frame too; STATUS
    reports the values in force."""
    from nfacep import compile_file, wire
    from nfacep.settings import ParamValues

    query = tmp_path / "limits.sql"
    query.write_text(LIMITS)
    nfa = compile_file(query)
    built = ParamValues.parse(nfa.program.parameters, ["lim=100", "hot=true"])
    source = tmp_path / "nfacep_uart_top.v"
    _verilog(source, nfa, built)
    scenario = _params_scenario(tmp_path, nfa, built)
    got = _bench(tmp_path, source, scenario)
    fmt = wire.record_format(nfa)
    records = [
        [r.seq, r.matches, r.dropped]
        for r in (fmt.decode_bytes(bytes.fromhex(p)) for p in got["records"])
    ]
    assert records == scenario["expected_records"] and records
    packed = scenario["packed"]
    after_reset, at_41, at_90 = got["statuses"]
    assert after_reset["values"] == packed["built"]
    assert at_41["tuples"] >= 41 and at_41["values"] == packed["40"]
    assert at_90["tuples"] == 90
    status = got["status"]
    assert status["tuples"] == scenario["n"] and status["flags"] & 1
    assert status["values"] == packed["90"]
    assert {
        k: status[k]
        for k in (
            "overflow",
            "bad_crc",
            "bad_length",
            "bad_type",
            "out_of_seq",
            "truncated",
            "uart_errors",
        )
    } == {
        "overflow": 1,
        "bad_crc": 1,
        "bad_length": 1,
        "bad_type": 0,
        "out_of_seq": 0,
        "truncated": 0,
        "uart_errors": 0,
    }
    assert status["frames"] == 20 + 3  # TUPLES and PARAMS frames accepted
    assert got["bad_frames_from_board"] == 0


# --------------------------------------------------------------------------- boards


@pytest.mark.parametrize("name", ["ulx3s-85f", "icebreaker", "icestick"])
def test_uart_board_top_elaborates(name):
    from nfacep import compile_file
    from nfacep.boards import get_board, resources
    from nfacep.hdl.engine import Engine
    from nfacep.links.uart.top import UartBoardTop

    board = get_board(name)
    platform = board.platform_class()()
    top = UartBoardTop(
        Engine(compile_file(MARATHON), EngineParams(partitions=2)),
        clk_hz=platform.default_clk_frequency,
        baud=115200,
    )
    plan = platform.build(top, name="t", do_build=False)
    rtlil = plan.files["t.il"]
    assert "uart_0__rx__io" in rtlil and "uart_0__tx__io" in rtlil and "led_0__io" in rtlil
    ffs = resources.count_flipflops(rtlil)
    assert ffs > 0
    again = UartBoardTop(
        Engine(compile_file(MARATHON), EngineParams(partitions=2)),
        clk_hz=platform.default_clk_frequency,
        baud=115200,
    )
    assert resources.count_prepared_flipflops(again, board.platform_class()()) == ffs


#: A small query for the iCEstick: no PARTITION, a 2-byte tuple, an 8-byte record.
DOORS = """CREATE STREAM doors (sensor UINT(8), ev ENUM('OPEN', 'CLOSE', 'PING'));
QUERY openclose FROM doors
PATTERN ( O C )
DEFINE
  O AS (ev = 'OPEN')
  C AS (ev = 'CLOSE');
"""


@pytest.mark.slow
def test_uart_board_top_fits_the_icestick(tmp_path):
    """A small query with the UART link fits the iCE40 HX1K and meets timing at 12 MHz."""
    from nfacep import boards, compile_file

    query = tmp_path / "doors.sql"
    query.write_text(DOORS)
    out = tmp_path / "icestick"
    report = boards.build(
        compile_file(query),
        boards.get_board("icestick"),
        str(out),
        EngineParams(partitions=1),
        link="uart",
        query_file=str(query),
    )
    assert report["status"] == "ok" and report["timing_met"] is True
    assert report["link"]["kind"] == "uart" and report["link"]["divisor"] == 104
    assert report["resources_from"] == "nextpnr" and report["board_clock_mhz"] == 12
    cells = report["resources"]["luts"]
    assert cells["total"] == 1280 and cells["used"] < 0.9 * cells["total"]
    assert report["resources"]["brams"]["used"] == 3
    ((clock, fmax),) = report["fmax_mhz"].items()
    assert fmax >= report["constraint_mhz"][clock] >= 12
    assert (out / "engine.bin").stat().st_size > 30_000


def test_build_refuses_uart_without_usb_uart_or_baud(tmp_path, monkeypatch, capsys):
    from test_boards import run

    from nfacep import boards

    monkeypatch.setattr(
        boards.toolchain, "find_tools", lambda names: {n: f"/nonexistent/{n}" for n in names}
    )
    out = tmp_path / "o"
    assert (
        run(
            [
                "build",
                str(MARATHON),
                "--board",
                "colorlight-5a75b",
                "--link",
                "uart",
                "-o",
                str(out),
            ]
        )
        == 2
    )
    assert "Colorlight 5A-75B has no USB UART" in capsys.readouterr().err
    assert (
        run(
            [
                "build",
                str(MARATHON),
                "--board",
                "ulx3s-85f",
                "--link",
                "uart",
                "--baud",
                "3000000",
                "-o",
                str(out),
            ]
        )
        == 2
    )
    assert "cannot make 3000000 baud" in capsys.readouterr().err
    assert not out.exists()


#: A 22-bit key (direct up to 2^22 entries) and a 32-bit one (hashed: the key is the tag, an
#: entry 1 + 32 + 1 bits, three 16-bit words of the ULX3S's chip, two of the 5A-75B's)
WIDE_KEYS = """CREATE STREAM flows (src UINT(22), ip UINT(32), v UINT(8));
QUERY ab FROM flows PARTITION {key} PATTERN ( A B ) DEFINE A AS (v = 1) B AS (v = 2);
"""


@pytest.mark.slow
def test_check_board_states_the_ulx3s_sdram_fit(tmp_path, capsys):
    """``check --board ulx3s-85f --link uart --store sdram``: the fit in the ULX3S's 32M
    words of 16 bits (its registry's chip), in text and JSON; more than 2^20 entries fit
    where the 5A-75B's 1M words of 32 bits refuse them (exit 2, naming the words); what the
    ULX3S's chip cannot hold is refused too, and a board top that does not drive the chip."""
    from nfacep.cli import main

    direct, hashed = tmp_path / "direct.sql", tmp_path / "hashed.sql"
    direct.write_text(WIDE_KEYS.format(key="src"))
    hashed.write_text(WIDE_KEYS.format(key="ip"))
    ulx3s = ["--board", "ulx3s-85f", "--link", "uart", "--store", "sdram"]
    assert main(["check", str(direct), *ulx3s, "--partitions", str(1 << 22)]) == 0
    out = capsys.readouterr().out
    assert "indexed directly by the 22-bit key" in out
    assert (
        "SDRAM words   4,194,304 33,554,432   12.5%  4,194,304 entries of 1 word of 16 bits" in out
    )
    assert "(AS4C32M16SB)" in out and "at edge CL + 1" in out
    argv = ["check", str(hashed), *ulx3s, "--partitions", str(1 << 23), "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)["board"]
    assert report["resources"]["sdram"] == {
        "estimate": 1 << 25,  # 2^21 buckets of 4 entries of 3 words, in 16 columns
        "total": 1 << 25,
        "from": "8,388,608 entries of 3 words of 16 bits, in lines of 12 words",
    }
    assert "AS4C32M16SB" in report["link_note"]
    assert main(["check", str(hashed), *ulx3s, "--partitions", str(1 << 24)]) == 2
    assert "need 67108864 words of SDRAM, more than its 33554432" in capsys.readouterr().err
    colorlight = ["--board", "colorlight-5a75b", "--link", "udp", "--store", "sdram"]
    assert main(["check", str(direct), *colorlight, "--partitions", str(1 << 21)]) == 2
    assert "need 2097152 words of SDRAM, more than its 1048576" in capsys.readouterr().err
    argv = ["check", str(direct), "--board", "ulx3s-85f", "--store", "sdram"]
    assert main(argv) == 2
    assert "the harness board top does not drive the SDRAM chip" in capsys.readouterr().err
