"""Records read back a chunk at a time: the harness's hex lines decoded column-wise
(``RecordFormat.decode_hex``, ``nfacep.sim.records.read_hex``), turned into matches and drops
column-wise (``Result.from_columns``) and checked column-wise (``InOrderChecker.check``) give
what a record-by-record reading gives, in chunks of any size; a run's records are read so
(``SimRun.chunks``). No simulator here: the files are written by the tests.
"""

from __future__ import annotations

import json
import pathlib
import tempfile

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import nfacep
from nfacep import wire
from nfacep.params import EngineParams
from nfacep.result import Result
from nfacep.sim import SimulationError, contract, runner
from nfacep.sim.records import RECORDS_HEX, InOrderChecker, read_hex
from nfacep.wire import Record, RecordColumns

#: Two queries that report start_seq (so ``starts`` is 96 bits: Python ints), a UINT(8) key.
STARTS = """CREATE STREAM s (k UINT(8), ev ENUM('F', 'OK', 'X'), ts UINT(32));
QUERY brute FROM s PARTITION k MEASURES FIRST(seq) AS start_seq
PATTERN ( F F OK ) DEFINE F AS (ev = 'F') OK AS (ev = 'OK');
QUERY plain FROM s PARTITION k PATTERN ( OK ) DEFINE OK AS (ev = 'OK');
QUERY skip FROM s PARTITION k MEASURES FIRST(seq) AS start_seq
PATTERN ( F OK ) DEFINE F AS (ev = 'F') OK AS (ev = 'OK');
"""
#: One query with start_seq (48 bits of starts: uint64), an ENUM key (index 3 is no label).
ENUM_KEY = """CREATE STREAM s (k ENUM('a', 'b', 'c'), ev UINT(2));
QUERY zeta FROM s PARTITION k MEASURES FIRST(seq) AS start_seq
PATTERN ( A B ) DEFINE A AS (ev = 1) B AS (ev = 2);
QUERY alpha FROM s PARTITION k PATTERN ( B ) DEFINE B AS (ev = 2);
"""
#: No key, three queries.
NO_KEY = """CREATE STREAM s (ev UINT(2));
QUERY c FROM s PATTERN ( A ) DEFINE A AS (ev = 1);
QUERY b FROM s PATTERN ( A ) DEFINE A AS (ev = 2);
QUERY a FROM s PATTERN ( A ) DEFINE A AS (ev = 3);
"""
NFAS = {
    name: nfacep.compile_text(text)
    for name, text in (("starts", STARTS), ("enum_key", ENUM_KEY), ("no_key", NO_KEY))
}


def oracle(nfa, n: int, received: list[Record]) -> tuple[list, list[int]]:
    """The matches and drops of ``received``, record by record (what from_records did before
    it was column-wise); ValueError for the first record that is not this engine's."""
    program = nfa.program
    names = [q.name for q in nfa.queries]
    slot = {q: k for k, q in enumerate(wire.start_queries(nfa))}
    rows, drops = [], []
    for r in received:
        if r.seq >= n:
            raise ValueError(f"a record names tuple {r.seq}, but only {n} were sent")
        if r.dropped:
            drops.append(r.seq)
        if r.matches:
            part = wire.key_text(program.key, r.partition)
            for q in sorted(range(len(names)), key=names.__getitem__):
                if r.matches >> q & 1:
                    began = r.start(slot[q]) if q in slot else -1
                    if began > r.seq:
                        raise ValueError(
                            f"a record says a match of {names[q]} at tuple "
                            f"{r.seq} began at tuple {began}, after it"
                        )
                    rows.append(
                        (
                            r.seq,
                            names[q],
                            part,
                            *(() if not slot else (None if began < 0 else began,)),
                        )
                    )
    rows.sort(key=lambda row: row[0])
    return rows, sorted(drops)


@st.composite
def runs(draw, valid: bool = False):
    """(nfa name, n, records): records in rising seq order (shuffled a little, unless
    ``valid``), some of them wrong unless ``valid``."""
    name = draw(st.sampled_from(sorted(NFAS)))
    nfa = NFAS[name]
    fmt = wire.record_format(nfa)
    widths = fmt.widths
    n = draw(st.integers(1, 400))
    seqs = sorted(draw(st.sets(st.integers(0, n - 1 if valid else n + 1), max_size=120)))
    records = []
    for seq in seqs:
        nq = widths["matches"]
        matches = draw(st.integers(0, (1 << nq) - 1))
        dropped = int(matches == 0) if valid else draw(st.integers(0, 1))
        key = nfa.program.partition_fields
        top = (
            len(nfa.program.schema.field(key[0]).type.labels) - 1
            if valid and key and name == "enum_key"
            else (1 << widths["partition"]) - 1
        )
        starts = 0
        for k in range(widths.get("starts", 0) // wire.SEQ_BITS):
            starts |= draw(st.integers(0, seq if valid else seq + 2)) << (k * wire.SEQ_BITS)
        records.append(Record(seq, draw(st.integers(0, top)), matches, dropped, starts))
    if not valid and len(records) > 1 and draw(st.booleans()):
        i = draw(st.integers(0, len(records) - 2))
        records[i], records[i + 1] = records[i + 1], records[i]
    return name, n, records


def hex_file(folder: pathlib.Path, fmt: wire.RecordFormat, records: list[Record]) -> pathlib.Path:
    path = folder / RECORDS_HEX
    path.write_text("".join(f"{fmt.encode(r):0{fmt.hex_digits}x}\n" for r in records))
    return path


def first_error(make):
    try:
        return make(), None
    except ValueError as err:
        return None, str(err)


@settings(max_examples=200, deadline=None)
@given(run=runs(), rows=st.integers(1, 50))
@example(run=("enum_key", 5, [Record(1, 0, 1, 1), Record(6, 3, 1, 0, 9)]), rows=1)
@example(run=("starts", 9, [Record(4, 7, 0b101, 0, 5 | 3 << 48)]), rows=2)
def test_chunked_decoding_is_the_record_by_record_reading(run, rows):
    """Records written as the harness writes them, read ``rows`` at a time: each chunk's
    columns are its records; the chunks' results, one after the other, are the matches and
    drops the record-by-record reading gives (or its error, for the first wrong record); and
    from_records, the whole list at once, gives them too."""
    name, n, records = run
    nfa = NFAS[name]
    fmt = wire.record_format(nfa)
    params = EngineParams()
    with tempfile.TemporaryDirectory() as folder:
        chunks = list(read_hex(hex_file(pathlib.Path(folder), fmt, records), fmt, rows))
    assert [r for c in chunks for r in c.records()] == records
    assert [len(c) for c in chunks] == (
        [len(records)]
        if not records
        else [min(rows, len(records) - i) for i in range(0, len(records), rows)]
    )
    want, error = first_error(lambda: oracle(nfa, n, records))
    whole, whole_error = first_error(lambda: Result.from_records(nfa, n, records, params))
    assert whole_error == error
    parts, parts_error = first_error(
        lambda: [Result.from_columns(nfa, n, c, params) for c in chunks]
    )
    assert parts_error == error
    if error is None:
        assert (whole.matches, whole.drop_seqs) == want
        if [r.seq for r in records] == sorted(r.seq for r in records):
            assert (
                [m for p in parts for m in p.matches],
                sorted(d for p in parts for d in p.drop_seqs),
            ) == want
        assert all(p.n == n for p in parts)


@settings(max_examples=200, deadline=None)
@given(run=runs(), rows=st.integers(1, 50))
def test_the_checker_judges_chunks_as_it_judges_records(run, rows):
    """Without a model, InOrderChecker.check over chunks finds the errors, in the same words,
    that the checker finds record by record."""
    name, n, records = run
    fmt = wire.record_format(NFAS[name])
    one_by_one = InOrderChecker(None, n)
    for r in records:
        one_by_one(r)
    chunked = InOrderChecker(None, n, keep=False)
    with tempfile.TemporaryDirectory() as folder:
        for chunk in read_hex(hex_file(pathlib.Path(folder), fmt, records), fmt, rows):
            chunked.check(chunk)
    assert (chunked.error_count, chunked.errors) == (one_by_one.error_count, one_by_one.errors)
    assert chunked.count == len(records) and chunked.records == []
    assert chunked.last == (records[-1] if records else None)


def test_a_line_that_is_not_a_record_is_named(tmp_path):
    fmt = wire.record_format(NFAS["no_key"])
    good = f"{fmt.encode(Record(1, 0, 1, 0)):0{fmt.hex_digits}x}\n"
    for bad in ("x" * fmt.hex_digits, "1" * (fmt.hex_digits + 1), "", "g" + good[1:-1]):
        path = tmp_path / RECORDS_HEX
        path.write_text(good * 7 + bad + "\n" + good * 3)
        with pytest.raises(ValueError, match=f"^record 7 is not a value: {bad!r}$"):
            list(read_hex(path, fmt, 3))
    path.write_text(good * 2 + good[:-1])  # the last line cut short
    with pytest.raises(ValueError, match=r"^record 2 is not a value"):
        list(read_hex(path, fmt, 2))
    path.write_text("")
    assert [len(c) for c in read_hex(path, fmt, 2)] == [0]
    assert RecordColumns.from_records([]).records() == []


def fake_run(tmp_path, records: list[Record], n: int, *, checked: bool = False):
    """A run folder as a batch or native run leaves it, and its SimRun."""
    nfa = NFAS["starts"]
    fmt = wire.record_format(nfa)
    hex_file(tmp_path, fmt, records)
    (tmp_path / "stats.json").write_text(
        json.dumps(
            {
                "cycles": 99,
                "first_input_cycle": 1,
                "last_input_cycle": 80,
                "checked": checked,
                "counters": {"tuples": n},
            }
        )
    )
    (tmp_path / "sim.log").write_text("")
    sidecar = {"record": {"fields": fmt.describe()}}
    return runner.SimRun(runner.Simulation(), nfa, EngineParams(), None, tmp_path, n, sidecar)


def test_a_runs_records_in_chunks(tmp_path):
    """SimRun.chunks: the chunks of a run's records, each a result of the whole run; records
    that break the rules set its failure, in the testbench's words, once read (not when the
    testbench checked them); a line that is not a record is the simulation's failure."""
    records = [
        Record(2, 1, 0b001, 0, 1),
        Record(3, 4, 0, 1),
        Record(5, 1, 0b110, 0, 4 << 48),
        Record(9, 2, 0b010, 0),
    ]
    ran = fake_run(tmp_path, records, 10)
    parts = list(ran.chunks(3))
    assert [len(p.seqs) for p in parts] == [3, 1] and ran.failure is None
    assert [m for p in parts for m in p.matches] == [
        (2, "brute", "1", 1),
        (5, "plain", "1", None),
        (5, "skip", "1", 4),
        (9, "plain", "2", None),
    ]
    assert [p.drop_seqs for p in parts] == [[3], []]
    assert all(p.n == 10 and p.cycles == 99 and p.records == [] for p in parts)
    assert parts[0].tuples_per_cycle == 10 / 80
    (whole,) = ran.chunks(None, records=True)
    assert whole.records == records
    wrong = [records[0], records[2], records[1], Record(7, 0, 0, 0)]
    ran = fake_run(tmp_path, wrong, 10)
    list(ran.chunks(2))
    assert isinstance(ran.failure, SimulationError)
    text = str(ran.failure)
    assert text.startswith(
        "the engine's records differ from the reference matcher's: "
        "2 record(s) differ:\nrecord 2 (seq 3 partition 4 matches 0b0 "
        "dropped 1) is not after the previous one (seq 5)"
    ), text
    assert "record 3 (seq 7 partition 0 matches 0b0 dropped 0) reports neither" in text
    assert fake_run(tmp_path, wrong, 10, checked=True).failure is None
    ran = fake_run(tmp_path, wrong, 10, checked=True)
    list(ran.chunks(2))
    assert ran.failure is None
    digits = wire.record_format(NFAS["starts"]).hex_digits
    (tmp_path / RECORDS_HEX).write_text("0" * digits + "\nzz\n")
    ran = runner.SimRun(
        runner.Simulation(),
        NFAS["starts"],
        EngineParams(),
        None,
        tmp_path,
        10,
        {"record": {"fields": wire.record_format(NFAS["starts"]).describe()}},
    )
    with pytest.raises(
        SimulationError,
        match=r"simulation failed: record 1 is not a value: "
        r"'zz' \(x or z bits on o_stream.payload\)",
    ):
        list(ran.chunks(5))
    with pytest.raises(contract.ContractError, match="names tuple 12, but only 10 were sent"):
        list(fake_run(tmp_path, [Record(12, 0, 1, 0)], 10).chunks(5))
