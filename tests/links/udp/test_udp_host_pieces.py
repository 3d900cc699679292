"""``nfacep run --udp`` reading its input and writing its matches in pieces (links/udp/host.py,
``UdpBoard.run_stream``; boards/UDP.md, "What the host holds").

Small pieces (a few tuples, through :func:`nfacep.backend.run_files`' ``chunk``) put many
piece boundaries in the bundled inputs: the match file must still be ``nfacep match``'s, with
packets lost, duplicated and reordered on the way (the lossy proxy of test_udp_host.py, the
twisted board of test_udp_hostile.py); a failure in a later piece must leave nothing at the
output path; and the host must never hold more than a few pieces of the input.
"""

from __future__ import annotations

import json
import time

import pytest
from alive import Alive, late_host
from test_udp_host import QUERIES, SWITCHES, board, proxy, reference, serving
from test_udp_hostile import _kind, duplicated_and_reordered, hostile

from nfacep import compile_file, wire
from nfacep.backend import run_files
from nfacep.cli import main
from nfacep.errors import DataError
from nfacep.links.host import LinkError
from nfacep.links.udp import host as udp_host
from nfacep.links.udp import stream as udp_stream
from nfacep.links.udp.model import UdpBoardModel
from nfacep.links.udp.protocol import PacketType, decode_header, packet
from nfacep.params import default_engine
from nfacep.settings import ParamValues

NAME = "marathon"
EXPECTED = (QUERIES / f"{NAME}.matches.csv").read_text()


def _run(address, tmp_path, chunk, *, query=None, input=None, **options):
    """Marathon (or ``query`` over ``input``) through the board at ``address`` in pieces of
    ``chunk`` tuples; the run's totals and the output path."""
    nfa = compile_file(query or QUERIES / f"{NAME}.sql")
    out = tmp_path / "board.csv"
    options.setdefault("tuples_per_packet", 5)
    totals = run_files(
        udp_host.UdpBoard(udp_host.UdpOptions(address=address, **options)),
        nfa,
        str(input or QUERIES / f"{NAME}.csv"),
        str(out),
        default_engine(nfa),
        chunk=chunk,
    )
    return totals, out


def _nth_records_packet(n: int, attempts=None):
    """A ``drop_down`` for the proxy: the ``n``-th RECORDS packet (0-based) of each attempt
    (of those in ``attempts``, counted by the host's RESETs; every attempt when None)."""
    seen: dict[int, int] = {}

    def lose(head, count, resets):
        if head["type"] != PacketType.RECORDS:
            return False
        seen[resets] = seen.get(resets, 0) + 1
        return seen[resets] == n + 1 and (attempts is None or resets in attempts)

    return lose


def _nothing_written(tmp_path, out) -> None:
    """No match file, no summary, and no temporary file of the run left beside them."""
    assert not out.exists() and not out.with_suffix(".summary.json").exists()
    assert {p.name for p in tmp_path.iterdir()} <= {"bad.csv", "reference.csv"}, list(
        tmp_path.iterdir()
    )


@pytest.mark.parametrize("chunk", [20, 100])
def test_pieces_give_the_match_file_with_losses_both_ways(tmp_path, chunk):
    """Attempt 1 loses a TUPLES packet in a later piece, attempt 2 its fourth RECORDS packet
    (tuple 105's): both start again from the first piece, and the third gives the exact
    match file."""

    def lose_up(head, count, resets):
        return head["type"] == PacketType.TUPLES and head["seq"] == 40 and resets == 1

    lose_down = _nth_records_packet(3, attempts={2})

    with (
        board(capacity=64) as (_, address),
        proxy(address, drop_up=lose_up, drop_down=lose_down) as p,
    ):
        totals, out = _run(p.address, tmp_path, chunk)
    assert [(way, kind) for way, kind, _ in p.dropped] == [
        ("up", PacketType.TUPLES),
        ("down", PacketType.RECORDS),
    ]
    assert out.read_text() == EXPECTED
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["tuples"] == totals.n == 278
    assert summary["link"]["attempts"] == 3
    assert "TUPLES packets 40-40" in summary["link"]["losses"][0]
    assert "1 RECORDS packets" in summary["link"]["losses"][1]
    assert summary["board"]["tuples"] == 278
    assert any("lost packets" in w for w in totals.warnings)


def test_pieces_with_duplicated_and_reordered_answers(tmp_path):
    """Every packet of the board's twice and each RECORDS packet sent after the next one (the
    STATUS that drains a piece among them): taken once each, in the board's order, across
    pieces of 7 tuples; the duplicates of packets already written are counted, not taken."""
    with hostile(duplicated_and_reordered()) as (_, address):
        totals, out = _run(address, tmp_path, 7, tuples_per_packet=3, timeout=2)
    assert out.read_text() == EXPECTED
    link = json.loads(out.with_suffix(".summary.json").read_text())["link"]
    assert link["attempts"] == 1 and link["ignored_packets_in"]["duplicate"] > 10
    assert totals.n == 278 and totals.matches == EXPECTED.count("\n") - 1


@pytest.mark.slow  # (the late answers: some seconds of sleep)
def test_late_status_answers_are_not_losses(tmp_path, monkeypatch):
    """The board answers every seventh STATUS request 0.3 s late, later than the host asks
    again (0.2 s), as a busy machine's software board does: two answers come, the second
    after the host took the first; the run is exact in one attempt, with nothing reported
    lost (an answer taken for the next request's showed TUPLES packets lost, in every
    attempt)."""
    feed, asked = UdpBoardModel.feed, [0]

    def late(self, data, sender):
        if data[1] == PacketType.STATUS_REQ:
            asked[0] += 1
            if asked[0] % 7 == 0:
                time.sleep(0.3)
        return feed(self, data, sender)

    monkeypatch.setattr(UdpBoardModel, "feed", late)
    with board(capacity=64) as (_, address):
        totals, out = _run(address, tmp_path, 50)
    assert out.read_text() == EXPECTED and totals.n == 278
    link = json.loads(out.with_suffix(".summary.json").read_text())["link"]
    assert link["attempts"] == 1 and link["losses"] == [], link["losses"]
    assert asked[0] >= 14  # (some answers were late)


def test_pieces_with_measures(tmp_path):
    """Measures that read a match's first tuple and number the matches, across pieces of 5
    tuples; the match file is `nfacep match`'s."""
    query = tmp_path / "measured.sql"
    query.write_text(
        (QUERIES / f"{NAME}.sql")
        .read_text()
        .replace(
            "PARTITION runner\n",
            "PARTITION runner\nMEASURES FIRST(time) AS t0, COUNT(*) AS n, MATCH_NUMBER() AS k, "
            "FIRST(seq) AS start_seq, LAST(speed) AS v\n",
        )
    )
    nfa = compile_file(query)
    model = UdpBoardModel(nfa, default_engine(nfa))
    with serving(model) as address:
        _, out = _run(address, tmp_path, 5, query=query)
    ref = tmp_path / "reference.csv"
    assert (
        main(["match", str(query), "--input", str(QUERIES / f"{NAME}.csv"), "--output", str(ref)])
        == 0
    )
    text = out.read_text()
    assert text == ref.read_text() and text.splitlines()[0].endswith("t0,n,k,start_seq,v")
    assert len(text.splitlines()) == len(EXPECTED.splitlines())


def test_an_input_error_in_a_later_piece_leaves_nothing(tmp_path):
    """A bad value at row 200 of the input: found when its piece is read, after the pieces
    before it were sent and written to the temporary file: exit 2's error, and nothing at the
    output path, no temporary file left."""
    lines = (QUERIES / f"{NAME}.csv").read_text().splitlines()
    lines[200] = "notanumber," + lines[200].split(",", 1)[1]
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    with board() as (model, address), pytest.raises(DataError, match="row 200"):
        _run(address, tmp_path, 16, input=bad)
    assert model.taken() >= 160  # (the pieces before it went to the board)
    _nothing_written(tmp_path, tmp_path / "board.csv")


def test_a_loss_in_a_later_piece_in_every_attempt_leaves_nothing(tmp_path):
    """The fourth RECORDS packet (tuple 105's, in the sixth piece of 20) lost in every
    attempt: the run fails (exit 1) naming the tuples between the records around it, and the
    pieces already written are not left at the output path."""
    with (
        board(capacity=64) as (_, address),
        proxy(address, drop_down=_nth_records_packet(3)) as p,
        pytest.raises(LinkError, match="in each of 2 attempts") as failed,
    ):
        _run(p.address, tmp_path, 20, retries=1)
    assert len(p.dropped) == 2 and "nothing was written" in str(failed.value)
    assert "tuples 100-115" in str(failed.value)  # (from the piece's first to record 116's)
    _nothing_written(tmp_path, tmp_path / "board.csv")


@pytest.mark.parametrize("late", [False, True])
def test_the_host_holds_a_few_pieces_not_the_input(tmp_path, monkeypatch, late):
    """Pieces of 8 tuples (35 of them): at no time do more than three pieces of the input
    exist (the one being sent, the next, the one being read), also when the host is late
    after it takes each piece, as on a busy machine; and the records held at each drain are
    at most the piece's."""
    alive = Alive().install(monkeypatch)
    if late:
        late_host(monkeypatch, udp_host)
    held = []
    take = udp_stream._Tally.take

    def taking(self, s, n, final, fmt):
        records = take(self, s, n, final, fmt)
        held.append((len(records), len(s.received)))
        return records

    monkeypatch.setattr(udp_stream._Tally, "take", taking)
    with board() as (_, address):
        totals, out = _run(address, tmp_path, 8)
    assert out.read_text() == EXPECTED and totals.n == 278
    assert len(held) == alive.made == 35 and alive.most <= 3, (alive.most, held)
    assert max(records for records, _ in held) <= 8  # (one record a tuple at most)
    assert max(left for _, left in held) <= 1  # (nothing of the piece stays behind)


@pytest.mark.slow  # (the compiled loops load, then a reference run per packet: some seconds)
def test_switches_across_pieces_on_a_board_that_matches_a_packet_at_a_time(tmp_path):
    """Runtime parameter switches in pieces of 50 tuples, against a software board that finds
    its records with one reference matcher fed a packet at a time from the first tuple on
    (``whole_up_to`` 0; long streams do so): the match file is `nfacep match`'s with the same
    switches."""
    nfa = compile_file(QUERIES / "supplychain.sql")
    values = ParamValues.parse(nfa.program.parameters, SWITCHES)
    with board("supplychain", values=["big=20000"], capacity=64) as (model, address):
        model.whole_up_to = 0
        totals = run_files(
            udp_host.UdpBoard(udp_host.UdpOptions(address=address, tuples_per_packet=4)),
            nfa,
            str(QUERIES / "supplychain.csv"),
            str(tmp_path / "board.csv"),
            default_engine(nfa),
            values=values,
            chunk=50,
        )
        assert model._matcher is not None and model._fed == 309  # (fed, not matched again)
    params = [arg for text in SWITCHES for arg in ("--param", text)]
    expected, _ = reference(tmp_path, "supplychain", *params)
    assert (tmp_path / "board.csv").read_text() == expected
    assert totals.details["link"]["switches"] == 6 and totals.n == 309


def test_a_flood_of_records_in_a_later_piece_is_refused_not_held(tmp_path):
    """A board that answers a TUPLES packet of the fifth piece of 20 tuples with 50 records
    more than it could have: the run ends at once (exit 1), before the piece is drained,
    rather than holding them; nothing is written."""
    fmt = wire.record_format(compile_file(QUERIES / f"{NAME}.sql"))
    flood = b"".join(fmt.encode_bytes(wire.Record(85, 0, 1, 0, 0)) for _ in range(50))

    def twist(model, request, answers):
        if _kind(request) == PacketType.TUPLES and decode_header(request)["seq"] == 17:
            extra = packet(
                PacketType.RECORDS, flood, seq=model.seq, engine_id=model.id, session=model.session
            )
            model.seq += 1  # (numbered as the board's own: no gap)
            answers = [*answers, (model.peer, extra)]
        return answers

    # (the records of tuples 42 and 71 came before, then at most two for each of 20 tuples)
    with hostile(twist) as (_, address), pytest.raises(LinkError, match="more than 42 records"):
        _run(address, tmp_path, 20, retries=0, timeout=2)
    _nothing_written(tmp_path, tmp_path / "board.csv")
