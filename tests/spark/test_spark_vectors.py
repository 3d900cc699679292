"""Spark testbench: regression vectors are deterministic and their expected matches are the
reference matcher's (``nfacep match``) on the same tuples.

One Spark session (local[2], the ``spark`` fixture of conftest.py) serves the whole module;
sizes are small so the file runs in a couple of minutes on a slow 2-core machine.
"""

import csv
import hashlib
import io
import json
import pathlib
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bundled import keyed_fire, param_texts
from pyspark.testing import assertDataFrameEqual  # the `spark` extra; never skipped

import nfacep
from nfacep.cli import main as nfacep_main
from nfacep.params import EngineParams
from nfacep.spark_testbench import layout, vectors, vectors_plan
from nfacep.spark_testbench import session as spark_session
from nfacep.spark_testbench.generate import KINDS, WINDOW_KINDS, Generator, Options

# under pytest-xdist (--dist loadgroup): its module fixtures' vectors are made once, by one worker
pytestmark = pytest.mark.xdist_group("spark_vectors")

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUERIES = ROOT / "queries"
MASTER = "local[2]"
FIRE = str(QUERIES / "fire.sql")
SMALL = {"tuples": 6000, "block_tuples": 1024}


@pytest.fixture(scope="module", autouse=True)
def _plain_diffs():
    """PySpark's assertDataFrameEqual, when it fails, probes the terminal for colours with one
    os.popen per differing row and never closes them: under -W error the leaked pipes turn a
    clear failure into hundreds of unraisable ResourceWarnings. Plain diffs avoid the probe."""
    import pyspark.testing.utils

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pyspark.testing.utils, "_terminal_color_support", lambda: False)
        yield


def make(spark, out, query=FIRE, *, tasks=2, engine=None, expected="auto", **options):
    opts = Options(**{**SMALL, "seed": 7, "keys": 24, **options})
    job = vectors_plan.prepare(
        str(query),
        opts,
        str(out),
        params=engine or EngineParams(),
        expected=expected,
        param_texts=param_texts(query),
    )
    return vectors.run(spark, job, tasks=tasks)


@pytest.fixture(scope="module")
def fire(spark, tmp_path_factory):
    """The same fire vectors generated and matched in 1, 2 and 8 Spark partitions."""
    base = tmp_path_factory.mktemp("fire")
    return {t: (base / f"t{t}", make(spark, base / f"t{t}", tasks=t)) for t in (1, 2, 8)}


def read(spark, folder, name):
    return spark.read.parquet(str(pathlib.Path(folder) / name))


def table(folder, name) -> pa.Table:
    """A Parquet folder's rows in file order (part files by name, as Spark wrote them)."""
    return pq.read_table(pathlib.Path(folder) / name)


def run_match(tmp_path, query, vectors_dir, *args):
    """`nfacep match` on the vectors' tuples, as one Parquet file in seq order."""
    tuples = table(vectors_dir, layout.TUPLES).sort_by("seq")
    single = tmp_path / "tuples.parquet"
    pq.write_table(tuples, single)
    out = tmp_path / "matches.csv"
    params = [arg for text in param_texts(query) for arg in ("--param", text)]
    assert (
        nfacep_main(
            ["match", str(query), "--input", str(single), "--output", str(out), *args, *params]
        )
        == 0
    )
    with open(out, newline="") as f:
        rows = [(int(r["seq"]), r["query"], _cell(r)) for r in csv.DictReader(f)]
    summary = json.loads((tmp_path / "matches.summary.json").read_text())
    return rows, summary


def _cell(row: dict) -> str | None:
    """A match file row's partition as the vectors' ``partition`` column holds it: a key of
    several fields (columns ``partition_<field>``) as its values joined as a CSV row."""
    if "partition" in row:
        return row["partition"] or None
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow(
        [v for k, v in row.items() if k.startswith("partition_")]
    )
    return line.getvalue()


def assert_expected_is(spark, folder, rows):
    """expected.parquet holds exactly ``rows`` (seq, query, partition), in that order."""
    expected = read(spark, folder, layout.EXPECTED).orderBy("seq", "query")
    actual = (
        spark.createDataFrame(rows, schema=expected.schema)
        if rows
        else spark.createDataFrame([], expected.schema)
    )
    assertDataFrameEqual(expected, actual, checkRowOrder=True)
    assert table(folder, layout.EXPECTED).to_pylist() == [
        dict(zip(("seq", "query", "partition"), r, strict=True)) for r in rows
    ]


# --- determinism ------------------------------------------------------------------------------


@pytest.mark.slow
def test_same_seed_same_content_for_1_2_8_spark_partitions(spark, fire):
    (d1, m1), (d2, m2), (d8, m8) = fire[1], fire[2], fire[8]
    for name in (layout.TUPLES, layout.EXPECTED, layout.DROPS):
        base = read(spark, d1, name)
        for d in (d2, d8):
            # exact: FLOAT32 values must be bit-identical, not close (Spark reads the part
            # files in no particular order: pyarrow below checks the order)
            assertDataFrameEqual(read(spark, d, name), base, rtol=0, atol=0)
        first = table(d1, name)
        assert table(d2, name).equals(first) and table(d8, name).equals(first)
    tuples = table(d1, layout.TUPLES)
    assert tuples.column("seq").to_pylist() == list(range(SMALL["tuples"]))
    assert len(list((d8 / layout.TUPLES).glob("part-*.parquet"))) > 1  # really split
    strip = [{k: v for k, v in m.items() if k != "run"} for m in (m1, m2, m8)]
    assert strip[0] == strip[1] == strip[2]
    assert [m["run"]["tasks"] for m in (m1, m2, m8)] == [1, 2, 8]


@pytest.mark.slow
def test_another_seed_gives_other_tuples(spark, fire, tmp_path):
    m = make(spark, tmp_path / "v", seed=8)
    assert not table(tmp_path / "v", layout.TUPLES).equals(table(fire[2][0], layout.TUPLES))
    assert m["seed"] == 8


# --- expected matches against the reference matcher -------------------------------------------


def test_partitioned_expected_equals_nfacep_match(spark, fire, tmp_path):
    folder, manifest = fire[2]
    assert manifest["expected"]["mode"] == "partitioned"
    rows, summary = run_match(tmp_path, FIRE, folder)
    assert_expected_is(spark, folder, rows)
    assert summary["drops"] == 0 and read(spark, folder, layout.DROPS).count() == 0
    assert manifest["counts"]["matches"] == summary["matches"]


def test_planted_instances_end_in_matches(fire):
    """Every planted instance of an every-end query is a match where it ends (its run is kept
    contiguous in its partition), but a window_miss (first and last a window apart), which is
    not; SKIP PAST LAST ROW ones may be cut short by a match that started in the background
    before them, so they are only counted."""
    folder, manifest = fire[2]
    job = vectors_plan.prepare(FIRE, Options(**SMALL, seed=7, keys=24), str(folder.parent / "x"))
    gen = job.generator
    planted = [p for b in range(gen.n_blocks) for p in gen.planted(b)]
    got = {
        (r["seq"], r["query"], r["partition"]) for r in table(folder, layout.EXPECTED).to_pylist()
    }
    every_end = {q["name"] for q in manifest["queries"] if not q["skip_past_last_row"]}
    checked = [p for p in planted if p.query in every_end]
    assert checked and all(
        ((p.seq, p.query, p.partition) in got) == (p.kind != "window_miss") for p in checked
    )
    kinds = {p.kind for p in planted}
    assert {"short", "long", "overlap", "repeat"} <= kinds
    if any(q.window for q in job.nfa.program.queries):
        assert set(WINDOW_KINDS) <= kinds
    assert sum(sum(k.values()) for k in manifest["planted"].values()) == len(planted)


def test_forced_global_pass_equals_partitioned(spark, fire, tmp_path):
    m = make(spark, tmp_path / "g", expected="global")
    assert m["expected"] == {"mode": "global", "reason": "forced with --expected global"}
    assertDataFrameEqual(
        read(spark, tmp_path / "g", layout.EXPECTED), read(spark, fire[2][0], layout.EXPECTED)
    )
    assert table(tmp_path / "g", layout.EXPECTED).equals(table(fire[2][0], layout.EXPECTED))


def test_global_pass_models_capacity_and_timers(spark, tmp_path):
    """More keys than the partitioner stores, and ticks: the exact global pass, with drops."""
    query = QUERIES / "supplychain.sql"
    engine = EngineParams(partitions=6, tick_tuples=40, timer_bits=2)
    m = make(spark, tmp_path / "v", query, engine=engine, keys=30, zipf=0.5)
    assert m["expected"]["mode"] == "global"
    assert m["expected"]["reason"].startswith("timers matter")
    rows, summary = run_match(
        tmp_path,
        query,
        tmp_path / "v",
        "--store",
        "pipeline",
        "--partitions",
        "6",
        "--tick-tuples",
        "40",
        "--timer-bits",
        "2",
    )
    assert_expected_is(spark, tmp_path / "v", rows)
    drops = table(tmp_path / "v", layout.DROPS)
    assert summary["drops"] > 0 and drops.column("seq").to_pylist() == summary["drop_seqs"]
    assert m["counts"]["drops"] == summary["drops"]
    # capacity really mattered: an engine that never fills reports other matches
    (tmp_path / "u").mkdir()
    unlimited, _ = run_match(
        tmp_path / "u", query, tmp_path / "v", "--store", "pipeline", "--partitions", "64"
    )
    assert unlimited != rows


def test_several_key_fields(spark, tmp_path):
    """PARTITION BY site, sensor: --keys counts distinct combinations, both fields vary; the
    expected matches are nfacep match's, sharded by the whole key (partitioned) and, with a
    table store whose buckets fill, in the global pass with drops."""
    query = keyed_fire(tmp_path)
    m = make(spark, tmp_path / "p", query, keys=24, tuples=3000)
    assert m["partition_fields"] == ["site", "sensor"] and m["expected"]["mode"] == "partitioned"
    tuples = table(tmp_path / "p", layout.TUPLES)
    sites, sensors = tuples.column("site").to_pylist(), tuples.column("sensor").to_pylist()
    pairs = set(zip(sites, sensors, strict=True))
    assert len(pairs) == 24 and len({s for s, _ in pairs}) > 1 and len({t for _, t in pairs}) > 1
    rows, summary = run_match(tmp_path, query, tmp_path / "p")
    assert rows and all("," in p for _, _, p in rows)
    assert_expected_is(spark, tmp_path / "p", rows)
    engine = EngineParams(store="table", partitions=8, ways=2)
    m = make(spark, tmp_path / "t", query, keys=24, tuples=3000, engine=engine)
    assert m["expected"]["mode"] == "global"
    (tmp_path / "u").mkdir()
    args = ("--store", "table", "--partitions", "8", "--ways", "2")
    rows, summary = run_match(tmp_path / "u", query, tmp_path / "t", *args)
    assert_expected_is(spark, tmp_path / "t", rows)
    drops = table(tmp_path / "t", layout.DROPS)
    assert summary["drops"] > 0 and drops.column("seq").to_pylist() == summary["drop_seqs"]


def test_capacity_alone_selects_the_global_pass(spark, tmp_path):
    m = make(
        spark,
        tmp_path / "v",
        QUERIES / "marathon.sql",
        keys=40,
        engine=EngineParams(partitions=32),
        tuples=3000,
    )
    assert m["expected"]["mode"] == "global"
    assert m["expected"]["reason"].startswith("capacity matters: 40 keys present")
    rows, summary = run_match(
        tmp_path,
        QUERIES / "marathon.sql",
        tmp_path / "v",
        "--store",
        "pipeline",
        "--partitions",
        "32",
    )
    assert_expected_is(spark, tmp_path / "v", rows)
    assert m["counts"]["drops"] == summary["drops"] > 0


@pytest.mark.parametrize(
    ("entries", "mode", "reason"),
    [
        (16, "global", "capacity matters: a bucket of the table holds 4 keys and 40 are generated"),
        (
            65536,
            "partitioned",
            "--store table with 65536 entries indexes every 16-bit key directly",
        ),
    ],
)
def test_table_store_vectors(spark, tmp_path, entries, mode, reason):
    """--store table: marathon's 16-bit runner keys go to buckets of 4 below 64k entries (the
    exact global pass, where 40 keys fill 4 buckets), and are indexed directly at 64k (no drop:
    each key on its own)."""
    engine = EngineParams(store="table", partitions=entries, ways=4)
    m = make(spark, tmp_path / "v", QUERIES / "marathon.sql", keys=40, engine=engine, tuples=2000)
    assert m["expected"]["mode"] == mode and m["expected"]["reason"].startswith(reason)
    assert m["engine"]["store"] == "table"
    rows, summary = run_match(
        tmp_path,
        QUERIES / "marathon.sql",
        tmp_path / "v",
        "--store",
        "table",
        "--partitions",
        str(entries),
    )
    assert_expected_is(spark, tmp_path / "v", rows)
    assert m["counts"]["drops"] == summary["drops"]
    assert (summary["drops"] > 0) == (mode == "global")


# --- where matches begin: start_seq --------------------------------------------------------


#: the fire query's measures: where it begins, and one of every other kind
MEASURES = ("start_seq", "t0", "co", "end_seq", "n", "k")


def start_seq_query(folder) -> pathlib.Path:
    """fire.sql with its fire query asking for start_seq (concise form) and measures of
    every kind (:data:`MEASURES`); thaw has none."""
    text = pathlib.Path(FIRE).read_text()
    head = "QUERY fire FROM warehouse\nPARTITION sensor\nORDER BY ts\n"
    assert head in text
    path = pathlib.Path(folder) / "fire_start.sql"
    measures = (
        "MEASURES FIRST(seq) AS start_seq, FIRST(temp) AS t0, LAST(co_ppm) AS co, "
        "LAST(seq) AS end_seq, COUNT(*) AS n, MATCH_NUMBER() AS k\n"
    )
    path.write_text(text.replace(head, head + measures))
    return path


def match_rows_with_starts(tmp_path, query, vectors_dir, *args):
    """`nfacep match` on the vectors' tuples: (seq, query, partition, start_seq, then the
    text of each measure) rows."""
    run_match(tmp_path, query, vectors_dir, *args)
    with open(tmp_path / "matches.csv", newline="") as f:
        return [
            (
                int(r["seq"]),
                r["query"],
                r["partition"] or None,
                int(r["start_seq"]) if r["start_seq"] else None,
                *(r[name] for name in MEASURES),
            )
            for r in csv.DictReader(f)
        ]


@pytest.mark.parametrize(("keys", "mode"), [(16, "partitioned"), (24, "global")])
def test_start_seq_column_equals_nfacep_match(spark, tmp_path, keys, mode):
    """A query with MEASURES FIRST(seq) AS start_seq: expected.parquet gets a nullable int64
    start_seq column, the global seq where each match begins (null for thaw, which does not ask
    for it), and a text column per measure (empty for thaw), equal to `nfacep match`'s, in the
    partitioned pass (3 tasks, whose positions are mapped back to the global seq) and in the
    global one (24 keys fill 16 partitions)."""
    query = start_seq_query(tmp_path)
    out = tmp_path / "v"
    m = make(spark, out, query, tasks=3, engine=EngineParams(partitions=16), keys=keys, tuples=3000)
    assert m["expected"]["mode"] == mode
    assert [(q["name"], q["start_seq"]) for q in m["queries"]] == [("fire", True), ("thaw", False)]
    expected = table(out, layout.EXPECTED)
    assert expected.schema.names == [
        "seq",
        "query",
        "partition",
        layout.START_SEQ,
        *(layout.MEASURE + name for name in MEASURES),
    ]
    assert expected.schema.field(layout.START_SEQ).type == pa.int64()
    assert expected.schema.field(layout.START_SEQ).nullable
    rows = [tuple(r.values()) for r in expected.to_pylist()]
    assert rows == match_rows_with_starts(
        tmp_path, query, out, "--store", "pipeline", "--partitions", "16"
    )
    fire = [r for r in rows if r[1] == "fire"]
    assert fire and all(r[3] is not None and r[3] < r[0] for r in fire)
    assert all(r[3] is None for r in rows if r[1] == "thaw") and len(fire) < len(rows)
    # some fire run begins hundreds of tuples back: a local position would differ
    assert max(r[0] - r[3] for r in fire) > 50
    if mode == "global":
        assert m["counts"]["drops"] > 0


@pytest.mark.parametrize(
    ("mode", "engine"),
    [
        ("global", EngineParams(partitions=16, tick_tuples=40, timer_bits=2)),
        ("partitioned", EngineParams(partitions=64)),  # room for every key, no ticks: per key
    ],
)
def test_passes_in_small_pieces_equal_the_reference(spark, tmp_path, mode, engine):
    """Both passes stream their tuples through the reference matcher in pieces: the global
    one (capacity and ticks matter) the whole stream, the partitioned one each task's keys,
    sorted by seq. In pieces of 37 tuples, with starts that lie pieces back, their matches,
    starts and drops are those of nfacep.reference.matcher.run over the whole stream read back."""
    from nfacep.io.convert import from_table
    from nfacep.measures import Measurer
    from nfacep.reference import matcher as reference
    from nfacep.result import partition_texts

    query = start_seq_query(tmp_path)
    job = vectors_plan.prepare(
        str(query),
        Options(**{**SMALL, "tuples": 3000}, seed=7, keys=24),
        str(tmp_path / "v"),
        params=engine,
    )
    piece = 37
    m = vectors.run(spark, job, tasks=2, piece_tuples=piece)
    assert m["expected"]["mode"] == mode
    assert (m["counts"]["drops"] > 0) == (mode == "global")
    tuples = from_table(table(tmp_path / "v", layout.TUPLES).sort_by("seq"), job.nfa.program.schema)
    res = reference.run(job.nfa, tuples, engine)
    cells = Measurer(job.nfa.program).cells(res, tuples)  # the whole stream at once
    want = [
        (int(s), res.names[q], p, int(b) if b >= 0 else None, *values)
        for s, q, p, b, *values in zip(
            res.seqs, res.queries, res.partitions, res.starts, *cells, strict=True
        )
    ]
    assert [tuple(r.values()) for r in table(tmp_path / "v", layout.EXPECTED).to_pylist()] == want
    assert table(tmp_path / "v", layout.DROPS).to_pylist() == [
        {"seq": int(s), "partition": p}
        for s, p in zip(res.drops, partition_texts(job.nfa, tuples, res.drops), strict=True)
    ]
    fire = [(s, b) for s, q, _, b, *_ in want if q == "fire"]
    if mode == "global":
        assert any(s // piece > b // piece for s, b in fire)
    else:  # more than a piece back even counting only its task's tuples
        assert max(s - b for s, b in fire) > 2 * 2 * piece
    assert m["keys_present"] == 24


# --- every bundled query ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.stem for p in QUERIES.glob("*.sql")))
def test_every_bundled_query_gets_matches(spark, tmp_path, name):
    m = make(spark, tmp_path / "v", QUERIES / f"{name}.sql", tuples=4000, keys=16)
    # only a window too long for the stream may go unplanted (its edges, not the query)
    windows = {
        q.name: q.window for q in nfacep.compile_file(QUERIES / f"{name}.sql").program.queries
    }
    for q, why in m["unplanted"].items():
        assert windows[q] and windows[q] + 1 > 4000, (q, why)
        assert why.startswith("no window_fit or window_miss instances: WITHIN"), (q, why)
    for q in m["queries"]:
        assert m["counts"]["matches"][q["name"]] > 0, q
        assert sum(m["planted"][q["name"]].values()) > 0, q
    # every predicate is satisfied by some background tuples, and not by all
    assert all(0 < rate < 1 for rate in m["predicate_rates"].values()), m["predicate_rates"]


# --- time windows: planted instances that just fit and just miss ------------------------------

WINDOWED = """CREATE STREAM s (k UINT(16), e ENUM('A','B'), ts UINT(32));
QUERY q PARTITION k ORDER BY ts PATTERN (A B) WITHIN 50 DEFINE A AS e = 'A', B AS e = 'B';
"""


def ab_matches(rows, window):
    """(A B) WITHIN window, recomputed in plain Python: a match at each B whose partition's
    previous tuple is an A less than ``window`` before it."""
    last, out = {}, []
    for r in sorted(rows, key=lambda r: r["seq"]):
        prev = last.get(r["k"])
        if r["e"] == "B" and prev and prev["e"] == "A" and r["ts"] - prev["ts"] < window:
            out.append((r["seq"], "q", str(r["k"])))
        last[r["k"]] = r
    return out


def test_window_edges_are_planted(spark, tmp_path):
    """A query with WITHIN 50: the ORDER BY field counts one per tuple, and the vectors plant
    instances whose first and last tuples are 49 apart (window_fit: the expected matches
    report its end) and 50 apart (window_miss: they do not), with nothing of their key in
    between; the expected matches are what plain Python and `nfacep match` compute."""
    query = tmp_path / "w.sql"
    query.write_text(WINDOWED)
    folder = tmp_path / "v"
    m = make(spark, folder, query)
    assert m["unplanted"] == {}
    assert m["planted"]["q"]["window_fit"] > 0 and m["planted"]["q"]["window_miss"] > 0
    assert next(g for g in m["generators"] if g["field"] == "ts")["step"] == 1
    rows = table(folder, layout.TUPLES).to_pylist()
    assert all(r["ts"] == r["seq"] for r in rows)  # one unit per tuple, from 0
    want = ab_matches(rows, 50)
    assert_expected_is(spark, folder, want)
    matched, summary = run_match(tmp_path, query, folder)
    assert matched == want and summary["matches"] == m["counts"]["matches"] == {"q": len(want)}

    gen = vectors_plan.prepare(
        str(query), Options(**SMALL, seed=7, keys=24), str(tmp_path / "x")
    ).generator
    planted = [p for b in range(gen.n_blocks) for p in gen.planted(b)]
    by_seq = {r["seq"]: r for r in rows}
    got = set(want)
    seen = {}
    for p in planted:
        if p.kind not in WINDOW_KINDS:
            continue
        first, last = by_seq[p.first], by_seq[p.seq]
        assert str(first["k"]) == str(last["k"]) == p.partition
        # the instance: A then B, nothing of its key between them
        between = [r for r in rows[p.first + 1 : p.seq] if r["k"] == first["k"]]
        assert (first["e"], last["e"], between) == ("A", "B", [])
        span = last["ts"] - first["ts"]
        assert span == (49 if p.kind == "window_fit" else 50), p
        assert ((p.seq, "q", p.partition) in got) == (p.kind == "window_fit"), p
        seen[p.kind] = seen.get(p.kind, 0) + 1
    assert seen == {k: m["planted"]["q"][k] for k in WINDOW_KINDS}
    # one unit wider, the misses would match: the edge is exactly the window
    wider = set(ab_matches(rows, 51))
    assert all((p.seq, "q", p.partition) in wider for p in planted if p.kind == "window_miss")


@pytest.mark.parametrize(
    ("text", "options", "why"),
    [
        (WINDOWED, {"keys": 1}, "one sub-stream (no PARTITION, or --keys 1)"),
        (
            WINDOWED,
            {"keys": 8, "tuples": 50},
            "WITHIN 50: an instance spans up to 51 consecutive "
            "tuples, more than the stream holds (50)",
        ),
        (
            WINDOWED.replace("50", "1024"),
            {"keys": 8},
            "WITHIN 1024: an instance spans up to 1025 consecutive tuples, more than a block "
            "(--block-tuples 1024) holds (1024)",
        ),
        (
            WINDOWED.replace("UINT(32)", "UINT(8)"),
            {"keys": 8},
            "the ORDER BY field ts UINT(8) cannot give each of the 6000 tuples its own value",
        ),
        (
            WINDOWED.replace("(A B) WITHIN 50", "(A B*) WITHIN 1"),
            {"keys": 8},
            "WITHIN 1 only holds runs of one tuple",
        ),
    ],
)
def test_window_edges_that_cannot_be_planted_say_why(tmp_path, text, options, why):
    """Without Spark: the generator records why a window's edges are not planted, in
    ``unplanted`` (the manifest's), and plants the other kinds."""
    (tmp_path / "w.sql").write_text(text)
    gen = Generator(nfacep.compile_file(tmp_path / "w.sql"), Options(**{**SMALL, **options}))
    assert gen.unplanted["q"].startswith(f"no window_fit or window_miss instances: {why}")
    kinds = {p.kind for b in range(gen.n_blocks) for p in gen.planted(b)}
    assert kinds and kinds <= set(KINDS)


def test_a_prev_query_that_cannot_be_planted_says_so():
    """Without Spark: a query reading PREV whose pattern no tuples can match (a value above and
    below the one before it) is generated unplanted, saying why, as any other query is (it
    stopped ``vectors`` with a ValueError: the PREV templates' shared draw is kept among the
    variables' pools under a key of its own)."""
    text = """CREATE STREAM s (k UINT(16), v UINT(8), ts UINT(32));
QUERY q PARTITION k ORDER BY ts PATTERN (A B)
DEFINE A AS v > 3, B AS v > PREV(v) AND v < PREV(v);
"""
    gen = Generator(nfacep.compile_text(text, "p.sql"), Options(**SMALL, keys=8))
    assert gen.unplanted == {
        "q": "nothing planted: no sequence of generated tuples drawn from its pattern matched"
    }
    assert gen.block(0)["v"].size > 0


def test_window_edges_of_a_longer_pattern():
    """Without Spark: fit and miss instances of (A B+ C) and (A .* C) on a window of 7, checked
    against the reference matcher over the whole stream (every-end queries: a fit ends in a
    match, a miss does not, nor does anything else of its key end there)."""
    text = """CREATE STREAM s (k UINT(16), e ENUM('A','B','C'), v UINT(8), ts UINT(32));
QUERY q PARTITION k ORDER BY ts PATTERN (A B+ C) WITHIN 7
DEFINE A AS e = 'A', B AS v > 100, C AS e = 'C';
QUERY r PARTITION k ORDER BY ts PATTERN (A .* C) WITHIN 7 DEFINE A AS e = 'A', C AS e = 'C';
"""
    nfa = nfacep.compile_text(text, "w.sql")
    gen = Generator(nfa, Options(**SMALL, seed=3, keys=6))
    assert gen.unplanted == {}
    planted, cols = _planted_against_reference(nfa, gen)
    edges = [p for p in planted if p.kind in WINDOW_KINDS]
    assert {(p.query, p.kind) for p in edges} == {(q, k) for q in "qr" for k in WINDOW_KINDS}
    for p in edges:
        span = int(cols["ts"][p.seq] - cols["ts"][p.first])
        assert span == (6 if p.kind == "window_fit" else 7), p


def _planted_against_reference(nfa, gen):
    """The generator's planted instances, each checked against the reference matcher over the
    whole stream (a planted instance ends in a match of its query and key, a window_miss does
    not), and the stream's columns."""
    import numpy as np

    from nfacep.io.tuples import Tuples
    from nfacep.reference import matcher as reference

    blocks = [gen.block(b) for b in range(gen.n_blocks)]
    cols = {k: np.concatenate([b[k] for b in blocks]) for k in blocks[0] if k != "seq"}
    n = sum(len(b["seq"]) for b in blocks)
    res = reference.run(nfa, Tuples(gen.typed(cols, key_rank=False), n), EngineParams())
    got = {  # (several key fields: the planted instance's key is their values with commas)
        (int(s), res.names[q], ",".join(p) if isinstance(p, tuple) else p)
        for s, q, p in zip(res.seqs, res.queries, res.partitions, strict=True)
    }
    planted = [p for b in range(gen.n_blocks) for p in gen.planted(b)]
    for p in planted:
        assert ((p.seq, p.query, p.partition) in got) == (p.kind != "window_miss"), p
    return planted, cols


def test_a_query_reading_its_key_and_prev_is_planted_at_its_windows_edges():
    """Without Spark: a query whose conditions read its partition fields (an address in a
    network, a port) and PREV, in a window: its templates are built for a key whose tuples
    satisfy them, and planted on that key, at the window's edges too (PREV's lead-in tuples
    just before the first). Before, the templates were checked with every key field 0, so
    such a query was never planted (``vectors`` wrote 0 expected matches and said "nothing
    planted"), and a PREV query's window edges never held (the lead-in tuple was taken for
    the first)."""
    text = """CREATE STREAM s (ts UINT(32), src IPV4, dport UINT(16), v UINT(8));
SELECT * FROM s MATCH_RECOGNIZE (
  PARTITION BY src, dport ORDER BY ts
  PATTERN (A B+) WITHIN 40
  DEFINE A AS src IN '10.0.0.0/8' AND dport < 1024, B AS v > PREV(v)
) AS q;
"""
    nfa = nfacep.compile_text(text, "k.sql")
    gen = Generator(nfa, Options(**SMALL, seed=5, keys=200))
    assert gen.unplanted == {}
    planted, _ = _planted_against_reference(nfa, gen)
    kinds = {p.kind for p in planted}
    assert {"short", *WINDOW_KINDS} <= kinds, kinds
    assert all(p.partition.startswith("10.") for p in planted), planted


@pytest.mark.parametrize("key", ["src", "src, c"])
def test_keys_include_what_the_predicates_compare_them_with(key):
    """Without Spark: a predicate on a partition key field (an address in a /31): the keys
    take the network's addresses and their neighbours, so that tuples of the stream satisfy
    it, with one key field or several (the keys were 1, 2, 3, …: no tuple did)."""
    import ipaddress

    import numpy as np

    text = f"""CREATE STREAM s (src IPV4, c ENUM('a', 'b'), v UINT(8));
QUERY q PARTITION {key} PATTERN (A B) DEFINE A AS src IN '10.0.0.0/31', B AS v > 100;
"""
    nfa = nfacep.compile_text(text, "k.sql")
    gen = Generator(nfa, Options(**SMALL, keys=40))
    blocks = [gen.block(b) for b in range(gen.n_blocks)]
    cols = {k: np.concatenate([b[k] for b in blocks]) for k in blocks[0] if k != "seq"}
    src = gen.typed(cols, key_rank=False)["src"]
    inside = [int(ipaddress.IPv4Address(a)) for a in ("10.0.0.0", "10.0.0.1")]
    assert set(inside) | {inside[0] - 1, inside[1] + 1} <= set(src.tolist())
    assert np.isin(src, inside).any()
    assert len(set(src.tolist())) > 4  # (and other keys beside them)


# --- manifest ---------------------------------------------------------------------------------


def test_manifest(spark, fire):
    folder, m = fire[2]
    assert json.loads((folder / layout.MANIFEST).read_text()) == m
    assert m["format"] == layout.FORMAT
    assert m["query_sha256"] == hashlib.sha256(pathlib.Path(FIRE).read_bytes()).hexdigest()
    assert (m["seed"], m["tuples"], m["keys"], m["block_tuples"]) == (7, 6000, 24, 1024)
    assert (
        m["keys_present"]
        == read(spark, folder, layout.TUPLES).select("sensor").distinct().count()
        == 24
    )
    assert m["engine"] == {
        "partitions": 256,
        "tick_tuples": 0,
        "timer_bits": 4,
        "store": "pipeline",
        "ways": 4,
    }
    assert m["expected"]["mode"] == "partitioned"
    assert m["stream"] == "warehouse" and m["partition_fields"] == ["sensor"]
    assert m["order_fields"] == ["ts"]
    assert m["columns"] == {
        "seq": "int64",
        "ts": "int64",
        "sensor": "int64",
        "zone": "string",
        "temp": "int64",
        "smoke": "bool",
        "co_ppm": "float",
    }
    assert [(q["name"], q["start_seq"]) for q in m["queries"]] == [("fire", False), ("thaw", False)]
    expected = table(folder, layout.EXPECTED)
    # no query reports start_seq: the columns are those of vectors made before it existed
    assert expected.schema.names == ["seq", "query", "partition"]
    per_query = {}
    for q in expected.column("query").to_pylist():
        per_query[q] = per_query.get(q, 0) + 1
    assert m["counts"] == {
        "tuples": 6000,
        "matches": per_query,
        "matches_total": expected.num_rows,
        "drops": 0,
    }
    assert table(folder, layout.TUPLES).num_rows == 6000
    roles = {g["field"]: g["generator"] for g in m["generators"]}
    assert roles == {
        "ts": "order",
        "sensor": "key",
        "zone": "enum",
        "temp": "int",
        "smoke": "bool",
        "co_ppm": "float",
    }
    temp = next(g for g in m["generators"] if g["field"] == "temp")
    assert {599, 600, 601, -151, -150, -149, -51, -50, -49, 399, 400, 401} <= set(temp["points"])
    assert set(m["run"]) == {"master", "tasks", "seconds"} and m["run"]["master"] == MASTER


# --- an unpartitioned query, through the command line -----------------------------------------

UNPARTITIONED = """CREATE STREAM s (ts UINT(32), a UINT(8), b BOOL);
QUERY up PATTERN (X Y+ Z) DEFINE X AS a < 10 Y AS b Z AS a > 200;
QUERY ev PATTERN (X .* X) DEFINE X AS a = 100;
"""


def test_unpartitioned_query_from_the_command_line(spark, tmp_path, capsys):
    q = tmp_path / "u.sql"
    q.write_text(UNPARTITIONED)
    out = tmp_path / "v"
    args = [
        "vectors",
        str(q),
        "--tuples",
        "3000",
        "--seed",
        "1",
        "--out",
        str(out),
        "--master",
        MASTER,
        "--block-tuples",
        "1024",
    ]
    assert nfacep_main(args) == 0
    assert "3000 tuples" in capsys.readouterr().out
    m = json.loads((out / layout.MANIFEST).read_text())
    assert m["expected"]["mode"] == "global" and "no PARTITION" in m["expected"]["reason"]
    assert m["keys"] == 1 and m["partition_fields"] == []
    assert all(m["counts"]["matches"][n] > 0 for n in ("up", "ev"))
    rows, _ = run_match(tmp_path, q, out)
    assert_expected_is(spark, out, rows)
    assert all(p is None for _, _, p in rows)
    # --overwrite replaces earlier vectors, here with another seed
    assert nfacep_main(args) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert nfacep_main([*args, "--seed", "2", "--overwrite"]) == 0
    assert json.loads((out / layout.MANIFEST).read_text())["seed"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "matches.csv",
        "matches.summary.json",
        "tuples.parquet",
        "u.sql",
        "v",
    ]


def test_failed_run_leaves_nothing(spark, tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(vectors, "_manifest", boom)
    with pytest.raises(RuntimeError, match="boom"):
        make(spark, tmp_path / "v", tuples=500)
    assert list(tmp_path.iterdir()) == []


# --- bad input: clear errors before any Spark job ---------------------------------------------


@pytest.fixture
def no_spark(monkeypatch):
    """Fail if anything tries to build a Spark session."""

    def refuse(*args, **kwargs):
        raise AssertionError("a Spark session was requested")

    monkeypatch.setattr(spark_session, "session", refuse)


@pytest.mark.parametrize(
    "master, message",
    [
        ("local[0]", "is not a Spark master URL"),
        ("locall", "is not a Spark master URL"),
        ("mesos://host:5050", "is not a Spark master URL"),
        ("spark://", "is not a Spark master URL"),
        ("spark://127.0.0.1:1", "no Spark master answers"),
    ],
)
def test_bad_master_url(tmp_path, capsys, no_spark, master, message):
    args = ["vectors", FIRE, "--tuples", "10", "--out", str(tmp_path / "v"), "--master", master]
    assert nfacep_main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("nfacep: --master") and message in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_bad_input(tmp_path, capsys, no_spark):
    def fails(*args):
        assert nfacep_main(["vectors", *args]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return err

    v = str(tmp_path / "v")
    assert "cannot read the query file" in fails(
        str(tmp_path / "none.sql"), "--tuples", "10", "--out", v
    )
    assert "does not exist" in fails(FIRE, "--tuples", "10", "--out", str(tmp_path / "no" / "v"))
    assert "--tuples must be at least 1" in fails(FIRE, "--tuples", "0", "--out", v)
    assert "has only 65536 distinct values" in fails(
        FIRE, "--tuples", "10", "--keys", "70000", "--out", v
    )
    assert "only a global pass models" in fails(
        FIRE,
        "--tuples",
        "10",
        "--keys",
        "300",
        "--expected",
        "partitioned",
        "--out",
        v,
        "--store",
        "pipeline",
    )
    assert "not an ENUM field" in fails(
        FIRE, "--tuples", "10", "--enum-weights", "temp=1:1", "--out", v
    )
    assert "--partitions must be at least 1" in fails(
        FIRE, "--tuples", "10", "--partitions", "0", "--out", v
    )
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE STREAM s (a UINT(4));\nQUERY q PATTERN (A) DEFINE A AS a = 20;\n")
    assert f"{bad}:2:" in fails(str(bad), "--tuples", "10", "--out", v)
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine\n")
    assert "--overwrite only replaces a vectors folder" in fails(
        FIRE, "--tuples", "10", "--out", str(other), "--overwrite"
    )
    assert (other / "keep.txt").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sql", "other"]


def test_enum_weights_are_honoured(spark, tmp_path):
    m = make(
        spark,
        tmp_path / "v",
        tuples=2000,
        plant_rate=0.0,
        enum_weights=(("zone", (("DOCK", 1.0), ("FREEZER", 3.0))),),
    )
    zones = set(table(tmp_path / "v", layout.TUPLES).column("zone").to_pylist())
    assert zones == {"DOCK", "FREEZER"}
    assert m["enum_weights"] == {"zone": {"DOCK": 1.0, "FREEZER": 3.0}}


def test_progress_lines_count_tuples_and_end_at_the_total(spark, tmp_path, capsys, monkeypatch):
    """`vectors` reports tuples generated and matched on stderr, with a rate once something is
    counted, and ends each phase at the total (a line due as each phase ends, on a fake clock:
    tests/progress_clock.py)."""
    import re

    from progress_clock import line_at_each_phase_end

    line_at_each_phase_end(monkeypatch, vectors)
    assert (
        nfacep_main(
            [
                "vectors",
                FIRE,
                "--tuples",
                "6000",
                "--block-tuples",
                "1024",
                "--keys",
                "24",
                "--seed",
                "3",
                "--tasks",
                "2",
                "--out",
                str(tmp_path / "v"),
                "--master",
                MASTER,
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    counted = re.compile(r"vectors: ([\d,]+) of 6,000 tuples (generated|matched) \((\d+)%\)")
    for verb in ("generated", "matched"):
        lines = [ln for ln in err.splitlines() if f"tuples {verb}" in ln]
        assert len(lines) >= 2, err  # at least one line before the last
        done = [int(counted.match(ln).group(1).replace(",", "")) for ln in lines]
        assert done == sorted(done) and done[-1] == 6000, lines
        for ln, n in zip(lines, done, strict=True):
            assert ("tuples/s" in ln) == (n > 0), ln
        assert re.fullmatch(
            rf"vectors: 6,000 of 6,000 tuples {verb} \(100%\) in \d+ s, "
            r"[\d,]+ tuples/s",
            lines[-1],
        ), lines[-1]
        assert all(" of 2 tasks done" in ln for ln in lines[:-1]), lines


def test_a_running_task_shows_its_progress_before_it_ends(spark, tmp_path):
    """Through real Spark workers: a task reports 400 tuples and then waits for a file that
    the driver writes only once its progress line shows them; the task sees the file, so the
    line moved while it ran (Spark's accumulators alone would move at its end)."""
    import os
    import threading
    import time

    from spark_testbench.progress import Progress

    flag = str(tmp_path / "seen")
    got: list = []
    with Progress(spark, "vectors", lambda _: None, every=0.05) as watch:
        counter = watch.phase("matched", total=1000, tasks=1)

        def task(_):
            counter.add(400)
            deadline = time.monotonic() + 60
            while not os.path.exists(flag) and time.monotonic() < deadline:
                time.sleep(0.02)
            counter.add(600)
            counter.finished()
            return os.path.exists(flag)

        job = threading.Thread(
            target=lambda: got.extend(spark.sparkContext.parallelize([0], 1).map(task).collect())
        )
        job.start()
        deadline = time.monotonic() + 60
        while "400 of 1,000" not in (watch.now() or "") and time.monotonic() < deadline:
            time.sleep(0.02)
        seen = watch.now()
        pathlib.Path(flag).touch()
        job.join(120)
        assert seen.startswith("vectors: 400 of 1,000 tuples matched (40%), 0 of 1 tasks done")
        assert got == [True]
        assert watch.now().startswith("vectors: 1,000 of 1,000 tuples matched")


# --- IPV4 and TIMESTAMP fields ----------------------------------------------------------------

TYPED = """\
CREATE STREAM flows (src IPV4, dst IPV4, ts TIMESTAMP(MILLISECOND), bytes UINT(16));
SELECT * FROM flows MATCH_RECOGNIZE (
    PARTITION BY src
    ORDER BY ts
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B+) WITHIN INTERVAL '5' SECOND
    DEFINE A AS dst IN '10.0.0.0/8' AND ts >= TIMESTAMP '2024-01-01 00:00:00',
           B AS dst NOT IN '10.0.0.0/8' AND dst <> src
) AS leak;
"""


def test_ipv4_and_timestamp_vectors_equal_nfacep_match(spark, tmp_path):
    """Vectors of a query over IPV4 and TIMESTAMP fields: their generated values reach the
    network and the TIMESTAMP constant, and the expected matches are `nfacep match`'s, the
    partition written as a dotted quad."""
    query = tmp_path / "typed.sql"
    query.write_text(TYPED)
    manifest = make(spark, tmp_path / "v", query, keys=8)
    rows, summary = run_match(tmp_path, query, tmp_path / "v")
    assert_expected_is(spark, tmp_path / "v", rows)
    assert manifest["counts"]["matches"] == summary["matches"]
    assert summary["matches"]["leak"] > 0
    assert all(re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", p) for _, _, p in rows)
