"""Tuple files read in pieces (``nfacep.io.reader.read_chunks``, for ``nfacep match --chunk``):
the pieces are the whole read cut up, and an error names its row as the whole read does."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nfacep
from nfacep.errors import DataError
from nfacep.io.reader import read, read_chunks
from nfacep.io.tuples import JoinedColumns

STREAM = nfacep.compile_text(
    "CREATE STREAM s (k UINT(8), a INT(8), e ENUM('x', 'y'));QUERY q PATTERN (A) DEFINE A AS a > 0"
).program.schema


def csv_text(rows, blanks, ending):
    lines = ["k,a,e"]
    for i, (k, a, e) in enumerate(rows):
        lines += [""] * blanks[i % len(blanks)] + [f"{k},{a},{e}"]
    return ending.join(lines) + ending


def offsets(n, rows, first=None):
    """Where the pieces of a stream of ``n`` tuples start: every ``rows``, or from ``first``
    on, each piece twice the one before up to ``rows``."""
    at, size, out = 0, rows if first is None else min(first, rows), []
    while at < n:
        out.append(at)
        at, size = at + size, min(rows, 2 * size)
    return out


def same(path, rows, first=None):
    whole = read(path, STREAM)
    pieces = list(read_chunks(path, STREAM, rows, first=first))
    starts = offsets(whole.n, rows, first)
    assert [p.offset for p in pieces] == starts
    assert [p.n for p in pieces] == [b - a for a, b in itertools.pairwise([*starts, whole.n])]
    for f, col in whole.columns.items():
        got = np.concatenate([p.columns[f] for p in pieces]) if pieces else col[:0]
        assert got.dtype == col.dtype and np.array_equal(got, col)
    for p in pieces:
        for row in {0, p.n - 1}:
            assert p.where(row, "a") == whole.where(p.offset + row, "a")


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 255), st.integers(-128, 127), st.sampled_from("xy")), max_size=40
    ),
    blanks=st.lists(st.integers(0, 2), min_size=1, max_size=4),
    ending=st.sampled_from(["\n", "\r\n", "\r"]),
    chunk=st.integers(1, 9),
    first=st.none() | st.integers(1, 4),
)
def test_pieces_are_the_whole_read_cut(tmp_path_factory, rows, blanks, ending, chunk, first):
    """CSV, Parquet and a folder of part files: pieces of ``chunk`` tuples, or growing from
    ``first`` to ``chunk``."""
    d = tmp_path_factory.mktemp("rc")
    text = d / "t.csv"
    text.write_bytes(csv_text(rows, blanks, ending).encode())
    same(str(text), chunk, first)
    table = pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.uint8()),
            "a": pa.array([r[1] for r in rows], pa.int8()),
            "e": pa.array([r[2] for r in rows], pa.string()).dictionary_encode(),
        }
    )
    pq.write_table(table, d / "t.parquet", row_group_size=3)
    same(str(d / "t.parquet"), chunk, first)
    (d / "f").mkdir()
    for i in range(0, len(rows), 7):
        pq.write_table(table.slice(i, 7), d / "f" / f"part-{i}.parquet")
    if rows:
        same(str(d / "f"), chunk, first)


@pytest.mark.parametrize("quoted", [False, True])
@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_an_error_in_a_late_piece_names_the_row_of_the_whole_read(tmp_path, quoted, ending):
    rows = [(i % 7, i % 100, "x") for i in range(300)]
    text = csv_text(rows, [0, 1], ending).replace("250,x", '"250x",x' if quoted else "250x,x")
    text = text.replace(f"{ending}5,50,x", f"{ending}5,500,x")
    path = tmp_path / "t.csv"
    path.write_text(text, newline="")
    with pytest.raises(DataError) as whole:
        read(str(path), STREAM)
    with pytest.raises(DataError) as pieces:
        list(read_chunks(str(path), STREAM, 16))
    assert str(pieces.value) == str(whole.value)
    assert "line" in str(whole.value)


def test_a_bad_parquet_value_in_a_late_piece(tmp_path):
    a = np.arange(200) % 100
    a[150] = 300
    pq.write_table(
        pa.table(
            {"k": pa.array(np.zeros(200, np.uint8)), "a": pa.array(a), "e": pa.array(["x"] * 200)}
        ),
        tmp_path / "t.parquet",
        row_group_size=64,
    )
    path = str(tmp_path / "t.parquet")
    with pytest.raises(DataError) as whole:
        read(path, STREAM)
    with pytest.raises(DataError) as pieces:
        list(read_chunks(path, STREAM, 10))
    assert str(pieces.value) == str(whole.value) and "row 151" in str(whole.value)


def test_a_ragged_csv_line_in_a_late_piece(tmp_path):
    rows = [(1, 1, "x")] * 100
    path = tmp_path / "t.csv"
    path.write_text(csv_text(rows, [0], "\n") + "1,1\n")  # a line short of a value, last
    with pytest.raises(DataError) as whole:
        read(str(path), STREAM)
    with pytest.raises(DataError) as pieces:
        list(read_chunks(str(path), STREAM, 8))
    assert str(pieces.value) == str(whole.value)


def write_parts(folder, parts, *, seqs=None):
    """Part files ``part-0.parquet``, ... holding the rows of ``parts`` (with their ``seq``
    column from ``seqs`` when given)."""
    folder.mkdir()
    for i, rows in enumerate(parts):
        cols = {
            "k": pa.array([r[0] for r in rows], pa.uint8()),
            "a": pa.array([r[1] for r in rows], pa.int8()),
            "e": pa.array([r[2] for r in rows], pa.string()),
        }
        if seqs is not None:
            cols["seq"] = pa.array(seqs[i], pa.int64())
        pq.write_table(pa.table(cols), folder / f"part-{i}.parquet")


row = st.tuples(st.integers(0, 255), st.integers(-128, 127), st.sampled_from("xy"))


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(st.lists(row, max_size=12), min_size=1, max_size=5),
    chunk=st.integers(1, 9),
    first=st.none() | st.integers(1, 4),
    seq=st.sampled_from(["none", "ranges", "interleaved"]),
    data=st.data(),
)
def test_a_folder_in_pieces_is_its_whole_read(tmp_path_factory, parts, chunk, first, seq, data):
    """A folder of part files (some empty) in pieces cut across files: the same columns and
    the same file and row for each tuple as the whole read, whether the files follow their
    names, their ``seq`` ranges in another order, or ``seq`` interleaves them (read whole)."""
    folder = tmp_path_factory.mktemp("f") / "t.parquet"
    seqs = None
    if seq != "none":
        n = sum(map(len, parts))
        if seq == "ranges":  # each file a range, the ranges in a shuffled order of the files
            order = data.draw(st.permutations(range(len(parts))))
            starts, at = {}, 0
            for i in order:
                starts[i], at = at, at + len(parts[i]) + data.draw(st.integers(0, 3))
            seqs = [list(range(starts[i], starts[i] + len(p))) for i, p in enumerate(parts)]
        else:
            values = data.draw(st.permutations(range(n)))
            cuts = np.cumsum([0, *map(len, parts)])
            seqs = [sorted(values[a:b]) for a, b in itertools.pairwise(cuts)]
    if not sum(map(len, parts)):
        return
    write_parts(folder, parts, seqs=seqs)
    same(str(folder), chunk, first)


def test_a_folder_in_seq_ranges_is_read_a_file_at_a_time(tmp_path, monkeypatch):
    """Files whose seq ranges follow one another (in another order than their names) are
    streamed, never read whole; interleaved ones are read whole."""
    from nfacep.io import folder as folder_mod

    rows = [(i, i % 100, "xy"[i % 2]) for i in range(30)]
    write_parts(
        tmp_path / "ranges",
        [rows[:10], rows[10:20], rows[20:]],
        seqs=[range(20, 30), range(10), range(10, 20)],
    )
    write_parts(tmp_path / "mixed", [rows[:15], rows[15:]], seqs=[range(0, 30, 2), range(1, 30, 2)])
    whole = {name: read(str(tmp_path / name), STREAM) for name in ("ranges", "mixed")}
    calls = []
    real = folder_mod.read_folder
    monkeypatch.setattr(folder_mod, "read_folder", lambda *a: calls.append(a) or real(*a))
    for name in ("ranges", "mixed"):
        pieces = list(read_chunks(str(tmp_path / name), STREAM, 7))
        assert np.array_equal(
            np.concatenate([p.columns["k"] for p in pieces]), whole[name].columns["k"]
        )
    assert [str(a[0]) for a in calls] == [str(tmp_path / "mixed")]
    assert whole["ranges"].columns["k"].tolist() == [*range(10, 30), *range(10)]


def test_a_bad_value_in_a_later_file_is_named_as_the_whole_read_names_it(tmp_path):
    rows = [(1, 1, "x")] * 5
    write_parts(tmp_path / "t.parquet", [rows, rows, [(1, 1, "x"), (2, 2, "z")]])
    with pytest.raises(DataError) as whole:
        read(str(tmp_path / "t.parquet"), STREAM)
    with pytest.raises(DataError) as pieces:
        list(read_chunks(str(tmp_path / "t.parquet"), STREAM, 4))
    assert str(pieces.value) == str(whole.value) and "part-2.parquet" in str(whole.value)


def test_a_quoted_csv_file_is_streamed_and_an_open_quote_is_read_s_error(tmp_path, monkeypatch):
    """Quoted values are read a piece at a time (never read whole when all is well); a quote
    left open at a line end, whose value pyarrow would carry into the next lines, gives the
    error read() gives, after pieces that all come before it."""
    from nfacep.io import reader as reader_mod

    good = tmp_path / "good.csv"
    good.write_text(
        "k,a,e\n" + "".join(f'{i % 256},"{i % 100}","{"xy"[i % 2]}"\n' for i in range(50))
    )
    bad = tmp_path / "bad.csv"
    lines = [f"{i % 256},{i % 100},{'xy'[i % 2]}" for i in range(50)]
    lines[31] = '7,"5,x'  # a quote that its line does not close
    bad.write_text("k,a,e\n" + "\n".join(lines) + "\n")
    with pytest.raises(DataError) as whole:
        read(str(bad), STREAM)
    expected = read(str(good), STREAM)
    real = reader_mod.read
    calls = []
    monkeypatch.setattr(reader_mod, "read", lambda *a: calls.append(a) or real(*a))
    same_columns = list(read_chunks(str(good), STREAM, 8))
    assert calls == []
    assert np.array_equal(
        np.concatenate([p.columns["a"] for p in same_columns]), expected.columns["a"]
    )
    pieces = []
    with pytest.raises(DataError) as chunked:
        for piece in read_chunks(str(bad), STREAM, 8):
            pieces.append(piece)
    assert str(chunked.value) == str(whole.value)
    assert "row 32 (line 33)" in str(whole.value) and "not closed" in str(whole.value)
    assert sum(p.n for p in pieces) <= 31


@pytest.mark.parametrize("chunk", [5, 64])
def test_an_open_quote_in_another_column_is_read_s_error(tmp_path, chunk):
    """A quote left open in a column that is not the stream's: the error read() gives, not
    the value that runs on into the next line."""
    bad = tmp_path / "bad.csv"
    lines = [f"{i % 256},{i % 100},{'xy'[i % 2]},note" for i in range(40)]
    lines[20] = '7,5,x,"open'
    lines[21] = 'still"'  # (with the line before: 4 columns, the last holding a line break)
    bad.write_text("k,a,e,n\n" + "\n".join(lines) + "\n")
    with pytest.raises(DataError) as whole:
        read(str(bad), STREAM)
    with pytest.raises(DataError) as chunked:
        list(read_chunks(str(bad), STREAM, chunk))
    assert str(chunked.value) == str(whole.value)


def test_a_csv_piece_copies_a_column_when_it_is_first_read(tmp_path):
    """A CSV file's pieces are put together from its blocks' columns a column at a time, when
    one is first read (:class:`~nfacep.io.tuples.JoinedColumns`), in the stream's numpy types;
    a column read twice is the same array."""
    rows = [(i % 7, i % 100 - 50, "xy"[i % 2]) for i in range(300)]
    path = tmp_path / "t.csv"
    path.write_text(csv_text(rows, [0], "\n"))
    whole = read(str(path), STREAM)
    pieces = list(read_chunks(str(path), STREAM, 64, first=16))
    assert len(pieces) > 1
    for p in pieces:
        assert isinstance(p.columns, JoinedColumns)
        assert list(p.columns) == list(STREAM.names) and len(p.columns) == 3
        a = p.columns["a"]
        assert p.columns["a"] is a
        assert a.dtype == whole.columns["a"].dtype
        assert np.array_equal(a, whole.columns["a"][p.offset : p.offset + p.n])
