"""Configuration images of the programmable engine (nfacep.image): each state's truth table
over its atoms is its predicate; the image file's format, fingerprint and refusal of damaged,
truncated and foreign images; files that do not fit are refused naming every reason. The
engine configured with images is in test_programmable.py."""

import numpy as np
import pytest

import nfacep
from nfacep.errors import UsageError
from nfacep.image import Capacity, EngineShape, ImageError, image, read_body
from nfacep.io import tuples

STREAM = "CREATE STREAM s (k UINT(4), a INT(6), b UINT(5), c BOOL, e ENUM('x', 'y', 'z'));\n"


def shape_of(nfa, states=16, atoms=12, queries=4):
    return EngineShape(
        nfa.program.schema, nfa.program.partition_fields, Capacity(states, atoms, queries)
    )


def random_data(rng, n, keys):
    return tuples.Tuples(
        {
            "k": rng.integers(0, keys, n).astype(np.uint64),
            "a": rng.integers(-32, 32, n),
            "b": rng.integers(0, 32, n),
            "c": rng.integers(0, 2, n) > 0,
            "e": rng.integers(0, 3, n),
        },
        n,
    )


PATTERNS = ["A B* C", "(A | B)+ C?", "A{2,3} B", "PERMUTE(A, B) C*", "A . B", "A+ B+"]
COMPARISONS = ["=", "<>", "<", "<=", ">", ">="]


def random_condition(rng, depth=0) -> str:
    """A condition of the atoms' forms: integer, ENUM and BOOL comparisons with constants
    and with another field ± a constant, combined."""
    kind = int(rng.integers(0, 7 if depth < 2 else 5))
    op = str(rng.choice(COMPARISONS))
    if kind == 0:
        return f"a {op} {int(rng.integers(-32, 32))}"
    if kind == 1:
        return f"b {op} a {'+-'[int(rng.integers(0, 2))]} {int(rng.integers(0, 9))}"
    if kind == 2:
        return f"{int(rng.integers(0, 32))} {op} b"
    if kind == 3:
        return f"e {rng.choice(['=', '<>'])} '{'xyz'[int(rng.integers(0, 3))]}'"
    if kind == 4:
        return "c" if rng.integers(0, 2) else "NOT c"
    joiner = " AND " if kind == 5 else " OR "
    return "(" + random_condition(rng, depth + 1) + joiner + random_condition(rng, depth + 1) + ")"


def random_file(rng, partitioned=True, n=3) -> str:
    text = STREAM
    for i in range(n):
        skip = "AFTER MATCH SKIP PAST LAST ROW " if rng.integers(0, 2) else ""
        part = "PARTITION k " if partitioned else ""
        pattern = str(rng.choice(PATTERNS))
        defines = " ".join(f"{v} AS {random_condition(rng)}" for v in "ABC")
        text += f"QUERY q{i} {part}{skip}PATTERN ({pattern}) DEFINE {defines};\n"
    return text


def fitting_file(rng, partitioned=True):
    """A random file that fits a 16-state, 12-atom engine, and its NFA."""
    while True:
        nfa = nfacep.compile_text(random_file(rng, partitioned))
        try:
            image(nfa, shape_of(nfa))
        except ImageError:
            continue
        return nfa


FLOAT_STREAM = "CREATE STREAM f (k UINT(3), x FLOAT32, y FLOAT32, ip IPV4, src IPV4);\n"
FLOAT_QUERIES = (
    "QUERY q0 PARTITION k PATTERN (A B+ C) DEFINE A AS ip IN '10.0.0.0/8' AND x < 1.5 "
    "B AS x >= y OR ip = src C AS ip <> '192.168.1.7' AND -2.5 < y AND ip NOT IN '10.1.0.0/16';\n"
    "QUERY q1 PARTITION k AFTER MATCH SKIP PAST LAST ROW PATTERN (A . B) "
    "DEFINE A AS x <> y AND NOT (x > 0) B AS y = -0.0 OR x >= 1e39;\n"
)
SPECIAL = [0x7FC00000, 0xFFC00000, 0x7F800000, 0xFF800000, 0x80000000, 0, 0x3FC00000, 0xC0200000]


def float_data(rng, n, keys):
    """FLOAT32 values with NaNs of both signs, infinities, -0, 1.5, -2.5 and random ones, and
    addresses in and out of the networks the queries name."""

    def floats():
        bits = rng.choice(SPECIAL, n)
        random_bits = rng.integers(0, 1 << 32, n, dtype=np.uint64)
        bits = np.where(rng.random(n) < 0.3, random_bits, bits)
        return bits.astype(np.uint32).view(np.float32)

    pool = np.array([0x0A000001, 0x0A010203, 0x0AFFFFFF, 0xC0A80107, 0xC0A80108, 0x0B000000])
    return tuples.Tuples(
        {
            "k": rng.integers(0, keys, n).astype(np.uint64),
            "x": floats(),
            "y": floats(),
            "ip": rng.choice(pool, n).astype(np.uint32),
            "src": rng.choice(pool, n).astype(np.uint32),
        },
        n,
    )


def operand_values(shape, data, t):
    """A tuple's operand values as an atom sees them: FLOAT32s as order keys, None for NaN."""
    from nfacep.lang.values import float32_key

    out = []
    for name in shape.operands:
        value = data.columns[name][t]
        out.append(float32_key(float(value)) if value.dtype == np.float32 else int(value))
    return out


def assert_tables_are_predicates(nfa, img, data):
    from nfacep.lang.evaluate import evaluate

    for s, config in zip(nfa.states, img.states, strict=True):
        if s.predicate is None:
            want = np.ones(data.n, dtype=bool)
        else:
            want = evaluate(nfa.predicates[s.predicate].expr, data.columns, data.n)
        for t in range(data.n):
            values = operand_values(img.shape, data, t)
            k = sum(img.atoms[a].holds(values) << j for j, a in enumerate(config.atoms))
            assert bool(config.table >> k & 1) == bool(want[t]), (s, t)


# --- the image --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_image_states_equal_the_predicates(seed):
    """Each state's truth table over its atoms, evaluated in software on random tuples, is its
    predicate as the reference evaluates it (constants clamped, fields compared exactly)."""
    rng = np.random.default_rng(seed)
    nfa = fitting_file(rng)
    assert_tables_are_predicates(nfa, image(nfa, shape_of(nfa)), random_data(rng, 300, keys=4))


def test_float32_and_ipv4_atoms_equal_the_predicates():
    """FLOAT32 atoms compare order keys (NaN only <>, -0 = +0), an IPV4 network is a range."""
    nfa = nfacep.compile_text(FLOAT_STREAM + FLOAT_QUERIES)
    img = image(nfa, shape_of(nfa, atoms=16))
    assert len(img.atoms) == 13
    assert_tables_are_predicates(nfa, img, float_data(np.random.default_rng(5), 400, keys=4))


def test_image_file_round_trip_and_damage():
    nfa = fitting_file(np.random.default_rng(1))
    shape = shape_of(nfa)
    img = image(nfa, shape)
    blob = img.to_bytes()
    assert read_body(shape, blob) == img.body()
    assert len(img.fingerprint) == 16 and img.fingerprint == blob[-8:].hex()
    damaged = bytearray(blob)
    damaged[30] ^= 4
    with pytest.raises(UsageError, match="damaged"):
        read_body(shape, bytes(damaged))
    with pytest.raises(UsageError, match="truncated"):
        read_body(shape, blob[:-1])
    with pytest.raises(UsageError, match="another engine"):
        read_body(shape_of(nfa, states=17), blob)
    with pytest.raises(UsageError, match="not a configuration image"):
        read_body(shape, b"PK\x03\x04" + blob[4:])


def test_image_refuses_every_capacity_at_once():
    text = STREAM + (
        "QUERY q0 PARTITION k PATTERN (A B C) DEFINE A AS a < 1 B AS a < 2 C AS a < 3;\n"
        "QUERY q1 PARTITION k PATTERN (A B) DEFINE A AS a < 4 "
        "B AS a = 1 OR b = 2 OR c OR e = 'x' OR b > a + 1;\n"
    )
    nfa = nfacep.compile_text(text)
    with pytest.raises(ImageError) as err:
        image(nfa, shape_of(nfa, states=4, atoms=6, queries=1))
    text = str(err.value)
    assert "states: the queries need 5, the engine has 4" in text
    assert "atoms: the conditions need 9, the engine has 6" in text
    assert "queries: the file has 2, the engine has 1" in text
    assert "atoms per state: predicate p4" in text and "reads 5 atoms" in text
    assert len(err.value.reasons) == 4


@pytest.mark.parametrize(
    ("stream", "query", "reason"),
    [
        (
            "CREATE STREAM s (k UINT(4), t UINT(32), a INT(6));",
            "QUERY q PARTITION k ORDER BY t PATTERN (A B) WITHIN 65537 DEFINE A AS a < 1;",
            "query 'q': WITHIN 65537 is longer than the engine's longest window (65536, 16 "
            "window bits)",
        ),
        (
            "CREATE STREAM s (k UINT(4), t UINT(8), a INT(6));",
            "QUERY q PARTITION k ORDER BY t PATTERN (A{7}) WITHIN 5 DEFINE A AS a < 1;",
            "timed states: the windowed queries need 7, the engine has 6",
        ),
        (
            "CREATE STREAM s (k UINT(4), t UINT(8), u UINT(8), a INT(6));",
            "QUERY q PARTITION k ORDER BY t PATTERN (A B) WITHIN 5 DEFINE A AS a < 1;"
            "QUERY r PARTITION k ORDER BY u PATTERN (A B) WITHIN 5 DEFINE A AS a < 1;",
            "WITHIN: the windowed queries order by t and u",
        ),
        (
            "CREATE STREAM s (k UINT(4), t UINT(8), a INT(6));",
            "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY t MEASURES FIRST(t) AS "
            "start_seq PATTERN (A B) DEFINE A AS a < 1) AS q;",
            "match start positions",
        ),
        (
            "CREATE STREAM s (k UINT(4), a INT(6));",
            "QUERY q PARTITION k PATTERN (A B) DEFINE A AS a < PREV(a);",
            "PREV is not supported",
        ),
        (
            "CREATE STREAM s (k UINT(4), a INT(6));",
            "QUERY q PARTITION k PATTERN (A B) DEFINE A AS a < :lim;",
            "runtime parameters (:lim) need values",
        ),
        (
            "CREATE STREAM s (k UINT(4), a INT(6), b INT(6));",
            "QUERY q PARTITION k PATTERN (A B) DEFINE A AS a + b < 3;",
            "another field ± a constant",
        ),
        (
            "CREATE STREAM s (k UINT(4), a INT(6), b INT(6));",
            "QUERY q PARTITION k PATTERN (A B) DEFINE A AS a < 2 * b;",
            "another field ± a constant",
        ),
    ],
)
def test_image_refuses_what_the_engine_cannot_hold(stream, query, reason):
    nfa = nfacep.compile_text(stream + "\n" + query)
    with pytest.raises(ImageError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        image(nfa, shape_of(nfa))


def test_an_engine_without_timed_slots_refuses_windows():
    nfa = nfacep.compile_text(
        "CREATE STREAM s (k UINT(4), t UINT(8), a INT(6));\n"
        "QUERY q PARTITION k ORDER BY t PATTERN (A B) WITHIN 5 DEFINE A AS a < 1;"
    )
    shape = EngineShape(nfa.program.schema, ("k",), Capacity(16, 12, 4, timed=0))
    with pytest.raises(ImageError, match="WITHIN: the engine has no timed state slots"):
        image(nfa, shape)
    shape = EngineShape(nfa.program.schema, ("k",), Capacity(16, 12, 4))
    assert image(nfa, shape).windows == (5,)


def test_image_refuses_another_declaration():
    nfa = nfacep.compile_text(STREAM + "QUERY q PARTITION k PATTERN (A) DEFINE A AS a < 1;")
    other = nfacep.compile_text(STREAM + "QUERY q PARTITION b PATTERN (A) DEFINE A AS a < 1;")
    with pytest.raises(ImageError, match=r"partitions by \(k\), the engine by \(b\)"):
        image(nfa, shape_of(other))


def test_runtime_parameters_are_constants_in_the_image():
    from nfacep.settings import ParamValues

    nfa = nfacep.compile_text(STREAM + "QUERY q PARTITION k PATTERN (A B) DEFINE A AS a < :lim;")
    shape = shape_of(nfa)
    low = image(nfa, shape, ParamValues.parse(nfa.program.parameters, ["lim=-3"]))
    high = image(nfa, shape, ParamValues.parse(nfa.program.parameters, ["lim=7"]))
    assert [a.constant for a in low.atoms] == [-3] and [a.constant for a in high.atoms] == [7]
    assert low.fingerprint != high.fingerprint
    switched = ParamValues.parse(nfa.program.parameters, ["lim=1", "lim=2@10"])
    with pytest.raises(ImageError, match="switched at a tuple"):
        image(nfa, shape, switched)


def test_check_shows_the_fit(capsys, tmp_path):
    """``nfacep check Q --engine programmable`` prints the fit, or every reason it does not
    fit (exit 2); the capacities need ``--engine programmable``, which the commands that do
    not build it yet refuse."""
    import json

    from bundled import QUERIES

    from nfacep.cli import main

    marathon = str(QUERIES / "marathon.sql")
    assert main(["check", marathon, "--engine", "programmable"]) == 0
    out = capsys.readouterr().out
    assert "programmable engine (24 states, 16 atoms, 4 queries): fits, using 9 states" in out
    nfa = nfacep.compile_file(marathon)
    fingerprint = image(nfa, EngineShape(nfa.program.schema, ("runner",))).fingerprint
    assert f"fingerprint {fingerprint}" in out
    assert main(["check", marathon, "--engine", "programmable", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["programmable"]["states"] == [9, 24] and doc["programmable"]["atoms"][1] == 16
    supply = str(QUERIES / "supplychain.sql")
    argv = ["check", supply, "--engine", "programmable", "--states", "16", "--atoms", "4"]
    assert main([*argv, "--param", "big=5"]) == 2
    err = capsys.readouterr().err
    assert "supplychain.sql: the query file does not fit the programmable engine" in err
    assert "states: the queries need 19, the engine has 16" in err
    assert "atoms: the conditions need 10, the engine has 4" in err
    for name, used in [
        ("fire", "10 states, 8 atoms, 2 queries, 4 of its 6 timed states (WITHIN); image"),
        ("bruteforce", "14 states, 6 atoms, 2 queries, 6 of its 6 timed states"),
    ]:
        assert main(["check", str(QUERIES / f"{name}.sql"), "--engine", "programmable"]) == 0
        assert f"(24 states, 16 atoms, 4 queries): fits, using {used}" in capsys.readouterr().out
    assert main(["check", marathon, "--states", "4"]) == 2
    assert "--states: only with --engine programmable" in capsys.readouterr().err
    csv = str(QUERIES / "marathon.csv")
    argv = [
        "match",
        marathon,
        "--input",
        csv,
        "--output",
        str(tmp_path / "m.csv"),
        "--engine",
        "programmable",
    ]
    assert main(argv) == 2
    assert "does not build or model the programmable engine yet" in capsys.readouterr().err


def test_a_load_is_at_fingerprint_body_and_crc():
    """A load (what the configuration port takes): the tuple number (4 bytes, little-endian,
    modulo 2**32), the engine's fingerprint, the image's, the body, then zlib's CRC-32 of
    all that; the port's words mark the last byte."""
    import zlib

    from nfacep.image import load, load_size, port_words

    nfa = fitting_file(np.random.default_rng(4))
    shape = shape_of(nfa)
    img = image(nfa, shape)
    blob = load(img, (1 << 32) + 7)
    assert len(blob) == load_size(shape)
    assert blob[:4] == (7).to_bytes(4, "little") and blob[4:12] == shape.fingerprint
    assert blob[12:20].hex() == img.fingerprint and blob[20:-4] == img.body()
    assert blob[-4:] == zlib.crc32(blob[:-4]).to_bytes(4, "little")
    words = port_words(blob)
    assert [w & 0xFF for w in words] == list(blob)
    assert [w >> 8 for w in words] == [0] * (len(blob) - 1) + [1]
