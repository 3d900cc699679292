"""Tuple files: CSV and Parquet, typed conversion, and errors naming file, row and column."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nfacep
from nfacep.errors import DataError
from nfacep.io import convert, reader, tuples
from nfacep.lang.values import decimal_to_float32

SCHEMA = nfacep.compile_text(
    "CREATE STREAM s (u UINT(8), i INT(8), b BOOL, e ENUM('Staten Island', 'x'), f FLOAT32,"
    " w UINT(64)); QUERY q PATTERN (A)"
).program.schema


def write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_csv_types(tmp_path):
    path = write(
        tmp_path,
        "extra,u,i,b,e,f,w\n"
        "z,255,-128,true,Staten Island,1.5,18446744073709551615\n"
        "z, 0 ,127,0,x,nan,0\n",
    )
    t = reader.read(path, SCHEMA)
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
    (
        "u,i,b,e,f,w\n" + ROW + "\n256,-1,true,x,1.0,5",
        "row 2 (line 3), column 'u': 256 does not fit UINT(8) (0..255)",
    ),
    ("u,i,b,e,f,w\n1,-129,true,x,1.0,5", "column 'i': -129 does not fit INT(8)"),
    ("u,i,b,e,f,w\n1.5,-1,true,x,1.0,5", "column 'u': '1.5' is not an integer"),
    ("u,i,b,e,f,w\n1,-1,yes,x,1.0,5", "column 'b': 'yes' is not a BOOL"),
    ("u,i,b,e,f,w\n1,-1,true,Brooklyn,1.0,5", "column 'e': 'Brooklyn' is not a label"),
    ("u,i,b,e,f,w\n1,-1,true,x,fast,5", "column 'f': 'fast' is not a number"),
    ("u,i,b,e,f,w\n,-1,true,x,1.0,5", "column 'u': '' is not an integer"),
    (
        "u,i,b,e,f,w\n1,-1,true,x,1.0,99999999999999999999999",
        "column 'w': 99999999999999999999999 does not fit UINT(64)",
    ),
    ("u,i,b,e,f,w\n1,-1,true,x,1.0", "Expected 6 columns, got 5"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_csv_errors(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(DataError) as info:
        reader.read(path, SCHEMA)
    assert message in str(info.value)
    assert str(info.value).startswith(path)


def test_parquet_typed_and_string_columns(tmp_path):
    table = pa.table(
        {
            "u": pa.array([1, 2], pa.uint8()),
            "i": pa.array([-1, 3], pa.int32()),
            "b": [True, False],
            "e": ["x", "Staten Island"],
            "f": pa.array([0.1, 2.0], pa.float64()),
            "w": pa.array([2**64 - 1, 0], pa.uint64()),
        }
    )
    path = str(tmp_path / "t.parquet")
    pq.write_table(table, path)
    t = reader.read(path, SCHEMA)
    assert t.columns["e"].tolist() == [1, 0]
    assert t.columns["f"][0] == np.float32(0.1)
    assert t.columns["w"].tolist() == [2**64 - 1, 0]
    bad = table.set_column(1, "i", pa.array([-1, 300], pa.int32()))
    pq.write_table(bad, path)
    with pytest.raises(DataError, match=r"row 2, column 'i': 300 does not fit INT"):
        reader.read(path, SCHEMA)


def test_parquet_dictionary_columns(tmp_path):
    """Dictionary-encoded columns (as Parquet writers keep labels) read as their values; each
    distinct value is converted once, and a bad value is reported at its row only when a row
    uses it."""

    def dictionary(indices, values):
        return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int8()), pa.array(values))

    plain = {
        "u": pa.array([1, 2, 1], pa.uint8()),
        "i": pa.array([-1, 3, 3], pa.int32()),
        "b": [True, False, True],
        "e": ["x", "Staten Island", "x"],
        "f": ["0.1", "2", "0.1"],
        "w": pa.array([2**64 - 1, 0, 0], pa.uint64()),
    }
    encoded = {
        **plain,
        "e": dictionary([1, 2, 1], ["y", "x", "Staten Island"]),
        "f": dictionary([0, 1, 0], ["0.1", "2"]),
        "i": dictionary([0, 1, 1], pa.array([-1, 3], pa.int32())),
    }
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table(plain), path)
    want = reader.read(path, SCHEMA)
    pq.write_table(pa.table(encoded), path)
    got = reader.read(path, SCHEMA)
    for name, values in want.columns.items():
        assert got.columns[name].dtype == values.dtype
        assert got.columns[name].tolist() == values.tolist()
    # a label the stream lacks, in the dictionary but used by no row, is no error
    unused = {**encoded, "e": dictionary([1, 2, 1], ["nowhere", "x", "Staten Island"])}
    pq.write_table(pa.table(unused), path)
    assert reader.read(path, SCHEMA).columns["e"].tolist() == want.columns["e"].tolist()
    used = {**encoded, "e": dictionary([1, 2, 0], ["nowhere", "x", "Staten Island"])}
    pq.write_table(pa.table(used), path)
    with pytest.raises(DataError, match=r"row 3, column 'e': 'nowhere' is not a label"):
        reader.read(path, SCHEMA)


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


# --- a folder of Parquet part files (as Spark and `nfacep vectors` write tuples.parquet/) -----


def typed_table(n: int, seq: bool = False) -> pa.Table:
    """n rows of SCHEMA's fields as Spark writes them (ENUM as labels), row i recognisable by
    u == i % 256 and w == i; with ``seq``, the vectors' sequence column first."""
    cols = {
        "u": pa.array([i % 256 for i in range(n)], pa.int64()),
        "i": pa.array([i % 100 - 50 for i in range(n)], pa.int64()),
        "b": [i % 3 == 0 for i in range(n)],
        "e": [("x", "Staten Island")[i % 2] for i in range(n)],
        "f": pa.array([i / 4 for i in range(n)], pa.float32()),
        "w": pa.array(range(n), pa.int64()),
    }
    if seq:
        cols = {"seq": pa.array(range(n), pa.int64()), **cols}
    return pa.table(cols)


def write_parts(folder, table: pa.Table, names: list[str], rows: list[list[int]]):
    """Write rows[k] of ``table`` (in that order) to folder/names[k]; add Spark's litter."""
    folder.mkdir(exist_ok=True)
    for name, idx in zip(names, rows, strict=True):
        pq.write_table(table.take(pa.array(idx, pa.int64())), str(folder / name))
        (folder / f".{name}.crc").write_bytes(b"\x00crc")  # Spark's checksums: skipped
    (folder / "_SUCCESS").write_text("")
    return str(folder)


def same(a: tuples.Tuples, b: tuples.Tuples) -> None:
    assert a.n == b.n
    for name in SCHEMA.names:
        np.testing.assert_array_equal(a.columns[name], b.columns[name])
        assert a.columns[name].dtype == b.columns[name].dtype


def test_folder_equals_the_concatenation_in_name_order(tmp_path):
    table = typed_table(60)
    whole = str(tmp_path / "whole.parquet")
    pq.write_table(table, whole)
    # 11 parts part-00000 … part-00010 of unequal sizes (one empty), written in scrambled order
    bounds = [0, 3, 3, 10, 11, 20, 27, 33, 40, 48, 55, 60]
    names = [f"part-{k:05d}-0f1e-c000.snappy.parquet" for k in range(11)]
    rows = [list(range(bounds[k], bounds[k + 1])) for k in range(11)]
    order = [7, 0, 10, 3, 5, 1, 9, 2, 8, 4, 6]
    folder = write_parts(
        tmp_path / "t.parquet", table, [names[k] for k in order], [rows[k] for k in order]
    )
    got = reader.read(folder, SCHEMA)
    same(got, reader.read(whole, SCHEMA))
    assert got.columns["w"].tolist() == list(range(60)) and got.source == folder


def test_folder_orders_numbers_in_names_as_numbers(tmp_path):
    # unpadded part numbers: lexical order would read part-10 right after part-1
    table = typed_table(11)
    folder = write_parts(
        tmp_path / "t", table, [f"part-{k}.parquet" for k in range(11)], [[k] for k in range(11)]
    )
    assert reader.read(folder, SCHEMA).columns["w"].tolist() == list(range(11))


def test_folder_with_seq_is_read_in_seq_order(tmp_path):
    """Vectors-style: a seq column decides the order, whatever the files' names and rows."""
    table = typed_table(40, seq=True)
    # hash-partitioned like Spark's repartition by key: every file holds scattered seqs,
    # each in descending order, and the files' names say nothing about the stream order
    rows = [[i for i in reversed(range(40)) if i % 3 == k] for k in range(3)]
    folder = write_parts(
        tmp_path / "v",
        table,
        ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"],
        rows,
    )
    got = reader.read(folder, SCHEMA)
    same(got, convert.from_table(table, SCHEMA))
    assert got.columns["w"].tolist() == list(range(40))
    # gaps in seq are allowed: the stream is the rows in ascending seq
    gappy = table.set_column(0, "seq", pa.array([10 * i for i in range(40)], pa.int64()))
    folder = write_parts(
        tmp_path / "g",
        gappy,
        ["part-00000.parquet", "part-00001.parquet"],
        [list(range(20, 40)), list(range(20))],
    )
    assert reader.read(folder, SCHEMA).columns["w"].tolist() == list(range(40))


def test_folder_seq_field_of_the_stream_is_data_not_order(tmp_path):
    schema = nfacep.compile_text(
        "CREATE STREAM s (seq UINT(8), a UINT(8)); QUERY q PATTERN (A)"
    ).program.schema
    table = pa.table({"seq": pa.array([9, 8, 7, 6], pa.int64()), "a": pa.array([0, 1, 2, 3])})
    folder = write_parts(
        tmp_path / "t", table, ["part-1.parquet", "part-2.parquet"], [[0, 1], [2, 3]]
    )
    got = reader.read(folder, schema)
    assert got.columns["seq"].tolist() == [9, 8, 7, 6] and got.columns["a"].tolist() == [0, 1, 2, 3]


def test_folder_value_and_order_errors_name_the_part_file_and_row(tmp_path):
    table = typed_table(30, seq=True)
    bad = table.set_column(2, "i", pa.array([300 if i == 17 else 0 for i in range(30)]))
    folder = write_parts(
        tmp_path / "v",
        bad,
        ["part-00000.parquet", "part-00001.parquet"],
        [list(range(15, 30)), list(range(15))],
    )
    with pytest.raises(DataError) as info:
        reader.read(folder, SCHEMA)
    # seq 17 is the third row of part-00000
    assert str(info.value).startswith(
        f"{folder}/part-00000.parquet: row 3, column 'i': 300 does not fit INT(8)"
    )
    # ORDER BY: the part file, its row and the position in the stream
    t = reader.read(
        write_parts(
            tmp_path / "o",
            table,
            ["a.parquet", "b.parquet"],
            [list(range(15)), list(range(15, 30))],
        ),
        SCHEMA,
    )
    t.columns["w"][22] = 5
    with pytest.raises(DataError) as info:
        tuples.check_order(t, "w")
    assert str(info.value).startswith(
        f"{tmp_path}/o/b.parquet: row 8, column 'w' (stream position 22): 5 is "
        "less than 21 on the row before"
    )


def test_folder_duplicate_seq_and_bad_files(tmp_path):
    table = typed_table(10, seq=True)
    dup = table.set_column(0, "seq", pa.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 3], pa.int64()))
    folder = write_parts(
        tmp_path / "d",
        dup,
        ["part-0.parquet", "part-1.parquet"],
        [list(range(5)), list(range(5, 10))],
    )
    with pytest.raises(
        DataError,
        match=r"part-1\.parquet: row 5, column 'seq': "
        r"seq 3 again \(also at .*part-0\.parquet: row 4\)",
    ):
        reader.read(folder, SCHEMA)
    (tmp_path / "x").mkdir()
    pq.write_table(typed_table(3), str(tmp_path / "x" / "part-0.parquet"))
    (tmp_path / "x" / "part-1.parquet").write_bytes(b"PAR\0\x01\x02 not parquet")
    with pytest.raises(DataError, match=r"x/part-1\.parquet: not a readable Parquet file") as err:
        reader.read(str(tmp_path / "x"), SCHEMA)
    assert "CSV" not in str(err.value)
    # a folder of CSV part files (traces often come so): the error says what to do
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "part-0.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match=r"c/part-0\.csv: not a readable Parquet file") as err:
        reader.read(str(tmp_path / "c"), SCHEMA)
    assert "looks like text, such as CSV" in str(err.value)
    assert "give a CSV file itself as --input" in str(err.value)


@pytest.mark.parametrize("litter", [[], ["_SUCCESS", ".part-0.parquet.crc"]])
def test_folder_without_parquet_files(tmp_path, litter):
    folder = tmp_path / "empty.parquet"
    folder.mkdir()
    for name in litter:
        (folder / name).write_text("")
    with pytest.raises(DataError) as info:
        reader.read(str(folder), SCHEMA)
    assert str(info.value).startswith(f"{folder}: the folder holds no Parquet file")


MISMATCHES = [
    # (change to the second part file, message)
    (
        lambda t: t.set_column(1, "u", t.column("u").cast(pa.string())),
        "part-00001.parquet: column 'u' is string, but {first} has it as int64; every part file "
        "of {folder} needs the same columns and types",
    ),
    (lambda t: t.drop_columns(["f"]), "part-00001.parquet: lacks the column(s) f of stream 's'"),
    (
        lambda t: t.drop_columns(["seq"]),
        "part-00001.parquet: lacks the column 'seq' (it orders a folder's tuples), which {first} "
        "has; every part file of {folder} needs the same columns",
    ),
]


@pytest.mark.parametrize(("change", "message"), MISMATCHES)
def test_folder_part_files_must_agree(tmp_path, change, message):
    table = typed_table(10, seq=True)
    folder = tmp_path / "v"
    folder.mkdir()
    first = folder / "part-00000.parquet"
    pq.write_table(table.slice(0, 5), str(first))
    pq.write_table(change(table.slice(5)), str(folder / "part-00001.parquet"))
    with pytest.raises(DataError) as info:
        reader.read(str(folder), SCHEMA)
    text = str(info.value)
    assert text.startswith(str(folder / "part-00001.parquet"))
    assert message.format(first=first, folder=folder) in text


CASED = nfacep.compile_text(
    'CREATE STREAM s (temp UINT(8), "Zone" UINT(8)); QUERY q PATTERN (A)'
).program.schema


def test_columns_match_unquoted_fields_ignoring_case(tmp_path):
    """A column names an unquoted field in any case (an exact one first); a quoted field
    needs its exact name; two columns equal to one field ignoring case are an error."""
    got = reader.read(write(tmp_path, "TEMP,Zone,temp_x\n1,2,3\n"), CASED)
    assert got.columns["temp"].tolist() == [1] and got.columns["Zone"].tolist() == [2]
    got = reader.read(write(tmp_path, "Temp,temp,Zone\n1,2,3\n"), CASED)
    assert got.columns["temp"].tolist() == [2]
    with pytest.raises(DataError, match=r"the header lacks the field\(s\) Zone"):
        reader.read(write(tmp_path, "temp,zone\n1,2\n"), CASED)
    with pytest.raises(DataError, match="'Temp', 'TEMP', all named 'temp' ignoring case"):
        reader.read(write(tmp_path, "Temp,TEMP,Zone\n1,2,3\n"), CASED)
    table = pa.table({"Zone": pa.array([5], pa.uint8()), "TEMP": pa.array([4], pa.uint8())})
    pq.write_table(table, tmp_path / "t.parquet")
    got = reader.read(str(tmp_path / "t.parquet"), CASED)
    assert got.columns["temp"].tolist() == [4] and got.columns["Zone"].tolist() == [5]
    (tmp_path / "parts").mkdir()
    pq.write_table(table, tmp_path / "parts" / "part-0.parquet")
    pq.write_table(table.rename_columns(["Zone", "Temp"]), tmp_path / "parts" / "part-1.parquet")
    chunks = list(reader.read_chunks(str(tmp_path / "parts"), CASED, 1))
    assert [c.columns["temp"].tolist() for c in chunks] == [[4], [4]]
    pq.write_table(table.rename_columns(["zone", "TEMP"]), tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"lacks the column\(s\) Zone"):
        reader.read(str(tmp_path / "t.parquet"), CASED)


def test_joined_columns_are_made_when_first_read():
    """Each column of a :class:`~nfacep.io.tuples.JoinedColumns` is its parts copied into one
    array of its type when first read, then kept; one never read is never made (here a
    column whose parts cannot be cast: reading it is the only error)."""
    parts = {
        "k": [np.array([1, 2], np.uint16), np.array([3], np.uint16)],
        "bad": [np.array(["text"])],
        "none": [],
    }
    dtypes = {"k": np.dtype(np.uint64), "bad": np.dtype(np.uint64), "none": np.dtype(np.int64)}
    columns = tuples.JoinedColumns(parts, dtypes)
    assert list(columns) == ["k", "bad", "none"] and len(columns) == 3
    k = columns["k"]
    assert k.dtype == np.uint64 and k.tolist() == [1, 2, 3]
    assert columns["k"] is k
    assert columns["none"].dtype == np.int64 and len(columns["none"]) == 0
    with pytest.raises(TypeError):
        columns["bad"]
    with pytest.raises(KeyError):
        columns["missing"]


def test_text_columns_of_any_arrow_kind_in_files_and_folders(tmp_path):
    """Text columns stored as string, large_string or string_view (Polars' ``to_arrow()``), in
    a file or in the part files of one folder: read alike (a string_view column "cannot hold"
    its field, and a folder whose parts spelled text two ways was refused)."""
    if not hasattr(pa, "string_view"):
        pytest.skip("pyarrow before 16 has no string_view")
    table = typed_table(39)
    texts = pa.table({n: [str(v) for v in table.column(n).to_pylist()] for n in table.column_names})
    pq.write_table(texts, tmp_path / "all.parquet")
    want = reader.read(str(tmp_path / "all.parquet"), SCHEMA)
    (tmp_path / "parts").mkdir()
    for k, kind in enumerate([pa.string(), pa.large_string(), pa.string_view()]):
        part = texts.slice(k * 13, 13)
        part = part.cast(pa.schema([pa.field(n, kind) for n in texts.column_names]))
        pq.write_table(part, tmp_path / "parts" / f"part-{k}.parquet")
        got = reader.read(str(tmp_path / "parts" / f"part-{k}.parquet"), SCHEMA)
        assert got.columns["w"].tolist() == list(range(k * 13, k * 13 + 13))
    got = reader.read(str(tmp_path / "parts"), SCHEMA)
    for f, col in want.columns.items():
        assert got.columns[f].tobytes() == col.tobytes(), f
