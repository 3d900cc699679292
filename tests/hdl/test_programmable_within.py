# amaranth: UnusedElaboratable=no
"""WITHIN in the programmable engine (its timed state slots, nfacep.hdl.programmable) and in the
software boards' model of it (nfacep.links.model.ImageEngine), against the reference matcher:
the window's boundary (a run exactly the window long, one shorter), the longest window with
ORDER BY values far past the start bits' wrap, and Hypothesis-drawn windowed files (several
queries, both after-match modes, narrow start bits that wrap often). An engine whose window
compare lets a run the window long live fails them. The bundled windowed files (fire,
bruteforce) are in test_programmable.py and, under Icarus, test_sim.py."""

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_programmable import compare

import nfacep
from nfacep.hdl.programmable import ProgrammableEngine
from nfacep.image import Capacity, EngineShape, ImageError, image, load
from nfacep.io import tuples
from nfacep.links.model import ImageEngine
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference

STREAM = "CREATE STREAM w (k UINT(2), t UINT(32), a INT(4));\n"


class _LongWindow(ProgrammableEngine):
    """A broken engine: a run exactly the window old is still inside it."""

    @staticmethod
    def _within(distance, window):
        return distance <= window


def rows(points):
    """Tuples of ``(k, t, a)`` points, in the order given."""
    k, t, a = zip(*points, strict=True)
    return tuples.Tuples(
        {
            "k": np.array(k, dtype=np.uint64),
            "t": np.array(t, dtype=np.uint64),
            "a": np.array(a, dtype=np.int64),
        },
        len(points),
    )


BOUNDARY = STREAM + (
    "QUERY near PARTITION k ORDER BY t PATTERN (A B* C) WITHIN 10 "
    "DEFINE A AS a = 1, B AS a = 2, C AS a = 3;\n"
    "QUERY far PARTITION k ORDER BY t AFTER MATCH SKIP PAST LAST ROW PATTERN (X Y) "
    "WITHIN 65536 DEFINE X AS a = 4, Y AS a = 5;\n"
)
# per partition: a run one less than the window long (a match), one exactly the window long
# (none), through a state reached from a run (the start's low bits compared) and straight from
# the start state (the partition's last tuple compared); then the longest window, 2**16, with
# ORDER BY values past 2**32 - 2**17 (the start bits wrap many times before)
BOUNDARY_POINTS = [
    (0, 0, 1),
    (0, 9, 3),  # 9 < 10: near
    (1, 20, 1),
    (1, 30, 3),  # exactly 10: none
    (2, 40, 1),
    (2, 45, 2),
    (2, 49, 3),  # from B, 9: near
    (3, 60, 1),
    (3, 65, 2),
    (3, 70, 3),  # from B, exactly 10 since A: none
    (0, 4_294_800_000, 4),
    (0, 4_294_865_535, 5),  # 65535: far
    (1, 4_294_865_535, 4),
    (1, 4_294_931_071, 5),  # 65536: none
    (2, 4_294_931_071, 4),
    (2, 4_294_931_071, 5),  # 0: far
]


@pytest.mark.slow
@pytest.mark.parametrize("store", ["pipeline", "table", "sdram"])
def test_the_window_boundary(store):
    nfa = nfacep.compile_text(BOUNDARY)
    shape = EngineShape(nfa.program.schema, ("k",), Capacity(8, 6, 2))
    data = rows(BOUNDARY_POINTS)
    params = EngineParams(partitions=4, store=store, ways=2)
    want, _ = compare(nfa, shape, data, params)
    assert want == {1: 1, 6: 1, 11: 2, 15: 2}
    with pytest.raises(AssertionError):
        compare_broken(nfa, shape, data, params)


def compare_broken(nfa, shape, data, params):
    import test_programmable

    from nfacep.image import load_body

    records, _ = test_programmable.simulate(
        shape, [load_body(shape, image(nfa, shape).body())], data, params, engine=_LongWindow
    )
    want = reference.run(nfa, data, params)
    assert {s for s, _, m, d in records if m and not d} == set(want.seqs.tolist())


def test_the_software_engine_keeps_the_window_boundary():
    nfa = nfacep.compile_text(BOUNDARY)
    assert model_records(nfa, rows(BOUNDARY_POINTS), Capacity(8, 6, 2)) == [
        (1, 0, 1, 0),
        (6, 2, 1, 0),
        (11, 0, 2, 0),
        (15, 2, 2, 0),
    ]


def model_records(nfa, data, capacity, *, partitions=4, **store):
    shape = EngineShape(nfa.program.schema, nfa.program.partition_fields, capacity)
    params = EngineParams(
        engine="programmable",
        states=capacity.states,
        atoms=capacity.atoms,
        queries=capacity.queries,
        partitions=partitions,
        **store,
    )
    engine = ImageEngine(nfa, params, capacity=capacity)
    assert engine.load(load(image(nfa, shape)))
    got = [r[:4] for r in engine.run(data)]
    fixed = dataclasses.replace(params, engine="fixed")
    want = [r[:4] for r in reference.run(nfa, data, fixed).records(nfa, data)]
    assert got == want
    return got


PATTERNS = ["A B* C", "(A | B)+ C?", "A{2,3} B", "A+ B+", "A B+ C", "A . B", "A B? C*"]


@st.composite
def windowed_files(draw):
    """A file of one or two queries over ``(k, t, a)``, the first with a window (of 1 to 8:
    runs often end at the window's boundary) and the second with or without one, either
    after-match mode."""
    text = STREAM
    for i in range(draw(st.integers(1, 2))):
        pattern = draw(st.sampled_from(PATTERNS))
        window = draw(st.integers(1, 8)) if i == 0 or draw(st.booleans()) else None
        skip = "AFTER MATCH SKIP PAST LAST ROW " if draw(st.booleans()) else ""
        within = f" WITHIN {window}" if window else ""
        ops = [draw(st.sampled_from(["<", ">", "<>", "<="])) for _ in range(3)]
        values = [draw(st.integers(-4, 4)) for _ in range(3)]
        define = ", ".join(f"{v} AS a {o} {c}" for v, o, c in zip("ABC", ops, values, strict=True))
        text += (
            f"QUERY q{i} PARTITION k ORDER BY t {skip}PATTERN ({pattern}){within} "
            f"DEFINE {define};\n"
        )
    return text


def windowed_points(max_len):
    """Points ``(k, t, a)`` with ORDER BY values that never decrease, by steps of 0 to 3."""
    point = st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(-5, 5))
    return st.lists(point, min_size=1, max_size=max_len).map(
        lambda ps: [(k, sum(p[1] for p in ps[: i + 1]), a) for i, (k, _, a) in enumerate(ps)]
    )


# window_bits 3: windows up to 8, start bits 4, so a 40-tuple stream wraps them
NARROW = Capacity(16, 6, 2, timed=8, window_bits=3)


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(
    text=windowed_files(), points=windowed_points(40), store=st.sampled_from(["pipeline", "table"])
)
def test_random_windowed_files_equal_the_reference(text, points, store):
    nfa = nfacep.compile_text(text)
    shape = EngineShape(nfa.program.schema, ("k",), NARROW)
    try:
        image(nfa, shape)
    except ImageError:
        assume(False)
    params = EngineParams(partitions=4, store=store, ways=2)
    compare(nfa, shape, rows(points), params)


@settings(max_examples=60, deadline=None)
@given(text=windowed_files(), points=windowed_points(60))
def test_the_software_engine_equals_the_reference_under_windows(text, points):
    nfa = nfacep.compile_text(text)
    try:
        image(nfa, EngineShape(nfa.program.schema, ("k",), NARROW))
    except ImageError:
        assume(False)
    model_records(nfa, rows(points), NARROW)


@pytest.mark.parametrize("name", ["fire", "bruteforce"])
def test_the_software_engine_runs_the_bundled_windowed_files(name):
    """The software boards' engine (``serve --engine programmable``) on fire's and
    bruteforce's data, their windows in the default capacity's timed slots."""
    from bundled import QUERIES

    from nfacep.io import reader

    nfa = nfacep.compile_file(str(QUERIES / f"{name}.sql"))
    data = reader.read(str(QUERIES / f"{name}.csv"), nfa.program.schema)
    capacity = Capacity.of(EngineParams())
    got = model_records(nfa, data, capacity, partitions=64, store="table", ways=4)
    assert any(r[2] & 1 for r in got)  # the windowed query (the first) matches
