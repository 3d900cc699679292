"""Captures of the UDP link (``nfacep serve --pcap``; ``nfacep sim --link udp --pcap`` in
``test_sim_udp.py``) read by ``tshark`` with the repository's Wireshark dissector
(``links/udp/nfacep.lua``): no malformed frame, the IPv4 and UDP checksums verified, and the
tuples and records in the capture those of the run."""

from __future__ import annotations

import json
import re
import signal

import pytest
from test_serve import _start
from test_udp_host import QUERIES, reference, run
from tshark import DISSECTOR, capture_counts, dissect, flagged, require_tshark

from nfacep.links.protocol import fields_size
from nfacep.links.udp import protocol as udp
from nfacep.links.udp.pcap import PcapWriter, SocketCapture, read_pcap
from nfacep.links.udp.protocol import STATUS_FIELDS, VERSION, PacketType


def test_the_dissector_reads_the_format_protocol_py_defines():
    """The Lua dissector's version and STATUS fields are protocol.py's (its one definition)."""
    lua = DISSECTOR.read_text()
    assert f"local VERSION = {VERSION}\n" in lua
    block = lua[lua.index("local STATUS_FIELDS = {") : lua.index("}\n\nlocal nfacep")]
    fields = tuple((name, int(size)) for name, size in re.findall(r'\{ "(\w+)", (\d) \}', block))
    assert fields == STATUS_FIELDS


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
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=10)
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
    """A partial tuple, a command with a body, a spoiled IPv4 checksum and a spoiled UDP
    checksum are each flagged; the well-formed frames around them are not."""
    require_tshark()
    board, host = udp.DEFAULT_ENDPOINT, udp.Endpoint.parse("02:00:00:00:00:01", "192.0.2.1", 40000)
    status = udp.encode_header(PacketType.STATUS, session=7) + bytes(fields_size(STATUS_FIELDS))
    status = status[:16] + (3).to_bytes(2, "little") + status[18:]  # tuple_bytes 3
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
    pcap = tmp_path / "bad.pcap"
    with PcapWriter(pcap) as capture:
        for k, frame in enumerate(frames):
            capture.write(frame, 1000 * k)
    numbers = [int(line.split()[0]) for line in flagged(pcap)]
    assert numbers == [3, 4, 5, 6]
    assert [r["nfacep.tuples"] for r in dissect(pcap)][:2] == ["", "2"]


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
