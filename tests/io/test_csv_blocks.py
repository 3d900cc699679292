"""A CSV file read in pieces is parsed a block of whole lines at a time, with the stream's types
where pyarrow's conversion gives nfacep's values (``nfacep.io.csvblocks``), as text otherwise.
Blocks are made small here, so that every file is cut into many: the pieces must be the whole
read (``read``, which parses the file as text) cut up, or raise its error, whatever is in the
blocks and wherever they are cut."""

from __future__ import annotations

import codecs
import itertools
import random

import numpy as np
import pytest

import nfacep
from nfacep.errors import DataError
from nfacep.io import csvblocks, csvfile
from nfacep.io.reader import read, read_chunks, read_stream
from nfacep.io.tuples import piece_sizes

STREAM = nfacep.compile_text(
    "CREATE STREAM s (u UINT(16), i INT(8), f FLOAT32, e ENUM('Staten Island', 'Queens'), "
    "b BOOL, w UINT(12)); QUERY q PATTERN (A) DEFINE A AS e = 'Queens'"
).program.schema

HEADER = "u,i,f,e,b,w"

#: the usual spelling of each field
PLAIN = {
    "u": lambda r: str(r.randint(0, 65535)),
    "i": lambda r: str(r.randint(-128, 127)),
    "f": lambda r: r.choice([repr(r.uniform(-1e3, 1e3)), f"{r.uniform(-1, 1):.3e}", "2", ".5"]),
    "e": lambda r: r.choice(["Staten Island", "Queens"]),
    "b": lambda r: r.choice(["true", "false", "1", "0", "True", "FALSE"]),
    "w": lambda r: str(r.randint(0, 4095)),
}

#: spellings nfacep reads that pyarrow's typed conversion refuses or reads otherwise
ODD = {
    "u": ["+5", " 7 ", "007", "\t9"],
    "i": ["-0", "+3", " -4"],
    "f": ["nan", "-inf", "inf", "Infinity", "+2.5", " 1.5 ", "1e-50"],
    "e": ['"Queens"'],
    "b": ["tRuE", " false "],
    "w": ["+1", "0"],
}

#: values nfacep refuses, in the field they are written in
BAD = {
    "u": ["0x1F", "0X10", "70000", "-1", "", "1.0"],
    "i": ["128", "--3", "0x7"],
    "f": ["1e39", "-1e39", "1.5x", "", "nan(1)"],
    "e": ["Bronx", "queens", ""],
    "b": ["yes", ""],
    "w": ["4096", "0x10"],
}


def _row(rng: random.Random, odd: float) -> list[str]:
    return [rng.choice(ODD[n]) if rng.random() < odd else PLAIN[n](rng) for n in HEADER.split(",")]


def _text(rows: list[list[str]], rng: random.Random, ending: str, quote: bool) -> str:
    lines = [HEADER]
    for row in rows:
        if rng.random() < 0.05:
            lines.append("")  # a blank line: no row
        if quote and rng.random() < 0.3:
            row = [f'"{v}"' if not v.startswith('"') else v for v in row]
        lines.append(",".join(row))
    return ending.join(lines) + ending


def _outcome(path: str, rows: int, first: int | None = None, stream: bool = False):
    """read()'s tuples or error, and read_chunks()'s pieces or error (``stream``: read_stream's
    pieces and their last flags)."""
    try:
        whole = read(path, STREAM)
    except DataError as err:
        whole = err
    try:
        if stream:
            pieces = list(read_stream(path, STREAM, rows, first=first))
        else:
            pieces = list(read_chunks(path, STREAM, rows, first=first))
    except DataError as err:
        pieces = err
    return whole, pieces


def _assert_same(path: str, rows: int, first: int | None = None) -> str:
    """read_chunks' pieces are the whole read cut at their sizes, or raise its error; so are
    read_stream's, cut at most at their sizes (ending early towards the end of the file),
    the last, and it alone, said to be."""
    whole, pieces = _outcome(path, rows, first)
    _, stream = _outcome(path, rows, first, stream=True)
    if isinstance(whole, DataError):
        assert isinstance(pieces, DataError), f"read refused, pieces accepted: {whole}"
        assert str(pieces) == str(whole)
        assert isinstance(stream, DataError) and str(stream) == str(whole)
        return "error"
    assert not isinstance(pieces, DataError), f"read accepted, pieces refused: {pieces}"
    assert not isinstance(stream, DataError), f"read accepted, read_stream refused: {stream}"
    sizes = piece_sizes(rows, first)
    assert [p.n for p in pieces] == [min(next(sizes), whole.n - p.offset) for p in pieces]
    _assert_tiled(whole, pieces)
    sizes = piece_sizes(rows, first)
    assert all(0 < p.n <= next(sizes) for p, _ in stream)
    assert [last for _, last in stream] == [i == len(stream) - 1 for i in range(len(stream))]
    _assert_tiled(whole, [p for p, _ in stream])
    return "accepted"


def _assert_tiled(whole, pieces) -> None:
    """``pieces`` are ``whole`` cut, each located where its rows are."""
    assert [p.offset for p in pieces] == [sum(p.n for p in pieces[:i]) for i in range(len(pieces))]
    assert sum(p.n for p in pieces) == whole.n
    for name, col in whole.columns.items():
        got = np.concatenate([p.columns[name] for p in pieces]) if pieces else col[:0]
        assert got.dtype == col.dtype, name
        assert got.tobytes() == col.tobytes(), name
    for p in pieces:
        for row in {0, p.n - 1}:
            assert p.where(row, "f") == whole.where(p.offset + row, "f")


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of about ``size`` bytes (a few lines each); returns the count of blocks that went
    the text path."""
    texts = []
    real = csvfile.parse_block

    def counted(data, header, schema):
        texts.append(len(data))
        return real(data, header, schema)

    monkeypatch.setattr(csvfile, "parse_block", counted)

    def use(size: int):
        monkeypatch.setattr(csvblocks, "BLOCK", size)
        return texts

    return use


@pytest.mark.parametrize("seed", range(6))
def test_blocks_cut_anywhere_give_the_whole_read(tmp_path, small_blocks, seed):
    rng = random.Random(seed)
    small_blocks(rng.randint(1, 300))
    ending = rng.choice(["\n", "\r\n", "\r"])
    rows = [_row(rng, rng.choice([0, 0.02, 0.2])) for _ in range(rng.randint(1, 300))]
    path = tmp_path / "t.csv"
    path.write_bytes(_text(rows, rng, ending, quote=rng.random() < 0.5).encode())
    first = rng.choice([None, rng.randint(1, 8)])  # pieces growing from `first`
    assert _assert_same(str(path), rng.randint(1, 50), first) == "accepted"


def test_plain_blocks_go_the_typed_path_and_an_odd_value_takes_its_block_alone(
    tmp_path, small_blocks
):
    texts = small_blocks(200)
    rng = random.Random(1)
    rows = [_row(rng, 0) for _ in range(300)]
    path = tmp_path / "t.csv"
    path.write_text(_text(rows, rng, "\n", quote=False))
    assert _assert_same(str(path), 64) == "accepted"
    assert texts == []
    rows[150][0] = "+5"  # a sign: pyarrow refuses it, nfacep reads it
    rows[151][1] = "-0"
    path.write_text(_text(rows, rng, "\n", quote=False))
    assert _assert_same(str(path), 64) == "accepted"
    assert 1 <= len(texts) <= 2  # (the two rows may be cut into two blocks)


def test_quoted_blocks_go_the_typed_path_beside_blocks_without_quotes(tmp_path, small_blocks):
    # (pyarrow is told a block without a quote has none; a block with quotes still takes
    # them off its values)
    texts = small_blocks(200)
    rng = random.Random(2)
    rows = [_row(rng, 0) for _ in range(300)]
    rows[0] = [f'"{v}"' for v in rows[0]]
    rows[299][3] = '"Staten Island"'
    path = tmp_path / "t.csv"
    path.write_text(_text(rows, rng, "\n", quote=False))
    assert _assert_same(str(path), 64) == "accepted"
    assert texts == []


@pytest.mark.parametrize("column", list(BAD))
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_bad_value_in_a_block_is_named_as_the_whole_read_names_it(
    tmp_path, small_blocks, column, where
):
    """Bad values at a block's start, inside it and at its end (a block is 6 to 8 lines):
    the whole read's error, naming the row, its line and the column."""
    small_blocks(8 * 35)
    rng = random.Random(column)
    rows = [[PLAIN[n](rng) for n in HEADER.split(",")] for _ in range(200)]
    lines = [",".join(r) for r in rows]
    starts = _block_rows(HEADER + "\n" + "\n".join(lines) + "\n")
    at = {"first": starts[10], "middle": starts[10] + 2, "last": starts[11] - 1}[where]
    k = HEADER.split(",").index(column)
    for bad in BAD[column]:
        row = list(rows[at])
        row[k] = bad
        path = tmp_path / "t.csv"
        path.write_text("\n".join([HEADER, *lines[:at], ",".join(row), *lines[at + 1 :]]) + "\n")
        assert _assert_same(str(path), 16) == "error"
        with pytest.raises(DataError) as err:
            list(read_chunks(str(path), STREAM, 16))
        assert f"row {at + 1} (line {at + 2}), column '{column}'" in str(err.value), bad


def _block_rows(text: str) -> list[int]:
    """The first data row of each block of ``text`` (no blank lines) as csvblocks cuts it."""
    data = text.encode()
    data_start = data.index(b"\n") + 1
    import io

    f = io.BytesIO(data)
    return [
        data[data_start:start].count(b"\n")
        for start, _ in csvblocks.spans(f, data_start, len(data))
    ]


@pytest.mark.parametrize(
    "text",
    [
        HEADER,
        HEADER + "\n",
        HEADER + "\r\n",
        HEADER + "\n\n\r\n",
        HEADER + "\n7,-3,1.5,Queens,true,4",
        HEADER + "\r\n7,-3,1.5,Queens,true,4\r\n\r\n8,-2,2.5,Staten Island,0,5\r\n",
    ],
)
@pytest.mark.parametrize("bom", [False, True])
def test_a_header_alone_blank_lines_and_a_bom(tmp_path, small_blocks, text, bom):
    small_blocks(10)
    path = tmp_path / "t.csv"
    path.write_bytes((codecs.BOM_UTF8 if bom else b"") + text.encode())
    assert _assert_same(str(path), 3) == "accepted"


def test_quoted_values_and_a_quote_left_open_at_a_blocks_end(tmp_path, small_blocks):
    """Quoted values (commas inside a column that is not the stream's) are read alike; a
    quote left open in the last line of a block runs into the next line in read(), which
    refuses it: so do the pieces."""
    small_blocks(100)
    header = HEADER + ",note"
    lines = [f'{i},-3,"{i}.5","Queens",true,{i % 4096},"a, b"' for i in range(60)]
    path = tmp_path / "t.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    whole, pieces = _outcome(str(path), 7)
    assert not isinstance(whole, DataError) and not isinstance(pieces, DataError)
    assert np.array_equal(np.concatenate([p.columns["u"] for p in pieces]), whole.columns["u"])
    data = path.read_bytes()
    start = data.index(b"\n") + 1
    import io

    cut = list(csvblocks.spans(io.BytesIO(data), start, len(data)))[3][1]  # a block's end
    last = data.rindex(b'"a, b"', 0, cut)
    path.write_bytes(data[:last] + b'"a, b' + data[last + 6 :])
    with pytest.raises(DataError) as whole_err:
        read(str(path), STREAM)
    with pytest.raises(DataError) as pieces_err:
        list(read_chunks(str(path), STREAM, 7))
    assert str(pieces_err.value) == str(whole_err.value)
    assert "not closed" in str(whole_err.value)


@pytest.mark.parametrize("first, before", [(None, 192), (1, 191)])
def test_the_pieces_before_a_bad_row_come_before_its_error(tmp_path, first, before):
    """A bad value late in a block (one block here): the pieces before its row are yielded
    (a board has them sent before the error), then the whole read's error; pieces of 16, or
    of 1, 2, 4, 8, then 16."""
    rng = random.Random(3)
    rows = [[PLAIN[n](rng) for n in HEADER.split(",")] for _ in range(300)]
    rows[200][0] = "notanumber"
    path = tmp_path / "t.csv"
    path.write_text(_text(rows, rng, "\n", quote=False))
    got = []
    with pytest.raises(DataError) as err:
        for piece in read_chunks(str(path), STREAM, 16, first=first):
            got.append(piece)
    with pytest.raises(DataError) as whole:
        read(str(path), STREAM)
    assert str(err.value) == str(whole.value) and "column 'u'" in str(err.value)
    assert sum(p.n for p in got) == before


@pytest.mark.parametrize("seed", range(3))
def test_a_block_parsed_alone_converts_as_its_text(seed):
    """``csvblocks.parse_block`` (for a task that reads its own block of lines): typed or as
    text, the block converts to the values of its text, or is refused alike."""
    from nfacep.io.convert import from_table

    rng = random.Random(seed)
    header = HEADER.split(",")
    for odd in (0, 0.05, 0.3):
        rows = [_row(rng, odd) for _ in range(50)]
        data = _text(rows, rng, "\r\n", quote=odd > 0.1).split("\r\n", 1)[1].encode()
        outcomes = []
        for parse in (csvblocks.parse_block, csvfile.parse_block):
            try:
                outcomes.append(from_table(parse(data, header, STREAM), STREAM, text=True))
            except DataError as err:
                outcomes.append(str(err))
        typed, text = outcomes
        assert type(typed) is type(text)
        if isinstance(text, str):
            continue
        for name, col in text.columns.items():
            assert typed.columns[name].tobytes() == col.tobytes(), name


@pytest.mark.parametrize("block, size", [(64, 5000), (1 << 10, 3 << 10), (7, 100)])
def test_blocks_tile_the_rows_growing_then_shrinking(block, size):
    """``spans``: whole lines from the data's start to the end, none empty; the first two
    ``block >> RAMP`` bytes, none past ``block`` (a line longer than the step is whole), and
    towards the end none more than a quarter of what is left (but the first's size), so that
    the blocks parsed at once end about together."""
    import io

    line = b"12345,6\n"
    data = b"a,b\n" + line * (size // len(line))
    start = 4
    cut = list(csvblocks.spans(io.BytesIO(data), start, len(data), block))
    assert cut[0][0] == start and cut[-1][1] == len(data)
    assert all(a < b for a, b in cut)
    assert all(p[1] == q[0] for p, q in itertools.pairwise(cut))
    assert all(data[b - 1 : b] == b"\n" for _, b in cut)
    least = max(block >> csvblocks.RAMP, 1)
    longest = len(line) - 1
    assert all(b - a <= least + longest for a, b in cut[:2])
    for a, b in cut:
        assert b - a <= max(min(block, max((len(data) - a) // 4, least)), 1) + longest
    if block >= 8 * len(line):  # (else every block is a line)
        assert max(b - a for a, b in cut) > cut[-1][1] - cut[-1][0]


def test_a_process_forked_after_a_read_reads_in_blocks_too(tmp_path):
    """The threads that parse blocks are made once for a process; a child made by ``fork``
    has none of them and makes its own (else its read would wait for ever)."""
    import subprocess
    import sys

    rng = random.Random(5)
    path = tmp_path / "t.csv"
    path.write_text(_text([_row(rng, 0) for _ in range(200)], rng, "\n", quote=False))
    script = f"""
import os, sys
from nfacep.io import csvblocks
from nfacep.io.reader import read_chunks
from tests.io.test_csv_blocks import STREAM
csvblocks.BLOCK = 256
n = sum(p.n for p in read_chunks({str(path)!r}, STREAM, 16))
pid = os.fork()
if pid == 0:
    os._exit(0 if sum(p.n for p in read_chunks({str(path)!r}, STREAM, 16)) == n else 1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, timeout=60)
    assert done.returncode == 0


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_label_that_is_not_utf8_is_named_as_the_whole_read_names_it(
    tmp_path, small_blocks, where
):
    """Blocks whose only text is labels are parsed without pyarrow's UTF-8 check (a value
    equal to a label is UTF-8): a value that is not UTF-8, at a block's start, inside it or
    at its end, is still the whole read's error, naming its row and column."""
    small_blocks(8 * 35)
    rng = random.Random(7)
    rows = [[PLAIN[n](rng) for n in HEADER.split(",")] for _ in range(200)]
    lines = [",".join(r).encode() for r in rows]
    starts = _block_rows(HEADER + "\n" + "\n".join(map(bytes.decode, lines)) + "\n")
    at = {"first": starts[10], "middle": starts[10] + 2, "last": starts[11] - 1}[where]
    bad = list(rows[at])
    k = HEADER.split(",").index("e")
    line = b",".join(
        [*(v.encode() for v in bad[:k]), b"Qu\xffeens", *(v.encode() for v in bad[k + 1 :])]
    )
    path = tmp_path / "t.csv"
    path.write_bytes(b"\n".join([HEADER.encode(), *lines[:at], line, *lines[at + 1 :]]) + b"\n")
    assert _assert_same(str(path), 16) == "error"
    with pytest.raises(DataError) as err:
        list(read_chunks(str(path), STREAM, 16))
    assert f"row {at + 1} (line {at + 2}), column 'e': not UTF-8 text" in str(err.value)


def test_a_long_line_late_in_the_file_is_read_whole_from_where_the_pieces_stopped(
    tmp_path, small_blocks, monkeypatch
):
    """A line too long for a block (here of 200 bytes or more) near the end: the pieces so far,
    then the whole read's from the row where they stopped, also where read_stream's pieces
    ended early (not on read_chunks' sizes)."""
    small_blocks(200)
    monkeypatch.setattr(csvfile, "LONG_LINE", 200)
    rng = random.Random(5)
    lines = [",".join(PLAIN[n](rng) for n in HEADER.split(",")) + ",x" for _ in range(120)]
    lines[-3] = lines[-3][:-1] + "y" * 300
    path = tmp_path / "t.csv"
    path.write_text("\n".join([HEADER + ",note", *lines]) + "\n")
    assert _assert_same(str(path), 1000) == "accepted"
    stream = list(read_stream(str(path), STREAM, 1000))
    assert len(stream) > 2 and not stream[0][1]  # (they ended early)


def test_infinities_of_both_signs_read_without_a_warning(tmp_path, capsys):
    """A FLOAT32 column with ``inf`` and ``-inf`` in one block (pyarrow reads both; as doubles
    they sum to NaN): ``match`` reads it, its stderr empty (numpy's "RuntimeWarning: invalid
    value encountered in reduce" was printed there)."""
    from nfacep.cli import main

    query = tmp_path / "q.sql"
    query.write_text(
        "CREATE STREAM s (k UINT(8), f FLOAT32);\n"
        "QUERY q FROM s PARTITION k PATTERN (A B) DEFINE A AS f > 0, B AS f < 0;\n"
    )
    path = tmp_path / "t.csv"
    path.write_text("k,f\n1,inf\n1,-inf\n2,1.5\n2,-2\n")
    out = tmp_path / "m.csv"
    assert main(["match", str(query), "--input", str(path), "--output", str(out)]) == 0
    assert capsys.readouterr().err == ""
    assert out.read_text() == "seq,query,partition\n1,q,1\n3,q,2\n"
