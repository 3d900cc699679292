"""NFA without a shared decoder (Figure 15's comparison design) against the reference."""

import random

import numpy as np
from amaranth.back import rtlil
from amaranth.sim import Simulator
from streams import stream_get, stream_put

import nfacep
from nfacep import wire
from nfacep.hdl.unshared import UnsharedNfaMatcher, unshared
from nfacep.io.tuples import Tuples
from nfacep.reference import matcher as reference

STREAM = "CREATE STREAM s (a UINT(4), c BOOL, e ENUM('x', 'y', 'z'), f FLOAT32);\n"
DEFINE = "DEFINE A AS a < 6 B AS a > 3 AND c C AS e <> 'y' AND f > 0.5"
PATTERNS = ["A B* C", "(A | B)+ C?", "A{2,4} B", "(A B | B A)* C", "A . . B", "A+ B+ C+"]


def test_unshared_nfa_equals_reference():
    text = STREAM + "".join(f"QUERY q{i} PATTERN ({p}) {DEFINE};" for i, p in enumerate(PATTERNS))
    nfa = nfacep.compile_text(text)
    own = unshared(nfa)
    assert len(own.predicates) == sum(s.predicate is not None for s in nfa.states) > 3
    rng = np.random.default_rng(5)
    n = 300
    tuples = Tuples(
        {
            "a": rng.integers(0, 16, n).astype(np.uint64),
            "c": rng.integers(0, 2, n).astype(bool),
            "e": rng.integers(0, 3, n),
            "f": rng.random(n).astype(np.float32),
        },
        n,
    )
    words = wire.pack(nfa.program.schema, tuples)
    dut = UnsharedNfaMatcher(nfa, 16)
    width = wire.tuple_width(nfa.program.schema)
    rng_in, rng_out = random.Random(1), random.Random(2)
    got = []

    async def producer(ctx):
        for seq, word in enumerate(words):
            packed = word | seq << width  # the layout's fields: tuple, then payload
            await stream_put(ctx, dut.i_stream, packed, rng=rng_in, gap=0.3)

    async def consumer(ctx):
        for _ in words:
            rec = await stream_get(ctx, dut.o_stream, rng=rng_out, stall=0.3)
            got.append((rec.payload, rec.matches))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    assert [seq for seq, _ in got] == list(range(n))
    expected = reference.run(nfa, tuples)
    bits = {}
    for seq, q in zip(expected.seqs.tolist(), expected.queries.tolist(), strict=True):
        bits[seq] = bits.get(seq, 0) | 1 << q
    assert {seq: m for seq, m in got if m} == bits
    assert len(bits) > 50


def test_one_predicate_module_per_state():
    nfa = nfacep.compile_text(STREAM + "QUERY q PATTERN (A B A B) " + DEFINE)
    assert len(nfa.predicates) == 2
    text = rtlil.convert(UnsharedNfaMatcher(nfa, 1))
    for name in ("st0_A_pred", "st1_B_pred", "st2_A_pred", "st3_B_pred"):
        assert f"top.{name}" in text
