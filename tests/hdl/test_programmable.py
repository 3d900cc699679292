# amaranth: UnusedElaboratable=no
"""The programmable engine (nfacep.hdl.programmable) configured with query files' images
(nfacep.image) against the reference matcher, in Amaranth's simulator: bundled-style and
random queries, both partition stores, capacity drops and timers, random input gaps and
output stalls; a damaged configuration fails the comparison. The images themselves are
tested in test_image.py."""

import dataclasses
import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from bundled import QUERIES, param_values
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import scenarios, streams
from streams import collect_records, drain_engine, engine_drain, stream_put
from test_image import (
    FLOAT_QUERIES,
    FLOAT_STREAM,
    STREAM,
    fitting_file,
    float_data,
    random_data,
    shape_of,
)

import nfacep
from nfacep import wire
from nfacep.hdl.programmable import ProgrammableEngine
from nfacep.hdl.sdram.model import SDRAMModel
from nfacep.hdl.sdram.sim import sdram_process
from nfacep.hdl.sdram.timing import ENGINE_SDRAM
from nfacep.image import (
    AT_BYTES,
    Capacity,
    EngineShape,
    ImageError,
    image,
    image_file,
    load_body,
    port_words,
)
from nfacep.io import reader, tuples
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference

#: ``--store sdram`` in Amaranth's simulator: the engine's chip (the 5A-75B's) with a short
#: power-up, the cycle-accurate model (nfacep.hdl.sdram.model) on its pins, whose timing
#: assertions fail the run
FAST_SDRAM = dataclasses.replace(
    ENGINE_SDRAM, timing=ENGINE_SDRAM.timing.with_(power_up_ns=300.0, init_refreshes=2)
)


def simulate(shape, loads, data, params, *, seed=0, gap=0.3, stall=0.3, engine=None):
    """Write each load (:func:`nfacep.image.load`: its first 4 bytes the tuple it is in
    force from) through the configuration port before its tuple, with the tuples; return
    the records ``(seq, partition, matches, dropped)`` and the counters. With ``--store
    sdram`` the chip's model (:data:`FAST_SDRAM`) is on the engine's pins."""
    dut = (engine or ProgrammableEngine)(shape, params)
    failures: list[AssertionError] = []
    if "sdram" in dut.signature.members:
        dut.use_sdram(FAST_SDRAM, 0)
        chip = SDRAMModel(FAST_SDRAM.geometry, FAST_SDRAM.cycles())
    drain = engine_drain(params.store, params.partitions, params.ways)
    payloads = wire.pack(shape.schema, data)
    rng_in, rng_out = random.Random(seed), random.Random(seed + 1)
    records, done = [], {}
    pending = sorted(loads, key=lambda b: int.from_bytes(b[:AT_BYTES], "little"))

    async def producer(ctx):
        for i, p in enumerate([*payloads, None]):
            while pending and (p is None or int.from_bytes(pending[0][:AT_BYTES], "little") <= i):
                for word in port_words(pending.pop(0)):
                    await stream_put(ctx, dut.i_config, word, rng=rng_in, gap=gap)
            if p is not None:
                await stream_put(ctx, dut.i_stream, p, rng=rng_in, gap=gap)
        await drain_engine(ctx, dut, drain, done)
        done["refused"] = ctx.get(dut.refused)
        done["image"] = ctx.get(dut.image).to_bytes(8, "little").hex()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(producer)
    sim.add_testbench(collect_records(dut, records, done, rng=rng_out, stall=stall))
    if "sdram" in dut.signature.members:
        sim.add_process(sdram_process(chip, dut.sdram, failures=failures))
    sim.run()
    if failures:
        raise failures[0]
    # no start positions in this engine: (seq, partition, matches, dropped)
    return [r[:4] for r in records], done


def compare(nfa, shape, data, params, *, body=None, seed=0, values=None):
    """The engine configured with ``nfa``'s image (or ``body``) equals the reference."""
    img = image(nfa, shape, values)
    body = img.body() if body is None else body
    records, counters = simulate(shape, [load_body(shape, body)], data, params, seed=seed)
    r = reference.run(nfa, data, params, values=values)
    want: dict[int, int] = {}
    for seq, q in zip(r.seqs.tolist(), r.queries.tolist(), strict=True):
        want[seq] = want.get(seq, 0) | 1 << q
    drops = r.drops.tolist()
    seqs = [rec[0] for rec in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {s: m for s, _, m, d in records if not d} == want
    assert [s for s, _, _, d in records if d] == drops
    assert counters == {
        "tuples": data.n,
        "matched": len(want),
        "drops": len(drops),
        "refused": 0,
        "image": image_file(shape, body)[-8:].hex(),
    }
    if nfa.program.partition_fields:
        col = wire.key_raw(nfa.program.key, data)
        assert all(part == int(col[seq]) for seq, part, _, _ in records)
    return want, drops


# --- the gateware -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("store", "partitions", "ways", "tick_tuples", "timer_bits", "seed"),
    [
        ("pipeline", 4, 4, 0, 4, 0),
        ("pipeline", 3, 4, 2, 2, 1),
        ("table", 8, 2, 0, 4, 2),
        ("table", 4, 2, 3, 2, 3),
        ("table", 16, 4, 1, 3, 4),
        ("sdram", 8, 2, 1, 3, 5),
    ],
)
def test_random_queries_equal_the_reference(store, partitions, ways, tick_tuples, timer_bits, seed):
    """Random files (integer, ENUM and BOOL atoms, field against field, both after-match modes)
    configured into one engine give the reference's matches and drops, with timers."""
    rng = np.random.default_rng(100 + seed)
    nfa = fitting_file(rng)
    params = EngineParams(
        partitions=partitions,
        store=store,
        ways=ways,
        tick_tuples=tick_tuples,
        timer_bits=timer_bits,
    )
    data = random_data(rng, 200, keys=10 if store == "pipeline" else 16)
    want, drops = compare(nfa, shape_of(nfa), data, params, seed=seed)
    assert want
    assert drops or store == "table"


@pytest.mark.parametrize(
    ("name", "partitions", "ways", "tick_tuples", "timer_bits", "seed"),
    [
        (None, 16, 4, 0, 4, 8),
        (None, 8, 2, 3, 2, 9),
        pytest.param("fire", 64, 4, 0, 4, 0, marks=pytest.mark.slow),
    ],
)
def test_a_spread_table_is_registered_and_equals_the_reference(
    monkeypatch, name, partitions, ways, tick_tuples, timer_bits, seed
):
    """A table of more than ``SPREAD_BLOCKS`` blocks (the ULX3S-85F's default: 16,384 entries)
    is the registered one, its writes in flight forwarded and its ports copied beside the
    blocks: random files (and fire's windows) give the reference's matches and drops, with
    timers; with the oldest write in flight not forwarded the random files' do not (fire's
    data has no two tuples of one key close enough to tell). (The threshold set to 0 here,
    so that a table the simulator runs in moments counts as spread.)"""
    from amaranth.hdl import Fragment

    from nfacep.hdl import table, table_forwarding

    monkeypatch.setattr(table, "SPREAD_BLOCKS", 0)
    rng = np.random.default_rng(300 + seed)
    if name is None:
        nfa = fitting_file(rng)
        shape = shape_of(nfa)
        data = random_data(rng, 200, keys=16)
        values = None
    else:
        nfa = nfacep.compile_file(str(QUERIES / f"{name}.sql"))
        shape = EngineShape(nfa.program.schema, nfa.program.partition_fields)
        data = reader.read(str(QUERIES / f"{name}.csv"), nfa.program.schema)
        values = param_values(name, nfa)
    params = EngineParams(
        partitions=partitions,
        store="table",
        ways=ways,
        tick_tuples=tick_tuples,
        timer_bits=timer_bits,
    )
    engine = ProgrammableEngine(shape, params)
    Fragment.get(engine, None)
    assert engine.store.registered and engine.store.latency > 3
    want, _ = compare(nfa, shape, data, params, seed=seed, values=values)
    assert want
    if name is None:
        monkeypatch.setattr(table_forwarding, "BREAK_FORWARDING", "oldest write")
        with pytest.raises(AssertionError):
            compare(nfa, shape, data, params, seed=seed, values=values)


def test_the_default_tables_of_the_two_ecp5_boards():
    """Marathon's default capacity: the Colorlight's default table (4,096 entries, 44 blocks)
    is the simple one, the ULX3S-85F's (16,384 entries) spreads over the device and is the
    registered one."""
    from amaranth.hdl import Fragment

    nfa = nfacep.compile_file(str(QUERIES / "marathon.sql"))
    shape = EngineShape(nfa.program.schema, nfa.program.partition_fields)
    for partitions, registered in ((4096, False), (16384, True)):
        engine = ProgrammableEngine(shape, EngineParams(partitions=partitions, store="table"))
        Fragment.get(engine, None)
        assert (engine.store.spread, engine.store.registered) == (registered, registered)


def test_unpartitioned_equals_the_reference():
    rng = np.random.default_rng(7)
    nfa = fitting_file(rng, partitioned=False)
    want, drops = compare(nfa, shape_of(nfa), random_data(rng, 200, 1), EngineParams(), seed=7)
    assert want and not drops


def test_one_engine_takes_several_images():
    """One engine shape, two files: each image configures it into its own file's matches; the
    second loaded after the first replaces it whole."""
    rng = np.random.default_rng(11)
    first = fitting_file(rng)
    shape = shape_of(first)
    data = random_data(rng, 120, keys=4)
    params = EngineParams(partitions=4)
    second = fitting_file(rng)
    for nfa in (first, second):
        compare(nfa, shape, data, params)
    loads = [load_body(shape, image(f, shape).body()) for f in (first, second)]
    records, _ = simulate(shape, loads, data, params)
    assert records == simulate(shape, loads[1:], data, params)[0]
    assert records != simulate(shape, loads[:1], data, params)[0]


def test_a_damaged_configuration_fails_the_comparison():
    """A flipped bit in a state's truth table (the table entry its atoms select first), or a
    wrong activation bit, makes the engine differ from the reference: the comparison can
    fail."""
    from nfacep.image import config_fields

    text = STREAM + "QUERY q PARTITION k PATTERN (A B+ C) DEFINE A AS a < 0 B AS b > 10 C AS c;"
    nfa = nfacep.compile_text(text)
    shape = shape_of(nfa, states=4, atoms=4, queries=1)
    img = image(nfa, shape)
    offsets, at = {}, 0
    for name, width in config_fields(shape):
        offsets[name] = at
        at += width
    data = random_data(np.random.default_rng(3), 150, keys=3)
    params = EngineParams(partitions=4)
    compare(nfa, shape, data, params)
    for bit in (offsets["state1.table"], offsets["state2.activation"] + 2):
        body = bytearray(img.body())
        body[bit // 8] ^= 1 << bit % 8
        with pytest.raises(AssertionError):
            compare(nfa, shape, data, params, body=bytes(body))


@pytest.mark.parametrize(
    ("name", "store"),
    [
        ("marathon", "pipeline"),
        ("vshape", "table"),
        ("supplychain", "table"),
        pytest.param("fire", "table", marks=pytest.mark.slow),
        pytest.param("bruteforce", "pipeline", marks=pytest.mark.slow),
    ],
)
def test_bundled_queries_that_fit(name, store):
    """Every bundled query (supplychain's parameter a constant in its image; fire's and
    bruteforce's windows in the default's timed slots) on its data."""
    nfa = nfacep.compile_file(str(QUERIES / f"{name}.sql"))
    data = reader.read(str(QUERIES / f"{name}.csv"), nfa.program.schema)
    params = EngineParams(partitions=64, store=store)
    shape = EngineShape(nfa.program.schema, nfa.program.partition_fields)  # the default capacity
    want, _ = compare(nfa, shape, data, params, values=param_values(name, nfa))
    assert want


@settings(max_examples=25, deadline=None)
@given(
    sc=scenarios(),
    rows=streams(max_len=40, keys=6),
    store=st.sampled_from(["pipeline", "table"]),
    partitions=st.sampled_from([1, 2, 4]),
    tick_tuples=st.integers(0, 4),
    timer_bits=st.integers(1, 3),
    seed=st.integers(0, 1000),
)
def test_random_scenarios(sc, rows, store, partitions, tick_tuples, timer_bits, seed):
    """Random query files (every pattern operator, both forms, both after-match modes, with
    and without PARTITION) that fit a 24-state engine, on random streams, equal the
    reference exactly."""
    nfa = nfacep.compile_text(sc.text)
    program = nfa.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity(24, 6, 3))
    try:
        image(nfa, shape)
    except ImageError:
        assume(False)
    data = tuples.Tuples(
        {
            "k": np.array([r["k"] for r in rows], dtype=np.uint64),
            **{p: np.array([bool(r[p]) for r in rows], dtype=bool) for p in ("p0", "p1", "p2")},
        },
        len(rows),
    )
    params = EngineParams(
        partitions=partitions,
        store=store,
        ways=min(2, partitions),
        tick_tuples=tick_tuples,
        timer_bits=timer_bits,
    )
    compare(nfa, shape, data, params, seed=seed)


@pytest.mark.parametrize("store", ["pipeline", "table"])
def test_float32_and_ipv4_equal_the_reference(store):
    """FLOAT32 (NaNs of both signs, infinities, -0) and IPV4 (addresses, networks, another
    field) atoms in the gateware."""
    nfa = nfacep.compile_text(FLOAT_STREAM + FLOAT_QUERIES)
    data = float_data(np.random.default_rng(9), 250, keys=8)
    want, _ = compare(nfa, shape_of(nfa, atoms=16), data, EngineParams(partitions=8, store=store))
    assert len(set(want.values())) == 3  # each query alone and both


def test_verilog_with_the_sdram_store_has_the_chips_pins_and_sidecar(tmp_path):
    """With ``--store sdram`` the programmable engine's Verilog has the chip's pins and its
    sidecar the chip, its geometry and the controller's clock (what ``sim`` simulates beside
    it), for the fixed engine's chip at the simulations' 100 MHz or at a given clock
    (``sdram_mhz``, what ``benchmarks/sdram_throughput.py --mhz`` builds); the power-up and
    the words cleared follow."""
    from bundled import QUERIES

    from nfacep.hdl.programmable import write_verilog

    nfa = nfacep.compile_file(QUERIES / "marathon.sql")
    params = EngineParams(engine="programmable", store="sdram", partitions=64)
    default = write_verilog(nfa, str(tmp_path / "a.v"), params)
    slow = write_verilog(nfa, str(tmp_path / "b.v"), params, sdram_mhz=25)
    assert default["ports"]["sdram__dq_o"] == {"dir": "out", "width": 32}
    assert default["sdram"]["chip"] == slow["sdram"]["chip"] == ENGINE_SDRAM.timing.name
    assert (default["sdram"]["clk_freq"], slow["sdram"]["clk_freq"]) == (100e6, 25e6)
    assert default["sdram"]["power_up_cycles"] == 4 * slow["sdram"]["power_up_cycles"]
    assert default["sdram"]["clearing_words"] == slow["sdram"]["clearing_words"] > 64


def test_verilog_writes_the_engine_its_sidecar_and_the_image(tmp_path, capsys):
    """``nfacep verilog --engine programmable``: the Verilog (which Icarus compiles), its
    sidecar with the configuration port and capacities, and the query's image, which the
    engine of that shape takes; a file that does not fit writes nothing."""
    import json
    import shutil
    import subprocess

    from bundled import QUERIES

    from nfacep.cli import main
    from nfacep.image import Capacity, read_body

    out = tmp_path / "e.v"
    marathon = str(QUERIES / "marathon.sql")
    argv = ["verilog", marathon, "-o", str(out), "--engine", "programmable"]
    sizes = ["--states", "12", "--atoms", "8", "--store", "table", "--partitions", "16"]
    assert main([*argv, *sizes]) == 0
    assert "and the query's image .image.hex" in capsys.readouterr().out
    sidecar = json.loads((tmp_path / "e.json").read_text())
    assert sidecar["ports"]["i_config__payload"] == {"dir": "in", "width": 9}  # data, last
    assert sidecar["capacity"] == {
        "states": 12,
        "atoms": 8,
        "queries": 4,
        "atoms_per_state": 4,
        "timed": 6,
        "window_bits": 16,
    }
    nfa = nfacep.compile_file(marathon)
    shape = EngineShape(nfa.program.schema, ("runner",), Capacity(12, 8, 4))
    blob = bytes.fromhex((tmp_path / "e.image.hex").read_text())
    assert read_body(shape, blob) == image(nfa, shape).body()
    assert sidecar["image"]["fingerprint"] == blob[-8:].hex()
    assert sidecar["configuration"]["body_bytes"] == len(image(nfa, shape).body())
    if shutil.which("iverilog"):
        subprocess.run(["iverilog", "-g2012", "-o", str(tmp_path / "e.vvp"), str(out)], check=True)
    fire = str(QUERIES / "fire.sql")
    argv = ["verilog", fire, "-o", str(tmp_path / "f.v"), "--engine", "programmable"]
    assert main([*argv, "--states", "8"]) == 2
    assert "states: the queries need 10, the engine has 8" in capsys.readouterr().err
    assert not list(tmp_path.glob("f.*"))


# --- switching images at a tuple ----------------------------------------------------------------


class _NoEpochs(ProgrammableEngine):
    """A broken engine: its entries' epochs are never compared, so a switch leaves the old
    query's states in force."""

    def _live(self, stored):
        return stored[: self.shape.capacity.states]


def switched(first, second, shape, data, params, at, *, seed=0, engine=None, second_load=None):
    """Load ``first`` in force from tuple 0 and ``second`` (or ``second_load``) from tuple
    ``at``; the records equal the reference run of the switch (reference.run_switched);
    returns the records and the counters."""
    loads = [load_body(shape, image(first, shape).body(), 0)]
    loads.append(second_load or load_body(shape, image(second, shape).body(), at))
    records, counters = simulate(shape, loads, data, params, seed=seed, engine=engine)
    before, after = reference.run_switched(first, second, data, at, params)
    want = before.records(first, data) + after.records(second, data)
    assert records == [(r.seq, r.partition, r.matches, r.dropped) for r in want]
    assert counters["tuples"] == data.n and counters["refused"] == 0
    if second_load is None:  # the second image is in force
        assert counters["image"] == image(second, shape).fingerprint
    return records, counters


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "store", "partitions", "tick_tuples"),
    [(0, "pipeline", 4, 0), (2, "pipeline", 3, 2), (3, "table", 4, 3), (3, "sdram", 4, 3)],
)
def test_switch_at_a_tuple_equals_the_reference_run(seed, store, partitions, tick_tuples):
    """Random pairs of files and switch points, both stores, drops and timers: tuples before
    the switch are judged by the first file, the rest by the second from cleared states,
    none lost; with the epochs not compared (states kept across the switch) the same runs
    differ."""
    rng = np.random.default_rng(200 + seed)
    first = fitting_file(rng)
    second = fitting_file(rng)
    shape = shape_of(first)
    data = random_data(rng, 120, keys=6)
    params = EngineParams(
        partitions=partitions, store=store, ways=2, tick_tuples=tick_tuples, timer_bits=2
    )
    at = int(rng.integers(20, 100))
    records, _ = switched(first, second, shape, data, params, at, seed=seed)
    assert any(m for s, _, m, _ in records if s < at) and any(
        m for s, _, m, _ in records if s >= at
    )
    # the same file on both sides: a switch only clears the states, which a broken epoch
    # compare does not
    switched(first, first, shape, data, params, at, seed=seed)
    with pytest.raises(AssertionError):
        for point in (at, 30, 60, 90, 110):
            switched(first, first, shape, data, params, point, seed=seed, engine=_NoEpochs)


@pytest.mark.slow
def test_a_damaged_truncated_or_foreign_load_is_refused():
    """A load whose CRC does not match, one cut short, and one made for another engine are
    each counted in ``refused``; the query in force keeps running as if none had come."""
    rng = np.random.default_rng(31)
    first = fitting_file(rng)
    shape = shape_of(first)
    data = random_data(rng, 60, keys=4)
    params = EngineParams(partitions=4)
    good = load_body(shape, image(first, shape).body(), 30)
    damaged = bytearray(good)
    damaged[20] ^= 4
    other = shape_of(first, states=20)
    foreign = load_body(other, image(first, other).body(), 30)
    want, _ = compare(first, shape, data, params)
    for bad in (bytes(damaged), good[:-3], foreign):
        loads = [load_body(shape, image(first, shape).body()), bad]
        records, counters = simulate(shape, loads, data, params)
        assert counters["refused"] == 1
        assert counters["image"] == image(first, shape).fingerprint  # still the first
        assert {s: m for s, _, m, d in records if not d} == want


@pytest.mark.parametrize("seed", range(6))
def test_the_software_engine_equals_the_reference(seed):
    """The software boards' programmable engine (:class:`nfacep.links.model.ImageEngine`),
    running an image decoded from its load, gives the reference's records: both stores,
    timers, drops, with and without PARTITION; a damaged load is refused."""
    import dataclasses

    from nfacep.image import load
    from nfacep.links.model import ImageEngine

    rng = np.random.default_rng(300 + seed)
    nfa = fitting_file(rng, partitioned=seed % 3 != 0)
    shape = shape_of(nfa)
    data = random_data(rng, 150, keys=5)
    c = shape.capacity
    params = EngineParams(
        partitions=4,
        store="table" if seed % 2 else "pipeline",
        ways=2,
        tick_tuples=seed % 3,
        timer_bits=2,
        engine="programmable",
        states=c.states,
        atoms=c.atoms,
        queries=c.queries,
    )
    engine = ImageEngine(nfa, params)
    damaged = bytearray(load(image(nfa, shape)))
    damaged[-1] ^= 1
    assert not engine.load(bytes(damaged)) and engine.refused == 1
    assert engine.load(load(image(nfa, shape)))
    got = engine.run(data)
    fixed = dataclasses.replace(params, engine="fixed")
    want = reference.run(nfa, data, fixed).records(nfa, data)
    assert [r[:4] for r in got] == [r[:4] for r in want]
    assert any(r.matches for r in got)
