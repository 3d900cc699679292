"""``nfacep match --master``: the reference matcher over a trace in Spark tasks writes the match
file and summary of the local command, byte for byte, whatever the number of tasks (the summary
adds only its ``spark`` entry: master, tasks, pass and why), on a folder of part files, in the
partitioned pass and in the global one (drops, timers, a table's buckets, switching parameters),
with windows, runtime parameters, start positions and the other measures."""

from __future__ import annotations

import itertools
import json
import pathlib
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import nfacep
from nfacep.cli import main
from nfacep.spark_testbench import numbering
from nfacep.spark_testbench.generate import Generator, Options

pytestmark = pytest.mark.xdist_group("spark_match")

ROOT = pathlib.Path(__file__).resolve().parents[2]
MASTER = "local[2]"
HEAD = "QUERY fire FROM warehouse\nPARTITION sensor\nORDER BY ts\n"
MEASURES = (
    "MEASURES FIRST(seq) AS start_seq, LAST(seq) AS end_seq, FIRST(temp) AS t0, "
    "LAST(zone) AS z, COUNT(*) AS n, MATCH_NUMBER() AS k\n"
)


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> dict[str, pathlib.Path]:
    """fire.sql with measures on fire (the window, start positions) and a runtime parameter
    in its HOT; the generator's tuples of 24 sensors as a folder of three part files."""
    folder = tmp_path_factory.mktemp("match-trace")
    text = (ROOT / "queries" / "fire.sql").read_text()
    assert HEAD in text and "(temp >= 600)" in text
    query = folder / "fire.sql"
    query.write_text(text.replace(HEAD, HEAD + MEASURES).replace("(temp >= 600)", "(temp >= :hot)"))
    gen = Generator(
        nfacep.compile_file(ROOT / "queries" / "fire.sql"),
        Options(tuples=2000, seed=5, keys=24, block_tuples=1024),
    )
    table = pa.Table.from_batches([gen.to_arrow(gen.block(b)) for b in range(gen.n_blocks)])
    table = table.drop_columns(["seq"])
    parts = folder / "parts"
    parts.mkdir()
    for i, (at, n) in enumerate([(0, 900), (900, 1), (901, 1099)]):
        pq.write_table(table.slice(at, n), parts / f"part-{i}.parquet")
    return {"query": query, "parts": parts, "table": table}  # type: ignore[dict-item]


def match(query, source, out, *args) -> tuple[bytes, dict]:
    argv = ["match", str(query), "--input", str(source), "--output", str(out), *args]
    assert main(argv) == 0
    summary = json.loads(pathlib.Path(str(out).removesuffix(".csv") + ".summary.json").read_text())
    return pathlib.Path(out).read_bytes(), summary


def same_as_local(trace, tmp_path, tasks: int, *args) -> dict:
    """``match --master`` against the local command: the same match file, byte for byte, and
    the same summary but for its ``spark`` entry (returned); the local one not empty."""
    local, want = match(trace["query"], trace["parts"], tmp_path / "local.csv", *args)
    on_spark, got = match(
        trace["query"],
        trace["parts"],
        tmp_path / "spark.csv",
        "--master",
        MASTER,
        "--tasks",
        str(tasks),
        *args,
    )
    assert on_spark == local
    spark = got.pop("spark")
    assert json.dumps(got, indent=2) == json.dumps(want, indent=2)
    assert local.count(b"\n") > 5
    return {**spark, "drops": want["drops"]}


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [1, 3])
def test_partitioned_pass_gives_the_local_files(spark, trace, tmp_path, tasks, capsys):
    pipeline = ("--store", "pipeline", "--partitions", "32")  # 32 elements: no key dropped
    note = same_as_local(trace, tmp_path, tasks, *pipeline, "--param", "hot=600")
    assert note == {
        "master": MASTER,
        "tasks": tasks,
        "pass": "partitioned",
        "reason": note["reason"],
        "drops": 0,
    }
    assert "note: partitioned pass: at most 24 keys" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("--store", "pipeline", "--partitions", "16"), "capacity matters: 24 keys present"),
        (
            (
                "--store",
                "pipeline",
                "--partitions",
                "32",
                "--tick-tuples",
                "40",
                "--timer-bits",
                "2",
            ),
            "timers matter",
        ),
        (
            ("--store", "table", "--partitions", "16", "--ways", "1"),
            "a bucket of the table holds 1 key and 24 are present",
        ),
        (
            ("--store", "pipeline", "--partitions", "32", "--param", "hot=650@700"),
            "the runtime parameters switch",
        ),
    ],
    ids=["drops", "timers", "buckets", "switches"],
)
def test_global_pass_gives_the_local_files(spark, trace, tmp_path, args, why, capsys):
    note = same_as_local(trace, tmp_path, 3, "--param", "hot=600", *args)
    assert note["pass"] == "global" and note["tasks"] == 1 and why in note["reason"]
    assert (note["drops"] > 0) == (why.startswith(("capacity", "a bucket")))
    assert f"warning: global pass: {note['reason']}" in capsys.readouterr().err


@pytest.mark.slow
def test_random_splits_give_the_same_files(spark, trace, tmp_path):
    """Two random splits of the trace into part files (one of them empty), and the trace as
    one CSV file (its blocks of lines numbered in three tasks), give the files of the whole
    trace in one Parquet file."""
    args = ("--partitions", "32", "--param", "hot=600", "--master", MASTER, "--tasks", "3")
    whole = tmp_path / "whole.parquet"
    pq.write_table(trace["table"], whole)
    want, summary = match(trace["query"], whole, tmp_path / "whole.csv", *args)
    text = tmp_path / "trace.csv"
    pacsv.write_csv(trace["table"], text)
    got, other = match(trace["query"], text, tmp_path / "from-csv.csv", *args)
    assert got == want
    assert {**other, "input": None} == {**summary, "input": None}
    rng = random.Random(7)
    n = trace["table"].num_rows
    for k in range(2):
        parts = tmp_path / f"split{k}"
        parts.mkdir()
        cuts = [*sorted({0, n, *rng.sample(range(1, n), 4)}), n]  # the last part empty
        for i, (a, b) in enumerate(itertools.pairwise(cuts)):
            pq.write_table(trace["table"].slice(a, b - a), parts / f"part-{i:03d}.parquet")
        got, other = match(trace["query"], parts, tmp_path / f"split{k}.csv", *args)
        assert got == want
        assert {**other, "input": None} == {**summary, "input": None}


@pytest.mark.slow
def test_parquet_folder_holds_the_csv_rows(spark, trace, tmp_path):
    """``--output M/``: a folder of Parquet part files with the match CSV's rows, the same
    from ``--master`` and from the local command (in pieces of 700 tuples)."""
    args = ("--partitions", "32", "--param", "hot=600")
    local, summary = match(trace["query"], trace["parts"], tmp_path / "local.csv", *args)
    out = tmp_path / "matches"
    argv = ["match", str(trace["query"]), "--input", str(trace["parts"]), "--output", f"{out}/"]
    assert main([*argv, *args, "--master", MASTER, "--tasks", "2"]) == 0
    folder = json.loads((tmp_path / "matches.summary.json").read_text())
    folder.pop("spark")
    assert {**folder, "input": None} == {**summary, "input": None}
    table = pq.read_table(out)
    assert table.schema.field("seq").type == pa.int64()
    assert all(f.type == pa.string() for f in table.schema if f.name != "seq")
    lines = local.decode().splitlines()
    assert table.column_names == lines[0].split(",")
    rows = [
        ",".join("" if v is None else str(v) for v in row.values()) for row in table.to_pylist()
    ]
    assert rows == lines[1:]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    # the local command writes the same folder
    argv[-1] = f"{tmp_path / 'here'}/"
    assert main([*argv, *args, "--chunk", "700"]) == 0
    assert pq.read_table(tmp_path / "here").equals(table)
    here = json.loads((tmp_path / "here.summary.json").read_text())
    assert {**here, "input": None} == {**summary, "input": None}


@pytest.mark.slow
def test_tasks_number_in_the_folders_order(spark, trace, tmp_path, monkeypatch, capsys):
    """The tasks number a folder ordered by ``seq`` ranges that run against the file names
    as the local command orders it (the driver's serial reader never runs); an ORDER BY that
    falls back between two part files is the local command's error (the serial reader's)."""
    read = numbering.serial
    calls = []
    monkeypatch.setattr(numbering, "serial", lambda *a, **k: calls.append(a) or read(*a, **k))
    table = trace["table"]
    n = table.num_rows
    seq = tmp_path / "seq"
    seq.mkdir()
    for i, (at, k) in enumerate([(1200, n - 1200), (0, 1200)]):  # part-0 holds the later seqs
        part = table.slice(at, k).append_column("seq", pa.array(range(at, at + k), pa.int64()))
        pq.write_table(part, seq / f"part-{i}.parquet")
    args = ("--store", "pipeline", "--partitions", "32", "--param", "hot=600")
    want, _ = match(trace["query"], trace["parts"], tmp_path / "want.csv", *args)
    got, _ = match(trace["query"], seq, tmp_path / "got.csv", *args, "--master", MASTER)
    assert got == want and not calls
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    pq.write_table(table.slice(1200), swapped / "part-0.parquet")
    pq.write_table(table.slice(0, 1200), swapped / "part-1.parquet")
    argv = ["match", str(trace["query"]), "--input", str(swapped), "--output"]
    capsys.readouterr()
    assert main([*argv, str(tmp_path / "a.csv"), *args]) == 2
    local = capsys.readouterr().err
    assert main([*argv, str(tmp_path / "b.csv"), *args, "--master", MASTER]) == 2
    assert local in capsys.readouterr().err and len(calls) == 1
    assert f"{swapped / 'part-1.parquet'}: row 1, column 'ts'" in local and "ORDER BY ts" in local
    assert not list(tmp_path.glob("[ab].*"))


def test_a_corrupted_part_file_is_named_and_nothing_written(spark, trace, tmp_path, capsys):
    parts = tmp_path / "parts"
    parts.mkdir()
    for p in sorted(trace["parts"].iterdir()):
        (parts / p.name).write_bytes(p.read_bytes())
    bad = parts / "part-1.parquet"
    bad.write_bytes(bad.read_bytes()[:-20])
    argv = ["match", str(trace["query"]), "--input", str(parts), "--output"]
    code = main([*argv, str(tmp_path / "m.csv"), "--param", "hot=600", "--master", MASTER])
    assert code == 2
    assert str(bad) in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]


def test_tasks_needs_master(tmp_path, trace, capsys):
    argv = ["match", str(trace["query"]), "--input", str(trace["parts"]), "--output"]
    assert main([*argv, str(tmp_path / "m.csv"), "--tasks", "2"]) == 2
    assert "give --master too" in capsys.readouterr().err


def test_a_field_named_seq_is_refused_before_spark(tmp_path, capsys):
    """A stream with a field named ``seq`` (which the local command reads) is refused with
    ``--master``, before Spark starts: the numbered tuples' ``seq`` column would shadow it (it
    went to Spark, whose tasks stopped with a traceback on two columns named ``seq``)."""
    query = tmp_path / "q.sql"
    query.write_text(
        "CREATE STREAM s (seq UINT(32), k UINT(8), v UINT(8));\n"
        "QUERY q FROM s PARTITION k PATTERN (A B) DEFINE A AS v = 1, B AS v = 2;\n"
    )
    trace = tmp_path / "t.csv"
    trace.write_text("seq,k,v\n5,1,1\n3,1,2\n")
    argv = ["match", str(query), "--input", str(trace), "--output", str(tmp_path / "m.csv")]
    assert main(argv) == 0
    (tmp_path / "m.csv").unlink()
    (tmp_path / "m.summary.json").unlink()
    assert main([*argv, "--master", MASTER]) == 2
    err = capsys.readouterr().err
    assert f"nfacep: {query}: stream 's' has a field named 'seq'" in err and "rename" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.sql", "t.csv"]


@pytest.mark.parametrize("source", ["csv", "parquet"])
def test_uint64_values_beyond_int64_give_the_local_files(spark, tmp_path, source):
    """UINT(64) values of 2^63 and more, a key and a measure, read by the tasks (a Parquet
    file's uint64 column) or by the driver's serial reader (a CSV file with ``+``, which the
    tasks leave to it): the local command's files (they were refused, "beyond the vectors'
    64-bit signed integer column", though the local command reads them)."""
    query = tmp_path / "q.sql"
    query.write_text(
        "CREATE STREAM s (k UINT(64), v UINT(64));\n"
        "QUERY q FROM s PARTITION k MEASURES LAST(v) AS lv, FIRST(k) AS fk "
        "PATTERN (A B) DEFINE A AS v > 10, B AS v > 9223372036854775807;\n"
    )
    top = 2**64 - 1
    keys = [top, top, 2**63, 2**63, 7, 7, top]
    values = [11, top, 12, 2**63, 13, 2**63 + 5, 14]
    trace = tmp_path / f"t.{source}"
    if source == "csv":
        rows = "".join(f"{k},+{v}\n" for k, v in zip(keys, values, strict=True))
        trace.write_text("k,v\n" + rows)
    else:
        table = pa.table({"k": pa.array(keys, pa.uint64()), "v": pa.array(values, pa.uint64())})
        pq.write_table(table, trace, row_group_size=3)
    local, want = match(query, trace, tmp_path / "local.csv")
    on_spark, got = match(query, trace, tmp_path / "spark.csv", "--master", MASTER, "--tasks", "2")
    assert on_spark == local and local.count(b"\n") == 4
    assert got.pop("spark")["pass"] == "partitioned" and got == want


def test_an_empty_trace_gives_the_local_files(spark, trace, tmp_path):
    """No tuples: no Spark job, the local command's files (a header, a summary of 0 tuples)."""
    empty = tmp_path / "empty.parquet"
    pq.write_table(trace["table"].slice(0, 0), empty)
    local, want = match(trace["query"], empty, tmp_path / "local.csv", "--param", "hot=600")
    args = ("--param", "hot=600", "--master", MASTER)
    on_spark, got = match(trace["query"], empty, tmp_path / "spark.csv", *args)
    assert on_spark == local and local.count(b"\n") == 1
    assert got.pop("spark")["pass"] == "global"
    assert got == want and want["tuples"] == 0


def test_shares_split_whole_keys_in_seq_order(trace, tmp_path):
    """Each matching task's share of numbered part files: whole keys, in ``seq`` order, the
    shares together every tuple once (no Spark needed), also past the 100,000th piece (a
    trace of that many Parquet row groups: part-100000 was read before part-99999, and the
    matching tasks stopped on a seq that does not rise)."""
    table = trace["table"]
    folder = tmp_path / "tuples"
    folder.mkdir()
    seq = pa.array(range(table.num_rows), pa.int64())
    numbered = table.append_column("seq", seq)
    for i, at in enumerate(range(0, table.num_rows, 700)):
        pq.write_table(numbered.slice(at, 700), folder / f"part-{99_998 + i:05d}.parquet")
    schema = nfacep.compile_file(trace["query"]).program.schema
    key = type(schema)(schema.name, (schema.field("sensor"),))
    seen: dict[int, set] = {}
    got = []
    for task in range(3):
        batches = numbering.share(str(folder), ["seq", "sensor"], key, 3, task, 500)
        rows = pa.Table.from_batches(list(batches))
        assert rows.column("seq").to_pylist() == sorted(rows.column("seq").to_pylist())
        seen[task] = set(rows.column("sensor").to_pylist())
        got += rows.column("seq").to_pylist()
    assert sorted(got) == list(range(table.num_rows))
    assert all(seen.values()) and not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])


def test_a_csv_piece_is_parsed_typed_into_the_tuples_of_the_whole_read(
    trace, tmp_path, monkeypatch
):
    """A task parses its block of CSV lines as ``match`` does (numbers typed by pyarrow where
    its conversion is nfacep's: the text path is not taken), into the tuples the whole read
    gives (no Spark needed)."""
    from nfacep.io import csvfile
    from nfacep.io.reader import read

    schema = nfacep.compile_file(trace["query"]).program.schema
    path = tmp_path / "trace.csv"
    pacsv.write_csv(trace["table"], path)
    whole = read(str(path), schema)
    header, data_start, _ = csvfile.read_header(str(path), schema)
    csv = numbering.Csv(tuple(header), data_start)
    n = trace["table"].num_rows
    piece = numbering.Piece(0, str(path), None, n, 0, data_start, path.stat().st_size)

    def as_text(*args):
        raise AssertionError("the block was parsed as text")

    monkeypatch.setattr(csvfile, "parse_block", as_text)
    pieces = list(numbering.read_piece(schema, csv, piece, 700))
    assert [p.n for p in pieces] == [700, 700, n - 1400]
    for f, col in whole.columns.items():
        got = np.concatenate([p.columns[f] for p in pieces])
        assert got.dtype == col.dtype and got.tobytes() == col.tobytes(), f


STALLED = """\
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # (a shell's background job ignores it)
from nfacep.cli import main
from nfacep.spark_testbench import numbering

def plan(spark, *args):  # a Spark job that runs until the signal comes
    print("stalled", file=sys.stderr, flush=True)
    spark.sparkContext.parallelize([0], 1).map(lambda _: time.sleep(20)).collect()

numbering.plan = plan
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted")])
def test_a_signal_during_a_spark_job_is_reported_and_leaves_nothing(tmp_path, sig, code, word):
    """Ctrl-C while the command waits on a Spark job (a JVM of its own): its exit code and
    one line, no traceback, nothing written, the JVM gone (stopping the session over the
    broken connection raised Py4JError: a traceback and exit 1). (SIGTERM gives its 143 and
    one line too, but the process ends only when the running task does: not tested here.)"""
    query = tmp_path / "q.sql"
    query.write_text("CREATE STREAM s (k UINT(8)); QUERY q FROM s PARTITION k PATTERN (A);\n")
    trace = tmp_path / "t.csv"
    trace.write_text("k\n1\n")
    out = tmp_path / "out"
    out.mkdir()
    argv = ["match", query, "--input", trace, "--output", out / "m.csv", "--master", MASTER]
    with subprocess.Popen(
        [sys.executable, "-c", STALLED, *map(str, argv)], stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            for line in proc.stderr:
                if "stalled" in line:
                    break
            time.sleep(2)  # (the job's task under way)
            jvms = _spark_jvms(proc.pid)
            assert jvms
            proc.send_signal(sig)
            err = proc.stderr.read()
            assert proc.wait(timeout=120) == code, err
        finally:
            proc.kill()
    # (the JVM may log its tasks' end after it: its own lines, not the command's)
    said = [line for line in err.splitlines() if line.startswith("nfacep: ")]
    assert said == [f"nfacep: {word}"] and "Traceback" not in err, err
    assert not list(out.iterdir())
    gone = time.monotonic() + 60
    while any(pathlib.Path(f"/proc/{p}").exists() for p in jvms) and time.monotonic() < gone:
        time.sleep(1)
    assert not any(pathlib.Path(f"/proc/{p}").exists() for p in jvms)


def _spark_jvms(parent: int) -> list[str]:
    """The running JVMs that PySpark started for the process ``parent``."""
    found = []
    for status in pathlib.Path("/proc").glob("[0-9]*/status"):
        try:
            cmdline = (status.parent / "cmdline").read_bytes()
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines())
        except (OSError, ValueError):
            continue
        if b"pyspark-shell" in cmdline and fields.get("PPid", "").strip() == str(parent):
            found.append(status.parent.name)
    return found
