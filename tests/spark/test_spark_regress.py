"""Spark testbench: ``regress`` simulates the gateware over vectors and checks it in Spark.

One Spark session (local[2], the ``spark`` fixture of conftest.py) and one simulator build
cache serve the module; vectors are 500 to 2,000 tuples, simulated under Icarus Verilog. A
gateware variant with one activation wire cut must be caught with a readable report; bad input
must fail before Spark does any work. A run that several tests look at is made once, by a
module fixture (``fire_whole``, ``fire_broken``, ``supply_whole``, ``fire_native``), its output
captured (:func:`run_once`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import pathlib
import shutil

import pytest
from bundled import keyed_fire, param_texts
from progress_clock import line_at_each_phase_end

from nfacep import sim
from nfacep.cli import main as tb_main
from nfacep.params import EngineParams
from nfacep.spark_testbench import layout, regress, regress_plan, vectors, vectors_plan
from nfacep.spark_testbench import session as spark_session
from nfacep.spark_testbench.generate import Options

# under pytest-xdist (--dist loadgroup): its module fixtures' vectors and build cache are made
# once, by one worker
pytestmark = pytest.mark.xdist_group("spark_regress")

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUERIES = ROOT / "queries"
MASTER = "local[2]"
FIRE = str(QUERIES / "fire.sql")
SUPPLY = str(QUERIES / "supplychain.sql")
FIRE_ENGINE = ("--store", "pipeline", "--partitions", "16")
SUPPLY_ENGINE = (
    "--store",
    "pipeline",
    "--partitions",
    "6",
    "--tick-tuples",
    "40",
    "--timer-bits",
    "2",
)
#: The fire and supply-chain vectors' tuples: two blocks, enough for matches of both fire
#: queries, several shards of several pieces, and (supply chain) drops.
STREAM_TUPLES = 1500


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    missing = sim.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    return tmp_path_factory.mktemp("sim-cache")


def make(spark, out, query, engine, **options):
    opts = Options(**{"tuples": STREAM_TUPLES, "block_tuples": 1024, "seed": 5, **options})
    job = vectors_plan.prepare(query, opts, str(out), params=engine, param_texts=param_texts(query))
    return vectors.run(spark, job, tasks=2)


@pytest.fixture(scope="module")
def fire(spark, tmp_path_factory):
    """Fire vectors in partitioned mode: 16 keys, the partitioner stores 16."""
    out = tmp_path_factory.mktemp("fire") / "v"
    manifest = make(spark, out, FIRE, EngineParams(partitions=16), keys=16)
    assert manifest["expected"]["mode"] == "partitioned"
    assert manifest["counts"]["matches_total"] > 0
    assert all(n > 0 for n in manifest["counts"]["matches"].values())  # fire and thaw
    return out


def regress_cli(vectors_dir, query, *args):
    """``nfacep regress``; under Icarus in batch mode unless ``args`` choose (the command's
    default is Verilator's native model when Verilator is installed)."""
    simulator = () if "--simulator" in args else ("--simulator", "icarus")
    argv = ["regress", str(query), "--vectors", str(vectors_dir), "--master", MASTER]
    return tb_main([*argv, *simulator, *args])


def report_of(folder) -> dict:
    return json.loads((pathlib.Path(folder) / regress.REPORT).read_text())


@dataclasses.dataclass(frozen=True)
class Run:
    """One ``nfacep regress`` run that several tests look at: its arguments (after the query),
    exit status, stdout, stderr, report, and the names in its build folder right after it."""

    args: tuple[str, ...]
    rc: int
    out: str
    err: str
    report: dict
    builds: tuple[str, ...]


def run_once(vectors_dir, query, build_dir, *args) -> Run:
    """:func:`regress_cli` with its output captured (a module fixture has no ``capsys``)."""
    args = ("--build-dir", str(build_dir), *args)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = regress_cli(vectors_dir, query, *args)
    builds = tuple(sorted(p.name for p in pathlib.Path(build_dir).iterdir()))
    return Run(args, rc, out.getvalue(), err.getvalue(), report_of(vectors_dir), builds)


#: How the batch-mode runs of the fire vectors split them: 2 tasks, 2 shards.
FIRE_TASKS = ("--tasks", "2")


@pytest.fixture(scope="module")
def fire_whole(spark, fire, build_dir):
    """The fire vectors simulated under Icarus in batch mode, with the manifest's engine (no
    parameter given), in 2 shards, with progress lines on the fake clock of
    tests/progress_clock.py: the first build in ``build_dir``. The tests of shards, of the
    manifest's engine, of the progress lines and of streamed pieces all look at this run."""
    with pytest.MonkeyPatch.context() as mp:
        line_at_each_phase_end(mp, regress)
        return run_once(fire, FIRE, build_dir, *FIRE_TASKS)


@pytest.fixture(scope="module")
def fire_broken(spark, fire, build_dir):
    """The run of :func:`fire_whole` (real progress lines) on a gateware with the activation
    wire ``st2_HOT -> st3_SMOKE`` cut (:func:`_cut_wire`): HOT{3,} SMOKE can no longer end."""
    with pytest.MonkeyPatch.context() as mp:
        module, broken = _cut_wire("st3_SMOKE", "st2_HOT")
        mp.setattr(module, "next_state", broken)
        return run_once(fire, FIRE, build_dir, *FIRE_TASKS)


# --- the gateware agrees ------------------------------------------------------------------------


@pytest.mark.slow
def test_partitioned_vectors_pass_in_shards(fire, fire_whole):
    """The run of ``fire_whole`` (2 tasks, the first build in the module's cache)."""
    run = fire_whole
    assert run.rc == 0
    assert "OK: the gateware's matches and drops equal the expected ones" in run.out
    assert "shards of whole partition keys" in run.err
    assert "tuples simulated" in run.err  # progress
    report = run.report
    manifest = json.loads((fire / layout.MANIFEST).read_text())
    assert report["equal"] and report["mode"] == "partitioned"
    assert (
        report["counts"]["simulated"]
        == report["counts"]["expected"]
        == manifest["counts"]["matches_total"]
    )
    assert report["tuples_simulated"] == STREAM_TUPLES
    assert report["shards"]["simulated"] > 1  # really split
    assert report["first"] == []
    # one prebuilt model served every shard: one build in the cache, no run folders left
    assert len([b for b in run.builds if b.startswith("icarus-")]) == 1
    assert not [b for b in run.builds if b.startswith(("run-", "regress-"))]


@pytest.mark.slow
def test_partitioned_vectors_pass_under_verilator(spark, fire, tmp_path, capsys):
    """The same vectors through a Verilator model: the build's PATH and make flags must reach
    the Spark tasks that run the shards."""
    missing = sim.simulator_available("verilator")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    cache = tmp_path / "cache"
    assert (
        regress_cli(
            fire,
            FIRE,
            *FIRE_ENGINE,
            "--build-dir",
            str(cache),
            "--tasks",
            "2",
            "--simulator",
            "verilator",
            "--mode",
            "batch",
        )
        == 0
    )
    out, _ = capsys.readouterr()
    assert "OK: the gateware's matches and drops equal the expected ones" in out
    report = report_of(fire)
    assert report["equal"] and report["shards"]["simulated"] > 1
    assert report["simulator"] == "verilator" and report["tuples_simulated"] == STREAM_TUPLES
    assert len([p for p in cache.iterdir() if p.name.startswith("verilator-")]) == 1


@pytest.mark.slow
def test_global_vectors_with_drops_and_ticks_pass(supply_global, supply_whole):
    """The run of ``supply_whole``: global vectors, with drops and ticks, pass."""
    manifest = json.loads((supply_global / layout.MANIFEST).read_text())
    run = supply_whole
    assert run.rc == 0
    assert "warning: one global simulation of the whole stream" in run.err
    assert "timers matter" in run.err
    assert "regress:" not in run.err  # --quiet
    report = run.report
    assert report["equal"] and report["shards"]["simulated"] == 1
    assert report["counts"]["simulated_drops"] == manifest["counts"]["drops"] > 0
    assert "OK:" in run.out


@pytest.mark.slow
def test_several_key_fields_pass(spark, tmp_path, build_dir, capsys):
    """PARTITION BY site, sensor: the shards hold whole keys (both fields), the records'
    keys decode into both fields, and the gateware's matches are the expected ones."""
    query = keyed_fire(tmp_path)
    manifest = make(spark, tmp_path / "v", str(query), EngineParams(partitions=16), keys=16)
    assert manifest["expected"]["mode"] == "partitioned"
    assert manifest["counts"]["matches_total"] > 0
    args = (
        "--store",
        "pipeline",
        "--partitions",
        "16",
        "--build-dir",
        str(build_dir),
        "--tasks",
        "2",
    )
    assert regress_cli(tmp_path / "v", query, *args) == 0
    out, err = capsys.readouterr()
    assert "OK: the gateware's matches and drops equal the expected ones" in out
    assert "tuples simulated" in err  # progress, on the real clock
    report = report_of(tmp_path / "v")
    assert report["equal"] and report["counts"]["simulated"] == manifest["counts"]["matches_total"]


# --- a broken gateware is caught ----------------------------------------------------------------


def _cut_wire(target: str, source: str):
    """``nfacep.hdl.engine_update.next_state`` with the activation wire ``source -> target``
    cut."""
    import nfacep.hdl.engine_update
    import nfacep.hdl.nfa

    original = nfacep.hdl.nfa.next_state

    def broken(m, nfa, state, predicates, prefix="", **kwargs):
        states = tuple(
            dataclasses.replace(
                s, activation=frozenset(j for j in s.activation if nfa.states[j].name != source)
            )
            if s.name == target
            else s
            for s in nfa.states
        )
        assert states != nfa.states, "no such wire"
        return original(
            m, dataclasses.replace(nfa, states=states), state, predicates, prefix, **kwargs
        )

    return nfacep.hdl.engine_update, broken


@pytest.mark.slow
def test_cut_activation_wire_is_caught(fire, fire_broken):
    """The run of ``fire_broken``: HOT{3,} SMOKE without the wire that lets the third HOT
    activate SMOKE; no fire can end now."""
    assert fire_broken.rc == 1
    out, report = fire_broken.out, fire_broken.report
    c = report["counts"]
    assert not report["equal"] and c["differences"] == c["missing"] + c["extra"] > 0
    assert c["missing"] > 0 and c["extra"] == 0
    assert report["by_query"]["thaw"] == {
        "missing": 0,
        "extra": 0,
        "wrong_start": 0,
        "wrong_measure": 0,
    }
    assert report["start_seq"] is False and "start_seq" not in out  # no query reports it
    assert report["by_query"]["fire"]["missing"] == c["missing"]
    first = report["first"]
    assert first and all(r["query"] == "fire" for r in first)
    assert [r["seq"] for r in first] == sorted(r["seq"] for r in first)
    assert f"DIFFERENT: {c['differences']} differences ({c['missing']} missing, " in out
    assert f"query fire: {c['missing']} missing, {c['extra']} extra" in out
    row = first[0]
    assert any(
        line.split() == [row["kind"], str(row["seq"]), "fire", row["partition"]]
        for line in out.splitlines()
    )
    assert f"report -> {fire}/{regress.REPORT}" in out


NATIVE = ("--simulator", "verilator", "--mode", "native")


@pytest.fixture(scope="module")
def native_cache(tmp_path_factory):
    """The build folder of the native-mode tests (the fire and supply-chain models)."""
    missing = sim.simulator_available("verilator")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    return tmp_path_factory.mktemp("native-cache")


@pytest.fixture(scope="module")
def fire_native(spark, fire, native_cache):
    """The fire vectors simulated by Verilator's native model in 2 tasks, the first build in
    ``native_cache``: the native-mode test and the streamed-pieces one look at this run."""
    return run_once(fire, FIRE, native_cache, *FIRE_ENGINE, "--tasks", "2", *NATIVE, "--quiet")


@pytest.mark.slow
def test_native_mode_passes_and_catches_a_cut_wire(fire, fire_native, monkeypatch, capsys):
    """--mode native (the batch harness under a C++ main): the vectors pass (the run of
    ``fire_native``), and the same broken gateware as above is caught."""
    run = fire_native
    assert run.rc == 0
    assert "verilator (native)" in run.out and "OK:" in run.out
    report = run.report
    assert report["equal"] and report["sim_mode"] == "native"
    assert report["tuples_simulated"] == STREAM_TUPLES and report["shards"]["simulated"] > 1
    assert len([b for b in run.builds if b.startswith("native-")]) == 1
    module, broken = _cut_wire("st3_SMOKE", "st2_HOT")
    monkeypatch.setattr(module, "next_state", broken)
    assert regress_cli(fire, FIRE, *run.args) == 1
    c = report_of(fire)["counts"]
    assert c["missing"] > 0 and c["extra"] == 0
    assert regress_cli(fire, FIRE, *FIRE_ENGINE, "--mode", "native") == 2
    assert "--simulator verilator" in capsys.readouterr().err


# --- where matches begin: start_seq ----------------------------------------------------------


def corrupt_starts(folder, mode) -> dict:
    """Rewrite expected.parquet with some starts changed: a fire start moved by one, a thaw
    start (null: thaw does not report it) set, and in global mode a fire start made null.
    Returns {(seq, query, partition): (corrupted start, true start)}."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = pathlib.Path(folder) / layout.EXPECTED
    table = pq.read_table(path)
    rows = table.to_pylist()
    fire = [r for r in rows if r["query"] == "fire"]
    thaw = [r for r in rows if r["query"] == "thaw"]
    assert len(fire) > 2 and thaw and all(r["start_seq"] is None for r in thaw)
    changes = [
        (fire[len(fire) // 2], fire[len(fire) // 2]["start_seq"] + 1),
        (thaw[-1], thaw[-1]["seq"] - 3),
    ]
    if mode == "global":
        changes.append((fire[-1], None))
    corrupted = {}
    for r, value in changes:
        corrupted[r["seq"], r["query"], r["partition"]] = (value, r["start_seq"])
        r["start_seq"] = value
    for part in path.iterdir():
        part.unlink()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path / "part-0.parquet")
    return corrupted


# --- the measures' values ------------------------------------------------------------------------

MEASURES = (
    "MEASURES FIRST(seq) AS start_seq, FIRST(temp) AS t0, LAST(co_ppm) AS co, "
    "LAST(seq) AS end_seq, COUNT(*) AS n, MATCH_NUMBER() AS k\n"
)


def measures_query(folder) -> pathlib.Path:
    """fire.sql with its fire query showing measures of every kind; thaw has none."""
    text = pathlib.Path(FIRE).read_text()
    head = "QUERY fire FROM warehouse\nPARTITION sensor\nORDER BY ts\n"
    path = pathlib.Path(folder) / "fire_measures.sql"
    path.write_text(text.replace(head, head + MEASURES))
    return path


def corrupt_measures(folder) -> dict:
    """Rewrite expected.parquet as if the expected side's measurer were wrong at a few fire
    matches (a COUNT(*) one more, a FIRST(temp) changed, a MATCH_NUMBER() made empty).
    Returns {(seq, query, partition): (measure, corrupted value, true value)}."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = pathlib.Path(folder) / layout.EXPECTED
    table = pq.read_table(path)
    rows = table.to_pylist()
    fire = [r for r in rows if r["query"] == "fire"]
    thaw = [r for r in rows if r["query"] == "thaw"]
    assert len(fire) > 6 and thaw and all(r["measure_n"] == "" for r in thaw)
    assert all(int(r["measure_n"]) >= 4 for r in fire)  # HOT{3,} SMOKE
    assert all(r["measure_start_seq"] == str(r["start_seq"]) for r in fire)
    assert all(r["measure_end_seq"] == str(r["seq"]) for r in fire)
    changes = [
        (fire[1], "n", str(int(fire[1]["measure_n"]) + 1)),
        (fire[2], "t0", "-1"),
        (fire[-2], "k", ""),
    ]
    corrupted = {}
    for r, name, value in changes:
        corrupted[r["seq"], r["query"], r["partition"]] = (name, value, r[f"measure_{name}"])
        r[f"measure_{name}"] = value
    for part in path.iterdir():
        part.unlink()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path / "part-0.parquet")
    return corrupted


@pytest.mark.slow
@pytest.mark.parametrize(("keys", "mode"), [(16, "partitioned"), (24, "global")])
def test_wrong_start_seq_and_measures_are_caught(
    spark, tmp_path, build_dir, monkeypatch, capsys, keys, mode
):
    """Vectors of a query with measures of every kind (FIRST(seq) AS start_seq among them),
    their expected starts corrupted at a few matches and their measures' values at others:
    regress simulates the gateware, whose starts agree with every other expected start (in
    shards, each start a position in its shard mapped to the global seq; in one global
    simulation), computes the measures of its matches with the same Measurer from the
    shard's tuples (in small pieces and record chunks here, so that the tuples where a match
    begins are carried), and reports exactly the corrupted rows: wrong_start (null-safe: a
    start where null is expected and null where one is) and wrong_measure (with the measure
    and both values), exit status 1."""
    query = measures_query(tmp_path)
    out = tmp_path / "v"
    m = make(spark, out, str(query), EngineParams(partitions=16), keys=keys, tuples=2000)
    assert m["expected"]["mode"] == mode
    wrong = corrupt_measures(out)
    corrupted = corrupt_starts(out, mode)
    monkeypatch.setattr(regress, "PIECE_TUPLES", 97)
    monkeypatch.setattr(regress, "RECORD_CHUNK", 13)
    assert regress_cli(out, query, "--build-dir", str(build_dir), "--tasks", "3", "--quiet") == 1
    stdout, _ = capsys.readouterr()
    report = report_of(out)
    assert report["mode"] == mode and report["start_seq"] is True
    assert report["measures"] == ["start_seq", "t0", "co", "end_seq", "n", "k"]
    assert (report["shards"]["simulated"] > 1) == (mode == "partitioned")
    c = report["counts"]
    assert c["wrong_start"] == len(corrupted) and c["wrong_measure"] == len(wrong)
    assert c["differences"] == len(corrupted) + len(wrong)
    assert c["simulated"] == c["expected"] > c["differences"]
    assert report["by_query"]["thaw"] == {
        "missing": 0,
        "extra": 0,
        "wrong_start": 1,
        "wrong_measure": 0,
    }
    assert report["by_query"]["fire"]["wrong_start"] == len(corrupted) - 1
    assert report["by_query"]["fire"]["wrong_measure"] == len(wrong)
    got = {
        (r["seq"], r["query"], r["partition"]): (r["expected_start_seq"], r["simulated_start_seq"])
        for r in report["first"]
        if r["kind"] == "wrong_start"
    }
    assert got == corrupted and len(report["first"]) == len(corrupted) + len(wrong)
    got = {
        (r["seq"], r["query"], r["partition"]): (
            r["measure"],
            r["expected_value"],
            r["simulated_value"],
        )
        for r in report["first"]
        if r["kind"] == "wrong_measure"
    }
    assert got == wrong
    assert f"{len(corrupted)} wrong start" in stdout and f"{len(wrong)} wrong measure" in stdout
    assert "kind" in stdout and "expected start_seq  simulated start_seq" in stdout
    assert "measure  expected value  simulated value" in stdout
    for (seq, name, part), (bad, true) in corrupted.items():
        row = [
            "wrong_start",
            str(seq),
            name,
            part,
            "-" if bad is None else str(bad),
            "-" if true is None else str(true),
            *("-" * 3),
        ]
        assert any(line.split() == row for line in stdout.splitlines()), (row, stdout)
    for (seq, name, part), (measure, bad, true) in wrong.items():
        start = next(r["simulated_start_seq"] for r in report["first"] if r["seq"] == seq)
        row = ["wrong_measure", str(seq), name, part, str(start), str(start), measure]
        row += [bad or '""', true]
        assert any(line.split() == row for line in stdout.splitlines()), (row, stdout)


# --- PREV ----------------------------------------------------------------------------------------

PREV_QUERY = """
CREATE STREAM ticks (sym UINT(8), ts TIMESTAMP(MILLISECOND), price INT(32), vol UINT(16));

SELECT * FROM ticks MATCH_RECOGNIZE (
    PARTITION BY sym
    ORDER BY ts
    MEASURES FIRST(ts) AS start_ts, LAST(price) AS last_price, COUNT(*) AS n
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (DOWN{2,} UP)
    DEFINE
        DOWN AS price < PREV(price),
        UP AS price > PREV(price, 2) AND vol > 10
) AS v;
"""


@pytest.mark.slow
def test_prev_query_vectors_pass(spark, tmp_path, build_dir, capsys):
    """A V of prices: falls (each below PREV(price)), then a rise above the price two tuples
    back (PREV(price, 2)), with measures of a TIMESTAMP. The generator plants falling and
    rising runs (each tuple chosen given the ones before it), the reference's expected matches
    include them, and the gateware, whose partition entries keep the last two prices, agrees
    on every match and measure."""
    import pyarrow.parquet as pq

    query = tmp_path / "v_shape.sql"
    query.write_text(PREV_QUERY)
    out = tmp_path / "v"
    opts = Options(tuples=2000, block_tuples=1024, seed=5, keys=16, plant_rate=0.2)
    job = vectors_plan.prepare(str(query), opts, str(out), params=EngineParams(partitions=16))
    m = vectors.run(spark, job, tasks=2)
    assert m["expected"]["mode"] == "partitioned" and not m["unplanted"]
    assert m["planted"]["v"]["short"] and m["planted"]["v"]["long"]
    # the planted runs are matches (all but those a match just before swallows)
    ends = {p.seq for b in range(job.generator.n_blocks) for p in job.generator.planted(b)}
    found = ends & set(pq.read_table(out / layout.EXPECTED).column("seq").to_pylist())
    assert len(found) >= 0.8 * len(ends) > 10
    assert regress_cli(out, query, "--build-dir", str(build_dir), "--quiet") == 0
    stdout, _ = capsys.readouterr()
    report = report_of(out)
    assert report["equal"] and report["counts"]["expected"] == m["counts"]["matches"]["v"]
    assert report["measures"] == ["start_ts", "last_price", "n"]
    assert "OK: the gateware's matches and drops equal the expected ones" in stdout


# --- bad input: a clear error before Spark does anything ------------------------------------------


@pytest.fixture
def no_spark(monkeypatch):
    """Fail the test if the command gets as far as building a Spark session."""

    def refuse(*a, **k):
        raise AssertionError("a Spark session was requested")

    monkeypatch.setattr(spark_session, "session", refuse)


def _expect_error(capsys, rc, *phrases):
    assert rc == 2
    err = capsys.readouterr().err
    for p in phrases:
        assert p in err, err
    return err


def test_unknown_master_url(fire, no_spark, capsys):
    rc = tb_main(
        [
            "regress",
            FIRE,
            "--vectors",
            str(fire),
            *FIRE_ENGINE,
            "--master",
            "sparkle://127.0.0.1:7077",
        ]
    )
    _expect_error(capsys, rc, "is not a Spark master URL")
    rc = tb_main(
        ["regress", FIRE, "--vectors", str(fire), *FIRE_ENGINE, "--master", "spark://127.0.0.1:1"]
    )
    _expect_error(capsys, rc, "no Spark master answers")


def test_vectors_of_another_query(fire, no_spark, tmp_path, capsys):
    other = tmp_path / "fire.sql"
    other.write_text(pathlib.Path(FIRE).read_text() + "\n-- edited\n")
    _expect_error(
        capsys,
        regress_cli(fire, other, *FIRE_ENGINE),
        "was generated from another query file",
        "SHA-256",
    )
    _expect_error(
        capsys, regress_cli(fire, SUPPLY, *FIRE_ENGINE), "was generated from another query file"
    )


def test_engine_parameters_differ_from_the_manifest(fire, no_spark, capsys):
    _expect_error(
        capsys,
        regress_cli(fire, FIRE, "--store", "pipeline", "--partitions", "32"),
        "describes another engine",
        "--partitions 16 (given: 32)",
    )


@pytest.mark.slow
def test_engine_parameters_default_to_the_manifests(fire, build_dir, fire_whole):
    """`nfacep regress --vectors V` after `nfacep vectors --partitions 16`: the engine is the
    manifest's, with no parameter given (the run of ``fire_whole``); one given that agrees is
    fine too."""
    job = regress_plan.prepare(FIRE, str(fire), given={"timer_bits": 4}, build_dir=build_dir)
    assert job.params == EngineParams(partitions=16)
    assert not {"--store", "--partitions", "--timer-bits"} & set(fire_whole.args)
    assert fire_whole.rc == 0
    assert "OK: the gateware's matches and drops equal the expected ones" in fire_whole.out
    report = fire_whole.report
    assert report["equal"] and report["engine"] == {
        "partitions": 16,
        "tick_tuples": 0,
        "timer_bits": 4,
        "store": "pipeline",
        "ways": 4,
    }


@pytest.mark.parametrize("remove", [layout.MANIFEST, layout.TUPLES, layout.EXPECTED, layout.DROPS])
def test_missing_files(fire, no_spark, tmp_path, capsys, remove):
    copy = tmp_path / "v"
    shutil.copytree(fire, copy)
    target = copy / remove
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    _expect_error(capsys, regress_cli(copy, FIRE, *FIRE_ENGINE), remove)


def test_no_vectors_folder(no_spark, tmp_path, capsys):
    _expect_error(capsys, regress_cli(tmp_path / "nope", FIRE), "no such folder")


def test_empty_parquet_folder_and_bad_manifest(fire, no_spark, tmp_path, capsys):
    copy = tmp_path / "v"
    shutil.copytree(fire, copy)
    for p in (copy / layout.EXPECTED).iterdir():
        p.unlink()
    _expect_error(
        capsys, regress_cli(copy, FIRE, *FIRE_ENGINE), f"{layout.EXPECTED} holds no Parquet file"
    )
    (copy / layout.MANIFEST).write_text("{not json")
    _expect_error(capsys, regress_cli(copy, FIRE, *FIRE_ENGINE), "cannot read it")


@pytest.mark.slow
def test_progress_lines_count_tuples_and_end_at_the_total(fire_whole):
    """`regress` reports tuples simulated by the shards that have finished, with a rate once
    something is counted, and ends at the total (a line due as each phase ends, on a fake
    clock: tests/progress_clock.py; the run of ``fire_whole``, in 2 shards)."""
    import re

    assert fire_whole.rc == 0
    err = fire_whole.err
    lines = [
        ln
        for ln in err.splitlines()
        if re.match(rf"regress: [\d,]+ of {STREAM_TUPLES:,} tuples simulated", ln)
    ]
    assert len(lines) >= 2, err  # at least one line before the last
    done = [int(ln.split()[1].replace(",", "")) for ln in lines]
    assert done == sorted(done) and done[-1] == STREAM_TUPLES, lines
    for ln, n in zip(lines, done, strict=True):
        assert ("tuples/s" in ln) == (n > 0), ln
    assert all(re.search(r", [012] of 2 shards done, ", ln) for ln in lines[:-1]), lines
    assert re.fullmatch(
        rf"regress: {STREAM_TUPLES:,} of {STREAM_TUPLES:,} tuples simulated \(100%\) in \d+ s, "
        r"[\d,]+ tuples/s",
        lines[-1],
    ), lines[-1]
    assert "regress: checking the simulated matches against the expected ones" in err


# --- streamed tasks: a shard in pieces, its records in chunks ----------------------------------


@pytest.fixture(scope="module")
def supply_global(spark, tmp_path_factory):
    """Supply-chain vectors in global mode (timers matter), with drops."""
    out = tmp_path_factory.mktemp("supply") / "v"
    manifest = make(
        spark,
        out,
        SUPPLY,
        EngineParams(partitions=6, tick_tuples=40, timer_bits=2),
        keys=30,
        zipf=0.5,
    )
    assert manifest["expected"]["mode"] == "global" and manifest["counts"]["drops"] > 0
    return out


def _without_times(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "run"}


@pytest.fixture(scope="module")
def supply_whole(spark, supply_global, build_dir):
    """The supply-chain vectors simulated under Icarus in batch mode (one global simulation)."""
    return run_once(supply_global, SUPPLY, build_dir, *SUPPLY_ENGINE, "--tasks", "2", "--quiet")


@pytest.mark.slow
@pytest.mark.parametrize("sim_mode", ["batch", "native"])
def test_streamed_tasks_in_small_pieces_give_the_same_report(
    request, fire, supply_global, monkeypatch, capsys, sim_mode
):
    """Each task hands its shard to the simulation in pieces and reads the records back in
    chunks: forced to pieces of 97 tuples and chunks of 5 records (a 750-tuple shard in
    several of each), partitioned and global vectors give the report the default sizes (one
    piece, one chunk) give, field for field but the run's times; so does a broken gateware's
    (Icarus in the batch mode, Verilator in the native one). The runs at the default sizes
    are the module's (``fire_whole``, ``supply_whole``, ``fire_broken``; ``fire_native``),
    but the native supply-chain one, made here."""
    # (every module run is made before the sizes are forced below)
    if sim_mode == "batch":
        fire_run, supply_run = map(request.getfixturevalue, ("fire_whole", "supply_whole"))
        broken_report = _without_times(request.getfixturevalue("fire_broken").report)
    else:
        fire_run = request.getfixturevalue("fire_native")
        cache = request.getfixturevalue("native_cache")
        args = (*SUPPLY_ENGINE, "--tasks", "2", *NATIVE, "--quiet")
        supply_run = run_once(supply_global, SUPPLY, cache, *args)
    runs = ((fire, FIRE, fire_run.args), (supply_global, SUPPLY, supply_run.args))
    whole = [_without_times(r.report) for r in (fire_run, supply_run)]
    assert fire_run.rc == supply_run.rc == 0

    def reports(broken: bool = False) -> list[dict]:
        got = []
        for folder, query, args in runs[: 2 - broken]:
            assert regress_cli(folder, query, *args) == broken
            got.append(_without_times(report_of(folder)))
        return got

    assert [r["mode"] for r in whole] == ["partitioned", "global"]
    assert all(r["equal"] and r["sim_mode"] == sim_mode for r in whole)
    assert whole[1]["counts"]["simulated_drops"] > 0
    monkeypatch.setattr(regress, "PIECE_TUPLES", 97)
    monkeypatch.setattr(regress, "RECORD_CHUNK", 5)
    assert reports() == whole
    if sim_mode == "batch":  # a cut wire is still caught, alike in pieces
        module, broken = _cut_wire("st3_SMOKE", "st2_HOT")
        monkeypatch.setattr(module, "next_state", broken)
        small = reports(broken=True)
        assert small == [broken_report]
        c = small[0]["counts"]
        assert not small[0]["equal"] and c["missing"] > 0 and c["extra"] == 0
    capsys.readouterr()


def test_a_shard_whose_seq_does_not_rise_is_a_clear_error(spark, fire, build_dir, tmp_path, capsys):
    """A tuple twice in tuples.parquet (the same seq): its shard's seq does not rise, which
    the task says in one line; and Shard.pieces says where, across pieces too."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nfacep import compile_file
    from nfacep.errors import DataError
    from nfacep.spark_testbench.shard import Shard

    copy = tmp_path / "v"
    shutil.copytree(fire, copy)
    folder = copy / layout.TUPLES
    parts = sorted(p for p in folder.iterdir() if p.suffix == ".parquet")
    table = pq.read_table(parts[0])
    pq.write_table(pa.concat_tables([table, table.slice(5, 1)]), parts[0])
    for crc in folder.glob(".*.crc"):  # (Hadoop's checksums of the files as written)
        crc.unlink()
    assert regress_cli(copy, FIRE, *FIRE_ENGINE, "--build-dir", str(build_dir), "--quiet") == 1
    err = capsys.readouterr().err
    seq = table.column("seq")[5].as_py()
    assert "nfacep: a simulation task failed" in err and "Traceback" not in err, err
    assert f"must come in rising seq order, each seq once, but seq {seq} came after seq" in err, err

    program = compile_file(FIRE).program
    ordered = table.sort_by("seq").to_batches(max_chunksize=10)
    swapped = [ordered[0], ordered[2], ordered[1]]  # rising within each batch, not across
    shard = Shard(program, tmp_path, 4)
    with pytest.raises(
        DataError,
        match=(
            rf"seq {ordered[1].column('seq')[0].as_py()} came after seq "
            rf"{ordered[2].column('seq')[-1].as_py()}$"
        ),
    ):
        list(shard.pieces(swapped))
    shard = Shard(program, tmp_path, 4)
    pieces = list(shard.pieces(ordered[:3]))
    assert [p.n for p in pieces] == [4, 4, 2] * 3 and shard.n == 30
    assert np.array_equal(
        shard.seq(), np.concatenate([b.column("seq").to_numpy() for b in ordered[:3]])
    )
    assert np.array_equal(
        shard.keys().columns["sensor"], np.concatenate([p.columns["sensor"] for p in pieces])
    )


@pytest.mark.slow
def test_regress_shards_forced_global_vectors_when_the_engine_allows(spark, tmp_path):
    """Vectors whose expected matches were one global pass by request (``--expected global``)
    on an engine where capacity and timers cannot matter: ``regress`` still shards by key."""
    out = tmp_path / "v"
    opts = Options(tuples=500, block_tuples=256, seed=5, keys=16)
    job = vectors_plan.prepare(
        FIRE, opts, str(out), params=EngineParams(partitions=16), expected="global"
    )
    manifest = vectors.run(spark, job, tasks=2)
    assert manifest["expected"] == {"mode": "global", "reason": vectors_plan.FORCED_GLOBAL}
    job = regress_plan.prepare(FIRE, str(out), simulator="icarus")
    assert job.mode == "partitioned" and "no more than --partitions 16" in job.reason
    # with timers the split is not exact: one global simulation
    out = tmp_path / "t"
    engine = EngineParams(partitions=16, tick_tuples=40)
    vectors.run(spark, vectors_plan.prepare(FIRE, opts, str(out), params=engine, expected="global"))
    assert regress_plan.prepare(FIRE, str(out), simulator="icarus").mode == "global"
