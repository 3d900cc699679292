"""Hostile tuple files, options and output paths (issue 13): every one is accepted or refused
with nfacep's own error (file, row or line, column; exit 2), never a traceback, a hang, a wrong
result or a half-written file. One test per class of reproducer, through the command line or
the reader (:func:`nfacep.io.reader.read`)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet as pq
import pytest

import nfacep
from nfacep.cli import main
from nfacep.errors import DataError
from nfacep.io import reader
from nfacep.params import EngineParams
from nfacep.reference import capacity

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARATHON = ROOT / "queries" / "marathon.sql"
MARATHON_CSV = ROOT / "queries" / "marathon.csv"

STREAM = "CREATE STREAM s (x UINT(8), i INT(8), b BOOL, f FLOAT32);"
QUERY = STREAM + " QUERY q PATTERN (A) DEFINE A AS x = 7"
SCHEMA = nfacep.compile_text(QUERY).program.schema
HEADER = "x,i,b,f\n"


def csv_file(tmp_path, data: str | bytes, name: str = "t.csv") -> str:
    p = tmp_path / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(p)


def refused(path: str, *needles: str) -> str:
    with pytest.raises(DataError) as info:
        reader.read(path, SCHEMA)
    message = str(info.value)
    assert message.startswith(path), message
    for needle in needles:
        assert needle in message, message
    return message


def run(argv, capsys) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


# --- item 7: values the reader crashed on -----------------------------------------------------


def test_signed_integers_are_read_as_documented(tmp_path):
    t = reader.read(
        csv_file(tmp_path, HEADER + "+5,+7,true,1\n+0,-0,true,1\n-0,+0,true,1\n-000,-12,true,1\n"),
        SCHEMA,
    )
    assert t.columns["x"].tolist() == [5, 0, 0, 0]
    assert t.columns["i"].tolist() == [7, 0, 0, -12]
    refused(
        csv_file(tmp_path, HEADER + "1,1,true,1\n-1,1,true,1\n"),
        "row 2 (line 3), column 'x': -1 does not fit UINT(8)",
    )
    digits = "9" * 5000  # beyond int()'s 4300 digits: out of range, shown short
    message = refused(
        csv_file(tmp_path, HEADER + f"{digits},1,true,1\n"),
        "row 1 (line 2), column 'x'",
        "does not fit UINT(8)",
        "(5000 digits)",
    )
    assert len(message) < 300


@pytest.mark.parametrize(
    "text", ["1_5", "\uff11\uff15", "\u0661\u0665", "0x10", "1.5e", "1d5", "\u00bd"]
)
def test_float_text_that_only_python_reads_is_refused(tmp_path, text):
    refused(
        csv_file(tmp_path, HEADER + f"1,1,true,2\n1,1,true,{text}\n"),
        "row 2 (line 3), column 'f'",
        "is not a number (FLOAT32)",
    )
    path = str(tmp_path / "t.parquet")  # the same text in a Parquet string column
    pq.write_table(pa.table({"x": [1, 1], "i": [1, 1], "b": [True, True], "f": ["2", text]}), path)
    refused(path, "row 2", "column 'f'", "is not a number (FLOAT32)")


@pytest.mark.parametrize("text", ["nan(1)", "-NaN(0x7fc00000)", "nan()"])
def test_float_nan_with_a_payload_is_refused_alone_as_beside_a_bad_value(tmp_path, capsys, text):
    """C's ``nan(…)``, which pyarrow reads as NaN but a FLOAT32 value is not written as: refused
    with its place on its own, in a CSV file and a Parquet string column, as it was beside a
    value pyarrow refuses (alone, it was read as NaN)."""
    query = tmp_path / "q.sql"
    query.write_text(QUERY)
    out = tmp_path / "m.csv"
    for rows in ([], ["1,1,true,1x"]):
        path = csv_file(
            tmp_path, HEADER + "".join(f"{r}\n" for r in ["1,1,true,2", f"1,1,true,{text}", *rows])
        )
        code, err = run(["match", query, "--input", path, "--output", out], capsys)
        assert code == 2 and not out.exists()
        assert f"{path}: row 2 (line 3), column 'f': {text!r} is not a number (FLOAT32)" in err
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"x": [1, 1], "i": [1, 1], "b": [True, True], "f": ["2", text]}), path)
    refused(path, "row 2", "column 'f'", f"{text!r} is not a number (FLOAT32)")


def test_float_forms_that_arrow_and_python_agree_on_are_read(tmp_path):
    t = reader.read(
        csv_file(
            tmp_path,
            HEADER
            + "".join(
                f"1,1,true,{v}\n"
                for v in [
                    "+1.5",
                    ".5",
                    "5.",
                    "1E+3",
                    " -2 ",
                    "Infinity",
                    "-inf",
                    "NaN",
                    "3.4028235e38",
                    "1e-50",
                ]
            ),
        ),
        SCHEMA,
    )
    f = t.columns["f"]
    assert f[:5].tolist() == [1.5, 0.5, 5.0, 1000.0, -2.0]
    assert f[5] == np.inf and f[6] == -np.inf and np.isnan(f[7])
    assert f[8] == np.finfo(np.float32).max and f[9] == 0
    # a decimal of 5000 digits that lands on a rounding tie is redone exactly
    tie = "16777217." + "0" * 5000 + "1"
    t = reader.read(csv_file(tmp_path, HEADER + f"1,1,true,{tie}\n"), SCHEMA)
    assert t.columns["f"][0] == np.float32(16777218)


def parquet_part(path, names, values):
    pq.write_table(pa.Table.from_arrays([pa.array(v) for v in values], names=names), path)


def test_parquet_column_named_twice(tmp_path):
    names = ["x", "x", "i", "b", "f"]
    values = [[1], [2], [1], [True], [1.0]]
    parquet_part(tmp_path / "one.parquet", names, values)
    refused(str(tmp_path / "one.parquet"), "2 columns named 'x' (columns 1, 2)")
    folder = tmp_path / "parts"
    folder.mkdir()
    parquet_part(folder / "part-0.parquet", ["x", "i", "b", "f"], [[1], [1], [True], [1.0]])
    parquet_part(folder / "part-1.parquet", names, values)
    with pytest.raises(DataError, match=r"part-1\.parquet: has 2 columns named 'x'"):
        reader.read(str(folder), SCHEMA)
    # a repeated column that is no field is ignored, as in a CSV file
    parquet_part(
        tmp_path / "z.parquet", ["x", "i", "b", "f", "z", "z"], [[1], [1], [True], [1.0], [0], [0]]
    )
    assert reader.read(str(tmp_path / "z.parquet"), SCHEMA).n == 1


# --- item 24 (data): FLOAT32 values beyond its range ------------------------------------------


@pytest.mark.parametrize("text", ["1e40", "-3.5e38", "1e400", "-1e999"])
def test_float_beyond_float32_is_refused(tmp_path, text):
    refused(
        csv_file(tmp_path, HEADER + f"1,1,true,0\n1,1,true,{text}\n"),
        "row 2 (line 3), column 'f'",
        "beyond the range of FLOAT32",
    )


def test_parquet_double_beyond_float32_is_refused(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(
        pa.table(
            {
                "x": [1, 1, 1],
                "i": [1, 1, 1],
                "b": [True] * 3,
                "f": pa.array([1.0, float("inf"), 1e40], pa.float64()),
            }
        ),
        path,
    )
    refused(path, "row 3", "column 'f'", "beyond the range of FLOAT32")


# --- items 17, 18, 19: CSV structure -----------------------------------------------------------


def test_structure_errors_name_the_row_and_line(tmp_path):
    refused(
        csv_file(tmp_path, HEADER + "1,1,true,1\n\n2,1,true\n"),
        "row 2 (line 4): Expected 4 columns, got 3: '2,1,true'",
    )
    refused(
        csv_file(tmp_path, HEADER + "1,1,true,1\n1,2,3,4,5\n"),
        "row 2 (line 3): Expected 4 columns, got 5",
    )
    # an unterminated quote, in a field or in an ignored column, mid-file or at the end
    refused(
        csv_file(tmp_path, HEADER + '1,1,true,"1\n2,1,true,2\n'),
        "row 1 (line 2): a quoted value is not closed on its line",
    )
    refused(
        csv_file(tmp_path, HEADER + '1,1,true,"1\n'),
        "row 1 (line 2), column 'f': a quoted value is not closed on its line",
    )
    refused(
        csv_file(tmp_path, "z," + HEADER + '"a,1,1,true,1\n2,2,1,true,2\n'),
        "row 1 (line 2): a quoted value is not closed",
    )
    refused(csv_file(tmp_path, '"x,i,b,f\n1,1,true,1\n'), "line 1: a quoted name is not closed")
    # quotes that are fine stay fine
    t = reader.read(csv_file(tmp_path, "z," + HEADER + '"a,""b""",1,1,true,"2"\n'), SCHEMA)
    assert t.n == 1 and t.columns["f"][0] == 2


def test_bad_bytes_are_named_and_shown_short_and_escaped(tmp_path):
    refused(
        csv_file(tmp_path, HEADER.encode() + b"1,1,true,\xff\xfe\n"),
        "row 1 (line 2), column 'f': not UTF-8 text: b'\\xff\\xfe'",
    )
    garbage = bytes(range(256)) * 40  # a header, then binary
    message = refused(csv_file(tmp_path, HEADER.encode() + garbage), "row 1 (line 2)")
    assert message.isprintable() and len(message) < 300, message
    message = refused(
        csv_file(tmp_path, HEADER + "1,1,true," + "\x1b[31m" * 1000 + "\n"),
        "row 1 (line 2), column 'f'",
        "\\x1b[31m",
        "(5000 characters)",
    )
    assert message.isprintable() and len(message) < 300, message


def test_error_lines_count_blank_lines(tmp_path):
    refused(
        csv_file(tmp_path, HEADER + "\n\n1,1,true,1\r\n\r\n300,1,true,1\n"),
        "row 2 (line 6), column 'x': 300 does not fit UINT(8)",
    )


def test_byte_order_mark_is_accepted(tmp_path):
    t = reader.read(
        csv_file(tmp_path, b"\xef\xbb\xbf" + (HEADER + "7,1,true,1\n").encode()), SCHEMA
    )
    assert t.n == 1 and t.columns["x"].tolist() == [7]
    refused(csv_file(tmp_path, b"\xef\xbb\xbf"), "the file is empty")


@pytest.mark.parametrize(
    "text", ["x,i,b,f", "x,i,b,f\n", "x,i,b,f\r\n", "x,i,b,f\n\n", "\ufeffx,i,b,f"]
)
def test_header_only_is_no_tuples_with_or_without_a_line_end(tmp_path, capsys, text):
    assert reader.read(csv_file(tmp_path, text), SCHEMA).n == 0
    q = tmp_path / "q.sql"
    q.write_text(QUERY)
    code, _ = run(
        ["match", q, "--input", tmp_path / "t.csv", "--output", tmp_path / "m.csv"], capsys
    )
    assert code == 0 and (tmp_path / "m.csv").read_text() == "seq,query,partition\n"


def test_header_naming_a_field_twice_is_refused(tmp_path):
    refused(
        csv_file(tmp_path, "x,i,b,f,x\n1,1,true,1,2\n"),
        "line 1: the header names the field 'x' more than once (columns 1, 5)",
    )
    # repeated columns that are no field (a spreadsheet's empty trailing columns) are fine
    assert reader.read(csv_file(tmp_path, "x,i,b,f,,\n1,1,true,1,,\n"), SCHEMA).n == 1


# --- items 8 and 13: engine parameters at their limits ----------------------------------------


def test_huge_tick_tuples_is_a_limit_error(tmp_path, capsys):
    code, err = run(
        [
            "match",
            MARATHON,
            "--input",
            MARATHON_CSV,
            "--output",
            tmp_path / "m.csv",
            "--tick-tuples",
            "10000000000000000000",
        ],
        capsys,
    )
    assert (
        code == 2 and "--tick-tuples is 10000000000000000000, more than the engine's limit" in err
    )


def test_capacity_model_at_the_parameter_limits(tmp_path, capsys):
    """No tick happens within 278 tuples, so the result is --tick-tuples 0's."""
    out = {}
    for ticks in ("0", str(2**32 - 1)):
        m = tmp_path / f"m{ticks}.csv"
        code, _ = run(
            [
                "match",
                MARATHON,
                "--input",
                MARATHON_CSV,
                "--output",
                m,
                "--store",
                "pipeline",
                "--partitions",
                "3",
                "--tick-tuples",
                ticks,
                "--timer-bits",
                "32",
            ],
            capsys,
        )
        assert code == 0
        out[ticks] = (
            m.read_text(),
            json.loads(m.with_suffix(".summary.json").read_text())["drop_seqs"],
        )
    assert out["0"] == out[str(2**32 - 1)] and len(out["0"][1]) == 265
    codes = np.random.default_rng(1).integers(0, 9, 5000)
    for k, bits in [(2**32 - 1, 32), (1, 32), (7, 31), (2**31, 32)]:
        p = EngineParams(partitions=4, tick_tuples=k, timer_bits=bits)
        fast, exact = capacity.admit(codes, p), capacity.admit_sequential(codes, p)
        assert (fast.admitted == exact.admitted).all() and (fast.fresh == exact.fresh).all()


# --- items 9, 14, 15: output paths -------------------------------------------------------------


def marathon(tmp_path):
    t = tmp_path / "t.csv"
    shutil.copy(MARATHON_CSV, t)
    return t


def test_output_that_is_an_input_is_refused(tmp_path, capsys):
    t = marathon(tmp_path)
    q = tmp_path / "q.sql"
    shutil.copy(MARATHON, q)
    (tmp_path / "link.csv").symlink_to(t)
    os.link(t, tmp_path / "hard.csv")
    for args in (
        ["--input", t, "--output", t],
        ["--input", t, "--output", tmp_path / "link.csv"],
        ["--input", tmp_path / "hard.csv", "--output", t],
        ["--input", t, "--output", q],
    ):
        code, err = run(["match", q, *args], capsys)
        assert code == 2 and "is the input" in err
    code, err = run(["explain", q, "--dot", q], capsys)
    assert code == 2 and "--dot" in err and "is the input" in err
    assert t.read_bytes() == MARATHON_CSV.read_bytes() and q.read_bytes() == MARATHON.read_bytes()
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(pa.csv.read_csv(MARATHON_CSV), folder / "part-0.parquet")
    code, err = run(["match", q, "--input", folder, "--output", folder / "m.csv"], capsys)
    assert code == 2 and "inside the input folder" in err


def test_outputs_are_written_together_or_not_at_all(tmp_path, capsys):
    t = marathon(tmp_path)
    d = tmp_path / "D"
    (d / "m.summary.json").mkdir(parents=True)
    (d / "m.csv").write_text("previous\n")
    code, err = run(["match", MARATHON, "--input", t, "--output", d / "m.csv"], capsys)
    assert code == 2 and "m.summary.json is a folder" in err
    assert (d / "m.csv").read_text() == "previous\n"
    assert sorted(p.name for p in d.iterdir()) == ["m.csv", "m.summary.json"]


def test_verilog_and_its_sidecar_are_written_together_or_not_at_all(tmp_path, capsys):
    from nfacep.errors import UsageError
    from nfacep.hdl.engine import write_verilog

    (tmp_path / "e.json").mkdir()
    (tmp_path / "e.v").write_text("previous\n")
    code, err = run(
        ["verilog", MARATHON, "-o", tmp_path / "e.v", "--store", "pipeline", "--partitions", "2"],
        capsys,
    )
    assert code == 2 and "e.json is a folder" in err
    # the same from the writer itself (the folder appeared after the command's check):
    # the Verilog is not replaced either
    with pytest.raises(UsageError, match=r"e\.json is a folder"):
        write_verilog(
            nfacep.compile_file(str(MARATHON)), str(tmp_path / "e.v"), EngineParams(partitions=2)
        )
    assert (tmp_path / "e.v").read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json", "e.v"]


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("", "is empty"),
        ("{tmp}", "is a folder"),
        ("/proc/nfacep-m.csv", "cannot write"),
        ("{tmp}/fifo", "not a regular file"),
        ("{tmp}/none/m.csv", "does not exist"),
    ],
)
def test_outputs_that_cannot_be_written(tmp_path, capsys, output, message):
    # a FIFO stands for /dev/null and other devices: a regression here would replace the
    # machine's /dev/null by a file
    os.mkfifo(tmp_path / "fifo")
    output = output.format(tmp=tmp_path)
    code, err = run(["match", MARATHON, "--input", MARATHON_CSV, "--output", output], capsys)
    assert code == 2 and message in err
    code, err = run(["verilog", MARATHON, "-o", output], capsys)
    assert code == 2 and message in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder")
def test_read_only_folder(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code, err = run(
            ["match", MARATHON, "--input", MARATHON_CSV, "--output", ro / "m.csv"], capsys
        )
        assert code == 2 and "cannot write" in err
    finally:
        ro.chmod(0o755)


@pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or shutil.which("java") is None,
    reason="needs PySpark and Java",
)
def test_vectors_out_is_checked_before_spark(tmp_path, capsys):
    start = time.monotonic()
    code, err = run(["vectors", MARATHON, "--tuples", "10", "--out", "/proc/nfacep-v"], capsys)
    assert code == 2 and "cannot write in /proc" in err
    assert time.monotonic() - start < 10  # no Spark session was started


def test_run_port_that_cannot_be_opened_exits_2(tmp_path, capsys):
    pytest.importorskip("serial")
    code, err = run(
        [
            "run",
            MARATHON,
            "--port",
            tmp_path / "ttyNONE",
            "--input",
            MARATHON_CSV,
            "--output",
            tmp_path / "m.csv",
        ],
        capsys,
    )
    assert code == 2 and "cannot open the serial port" in err
    code, err = run(
        [
            "run",
            MARATHON,
            "--port",
            tmp_path / "ttyNONE",
            "--input",
            MARATHON_CSV,
            "--output",
            tmp_path / "m.csv",
            "--timeout",
            "nan",
        ],
        capsys,
    )
    assert code == 2 and "--timeout" in err


# --- items 10 and 16: Ctrl-C and SIGTERM -------------------------------------------------------


@pytest.mark.parametrize(
    ("sig", "code", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_signal_while_writing_leaves_nothing_behind(tmp_path, sig, code, word):
    q = tmp_path / "q.sql"
    q.write_text(QUERY)
    t = tmp_path / "t.csv"
    t.write_text(HEADER + "7,1,true,1\n" * 10_000)  # ten thousand matches to write
    out = tmp_path / "out"
    out.mkdir()
    # the match file is written in one call, faster than a signal can reliably land in it:
    # the command runs with a match-row writer that stops for a while after its rows (most of
    # them already in the temporary file), and the signal comes while it waits
    slow = (
        "import signal, sys, time\n"
        # a shell runs background jobs with SIGINT ignored, which Python then keeps: restore
        # the handler a terminal's Ctrl-C reaches
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import nfacep.result\n"
        "from nfacep.cli import main\n"
        "write = nfacep.result.MatchRows.write\n"
        "def slow(self, *args):\n"
        "    write(self, *args)\n"
        "    time.sleep(60)\n"
        "nfacep.result.MatchRows.write = slow\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            slow,
            "match",
            str(q),
            "--input",
            str(t),
            "--output",
            str(out / "m.csv"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        temps = [p for p in out.iterdir() if p.name.startswith(".nfacep-")]
        if any(p.exists() and p.stat().st_size > 0 for p in temps):
            break  # the match file is being written
        time.sleep(0.002)
    else:
        proc.kill()
        proc.communicate()  # (its pipes closed)
        pytest.fail("the match file was never being written")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err == f"nfacep: {word}\n"
    assert list(out.iterdir()) == []


def test_sim_waves_that_cannot_be_written_is_refused_before_simulating(tmp_path, capsys):
    m = tmp_path / "m.csv"
    for waves, message in [
        ("/proc/nfacep-w.fst", "cannot write in /proc"),
        (MARATHON_CSV, "is the input"),
        (tmp_path / "m.summary.json", "also the match file"),
    ]:
        code, err = run(
            ["sim", MARATHON, "--input", MARATHON_CSV, "--output", m, "--waves", waves], capsys
        )
        assert code == 2 and message in err
    assert list(tmp_path.iterdir()) == []


def test_parquet_string_column_that_is_not_utf8(tmp_path):
    """Parquet does not check that a string column holds UTF-8 text: the reader does."""
    data = b"7" + b"\xd27"
    offsets = pa.py_buffer(np.array([0, 1, 3], dtype=np.int32).tobytes())
    bad = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(data)])
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"x": bad, "i": [1, 1], "b": [True, True], "f": [1.0, 2.0]}), path)
    refused(path, "row 2", "column 'x': not UTF-8 text: b'\\xd27'")
