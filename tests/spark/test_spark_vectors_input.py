"""``nfacep vectors --input``: regression vectors of a recorded trace (a CSV or Parquet file, or a
folder of Parquet part files, read as ``nfacep match`` reads it), replayed by ``nfacep regress``
unchanged. The trace here is the generator's own tuples written out as a user would have them
(no ``seq``), so its vectors must equal the generated ones."""

from __future__ import annotations

import csv
import json
import pathlib

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import nfacep
from nfacep import sim
from nfacep.cli import main
from nfacep.params import EngineParams
from nfacep.spark_testbench import layout, numbering, regress, vectors, vectors_plan
from nfacep.spark_testbench import session as spark_session
from nfacep.spark_testbench.generate import Generator, Options

pytestmark = pytest.mark.xdist_group("spark_vectors_input")

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIRE = str(ROOT / "queries" / "fire.sql")
MASTER = "local[2]"
OPTIONS = Options(tuples=2000, seed=5, keys=16, block_tuples=1024)
ENGINE = ("--store", "pipeline", "--partitions", "16")


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> dict[str, pathlib.Path]:
    """The generator's tuples as recorded traces: one CSV file, and a folder of three
    Parquet part files (without seq: their names order them)."""
    folder = tmp_path_factory.mktemp("trace")
    gen = Generator(nfacep.compile_file(FIRE), OPTIONS)
    table = pa.Table.from_batches([gen.to_arrow(gen.block(b)) for b in range(gen.n_blocks)])
    table = table.drop_columns(["seq"])
    pacsv.write_csv(table, folder / "trace.csv")
    parts = folder / "parts"
    parts.mkdir()
    for i, (at, n) in enumerate([(0, 700), (700, 1), (701, 1299)]):
        pq.write_table(table.slice(at, n), parts / f"part-{i}.parquet")
    (parts / "_SUCCESS").write_text("")
    return {"csv": folder / "trace.csv", "parts": parts}


@pytest.fixture(scope="module")
def generated(spark, tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("gen") / "v"
    job = vectors_plan.prepare(FIRE, OPTIONS, str(out), params=EngineParams(partitions=16))
    vectors.run(spark, job, tasks=2)
    return out


def vectors_cli(source, out, *args) -> int:
    argv = ["vectors", FIRE, "--input", str(source), "--out", str(out), "--master", MASTER]
    return main([*argv, *ENGINE, *args])


def match_rows(tmp_path, source) -> list[tuple]:
    out = tmp_path / "m.csv"
    assert main(["match", FIRE, "--input", str(source), "--output", str(out), *ENGINE]) == 0
    with open(out, newline="") as f:
        return [(int(r["seq"]), r["query"], r["partition"] or None) for r in csv.DictReader(f)]


def rows(folder, name) -> list[dict]:
    return pq.read_table(pathlib.Path(folder) / name).sort_by("seq").to_pylist()


@pytest.fixture
def in_tasks(monkeypatch):
    """The trace must be numbered in Spark tasks: the driver's serial reader refuses."""

    def refuse(*args, **kwargs):
        raise AssertionError("the trace was read on the driver")

    monkeypatch.setattr(numbering, "serial", refuse)


@pytest.mark.parametrize("kind", ["csv", "parts"])
def test_a_trace_gives_the_generated_vectors(
    spark, trace, generated, tmp_path, kind, capsys, in_tasks
):
    out = tmp_path / "v"
    assert vectors_cli(trace[kind], out) == 0
    assert f"2000 tuples from {trace[kind]}" in capsys.readouterr().out
    for name in (layout.TUPLES, layout.DROPS):
        assert rows(out, name) == rows(generated, name)
    expected = pq.read_table(out / layout.EXPECTED).to_pylist()
    assert expected == pq.read_table(generated / layout.EXPECTED).to_pylist()
    assert [tuple(r.values()) for r in expected] == match_rows(tmp_path, trace[kind])
    assert expected  # the trace has matches
    m = json.loads((out / layout.MANIFEST).read_text())
    g = json.loads((generated / layout.MANIFEST).read_text())
    assert m["input"] == str(trace[kind]) and g["input"] is None
    assert m["seed"] is None and m["generators"] is None and m["tuples"] == 2000
    assert m["counts"] == g["counts"] and m["expected"] == g["expected"]
    assert m["keys"] == m["keys_present"] == g["keys_present"]
    assert m["columns"] == g["columns"]


@pytest.mark.slow
def test_regress_replays_a_trace(spark, trace, tmp_path, capsys):
    missing = sim.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    out = tmp_path / "v"
    assert vectors_cli(trace["parts"], out) == 0
    argv = ["regress", FIRE, "--vectors", str(out), "--master", MASTER]
    assert main([*argv, "--build-dir", str(tmp_path / "sim")]) == 0
    assert "OK: the gateware's matches and drops equal the expected ones" in capsys.readouterr().out
    report = json.loads((out / regress.REPORT).read_text())
    assert report["equal"] and report["tuples_simulated"] == 2000
    assert report["counts"]["simulated"] == report["counts"]["expected"] > 0


def test_a_bad_part_file_is_named_and_nothing_is_written(spark, trace, tmp_path, capsys):
    parts = tmp_path / "parts"
    parts.mkdir()
    for p in trace["parts"].iterdir():
        (parts / p.name).write_bytes(p.read_bytes())
    table = pq.read_table(parts / "part-2.parquet")
    temp = table.column("temp").to_pylist()
    temp[41] = 40000  # beyond INT(16)
    table = table.set_column(table.schema.get_field_index("temp"), "temp", pa.array(temp))
    pq.write_table(table, parts / "part-2.parquet")
    out = tmp_path / "v"
    assert vectors_cli(parts, out) == 2
    err = capsys.readouterr().err
    assert f"{parts / 'part-2.parquet'}: row 42, column 'temp': 40000 does not fit INT(16)" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]  # nothing half-written


def test_a_bad_csv_row_is_named(spark, trace, tmp_path, capsys):
    text = trace["csv"].read_text().splitlines()
    text[1500] = text[1500].replace('"DOCK"', '"ROOF"').replace('"AISLE"', '"ROOF"')
    text[1500] = text[1500].replace('"OFFICE"', '"ROOF"').replace('"FREEZER"', '"ROOF"')
    bad = tmp_path / "t.csv"
    bad.write_text("\n".join(text) + "\n")
    assert vectors_cli(bad, tmp_path / "v") == 2
    err = capsys.readouterr().err
    assert f"{bad}: row 1500 (line 1501), column 'zone': 'ROOF' is not a label" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


@pytest.fixture
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a Spark session was requested")

    monkeypatch.setattr(spark_session, "session", refuse)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tuples", "10"], "--tuples"),
        (["--seed", "0"], "--seed"),
        (["--keys", "4", "--zipf", "0"], "--keys, --zipf"),
    ],
)
def test_input_excludes_the_generator_options(trace, tmp_path, capsys, no_spark, args, message):
    assert vectors_cli(trace["csv"], tmp_path / "v", *args) == 2
    err = capsys.readouterr().err
    assert "--input takes the tuples from a recorded trace" in err and message in err
    assert list(tmp_path.iterdir()) == []


def test_tuples_or_input_is_needed(tmp_path, capsys, no_spark):
    assert main(["vectors", FIRE, "--out", str(tmp_path / "v")]) == 2
    assert "give --tuples N to generate tuples, or --input" in capsys.readouterr().err
    assert main(["vectors", FIRE, "--input", str(tmp_path / "none.csv"), "--out", "v"]) == 2
    assert "no such file or folder" in capsys.readouterr().err
