"""Queries loaded over UDP into a programmable board (boards/UDP.md, "Loading a query"):
``nfacep run --udp`` sends its file's image first when another is in force, ``nfacep load``
replaces the running query while a run streams, from the tuple it names, and refuses a file
that does not fit before sending anything; against the software board
(:class:`~nfacep.links.udp.model.UdpBoardModel` with ``--engine programmable``) on 127.0.0.1.
The gateware's LOAD is checked against that board byte for byte in test_udp_one_model.py."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading

import pytest
from test_udp_host import serving

from nfacep import compile_file
from nfacep.cli import main
from nfacep.image import image
from nfacep.io import reader
from nfacep.links.udp.host import UdpBoard
from nfacep.links.udp.model import UdpBoardModel
from nfacep.params import default_engine
from nfacep.reference.matcher import run_switched
from nfacep.settings import ParamValues

STREAM = "CREATE STREAM s (v UINT(8), hot BOOL, k UINT(4));\n"
FIRST = (
    STREAM
    + """QUERY up FROM s PARTITION BY k
MEASURES LAST(v) AS x, MATCH_NUMBER() AS n, LAST(hot) AS h
PATTERN ( A B )
DEFINE
  A AS (v > 100)
  B AS (v <= 100 AND hot);
"""
)
#: other query names, other measures: ``x`` another value, ``n`` counted from the switch, no
#: ``h``, in another order
SECOND = (
    STREAM
    + """QUERY down FROM s PARTITION BY k
MEASURES MATCH_NUMBER() AS n, LAST(seq) AS x
AFTER MATCH SKIP PAST LAST ROW
PATTERN ( X Y )
DEFINE
  X AS (v < 50)
  Y AS (v >= 50);
"""
)
#: five states: more than the board's
TOO_BIG = (
    STREAM
    + """QUERY long FROM s PARTITION BY k
PATTERN ( A B C D E )
DEFINE
  A AS (v > 1)
  B AS (v > 2)
  C AS (v > 3)
  D AS (v > 4)
  E AS (v > 5);
"""
)
#: a measure the first file has no column for
OTHER_MEASURE = SECOND.replace("LAST(seq) AS x", "LAST(v) AS y")
assert "AS y" in OTHER_MEASURE
CAPACITY = ("--states", "4", "--atoms", "4", "--queries", "2")
N = 3000


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    """The user's state folder, where ``nfacep load`` keeps its record by default."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def files(tmp_path):
    import random

    rng = random.Random(28)
    texts = (("first", FIRST), ("second", SECOND), ("big", TOO_BIG), ("other", OTHER_MEASURE))
    for name, text in texts:
        (tmp_path / f"{name}.sql").write_text(text)
    rows = [f"{rng.randrange(256)},{rng.choice(['true', 'false'])},{rng.randrange(16)}"]
    rows += [
        f"{rng.randrange(256)},{rng.choice(['true', 'false'])},{rng.randrange(16)}"
        for _ in range(N - 1)
    ]
    (tmp_path / "data.csv").write_text("v,hot,k\n" + "\n".join(rows) + "\n")
    return tmp_path


@contextlib.contextmanager
def programmable_board(query, values=None):
    """The software board of a programmable engine (4 states, 4 atoms, 2 queries) for
    ``query``'s stream declaration and key, on 127.0.0.1 (``values``: its runtime
    parameters', as `serve` takes them: they change nothing)."""
    nfa = compile_file(query)
    params = dataclasses.replace(
        default_engine(nfa), engine="programmable", states=4, atoms=4, queries=2
    )
    if values is not None:
        values = ParamValues.parse(nfa.program.parameters, values)
    model = UdpBoardModel(nfa, params, values=values)
    with serving(model) as address:
        yield model, address


def _run(files, address, *more):
    return main(
        [
            "run",
            str(files / "first.sql"),
            "--udp",
            address,
            "--input",
            str(files / "data.csv"),
            "--output",
            str(files / "board.csv"),
            *more,
        ]
    )


def _pairs(text: str) -> list[tuple[int, int]]:
    """(seq, partition) of each match of a match file."""
    lines = text.splitlines()[1:]
    return sorted((int(line.split(",")[0]), int(line.split(",")[2])) for line in lines)


def test_run_sends_its_image_first(files, capsys):
    """A board with no image in force: ``run`` loads its file's, then streams; the match file
    is ``match``'s. A second run finds it in force and sends none."""
    with programmable_board(files / "first.sql") as (model, address):
        assert _run(files, address) == 0
        assert "loaded the image" in capsys.readouterr().err
        assert (
            main(
                [
                    "match",
                    str(files / "first.sql"),
                    "--input",
                    str(files / "data.csv"),
                    "--output",
                    str(files / "ref.csv"),
                ]
            )
            == 0
        )
        assert (files / "board.csv").read_text() == (files / "ref.csv").read_text()
        shape = model.images.shape
        assert (
            model.images.named.to_bytes(8, "little").hex()
            == image(compile_file(files / "first.sql"), shape).fingerprint
        )
        assert _run(files, address) == 0
        assert "loaded the image" not in capsys.readouterr().err


def _load_while_running(files, model, address, loaded: str, at: int, *run_args) -> tuple:
    """``nfacep load LOADED --at AT`` from a second thread while ``run first.sql`` streams
    (paced: the load comes most of a second before its tuple); the run's exit code, what it
    said, and the loaded image's fingerprint."""
    host, port = address.rsplit(":", 1)
    done = {}

    def loader():
        while model.taken() < 100:  # (the run is streaming)
            threading.Event().wait(0.002)
        load = ["load", str(files / loaded), "--udp", host, "--port", port, "--at", str(at)]
        done["code"] = main([*load, *CAPACITY])
        done["taken"] = model.taken()

    thread = threading.Thread(target=loader, daemon=True)
    thread.start()
    code = _run(files, address, "--rate", "3000", "--tuples-per-packet", "20", *run_args)
    thread.join(timeout=10)
    assert done["code"] == 0 and done["taken"] < at
    fingerprint = image(compile_file(files / loaded), model.images.shape).fingerprint
    return code, fingerprint


def _switch_reference(files, at: int) -> str:
    """The match file of the switch's reference run (docs/language.md): ``nfacep match`` of
    the first file's rows before ``at``, then the second file's matches from cleared states,
    each of its measures in the first file's column of its name, ``h`` (which it lacks) empty."""
    import csv
    import io

    from nfacep.result import write

    assert main(["match", str(files / "first.sql"), "--input", str(files / "data.csv"),
                 "--output", str(files / "ref.csv")]) == 0  # fmt: skip
    head, *rows = (files / "ref.csv").read_text().splitlines()
    first, second = compile_file(files / "first.sql"), compile_file(files / "second.sql")
    data = reader.read(str(files / "data.csv"), first.program.schema)
    _, after = run_switched(first, second, data, at, default_engine(first))
    write(after, str(files / "after.csv"), program=second.program, tuples=data)
    later = list(csv.DictReader(io.StringIO((files / "after.csv").read_text())))
    names = head.split(",")
    assert names[3:] == ["x", "n", "h"] and list(later[0]) == [*names[:3], "n", "x"]
    return "\n".join([head, *(r for r in rows if int(r.split(",")[0]) < at)]
                     + [",".join(r.get(c, "") for c in names) for r in later]) + "\n"  # fmt: skip


@pytest.mark.slow
def test_load_mid_stream_equals_the_switch_reference(files, state, capsys, monkeypatch):
    """``nfacep load second.sql --at 2550`` while ``run first.sql`` streams in pieces of 200
    tuples: STATUS says the tuple the switch fell at, the run finds the file ``load`` recorded
    (in the user's state folder) and the match file is the reference run of the switch,
    named and measured by the second file's queries from 2550 on (its measures in the columns
    of their names, ``h`` empty, ``MATCH_NUMBER()`` counted from the switch across the
    pieces); none lost."""
    at = 2550
    monkeypatch.setattr(UdpBoard, "chunk", 200)  # (the switch's piece, then two after it)
    with programmable_board(files / "first.sql") as (model, address):
        code, second = _load_while_running(files, model, address, "second.sql", at)
        assert code == 0
        said = capsys.readouterr()
        assert f"taken on the board at {address}, from tuple {at}" in said.out
        assert model.images.since == at
    record = state / "nfacep" / "images" / f"{second}.sql"
    assert record.read_text() == SECOND
    assert f"image {second} was put in force on the board from tuple {at}" in said.err
    assert f"the matches from that tuple on are its file's queries (down; {record})" in said.err
    summary = json.loads((files / "board.summary.json").read_text())
    assert summary["link"]["images"]["loaded"] == [
        {"image": second, "from_tuple": at, "query_file": str(record), "queries": ["down"]}
    ]
    got = (files / "board.csv").read_text()
    assert got == _switch_reference(files, at)
    assert summary["matches"] == {"up": got.count(",up,"), "down": got.count(",down,")}
    assert ",up," in got and ",down," in got


@pytest.mark.slow
@pytest.mark.parametrize("record", ["missing", "edited"])
def test_a_switch_to_an_unrecorded_file_names_slots_and_says_why(files, capsys, record):
    """The run looks in another --images folder than ``load`` recorded in, where the loaded
    image has no record, or one edited since (its file, another condition under the same
    query name, no longer makes the image in force): it names the matches from the switch on
    by its own file's query in each slot, as before the board reported switches, and the
    warning and the summary say why."""
    at = 2600
    elsewhere = files / "elsewhere"
    with programmable_board(files / "first.sql") as (model, address):
        second = image(compile_file(files / "second.sql"), model.images.shape).fingerprint
        if record == "edited":
            elsewhere.mkdir()
            (elsewhere / f"{second}.sql").write_text(SECOND.replace("v < 50", "v < 51"))
        code, loaded = _load_while_running(
            files, model, address, "second.sql", at, "--images", str(elsewhere)
        )
    assert code == 0 and loaded == second
    err = capsys.readouterr().err
    if record == "missing":
        assert f"no record of image {second} in {elsewhere}" in err
    else:
        assert f"its record {elsewhere / second}.sql does not make that image" in err
        assert "changed after `nfacep load`" in err
    assert "names this file's query in each slot" in err
    summary = json.loads((files / "board.summary.json").read_text())
    (loaded,) = summary["link"]["images"]["loaded"]
    assert loaded["query_file"] is None and loaded["from_tuple"] == at
    assert (f"no record of image {second}" if record == "missing" else "does not make") in (
        loaded["reason"]
    )
    rows = (files / "board.csv").read_text().splitlines()[1:]
    assert {r.split(",")[1] for r in rows} == {"up"}
    want = _switch_reference(files, at).splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == [r.split(",")[0] for r in want]


@pytest.mark.slow
def test_a_switch_to_a_file_with_a_measure_the_match_file_lacks_is_refused(files, capsys):
    """The loaded file has a measure (``y``) that the run's file has no column for: the run
    stops, exit 2, naming it, and writes nothing."""
    with programmable_board(files / "first.sql") as (model, address):
        code, _ = _load_while_running(files, model, address, "other.sql", 2600)
    assert code == 2
    err = capsys.readouterr().err
    assert "has the measures y, which the match file has no columns for" in err
    assert "Traceback" not in err
    assert not (files / "board.csv").exists()


def test_load_refuses_a_file_that_does_not_fit_before_sending(files, capsys):
    """A file with more states than the board's engine: exit 2 naming the capacity, and no
    byte of a load reached the board (the query in force keeps running)."""
    with programmable_board(files / "first.sql") as (model, address):
        code = main(["load", str(files / "big.sql"), "--udp", address])
        err = capsys.readouterr().err
        assert code == 2
        assert "states: the queries need 5, the engine has 4" in err
        assert model.images.named == 0 and not model.assembling
        assert model.counters["bad_load"] == 0 and model.images.refused == 0


def test_load_whose_record_cannot_be_written_sends_nothing(files, capsys):
    """``--images`` names a file, not a folder: exit 2 naming it, and no load reached the
    board (its record is written before the load is sent)."""
    (files / "not_a_folder").write_text("")
    with programmable_board(files / "first.sql") as (model, address):
        load = ["load", str(files / "second.sql"), "--udp", address]
        assert main([*load, "--images", str(files / "not_a_folder")]) == 2
        err = capsys.readouterr().err
        assert f"--images {files / 'not_a_folder'}: cannot make the folder" in err
        assert model.images.named == 0 and not model.assembling


def test_load_into_a_fixed_board_is_refused(files, capsys):
    from nfacep.links.udp.model import UdpBoardModel as Model

    nfa = compile_file(files / "first.sql")
    model = Model(nfa, default_engine(nfa))
    with serving(model) as address:
        code = main(["load", str(files / "second.sql"), "--udp", address, "--timeout", "0.5"])
    assert code == 2
    assert "LOAD" in capsys.readouterr().err


def test_load_from_another_host_than_the_sessions_says_why_it_may_have_no_answer(files, capsys):
    """While a session from 127.0.0.2 is alive the board ignores LOAD from 127.0.0.1 (another
    address on loopback): ``nfacep load`` times out, exit 2, with one line naming that cause
    beside the others (unreachable, no programmable engine); the query in force is unchanged."""
    import socket

    from nfacep.links.udp.protocol import PacketType, packet

    with programmable_board(files / "first.sql") as (model, address):
        host, port = address.rsplit(":", 1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as session_host:
            session_host.bind(("127.0.0.2", 0))
            session_host.settimeout(2)
            session_host.sendto(packet(PacketType.RESET, session=7), (host, int(port)))
            session_host.recv(65536)  # the board's STATUS: the session is open
            assert model.open and model.peer[0] == "127.0.0.2"
            code = main(["load", str(files / "second.sql"), "--udp", address, "--timeout", "0.3"])
        err = capsys.readouterr().err
        assert code == 2
        (line,) = err.splitlines()
        assert line.startswith(f"nfacep: no answer to LOAD from {address} within --timeout 0.3 s")
        assert "takes loads only from its session host's address" in line
        assert "unreachable" in line
        assert model.counters["foreign"] > 0 and model.images.named == 0


def test_run_with_runtime_parameters_puts_their_values_in_the_image(files, capsys):
    """A file with runtime parameters: ``run --param`` makes the image with their values as
    constants (no PARAMS packet); the match file is ``match --param``'s. A switch at a tuple
    cannot be an image: refused before anything is sent (exit 2)."""
    query = files / "limit.sql"
    query.write_text(FIRST.replace("v > 100", "v > :lim").replace("v <= 100", "v <= :lim"))
    args = ["--input", str(files / "data.csv")]
    with programmable_board(query, ["lim=0"]) as (_, address):
        out = files / "board.csv"
        run = ["run", str(query), "--udp", address, *args, "--output", str(out)]
        assert main([*run, "--param", "lim=90"]) == 0
        ref = files / "ref.csv"
        assert main(["match", str(query), *args, "--output", str(ref), "--param", "lim=90"]) == 0
        assert out.read_text() == ref.read_text()
        assert main([*run, "--param", "lim=90", "--param", "lim=20@100"]) == 2
        assert "switched at a tuple" in capsys.readouterr().err


def test_load_records_the_values_its_image_holds(files, state):
    """``nfacep load --param``: the record keeps the values beside the file, and a run finds
    it only while file and values make the image in force (a value changed since: not)."""
    from nfacep.image import Capacity
    from nfacep.links.udp.images import look_up

    query = files / "limit.sql"
    query.write_text(FIRST.replace("v > 100", "v > :lim").replace("v <= 100", "v <= :lim"))
    with programmable_board(query, ["lim=0"]) as (model, address):
        assert main(["load", str(query), "--udp", address, "--param", "lim=90"]) == 0
        fingerprint = model.images.named.to_bytes(8, "little").hex()
        capacity = model.images.shape.capacity
    where = state / "nfacep" / "images"
    assert (where / f"{fingerprint}.sql").read_text() == query.read_text()
    assert (where / f"{fingerprint}.param").read_text() == "lim=90\n"
    found = look_up(str(where), fingerprint, capacity)
    assert found.nfa is not None and [q.name for q in found.nfa.queries] == ["up"]
    (where / f"{fingerprint}.param").write_text("lim=91\n")
    assert look_up(str(where), fingerprint, capacity).nfa is None
    assert "does not make that image" in look_up(str(where), fingerprint, capacity).reason
    assert look_up(str(where), fingerprint, Capacity(4, 4, 2)).nfa is None


def test_load_without_at_is_in_force_from_the_next_tuple(files, capsys):
    """On a board at rest after a run: without ``--at`` the image is in force from the next
    tuple the engine takes (the count STATUS shows), and ``nfacep load`` returns once it is in
    force; a second run of the first file loads the first image back."""
    with programmable_board(files / "first.sql") as (model, address):
        assert _run(files, address) == 0
        capsys.readouterr()
        assert main(["load", str(files / "second.sql"), "--udp", address]) == 0
        out = capsys.readouterr().out
        second = compile_file(files / "second.sql")
        fingerprint = image(second, model.images.shape).fingerprint
        assert f"image {fingerprint}" in out and f"in force on the board at {address}" in out
        assert f"from tuple {N}" in out
        assert model.images.named.to_bytes(8, "little").hex() == fingerprint
        assert _run(files, address) == 0
        assert "loaded the image" in capsys.readouterr().err


#: (way, type, how many of that type went that way before) of the packet lost: the loader's
#: LOADs up are its first STATUS question, the bulk (one chunk here), the tail; the board's
#: STATUS answers come back in the same order
LOSSES = {
    "nothing": None,
    "the bulk": ("up", 0x06, 1),
    "the bulk's answer": ("down", 0x82, 1),
    "the tail": ("up", 0x06, 2),
    "the tail's answer": ("down", 0x82, 2),
}


@pytest.mark.parametrize("lost", LOSSES)
def test_load_sends_its_last_bytes_once_the_rest_is_answered(files, capsys, lost):
    """``nfacep load`` sends a load's last bytes (at most ``LOAD_TAIL``) in a LOAD of their own
    once the board answered the rest, so that what the engine still takes in after the load's
    last byte is those few bytes; a LOAD or an answer lost on the way (the bulk, its answer,
    the tail, the tail's answer) is sent again from where STATUS says the load stands, and the
    image comes in force all the same. With nothing lost the loader asks for STATUS once, at
    the start: the answer to the tail tells that the image is in force."""
    from test_udp_host import proxy

    from nfacep.links.udp.protocol import HEADER_BYTES, LOAD_HEADER_BYTES, LOAD_TAIL

    fed: list[tuple[int, int, bool]] = []  # (offset, bytes, last) of each chunk the board took
    asked = []  # the LOADs without bytes (STATUS questions) the board got

    def dropping(way):
        return lambda head, count, resets: LOSSES[lost] == (way, head["type"], count)

    with programmable_board(files / "first.sql") as (model, address):
        feed = model.feed

        def recording(data, sender):
            out = feed(data, sender)
            body = data[HEADER_BYTES:]
            if data[1] == 0x06 and len(body) > LOAD_HEADER_BYTES and model.last == "accepted":
                offset = int.from_bytes(body[:4], "little")
                fed.append((offset, len(body) - LOAD_HEADER_BYTES, bool(body[4] & 1)))
            elif data[1] == 0x06:
                asked.append(data)
            return out

        model.feed = recording
        with proxy(address, drop_up=dropping("up"), drop_down=dropping("down")) as p:
            code = main(["load", str(files / "second.sql"), "--udp", p.address])
            assert code == 0, capsys.readouterr().err
            assert len(p.dropped) == (lost != "nothing")
        fingerprint = image(compile_file(files / "second.sql"), model.images.shape).fingerprint
        assert model.images.named.to_bytes(8, "little").hex() == fingerprint
    assert fed[-1][2] and 0 < fed[-1][1] <= LOAD_TAIL
    assert fed[-2][0] + fed[-2][1] == fed[-1][0]  # the rest was taken before the tail came
    assert sum(n for _, n, _ in fed) > LOAD_TAIL
    assert len(asked) == 1 if lost == "nothing" else len(asked) > 1
