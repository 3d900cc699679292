"""Tuple files read in pieces (``nfacep.tuples.read_chunks``, for ``nfacep match --chunk``):
the pieces are the whole read cut up, and an error names its row as the whole read does."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nfacep
from nfacep.errors import DataError
from nfacep.tuples import read, read_chunks

STREAM = nfacep.compile_text("CREATE STREAM s (k UINT(8), a INT(8), e ENUM('x', 'y'));"
                             "QUERY q PATTERN (A) DEFINE A AS a > 0").program.schema


def csv_text(rows, blanks, ending):
    lines = ["k,a,e"]
    for i, (k, a, e) in enumerate(rows):
        lines += [""] * blanks[i % len(blanks)] + [f"{k},{a},{e}"]
    return ending.join(lines) + ending


def same(path, rows):
    whole = read(path, STREAM)
    pieces = list(read_chunks(path, STREAM, rows))
    assert [p.offset for p in pieces] == list(range(0, whole.n, rows))
    assert all(p.n == rows for p in pieces[:-1]) and all(p.n for p in pieces)
    for f, col in whole.columns.items():
        got = np.concatenate([p.columns[f] for p in pieces]) if pieces else col[:0]
        assert got.dtype == col.dtype and np.array_equal(got, col)
    for p in pieces:
        for row in {0, p.n - 1}:
            assert p.where(row, "a") == whole.where(p.offset + row, "a")


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 255), st.integers(-128, 127),
                               st.sampled_from("xy")), max_size=40),
       blanks=st.lists(st.integers(0, 2), min_size=1, max_size=4),
       ending=st.sampled_from(["\n", "\r\n", "\r"]), chunk=st.integers(1, 9))
def test_pieces_are_the_whole_read_cut(tmp_path_factory, rows, blanks, ending, chunk):
    d = tmp_path_factory.mktemp("rc")
    text = d / "t.csv"
    text.write_bytes(csv_text(rows, blanks, ending).encode())
    same(str(text), chunk)
    table = pa.table({"k": pa.array([r[0] for r in rows], pa.uint8()),
                      "a": pa.array([r[1] for r in rows], pa.int8()),
                      "e": pa.array([r[2] for r in rows], pa.string()).dictionary_encode()})
    pq.write_table(table, d / "t.parquet", row_group_size=3)
    same(str(d / "t.parquet"), chunk)
    (d / "f").mkdir()
    for i in range(0, len(rows), 7):
        pq.write_table(table.slice(i, 7), d / "f" / f"part-{i}.parquet")
    if rows:
        same(str(d / "f"), chunk)


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
    pq.write_table(pa.table({"k": pa.array(np.zeros(200, np.uint8)), "a": pa.array(a),
                             "e": pa.array(["x"] * 200)}), tmp_path / "t.parquet",
                   row_group_size=64)
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
