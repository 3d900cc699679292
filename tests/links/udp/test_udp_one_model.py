"""One model of the UDP board: the software board (:class:`nfacep.links.udp.model.UdpBoardModel`)
and the gateware (:class:`nfacep.hdl.eth.top.UdpTop` in Amaranth's simulator) answer the same
packet script with the same packets, byte for byte, to the same addresses.

The script is a session's life beside a third station that knows the engine id (anyone with the
query file does) and, in some packets, the session id: its STATUS_REQ, TUPLES, PARAMS, RESET
and CLOSE, with and without the right engine id and session, are refused (``foreign``, or
``bad_header`` for another engine) and counted, never answered, and change nothing; the host's
own packets with another session id or from another port are refused too; a RESET from the
host with its id starts the run again; CLOSE ends the session and then the third station may
open its own.

Then the host itself (``nfacep run --udp``) against the software board on 127.0.0.1 while a
third socket keeps sending such packets: the match file is ``nfacep match``'s, exit 0.
"""

from __future__ import annotations

import pathlib
import random
import socket
import threading

import numpy as np
import pytest
from test_udp_host import board, reference, run

from nfacep import compile_file, wire
from nfacep.io import tuples
from nfacep.links.protocol import switch_body
from nfacep.links.udp import protocol as udp
from nfacep.links.udp.model import FrameBoard, UdpBoardModel
from nfacep.links.udp.protocol import Endpoint, PacketType
from nfacep.params import EngineParams
from nfacep.settings import ParamValues

BOARD = Endpoint.parse("02:00:5e:00:00:02", "10.0.0.2", 5000)
HOST = Endpoint.parse("02:00:5e:00:00:01", "10.0.0.1", 40001)
THIRD = Endpoint.parse("02:00:5e:00:00:07", "10.0.0.7", 40001)
#: HOST from another UDP port.
HOST_OTHER_PORT = Endpoint(HOST.mac, HOST.ip, HOST.port + 1)
#: A second process on the host (``nfacep load`` beside ``nfacep run``): another port.
LOADER = Endpoint(HOST.mac, HOST.ip, HOST.port + 2)
SESSION, OTHER_SESSION = 0x5E55_10A1, 0x0BAD_CAFE
#: A query with runtime parameters (PARAMS are part of the script) and records both ways.
LIMITS = """CREATE STREAM s (v UINT(8), hot BOOL, k UINT(4));
QUERY over FROM s
PATTERN ( A B )
DEFINE
  A AS (v > :lim)
  B AS (v <= :lim AND hot = :hot);
"""
PARTITIONS = 4
FLUSH = 200  # cycles a record waits for company (the gateware's; the model sends at once)
SETTLE = 1500  # cycles after each frame: every answer is out, the board idle


def _script(nfa, built: ParamValues, engine_id: int) -> list[tuple[Endpoint, bytes, str]]:
    """(sender, UDP payload, what the board makes of it) for each step."""
    schema, types = nfa.program.schema, nfa.program.parameters
    rng = random.Random(26)
    n = 90
    data = tuples.Tuples(
        {
            "v": np.array([rng.randrange(256) for _ in range(n)], dtype=np.uint64),
            "hot": np.array([rng.random() < 0.5 for _ in range(n)]),
            "k": np.zeros(n, dtype=np.uint64),
        },
        n,
        "script",
    )
    tb = wire.tuple_bytes(schema)
    raw = wire.pack_bytes(schema, data)
    new = ParamValues.parse(types, ["lim=30", "hot=false"])
    switch = switch_body(40, new.packed(new.initial), built.width())

    def p(ptype, body=b"", *, seq=0, engine=engine_id, session=SESSION):
        return udp.packet(ptype, body, seq=seq, engine_id=engine, session=session)

    T, S, R, C, P = (
        PacketType.TUPLES,
        PacketType.STATUS_REQ,
        PacketType.RESET,
        PacketType.CLOSE,
        PacketType.PARAMS,
    )
    return [
        (THIRD, p(S, session=0), "foreign"),  # no session yet
        (THIRD, p(T, raw[: 5 * tb], session=0), "foreign"),
        (HOST, p(R, engine=0), "accepted"),  # HOST's session opens
        (HOST, p(T, raw[: 30 * tb], seq=0), "accepted"),
        (THIRD, p(S), "foreign"),  # the session id, from another address
        (THIRD, p(S, session=0), "foreign"),
        (THIRD, p(T, raw[30 * tb : 35 * tb], seq=1), "foreign"),
        (THIRD, p(T, raw[30 * tb : 35 * tb], seq=1, engine=engine_id ^ 1), "bad_header"),
        (THIRD, p(P, switch, seq=1), "foreign"),
        (THIRD, p(P, switch, seq=1, engine=engine_id ^ 1), "bad_header"),
        (THIRD, p(R), "foreign"),
        (THIRD, p(R, engine=0, session=0), "foreign"),
        (THIRD, p(C), "foreign"),
        (HOST, p(S, session=OTHER_SESSION), "foreign"),  # HOST without its id
        (HOST, p(T, raw[30 * tb : 35 * tb], seq=1, session=OTHER_SESSION), "foreign"),
        (HOST, p(R, session=OTHER_SESSION), "foreign"),
        (HOST_OTHER_PORT, p(S), "foreign"),
        (HOST_OTHER_PORT, p(R), "foreign"),
        (HOST, p(P, switch, seq=1), "accepted"),
        (HOST, p(T, raw[30 * tb : 60 * tb], seq=2), "accepted"),
        (HOST, p(S), "accepted"),
        (HOST, p(R), "accepted"),  # the run again, in the same session
        (HOST, p(T, raw[: 20 * tb], seq=0), "accepted"),
        (HOST, p(T, raw[20 * tb : 90 * tb], seq=1), "accepted"),
        (HOST, p(S), "accepted"),
        (HOST, p(C), "accepted"),  # the session ends
        (HOST, p(S), "foreign"),
        (THIRD, p(R, session=OTHER_SESSION), "accepted"),  # now THIRD's session
        (THIRD, p(S, session=OTHER_SESSION), "accepted"),
        (HOST, p(S), "foreign"),
        (HOST, p(R), "foreign"),
        # ping: answered to whoever asks (as ARP), whatever the session; counted in `echoes`
        (HOST, _echo(HOST, b"\x12\x34\x00\x01" + bytes(range(56))), "accepted"),
        (THIRD, _echo(THIRD, b"\x00\x07\x00\x02" + b"odd" * 11), "accepted"),
        (HOST, _echo(HOST, b"\x12\x34\x00\x03", icmp_type=13), "not_for_us"),  # timestamp
        (HOST, _echo(HOST, b"\x12\x34"), "bad_udp"),  # shorter than an echo's header
        (THIRD, p(S, session=OTHER_SESSION), "accepted"),
    ]


def _echo(sender: Endpoint, rest: bytes, icmp_type: int = 8) -> bytes:
    """An ICMP message of ``icmp_type`` (an echo request) from ``sender`` to the board, as a
    frame (without FCS): the script's UDP payloads are framed by :func:`_frame`."""
    frame = bytearray(udp.icmp_echo(sender, BOARD, rest))
    frame[34] = icmp_type
    total = int.from_bytes(frame[16:18], "big")
    message = bytes(frame[34 : 14 + total]) + b"\0" * (total % 2)
    frame[36:38] = bytes(2)
    frame[36:38] = udp.ip_checksum(message[:2] + bytes(2) + message[4:]).to_bytes(2, "big")
    return bytes(frame)


def _frame(sender: Endpoint, item: bytes) -> bytes:
    """A script step's frame: an ICMP frame as it is (its EtherType and IPv4 protocol say
    so), else a UDP payload from ``sender`` to the board."""
    if item[12:14] == b"\x08\x00" and len(item) > 34 and item[23] == 1:
        return item
    return udp.udp_frame(sender, BOARD, item)


def _answer(frame: bytes) -> tuple:
    """What a frame the board sent says, for the comparison: (destination IPv4 address, UDP
    port, payload) or (destination, "icmp", the ICMP message, checksum included)."""
    parsed = udp.parse_frame(frame)
    ip = ".".join(map(str, parsed["dst"].ip))
    if parsed["kind"] == "icmp":
        total = int.from_bytes(frame[16:18], "big")
        return (ip, "icmp", frame[34 : 14 + total])
    assert parsed["kind"] == "udp"
    return (ip, parsed["dst"].port, parsed["payload"])


def _gateware(nfa, built, script, engine=None, settle: int = SETTLE) -> list[list[bytes]]:
    """The UDP top in Amaranth's simulator (the receive clock the engine's) with ``nfa``'s
    engine (or ``engine``): for each step, the frames it sent (without FCS); ARP never
    occurs."""
    from amaranth.hdl import ClockSignal, Elaboratable, Module
    from amaranth.sim import Simulator

    from nfacep.hdl.engine import Engine
    from nfacep.hdl.eth.top import UdpTop

    if engine is None:
        engine = Engine(nfa, EngineParams(partitions=PARTITIONS), values=built)
    top = UdpTop(engine, mac=BOARD.mac, ip=BOARD.ip, port=BOARD.port, flush=FLUSH)

    class Bench(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.submodules.top = top
            m.d.comb += top.rx_clk.eq(ClockSignal("sync"))
            return m

    replies: list[list[bytes]] = [[] for _ in script]
    state = {"step": -1}

    async def drive(ctx):
        await ctx.tick().repeat(20)
        for i, (sender, payload, _) in enumerate(script):
            state["step"] = i
            frame = _frame(sender, payload)
            for byte in b"\x55" * 7 + b"\xd5" + frame + udp.ethernet_fcs(frame):
                ctx.set(top.rxd, byte)
                ctx.set(top.rx_dv, 1)
                await ctx.tick()
            ctx.set(top.rx_dv, 0)
            await ctx.tick().repeat(settle)

    async def collect(ctx):
        frame = bytearray()
        async for _, _, en, byte in ctx.tick().sample(top.tx_en, top.txd):
            if en:
                frame.append(byte)
            elif frame:
                assert frame[:8] == b"\x55" * 7 + b"\xd5"
                body = bytes(frame[8:-4])
                assert udp.ethernet_fcs(body) == bytes(frame[-4:])
                udp.parse_frame(body)  # (well formed)
                replies[state["step"]].append(body)
                frame = bytearray()

    sim = Simulator(Bench())
    sim.add_clock(8e-9)
    sim.add_testbench(drive)
    sim.add_testbench(collect, background=True)
    sim.run()
    return replies


def _model(nfa, built, script, engine_id: int) -> list[list[bytes]]:
    """The software board at the frame level (:class:`FrameBoard`): the frames it sent."""
    model = UdpBoardModel(nfa, EngineParams(partitions=PARTITIONS), values=built)
    assert model.id == engine_id
    board = FrameBoard(model, BOARD)
    return [board.feed(_frame(sender, payload)) for sender, payload, _ in script]


def test_gateware_and_model_answer_the_script_alike(tmp_path):
    query = tmp_path / "limits.sql"
    query.write_text(LIMITS)
    nfa = compile_file(query)
    built = ParamValues.parse(nfa.program.parameters, ["lim=100", "hot=true"])
    from nfacep.links.protocol import engine_id as fingerprint

    engine_id = fingerprint(nfa, EngineParams(partitions=PARTITIONS))
    script = _script(nfa, built, engine_id)
    hw = _gateware(nfa, built, script)
    sw = _model(nfa, built, script, engine_id)
    session_host, session = None, None
    for i, ((sender, payload, verdict), got, want) in enumerate(zip(script, hw, sw, strict=True)):
        where = f"step {i} ({verdict} from {sender})"
        echo = _frame(sender, payload) == payload
        if verdict == "accepted" and not echo and payload[1] == PacketType.RESET:
            session_host, session = sender, udp.decode_header(payload)["session"]
        # answers only to accepted packets (PARAMS has none), only to the session's host (the
        # MAC address of its RESET too), with its session id; echo replies to who asked
        answered = verdict == "accepted" and (echo or payload[1] != PacketType.PARAMS)
        assert bool(got) == answered, where
        parsed = [udp.parse_frame(frame) for frame in got]
        to = Endpoint(sender.mac, sender.ip, 0) if echo else session_host
        assert all(p["dst"] == to for p in parsed), where
        if not echo:
            assert all(udp.decode_header(p["payload"])["session"] == session for p in parsed)
        assert [_answer(frame) for frame in got] == [_answer(frame) for frame in want], where
    # the STATUS before the second RESET: the refused packets counted, the host's run intact
    status = _status(udp.parse_frame(hw[20][-1])["payload"])
    assert status["foreign"] == sum(v == "foreign" for _, _, v in script[3:21])
    assert status["bad_header"] == sum(v == "bad_header" for _, _, v in script[3:21]) == 2
    assert status["tuples"] == 60 and status["next_seq"] == 3 and status["lost"] == 0
    assert status["records"] > 0
    records = sum(
        len(udp.parse_frame(frame)["payload"]) - udp.HEADER_BYTES
        for step in hw[3:20]
        for frame in step
    )
    assert status["records"] * status["record_bytes"] == records
    # the pings since THIRD's RESET: two answered, one other ICMP message, one too short
    last = _status(udp.parse_frame(hw[-1][-1])["payload"])
    assert (last["echoes"], last["not_for_us"], last["bad_udp"]) == (2, 1, 1)
    echo_replies = [udp.parse_frame(frame) for step in hw[-5:-3] for frame in step]
    assert [(r["type"], r["rest"][:4]) for r in echo_replies] == [
        (0, b"\x12\x34\x00\x01"),
        (0, b"\x00\x07\x00\x02"),
    ]


def _status(payload: bytes) -> dict:
    from nfacep.links.protocol import decode_fields, fields_size

    body = payload[udp.HEADER_BYTES :]
    return decode_fields(udp.STATUS_FIELDS, body[: fields_size(udp.STATUS_FIELDS)])


def test_the_hosts_run_beside_a_third_station(tmp_path):
    """``nfacep run --udp`` against the software board while another socket on 127.0.0.1
    sends STATUS_REQ, TUPLES, PARAMS, RESET and CLOSE with the right engine id and guessed
    session ids: the match file is ``nfacep match``'s (exit 0), and the board counted the
    third station's packets as ``foreign``."""
    name = "marathon"
    expected, _ = reference(tmp_path, name)
    with board(name) as (model, address):
        host, port = address.rsplit(":", 1)
        target = (host, int(port))
        stop = threading.Event()
        sent = {"n": 0, "foreign": 0}

        def attacker():
            rng = random.Random(7)
            while not model.open and not stop.is_set():  # (before: anyone may open a session)
                stop.wait(0.001)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                while not stop.is_set():
                    ptype = rng.choice(
                        [
                            PacketType.STATUS_REQ,
                            PacketType.TUPLES,
                            PacketType.PARAMS,
                            PacketType.RESET,
                            PacketType.CLOSE,
                        ]
                    )
                    body = bytes(11) if ptype == PacketType.TUPLES else b""
                    session = rng.choice([0, model.session, rng.getrandbits(32)])
                    sock.sendto(
                        udp.packet(
                            ptype,
                            body,
                            seq=rng.randrange(4),
                            engine_id=model.id,
                            session=session,
                        ),
                        target,
                    )
                    sent["n"] += 1
                    # (the most counted in the host's session: after its CLOSE the third
                    # station may open one, and RESET zeroes the counters)
                    sent["foreign"] = max(sent["foreign"], model.counters["foreign"])
                    stop.wait(0.0005)

        thread = threading.Thread(target=attacker, daemon=True)
        thread.start()
        try:
            # (paced, in small packets: the run lasts long enough to be disturbed)
            code, out = run(address, tmp_path, name, "--rate", "2000", "--tuples-per-packet", "4")
        finally:
            stop.set()
            thread.join(timeout=2)
        foreign = sent["foreign"]
    assert code == 0
    assert out.read_text() == expected
    assert sent["n"] > 50 and foreign > 20


def test_a_session_ends_by_close_or_idle_time_alike():
    """The receive path (:class:`~nfacep.hdl.eth.rx.EthRx`, Amaranth) with a session idle
    time of 300 cycles and the model with the same idle time on a clock of cycles: the same
    classes for a script where a session ends by its idle time and by CLOSE, and another
    host opens one after each."""
    from amaranth.sim import Simulator

    from nfacep.hdl.eth.payload import FrameClass
    from nfacep.hdl.eth.rx import EthRx

    query_nfa = _limits()
    engine_id = UdpBoardModel(query_nfa, EngineParams(), values=_built(query_nfa)).id
    R, S, C = PacketType.RESET, PacketType.STATUS_REQ, PacketType.CLOSE
    idle = 300
    # (sender, type, session, cycles to wait after the frame, class)
    script = [
        (HOST, R, SESSION, 50, "accepted"),
        (HOST, S, SESSION, 50, "accepted"),  # (50 + a frame < 300: still alive)
        (THIRD, R, OTHER_SESSION, 50, "foreign"),
        (HOST, S, SESSION, 1000, "accepted"),
        (HOST, S, SESSION, 50, "foreign"),  # idle for 1,000 cycles: ended
        (THIRD, R, OTHER_SESSION, 50, "accepted"),
        (HOST, R, SESSION, 50, "foreign"),
        (THIRD, C, OTHER_SESSION, 50, "accepted"),
        (THIRD, S, OTHER_SESSION, 50, "foreign"),
        (HOST, R, SESSION, 50, "accepted"),
    ]
    dut = EthRx(
        tuple_width=20,
        capacity=2048,
        mac=BOARD.mac,
        ip=BOARD.ip,
        port=BOARD.port,
        engine_id=engine_id,
        idle_cycles=idle,
    )
    events = []

    async def drive(ctx):
        await ctx.tick().repeat(5)
        for sender, ptype, session, wait, _ in script:
            frame = udp.udp_frame(sender, BOARD, udp.packet(ptype, session=session))
            for byte in b"\x55" * 7 + b"\xd5" + frame + udp.ethernet_fcs(frame):
                ctx.set(dut.rx_dv, 1)
                ctx.set(dut.rxd, byte)
                await ctx.tick()
            ctx.set(dut.rx_dv, 0)
            await ctx.tick().repeat(wait)

    async def take(ctx):
        async for _, _, valid, ev in ctx.tick().sample(dut.event.valid, dut.event.payload):
            if valid:
                events.append(FrameClass(ev.cls).name.lower())

    sim = Simulator(dut)
    sim.add_clock(8e-9)
    sim.add_testbench(drive)
    sim.add_testbench(take, background=True)
    sim.run()
    assert events == [step[-1] for step in script]
    now = [0]
    model = UdpBoardModel(
        query_nfa, EngineParams(), values=_built(query_nfa), idle=idle, clock=lambda: now[0]
    )
    classes = []
    for sender, ptype, session, wait, _ in script:
        model.feed(udp.packet(ptype, session=session), (".".join(map(str, sender.ip)), sender.port))
        now[0] += 8 + 64 + 12 + wait  # (the frame, the gap, the wait: cycles)
        classes.append(model.last)
    assert classes == events


def _limits():
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        query = pathlib.Path(folder) / "limits.sql"
        query.write_text(LIMITS)
        return compile_file(query)


def _built(nfa) -> ParamValues:
    return ParamValues.parse(nfa.program.parameters, ["lim=100", "hot=true"])


# --- a programmable engine: loads over the link ---------------------------------------------

#: Two files for one programmable engine (the same stream declaration and key).
FIRST = """CREATE STREAM s (v UINT(8), hot BOOL, k UINT(4));
QUERY up FROM s PARTITION BY k
PATTERN ( A B )
DEFINE
  A AS (v > 100)
  B AS (v <= 100 AND hot);
"""
SECOND = """CREATE STREAM s (v UINT(8), hot BOOL, k UINT(4));
QUERY down FROM s PARTITION BY k
AFTER MATCH SKIP PAST LAST ROW
PATTERN ( X Y )
DEFINE
  X AS (v < 50)
  Y AS (v >= 50);
"""
PROGRAMMABLE = EngineParams(
    partitions=PARTITIONS, engine="programmable", states=4, atoms=4, queries=2
)


def _programmable_script(first, second, engine_id: int):
    """A run with loads: the first image from a second process of the host's (another port
    and session id) in three chunks (one out of place, one for another engine between); a
    third station's loads during the session, refused as ``foreign``; then, from the host, a
    damaged, a foreign and a truncated load (refused: the first image keeps running) and the
    second image at tuple 60, while tuples flow; RESET keeps the image in force; once the
    session is closed, the third station may load. Returns the script, the tuples and the
    loads' images."""
    from nfacep.image import Capacity, EngineShape, image, load

    program = first.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(PROGRAMMABLE))
    other = EngineShape(program.schema, program.partition_fields, Capacity(5, 4, 2))
    one, two = image(first, shape), image(second, shape)
    rng = random.Random(28)
    n = 90
    data = tuples.Tuples(
        {
            "v": np.array([rng.randrange(256) for _ in range(n)], dtype=np.uint64),
            "hot": np.array([rng.random() < 0.5 for _ in range(n)]),
            "k": np.array([rng.randrange(3) for _ in range(n)], dtype=np.uint64),
        },
        n,
        "script",
    )
    tb = wire.tuple_bytes(program.schema)
    raw = wire.pack_bytes(program.schema, data)
    first_load = udp.load_chunks(load(one, 10), 20)
    assert len(first_load) == 3 and len(first_load[-1]) >= 5 + 10
    damaged = bytearray(load(two, 50))
    damaged[30] ^= 1
    truncated = udp.load_chunks(load(two, 50)[:-6])
    truncated[-1] = truncated[-1][:4] + bytes([udp.LOAD_LAST]) + truncated[-1][5:]
    T, S, R, C, L = (
        PacketType.TUPLES,
        PacketType.STATUS_REQ,
        PacketType.RESET,
        PacketType.CLOSE,
        PacketType.LOAD,
    )

    def p(ptype, body=b"", *, seq=0, engine=engine_id, session=SESSION):
        return udp.packet(ptype, body, seq=seq, engine_id=engine, session=session)

    script = [
        (HOST, p(R, engine=0), "accepted"),
        (HOST, p(T, raw[: 10 * tb], seq=0), "accepted"),  # no image yet: no match
        # another process of the host's: its address, another port and session id
        (LOADER, p(L, first_load[0], session=7), "accepted"),
        (LOADER, p(L, first_load[2], session=7), "bad_load"),  # a gap
        (LOADER, p(L, first_load[1], session=7), "accepted"),
        (LOADER, p(L, first_load[1], session=7), "bad_load"),  # an overlap
        (LOADER, p(L, first_load[2], engine=engine_id ^ 1, session=7), "bad_header"),
        (LOADER, p(L, first_load[2], session=7), "accepted"),  # in force from tuple 10
        (HOST, p(T, raw[10 * tb : 40 * tb], seq=1), "accepted"),
        (LOADER, p(L, bytes(5), engine=0, session=7), "accepted"),  # no bytes: STATUS only
        # a third station during the session: neither a load nor its STATUS
        (THIRD, p(L, udp.load_chunks(load(two, 20))[0], session=7), "foreign"),
        (THIRD, p(L, first_load[0]), "foreign"),  # (the session's id: still foreign)
        (THIRD, p(L, bytes(5), engine=0, session=7), "foreign"),
        (HOST, p(L, udp.load_chunks(bytes(damaged))[0]), "accepted"),
        (HOST, p(L, udp.load_chunks(load(image(first, other), 50))[0]), "accepted"),
        *((HOST, p(L, chunk), "accepted") for chunk in truncated),
        *((HOST, p(L, chunk), "accepted") for chunk in udp.load_chunks(load(two, 60), 30)),
        (HOST, p(T, raw[40 * tb : 77 * tb], seq=2), "accepted"),  # the switch at 60
        # the same load again (a loader whose answer was lost): not applied twice (at 77)
        *((HOST, p(L, chunk), "accepted") for chunk in udp.load_chunks(load(two, 60), 30)),
        (HOST, p(T, raw[77 * tb : 90 * tb], seq=3), "accepted"),
        (HOST, p(S), "accepted"),
        (HOST, p(L, first_load[0]), "accepted"),  # a load under way at RESET ...
        (HOST, p(R), "accepted"),  # (the second image stays in force)
        (HOST, p(L, first_load[1]), "accepted"),
        (HOST, p(L, first_load[2]), "accepted"),  # ... is refused (its CRC started again)
        (HOST, p(T, raw[: 30 * tb], seq=0), "accepted"),
        (HOST, p(C), "accepted"),
        (THIRD, p(L, bytes(5), engine=0, session=9), "accepted"),  # no session: anyone loads
    ]
    return script, data, (one, two)


@pytest.mark.slow
def test_programmable_gateware_and_model_load_alike(tmp_path):
    """LOAD over the link, the gateware (a programmable engine behind the UDP top) and the
    software board answer byte for byte: chunks reassembled in order (a gap, an overlap and
    another engine's refused and counted), from another port of the session's host; a third
    station's loads during the session ``foreign``, unanswered, changing nothing; a damaged, a
    foreign and a truncated load refused with the first query still running; the second
    in force from its tuple. The records are the reference run of the switch, and STATUS
    names the image in force and the tuple it took over at (0 after RESET) across RESET."""
    from nfacep.hdl.programmable import ProgrammableEngine
    from nfacep.image import Capacity, EngineShape
    from nfacep.links.protocol import engine_id as fingerprint
    from nfacep.reference.matcher import run_switched

    (tmp_path / "first.sql").write_text(FIRST)
    (tmp_path / "second.sql").write_text(SECOND)
    first, second = compile_file(tmp_path / "first.sql"), compile_file(tmp_path / "second.sql")
    engine_id = fingerprint(first, PROGRAMMABLE)
    assert engine_id == fingerprint(second, PROGRAMMABLE)  # one engine for both files
    script, data, (one, two) = _programmable_script(first, second, engine_id)
    program = first.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(PROGRAMMABLE))
    engine = ProgrammableEngine(shape, PROGRAMMABLE)
    frames = _gateware(first, None, script, engine=engine, settle=700)
    hw = [[_udp(frame) for frame in step] for step in frames]
    model = UdpBoardModel(first, PROGRAMMABLE)
    assert model.id == engine_id
    sw = [model.feed(payload, (".".join(map(str, s.ip)), s.port)) for s, payload, _ in script]
    classes = {}
    for i, ((sender, payload, verdict), got, want) in enumerate(zip(script, hw, sw, strict=True)):
        where = f"step {i} ({verdict} from {sender})"
        hw_bytes = [(".".join(map(str, dst.ip)), dst.port, d) for dst, d in got]
        assert hw_bytes == [(ip, port, d) for (ip, port), d in want], where
        if verdict != "accepted":
            assert not got, where
        elif payload[1] == PacketType.LOAD:  # STATUS to the loader, its session id
            assert got[-1][0] == sender
            assert udp.decode_header(got[-1][1])["session"] == udp.decode_header(payload)["session"]
        classes[verdict] = classes.get(verdict, 0) + 1
    reset = len(script) - 6
    status = _status(hw[reset - 2][-1][1])  # the STATUS before the second RESET
    assert status["bad_load"] == 2 and status["bad_header"] == 1 and status["foreign"] == 3
    assert status["refused"] == 3 and status["load_offset"] == 0
    assert status["image"].to_bytes(8, "little").hex() == two.fingerprint
    assert status["image_from"] == 60  # (the switch's tuple; the repeat at 77 changed nothing)
    assert (status["engine"], status["states"], status["atoms"], status["queries"]) == (1, 4, 4, 2)
    after_reset = _status(hw[reset][-1][1])
    assert after_reset["image"] == status["image"] and after_reset["tuples"] == 0
    assert after_reset["image_from"] == 0  # (in force for every tuple since RESET)
    assert after_reset["load_offset"] == 20  # (the load under way goes on)
    closed = _status(hw[-2][-1][1])
    assert closed["refused"] == 1 and closed["image"] == status["image"]
    assert hw[-1][-1][0] == THIRD and _status(hw[-1][-1][1])["image"] == status["image"]
    loaded = _status(hw[9][-1][1])
    assert loaded["image"].to_bytes(8, "little").hex() == one.fingerprint
    assert loaded["image_from"] == 10
    # the records of the first run: no image before tuple 10, the first file to 60, then the
    # second (the switch's reference run)
    fmt = wire.record_format(first, slots=2)
    records = [
        fmt.decode_bytes(d[udp.HEADER_BYTES :][at : at + fmt.nbytes])
        for step in hw[: reset - 2]
        for _, d in step
        if d[1] == PacketType.RECORDS
        for at in range(0, len(d) - udp.HEADER_BYTES, fmt.nbytes)
    ]
    fixed = EngineParams(partitions=PARTITIONS)
    before, after = run_switched(first, second, data, 60, fixed)
    # (the repeat applied again at 77 would have cleared the partitions: other records)
    _, again = run_switched(second, second, data, 77, fixed)
    kept = [r[:4] for r in after.records(second, data) if r.seq >= 77]
    assert kept != [r[:4] for r in again.records(second, data)]
    want = [r for r in before.records(first, data) if r.seq >= 10 or r.dropped]
    want += after.records(second, data)
    assert [r[:4] for r in records] == [r[:4] for r in want]
    assert any(r.seq < 60 and r.matches for r in records)
    assert any(r.seq >= 60 and r.matches for r in records)


def _udp(frame: bytes) -> tuple[Endpoint, bytes]:
    """A UDP frame the board sent: (destination, payload)."""
    parsed = udp.parse_frame(frame)
    return parsed["dst"], parsed["payload"]


# --- the answer to a LOAD once its bytes are in the engine ----------------------------------


def _programmable_top(engine_mhz):
    """The UDP top with the programmable engine (:data:`PROGRAMMABLE`, for :data:`FIRST`'s
    stream; on the receive clock, or on a clock of its own ``eng`` at ``engine_mhz``) in a
    bench whose ``sync`` is the receive clock: (bench, top, engine)."""
    from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Module

    from nfacep.hdl.eth.top import UdpTop
    from nfacep.hdl.programmable import ProgrammableEngine
    from nfacep.image import Capacity, EngineShape

    program = _first().program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(PROGRAMMABLE))
    engine = ProgrammableEngine(shape, PROGRAMMABLE)
    top = UdpTop(engine, mac=BOARD.mac, ip=BOARD.ip, port=BOARD.port, engine_clock=bool(engine_mhz))

    class Bench(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.submodules.top = top
            m.d.comb += top.rx_clk.eq(ClockSignal("sync"))
            if engine_mhz:
                m.domains.eng = ClockDomain("eng")
                m.d.comb += top.engine_clk.eq(ClockSignal("eng"))
            return m

    return Bench(), top, engine


def _answers(top, got: dict):
    """A background testbench: the UDP payloads ``top`` sends, in ``got["answers"]``, and
    ``got["now"]`` when each began, in ``got["at_start"]``."""

    async def watch(ctx):
        frame = bytearray()
        async for _, _, en, byte in ctx.tick().sample(top.tx_en, top.txd):
            if en and not frame:
                got["at_start"].append(got["now"])
            if en:
                frame.append(byte)
            elif frame:
                got["answers"].append(_udp(bytes(frame[8:-4]))[1])
                frame = bytearray()

    return watch


def _as_nfacep_load_sends(data: bytes) -> list[list[tuple[Endpoint, bytes]]]:
    """The load ``data`` from :data:`LOADER` as ``nfacep load`` sends it: the bulk, then the
    last ``LOAD_TAIL`` bytes (two parts for :func:`_loads_back_to_back`)."""
    from nfacep.links.protocol import engine_id

    number = engine_id(_first(), PROGRAMMABLE)
    tail_at = len(data) - udp.LOAD_TAIL
    return [
        [
            (LOADER, udp.packet(PacketType.LOAD, chunk, engine_id=number, session=7))
            for chunk in udp.load_chunks(data, start=start, end=end)
        ]
        for start, end in ((0, tail_at), (tail_at, None))
    ]


def _loads_back_to_back(engine_mhz, parts):
    """:func:`_programmable_top` in Amaranth's simulator: after RESET, the packets of each
    part of ``parts`` (lists of (sender, UDP payload)) back to back, the next part the moment
    the board's answer to the last packet of the part before has left it (a host taking no
    time). Returns the script (sender, UDP payload), the answers (UDP payloads, in order)
    and, for each answer, the load bytes the engine had taken (at its configuration port)
    when the answer began to leave."""
    from amaranth.sim import Simulator

    bench, top, engine = _programmable_top(engine_mhz)
    script = [(HOST, udp.packet(PacketType.RESET, session=SESSION))]
    got = {"answers": [], "at_start": [], "now": 0}

    async def send(ctx, sender, payload):
        frame = udp.udp_frame(sender, BOARD, payload)
        for byte in b"\x55" * 7 + b"\xd5" + frame + udp.ethernet_fcs(frame):
            ctx.set(top.rxd, byte)
            ctx.set(top.rx_dv, 1)
            await ctx.tick()
        ctx.set(top.rx_dv, 0)
        await ctx.tick().repeat(12)  # (the minimum gap)

    async def drive(ctx):
        await ctx.tick().repeat(20)
        await send(ctx, *script[0])
        await ctx.tick().repeat(400)  # (RESET settles)
        for part in parts:
            for sender, payload in part:
                script.append((sender, payload))
                await send(ctx, sender, payload)
            for _ in range(20000):  # (one answer to each packet; a missing one fails the test)
                if len(got["answers"]) == len(script):
                    break
                await ctx.tick()

    async def taken(ctx):  # the load bytes the engine took, on its clock
        port = engine.i_config
        async for _, _, valid, ready in ctx.tick("eng" if engine_mhz else "sync").sample(
            port.valid, port.ready
        ):
            got["now"] += valid and ready

    sim = Simulator(bench)
    sim.add_clock(8e-9)
    if engine_mhz:
        sim.add_clock(1e-6 / engine_mhz, domain="eng")
    sim.add_testbench(drive)
    sim.add_testbench(_answers(top, got), background=True)
    sim.add_testbench(taken, background=True)
    sim.run()
    return script, got["answers"], got["at_start"]


def _first():
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        query = pathlib.Path(folder) / "first.sql"
        query.write_text(FIRST)
        return compile_file(query)


@pytest.mark.slow
@pytest.mark.parametrize("engine_mhz", [None, 25.0])
def test_a_load_is_answered_once_its_bytes_are_in_the_engine(engine_mhz):
    """The board answers a LOAD with bytes once they are all in the engine, and a load's last
    chunk once the engine checked the load: sent as ``nfacep load`` sends it, the tail the
    moment the bulk's answer arrives (a host taking no time), the bulk is in the engine when
    its answer leaves, and the answer to the tail tells the outcome: a good load in force
    (from tuple 0), a damaged one refused, the query in force unchanged; with the engine on
    the receive clock or on a slow one of its own. The answers are the software board's
    (infinitely fast), byte for byte."""
    check_loads_answered_once_in(engine_mhz)


@pytest.mark.slow
@pytest.mark.parametrize("engine_mhz", [None, 25.0])
def test_an_answer_made_as_the_bytes_enter_is_caught(monkeypatch, engine_mhz):
    """A link that answers a LOAD with bytes as its event comes (``BREAK_ANSWER``), as it did
    before 2026-11-28, before they are in the engine: the bulk is not all in the engine when
    its answer leaves, and the answer to the load's last chunk does not count the load."""
    from nfacep.hdl.eth import link_events

    monkeypatch.setattr(link_events, "BREAK_ANSWER", "early")
    with pytest.raises(AssertionError):
        check_loads_answered_once_in(engine_mhz)


@pytest.mark.slow
def test_an_answer_without_the_loads_sender_is_caught(monkeypatch):
    """The LOAD's sender and session are taken a cycle after its event, from a register of
    their own; a link that never takes them (``BREAK_ANSWER = "no sender"``) answers with
    another session's id, and the checks of
    :func:`test_a_load_is_answered_once_its_bytes_are_in_the_engine` fail."""
    from nfacep.hdl.eth import link_events

    monkeypatch.setattr(link_events, "BREAK_ANSWER", "no sender")
    with pytest.raises(AssertionError):
        check_loads_answered_once_in(None)


def check_loads_answered_once_in(engine_mhz):
    """:func:`test_a_load_is_answered_once_its_bytes_are_in_the_engine`'s checks."""
    from nfacep.image import Capacity, EngineShape, image, load

    first = _first()
    program = first.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(PROGRAMMABLE))
    one = image(first, shape)
    good = load(one, 0)
    damaged = bytearray(good)
    damaged[30] ^= 1
    parts = _as_nfacep_load_sends(good) + _as_nfacep_load_sends(bytes(damaged))
    script, answers, at_start = _loads_back_to_back(engine_mhz, parts)
    assert len(answers) == len(script) == 5  # (RESET's, then one per LOAD)
    statuses = [_status(a) for a in answers]
    bulk = len(good) - udp.LOAD_TAIL
    # the bulk in the engine when its answer leaves; the whole load (its last byte checked)
    # when the tail's does
    assert at_start[1:] == [bulk, len(good), len(good) + bulk, 2 * len(good)]
    named = int.from_bytes(bytes.fromhex(one.fingerprint), "little")
    assert [s["image"] for s in statuses[1:]] == [0, named, named, named]
    assert [s["refused"] for s in statuses[1:]] == [0, 0, 0, 1]
    assert statuses[2]["image_from"] == 0 and statuses[2]["load_offset"] == 0
    assert [s["load_offset"] for s in statuses[1:]] == [bulk, 0, bulk, 0]
    for (_, payload), answer in zip(script[1:], answers[1:], strict=True):
        assert udp.decode_header(answer)["session"] == udp.decode_header(payload)["session"]
    # (RESET's answer says the engine is not idle with the engine's domain in reset)
    model = UdpBoardModel(first, PROGRAMMABLE)
    want = [model.feed(payload, (".".join(map(str, s.ip)), s.port)) for s, payload in script]
    assert [[d for _, d in w] for w in want[1:]] == [[a] for a in answers[1:]]


@pytest.mark.slow
def test_a_load_under_way_at_reset_is_refused_and_its_answer_still_comes():
    """With the engine on a slow clock of its own, RESET right behind a load's bulk, while the
    bulk's bytes still cross into the engine: RESET's answer goes to the session's host at
    once, the bulk's to the loader once its bytes are in the engine (RESET does not empty
    the crossing of loads); the load is refused when its tail comes (the engine's check of it
    started again), and the same load sent again is in force. The answers from the tail on
    are the software board's, byte for byte."""
    from nfacep.image import Capacity, EngineShape, image, load

    first = _first()
    program = first.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(PROGRAMMABLE))
    one = image(first, shape)
    good = load(one, 0)
    bulk, tail = _as_nfacep_load_sends(good)
    reset = (HOST, udp.packet(PacketType.RESET, session=SESSION))
    parts = [[*bulk, reset], tail, *_as_nfacep_load_sends(good)]
    script, answers, at_start = _loads_back_to_back(25.0, parts)
    assert len(answers) == len(script) == 6
    heads = [udp.decode_header(a)["session"] for a in answers]
    assert heads == [SESSION, SESSION, 7, 7, 7, 7]  # (RESET's answer before the bulk's)
    assert at_start[2] == len(bulk[-1][1]) - udp.HEADER_BYTES - udp.LOAD_HEADER_BYTES
    statuses = [_status(a) for a in answers]
    named = int.from_bytes(bytes.fromhex(one.fingerprint), "little")
    assert [s["image"] for s in statuses[2:]] == [0, 0, 0, named]
    assert [s["refused"] for s in statuses[2:]] == [0, 1, 1, 1]
    model = UdpBoardModel(first, PROGRAMMABLE)
    want = [model.feed(payload, (".".join(map(str, s.ip)), s.port)) for s, payload in script]
    assert [d for w in want[3:] for _, d in w] == answers[3:]
