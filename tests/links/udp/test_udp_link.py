"""The UDP link's receive path (hdl/eth): the payload format, the MAC, the layers and the
buffer in the Amaranth simulator, and the whole receive side (GMII to tuples, the clock-domain
crossing, the frame-class counters) as Verilog under cocotb with cocotbext-eth's GmiiSource at
1 Gb/s and the minimum inter-frame gap.

One scenario serves both: good TUPLES packets, and before each of them one bad frame of a
class; the tuples that arrive must be exactly those of the good packets, and every frame must
count in exactly its class. The cocotb benches that run in the simulator are
tests/benches/bench_udp_link.py's; this module makes their scenarios and checks what they saw.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pathlib
import random
import zlib

import pytest
from amaranth.lib import data
from amaranth.lib.crc import catalog
from amaranth.sim import Simulator
from bench_udp_link import CONFIG_ENV, PREAMBLE, _status

from nfacep.hdl.eth.payload import FrameClass
from nfacep.hdl.eth.rx import EthRx
from nfacep.links.udp import protocol as udp
from nfacep.links.udp.protocol import Endpoint, PacketType

ROOT = pathlib.Path(__file__).resolve().parents[3]
#: The cocotb benches, loaded by module name in the simulator.
BENCHES = ROOT / "tests" / "benches"

BOARD = Endpoint.parse("02:00:5e:00:00:02", "10.0.0.2", 5000)
HOST = Endpoint.parse("02:00:5e:00:00:01", "10.0.0.1", 40001)
ENGINE_ID = 0x1234ABCD
#: The session HOST opens with its RESET (the scenarios' first frame).
SESSION = 0x5E5510A1
#: A third station on the LAN: it knows the engine id and, in some frames, the session id.
THIRD = Endpoint.parse("02:00:5e:00:00:07", "10.0.0.7", 40001)
TUPLE_WIDTH = 20  # 3 bytes on the wire
TB = 3


# --------------------------------------------------------------------------- the format


def test_fcs_is_lib_crc_and_checksum_and_header_round_trip():
    lib = catalog.CRC32_ETHERNET(8)
    rng = random.Random(3)
    for n in (0, 1, 9, 60, 1514):
        frame = rng.randbytes(n)
        assert udp.ethernet_fcs(frame) == lib.compute(frame).to_bytes(4, "little")
        # the residue: the CRC over a frame and its FCS is a constant
        assert zlib.crc32(frame + udp.ethernet_fcs(frame)) == 0x2144DF1C
    frame = udp.udp_frame(HOST, BOARD, _packet(PacketType.TUPLES, b"a", seq=7, engine_id=ENGINE_ID))
    assert len(frame) == 60 and udp.ip_checksum(frame[14:34]) == 0
    parsed = udp.parse_frame(frame)
    assert parsed["src"] == Endpoint(HOST.mac, HOST.ip, HOST.port) and parsed["dst"].port == 5000
    assert udp.decode_header(parsed["payload"]) == {
        "version": udp.VERSION,
        "type": 1,
        "reserved": 0,
        "seq": 7,
        "engine_id": ENGINE_ID,
        "session": SESSION,
    }
    assert parsed["payload"][udp.HEADER_BYTES :] == b"a"  # (the padding is not the payload's)
    with pytest.raises(ValueError, match="checksum"):
        udp.parse_frame(udp.udp_frame(HOST, BOARD, b"x" * 12, checksum_delta=1))


# --------------------------------------------------------------------------- the scenario


def _packet(ptype, body=b"", *, seq=0, engine_id=0, session=SESSION) -> bytes:
    """A payload of HOST's session (or of ``session``)."""
    return udp.packet(ptype, body, seq=seq, engine_id=engine_id, session=session)


def _wire(frame: bytes) -> bytes:
    """Preamble, SFD, the frame and its FCS: what a GMII source sends."""
    return PREAMBLE + frame + udp.ethernet_fcs(frame)


def _tuples_packet(seq, tuples, *, engine_id=ENGINE_ID, session=SESSION, **frame_args):
    body = b"".join(t.to_bytes(TB, "little") for t in tuples)
    payload = _packet(PacketType.TUPLES, body, seq=seq, engine_id=engine_id, session=session)
    return udp.udp_frame(HOST, BOARD, payload, **frame_args)


def scenario(seed: int = 1) -> list[dict]:
    """Steps: ``wire`` (bytes on GMII), optional ``error`` (byte index of rx_er), the class it
    must count in, the tuples it delivers, ``stall`` (the engine takes nothing from then until
    a step with ``resume``)."""
    rng = random.Random(seed)
    seq = 0
    steps = []

    def good(n=None):
        nonlocal seq
        tuples = [rng.getrandbits(TUPLE_WIDTH) for _ in range(n or rng.randrange(1, 30))]
        steps.append(
            {
                "wire": _wire(_tuples_packet(seq, tuples)),
                "cls": "accepted",
                "tuples": tuples,
                "seq": seq,
            }
        )
        seq += 1

    def bad(cls, frame=None, *, wire=None, **extra):
        steps.append(
            {"wire": wire if wire is not None else _wire(frame), "cls": cls, "tuples": [], **extra}
        )

    other = Endpoint(bytes.fromhex("020000000099"), bytes([10, 0, 0, 9]), 5000)
    some = [1, 2, 3]
    # RESET opens HOST's session (and zeroes the counters: its own frame's count too)
    reset = udp.udp_frame(HOST, BOARD, _packet(PacketType.RESET))
    steps.append({"wire": _wire(reset), "cls": "accepted", "tuples": [], "reset": True})
    good()
    flipped = bytearray(_wire(_tuples_packet(seq, some)))
    flipped[-1] ^= 0x80
    bad_fcs = [
        bytes(flipped),
        PREAMBLE[:-1] + b"\x33" + _tuples_packet(seq, some)[:40],  # no start delimiter
    ]
    for wire in bad_fcs:
        bad("bad_fcs", wire=wire)
        good()
    steps.append(
        {"wire": _wire(_tuples_packet(seq, some)), "error": 30, "cls": "bad_fcs", "tuples": []}
    )  # rx_er inside the frame
    good()
    runt = _tuples_packet(seq, some, pad=False)[:50]
    bad("bad_size", runt)
    good()
    bad("bad_size", _tuples_packet(seq, list(range(500))))  # 1554 bytes with the FCS
    good()
    not_for_us = [
        _tuples_packet(seq, some, dst_mac=other.mac),
        udp.udp_frame(
            HOST,
            other,
            _packet(PacketType.TUPLES, bytes(3), seq=seq, engine_id=ENGINE_ID),
            dst_mac=BOARD.mac,
        ),
        udp.udp_frame(
            HOST,
            Endpoint(BOARD.mac, BOARD.ip, 5001),
            _packet(PacketType.TUPLES, bytes(3), seq=seq, engine_id=ENGINE_ID),
        ),
        _tuples_packet(seq, some, protocol=6),
        BOARD.mac + HOST.mac + b"\x86\xdd" + bytes(60),  # IPv6
        udp.arp_request(HOST, other.ip),
    ]
    for frame in not_for_us:
        bad("not_for_us", frame)
        good()
    # broadcast is for us
    steps.append(
        {
            "wire": _wire(_tuples_packet(seq, some, dst_mac=udp.BROADCAST)),
            "cls": "accepted",
            "tuples": some,
            "seq": seq,
        }
    )
    seq += 1
    good()
    bad("ip_unsupported", _tuples_packet(seq, some, options=b"\x01\x01\x01\x00"))
    good()
    bad("bad_ip_checksum", _tuples_packet(seq, some, checksum_delta=0x100))
    good()
    bad("ip_fragment", _tuples_packet(seq, some, flags_fragment=0x2000))
    good()
    bad("ip_fragment", _tuples_packet(seq, some, flags_fragment=0x0010))
    good()
    body = _packet(PacketType.TUPLES, bytes(6), seq=seq, engine_id=ENGINE_ID)
    bad_udp = [
        udp.udp_frame(HOST, BOARD, body, udp_length=8 + len(body) - 3),
        udp.udp_frame(
            HOST, BOARD, body, ip_length=20 + 8 + len(body) + 3, udp_length=8 + len(body) + 3
        ),  # longer than the frame
        udp.udp_frame(HOST, BOARD, body[: udp.HEADER_BYTES + 4]),  # a partial tuple
        udp.udp_frame(HOST, BOARD, body[: udp.HEADER_BYTES]),  # no tuple
        udp.udp_frame(HOST, BOARD, _packet(PacketType.STATUS_REQ, b"\x00")),
        udp.udp_frame(HOST, BOARD, body[: udp.HEADER_BYTES - 1]),
    ]
    for frame in bad_udp:
        bad("bad_udp", frame)
        good()
    bad_header = [
        udp.udp_frame(HOST, BOARD, bytes([udp.VERSION + 1]) + body[1:]),
        udp.udp_frame(HOST, BOARD, _packet(0x09, bytes(3), seq=seq, engine_id=ENGINE_ID)),
        # PARAMS to an engine without runtime parameters
        udp.udp_frame(
            HOST, BOARD, _packet(PacketType.PARAMS, bytes(8), seq=seq, engine_id=ENGINE_ID)
        ),
        _tuples_packet(seq, some, engine_id=ENGINE_ID ^ 0x100),
    ]
    for frame in bad_header:
        bad("bad_header", frame)
        good()
    # not HOST's session: a third station (with the session id too), HOST with another id or
    # from another port; RESET and STATUS_REQ as well; nothing answered, nothing taken
    tuples_body = b"".join(t.to_bytes(TB, "little") for t in some)
    foreign = [
        udp.udp_frame(
            THIRD, BOARD, _packet(PacketType.TUPLES, tuples_body, seq=seq, engine_id=ENGINE_ID)
        ),
        _tuples_packet(seq, some, session=SESSION ^ 1),
        udp.udp_frame(
            Endpoint(HOST.mac, HOST.ip, HOST.port + 1),
            BOARD,
            _packet(PacketType.TUPLES, tuples_body, seq=seq, engine_id=ENGINE_ID),
        ),
        udp.udp_frame(THIRD, BOARD, _packet(PacketType.STATUS_REQ)),
        udp.udp_frame(THIRD, BOARD, _packet(PacketType.RESET, session=7)),
        udp.udp_frame(HOST, BOARD, _packet(PacketType.RESET, session=7)),
        udp.udp_frame(THIRD, BOARD, _packet(PacketType.CLOSE)),
    ]
    for frame in foreign:
        bad("foreign", frame)
        good()
    # accepted requests
    steps.append({"wire": _wire(udp.arp_request(HOST, BOARD.ip)), "cls": "accepted", "tuples": []})
    steps.append(
        {
            "wire": _wire(udp.udp_frame(HOST, BOARD, _packet(PacketType.STATUS_REQ))),
            "cls": "accepted",
            "tuples": [],
        }
    )
    good()
    # upstream loss: two packets missing, then one of them late
    seq += 2
    good()
    seq -= 2
    good()  # late
    seq += 1
    good()
    # the engine stops taking tuples: five frames take 1,800 bytes of the buffer (CAPACITY),
    # the next one's 450 do not fit; a small one still does; then the engine takes them all
    steps[-1]["stall"] = True
    for _ in range(5):
        good(120)
    steps.append(
        {"wire": _wire(_tuples_packet(seq, list(range(150)))), "cls": "engine_full", "tuples": []}
    )
    good(3)
    good()
    steps[-1]["resume"] = True
    # line rate: full frames back to back
    for _ in range(4):
        good((udp.MAX_PAYLOAD - udp.HEADER_BYTES) // TB)
    return steps


#: A record layout for the receive path's tests (they send no records).
RECORD = data.StructLayout({"seq": 48, "partition": 1, "matches": 1, "dropped": 1})
#: Bytes of the board's buffer in these tests (the 5 stalled frames of 120 tuples fit).
CAPACITY = 2048


def expected(steps) -> tuple[list[int], dict[str, int], dict]:
    """The tuples, the class counts, and ``lost`` and ``late`` as the board counts them."""
    counts = dict.fromkeys(udp.FRAME_CLASSES, 0)
    tuples = []
    next_seq = lost = late = 0
    for step in steps:
        if step.get("reset"):  # (RESET zeroes the counts, its own included)
            counts = dict.fromkeys(udp.FRAME_CLASSES, 0)
            next_seq = lost = late = 0
            continue
        counts[step["cls"]] += 1
        tuples += step["tuples"]
        if "seq" in step:
            gap = (step["seq"] - next_seq) % 2**32
            if gap >= 2**31:
                late += 1
            else:
                lost += gap
                next_seq = step["seq"] + 1
    assert (lost, late) == (2, 1)  # (what the scenario means to send)
    return tuples, counts, {"lost": lost, "late": late}


# --------------------------------------------------------------------------- Amaranth sim


def test_eth_rx_classifies_every_frame():
    """EthRx in the Amaranth simulator, a byte per cycle with the minimum gap: each frame's
    event has its class, and the tuples are the accepted packets'."""
    steps = scenario()
    events, got = eth_rx_run(steps)
    assert [(i, e) for i, e in enumerate(events)] == [(i, s["cls"]) for i, s in enumerate(steps)]
    assert got == expected(steps)[0]


def eth_rx_run(steps, tuple_width=TUPLE_WIDTH):
    """``steps`` (as :func:`scenario`'s) through EthRx of ``tuple_width``-bit tuples in the
    Amaranth simulator: each frame's class (its event's), and the tuples out."""
    dut = EthRx(
        tuple_width=tuple_width,
        capacity=CAPACITY,
        mac=BOARD.mac,
        ip=BOARD.ip,
        port=BOARD.port,
        engine_id=ENGINE_ID,
    )
    events, got = [], []
    stalled = {"on": False}

    async def drive(ctx):
        await ctx.tick().repeat(3)
        for step in steps:
            if step.get("stall"):
                stalled["on"] = True
            if step.get("resume"):
                stalled["on"] = False
            error = step["error"] + len(PREAMBLE) if "error" in step else -1
            for i, b in enumerate(step["wire"]):
                ctx.set(dut.rx_dv, 1)
                ctx.set(dut.rxd, b)
                ctx.set(dut.rx_er, int(i == error))
                await ctx.tick()
            ctx.set(dut.rx_dv, 0)
            ctx.set(dut.rx_er, 0)
            await ctx.tick().repeat(12)
            if step.get("stall"):
                stalled["on"] = True
        await ctx.tick().repeat(3000)

    async def take(ctx):
        async for _, _, valid, ready, payload, ev_valid, ev in ctx.tick().sample(
            dut.o_stream.valid,
            dut.o_stream.ready,
            dut.o_stream.payload,
            dut.event.valid,
            dut.event.payload,
        ):
            ctx.set(dut.o_stream.ready, 0 if stalled["on"] else 1)
            if valid and ready:
                got.append(payload)
            if ev_valid:
                events.append(FrameClass(ev.cls).name.lower())

    sim = Simulator(dut)
    sim.add_clock(8e-9)
    sim.add_testbench(drive)
    sim.add_testbench(take, background=True)
    sim.run()
    return events, got


def test_eth_rx_takes_no_data_after_the_udp_length():
    """With one-byte tuples, a TUPLES packet of one tuple is a frame padded to the minimum
    size: its padding byte comes after the UDP length and is not a tuple; a packet whose UDP
    length is shorter than its IP payload is a ``bad_udp`` and none of its tuples is taken."""
    check_udp_length_ends_the_data()


def test_eth_rx_data_past_the_udp_length_is_caught(monkeypatch):
    """A receive path that keeps taking data after the UDP length (``PayloadRx``'s
    ``data_more`` never cleared) takes the padding byte as a tuple, and fails the check."""
    from nfacep.hdl.eth import payload_rx

    monkeypatch.setattr(payload_rx, "BREAK_DATA", "data_more")
    with pytest.raises(AssertionError):
        check_udp_length_ends_the_data()


def test_eth_rx_a_stale_packet_type_is_caught(monkeypatch):
    """The packet's type gates the data's writes through registers of its own; taken too late
    (at the frame's first byte, ``BREAK_DATA = "stale type"``, so that they hold the frame
    before's: a RESET's) the TUPLES packet after the RESET writes no tuple, and the check of
    :func:`test_eth_rx_takes_no_data_after_the_udp_length` fails."""
    from nfacep.hdl.eth import payload_rx

    monkeypatch.setattr(payload_rx, "BREAK_DATA", "stale type")
    with pytest.raises(AssertionError):
        check_udp_length_ends_the_data()


def check_udp_length_ends_the_data():
    """:func:`test_eth_rx_takes_no_data_after_the_udp_length`'s frames through EthRx."""

    def tuples(seq, body, **frame_args):
        payload = _packet(PacketType.TUPLES, body, seq=seq, engine_id=ENGINE_ID)
        return _wire(udp.udp_frame(HOST, BOARD, payload, **frame_args))

    reset = udp.udp_frame(HOST, BOARD, _packet(PacketType.RESET))
    one = tuples(0, b"\x5a")
    assert len(one) == len(PREAMBLE) + 60 + 4  # (59 bytes of headers and tuple, one of padding)
    body = bytes([1, 2, 3, 4])
    steps = [
        {"wire": _wire(reset), "cls": "accepted"},
        {"wire": one, "cls": "accepted"},
        {"wire": tuples(1, bytes(2), udp_length=8 + udp.HEADER_BYTES), "cls": "bad_udp"},
        {"wire": tuples(1, body, udp_length=8 + udp.HEADER_BYTES + 2), "cls": "bad_udp"},
        {"wire": tuples(1, body), "cls": "accepted"},
    ]
    events, got = eth_rx_run(steps, tuple_width=8)
    assert events == [s["cls"] for s in steps]
    assert got == [0x5A, *body]


# --------------------------------------------------------------------------- cocotb


def _link_verilog(path: pathlib.Path) -> None:
    from amaranth.back import verilog

    from nfacep.hdl.eth.link import UdpLink

    link = UdpLink(
        data.StructLayout({"t": TUPLE_WIDTH}),
        RECORD,
        mac=BOARD.mac,
        ip=BOARD.ip,
        port=BOARD.port,
        engine_id=ENGINE_ID,
        capacity=CAPACITY,
    )
    path.write_text(verilog.convert(link, name="nfacep_udp_rx", emit_src=False))


def _run_cocotb(
    tmp_path,
    top: str,
    source: pathlib.Path | list[pathlib.Path],
    testcase: str,
    config: dict,
    *,
    module: str = "bench_udp_link",
    config_env: str = CONFIG_ENV,
):
    """Build ``source`` (a file or several) with Icarus and run the cocotb test ``testcase``
    of the test module ``module`` on ``top``, its configuration in ``config_env``; the
    results it wrote."""
    from cocotb_tools.runner import get_results, get_runner

    from nfacep import sim

    missing = sim.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    try:
        import cocotbext.eth  # noqa: F401
    except ImportError:
        pytest.fail("cocotbext-eth is missing (pip install -e .[test] installs it)")
    config_path = tmp_path / "scenario.json"
    config["results"] = str(tmp_path / "bench-results.json")
    config_path.write_text(json.dumps(config))
    build = tmp_path / "build"
    runner = get_runner("icarus")
    sources = source if isinstance(source, list) else [source]
    runner.build(
        sources=sources,
        hdl_toplevel=top,
        build_dir=build,
        build_args=list(sim.ICARUS_BUILD_ARGS),
        timescale=sim.TIMESCALE,
        log_file=tmp_path / "build.log",
    )
    results_xml = tmp_path / "results.xml"
    with contextlib.suppress(SystemExit):  # the runner exits on a failed test
        runner.test(
            test_module=module,
            hdl_toplevel=top,
            hdl_toplevel_lang="verilog",
            build_dir=build,
            test_dir=tmp_path,
            extra_env={
                config_env: str(config_path),
                "PYTHONPATH": os.pathsep.join(
                    [str(ROOT / "tests"), str(BENCHES), str(ROOT), os.environ.get("PYTHONPATH", "")]
                ),
            },
            timescale=sim.TIMESCALE,
            results_xml=str(results_xml),
            log_file=tmp_path / "sim.log",
            testcase=testcase,
        )
    total, failed = get_results(results_xml)
    log = (tmp_path / "sim.log").read_text(errors="replace")
    assert total == 1 and failed == 0, log[-3000:]
    return json.loads(pathlib.Path(config["results"]).read_text())


@pytest.mark.slow
def test_udp_receive_path_icarus(tmp_path):
    """The receive side of the link as Verilog, GMII driven by cocotbext-eth at 1 Gb/s with
    the minimum inter-frame gap, the receive clock (125 MHz) and the engine's (143 MHz)
    apart: the tuples are the good packets', each frame counts in exactly its class, upstream
    loss is counted, and full frames back to back lose nothing."""
    source = tmp_path / "nfacep_udp_rx.v"
    _link_verilog(source)
    steps = scenario()
    config = {"steps": [{**s, "wire": s["wire"].hex()} for s in steps]}
    got = _run_cocotb(tmp_path, "nfacep_udp_rx", source, "udp_rx_bench", config)
    tuples, counts, seq = expected(steps)
    assert got["tuples"] == tuples
    assert {k: got["counters"][k] for k in udp.FRAME_CLASSES} == counts
    assert {k: got["counters"][k] for k in seq} == seq
    assert got["counters"]["tuples"] == len(tuples)
    # the LED's pulses: one per accepted frame; one per refused frame, per jump of the
    # sequence and per late packet
    refused = sum(n for k, n in counts.items() if k != "accepted")
    assert got["pulses"] == {"activity": counts["accepted"] + 1, "trouble": refused + 1 + 1}
    # the last four frames are full ones, back to back: line rate in, nothing lost
    assert got["line_rate_frames_per_s"] > 80_000


# --------------------------------------------------------------------------- the whole link

MARATHON = ROOT / "queries" / "marathon.sql"
PARTITIONS = 8
FLUSH = 200  # cycles a record waits for company before its RECORDS packet goes


def _top_verilog(path: pathlib.Path) -> int:
    from amaranth.back import verilog

    from nfacep import compile_file
    from nfacep.hdl.engine import Engine
    from nfacep.hdl.eth.top import UdpTop
    from nfacep.params import EngineParams

    engine = Engine(compile_file(MARATHON), EngineParams(partitions=PARTITIONS))
    top = UdpTop(engine, mac=BOARD.mac, ip=BOARD.ip, port=BOARD.port, flush=FLUSH)
    path.write_text(verilog.convert(top, name="nfacep_udp_top", emit_src=False))
    return top.engine_id


def _top_scenario(engine_id: int) -> dict:
    from nfacep import compile_file, wire
    from nfacep.io import reader, tuples
    from nfacep.params import EngineParams
    from nfacep.reference import matcher as reference

    nfa = compile_file(MARATHON)
    schema = nfa.program.schema
    rows = reader.read(str(ROOT / "queries" / "marathon.csv"), schema)
    n, per = 240, 40
    tb = wire.tuple_bytes(schema)
    raw = wire.pack_bytes(schema, rows)[: n * tb]
    frames, bad = [], {"bad_fcs": 0, "not_for_us": 0}
    for k, start in enumerate(range(0, n, per)):
        body = raw[start * tb : (start + per) * tb]
        frame = udp.udp_frame(
            HOST, BOARD, _packet(PacketType.TUPLES, body, seq=k, engine_id=engine_id)
        )
        if k % 2:
            broken = bytearray(_wire(frame))
            broken[40] ^= 1
            frames.append(bytes(broken).hex())
            bad["bad_fcs"] += 1
        if k % 3 == 1:
            frames.append(_wire(udp.udp_frame(HOST, BOARD, frame[42:], dst_mac=bytes(6))).hex())
            bad["not_for_us"] += 1
        frames.append(_wire(frame).hex())
    good = tuples.Tuples({c: v[:n] for c, v in rows.columns.items()}, n, "good packets")
    res = reference.run(nfa, good, EngineParams(partitions=PARTITIONS))
    return {
        "frames": frames,
        "n": n,
        "packets": len(range(0, n, per)),
        "bad": bad,
        "reset": _wire(udp.udp_frame(HOST, BOARD, _packet(PacketType.RESET))).hex(),
        "status_req": _wire(udp.udp_frame(HOST, BOARD, _packet(PacketType.STATUS_REQ))).hex(),
        "arp": _wire(udp.arp_request(HOST, BOARD.ip)).hex(),
        "expected_matches": [list(m) for m in res.matches],
        "expected_drops": res.drops.tolist(),
    }


@pytest.mark.slow
def test_udp_board_top_icarus(tmp_path):
    """The UDP board top with the marathon engine as Verilog under cocotb, GMII both ways
    (cocotbext-eth's GmiiSource and GmiiSink): RESET and STATUS_REQ are answered with STATUS,
    an ARP request with the reply, the records of the good packets' tuples come back in
    RECORDS packets (well-formed: FCS, IPv4 checksum, lengths) and equal the reference
    matcher's, and STATUS counts them, the packets and the bad frames."""
    from nfacep import compile_file, wire

    source = tmp_path / "nfacep_udp_top.v"
    engine_id = _top_verilog(source)
    scenario = _top_scenario(engine_id)
    got = _run_cocotb(tmp_path, "nfacep_udp_top", source, "udp_top_bench", dict(scenario))
    assert got["bad_fcs_from_board"] == 0 and not got["tx_er"]
    frames = [udp.parse_frame(bytes.fromhex(f)) for f in got["frames"]]
    arp = [f for f in frames if f["kind"] == "arp"]
    assert len(arp) == 1 and arp[0]["oper"] == 2 and arp[0]["dst_mac"] == HOST.mac
    assert arp[0]["sender"] == Endpoint(BOARD.mac, BOARD.ip, 0)
    assert arp[0]["target"] == Endpoint(HOST.mac, HOST.ip, 0)
    packets = [f for f in frames if f["kind"] == "udp"]
    for f in packets:
        assert f["src"] == BOARD and f["dst"] == HOST
    headers = [udp.decode_header(f["payload"]) for f in packets]
    assert all(h["engine_id"] == engine_id and h["version"] == udp.VERSION for h in headers)
    assert [h["seq"] for h in headers] == list(range(len(headers)))  # from RESET's STATUS
    statuses = [
        _status(f["payload"])
        for f, h in zip(packets, headers, strict=True)
        if h["type"] == PacketType.STATUS
    ]
    first, last = statuses[0], statuses[-1]
    assert first["tuples"] == 0 and first["accepted"] == 0 and first["records"] == 0
    assert (first["tuple_bytes"], first["record_bytes"]) == (11, 9)

    nfa = compile_file(MARATHON)
    fmt = wire.record_format(nfa)
    matches, drops, records = [], [], 0
    record_packets = [
        f["payload"][udp.HEADER_BYTES :]
        for f, h in zip(packets, headers, strict=True)
        if h["type"] == PacketType.RECORDS
    ]
    for body in record_packets:
        assert body and len(body) % fmt.nbytes == 0
        for at in range(0, len(body), fmt.nbytes):
            r = fmt.decode_bytes(body[at : at + fmt.nbytes])
            records += 1
            if r.dropped:
                drops.append(r.seq)
            if r.matches:
                matches.append([r.seq, "cheat", str(r.partition)])
    assert matches == scenario["expected_matches"] and matches
    assert drops == scenario["expected_drops"] and drops
    assert last["tuples"] == scenario["n"] and last["flags"] & 1
    assert (last["records"], last["packets"]) == (records, len(record_packets))
    assert (last["matched"], last["drops"]) == (len(matches), len(drops))
    # since RESET: the ARP request, the good packets and the STATUS_REQs were accepted
    assert last["accepted"] == 1 + scenario["packets"] + got["status_requests"]
    assert {k: last[k] for k in scenario["bad"]} == scenario["bad"]
    assert last["next_seq"] == scenario["packets"] and last["lost"] == 0


#: A query with runtime parameters of two types, no PARTITION (as
#: tests/links/uart/test_uart_link.py's).
LIMITS = """CREATE STREAM s (v UINT(8), hot BOOL, k UINT(4));
QUERY over FROM s
PATTERN ( A B )
DEFINE
  A AS (v > :lim)
  B AS (v <= :lim AND hot = :hot);
"""


def _params_scenario(nfa, built, engine_id: int) -> dict:
    """TUPLES and PARAMS packets: a switch ahead of its tuples, one while it is pending
    (``engine_full``: dropped, ``next_seq`` stays), one with a bad FCS, one of a wrong length
    (``bad_udp``), one after its tuple passed (from the next tuple taken); STATUS between."""
    import numpy as np

    from nfacep import wire
    from nfacep.io import tuples
    from nfacep.links.protocol import params_bytes, switch_body
    from nfacep.params import EngineParams
    from nfacep.reference import matcher as reference
    from nfacep.settings import ParamValues

    types, schema = nfa.program.parameters, nfa.program.schema
    rng = random.Random(22)
    n = 120
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
    steps, seq = [], 0

    def frame(ptype, body, at):
        return _wire(udp.udp_frame(HOST, BOARD, _packet(ptype, body, seq=at, engine_id=engine_id)))

    def send_tuples(first, end):
        nonlocal seq
        steps.append({"send": frame(PacketType.TUPLES, raw[first * tb : end * tb], seq).hex()})
        seq += 1

    def switch(at, texts, *, taken=True):
        nonlocal seq
        vals = ParamValues.parse(types, texts)
        body = switch_body(at, vals.packed(vals.initial), built.width())
        steps.append({"send": frame(PacketType.PARAMS, body, seq).hex()})
        seq += taken
        return vals.initial, body

    send_tuples(0, 30)
    v40, _ = switch(40, ["lim=200", "hot=false"])
    _, body = switch(50, ["lim=1", "hot=true"], taken=False)  # pending: engine_full
    broken = bytearray.fromhex(steps[-1]["send"])
    broken[60] ^= 1
    steps.append({"send": bytes(broken).hex()})  # bad FCS
    steps.append({"send": frame(PacketType.PARAMS, body[:-1], seq).hex()})  # bad_udp
    send_tuples(30, 60)
    steps.append({"wait_tuples": 41})
    v60, _ = switch(60, ["lim=30", "hot=true"])
    send_tuples(60, 90)
    steps.append({"wait_tuples": 90})
    v90, _ = switch(10, ["lim=0", "hot=false"])  # tuple 10 has passed: from 90 on
    send_tuples(90, n)
    schedule = ParamValues(types, dict(built.initial), ((40, v40), (60, v60), (90, v90)))
    res = reference.run(nfa, data, EngineParams(partitions=PARTITIONS), values=schedule)
    return {
        "steps": steps,
        "n": n,
        "packets": seq,
        "values_bytes": params_bytes(built.width()),
        "reset": _wire(udp.udp_frame(HOST, BOARD, _packet(PacketType.RESET))).hex(),
        "status_req": _wire(udp.udp_frame(HOST, BOARD, _packet(PacketType.STATUS_REQ))).hex(),
        "expected_records": [[r.seq, r.matches, r.dropped] for r in res.records(nfa, data)],
        "packed": {
            k: built.packed(v) for k, v in (("built", built.initial), ("40", v40), ("90", v90))
        },
    }


@pytest.mark.slow
def test_udp_board_top_switches_parameters_icarus(tmp_path):
    """PARAMS packets on the UDP board top's Verilog under cocotb: the records equal the
    reference matcher's with the switches at their tuples; a switch while one is pending is an
    ``engine_full``, a corrupted or short PARAMS packet a ``bad_fcs`` or ``bad_udp``; STATUS
    ends with the values in force."""
    from amaranth.back import verilog

    from nfacep import compile_file, wire
    from nfacep.hdl.engine import Engine
    from nfacep.hdl.eth.top import UdpTop
    from nfacep.params import EngineParams
    from nfacep.settings import ParamValues

    query = tmp_path / "limits.sql"
    query.write_text(LIMITS)
    nfa = compile_file(query)
    built = ParamValues.parse(nfa.program.parameters, ["lim=100", "hot=true"])
    top = UdpTop(
        Engine(nfa, EngineParams(partitions=PARTITIONS), values=built),
        mac=BOARD.mac,
        ip=BOARD.ip,
        port=BOARD.port,
        flush=FLUSH,
    )
    source = tmp_path / "nfacep_udp_top.v"
    source.write_text(verilog.convert(top, name="nfacep_udp_top", emit_src=False))
    scenario = _params_scenario(nfa, built, top.engine_id)
    got = _run_cocotb(tmp_path, "nfacep_udp_top", source, "udp_params_bench", dict(scenario))
    assert got["bad_fcs_from_board"] == 0
    fmt = wire.record_format(nfa)
    packets = [udp.parse_frame(bytes.fromhex(f)) for f in got["frames"]]
    records = []
    for f in packets:
        if f["kind"] == "udp" and udp.decode_header(f["payload"])["type"] == PacketType.RECORDS:
            body = f["payload"][udp.HEADER_BYTES :]
            records += [
                [r.seq, r.matches, r.dropped]
                for r in (
                    fmt.decode_bytes(body[at : at + fmt.nbytes])
                    for at in range(0, len(body), fmt.nbytes)
                )
            ]
    assert records == scenario["expected_records"] and records
    packed = scenario["packed"]
    after_reset, at_41, at_90, last = got["statuses"]
    assert after_reset["values"] == packed["built"]
    assert at_41["tuples"] >= 41 and at_41["values"] == packed["40"]
    assert at_90["tuples"] == 90
    assert last["tuples"] == scenario["n"] and last["flags"] & 1
    assert last["values"] == packed["90"]
    assert {
        k: last[k] for k in ("engine_full", "bad_fcs", "bad_udp", "bad_header", "lost", "late")
    } == {"engine_full": 1, "bad_fcs": 1, "bad_udp": 1, "bad_header": 0, "lost": 0, "late": 0}
    assert last["next_seq"] == scenario["packets"]
    # the packets taken and the STATUS_REQs, since RESET
    assert last["accepted"] == scenario["packets"] + got["status_requests"]


# --------------------------------------------------------------------------- transmit


@pytest.mark.parametrize("fifo_depth", [512, 16])
def test_udp_tx_fills_packets_then_flushes(fifo_depth):
    """UdpTx and MacTx in the Amaranth simulator, records offered back to back: full RECORDS
    packets (max_records each, no padding), then the rest after the flush time, every frame
    with preamble, a good FCS, valid headers and at least 12 idle cycles before the next.
    With a 16-deep record FIFO the records wait (backpressure) and none is lost."""
    from amaranth.hdl import Module
    from amaranth.lib import wiring

    from nfacep.hdl.eth.link_events import COUNTERS
    from nfacep.hdl.eth.mac import MacTx
    from nfacep.hdl.eth.payload_tx import UdpTx
    from nfacep.wire import RecordFormat

    layout = data.StructLayout({"seq": 48, "partition": 16, "matches": 1, "dropped": 1})
    fmt = RecordFormat.from_widths({"seq": 48, "partition": 16, "matches": 1, "dropped": 1})
    tx = UdpTx(
        layout,
        mac=BOARD.mac,
        ip=BOARD.ip,
        port=BOARD.port,
        engine_id=ENGINE_ID,
        tuple_bytes=TB,
        capacity=CAPACITY,
        counters=COUNTERS,
        flush=300,
        fifo_depth=fifo_depth,
    )
    mac = MacTx()
    m = Module()
    m.submodules.tx, m.submodules.mac = tx, mac
    wiring.connect(m, tx.o_stream, mac.i_stream)
    rng = random.Random(5)
    n = 2 * tx.max_records + 17
    records = [
        {
            "seq": i,
            "partition": rng.getrandbits(16),
            "matches": rng.getrandbits(1),
            "dropped": rng.getrandbits(1),
        }
        for i in range(n)
    ]
    wire_bytes, gaps, packets = [], [], []
    pulses = {"records": 0, "packets": 0, "matched": 0, "drops": 0}

    async def feed(ctx):
        ctx.set(
            tx.peer,
            {
                "mac": int.from_bytes(HOST.mac, "big"),
                "ip": int.from_bytes(HOST.ip, "big"),
                "port": HOST.port,
            },
        )
        for r in records:
            ctx.set(tx.i_stream.valid, 1)
            ctx.set(tx.i_stream.payload, r)
            await ctx.tick().until(tx.i_stream.ready)
        ctx.set(tx.i_stream.valid, 0)
        await ctx.tick().repeat(6000)

    async def watch(ctx):
        idle = 99
        async for _, _, en, txd, er, *counts in ctx.tick().sample(
            mac.tx_en, mac.txd, mac.tx_er, *(getattr(tx.count, k) for k in pulses)
        ):
            assert not er
            for k, v in zip(pulses, counts, strict=True):
                pulses[k] += v
            if en:
                if idle:
                    gaps.append(idle)
                    wire_bytes.append(bytearray())
                idle = 0
                wire_bytes[-1].append(txd)
            else:
                idle += 1

    sim = Simulator(m)
    sim.add_clock(8e-9)
    sim.add_testbench(feed)
    sim.add_testbench(watch, background=True)
    sim.run()
    assert min(gaps[1:]) >= 12
    got = []
    for raw in wire_bytes:
        assert raw[:8] == PREAMBLE
        frame, fcs = bytes(raw[8:-4]), bytes(raw[-4:])
        assert udp.ethernet_fcs(frame) == fcs
        parsed = udp.parse_frame(frame)
        assert parsed["dst"] == HOST and parsed["src"] == BOARD
        body = parsed["payload"][udp.HEADER_BYTES :]
        packets.append(len(body) // fmt.nbytes)
        got += [
            fmt.decode_bytes(body[i : i + fmt.nbytes])._asdict()
            for i in range(0, len(body), fmt.nbytes)
        ]
    for r in got:  # no query reports start_seq: the records have no starts field
        assert r.pop("starts") == 0
    if fifo_depth == 512:
        assert packets == [tx.max_records, tx.max_records, 17]
    else:
        assert tx.max_records == 14 and max(packets) == 14 and sum(packets) == n
    assert got == records
    assert pulses == {
        "records": n,
        "packets": len(packets),
        "matched": sum(r["matches"] for r in records),
        "drops": sum(r["dropped"] for r in records),
    }


# --------------------------------------------------------------------------- the board


def test_udp_board_top_elaborates_for_the_colorlight():
    """RGMII on the 5A-75B: delayed DDR inputs, DDR outputs (tx_clk too), the PLL, and the
    receive clock constrained to 125 MHz; its flip-flops counted before the netlist is built
    are the netlist's."""
    from nfacep import compile_file
    from nfacep.boards import get_board, resources
    from nfacep.boards.rgmii import RX_DELAY_TAPS
    from nfacep.hdl.engine import Engine
    from nfacep.links.udp.top import UdpBoardTop
    from nfacep.params import EngineParams

    platform = get_board("colorlight-5a75b").platform_class()()
    top = UdpBoardTop(
        Engine(compile_file(MARATHON), EngineParams(partitions=2)),
        mac=BOARD.mac,
        ip=BOARD.ip,
        port=BOARD.port,
    )
    plan = platform.build(top, name="t", do_build=False)
    rtlil, lpf = plan.files["t.il"], plan.files["t.lpf"]
    assert rtlil.count("cell \\DELAYG") == 5 and rtlil.count("cell \\IDDRX1F") == 5
    assert rtlil.count("cell \\ODDRX1F") == 6 and rtlil.count("cell \\EHXPLLL") == 1
    assert f"parameter \\DEL_VALUE {RX_DELAY_TAPS}" in rtlil
    assert 'FREQUENCY PORT "eth_rgmii_0__rx_clk__io" 125000000.0 HZ' in lpf
    assert 'FREQUENCY NET "clk125" 125000000.0 HZ' in lpf
    ffs = resources.count_flipflops(rtlil)
    assert ffs > 0
    # ``check --board`` counts them in the elaborated design, as the netlist has them
    engine = Engine(compile_file(MARATHON), EngineParams(partitions=2))
    again = UdpBoardTop(engine, mac=BOARD.mac, ip=BOARD.ip, port=BOARD.port)
    platform = get_board("colorlight-5a75b").platform_class()()
    assert resources.count_prepared_flipflops(again, platform) == ffs


@pytest.mark.slow
def test_engine_clock_chosen_for_the_line_or_stated(capsys):
    """The engine's clock beside the link: the build chooses the PLL's slowest at or above 1.5
    times what the pipeline store (2 cycles a tuple) needs for the line's most marathon tuples
    per second (132 a packet, the limit of ``sim --link udp``); ``--engine-mhz`` takes the
    PLL's nearest at or below; ``check --board`` says so; out of the PLL's range, exit 2."""
    from test_boards import run

    from nfacep import compile_file
    from nfacep.hdl.engine import Engine
    from nfacep.links.udp.top import engine_clock
    from nfacep.params import EngineParams
    from nfacep.sim.udp import line_limit

    engine = Engine(compile_file(MARATHON), EngineParams(store="pipeline", partitions=64))
    engine._MustUse__silence = True  # (only its clock is asked for: never elaborated)
    line = 132 * line_limit(14 + 20 + 8 + udp.HEADER_BYTES + 132 * 11 + 4)
    clock = engine_clock(engine)
    assert clock.line_tuples_per_s == pytest.approx(line) and clock.line_packet == 132
    assert clock.mhz == pytest.approx(625 / 19) and clock.chosen and clock.keeps_up
    assert clock.tuples_per_s == pytest.approx(clock.mhz * 1e6 / 2)
    assert clock.tuples_per_s >= 1.5 * line
    assert 1.5 * line > 625 / 20 * 1e6 / 2  # (the slowest that does)
    slow = engine_clock(engine, 10)
    assert slow.mhz == pytest.approx(625 / 63) and not slow.keeps_up and not slow.chosen
    query = str(MARATHON)
    args = ["check", query, "--board", "colorlight-5a75b", "--link", "udp", "--partitions", "2"]
    assert run([*args, "--store", "pipeline", "--engine-mhz", "60"]) == 0
    out = capsys.readouterr().out
    assert "engine at 56.82 MHz (--engine-mhz): 28.41M tuples/s" in out and "keeps up" in out
    assert run([*args, "--engine-mhz", "200"]) == 2
    assert "the PLL gives the engine 4.88281 to 125 MHz" in capsys.readouterr().err


def test_build_refuses_udp_without_rgmii_or_with_bad_addresses(tmp_path, monkeypatch, capsys):
    from test_boards import run

    from nfacep import boards

    monkeypatch.setattr(
        boards.toolchain, "find_tools", lambda names: {n: f"/nonexistent/{n}" for n in names}
    )
    out = tmp_path / "o"
    assert (
        run(["build", str(MARATHON), "--board", "ulx3s-85f", "--link", "udp", "-o", str(out)]) == 2
    )
    assert "has no RGMII port the UDP link supports" in capsys.readouterr().err
    bad_addresses = (
        (["--ip", "10.0.0.256"], "not an IPv4 address: '10.0.0.256'"),
        (["--mac", "02:00"], "not a MAC address"),
        (["--mac", "zz:00:00:00:00:00"], "not a MAC address"),  # (was fromhex()'s message)
        (["--port", "0"], "not a UDP port: 0"),
        # (each was built: a board answering from it is never reached, or answers for others)
        (["--mac", "01:00:5e:00:00:01"], "a group MAC address"),
        (["--mac", "ff:ff:ff:ff:ff:ff"], "a group MAC address"),
        (["--mac", "00:00:00:00:00:00"], "the zero MAC address"),
        (["--ip", "224.0.0.1"], "a multicast address"),
        (["--ip", "255.255.255.255"], "the broadcast address"),
        (["--ip", "127.0.0.1"], "a loopback address"),
        (["--ip", "0.1.2.3"], "'this network'"),
    )
    for bad, says in bad_addresses:
        assert (
            run(
                [
                    "build",
                    str(MARATHON),
                    "--board",
                    "colorlight-5a75b",
                    "--link",
                    "udp",
                    *bad,
                    "-o",
                    str(out),
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert "--mac/--ip/--port" in err and says in err, err
    assert (
        run(
            [
                "build",
                str(MARATHON),
                "--board",
                "colorlight-5a75b",
                "--link",
                "udp",
                "--target-mhz",
                "150",
                "-o",
                str(out),
            ]
        )
        == 2
    )
    assert "--target-mhz does not apply" in capsys.readouterr().err
    assert not out.exists()


# --------------------------------------------------------------------------- the model


def test_udp_board_model_on_a_socket():
    """The software board on 127.0.0.1: RESET and STATUS_REQ answered with STATUS, the records
    of the tuples in RECORDS packets equal the reference matcher's, bad payloads counted in the
    classes the gateware counts them in, upstream loss counted."""
    import socket
    import threading

    from nfacep import compile_file, wire
    from nfacep.io import reader, tuples
    from nfacep.links.protocol import decode_fields
    from nfacep.links.udp.model import UdpBoardModel, serve
    from nfacep.params import EngineParams
    from nfacep.reference import matcher as reference

    nfa = compile_file(MARATHON)
    params = EngineParams(partitions=PARTITIONS)
    model = UdpBoardModel(nfa, params, capacity=512)
    stop = threading.Event()
    thread, address = serve(model, stop=stop)
    schema = nfa.program.schema
    rows = reader.read(str(ROOT / "queries" / "marathon.csv"), schema)
    tb = wire.tuple_bytes(schema)
    raw = wire.pack_bytes(schema, rows)
    sent = [(0, 0, 30), (1, 30, 60), (3, 60, 90), (2, 90, 120)]  # seq 3 before 2: lost, late
    host = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    host.settimeout(2)
    replies = []
    try:
        host.sendto(_packet(PacketType.RESET), address)
        replies.append(host.recvfrom(65536)[0])
        for seq, a, b in sent:
            host.sendto(
                _packet(PacketType.TUPLES, raw[a * tb : b * tb], seq=seq, engine_id=model.id),
                address,
            )
        for bad in (
            _packet(PacketType.TUPLES, raw[: tb + 1], engine_id=model.id),
            _packet(PacketType.TUPLES, raw[:tb], engine_id=model.id ^ 1),
            _packet(PacketType.TUPLES, raw[: 50 * tb], engine_id=model.id),
            _packet(PacketType.STATUS_REQ, b"x"),
            b"\x01\x02",
        ):
            host.sendto(bad, address)
        host.sendto(_packet(PacketType.STATUS_REQ), address)
        while (
            not replies
            or udp.decode_header(replies[-1])["type"] != PacketType.STATUS
            or len(replies) == 1
        ):
            replies.append(host.recvfrom(65536)[0])
    finally:
        stop.set()
        thread.join(2)
        host.close()
    status = decode_fields(udp.STATUS_FIELDS, replies[-1][udp.HEADER_BYTES :])
    assert [udp.decode_header(r)["seq"] for r in replies] == list(range(len(replies)))
    fmt = wire.record_format(nfa)
    records = [
        fmt.decode_bytes(r[at : at + fmt.nbytes])
        for r in replies
        if r[1] == PacketType.RECORDS
        for at in range(udp.HEADER_BYTES, len(r), fmt.nbytes)
    ]
    order = [i for _, a, b in sent for i in range(a, b)]  # the order the board took them
    taken = tuples.Tuples({c: v[order] for c, v in rows.columns.items()}, len(order), "taken")
    expected = reference.run(nfa, taken, params).records(nfa, taken)
    assert records == list(expected) and records
    assert status["tuples"] == 120 and status["records"] == len(records)
    assert (status["lost"], status["late"], status["next_seq"]) == (1, 1, 4)
    assert {k: status[k] for k in udp.FRAME_CLASSES} == {
        **dict.fromkeys(udp.FRAME_CLASSES, 0),
        "accepted": 5,
        "bad_udp": 3,
        "bad_header": 1,
        "engine_full": 1,
    }


@pytest.mark.slow
def test_udp_board_top_builds_for_the_colorlight_and_meets_timing(tmp_path):
    """`nfacep build --link udp` for the Colorlight 5A-75B: place-and-route meets timing on
    every clock (the link's transmit one and the receive one at 125 MHz, the engine's at the
    frequency the build chose for the line), the report states the engine's tuples/s beside
    the line's, the bitstream is written."""
    from nfacep import boards, compile_file
    from nfacep.params import EngineParams

    out = tmp_path / "colorlight"
    report = boards.build(
        compile_file(MARATHON),
        boards.get_board("colorlight-5a75b"),
        str(out),
        EngineParams(partitions=2),
        link="udp",
        query_file=str(MARATHON),
        udp=BOARD,
    )
    assert report["status"] == "ok" and report["timing_met"] is True
    assert report["link"]["kind"] == "udp" and report["link"]["ip"] == "10.0.0.2"
    assert report["link"]["port"] == BOARD.port and report["link"]["mac"] == "02:00:5e:00:00:02"
    # three clocks: the link's and the receive clock at 125 MHz, the engine's at its own
    assert len(report["fmax_mhz"]) == 3
    link = report["link"]
    assert sorted(report["constraint_mhz"].values()) == pytest.approx(
        [link["engine_mhz"], 125, 125], abs=0.01
    )
    for clock, fmax in report["fmax_mhz"].items():
        assert fmax >= report["constraint_mhz"][clock]
    assert link["engine_mhz_from"] == "chosen by the build" and link["keeps_up"] is True
    assert link["engine_tuples_per_s"] >= 1.5 * link["line_tuples_per_s"] > 10e6
    assert (out / "engine.bit").stat().st_size > 100_000


def test_status_led_heartbeat_activity_and_trouble():
    """The board's LED: a short heartbeat flash when idle, steady on while frames are accepted,
    fast flashing for a while after a refused frame or a drop (which wins over activity)."""
    from nfacep.links.udp.top import StatusLed

    # at 1 kHz: a 1 s heartbeat (100 cycles on), blinks of 8 Hz (62 cycles a half period),
    # activity held 50 cycles, trouble 2,000
    dut = StatusLed(1000)
    trace: list[int] = []

    async def bench(ctx):
        async def run(cycles, activity_every=0, trouble_at=None):
            for i in range(cycles):
                ctx.set(dut.activity, int(bool(activity_every) and i % activity_every == 0))
                ctx.set(dut.trouble, int(i == trouble_at))
                await ctx.tick()
                trace.append(ctx.get(dut.led))

        await run(2000)  # idle
        await run(1000, activity_every=20)  # traffic
        await run(2500, activity_every=20, trouble_at=0)  # a bad frame amid traffic
        await run(200)  # activity's hold runs out, back to the heartbeat

    sim = Simulator(dut)
    sim.add_clock(1e-3)
    sim.add_testbench(bench)
    sim.run()

    def runs(bits):
        return [(v, len(list(g))) for v, g in itertools.groupby(bits)]

    idle, busy, bad = trace[:2000], trace[2000:3000], trace[3010:5000]
    # (the LED's flip-flop follows its terms' by a cycle: a sample a cycle after each tick)
    assert runs(idle) == [(1, 100), (0, 900), (1, 100), (0, 900)]
    assert all(busy[1:])
    # flashing: on and off in runs of 62 cycles for the 2 s after the pulse
    flashes = runs(bad)
    assert len(flashes) > 25 and {n for _, n in flashes[1:-1]} == {62}
    assert all(trace[5010:5500])  # then steady on again while traffic goes on
    assert 0 in trace[-150:]  # and back to the heartbeat
