"""A stream matched in pieces reports what one pass over it reports (issue 15: 10^8 tuples in
bounded memory).

:class:`nfacep.reference.matcher.Matcher` carries, from one piece to the next, only what the engine
keeps: each key's last admitted tuple (the partition store) and each partition's automaton
state (a DFA state renumbered for the next piece's DFA, the NFA's active states, the latest
start of each state and its ORDER BY value). Here pieces cut at random places are compared
with one pass of the array operations (which never carry a state), and ``nfacep match
--chunk N`` with the independent oracle and with a run in one piece.
"""

from __future__ import annotations

import filecmp
import itertools
import json
import pathlib
from unittest import mock

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import Query, render_query
from strategies import queries, scenarios, streams
from test_oracle_differential import (
    FIELDS,
    PARAM_DRAW,
    PARAM_PREDICATES,
    PARAM_STREAM,
    capacity_and_timers,
    check_against_oracle,
    cli_settings,
    timed,
    windowed,
)

import nfacep
import nfacep.backend
from nfacep.cli import main
from nfacep.io import csvblocks
from nfacep.io.tuples import Tuples
from nfacep.params import EngineParams
from nfacep.reference import loops
from nfacep.reference import matcher as reference
from nfacep.settings import ParamValues

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUERIES = ROOT / "queries"


def columns_of(rows, nfa) -> dict[str, np.ndarray]:
    """The stream's columns as the tuple reader gives them, from the oracle's rows."""
    cols = {}
    for f in nfa.program.schema.fields:
        ty = type(f.type).__name__
        values = [r[f.name] for r in rows]
        if ty == "EnumType":
            cols[f.name] = np.array([f.type.labels.index(v) for v in values], dtype=np.int64)
        else:
            dtype = {"BoolType": bool, "UIntType": np.uint64, "IntType": np.int64}[ty]
            cols[f.name] = np.array(values, dtype=dtype)
    return cols


def in_pieces(nfa, columns, n, cuts, params=EngineParams(), values=None, engine="auto"):
    """The matches and drops of the stream fed to one Matcher in the pieces ``cuts`` makes."""
    m = reference.Matcher(nfa, params, values=values, engine=engine)
    bounds = [0, *sorted(set(cuts)), n]
    matches, drops = [], []
    for a, b in itertools.pairwise(bounds):
        if a == b:
            continue
        piece = Tuples({f: c[a:b] for f, c in columns.items()}, b - a)
        r = m.feed(piece, last=b == n)
        assert r.n == b - a
        matches += r.matches
        drops += r.drop_seqs
    assert m.n == n
    return matches, drops


def dfa_pieces(arrays: bool):
    """A DFA's pieces matched in array operations (the default before the compiled loop has
    run in the process, on a short stream), or in the compiled loop (once it has)."""
    return mock.patch.object(reference, "ready", lambda name: not arrays)


def one_pass(nfa, columns, n, params=EngineParams(), values=None):
    r = reference.run(nfa, Tuples(columns, n), params, compiled=False, values=values)
    return r.matches, r.drop_seqs


def hardware(data, partitioned: bool) -> EngineParams:
    """The pipeline with capacity and timers, or the table hashed into small buckets."""
    (partitions, tick, bits), _ = capacity_and_timers(data, partitioned)
    if partitioned and data.draw(st.booleans(), label="table"):
        return EngineParams(
            store="table",
            partitions=4,
            ways=data.draw(st.sampled_from([1, 2])),
            tick_tuples=tick,
            timer_bits=bits,
        )
    return EngineParams(partitions=partitions, tick_tuples=tick, timer_bits=bits)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(partitioned=st.booleans(), data=st.data())
def test_pieces_equal_one_pass(partitioned, data):
    """Random queries (windows, start_seq, both AFTER MATCH modes), random streams, capacity,
    timers and both stores, cut into random pieces: the same matches, starts and drops as one
    pass."""
    if data.draw(st.booleans(), label="windows"):
        _, text, ty = data.draw(windowed(partitioned, starts=True), label="queries")
        rows = data.draw(timed(data.draw(streams(max_len=60, keys=6)), ty), label="rows")
    else:
        sc = data.draw(scenarios(partitioned), label="queries")
        text, ty = sc.text, "UINT(16)"
        rows = data.draw(streams(max_len=60, keys=6), label="rows")
    nfa = nfacep.compile_text(text)
    params = hardware(data, partitioned)
    cols = columns_of(rows, nfa)
    n = len(rows)
    cuts = data.draw(st.lists(st.integers(0, n), max_size=6), label="cuts")
    # the partitioner's model and the key codes by their compiled loops (long pieces), or by
    # numpy (short ones)
    compiled_helpers = data.draw(st.booleans(), label="compiled helpers")
    helpers = 0 if compiled_helpers else loops.LOOPS_FROM
    with (
        mock.patch.object(loops, "LOOPS_FROM", helpers),
        mock.patch.object(loops, "LOAD_FROM", helpers),
        mock.patch.object(loops, "ready", loops.ready if compiled_helpers else lambda name: False),
        dfa_pieces(data.draw(st.booleans(), label="DFA pieces in array operations")),
    ):
        got = in_pieces(nfa, cols, n, cuts, params)
    assert got == one_pass(nfa, cols, n, params), text


@settings(max_examples=60, deadline=None)
@given(partitioned=st.booleans(), data=st.data())
def test_pieces_with_parameter_switches(partitioned, data):
    """Runtime parameters switched at random tuples, which may fall in any piece."""
    parts = [PARAM_STREAM]
    for i in range(data.draw(st.integers(1, 2), label="queries")):
        q = data.draw(queries(f"q{i}"))
        defines = tuple((v, data.draw(st.sampled_from(PARAM_PREDICATES))) for v, _ in q.defines)
        parts.append(
            render_query(
                Query(q.name, q.pattern, defines, q.skip), "s", "k" if partitioned else None
            )
        )
    nfa = nfacep.compile_text("".join(parts))
    rows = data.draw(streams(max_len=50, keys=4), label="rows")
    rows = [
        dict(
            r,
            v=data.draw(st.integers(0, 9)),
            w=data.draw(st.integers(-6, 6)),
            e=data.draw(st.sampled_from(["x", "y", "z"])),
        )
        for r in rows
    ]
    texts = []
    for name in nfa.program.parameters:
        texts.append(f"{name}={data.draw(PARAM_DRAW[name], label=name)}")
        for at in data.draw(st.lists(st.integers(1, 60), max_size=3, unique=True), label="at"):
            texts.append(f"{name}={data.draw(PARAM_DRAW[name], label=name)}@{at}")
    values = ParamValues.parse(nfa.program.parameters, texts)
    cols = columns_of(rows, nfa)
    n = len(rows)
    cuts = data.draw(st.lists(st.integers(0, n), max_size=5), label="cuts")
    with dfa_pieces(data.draw(st.booleans(), label="DFA pieces in array operations")):
        got = in_pieces(nfa, cols, n, cuts, values=values)
    assert got == one_pass(nfa, cols, n, values=values)


def test_a_later_piece_brings_new_symbols_and_smaller_keys():
    """The first piece holds only some predicate vectors and keys 50..59; later ones bring
    the other vectors and keys below, between and above (the key codes are numbered by first
    appearance, the DFA of each piece by its own symbols)."""
    nfa = nfacep.compile_text(
        "CREATE STREAM s (k INT(16), a UINT(4));"
        "QUERY q PARTITION k PATTERN (A B+ C) DEFINE A AS a = 1 B AS a = 2 C AS a = 3;"
        "QUERY r PARTITION k AFTER MATCH SKIP PAST LAST ROW PATTERN (A C*) "
        "DEFINE A AS a < 2 C AS a > 2"
    )
    rng = np.random.default_rng(5)
    n = 3000
    k = rng.integers(-300, 300, n)
    k[:500] = rng.integers(50, 60, 500)
    a = rng.integers(0, 4, n).astype(np.uint64)
    a[:500] = rng.integers(1, 3, 500)  # no 0 or 3 in the first piece
    cols = {"k": k, "a": a}
    want = one_pass(nfa, cols, n)
    assert len(want[0]) > 100
    for engine, arrays in (("auto", False), ("auto", True), ("nfa", False)):
        with dfa_pieces(arrays):
            assert in_pieces(nfa, cols, n, [500, 501, 1700], engine=engine) == want


@pytest.mark.parametrize("arrays", [False, True])
def test_a_dfa_grown_too_large_hands_its_partitions_to_the_nfa(monkeypatch, arrays):
    """When a later piece's symbols make the DFA exceed its limit, the partitions carry on in
    the NFA from the states they stand in (the DFA's piece matched in array operations or in
    its compiled loop)."""
    nfa = nfacep.compile_text(
        "CREATE STREAM s (k UINT(4), a UINT(4));"
        "QUERY q PARTITION k PATTERN (A (B | C)* A D) "
        "DEFINE A AS a < 8 B AS a > 4 C AS a < 3 D AS a = 3"
    )
    rng = np.random.default_rng(2)
    n = 2000
    a = rng.integers(0, 16, n).astype(np.uint64)
    a[:700] = rng.choice([1, 3], 700)  # few symbols: a small DFA
    cols = {"k": rng.integers(0, 5, n).astype(np.uint64), "a": a}
    want = one_pass(nfa, cols, n)
    m = reference.Matcher(nfa)
    monkeypatch.setattr(reference, "ready", lambda name: not arrays)
    first = m.feed(Tuples({f: c[:700] for f, c in cols.items()}, 700))
    assert first.engines == {"q": "dfa"}
    monkeypatch.setattr(reference, "_MAX_DFA_STATES", len(m._queries[0].dfa.sets) + 1)
    rest = m.feed(Tuples({f: c[700:] for f, c in cols.items()}, n - 700), last=True)
    assert rest.engines == {"q": "nfa"}
    assert (first.matches + rest.matches, first.drop_seqs + rest.drop_seqs) == want
    assert len(want[0]) > 20


@pytest.mark.parametrize("key", ["", "PARTITION k"])
def test_long_runs_in_array_pieces(key):
    """A DFA's array operations over pieces with runs long enough to be cut into chunks (whose
    start states compose from the state the piece before left), one partition and two."""
    nfa = nfacep.compile_text(
        f"CREATE STREAM s (k UINT(2), a UINT(4)); QUERY q {key} PATTERN (A B* C) "
        "DEFINE A AS a = 1 B AS a > 1 C AS a = 3"
    )
    rng = np.random.default_rng(3)
    n = 40_000
    cols = {
        "k": rng.integers(0, 2, n).astype(np.uint64),
        "a": rng.choice([1, 2, 3, 4], n, p=[0.001, 0.5, 0.0005, 0.4985]).astype(np.uint64),
    }
    want = one_pass(nfa, cols, n)
    assert len(want[0]) > 10
    with dfa_pieces(True):
        assert in_pieces(nfa, cols, n, [13_000, 31_000]) == want


def test_a_dfa_in_pieces_without_numba(monkeypatch):
    """Without numba a DFA's pieces are matched in array operations; an NFA's need the loops."""
    monkeypatch.setattr(reference, "_loops", lambda: None)
    monkeypatch.setattr(loops, "loops", lambda n=None: None)
    rng = np.random.default_rng(4)
    n = 3000
    cols = {"k": rng.integers(0, 7, n).astype(np.uint64), "a": rng.integers(0, 4, n)}
    cols["a"] = cols["a"].astype(np.uint64)
    text = "CREATE STREAM s (k UINT(4), a UINT(4)); QUERY q PARTITION k {} PATTERN (A B+ C) "
    text += "DEFINE A AS a = 1 B AS a = 2 C AS a = 3"
    dfa = nfacep.compile_text(text.format(""))
    want = one_pass(dfa, cols, n)
    assert len(want[0]) > 20 and in_pieces(dfa, cols, n, [100, 2000]) == want
    nfa = nfacep.compile_text(text.format("MEASURES FIRST(seq) AS s"))
    with pytest.raises(RuntimeError, match="needs numba"):
        in_pieces(nfa, cols, n, [100, 2000])


def test_the_array_operations_take_one_piece_only():
    nfa = nfacep.compile_text("CREATE STREAM s (a UINT(4)); QUERY q PATTERN (A) DEFINE A AS a = 1")
    t = Tuples({"a": np.array([1, 2], dtype=np.uint64)}, 2)
    with pytest.raises(ValueError, match="whole stream as one piece"):
        reference.Matcher(nfa, compiled=False).feed(t)
    m = reference.Matcher(nfa, compiled=False)
    assert m.feed(t, last=True).matches == [(0, "q", None)]
    with pytest.raises(ValueError, match="one piece"):
        m.feed(t)


# --------------------------------------------------------------------------------------------
# nfacep match --chunk N


def match(tmp_path, name, query, data, *options) -> pathlib.Path:
    out = tmp_path / f"{name}.csv"
    assert main(["match", str(query), "--input", str(data), "--output", str(out), *options]) == 0
    return out


@pytest.mark.parametrize(
    "query, options",
    [
        ("marathon", ["--store", "pipeline", "--partitions", "3", "--tick-tuples", "5"]),
        (
            "marathon",
            [
                "--store",
                "table",
                "--partitions",
                "4",
                "--ways",
                "2",
                "--tick-tuples",
                "7",
                "--timer-bits",
                "2",
            ],
        ),
        ("bruteforce", []),
        ("fire", []),
        ("supplychain", ["--param", "big=20000", "--param", "big=100@50"]),
        ("vshape", []),
    ],
)
def test_match_in_chunks_writes_the_same_files(tmp_path, monkeypatch, query, options):
    """The bundled queries on their tuple files, one tuple (or two) at a time, or in pieces
    growing from one tuple to six (as the first pieces of a long file do), and from Parquet:
    the match file and the summary of one piece, byte for byte (the summary's input name
    aside)."""
    q, d = QUERIES / f"{query}.sql", QUERIES / f"{query}.csv"
    whole = match(tmp_path, "whole", q, d, *options)
    parquet = tmp_path / "t.parquet"
    import pyarrow.csv as pacsv

    pq.write_table(pacsv.read_csv(d), parquet)
    for chunk, first in (("1", 1), ("2", 2), ("6", 1)):
        monkeypatch.setattr(nfacep.backend, "FIRST_PIECE", first)
        for src in (d, parquet):
            got = match(tmp_path, f"c{chunk}{src.suffix}", q, src, "--chunk", chunk, *options)
            assert filecmp.cmp(whole, got, shallow=False), (chunk, src)
            a = json.loads(whole.with_suffix(".summary.json").read_text())
            b = json.loads(got.with_suffix(".summary.json").read_text())
            assert {**a, "input": None} == {**b, "input": None}
    # CSV blocks of a few lines, the pieces up to the default size: they end with the blocks
    # towards the end of the file (reader.read_stream), the last small and fed as the last
    monkeypatch.setattr(nfacep.backend, "FIRST_PIECE", 1 << 16)
    monkeypatch.setattr(csvblocks, "BLOCK", 1 << 9)
    fed, feed = [], reference.Matcher.feed

    def spied(self, tuples, *, last=False):
        fed.append((tuples.n, last))
        return feed(self, tuples, last=last)

    monkeypatch.setattr(reference.Matcher, "feed", spied)
    got = match(tmp_path, "ends", q, d, *options)
    assert filecmp.cmp(whole, got, shallow=False)
    assert whole.with_suffix(".summary.json").read_text() == got.with_suffix(
        ".summary.json"
    ).read_text().replace("ends.csv", "whole.csv")
    sizes = [n for n, _ in fed]
    assert len(fed) >= 3 and [last for _, last in fed] == [False] * (len(fed) - 1) + [True]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] * 4 <= sizes[0], sizes


@pytest.mark.slow
@cli_settings(60)
@given(partitioned=st.booleans(), chunk=st.integers(1, 7), data=st.data())
def test_match_in_chunks_against_the_oracle(tmp_path, partitioned, chunk, data):
    """``nfacep match --chunk N`` with random queries (windows, start_seq), capacity and
    timers: what the oracle reports."""
    qs, text, ty = data.draw(windowed(partitioned, starts=True), label="queries")
    rows = data.draw(timed(data.draw(streams(max_len=30, keys=4)), ty), label="rows")
    hw, options = capacity_and_timers(data, partitioned)
    check_against_oracle(
        tmp_path,
        qs,
        text,
        rows,
        partitioned,
        [*options, "--chunk", str(chunk)],
        hw,
        fields=(*FIELDS, "ts"),
    )


@pytest.mark.parametrize("block", [None, 64])
def test_an_error_in_a_later_chunk_writes_nothing(tmp_path, capsys, monkeypatch, block):
    """A bad value, or an ORDER BY that goes back across two chunks, after some chunks were
    matched: the error names the row and the column, no match file appears and one already
    there is kept as it was. ``block``: the CSV file cut into blocks of a few lines
    (``csvblocks.BLOCK`` bytes), parsed in threads ahead of the chunks matched, so that the
    bad row's block is parsed while the chunks before it are matched."""
    if block is not None:
        monkeypatch.setattr(csvblocks, "BLOCK", block)
    q = tmp_path / "q.sql"
    q.write_text(
        "CREATE STREAM s (k UINT(8), t UINT(16), a UINT(4));"
        "QUERY q PARTITION k ORDER BY t PATTERN (A B) WITHIN 5 "
        "DEFINE A AS a = 1 B AS a = 2"
    )
    rows = [(i % 3, i, 1 + i % 2) for i in range(40)]
    for name, bad in (("value", {30: (0, 30, 99)}), ("order", {20: (0, 3, 1)})):
        t = tmp_path / f"{name}.csv"
        t.write_text(
            "k,t,a\n"
            + "".join(f"{k},{tt},{a}\n" for k, tt, a in [bad.get(i, r) for i, r in enumerate(rows)])
        )
        out = tmp_path / f"{name}.out.csv"
        line = 32 if name == "value" else 22
        where = f"row {line - 1} (line {line}), column '{'a' if name == 'value' else 't'}'"
        argv = ["match", str(q), "--input", str(t), "--output", str(out), "--chunk", "4"]
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert where in err and "Traceback" not in err, err
        assert not out.exists() and not out.with_suffix(".summary.json").exists()
        out.write_text("previous\n")
        assert main(argv) != 0
        assert where in capsys.readouterr().err
        assert out.read_text() == "previous\n" and not out.with_suffix(".summary.json").exists()
        out.unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["order.csv", "q.sql", "value.csv"]


def test_chunk_must_be_a_positive_count(tmp_path, capsys):
    for bad in ("0", "-3", "many"):
        with pytest.raises(SystemExit) as e:
            main(
                [
                    "match",
                    str(QUERIES / "vshape.sql"),
                    "--input",
                    str(QUERIES / "vshape.csv"),
                    "--output",
                    str(tmp_path / "m.csv"),
                    "--chunk",
                    bad,
                ]
            )
        assert e.value.code == 2
        assert "--chunk" in capsys.readouterr().err


def test_an_empty_input_in_chunks(tmp_path):
    t = tmp_path / "t.csv"
    t.write_text("k,p0,p1,p2\n")
    q = tmp_path / "q.sql"
    q.write_text(
        "CREATE STREAM s (k UINT(8), p0 BOOL, p1 BOOL, p2 BOOL);QUERY q PATTERN (A) DEFINE A AS p0"
    )
    out = match(tmp_path, "m", q, t, "--chunk", "2")
    assert out.read_text() == "seq,query,partition\n"
    assert json.loads(out.with_suffix(".summary.json").read_text())["tuples"] == 0


def test_parquet_folder_in_chunks(tmp_path):
    """A folder of part files, cut across files: the same as its whole read."""
    q = QUERIES / "marathon.sql"
    d = QUERIES / "marathon.csv"
    import pyarrow.csv as pacsv

    table = pacsv.read_csv(d)
    folder = tmp_path / "t.parquet"
    folder.mkdir()
    step = max(1, table.num_rows // 4)
    for i, at in enumerate(range(0, table.num_rows, step)):
        pq.write_table(table.slice(at, step), folder / f"part-{i}.parquet")
    whole = match(tmp_path, "whole", q, d)
    got = match(tmp_path, "folder", q, folder, "--chunk", "3")
    assert filecmp.cmp(whole, got, shallow=False)
