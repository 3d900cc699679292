"""Tuple files: CSV and Parquet, typed conversion, and errors naming file, row and column."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nfacep
from nfacep import tuples
from nfacep.errors import DataError
from nfacep.values import decimal_to_float32

SCHEMA = nfacep.compile_text(
    "CREATE STREAM s (u UINT(8), i INT(8), b BOOL, e ENUM('Staten Island', 'x'), f FLOAT32,"
    " w UINT(64)); QUERY q PATTERN (A)").program.schema


def write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_csv_types(tmp_path):
    path = write(tmp_path, "extra,u,i,b,e,f,w\n"
                           "z,255,-128,true,Staten Island,1.5,18446744073709551615\n"
                           "z, 0 ,127,0,x,nan,0\n")
    t = tuples.read(path, SCHEMA)
    assert t.n == 2
    assert t.columns["u"].tolist() == [255, 0]
    assert t.columns["i"].tolist() == [-128, 127]
    assert t.columns["b"].tolist() == [True, False]
    assert t.columns["e"].tolist() == [0, 1]
    assert t.columns["f"][0] == np.float32(1.5) and np.isnan(t.columns["f"][1])
    assert t.columns["w"].tolist() == [2**64 - 1, 0]


ROW = "1,-1,true,x,1.0,5"
BAD = [
    ("u,i,b,e,f\n" + ROW[:-2], "lacks the field(s) w"),
    ("", "the file is empty"),
    ("u,i,b,e,f,w\n" + ROW + "\n256,-1,true,x,1.0,5", "row 2 (line 3), column 'u': 256 does "
                                                        "not fit UINT(8) (0..255)"),
    ("u,i,b,e,f,w\n1,-129,true,x,1.0,5", "column 'i': -129 does not fit INT(8)"),
    ("u,i,b,e,f,w\n1.5,-1,true,x,1.0,5", "column 'u': '1.5' is not an integer"),
    ("u,i,b,e,f,w\n1,-1,yes,x,1.0,5", "column 'b': 'yes' is not a BOOL"),
    ("u,i,b,e,f,w\n1,-1,true,Brooklyn,1.0,5", "column 'e': 'Brooklyn' is not a label"),
    ("u,i,b,e,f,w\n1,-1,true,x,fast,5", "column 'f': 'fast' is not a number"),
    ("u,i,b,e,f,w\n,-1,true,x,1.0,5", "column 'u': '' is not an integer"),
    ("u,i,b,e,f,w\n1,-1,true,x,1.0,99999999999999999999999", "column 'w': "
     "99999999999999999999999 does not fit UINT(64)"),
    ("u,i,b,e,f,w\n1,-1,true,x,1.0", "Expected 6 columns, got 5"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_csv_errors(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(DataError) as info:
        tuples.read(path, SCHEMA)
    assert message in str(info.value)
    assert str(info.value).startswith(path)


def test_parquet_typed_and_string_columns(tmp_path):
    table = pa.table({"u": pa.array([1, 2], pa.uint8()), "i": pa.array([-1, 3], pa.int32()),
                      "b": [True, False], "e": ["x", "Staten Island"],
                      "f": pa.array([0.1, 2.0], pa.float64()),
                      "w": pa.array([2**64 - 1, 0], pa.uint64())})
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path)
    t = tuples.read(path, SCHEMA)
    assert t.columns["e"].tolist() == [1, 0]
    assert t.columns["f"][0] == np.float32(0.1)
    assert t.columns["w"].tolist() == [2**64 - 1, 0]
    bad = table.set_column(1, "i", pa.array([-1, 300], pa.int32()))
    pq.write_table(bad, path)
    with pytest.raises(DataError, match=r"row 2 .*column 'i': 300 does not fit INT"):
        tuples.read(path, SCHEMA)


def test_float32_rounding_is_correct_at_double_rounding_ties():
    # 1 + 2**-24 + 2**-60: rounding to double first lands exactly on the float32 midpoint
    # 1 + 2**-24, and ties-to-even would then give 1.0; the nearest single is 1 + 2**-23
    text = "1.00000005960464478379658409"
    assert float(decimal_to_float32(text)) == 1 + 2**-23
    assert float(decimal_to_float32("1.000000059604644775390625")) == 1.0  # a true tie
    assert float(decimal_to_float32("3.3")) == float(np.float32(3.3))


def test_order_check(tmp_path):
    t = tuples.Tuples({"ts": np.array([1, 2, 2, 1, 0])}, 5, "t.csv")
    with pytest.raises(DataError, match=r"row 4 \(line 5\), column 'ts': 1 is less than 2"):
        tuples.check_order(t, "ts")
