"""Captures of the UDP link (``nfacep serve --pcap``; ``nfacep sim --link udp --pcap`` in
``test_sim_udp.py``) read by ``tshark`` with the repository's Wireshark dissector
(``links/udp/nfacep.lua``): no malformed frame, the IPv4 and UDP checksums verified, and the
tuples and records in the capture those of the run."""

from __future__ import annotations

import json
import re

import pytest
from test_serve import _start, stop
from test_udp_host import QUERIES, reference, run
from tshark import DISSECTOR, capture_counts, dissect, flagged, require_tshark

from nfacep.links.protocol import ENGINE_FIELDS, SWITCH_BYTES
from nfacep.links.udp import protocol as udp
from nfacep.links.udp.pcap import PcapWriter, SocketCapture, read_pcap
from nfacep.links.udp.protocol import STATUS_FIELDS, VERSION, PacketType
from nfacep.params import STORES


def _lua_table(lua: str, name: str) -> str:
    """The text of the Lua dissector's table ``local name = { ... }``."""
    start = lua.index(f"local {name} = {{")
    return lua[start : lua.index("}\n", start) + 1]


def test_the_dissector_reads_the_format_protocol_py_defines():
    """The Lua dissector's version, header size, types and STATUS fields (the engine
    parameters among them, ``store`` named as :data:`nfacep.params.STORES` does) are
    protocol.py's (its one definition)."""
    lua = DISSECTOR.read_text()
    assert f"local VERSION = {VERSION}\n" in lua
    assert f"local HEADER_BYTES = {udp.HEADER_BYTES}\n" in lua
    assert f"local SWITCH_BYTES = {SWITCH_BYTES}\n" in lua
    block = _lua_table(lua, "STATUS_FIELDS")
    fields = tuple((name, int(size)) for name, size in re.findall(r'\{ "(\w+)", (\d) \}', block))
    assert fields == STATUS_FIELDS
    assert set(ENGINE_FIELDS) <= set(fields)
    types = re.findall(r'\[0x([0-9a-f]{2})\] = "(\w+)"', _lua_table(lua, "TYPES"))
    codes = {name: code for name, code in vars(PacketType).items() if name.isupper()}
    assert {name: int(code, 16) for code, name in types} == codes
    stores = re.findall(r'\[(\d)\] = "(\w+)"', _lua_table(lua, "STORES"))
    assert stores == [(str(k), name) for k, name in enumerate(STORES)]


@pytest.mark.slow
def test_serve_writes_a_capture_tshark_dissects(tmp_path, capsys):
    """``nfacep serve --pcap``: every datagram both ways as frames on the wire, which tshark with
    the dissector finds well formed, with good checksums (the host's UDP checksums present, the
    board's absent as the gateware's), holding the run's tuples and records."""
    require_tshark()
    name, pcap = "supplychain", tmp_path / "serve.pcap"
    switches = ("--param", "big=20000", "--param", "big=5000@150")
    expected, _ = reference(tmp_path, name, *switches)
    proc, address = _start(
        str(QUERIES / f"{name}.sql"),
        "--udp",
        "127.0.0.1:0",
        "--param",
        "big=20000",
        "--pcap",
        str(pcap),
    )
    try:
        code, out = run(address, tmp_path, name, *switches)
        assert code == 0, capsys.readouterr().err
    finally:
        rest, err = stop(proc)
    assert proc.returncode == 0 and f"capture -> {pcap}" in rest, err
    summary = json.loads((tmp_path / "board.summary.json").read_text())
    assert summary["link"]["attempts"] == 1  # (a run started again would send tuples twice)
    counts = capture_counts(pcap)
    assert counts["tuples"] == summary["tuples"] == 309
    assert counts["records"] == summary["board"]["records"] > 0
    frames = read_pcap(pcap)
    assert counts["frames"] == len(frames)
    sent = sum(1 for _, frame in frames if frame[6:12] != udp.DEFAULT_ENDPOINT.mac)
    assert counts["udp_checksums"] == sent > 0  # the host's datagrams carry one
    types = [r["nfacep.type"] for r in counts["rows"]]
    assert types[:2] == ["0x03", "0x82"] and "0x04" in types and types[-1] == "0x82"  # PARAMS
    assert out.read_text() == expected


def test_the_dissector_flags_what_breaks_the_format(tmp_path):
    """A partial tuple, a command with a body, a spoiled IPv4 checksum, a spoiled UDP
    checksum and a LOAD without its offset and flags are each flagged; the well-formed frames
    around them are not, and a LOAD chunk's offset, last flag and bytes are read."""
    require_tshark()
    board, host = udp.DEFAULT_ENDPOINT, udp.Endpoint.parse("02:00:00:00:00:01", "192.0.2.1", 40000)
    # tuple_bytes 3, an engine's parameters and counters: every field a value of its own
    values = {"tuple_bytes": 3, "record_bytes": 5, "store": 1, "partitions": 70000, "ways": 4}
    values |= {name: 100 + k for k, (name, _) in enumerate(STATUS_FIELDS) if name not in values}
    body = b"".join(values[name].to_bytes(n, "little") for name, n in STATUS_FIELDS)
    status = udp.encode_header(PacketType.STATUS, session=7) + body
    good = udp.packet(PacketType.TUPLES, bytes(6), engine_id=1, session=7)
    frames = [
        udp.udp_frame(board, host, status),
        udp.udp_frame(host, board, good, udp_checksum=True),
        udp.udp_frame(host, board, udp.packet(PacketType.TUPLES, bytes(7), session=7)),
        udp.udp_frame(host, board, udp.packet(PacketType.RESET, b"x", session=7)),
        udp.udp_frame(host, board, good, checksum_delta=1),
    ]
    spoiled = bytearray(udp.udp_frame(host, board, good, udp_checksum=True))
    spoiled[40] ^= 1  # the UDP checksum
    frames.append(bytes(spoiled))
    # a LOAD chunk (its offset, last flag and bytes), and one without its offset and flags
    chunk = udp.load_chunks(bytes(range(40)), 30, start=0)[1]
    frames.append(udp.udp_frame(host, board, udp.packet(PacketType.LOAD, chunk, session=7)))
    frames.append(udp.udp_frame(host, board, udp.packet(PacketType.LOAD, b"\0\0", session=7)))
    pcap = tmp_path / "bad.pcap"
    with PcapWriter(pcap) as capture:
        for k, frame in enumerate(frames):
            capture.write(frame, 1000 * k)
    numbers = [int(line.split()[0]) for line in flagged(pcap)]
    assert numbers == [3, 4, 5, 6, 8]
    load = dissect(pcap, ("nfacep.load.offset", "nfacep.load.last", "nfacep.load.bytes"))[6]
    assert load["nfacep.load.offset"] == "30" and load["nfacep.load.last"] == "1"
    assert load["nfacep.load.bytes"] == bytes(range(30, 40)).hex()
    assert [r["nfacep.tuples"] for r in dissect(pcap)][:2] == ["", "2"]
    names = [f"nfacep.status.{name}" for name, _ in STATUS_FIELDS]
    (row, *_) = dissect(pcap, names)
    # (the image fingerprint in hex, every other field in decimal)
    assert {name: int(row[f"nfacep.status.{name}"], 0) for name, _ in STATUS_FIELDS} == values


def test_a_socket_capture_frames_datagrams_as_the_wire_would(tmp_path):
    """The frames :class:`SocketCapture` synthesizes parse as the board's would; the host's
    carry a UDP checksum that sums to zero with the pseudo-header."""
    pcap = tmp_path / "s.pcap"
    capture = SocketCapture.at(pcap, ("192.0.2.2", 5000), clock=iter(range(10, 100, 10)).__next__)
    capture.received(udp.packet(PacketType.RESET, session=5), ("192.0.2.1", 40000))
    capture.sent(udp.packet(PacketType.STATUS, bytes(8), session=5), ("192.0.2.1", 40000))
    capture.close()
    (t0, up), (t1, down) = read_pcap(pcap)
    assert (t0, t1) == (10, 20)
    parsed = udp.parse_frame(up)
    assert parsed["src"].port == 40000 and parsed["dst"] == udp.Endpoint(
        udp.DEFAULT_ENDPOINT.mac, bytes([192, 0, 2, 2]), 5000
    )
    segment = up[34 : 34 + 8 + udp.HEADER_BYTES]
    pseudo = up[26:34] + bytes([0, 17]) + len(segment).to_bytes(2, "big")
    assert udp.ip_checksum(pseudo + segment) == 0 and segment[6:8] != bytes(2)
    assert udp.parse_frame(down)["payload"][1] == PacketType.STATUS and down[40:42] == bytes(2)
