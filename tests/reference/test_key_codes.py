"""The partition keys' codes across pieces (``nfacep.reference.matcher.KeyCodes``) and the compiled
helpers of the partitioner's model (``nfacep.reference.compiled``: first tuple per key, last
admitted tuple per key, codes by a table), each against a plain definition."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nfacep.reference import capacity, compiled, loops
from nfacep.reference.matcher import KeyCodes

DTYPES = {
    "uint64": np.uint64,
    "int64": np.int64,
    "uint16": np.uint16,
    "uint8": np.uint8,
    "bool": bool,
}


def numbering(pieces):
    """The definition: a first piece's keys numbered ascending, each later piece's new keys
    after them, ascending among themselves; the codes and the new keys of each piece."""
    known: dict = {}
    out = []
    for piece in pieces:
        new = sorted(set(piece.tolist()) - set(known))
        for k in new:
            known[k] = len(known)
        out.append(([known[k] for k in piece.tolist()], new))
    return out


@st.composite
def key_pieces(draw):
    name = draw(st.sampled_from(sorted(DTYPES)), label="dtype")
    dtype = DTYPES[name]
    if name == "bool":
        keys = st.booleans()
    elif name in ("uint8", "uint16"):
        keys = st.integers(0, np.iinfo(dtype).max)
    else:
        info = np.iinfo(dtype)
        # near zero, near the ends of the type, or anywhere (a range too wide for a table)
        keys = st.one_of(
            st.integers(-5 if name == "int64" else 0, 40),
            st.integers(info.max - 40, info.max),
            st.integers(info.min, info.min + 40),
            st.integers(info.min, info.max),
        )
    pieces = draw(st.lists(st.lists(keys, min_size=0, max_size=30), min_size=1, max_size=5))
    return [np.array(p, dtype=dtype) for p in pieces]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(pieces=key_pieces(), compiled_loops=st.booleans())
def test_codes_across_pieces_follow_the_definition(pieces, compiled_loops):
    codes = KeyCodes()
    helpers = 0 if compiled_loops else loops.LOOPS_FROM
    with (
        mock.patch.object(loops, "LOOPS_FROM", helpers),
        mock.patch.object(loops, "LOAD_FROM", helpers),
        mock.patch.object(loops, "ready", loops.ready if compiled_loops else lambda name: False),
    ):
        for piece, (expected, new) in zip(pieces, numbering(pieces), strict=True):
            got, got_new = codes.codes(piece)
            assert got.tolist() == expected
            assert [bool(k) if piece.dtype == bool else int(k) for k in got_new.tolist()] == [
                bool(k) if piece.dtype == bool else int(k) for k in new
            ]
            assert got.dtype == (np.uint16 if len(codes) <= 1 << 16 else np.int64)
    known = [k for p in pieces for k in p.tolist()]
    assert len(codes) == len(set(known))
    if len(codes):
        # values[c] is the key numbered c
        order = [k for _, new in numbering(pieces) for k in new]
        assert codes.values.tolist() == order


def test_a_table_grows_with_the_keys_and_gives_way_to_the_index():
    """Keys below and above the table's range widen it; a piece whose keys are too wide for a
    table moves the numbering to the sorted index for good, codes unchanged."""
    codes = KeyCodes()
    pieces = [
        np.array([100, 102, 100], dtype=np.int64),
        np.array([5, 102, 300], dtype=np.int64),
        np.array([2**40, 5, 7], dtype=np.int64),
        np.array([6, 7, 100], dtype=np.int64),
    ]
    for piece, (expected, new) in zip(pieces, numbering(pieces), strict=True):
        got, got_new = codes.codes(piece)
        assert got.tolist() == expected and got_new.tolist() == new
    assert codes._table is None and not codes._direct


@settings(max_examples=100, deadline=None)
@given(
    codes=st.lists(st.integers(0, 9), max_size=60),
    extra=st.integers(0, 3),
    admitted=st.data(),
    offset=st.integers(0, 1000),
)
def test_compiled_helpers_equal_numpy(codes, extra, admitted, offset):
    codes = np.array(codes, dtype=np.uint16)
    keys = (int(codes.max()) + 1 if len(codes) else 0) + extra
    first = np.full(keys, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes), dtype=np.int64))
    assert compiled.first_index(codes, keys).tolist() == first.tolist()
    mask = np.array(
        admitted.draw(st.lists(st.booleans(), min_size=len(codes), max_size=len(codes))), dtype=bool
    )
    before = np.array([-1] * keys, dtype=np.int64)
    expected = before.copy()
    idx = np.flatnonzero(mask)
    np.maximum.at(expected, codes[idx], offset + idx)
    with mock.patch.object(loops, "LOOPS_FROM", 0), mock.patch.object(loops, "LOAD_FROM", 0):
        capacity.carry(before, capacity.Admission(codes, mask, mask), offset)
    assert before.tolist() == expected.tolist()


@pytest.mark.parametrize("dtype", [np.uint64, np.int64, np.uint16])
def test_table_codes_counts_the_keys_not_in_the_table(dtype):
    table = np.array([3, -1, 0, -1, 1], dtype=np.int64)
    column = np.array([7, 9, 7, 11, 8], dtype=dtype)
    out = np.empty(len(column), dtype=np.int64)
    assert compiled.table_codes(column, dtype(7), table, out) == 1  # key 8
    assert out.tolist() == [3, 0, 3, 1, -1]


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 3), st.integers(-4, 3), st.integers(0, 2)), min_size=1, max_size=60
    ),
    cut=st.integers(1, 60),
    store=st.sampled_from(["pipeline", "table"]),
)
def test_several_key_fields_one_code_per_combination(rows, cut, store):
    """PARTITION BY k, j: one code per distinct (k, j) pair, whatever the pieces; a stream fed
    in two pieces reports what it does whole, each match's key as the pair's texts."""
    import nfacep
    from nfacep.io.tuples import Tuples
    from nfacep.params import EngineParams
    from nfacep.reference import matcher as reference

    nfa = nfacep.compile_text(
        "CREATE STREAM s (k UINT(2), j INT(3), v UINT(2));\n"
        "QUERY q PARTITION k, j PATTERN (A B) DEFINE A AS v = 1, B AS v = 2;"
    )

    def tuples(part):
        k, j, v = (np.array(c, dtype=np.int64) for c in zip(*part, strict=True))
        return Tuples({"k": k.astype(np.uint64), "j": j, "v": v.astype(np.uint64)}, len(part))

    params = EngineParams(store=store, partitions=4, ways=2)
    whole = reference.run(nfa, tuples(rows), params)
    m = reference.Matcher(nfa, params)
    pieces = [rows[:cut], rows[cut:]] if cut < len(rows) else [rows]
    got = [m.feed(tuples(p), last=i == len(pieces) - 1) for i, p in enumerate(pieces)]
    assert len(m.keys) == len({(k, j) for k, j, _ in rows})
    assert [s for r in got for s in r.seqs.tolist()] == whole.seqs.tolist()
    assert [d for r in got for d in r.drops.tolist()] == whole.drops.tolist()
    assert [p for r in got for p in r.partitions] == whole.partitions
    assert whole.partitions == [(str(rows[s][0]), str(rows[s][1])) for s in whole.seqs.tolist()]
