"""The chunked tuple reader (``nfacep.io.reader.read_chunks``, behind ``nfacep match --chunk``)
against the whole reader (``nfacep.io.reader.read``) on the hostile inputs of
``tests/tuple_fuzz.py``: seeded mutants of the bundled tuple files and of their Parquet
conversions (including Parquet files with mutated bytes), each read in pieces of 1, 2 and 7
tuples, of about the file's size, and larger than the file.

What read_chunks' contract implies, checked on every mutant and piece size:

- ``read`` returns: the pieces, concatenated, have the same columns (values and dtypes) and
  tuple count; every piece but the last holds exactly ``rows`` tuples, none is empty (no piece
  for a file without tuples); offsets 0, rows, 2·rows, …; no piece of a single file has an
  ``origin``; every row of a piece is named (``where``) as the whole read names it;
- ``read`` raises nfacep's error: ``read_chunks`` raises the same class with the same message.
  It may yield pieces first (it reads a block at a time and cannot know of a bad row it has not
  reached), but only a correct prefix: those rows come before the row the error names, and they
  are what ``read`` returns for the file cut after them (CSV: the same bytes up to the end of
  the last yielded row's line; Parquet: the same rows read row group by row group, or as one
  batch when a later page of the row group is damaged, and written again), named alike.

The files are small (one block of the CSV reader, 1 MiB); some CSV mutants are also grown to
1.5 MB with their file's clean rows before the mutation, so that it comes in a later block.
The suite runs ``NFACEP_CHUNK_FUZZ_INPUTS`` mutants (default 300) and
``NFACEP_CHUNK_FUZZ_GROWN`` grown ones (default 8), about 25 s in all, of the seed
``NFACEP_FUZZ_SEED`` (default 0, as ``tests/io/test_fuzz_tuples.py``); under
``HYPOTHESIS_PROFILE=nightly`` the defaults are 5000 and 400, e.g.

    NFACEP_FUZZ_SEED=$(date +%Y%m%d) HYPOTHESIS_PROFILE=nightly \\
        .venv/bin/python -m pytest -q tests/io/test_read_chunks_fuzz.py

A failure names the input (``tests/fuzz_tuples.py --seed S --show I`` prints it) and the piece
size.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tuple_fuzz import QUERIES, compiled, mutant

from nfacep.errors import NfacepError
from nfacep.io.reader import read, read_chunks
from nfacep.io.tuples import Tuples

NIGHTLY = os.environ.get("HYPOTHESIS_PROFILE") == "nightly"
INPUTS = int(os.environ.get("NFACEP_CHUNK_FUZZ_INPUTS", "5000" if NIGHTLY else "300"))
SEED = int(os.environ.get("NFACEP_FUZZ_SEED", "0"))
BLOCKS = 6
#: CSV mutants grown past several of the CSV reader's blocks (1 MiB), and to what size.
GROWN = int(os.environ.get("NFACEP_CHUNK_FUZZ_GROWN", "400" if NIGHTLY else "8"))
GROWN_BYTES = 3 << 19


@dataclass
class Outcome:
    """What a reader did: the tuples it returned, or the error it raised (after ``pieces``)."""

    whole: Tuples | None = None
    pieces: list[Tuples] | None = None
    error: NfacepError | None = None


def whole_read(path: str, schema) -> Outcome:
    try:
        return Outcome(whole=read(path, schema))
    except NfacepError as err:
        return Outcome(error=err)


def chunked_read(path: str, schema, rows: int) -> Outcome:
    pieces: list[Tuples] = []
    try:
        for piece in read_chunks(path, schema, rows):
            pieces.append(piece)
    except NfacepError as err:
        return Outcome(pieces=pieces, error=err)
    return Outcome(pieces=pieces)


def _concat(pieces: list[Tuples], like: Tuples) -> dict[str, np.ndarray]:
    return {
        f: np.concatenate([p.columns[f] for p in pieces]) if pieces else c[:0]
        for f, c in like.columns.items()
    }


def assert_cut_of(pieces: list[Tuples], whole: Tuples, rows: int, rename=str) -> None:
    """``pieces`` are ``whole`` cut every ``rows`` tuples, each row named as ``whole`` names
    it (after ``rename``, when the pieces were read from another file)."""
    n = sum(p.n for p in pieces)
    assert n == whole.n, f"{n} tuples in the pieces, {whole.n} in the whole read"
    assert [p.offset for p in pieces] == list(range(0, whole.n, rows)), "offsets"
    assert all(p.n == rows for p in pieces[:-1]), [p.n for p in pieces]
    assert all(p.n > 0 for p in pieces), "an empty piece"
    got = _concat(pieces, whole)
    assert list(got) == list(whole.columns), "fields"
    for f, col in whole.columns.items():
        assert got[f].dtype == col.dtype, f"{f}: {got[f].dtype}, whole {col.dtype}"
        assert np.array_equal(got[f], col, equal_nan=col.dtype.kind == "f"), f"{f}: values"
    first = next(iter(whole.columns), None)
    for p in pieces:
        assert all(len(c) == p.n for c in p.columns.values()), "a column of another length"
        assert p.origin is None and whole.origin is None
        assert rename(p.source) == str(whole.source), (str(p.source), str(whole.source))
        if first is not None:
            for row in range(p.n) if whole.n <= 5000 else {0, p.n // 2, p.n - 1}:
                assert rename(p.where(row, first)) == whole.where(p.offset + row, first), (
                    f"piece at {p.offset}, row {row}"
                )


def _named_row(message: str) -> int | None:
    """The 0-based row an error names (``…: row N (line L)…``), None when it names none."""
    found = re.search(r": row (\d+)\b", message)
    return int(found.group(1)) - 1 if found else None


def _csv_prefix(data: bytes, rows: int) -> bytes:
    """The CSV file ``data`` cut after its first ``rows`` data rows (the non-empty lines after
    the header line, lines ended by \\n, \\r or \\r\\n), line end included."""
    lines = re.finditer(rb"([^\r\n]*)(\r\n|\r|\n|$)", data)
    next(lines)  # the header
    count = 0
    for line in lines:
        count += bool(line.group(1))
        if count == rows:
            return data[: line.end()]
    raise AssertionError(f"the file has fewer than {rows} rows")


def _parquet_prefix(path: str, names, rows: int) -> pa.Table:
    """The columns ``names`` of the first ``rows`` rows of the Parquet file ``path``, not as
    read_chunks reads them (a batch of at most its ``rows`` at a time, without pre-buffering):
    row group by row group, or, when a page of a row group cannot be read, as one batch of
    ``rows`` rows, pre-buffered."""
    f = pq.ParquetFile(path)
    try:
        groups, count = [], 0
        while count < rows:
            groups.append(f.read_row_group(len(groups), columns=list(names)))
            count += groups[-1].num_rows
        return pa.concat_tables(groups).slice(0, rows)
    except (pa.ArrowException, OSError):  # a bad page later in a row group
        batch = next(pq.ParquetFile(path).iter_batches(batch_size=rows, columns=list(names)))
        assert batch.num_rows == rows, f"{batch.num_rows} rows, {rows} yielded"
        return pa.Table.from_batches([batch])


def assert_correct_prefix(
    pieces: list[Tuples],
    error: NfacepError,
    path: str,
    kind: str,
    data: bytes,
    schema,
    rows: int,
    folder: str,
) -> None:
    """Pieces yielded before ``error`` (which ``read`` raised too): they end before the row the
    error names, and they are what ``read`` returns for the file cut after them."""
    n = sum(p.n for p in pieces)
    if not n:
        return
    row = _named_row(str(error))
    assert row is None or row >= n, f"{n} tuples yielded, then an error at row {row + 1}"
    if kind == "csv":
        cut = os.path.join(folder, "prefix.csv")
        with open(cut, "wb") as f:
            f.write(_csv_prefix(data, n))
    else:
        cut = os.path.join(folder, "prefix.parquet")
        try:
            pq.write_table(_parquet_prefix(path, schema.names, n), cut)
        except (pa.ArrowException, OSError) as err:
            raise AssertionError(
                f"{n} tuples yielded of a file whose row groups cannot be read: {err}"
            ) from None
    # the pieces name their rows by the original file: the cut file has the same rows
    assert_cut_of(pieces, read(cut, schema), rows, lambda text: str(text).replace(path, cut, 1))


def sizes(n: int) -> list[int]:
    """The piece sizes tried on a file of about ``n`` tuples."""
    return sorted({1, 2, 7, max(1, n - 1), max(1, n), n + 1, 1 << 20})


def grown(clean: bytes, data: bytes, size: int = GROWN_BYTES) -> bytes:
    """The CSV mutant ``data`` with the data rows of its unmutated file ``clean`` put after its
    header line, repeated to about ``size`` bytes: what the mutation did comes in a later
    block of the CSV reader (``data`` unchanged when it has no line end)."""
    end = re.search(rb"\r\n|\r|\n", data)
    if end is None:
        return data
    rows = clean.split(b"\n", 1)[1].rstrip(b"\n") + b"\n"
    return data[: end.end()] + rows * (size // len(rows) + 1) + data[end.end() :]


def compare(seed: int, i: int, folder: str, grow: bool = False) -> str:
    """Input ``i`` of ``seed`` (when ``grow``, a CSV input :func:`grown`) read whole and in
    pieces of every size of :func:`sizes`; the whole read's outcome (``accepted`` or
    ``error``)."""
    base, kind, data = mutant(seed, i)
    if grow:
        assert kind == "csv"
        data = grown(base.data, data)
    path = os.path.join(folder, "t.csv" if kind == "csv" else "t.parquet")
    with open(path, "wb") as f:
        f.write(data)
    schema = compiled(base.query).program.schema
    whole = whole_read(path, schema)
    n = whole.whole.n if whole.whole is not None else max(0, data.count(b"\n") - 1)
    for rows in sizes(n) if not grow else sorted({4099, max(1, n)}):
        where = (
            f"input {i} of seed {seed} ({kind} from {base.name}.csv"
            f"{', grown' if grow else ''}; tests/fuzz_tuples.py --seed {seed} "
            f"--show {i}), pieces of {rows}"
        )
        got = chunked_read(path, schema, rows)
        try:
            if whole.whole is not None:
                assert got.error is None, f"read accepts, read_chunks raises {got.error!r}"
                assert_cut_of(got.pieces, whole.whole, rows)
            else:
                assert got.error is not None, (
                    f"read raises {whole.error!r}, read_chunks yields {len(got.pieces)} "
                    "pieces and no error"
                )
                assert type(got.error) is type(whole.error) and str(got.error) == str(
                    whole.error
                ), f"read raises\n  {whole.error!r}\nread_chunks raises\n  {got.error!r}"
                assert_correct_prefix(
                    got.pieces, whole.error, path, kind, data, schema, rows, folder
                )
        except AssertionError as err:
            raise AssertionError(f"{where}: {err}") from None
    return "accepted" if whole.whole is not None else "error"


@pytest.mark.slow
@pytest.mark.parametrize("block", range(BLOCKS))
def test_pieces_are_the_whole_read_or_its_error(tmp_path, block):
    outcomes = {"accepted": 0, "error": 0}
    for i in range(block * INPUTS // BLOCKS, (block + 1) * INPUTS // BLOCKS):
        outcomes[compare(SEED, i, str(tmp_path))] += 1
    # the mutants reach both sides of the reader
    assert outcomes["accepted"] > 0 and outcomes["error"] > 0, outcomes


def test_grown_csv_pieces_are_the_whole_read_or_its_error(tmp_path):
    outcomes = {"accepted": 0, "error": 0}
    inputs = (i for i in range(10**9) if mutant(SEED, i)[1] == "csv")
    for _, i in zip(range(GROWN), inputs, strict=False):
        outcomes[compare(SEED, i, str(tmp_path), grow=True)] += 1
    assert outcomes["accepted"] > 0 and outcomes["error"] > 0, outcomes


@pytest.mark.parametrize("length", [1_500_000, 2_100_000, 5_000_000])
@pytest.mark.parametrize("rows", [1, 1000])
def test_a_long_line_is_read_in_pieces_as_whole(tmp_path, length, rows):
    """pyarrow refuses a line longer than about two of its blocks; the pieces are cut from
    blocks as long as the whole read's, so a line is refused (or not) by both alike."""
    schema = compiled(str(QUERIES / "marathon.sql")).program.schema
    data = (QUERIES / "marathon.csv").read_bytes().split(b"\n")
    data[100] += b" " * length  # spaces after a FLOAT32 value: read as the value
    path = str(tmp_path / "t.csv")
    data = b"\n".join(data)
    with open(path, "wb") as f:
        f.write(data)
    whole, got = whole_read(path, schema), chunked_read(path, schema, rows)
    if whole.whole is not None:
        assert got.error is None, got.error
        assert_cut_of(got.pieces, whole.whole, rows)
    else:
        assert type(got.error) is type(whole.error) and str(got.error) == str(whole.error)
        assert_correct_prefix(
            got.pieces, whole.error, path, "csv", data, schema, rows, str(tmp_path)
        )
