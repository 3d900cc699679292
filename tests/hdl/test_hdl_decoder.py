# amaranth: UnusedElaboratable=no
"""The predicate decoder against the reference decoder output, in Amaranth's simulator."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Fragment, Shape
from amaranth.sim import Simulator

import nfacep
from nfacep import wire
from nfacep.errors import NfacepError
from nfacep.hdl.decoder import DecoderError, PredicateDecoder, float32_key
from nfacep.hdl.layout import tuple_layout
from nfacep.io.tuples import Tuples
from nfacep.lang import predicates as P
from nfacep.lang.types import BoolType, EnumType, Float32Type, IntType, UIntType
from nfacep.nfa import Predicate
from nfacep.reference.matcher import predicate_matrix

STREAM = """
CREATE STREAM s (
    u8   UINT(8),
    u64  UINT(64),
    i8   INT(8),
    i64  INT(64),
    u1   UINT(1),
    i1   INT(1),
    u33  UINT(33),
    b    BOOL,
    c    BOOL,
    e    ENUM('red', 'green', 'blue'),
    e2   ENUM('red', 'green', 'blue'),
    f    FLOAT32,
    g    FLOAT32,
    ip   IPV4,
    ip2  IPV4
);
"""

# One query per group; every DEFINE becomes (at least) one decoder bit.
GROUPS = {
    "uint": [
        "u8 = 0",
        "u8 <> 255",
        "u8 < 17",
        "u8 <= 17",
        "u8 > 17",
        "u8 >= 200",
        "17 < u8",
        "u64 = 18446744073709551615",
        "u64 < 9223372036854775808",
        "u64 >= 1",
        "u64 > 18446744073709551614",
        "u64 <= 9223372036854775807",
        "u1 = 1",
        "u1 <> 0",
        "u33 > 4294967295",
        "u33 = 8589934591",
    ],
    "int": [
        "i8 < -100",
        "i8 >= -1",
        "i8 = -128",
        "i8 <> 127",
        "i8 > 126",
        "i8 <= -127",
        "i64 < -9223372036854775807",
        "i64 > 9223372036854775806",
        "i64 = -1",
        "i64 <= 0",
        "i64 = -9223372036854775808",
        "i1 = -1",
        "i1 < 0",
        "-5 >= i8",
    ],
    "field_to_field": [
        "u64 > i64",
        "u64 = i64",
        "u64 <= i64",
        "i64 < u8",
        "i8 <= u8",
        "i8 = u8",
        "u1 = i1",
        "i1 < u1",
        "u33 >= u64",
        "i64 <> i8",
        "u64 < u33",
    ],
    "arith": [
        "u8 + i8 > 100",
        "u64 - i64 < 0",
        "u64 + u64 > 18446744073709551615",
        "i64 - 1 < i8",
        "-i64 > 0",
        "u8 + 5 = 10",
        "u64 - u8 >= 18446744073709551600",
        "i64 + i64 < -9223372036854775808",
        "u8 - u8 = 0",
        "i8 - u8 < -300",
        "u64 + 1 > 18446744073709551615",
        "i64 - u64 < -18446744073709551615",
        "u8 + 3 - i8 >= u33 - 2",
        "-u64 < -9223372036854775808",
        "u1 + i1 = 0",
        "1 + 2 < u8",
        "u8 > 20 - 10",
    ],
    "product": [
        "u64 * 10 > i64 * 11",
        "-3 * i64 + u64 * -2 >= -40",
        "u64 * 4611686018427387904 < 4611686018427387904 * i64",
        "i8 * -1 = u8",
        "u1 * 7 - i1 * 3 = 3",
        "(u8 + i8) * 3 > 0",
        "u33 * -5 < i64",
        "2 * u8 * 3 = 6",
        "u64 * 0 = 0",
    ],
    "ipv4": [
        "ip = '10.1.2.3'",
        "ip <> '255.255.255.255'",
        "ip IN '10.0.0.0/8'",
        "ip NOT IN '192.168.1.128/25'",
        "ip IN '0.0.0.0/0'",
        "ip IN '10.1.2.2/31'",
        "ip IN ('172.16.0.0/12', '1.2.3.4')",
        "ip = ip2",
        "ip2 != ip",
    ],
    "between_in": [
        "u8 BETWEEN 10 AND 20",
        "i64 NOT BETWEEN -5 AND 5",
        "f BETWEEN -1.5 AND 2.25",
        "u8 IN (1, 2, 3, 255)",
        "e IN ('red', 'blue')",
        "i8 NOT IN (-1, 0, 1)",
        "u64 BETWEEN 9223372036854775807 AND 9223372036854775809",
        "f NOT BETWEEN 0 AND 1e-40",
    ],
    "logic": [
        "(u8 > 3 AND b) OR NOT c",
        "NOT (e = 'green' OR i8 < 0)",
        "b AND c AND u1 = 1",
        "b OR c OR e2 = 'red'",
        "NOT NOT b",
        "NOT (u8 = 1 AND (f > 0 OR g < 0))",
        "b AND TRUE",
        "c OR FALSE",
        "b AND FALSE",
        "b OR TRUE",
        "NOT (TRUE AND c)",
    ],
    "bool": [
        "b",
        "NOT b",
        "b = c",
        "b <> c",
        "b = TRUE",
        "b <> TRUE",
        "c = FALSE",
        "(u8 > 3) = b",
        "(f < 1) <> (g < 1)",
    ],
    "enum": [
        "e = 'red'",
        "e <> 'blue'",
        "e = 'green'",
        "e = e2",
        "e <> e2",
        "e2 != 'green'",
    ],
    "float": [
        *(
            f"f {op} {lit}"
            for op in ("=", "<>", "<", "<=", ">", ">=")
            for lit in (
                "1.5",
                "-0.0",
                "0",
                "0.1",
                "-2.75",
                "1e-45",
                "-1e-45",
                "3.4028235e38",
                "1e39",
                "-1e39",
                "1.17549435e-38",
            )
        ),
        *(f"f {op} g" for op in ("=", "<>", "<", "<=", ">", ">=")),
        "g != -3",
        "g < 16777217",
    ],
}


def query_file(groups: dict[str, list[str]]) -> str:
    text = STREAM
    for name, preds in groups.items():
        names = [f"V{i}" for i in range(len(preds))]
        defines = " ".join(f"{v} AS ({p})" for v, p in zip(names, preds, strict=True))
        text += f"QUERY {name} FROM s PATTERN ({' | '.join(names)}) DEFINE {defines};\n"
    return text


@pytest.fixture(scope="module")
def nfa():
    return nfacep.compile_text(query_file(GROUPS))


# --- stimulus: random tuples biased toward the edges ----------------------------------------


def _constants(nfa):
    ints, floats = set(), set()
    for p in nfa.predicates:
        for n in P.nodes(p.expr):
            if isinstance(n, P.Const) and n.kind == "int":
                ints.add(int(n.value))
            elif isinstance(n, P.Const) and n.kind == "ipv4":  # a network's first and last
                ints |= {int(n.value), int(n.value) + (1 << (32 - n.prefix)) - 1}
            elif isinstance(n, P.Const) and n.kind == "float":
                floats.add(float(n.value))
    return ints, floats


def f32_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


FLOAT_SPECIAL_BITS = [
    0x0000_0000,
    0x8000_0000,  # +0, -0
    0x7F80_0000,
    0xFF80_0000,  # ±inf
    0x7FC0_0000,
    0xFFC0_0000,
    0x7F80_0001,
    0xFF80_0001,
    0x7FFF_FFFF,
    0xFFFF_FFFF,  # NaNs
    0x0000_0001,
    0x8000_0001,
    0x0000_0002,
    0x007F_FFFF,
    0x807F_FFFF,  # subnormals
    0x0080_0000,
    0x8080_0000,
    0x7F7F_FFFF,
    0xFF7F_FFFF,  # ±FLT_MIN, ±FLT_MAX
    0x3F80_0000,
    0xBF80_0000,
    0x4B80_0000,
    0x4B80_0001,  # ±1, 2**24, 2**24 + 2
]


def float_pool(constants) -> np.ndarray:
    values = [f32_bits(FLOAT_SPECIAL_BITS)]
    for c in constants:
        x = np.float32(c)
        with np.errstate(over="ignore"):
            up, down = np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))
        values.append(np.array([x, -x, up, down], dtype=np.float32))
    return np.concatenate(values)


def int_pool(ty, constants) -> list[int]:
    lo, hi = ty.range
    pool = {
        lo,
        lo + 1,
        -1,
        0,
        1,
        2,
        hi - 1,
        hi,
        (1 << 63) - 1,
        1 << 63,
        -(1 << 63),
        (1 << 32) - 1,
        1 << 32,
    }
    for c in constants:
        pool |= {c - 1, c, c + 1, -c}
    return sorted(v for v in pool if lo <= v <= hi)


def random_tuples(nfa, n: int, seed: int) -> Tuples:
    rng = np.random.default_rng(seed)
    ints, floats = _constants(nfa)
    fpool = float_pool(floats)
    columns = {}
    for f in nfa.program.schema.fields:
        ty = f.type
        pick = rng.random(n)
        if isinstance(ty, UIntType | IntType):
            dtype = np.uint64 if isinstance(ty, UIntType) else np.int64
            lo, hi = ty.range
            uniform = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
            pool = np.array(int_pool(ty, ints), dtype=dtype)
            columns[f.name] = np.where(pick < 0.6, rng.choice(pool, n), uniform)
        elif isinstance(ty, Float32Type):
            bits = f32_bits(rng.integers(0, 1 << 32, n, dtype=np.uint64))
            small = (rng.standard_normal(n) * 4).astype(np.float32)
            columns[f.name] = np.where(
                pick < 0.6, rng.choice(fpool, n), np.where(pick < 0.8, small, bits)
            ).astype(np.float32)
        elif isinstance(ty, EnumType):
            columns[f.name] = rng.integers(0, len(ty.labels), n, dtype=np.int64)
        else:
            columns[f.name] = pick < 0.5
    return Tuples(columns, n)


# --- the simulation -------------------------------------------------------------------------


def simulate(nfa, tuples: Tuples) -> np.ndarray:
    """Drive every tuple (as its wire-format value) and sample the predicate vector."""
    dut = PredicateDecoder(nfa)
    values = wire.pack(nfa.program.schema, tuples)
    out = []

    async def testbench(ctx):
        for v in values:
            ctx.set(dut.tuple.as_value(), v)
            out.append(ctx.get(dut.predicates))

    sim = Simulator(dut)
    sim.add_testbench(testbench)
    sim.run()
    vectors = np.array(out, dtype=object)
    matrix = np.zeros((tuples.n, len(nfa.predicates)), dtype=bool)
    for i in range(len(nfa.predicates)):
        matrix[:, i] = ((vectors >> i) & 1).astype(bool)
    return matrix


def assert_decodes_like_reference(nfa, tuples: Tuples) -> None:
    expected = predicate_matrix(nfa, tuples)
    got = simulate(nfa, tuples)
    bad = np.argwhere(got != expected)
    if len(bad):
        row, i = (int(x) for x in bad[0])
        fields = {name: col[row] for name, col in tuples.columns.items()}
        pytest.fail(
            f"{len(bad)} wrong bits; first: p{i} ({nfa.predicates[i].text}) is "
            f"{int(got[row, i])}, reference {int(expected[row, i])}, on {fields}"
        )


def test_every_group_compiles(nfa):
    assert [q.name for q in nfa.queries] == list(GROUPS)
    assert len(nfa.predicates) > 120


@pytest.mark.slow
def test_random_tuples(nfa):
    tuples = random_tuples(nfa, 4000, seed=1)
    assert_decodes_like_reference(nfa, tuples)
    # the stimulus reaches both values of (nearly) every bit
    expected = predicate_matrix(nfa, tuples)
    constant = [
        nfa.predicates[i].text
        for i in range(expected.shape[1])
        if expected[:, i].all() or not expected[:, i].any()
    ]
    assert set(constant) <= {
        "b AND FALSE",
        "b OR TRUE",
        "u64 + u64 > 18446744073709551615",
        "i64 + i64 < -9223372036854775808",
        "u8 - u8 = 0",
        "u64 * 0 = 0",
        "ip IN '0.0.0.0/0'",
        "f < -inf",
        "f > inf",
    }, constant


def test_float_pairs_exhaustive():
    """Every pair of special and neighbouring FLOAT32 values, field to field and to
    constants."""
    nfa = nfacep.compile_text(query_file({"float": GROUPS["float"]}))
    _, floats = _constants(nfa)
    pool = np.unique(float_pool(floats).view(np.uint32)).view(np.float32)
    f, g = (a.ravel() for a in np.meshgrid(pool, pool))
    n = len(f)
    tuples = Tuples(
        {
            "u8": np.zeros(n, np.uint64),
            "u64": np.zeros(n, np.uint64),
            "i8": np.zeros(n, np.int64),
            "i64": np.zeros(n, np.int64),
            "u1": np.zeros(n, np.uint64),
            "i1": np.zeros(n, np.int64),
            "u33": np.zeros(n, np.uint64),
            "b": np.zeros(n, bool),
            "c": np.zeros(n, bool),
            "e": np.zeros(n, np.int64),
            "e2": np.zeros(n, np.int64),
            "f": f,
            "g": g,
            "ip": np.zeros(n, np.uint64),
            "ip2": np.zeros(n, np.uint64),
        },
        n,
    )
    assert_decodes_like_reference(nfa, tuples)


def test_float32_key_orders_like_ieee():
    bits = np.array(FLOAT_SPECIAL_BITS + list(range(0, 1 << 32, 0x0123_4567)), dtype=np.uint64)
    values = f32_bits(bits)
    keys = [float32_key(float(v)) for v in values]
    for a, ka in zip(values, keys, strict=True):
        assert (ka is None) == bool(np.isnan(a))
        for b, kb in zip(values, keys, strict=True):
            if ka is not None and kb is not None:
                assert (ka < kb) == bool(a < b) and (ka == kb) == bool(a == b)


# --- structure ------------------------------------------------------------------------------


def test_layout_matches_wire(nfa):
    schema = nfa.program.schema
    layout = tuple_layout(schema)
    assert [(name, f.offset, f.width) for name, f in layout] == wire.field_slices(schema)
    assert layout.size == wire.tuple_width(schema)
    shapes = {name: f.shape for name, f in layout}
    assert shapes["i64"].signed and not shapes["u64"].signed and shapes["e"].width == 2
    # setting the fields one by one through the layout gives the packed wire value
    tuples = random_tuples(nfa, 20, seed=3)
    values = wire.pack(schema, tuples)
    dut = PredicateDecoder(nfa)
    seen = []

    async def testbench(ctx):
        for row in range(tuples.n):
            for f in schema.fields:
                v = tuples.columns[f.name][row]
                if isinstance(f.type, Float32Type):
                    v = v.view(np.uint32)
                ctx.set(dut.tuple[f.name], int(v))
            seen.append(ctx.get(dut.tuple.as_value()))

    sim = Simulator(dut)
    sim.add_testbench(testbench)
    sim.run()
    assert seen == values


def test_signature_and_names(nfa):
    dut = PredicateDecoder(nfa)
    assert Shape.cast(dut.signature.members["predicates"].shape).width == len(nfa.predicates)
    assert dut.signature.members["tuple"].shape == tuple_layout(nfa.program.schema)
    text = rtlil.convert(dut, name="decoder")
    for i in range(len(nfa.predicates)):
        assert re.search(rf"wire width 1 \\p{i}\n", text), f"p{i}"
    assert "wire width 32 \\f_key" in text


def test_combinational_only(nfa):
    dut = PredicateDecoder(nfa)
    fragment = Fragment.get(dut, None)
    assert set(fragment.statements) == {"comb"}
    assert not fragment.subfragments
    text = rtlil.convert(dut)
    assert "clk" not in text and "rst" not in text
    assert not re.search(r"cell \$(a|s)?dff", text)


def test_zero_latency_without_clock(nfa):
    """No clock is added: the outputs follow the inputs within the same instant."""
    tuples = random_tuples(nfa, 50, seed=5)
    assert_decodes_like_reference(nfa, tuples)


def test_unbuildable_predicate_is_named(nfa):
    bad = P.Cmp("=", P.FieldRef("u8", UIntType(8)), P.Const(1, "int"), "complex")
    broken = dataclasses.replace(nfa, predicates=(*nfa.predicates[:2], Predicate(2, bad)))
    with pytest.raises(DecoderError, match=r"p2 for predicate 'u8 = 1'.*'complex'") as err:
        rtlil.convert(PredicateDecoder(broken))
    # (the command line prints a NfacepError, exit 2, not a traceback; it says whose fault)
    assert isinstance(err.value, NfacepError) and "a bug of nfacep's" in err.value.render()


def test_no_predicates():
    nfa = nfacep.compile_text("CREATE STREAM s (a UINT(3), b BOOL); QUERY q PATTERN (A B)")
    dut = PredicateDecoder(nfa)
    assert Shape.cast(dut.signature.members["predicates"].shape).width == 0
    rtlil.convert(dut)


@pytest.mark.parametrize("ty", [BoolType(), EnumType(("x",)), IntType(1), UIntType(64)])
def test_single_field_streams(ty):
    preds = {
        BoolType: ["a", "NOT a"],
        EnumType: ["a = 'x'", "a <> 'x'"],
        IntType: ["a = -1", "a < 0", "a + a < -1", "-a = 1"],
        UIntType: ["a = 0", "a - 1 < 0", "a + a > 18446744073709551615", "-a < 0"],
    }[type(ty)]
    text = f"CREATE STREAM s (a {ty});\n" + "".join(
        f"QUERY q{i} PATTERN (A) DEFINE A AS ({p});\n" for i, p in enumerate(preds)
    )
    nfa = nfacep.compile_text(text)
    tuples = random_tuples(nfa, 200, seed=11)
    assert_decodes_like_reference(nfa, tuples)
