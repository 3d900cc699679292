"""CSV columns on the fast path (``nfacep.io.convert.from_table(..., text=True)``): a column of
the common spelling converted chunk by chunk with vectorised checks; anything else, and any
error, on the exact path. The fast path must give exactly the exact path's values, and an
error found in a file read that way must still name its file, row, line and column."""

from __future__ import annotations

import itertools
import random
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

import nfacep
from nfacep.cli import main
from nfacep.errors import DataError
from nfacep.io.convert import from_table
from nfacep.io.reader import read, read_chunks

STREAM = nfacep.compile_text(
    "CREATE STREAM s (u UINT(16), i INT(8), f FLOAT32, e ENUM('Staten Island', 'Queens'), "
    "b BOOL); QUERY q PATTERN (A) DEFINE A AS e = 'Queens'"
).program.schema

HEADER = "u,i,f,e,b"


def _midpoint_texts(rng: random.Random, n: int) -> list[str]:
    """Decimal texts whose nearest double is the midpoint of two singles while the text is
    just above or below it (the double rounding a single must not do), or exactly on it."""
    out = []
    for _ in range(n):
        a = np.float32(rng.uniform(-1e6, 1e6))
        b = np.nextafter(a, np.float32(np.inf))
        mid = (Decimal(float(a)) + Decimal(float(b))) / 2
        nudge = rng.choice(["", "0000000000000000001", "-"])
        text = str(mid)
        if nudge == "-":
            text = str(mid - Decimal("1e-30"))
        elif nudge:
            text = text + nudge if "." in text else text + "." + nudge
        out.append(text)
    return out


def _floats(rng: random.Random, n: int) -> list[str]:
    kinds = [
        lambda: repr(rng.uniform(-1e3, 1e3)),
        lambda: str(np.float32(rng.uniform(0, 10))),
        lambda: str(rng.randint(-100, 100)),
        lambda: f"{rng.uniform(-1, 1):.3e}",
        lambda: rng.choice([".5", "5.", "+2.5", "-0", "0", "1E5", "nan", "NaN", "1e-50"]),
    ]
    return [rng.choice(kinds)() for _ in range(n)] + _midpoint_texts(rng, n // 4)


def _table(rng: random.Random, n: int, floats: list[str], chunks: int) -> pa.Table:
    m = len(floats)
    cols = {
        "u": [str(rng.choice([0, 1, 65535, rng.randint(0, 65535)])) for _ in range(m)],
        "i": [str(rng.randint(-128, 127)) for _ in range(m)],
        "f": floats,
        "e": [rng.choice(["Staten Island", "Queens"]) for _ in range(m)],
        "b": [rng.choice(["true", "false", "1", "0"]) for _ in range(m)],
    }
    table = pa.table({k: pa.array(v, pa.string()) for k, v in cols.items()})
    cut = sorted(rng.sample(range(1, m), chunks - 1)) if chunks > 1 else []
    bounds = [0, *cut, m]
    batches = [table.slice(a, b - a).to_batches()[0] for a, b in itertools.pairwise(bounds)]
    return pa.Table.from_batches(batches)


@pytest.mark.parametrize("seed", range(8))
def test_the_fast_path_gives_the_exact_paths_values(seed):
    rng = random.Random(seed)
    table = _table(rng, 400, _floats(rng, 400), chunks=rng.randint(1, 5))
    fast = from_table(table, STREAM, text=True)
    exact = from_table(table, STREAM)
    for name, col in exact.columns.items():
        got = fast.columns[name]
        assert got.dtype == col.dtype, name
        assert np.array_equal(got, col, equal_nan=col.dtype.kind == "f"), name


def test_midpoints_round_from_the_text_not_twice():
    rng = random.Random(5)
    texts = _midpoint_texts(rng, 300)
    table = _table(rng, 0, texts, chunks=3)
    got = from_table(table, STREAM, text=True).columns["f"]
    want = [nfacep.lang.values.decimal_to_float32(t) for t in texts]
    assert got.tobytes() == np.array(want, dtype=np.float32).tobytes()


def _write(path, rows: list[str]) -> str:
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return str(path)


GOOD = "7,-3,1.5,Queens,true"

#: (the bad row's text, the column named, a part of the message)
BAD = [
    ("70000,-3,1.5,Queens,true", "u", "does not fit UINT(16)"),
    ("0x1F,-3,1.5,Queens,true", "u", "is not an integer"),
    ("-1,-3,1.5,Queens,true", "u", "does not fit UINT(16)"),
    ("7,-129,1.5,Queens,true", "i", "does not fit INT(8)"),
    ("7,--3,1.5,Queens,true", "i", "is not an integer"),
    ("7,-3,1e39,Queens,true", "f", "beyond the range of FLOAT32"),
    ("7,-3,1.5x,Queens,true", "f", "is not a number"),
    ("7,-3,1.5,queens,true", "e", "is not a label"),
    ("7,-3,1.5,Queens,yes", "b", "is not a BOOL"),
    ("7,-3,1.5,,true", "e", "'' is not a label"),
    ("7,,1.5,Queens,true", "i", "'' is not an integer"),
]


@pytest.mark.parametrize(("bad", "column", "message"), BAD)
@pytest.mark.parametrize("chunk", [3, 1000])
def test_an_error_on_the_fast_path_names_its_row_line_and_column(
    tmp_path, bad, column, message, chunk
):
    rows = [GOOD] * 9 + [""] + [GOOD] * 2 + [bad] + [GOOD] * 3
    path = _write(tmp_path / "t.csv", rows)
    place = f"{path}: row 12 (line 14), column '{column}'"
    for how in (lambda: read(path, STREAM), lambda: list(read_chunks(path, STREAM, chunk))):
        with pytest.raises(DataError) as err:
            how()
        assert str(err.value).startswith(place) and message in str(err.value)


def test_match_names_the_place_of_a_bad_value_late_in_a_csv_file(tmp_path, capsys):
    query = tmp_path / "q.sql"
    query.write_text(
        "CREATE STREAM s (u UINT(16), i INT(8), f FLOAT32, e ENUM('Staten Island', 'Queens'), "
        "b BOOL); QUERY q PATTERN (A) DEFINE A AS e = 'Queens'"
    )
    rows = [GOOD] * 2500 + ["7,-3,1.5,Bronx,true"] + [GOOD] * 10
    path = _write(tmp_path / "t.csv", rows)
    out = tmp_path / "m.csv"
    argv = ["match", str(query), "--input", path, "--output", str(out), "--chunk", "1000"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{path}: row 2501 (line 2502), column 'e': 'Bronx' is not a label" in err
    assert not out.exists()
