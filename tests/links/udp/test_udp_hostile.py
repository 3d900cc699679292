"""``nfacep run --udp`` against a scripted hostile board: the host trusts nothing it receives.

The board is the software board (:class:`nfacep.links.udp.model.UdpBoardModel`) on 127.0.0.1
behind a twist that changes what it sends: duplicates, reorders, a packet number jumping by
2**31, records the counters do not count, partial records, packets of another version or
session, a RESET that clears nothing, a count of tuples beyond those sent. Each case ends
within its timeout with the documented exit code and one short message, no traceback, and
nothing written unless the run is right (then the match file is ``nfacep match``'s).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import pytest
from test_udp_host import QUERIES, reference, run

from nfacep import compile_file, wire
from nfacep.links.udp.model import UdpBoardModel
from nfacep.links.udp.protocol import (
    HEADER_BYTES,
    VERSION,
    PacketType,
    decode_header,
    encode_header,
    packet,
)
from nfacep.params import default_engine

NAME = "marathon"


def _with(payload: bytes, **fields) -> bytes:
    """``payload`` with header fields changed."""
    head = decode_header(payload)
    head.update(fields)
    return (
        encode_header(
            head["type"],
            head["seq"],
            head["engine_id"],
            version=head["version"],
            reserved=head["reserved"],
            session=head["session"],
        )
        + payload[HEADER_BYTES:]
    )


def _kind(payload: bytes) -> int:
    return payload[1]


@contextlib.contextmanager
def hostile(twist, **kwargs):
    """The software board for marathon on 127.0.0.1, its answers passed through ``twist(model,
    request, answers)`` (a list of (address, payload) pairs in, the pairs to send out)."""
    nfa = compile_file(QUERIES / f"{NAME}.sql")
    model = UdpBoardModel(nfa, default_engine(nfa), **kwargs)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.02)
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            try:
                data, sender = sock.recvfrom(65536)
            except TimeoutError:
                continue
            for address, payload in twist(model, data, model.feed(data, sender)):
                sock.sendto(payload, address)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield model, f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        sock.close()


def _run(twist, tmp_path, *more, **kwargs):
    """Run marathon through the twisted board; (exit code, output file, seconds)."""
    started = time.monotonic()
    with hostile(twist, **kwargs) as (_, address):
        code, out = run(address, tmp_path, NAME, "--timeout", "1", *more)
    return code, out, time.monotonic() - started


def _failed(code, out, seconds, capsys, exit_code, *words):
    """The run ended in time with ``exit_code`` and one short message naming ``words``, no
    traceback, nothing written."""
    err = capsys.readouterr().err
    assert code == exit_code, err
    assert seconds < 15
    assert not out.exists() and not out.with_suffix(".summary.json").exists()
    assert "Traceback" not in err, err
    # (progress lines are "nfacep run: ..."; the failure is one line)
    (line,) = [x for x in err.splitlines() if x.startswith("nfacep: ")]
    assert len(line) < 400, line
    for word in words:
        assert word in line, err
    return line


def duplicated_and_reordered():
    """A twist of :func:`hostile`'s: every packet of the board's twice, and each RECORDS packet
    after the packet the board sent next (another RECORDS or a STATUS)."""
    held: list = []  # a RECORDS packet kept back until the board's next packet is out

    def twist(model, request, answers):
        out = []
        for answer in answers:
            if _kind(answer[1]) == PacketType.RECORDS and not held:
                held.append(answer)
                continue
            out.append(answer)
            out += held
            held.clear()
        return [a for a in out for _ in range(2)]

    return twist


def test_duplicated_and_reordered_answers_give_the_exact_match_file(tmp_path, capsys):
    """Every packet of the board's twice, and each RECORDS packet after the packet the board
    sent next (another RECORDS or a STATUS, the last one too): the records are taken once
    each, in the board's order; the summary counts the duplicates."""
    expected, _ = reference(tmp_path, NAME)

    code, out, _ = _run(duplicated_and_reordered(), tmp_path, "--tuples-per-packet", "3")
    assert code == 0, capsys.readouterr().err
    assert out.read_text() == expected
    link = json.loads(out.with_suffix(".summary.json").read_text())["link"]
    # (the second copies of the 8 RECORDS packets and of the STATUS answers the host read
    # before it was done: the last ones may come after it closed the socket)
    assert link["attempts"] == 1 and link["ignored_packets_in"]["duplicate"] >= 7


def test_stray_packets_are_ignored_and_counted(tmp_path, capsys):
    """Packets of another version (an older board's) and of another session beside each
    answer: ignored, counted in the summary, the run unaffected."""
    expected, _ = reference(tmp_path, NAME)

    def twist(model, request, answers):
        out = []
        for address, payload in answers:
            out += [
                (address, _with(payload, version=2)),
                (address, _with(payload, session=decode_header(payload)["session"] ^ 1)),
                (address, payload),
            ]
        return out

    code, out, _ = _run(twist, tmp_path)
    assert code == 0, capsys.readouterr().err
    assert out.read_text() == expected
    ignored = json.loads(out.with_suffix(".summary.json").read_text())["link"]["ignored_packets_in"]
    assert ignored["other_version"] > 0 and ignored["other_session"] > 0


def test_a_board_of_the_old_version_is_named(tmp_path, capsys):
    def twist(model, request, answers):
        return [(address, _with(payload, version=3)) for address, payload in answers]

    err = _failed(*_run(twist, tmp_path), capsys, 2, "version 3", "rebuild the bitstream")
    assert f"version {VERSION}" in err


def test_a_packet_number_jump_of_2_31_is_a_contradiction_not_a_walk(tmp_path, capsys):
    """The last STATUS numbered 2**31 past the others, a RECORDS packet missing: the host
    does not walk two billion packet numbers; the board contradicts itself (exit 1)."""

    def twist(model, request, answers):
        out = []
        for address, payload in answers:
            head = decode_header(payload)
            if head["type"] == PacketType.RECORDS and head["seq"] == 2:
                continue  # lost
            if head["type"] == PacketType.STATUS and model.taken() == 278:
                payload = _with(payload, seq=head["seq"] + 2**31)
            out.append((address, payload))
        return out

    _failed(*_run(twist, tmp_path), capsys, 1, "contradicts itself", "nothing was written")


def test_a_record_the_counters_do_not_count_is_a_contradiction(tmp_path, capsys):
    """An extra RECORDS packet: a match for tuple 3, which never matched, that no counter
    counts: an error (exit 1), nothing written (not a warning and a match file)."""
    nfa = compile_file(QUERIES / f"{NAME}.sql")
    fmt = wire.record_format(nfa)
    fake = fmt.encode_bytes(wire.Record(3, 0, 1, 0, 0))

    def twist(model, request, answers):
        if _kind(request) == PacketType.TUPLES and decode_header(request)["seq"] == 0:
            extra = packet(
                PacketType.RECORDS, fake, seq=model.seq, engine_id=model.id, session=model.session
            )
            model.seq += 1  # (numbered as the board's own: no gap)
            answers = [*answers, (model.peer, extra)]
        return answers

    _failed(*_run(twist, tmp_path), capsys, 1, "contradicts itself")


def test_partial_records_and_a_lost_packet_in_every_attempt_fail_briefly(tmp_path, capsys):
    """Every attempt's first RECORDS packet a byte short (a partial record): unreadable, so
    records are missing in each attempt; after --retries the run fails with one short line
    (not a traceback, not the losses repeated)."""

    armed = []

    def twist(model, request, answers):
        if _kind(request) == PacketType.RESET:
            armed.append(True)
        out = []
        for address, payload in answers:
            if _kind(payload) == PacketType.RECORDS and armed:
                payload = payload[:-1]
                armed.clear()
            out.append((address, payload))
        return out

    _failed(
        *_run(twist, tmp_path, "--retries", "3"),
        capsys,
        1,
        "in each of 4 attempts",
        "nothing was written",
    )


def test_a_board_that_ignores_reset_is_an_error(tmp_path, capsys):
    """A board whose RESET clears nothing (its STATUS still counts tuples): the host does not
    stream anyway; it says so (exit 1)."""

    def twist(model, request, answers):
        if _kind(request) == PacketType.RESET:
            model.accepted += bytes(model.tuple_bytes * 5)  # (the tuples it did not clear)
            model.reported = model.taken()
            answers = [(model.peer, model._status_packet())]
        return answers

    _failed(*_run(twist, tmp_path), capsys, 1, "does not clear on RESET")


def test_a_board_that_takes_more_tuples_than_sent_is_a_contradiction(tmp_path, capsys):
    def twist(model, request, answers):
        if _kind(request) == PacketType.TUPLES:
            model.accepted += bytes(model.tuple_bytes * 1000)
            model.reported = model.taken()
        return answers

    _failed(*_run(twist, tmp_path), capsys, 1, "contradicts itself", "tuples taken")


def test_a_board_that_takes_nothing_times_out(tmp_path, capsys):
    """A board that answers STATUS but never takes a tuple: the host gives up after
    --timeout, not never."""

    def twist(model, request, answers):
        if _kind(request) == PacketType.TUPLES:
            model.accepted = bytearray()  # (as if nothing came)
            model.reported = 0
        return answers

    _failed(*_run(twist, tmp_path), capsys, 2, "--timeout 1 s")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "0.5"], "--rate '0.5': expected 1 to 1e+12 tuples per second"),
        (["--rate", "1e-300"], "--rate '1e-300': expected 1 to 1e+12"),
        (["--rate", "1e13"], "--rate '1e13': expected 1 to 1e+12"),
        (["--retries", "1000000000"], "--retries must be 0 to 100"),
    ],
)
def test_bounds_on_rate_and_retries(tmp_path, capsys, args, message):
    started = time.monotonic()
    code, out = run("127.0.0.1:9", tmp_path, NAME, *args)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert time.monotonic() - started < 5 and not out.exists()


def test_a_slow_rate_keeps_the_session_and_sends_small_packets(tmp_path, capsys):
    """--rate 400 (a packet every 50 ms, 20 tuples each): the run takes its time, keeps a
    session that ends after 0.5 s idle alive, and gives the exact match file."""
    expected, _ = reference(tmp_path, NAME)
    with hostile(lambda model, request, answers: answers, idle=0.5) as (model, address):
        code, out = run(address, tmp_path, NAME, "--rate", "400")
    assert code == 0, capsys.readouterr().err
    assert out.read_text() == expected
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["link"]["tuples_per_packet"] == 20
    assert model.counters["foreign"] == 0
