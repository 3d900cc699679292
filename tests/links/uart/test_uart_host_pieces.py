"""``nfacep run --port`` reading its input and writing its matches in pieces (links/uart/host.py,
``UartBoard.run_stream``; boards/LINK.md, "What the host holds").

Small pieces (``UartBoard.chunk``, the tuples a piece of the input, set low) put many piece
boundaries in the bundled inputs, against the software board on a pty
(:mod:`nfacep.links.uart.model`): the match file must still be ``nfacep match``'s, with frame
numbers wrapping across pieces and runtime parameter switches in later pieces; a board that
loses a record or contradicts its counters in a later piece must leave nothing at the output
path (exit 1); and the host must never hold more than a few pieces of the input.
"""

from __future__ import annotations

import json

import pytest
from alive import Alive, late_host
from test_boards_host import QUERIES, _params, board, reference, run_cli
from test_udp_host import SWITCHES

from nfacep.links.uart import host as uart_host
from nfacep.links.uart.model import UartBoardModel

EXPECTED = (QUERIES / "marathon.matches.csv").read_text()


@pytest.fixture
def pieces(monkeypatch):
    """Pieces of ``chunk`` tuples (set by the test) and the tuples of each piece sent, in
    order."""
    sent: list[int] = []
    piece = uart_host._Run.piece

    def counted(self, tuples, last):
        sent.append(tuples.n)
        return piece(self, tuples, last)

    monkeypatch.setattr(uart_host._Run, "piece", counted)
    return sent


def _run(port, tmp_path, *args, name="marathon"):
    out = tmp_path / "board.csv"
    argv = ["run", str(QUERIES / f"{name}.sql"), "--port", port]
    argv += ["--input", str(QUERIES / f"{name}.csv"), "--output", str(out), *args]
    return run_cli(argv), out


def _nothing_written(tmp_path) -> None:
    """No match file, no summary, and no temporary file of the run left beside them."""
    assert {p.name for p in tmp_path.iterdir()} == set(), list(tmp_path.iterdir())


def test_pieces_give_the_match_file(tmp_path, pieces, monkeypatch):
    """Marathon in pieces of 20 tuples, a tuple a frame: 278 frames, their numbers (mod 256)
    wrapping in the last pieces, and each piece's records checked and written in turn."""
    monkeypatch.setattr(uart_host.UartBoard, "chunk", 20)
    with board() as (model, port):
        code, out = _run(port, tmp_path, "--frame-tuples", "1")
        counters = dict(model.counters)
    assert code == 0 and out.read_text() == EXPECTED
    assert pieces == [20] * 13 + [18]
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    # (frames resent only when the board's thread answered late: each one it took again)
    resent = summary["link"]["frames_resent"]
    assert counters == {"bad_length": 0, "out_of_seq": resent, "overflow": 0}
    assert summary["tuples"] == summary["board"]["tuples"] == 278
    assert summary["link"]["frames"] == summary["link"]["frames_sent"] == 278
    assert summary["link"]["records"] == summary["board"]["records"]


def test_switches_in_later_pieces(tmp_path, pieces, monkeypatch):
    """Runtime parameter switches at tuples 235 to 300 and a board built with other values
    (switched at tuple 0), in pieces of 50 tuples: ``nfacep match``'s file with the same
    switches."""
    monkeypatch.setattr(uart_host.UartBoard, "chunk", 50)
    with board("supplychain", values=["big=20000"], capacity=64) as (model, port):
        code, out = _run(port, tmp_path, *_params(SWITCHES), name="supplychain")
        assert [seq for seq, _ in model.switches] == [0, 235, 260, 281, 282, 300]
    assert code == 0 and pieces == [50] * 6 + [9]
    text = out.read_text()
    out.unlink()
    out.with_suffix(".summary.json").unlink()
    expected, _ = reference(tmp_path, "supplychain", *_params(SWITCHES))
    assert text == expected


@pytest.mark.parametrize("fault", ["lost record", "wrong counter"])
def test_a_fault_in_a_later_piece_writes_nothing(tmp_path, capsys, monkeypatch, pieces, fault):
    """A board that loses a record of a later piece (its STATUS counts it), or whose STATUS
    counts one match too many from tuple 100 on: exit 1 with one message, and nothing at the
    output path, although earlier pieces' matches went to a temporary file."""
    monkeypatch.setattr(uart_host.UartBoard, "chunk", 20)
    drain, status = UartBoardModel.drain, UartBoardModel.status

    def losing(self):
        before = self.records_sent
        out = drain(self)
        if fault == "lost record" and before < 3 <= self.records_sent:
            self.records_lost = getattr(self, "records_lost", 0) + 1
            return b""  # (a frame a record: the ones of this drain, all lost)
        return out

    def miscounting(self):
        st = status(self)
        if fault == "wrong counter" and st["tuples"] >= 100:
            st["matched"] += 1
        return st

    monkeypatch.setattr(UartBoardModel, "drain", losing)
    monkeypatch.setattr(UartBoardModel, "status", miscounting)
    folder = tmp_path / "out"
    folder.mkdir()
    with board() as (model, port):
        code, _ = _run(port, folder, "--frame-tuples", "1")
    assert code == 1 and len(pieces) >= 5  # (the piece of tuples 80-99 or later)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if fault == "lost record":
        assert model.records_lost == 1
        assert "records were lost on the way back" in err
    else:
        assert "contradicts itself: 3 matched came, STATUS counts 4" in err
        assert "nothing was written" in err
    _nothing_written(folder)


@pytest.mark.parametrize("late", [False, True])
def test_the_host_holds_a_few_pieces(tmp_path, monkeypatch, late):
    """In pieces of 8 tuples, at most three pieces of the input are alive at once; also when
    the host is late after it takes each piece, as on a busy machine."""
    monkeypatch.setattr(uart_host.UartBoard, "chunk", 8)
    alive = Alive().install(monkeypatch)
    if late:
        late_host(monkeypatch, uart_host)
    with board() as (_, port):
        code, out = _run(port, tmp_path)
    assert code == 0 and out.read_text() == EXPECTED
    assert alive.made == 35 and alive.most <= 3, (alive.made, alive.most)
